//! Per-job git cost on a ~900-file repository with history: `Git2Operations` against the same
//! steps done with the `git` CLI.
//!
//! One job: create a detached worktree, write one file, commit, merge the commit into a branch
//! in memory, remove the worktree. The CLI does it as `worktree add --detach`, `add -A`,
//! `commit`, `rev-parse`, `merge-tree --write-tree`, `commit-tree`, `update-ref`,
//! `worktree remove`.
//!
//! First a table of medians per step from jobs run alternately (git2, CLI, git2, ...) so both
//! see the same machine load, then criterion's `per_job/git2` and `per_job/git_cli`.
//! Run: `cargo bench -p orchestrator-git --bench git_ops` (set `GIT_OPS_BENCH_DIR=/dev/shm` to
//! leave the disk out and compare CPU cost only).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use orchestrator_core::git::{GitOperations, MergeStyle};
use orchestrator_git::Git2Operations;

const FILES: usize = 900;
const HISTORY: usize = 40;

fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com");
    cmd
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// A repository of [`FILES`] files in 60 folders with [`HISTORY`] commits, packed, as
/// `git fast-import` leaves it.
fn generate_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "Bench"]);
    git(&repo, &["config", "user.email", "bench@example.com"]);
    let mut stream = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for c in 0..HISTORY {
        let msg = format!("commit {c}");
        write!(
            stream,
            "commit refs/heads/main\ncommitter Bench <bench@example.com> {} +0000\ndata {}\n{msg}\n",
            1_700_000_000 + c,
            msg.len()
        )
        .expect("write");
        let touched: Vec<usize> = if c == 0 {
            (0..FILES).collect()
        } else {
            (0..25).map(|_| (next() % FILES as u64) as usize).collect()
        };
        for f in touched {
            let content: String = (0..40)
                .map(|l| format!("module {f} line {l} rev {c} {}\n", next() % 1000))
                .collect();
            write!(
                stream,
                "M 100644 inline src/mod{:02}/file{f:03}.rs\ndata {}\n{content}\n",
                f % 60,
                content.len()
            )
            .expect("write");
        }
    }
    let mut child = git_cmd(&repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("fast-import");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&stream)
        .expect("feed");
    assert!(child.wait().expect("wait").success());
    git(&repo, &["reset", "-q", "--hard", "main"]);
    std::fs::write(repo.join(".git/info/exclude"), "/.worktrees/\n").expect("exclude");
    std::fs::canonicalize(&repo).expect("canonical")
}

/// How long each step of one job took.
#[derive(Default, Clone, Copy)]
struct Steps {
    create: Duration,
    commit: Duration,
    merge: Duration,
    remove: Duration,
}

impl Steps {
    fn total(&self) -> Duration {
        self.create + self.commit + self.merge + self.remove
    }
}

struct Bench {
    rt: tokio::runtime::Runtime,
    ops: Git2Operations,
    repo: PathBuf,
    base: String,
    jobs: AtomicUsize,
}

impl Bench {
    fn job_path(&self, kind: &str) -> PathBuf {
        let n = self.jobs.fetch_add(1, Ordering::Relaxed);
        self.repo.join(".worktrees").join(format!("{kind}-{n}"))
    }

    fn git2_job(&self) -> Steps {
        let wt = self.job_path("git2");
        let repo = &self.repo;
        self.rt.block_on(async {
            let mut steps = Steps::default();
            let t = Instant::now();
            self.ops
                .create_worktree(repo, &wt, &self.base)
                .await
                .expect("create");
            steps.create = t.elapsed();
            let t = Instant::now();
            std::fs::write(wt.join("job-output.txt"), "done\n").expect("write");
            let commit = self
                .ops
                .commit_all(&wt, "[Plan] job")
                .await
                .expect("commit")
                .expect("change");
            steps.commit = t.elapsed();
            let t = Instant::now();
            self.ops
                .merge_into_branch(
                    repo,
                    "bench/git2",
                    &commit,
                    "merge",
                    MergeStyle::MergeCommit,
                )
                .await
                .expect("merge");
            steps.merge = t.elapsed();
            let t = Instant::now();
            self.ops.remove_worktree(repo, &wt).await.expect("remove");
            steps.remove = t.elapsed();
            steps
        })
    }

