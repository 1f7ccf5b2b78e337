//! Per-job git cost on generated repositories with history (900 and 10,000 files):
//! `Git2Operations` with its worktree pool (the default), without it (every file written), and
//! the same steps done with the `git` CLI.
//!
//! One job: create a detached worktree, write one file, commit, merge the commit into a branch
//! in memory, remove the worktree. The CLI does it as `worktree add --detach`, `add -A`,
//! `commit`, `rev-parse`, `merge-tree --write-tree`, `commit-tree`, `update-ref`,
//! `worktree remove`.
//!
//! First, per repository, a table of medians per step from jobs run alternately (pooled,
//! fresh, CLI, pooled, ...) so all see the same machine load, then (900 files only)
//! criterion's `per_job/git2`, `per_job/git2_no_pool` and `per_job/git_cli`.
//! Run: `cargo bench -p orchestrator-git --bench git_ops` (set `GIT_OPS_BENCH_DIR=/dev/shm` to
//! leave the disk out and compare CPU cost only; `GIT_OPS_BENCH_LARGE=0` skips the
//! 10,000-file repository).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use orchestrator_core::git::{GitOperations, MergeStyle};
use orchestrator_git::Git2Operations;

const FILES: usize = 900;
const LARGE_FILES: usize = 10_000;
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

/// A repository of `files` files, about 15 per folder, with [`HISTORY`] commits, packed, as
/// `git fast-import` leaves it.
fn generate_repo(dir: &Path, files: usize) -> PathBuf {
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
            (0..files).collect()
        } else {
            (0..25).map(|_| (next() % files as u64) as usize).collect()
        };
        for f in touched {
            let content: String = (0..40)
                .map(|l| format!("module {f} line {l} rev {c} {}\n", next() % 1000))
                .collect();
            write!(
                stream,
                "M 100644 inline src/mod{:03}/file{f:05}.rs\ndata {}\n{content}\n",
                f % files.div_ceil(15),
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
    /// The default operations: with the worktree pool.
    pooled: Git2Operations,
    /// Without the pool: every worktree is a full checkout.
    fresh: Git2Operations,
    repo: PathBuf,
    base: String,
    jobs: AtomicUsize,
}

impl Bench {
    fn job_path(&self, kind: &str) -> PathBuf {
        let n = self.jobs.fetch_add(1, Ordering::Relaxed);
        self.repo.join(".worktrees").join(format!("{kind}-{n}"))
    }

    fn git2_job(&self, pooled: bool) -> Steps {
        let wt = self.job_path("git2");
        let repo = &self.repo;
        let ops = if pooled { &self.pooled } else { &self.fresh };
        self.rt.block_on(async {
            let mut steps = Steps::default();
            let t = Instant::now();
            ops.create_worktree(repo, &wt, &self.base)
                .await
                .expect("create");
            steps.create = t.elapsed();
            let t = Instant::now();
            std::fs::write(wt.join("job-output.txt"), "done\n").expect("write");
            let commit = ops
                .commit_all(&wt, "[Plan] job")
                .await
                .expect("commit")
                .expect("change");
            steps.commit = t.elapsed();
            let t = Instant::now();
            ops.merge_into_branch(
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
            ops.remove_worktree(repo, &wt).await.expect("remove");
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

fn setup(files: usize) -> (tempfile::TempDir, Bench) {
    // GIT_OPS_BENCH_DIR picks the file system (e.g. /dev/shm to see CPU cost without the disk).
    let dir = match std::env::var_os("GIT_OPS_BENCH_DIR") {
        Some(parent) => tempfile::tempdir_in(parent),
        None => tempfile::tempdir(),
    }
    .expect("tempdir");
    let repo = generate_repo(dir.path(), files);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["branch", "bench/git2", &base]);
    git(&repo, &["branch", "bench/cli", &base]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let bench = Bench {
        rt,
        pooled: Git2Operations::new(),
        fresh: Git2Operations::builder()
            .worktree_pool(0, 0)
            .build()
            .expect("operations"),
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

/// Runs jobs alternately (pooled, fresh, CLI, pooled, ...) so all see the same machine load,
/// and prints the median of every step side by side.
fn interleaved_summary(bench: &Bench, jobs: usize) {
    let (mut pooled, mut fresh, mut cli) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..jobs {
        pooled.push(bench.git2_job(true));
        fresh.push(bench.git2_job(false));
        cli.push(bench.cli_job());
    }
    type Pick = fn(&Steps) -> Duration;
    let rows: [(&str, Pick); 6] = [
        ("create worktree (checkout)", |s| s.create),
        ("write + commit", |s| s.commit),
        ("merge into branch", |s| s.merge),
        ("remove worktree", |s| s.remove),
        ("create + remove", |s| s.create + s.remove),
        ("whole job", Steps::total),
    ];
    eprintln!(
        "\nmedians of {jobs} interleaved jobs each  git2 pooled  git2 no pool     git CLI  \
         pooled/CLI  no pool/CLI"
    );
    for (name, pick) in rows {
        let m = |v: &[Steps]| median(v.iter().map(pick).collect());
        let (a, b, c) = (m(&pooled), m(&fresh), m(&cli));
        let ratio = |x: Duration| x.as_secs_f64() / c.as_secs_f64().max(f64::EPSILON);
        eprintln!(
            "{name:<34}{}{}{}  {:10.3}  {:11.3}",
            ms(a),
            ms(b),
            ms(c),
            ratio(a),
            ratio(b)
        );
    }
    eprintln!();
}

/// Asserts every worktree the jobs made is gone (pooled ones are not registered).
fn assert_all_removed(bench: &Bench) {
    assert_eq!(
        git(&bench.repo, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1,
        "every worktree removed"
    );
}

fn summary_of(files: usize, jobs: usize) -> (tempfile::TempDir, Bench) {
    let (dir, bench) = setup(files);
    let count = git(&bench.repo, &["ls-files"]).lines().count();
    eprintln!(
        "repository: {count} files, {HISTORY} commits, in {}",
        bench.repo.display()
    );
    // Warm up caches for all three (and give the pool its first worktree).
    bench.git2_job(true);
    bench.git2_job(false);
    bench.cli_job();
    interleaved_summary(&bench, jobs);
    assert_all_removed(&bench);
    (dir, bench)
}

fn per_job(c: &mut Criterion) {
    if std::env::var("GIT_OPS_BENCH_LARGE").as_deref() != Ok("0") {
        drop(summary_of(LARGE_FILES, 7));
    }
    let (_dir, bench) = summary_of(FILES, 25);
    let mut group = c.benchmark_group("per_job");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("git2", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| bench.git2_job(true).total()).sum())
    });
    group.bench_function("git2_no_pool", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| bench.git2_job(false).total()).sum())
    });
    group.bench_function("git_cli", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| bench.cli_job().total()).sum())
    });
    group.finish();
    assert_all_removed(&bench);
}

criterion_group!(benches, per_job);
criterion_main!(benches);