    fn cli_job(&self) -> Steps {
        let wt = self.job_path("cli");
        let wt_str = wt.to_str().expect("utf8");
        let repo = &self.repo;
        let mut steps = Steps::default();
        let t = Instant::now();
        git(
            repo,
            &["worktree", "add", "-q", "--detach", wt_str, &self.base],
        );
        steps.create = t.elapsed();
        let t = Instant::now();
        std::fs::write(wt.join("job-output.txt"), "done\n").expect("write");
        git(&wt, &["add", "-A"]);
        git(&wt, &["commit", "-q", "-m", "[Plan] job"]);
        let commit = git(&wt, &["rev-parse", "HEAD"]);
        steps.commit = t.elapsed();
        let t = Instant::now();
        let tip = git(repo, &["rev-parse", "refs/heads/bench/cli"]);
        let tree = git(repo, &["merge-tree", "--write-tree", &tip, &commit]);
        let merged = git(
            repo,
            &[
                "commit-tree",
                &tree,
                "-p",
                &tip,
                "-p",
                &commit,
                "-m",
                "merge",
            ],
        );
        git(repo, &["update-ref", "refs/heads/bench/cli", &merged, &tip]);
        steps.merge = t.elapsed();
        let t = Instant::now();
        git(repo, &["worktree", "remove", wt_str]);
        steps.remove = t.elapsed();
        steps
    }
}

fn setup() -> (tempfile::TempDir, Bench) {
    // GIT_OPS_BENCH_DIR picks the file system (e.g. /dev/shm to see CPU cost without the disk).
    let dir = match std::env::var_os("GIT_OPS_BENCH_DIR") {
        Some(parent) => tempfile::tempdir_in(parent),
        None => tempfile::tempdir(),
    }
    .expect("tempdir");
    let repo = generate_repo(dir.path());
    let base = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["branch", "bench/git2", &base]);
    git(&repo, &["branch", "bench/cli", &base]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let bench = Bench {
        rt,
        ops: Git2Operations::new(),
        repo,
        base,
        jobs: AtomicUsize::new(0),
    };
    (dir, bench)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:8.1} ms", d.as_secs_f64() * 1000.0)
}

/// Runs jobs alternately (git2, CLI, git2, ...) so both see the same machine load, and prints
/// the median of every step side by side.
fn interleaved_summary(bench: &Bench, jobs: usize) {
    let (mut ours, mut cli) = (Vec::new(), Vec::new());
    for _ in 0..jobs {
        ours.push(bench.git2_job());
        cli.push(bench.cli_job());
    }
    type Pick = fn(&Steps) -> Duration;
    let rows: [(&str, Pick); 5] = [
        ("create worktree (checkout)", |s| s.create),
        ("write + commit", |s| s.commit),
        ("merge into branch", |s| s.merge),
        ("remove worktree", |s| s.remove),
        ("whole job", Steps::total),
    ];
    eprintln!("\nmedians of {jobs} interleaved jobs each      git2        git CLI   ratio");
    for (name, pick) in rows {
        let (a, b) = (
            median(ours.iter().map(pick).collect()),
            median(cli.iter().map(pick).collect()),
        );
        let ratio = a.as_secs_f64() / b.as_secs_f64().max(f64::EPSILON);
        eprintln!("{name:<38}{}{}   {ratio:.2}", ms(a), ms(b));
    }
    eprintln!();
}

fn per_job(c: &mut Criterion) {
    let (_dir, bench) = setup();
    let files = git(&bench.repo, &["ls-files"]).lines().count();
    eprintln!(
        "repository: {files} files, {HISTORY} commits, in {}",
        bench.repo.display()
    );
    // Warm up caches for both, then the side-by-side figures.
    bench.git2_job();
    bench.cli_job();
    interleaved_summary(&bench, 25);

    let mut group = c.benchmark_group("per_job");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("git2", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| bench.git2_job().total()).sum())
    });
    group.bench_function("git_cli", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| bench.cli_job().total()).sum())
    });
    group.finish();
    assert_eq!(
        git(&bench.repo, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1,
        "every worktree removed"
    );
}

criterion_group!(benches, per_job);
criterion_main!(benches);
