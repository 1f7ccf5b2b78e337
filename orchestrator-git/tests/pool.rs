//! The worktree pool: every worktree made from a pooled one is compared with a fresh
//! `git worktree add --detach` of the same commit (paths, content, modes, symbolic links, no
//! extra files or folders), over random sequences of jobs; and its bounds, concurrency, crash
//! leftovers and damaged entries.
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use orchestrator_core::git::GitOperations;
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::{self, cli_linked_worktrees, git, init_repo};
use proptest::prelude::*;
use tokio::runtime::Runtime;

/// What a folder holds, by relative path (the top-level `.git` left out).
#[derive(Debug, PartialEq, Eq)]
enum Node {
    File { content: Vec<u8>, executable: bool },
    Link(PathBuf),
    Dir,
}

fn snapshot(root: &Path) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .expect("inside")
                .to_string_lossy()
                .into_owned();
            if rel == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).expect("lstat");
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&path).expect("readlink"))
            } else if meta.is_dir() {
                pending.push(path.clone());
                Node::Dir
            } else {
                Node::File {
                    content: std::fs::read(&path).expect("read"),
                    executable: meta.permissions().mode() & 0o111 != 0,
                }
            };
            out.insert(rel, node);
        }
    }
    out
}

/// A repository for the pool tests: a few files in folders, an executable, a symbolic link and
/// a `.gitignore`.
struct Fixture {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    scratch: PathBuf,
    fresh: std::cell::Cell<usize>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("repo");
        init_repo(
            &repo,
            &[
                (".gitignore", "*.log\nbuild/\n"),
                ("README.md", "# pool\n"),
                ("src/lib.rs", "pub fn a() {}\n"),
                ("src/deep/mod.rs", "mod x;\n"),
                ("docs/guide.md", "guide\n"),
                ("run.sh", "#!/bin/sh\necho hi\n"),
            ],
        );
        let repo = std::fs::canonicalize(&repo).expect("canonical");
        std::fs::set_permissions(repo.join("run.sh"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        std::os::unix::fs::symlink("src/lib.rs", repo.join("lib-link")).expect("symlink");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "modes and links"]);
        let scratch = dir.path().join("scratch");
        std::fs::create_dir_all(&scratch).expect("scratch");
        Fixture {
            _dir: dir,
            repo,
            scratch,
            fresh: std::cell::Cell::new(0),
        }
    }

    fn head(&self) -> String {
        git(&self.repo, &["rev-parse", "HEAD"])
    }

    fn wt(&self, name: &str) -> PathBuf {
        self.repo.join(".worktrees").join(name)
    }

    fn pool(&self) -> PathBuf {
        self.repo.join(".git/orchestrator/worktree-pool")
    }

    /// Creates the worktree `name` at `commit`.
    fn create(&self, rt: &Runtime, ops: &Git2Operations, name: &str, commit: &str) -> PathBuf {
        let wt = self.wt(name);
        rt.block_on(ops.create_worktree(&self.repo, &wt, commit))
            .expect("create");
        wt
    }

    /// Creates the worktree `name` at `commit` from the pool's only entry, and checks it.
    fn create_from_pool(&self, rt: &Runtime, ops: &Git2Operations, name: &str, commit: &str) {
        let wt = self.create(rt, ops, name, commit);
        assert!(self.pooled().is_empty(), "the entry was taken");
        self.assert_fresh(&wt, commit, &format!("{name} reused"));
        fixtures::assert_git_healthy(&self.repo);
    }

    /// The ready entries of the pool.
    fn pooled(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.pool())
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Asserts that the worktree at `wt` is exactly what `git worktree add --detach` makes of
    /// `commit`, and registered as such.
    fn assert_fresh(&self, wt: &Path, commit: &str, label: &str) {
        let n = self.fresh.get();
        self.fresh.set(n + 1);
        let fresh = self.scratch.join(format!("fresh-{n}"));
        let fresh_arg = fresh.to_string_lossy().into_owned();
        git(
            &self.repo,
            &["worktree", "add", "-q", "--detach", &fresh_arg, commit],
        );
        assert_eq!(snapshot(wt), snapshot(&fresh), "{label}: files differ");
        git(&self.repo, &["worktree", "remove", "--force", &fresh_arg]);
        // Before `git status`, which may rewrite the index: its stat data matches every file
        // (`diff-files` does not refresh, so a stale entry would be listed), and it carries a
        // tree cache (the `TREE` extension; no path here holds those letters), so the job's
        // commit hashes only the folders it changed.
        assert_eq!(
            git(wt, &["diff-files", "--name-only"]),
            "",
            "{label}: stat data"
        );
        let index = std::fs::read(git(wt, &["rev-parse", "--git-path", "index"])).expect("index");
        assert!(
            index.windows(4).any(|w| w == b"TREE"),
            "{label}: no tree cache in the index"
        );
        // And the cache is the commit's: `write-tree` takes every folder it marks valid from
        // it, so a stale folder would give another tree.
        assert_eq!(
            git(wt, &["write-tree"]),
            git(wt, &["rev-parse", "HEAD^{tree}"]),
            "{label}: tree cache"
        );
        let status = git(
            wt,
            &[
                "status",
                "--porcelain",
                "--ignored",
                "--untracked-files=all",
            ],
        );
        assert_eq!(status, "", "{label}: git status");
        assert_eq!(git(wt, &["rev-parse", "HEAD"]), commit, "{label}: HEAD");
        let dot_git = std::fs::read_to_string(wt.join(".git")).expect(".git");
        let admin = dot_git
            .strip_prefix("gitdir: ")
            .and_then(|s| s.strip_suffix('\n'))
            .map(PathBuf::from)
            .expect("a gitdir line");
        let name = wt.file_name().expect("name").to_string_lossy().into_owned();
        assert_eq!(
            admin.file_name().map(|n| n.to_string_lossy().into_owned()),
            Some(name)
        );
        assert_eq!(
            admin.parent(),
            Some(self.repo.join(".git/worktrees").as_path())
        );
        assert_eq!(
            std::fs::read_to_string(admin.join("gitdir")).expect("gitdir"),
            format!("{}\n", wt.join(".git").display())
        );
        assert_eq!(
            std::fs::read_to_string(admin.join("HEAD")).expect("HEAD"),
            format!("{commit}\n")
        );
        assert!(!admin.join("locked").exists(), "{label}: still locked");
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A runtime of `threads` workers, for operations that must overlap.
fn threaded_runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime")
}

/// What a job does to its worktree.
#[derive(Debug, Clone)]
enum Change {
    Edit(usize, u8),
    Delete(usize),
    Rename(usize, u8),
    ToggleExec(usize),
    Link(usize, u8),
    LinkOutside(u8),
    Untracked(u8),
    Ignored(u8),
    EmptyDir(u8),
    FileToDir(usize),
    Touch(usize),
}

#[derive(Debug, Clone)]
struct Job {
    base: usize,
    name: u8,
    changes: Vec<Change>,
    commit: bool,
}

fn change() -> impl Strategy<Value = Change> {
    let i = any::<usize>();
    let b = any::<u8>();
    prop_oneof![
        (i, b).prop_map(|(i, b)| Change::Edit(i, b)),
        i.prop_map(Change::Delete),
        (i, b).prop_map(|(i, b)| Change::Rename(i, b)),
        i.prop_map(Change::ToggleExec),
        (i, b).prop_map(|(i, b)| Change::Link(i, b)),
        b.prop_map(Change::LinkOutside),
        b.prop_map(Change::Untracked),
        b.prop_map(Change::Ignored),
        b.prop_map(Change::EmptyDir),
        i.prop_map(Change::FileToDir),
        i.prop_map(Change::Touch),
    ]
}

fn job() -> impl Strategy<Value = Job> {
    (
        any::<usize>(),
        0u8..4,
        prop::collection::vec(change(), 0..6),
        prop::bool::weighted(0.7),
    )
        .prop_map(|(base, name, changes, commit)| Job {
            base,
            name,
            changes,
            commit,
        })
}

/// The tracked files of the worktree (regular files and links), sorted.
fn tracked(wt: &Path) -> Vec<String> {
    git(wt, &["ls-files"])
        .lines()
        .map(str::to_owned)
        .filter(|p| std::fs::symlink_metadata(wt.join(p)).is_ok_and(|m| !m.is_dir()))
        .collect()
}

/// Applies `change` to the worktree as a job would; `outside` is a folder the job links to.
fn apply(wt: &Path, change: &Change, outside: &Path) {
    let files = tracked(wt);
    let pick = |i: usize| (!files.is_empty()).then(|| wt.join(&files[i % files.len()]));
    let fresh_dir = |b: u8| wt.join(["src", "docs", "new", "src/deep"][b as usize % 4]);
    let write = |path: &Path, text: &str| {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let _ = std::fs::remove_file(path);
        std::fs::write(path, text).expect("write");
    };
    match change {
        Change::Edit(i, b) => {
            if let Some(p) = pick(*i) {
                write(&p, &format!("edited {b}\n"));
            }
        }
        Change::Delete(i) => {
            if let Some(p) = pick(*i) {
                std::fs::remove_file(p).expect("delete");
            }
        }
        Change::Rename(i, b) => {
            if let Some(p) = pick(*i) {
                let to = fresh_dir(*b).join(format!("renamed-{b}"));
                std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
                std::fs::rename(p, to).expect("rename");
            }
        }
        Change::ToggleExec(i) => {
            if let Some(p) = pick(*i).filter(|p| !p.is_symlink()) {
                let mode = std::fs::metadata(&p).expect("stat").permissions().mode();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode ^ 0o111))
                    .expect("chmod");
            }
        }
        Change::Link(i, b) => {
            if let Some(p) = pick(*i) {
                let link = fresh_dir(*b).join(format!("link-{b}"));
                std::fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
                let _ = std::fs::remove_file(&link);
                std::os::unix::fs::symlink(p.strip_prefix(wt).expect("inside"), link)
                    .expect("link");
            }
        }
        Change::LinkOutside(b) => {
            // As `additionalSymlinkDirs` does: a folder linked in, ignored or not.
            let name = if b % 2 == 0 { "node_modules" } else { "build" };
            let _ = std::os::unix::fs::symlink(outside, wt.join(name));
        }
        Change::Untracked(b) => write(&fresh_dir(*b).join(format!("untracked-{b}")), "u\n"),
        Change::Ignored(b) => {
            let path = if b % 2 == 0 {
                wt.join(format!("build/obj-{b}/out.o"))
            } else {
                fresh_dir(*b).join(format!("trace-{b}.log"))
            };
            // Only into a real `build` folder or none: an earlier job may have linked it
            // (`LinkOutside`) and a later one edited that link into a file.
            let build = std::fs::symlink_metadata(wt.join("build"));
            if build.map_or(true, |m| m.is_dir()) {
                write(&path, "ignored\n");
            }
        }
        Change::EmptyDir(b) => {
            let _ = std::fs::create_dir_all(fresh_dir(*b).join(format!("empty-{b}/inner")));
        }
        Change::FileToDir(i) => {
            if let Some(p) = pick(*i) {
                std::fs::remove_file(&p).expect("delete");
                write(&p.join("now-a-folder"), "f\n");
            }
        }
        Change::Touch(i) => {
            if let Some(p) = pick(*i).filter(|p| !p.is_symlink()) {
                // Same size, new content, as a racy edit would be.
                let len = std::fs::metadata(&p).expect("stat").len() as usize;
                std::fs::write(&p, "x".repeat(len)).expect("write");
            }
        }
    }
}

/// Runs `jobs` one after another through a pooled `Git2Operations`, checking every worktree.
fn run_jobs(jobs: &[Job]) {
    let fx = Fixture::new();
    let outside = fx.scratch.join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("precious"), "keep me\n").expect("write");
    let ops = Git2Operations::builder()
        .worktree_pool(3, 1 << 30)
        .build()
        .expect("ops");
    let rt = runtime();
    let mut commits = vec![fx.head()];
    for (k, job) in jobs.iter().enumerate() {
        let base = commits[job.base % commits.len()].clone();
        let wt = fx.wt(&format!("job-{}", job.name));
        rt.block_on(ops.create_worktree(&fx.repo, &wt, &base))
            .expect("create");
        // Every job parks its worktree: each one after the first is made from the pool.
        assert_eq!(
            fx.pooled().len(),
            0,
            "job {k}: the pooled worktree was taken"
        );
        fx.assert_fresh(&wt, &base, &format!("job {k} {job:?}"));
        for change in &job.changes {
            apply(&wt, change, &outside);
        }
        if job.commit {
            if let Some(c) = rt.block_on(ops.commit_all(&wt, "job")).expect("commit") {
                commits.push(c);
            }
        }
        rt.block_on(ops.remove_worktree(&fx.repo, &wt))
            .expect("remove");
        assert!(!wt.exists(), "job {k}: the worktree is gone");
        assert_eq!(fx.pooled().len(), 1, "job {k}: the worktree was pooled");
        assert!(cli_linked_worktrees(&fx.repo).is_empty(), "job {k}: listed");
        assert_eq!(
            std::fs::read_to_string(outside.join("precious")).expect("outside"),
            "keep me\n",
            "job {k}: a linked folder's content survives"
        );
    }
    assert!(fx.pooled().len() <= 3);
    fixtures::assert_git_healthy(&fx.repo);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_reused_worktree_is_a_fresh_checkout(jobs in prop::collection::vec(job(), 1..9)) {
        run_jobs(&jobs);
    }
}

#[test]
fn a_removed_worktree_is_pooled_and_reused_unlisted() {
    let fx = Fixture::new();
    let ops = Git2Operations::new();
    let rt = runtime();
    let head = fx.head();
    let wt = fx.create(&rt, &ops, "a", &head);
    let inode =
        |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).expect("stat"));
    let before = inode(&wt.join("docs/guide.md"));
    rt.block_on(ops.remove_worktree(&fx.repo, &wt))
        .expect("remove");
    assert_eq!(fx.pooled().len(), 1);
    assert!(rt
        .block_on(ops.list_worktrees(&fx.repo))
        .expect("list")
        .is_empty());
    assert!(cli_linked_worktrees(&fx.repo).is_empty());
    fx.create_from_pool(&rt, &ops, "b", &head);
    assert_eq!(
        inode(&fx.wt("b").join("docs/guide.md")),
        before,
        "not rewritten"
    );
}

#[test]
fn an_index_the_pool_rewrites_keeps_its_time_and_a_left_edit_is_undone_on_reuse() {
    let fx = Fixture::new();
    let ops = Git2Operations::new();
    let rt = runtime();
    let head = fx.head();
    let wt = fx.create(&rt, &ops, "a", &head);
    // Left uncommitted: a deleted file (the pool then writes the entry's index anew) and an
    // edit of the same size (kept when parked, found when the entry is taken).
    std::fs::remove_file(wt.join("README.md")).expect("delete");
    std::fs::write(wt.join("docs/guide.md"), "GUIDE\n").expect("edit");
    let index = PathBuf::from(git(
        &wt,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    ));
    let written = std::fs::metadata(&index)
        .and_then(|m| m.modified())
        .expect("index time");
    rt.block_on(ops.remove_worktree(&fx.repo, &wt))
        .expect("remove");
    let pooled = fx.pooled();
    assert_eq!(pooled.len(), 1);
    let entry_index = fx.pool().join(&pooled[0]).join("index");
    // Stat data recorded as late as the index was written is not trusted (racily clean):
    // the rewritten index must not look written later than the stat data it holds.
    assert_eq!(
        std::fs::metadata(&entry_index)
            .and_then(|m| m.modified())
            .expect("pooled time"),
        written
    );
    fx.create_from_pool(&rt, &ops, "b", &head);
}

#[test]
fn the_index_a_job_changes_after_its_commit_is_the_one_pooled() {
    let fx = Fixture::new();
    let ops = Git2Operations::new();
    let rt = runtime();
    let wt = fx.create(&rt, &ops, "a", &fx.head());
    std::fs::write(wt.join("notes.txt"), "notes\n").expect("write");
    let commit = rt
        .block_on(ops.commit_all(&wt, "job"))
        .expect("commit")
        .expect("a commit");
    // The commit's handle keeps the index loaded; then the job's own git changes the file.
    git(&wt, &["rm", "-q", "--cached", "docs/guide.md"]);
    rt.block_on(ops.remove_worktree(&fx.repo, &wt))
        .expect("remove");
    assert_eq!(fx.pooled().len(), 1);
    // The unstaged file was not the entry's: it is written afresh, with its stat data.
    fx.create_from_pool(&rt, &ops, "b", &commit);
}

#[test]
fn a_creation_waits_for_the_worktree_being_settled_rather_than_check_out_afresh() {
    let fx = Fixture::new();
    let ops = Git2Operations::new();
    // Several threads: the settle runs on the blocking pool while the creation waits.
    let rt = threaded_runtime(2);
    let head = fx.head();
    let (a, b) = (fx.wt("a"), fx.wt("b"));
    rt.block_on(ops.create_worktree(&fx.repo, &a, &head))
        .expect("create");
    let inode =
        |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).expect("stat"));
    let before = inode(&a.join("docs/guide.md"));
    // The removal is polled first: it counts its settle and takes the lock first, so the
    // creation finds the pool empty and `a` still being parked.
    let (removed, created) = rt.block_on(async {
        tokio::join!(
            ops.remove_worktree(&fx.repo, &a),
            ops.create_worktree(&fx.repo, &b, &head)
        )
    });
    removed.expect("remove");
    created.expect("create");
    assert_eq!(
        inode(&b.join("docs/guide.md")),
        before,
        "b is a's worktree, not a fresh checkout"
    );
    assert!(fx.pooled().is_empty(), "the entry was taken");
    fx.assert_fresh(&b, &head, "reused after waiting");
    fixtures::assert_git_healthy(&fx.repo);
}

#[test]
fn the_pool_is_bounded_by_count_and_by_bytes() {
    let rt = runtime();
    for (count, bytes, expected) in [(2, 1 << 30, 2), (8, 1, 0), (0, 1 << 30, 0), (8, 1 << 30, 4)] {
        let fx = Fixture::new();
        let ops = Git2Operations::builder()
            .worktree_pool(count, bytes)
            .build()
            .expect("ops");
        let head = fx.head();
        let wts: Vec<PathBuf> = (0..4).map(|i| fx.wt(&format!("w{i}"))).collect();
        for wt in &wts {
            rt.block_on(ops.create_worktree(&fx.repo, wt, &head))
                .expect("create");
        }
        for wt in &wts {
            rt.block_on(ops.remove_worktree(&fx.repo, wt))
                .expect("remove");
            assert!(!wt.exists());
        }
        assert_eq!(fx.pooled().len(), expected, "count {count}, bytes {bytes}");
    }
}

#[test]
fn the_byte_bound_counts_what_a_job_left() {
    let fx = Fixture::new();
    let ops = Git2Operations::builder()
        .worktree_pool(8, 256 * 1024)
        .build()
        .expect("ops");
    let rt = runtime();
    let head = fx.head();
    let (small, big) = (fx.wt("small"), fx.wt("big"));
    for wt in [&small, &big] {
        rt.block_on(ops.create_worktree(&fx.repo, wt, &head))
            .expect("create");
    }
    // Tracked and too big: ignored build output is deleted before the size is counted.
    std::fs::create_dir_all(big.join("build")).expect("mkdir");
    std::fs::write(big.join("build/huge.o"), vec![7u8; 4 << 20]).expect("write");
    std::fs::write(big.join("blob.bin"), vec![7u8; 1 << 20]).expect("write");
    rt.block_on(ops.commit_all(&big, "big")).expect("commit");
    for wt in [&small, &big] {
        rt.block_on(ops.remove_worktree(&fx.repo, wt))
            .expect("remove");
    }
    assert_eq!(fx.pooled().len(), 1, "only the small one fits");
}

#[test]
fn concurrent_creates_never_share_a_pooled_worktree() {
    let fx = Fixture::new();
    let head = fx.head();
    let rt = threaded_runtime(4);
    for round in 0..6 {
        // Separate instances share no lock: only the pool's renames keep them apart.
        let (a, b) = (Git2Operations::new(), Git2Operations::new());
        let parked = round % 3; // 0, 1 or 2 entries for two takers
        for i in 0..parked {
            let wt = fx.wt(&format!("seed-{round}-{i}"));
            rt.block_on(a.create_worktree(&fx.repo, &wt, &head))
                .expect("create");
            rt.block_on(a.remove_worktree(&fx.repo, &wt))
                .expect("remove");
        }
        let (wa, wb) = (fx.wt(&format!("a-{round}")), fx.wt(&format!("b-{round}")));
        let (repo, h) = (fx.repo.clone(), head.clone());
        let (ra, rb) = rt.block_on(async {
            tokio::join!(
                a.create_worktree(&repo, &wa, &h),
                b.create_worktree(&repo, &wb, &h)
            )
        });
        ra.expect("create a");
        rb.expect("create b");
        fx.assert_fresh(&wa, &head, "a");
        fx.assert_fresh(&wb, &head, "b");
        assert!(
            fx.pooled().is_empty(),
            "round {round}: every entry taken once"
        );
        for wt in [&wa, &wb] {
            rt.block_on(a.remove_worktree(&fx.repo, wt))
                .expect("remove");
        }
        rt.block_on(a.clear_worktree_pool(&fx.repo)).expect("clear");
    }
}

#[test]
fn a_removal_racing_the_creation_of_its_worktree_finds_it_whole_or_absent() {
    // A worktree's files are written without the repository's lock: a removal of the same
    // worktree waits for its creation, so it either finds nothing yet or a whole worktree.
    let fx = Fixture::new();
    let head = fx.head();
    let ops = Git2Operations::new();
    let rt = threaded_runtime(4);
    for round in 0..10u64 {
        if round % 2 == 1 {
            let seed = fx.wt(&format!("seed-{round}"));
            rt.block_on(ops.create_worktree(&fx.repo, &seed, &head))
                .expect("create");
            rt.block_on(ops.remove_worktree(&fx.repo, &seed))
                .expect("remove");
        }
        let wt = fx.wt(&format!("w-{round}"));
        let (created, removed) = rt.block_on(async {
            tokio::join!(ops.create_worktree(&fx.repo, &wt, &head), async {
                tokio::time::sleep(std::time::Duration::from_micros(300 * round)).await;
                ops.remove_worktree(&fx.repo, &wt).await
            })
        });
        created.expect("create");
        removed.expect("remove");
        if wt.exists() {
            // The removal ran first: the creation made a whole worktree afterwards.
            fx.assert_fresh(&wt, &head, &format!("round {round}"));
            rt.block_on(ops.remove_worktree(&fx.repo, &wt))
                .expect("remove");
        }
        assert!(cli_linked_worktrees(&fx.repo).is_empty(), "round {round}");
        fixtures::assert_git_healthy(&fx.repo);
        // What the removal pooled is whole: a worktree made from it is a fresh checkout.
        let again = fx.wt(&format!("again-{round}"));
        rt.block_on(ops.create_worktree(&fx.repo, &again, &head))
            .expect("create");
        fx.assert_fresh(&again, &head, &format!("round {round}, again"));
        rt.block_on(ops.remove_worktree(&fx.repo, &again))
            .expect("remove");
    }
}

#[test]
fn entries_a_crash_left_half_moved_are_swept() {
    let fx = Fixture::new();
    let ops = Git2Operations::new();
    let rt = runtime();
    let head = fx.head();
    for name in ["x", "y", "z"] {
        rt.block_on(ops.create_worktree(&fx.repo, &fx.wt(name), &head))
            .expect("create");
    }
    for name in ["x", "y", "z"] {
        rt.block_on(ops.remove_worktree(&fx.repo, &fx.wt(name)))
            .expect("remove");
    }
    let ready = fx.pooled();
    assert_eq!(ready.len(), 3);
    // A process that is gone, and this process when no operation of it is under way.
    let dead = {
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        child.wait().expect("wait");
        pid
    };
    let pool = fx.pool();
    let parking = pool.join(format!("{}.parking.{dead}", ready[0]));
    let taking = pool.join(format!("{}.taking.{}", ready[1], std::process::id()));
    std::fs::rename(pool.join(&ready[0]), &parking).expect("rename");
    std::fs::rename(pool.join(&ready[1]), &taking).expect("rename");
    std::fs::write(pool.join("garbage.txt"), "?").expect("write");
    let root = fx.repo.join(".worktrees");
    let removed = rt
        .block_on(ops.remove_orphaned_worktrees(&fx.repo, &root, &[]))
        .expect("sweep");
    assert!(
        removed.is_empty(),
        "pool entries are not worktrees: {removed:?}"
    );
    assert_eq!(
        fx.pooled(),
        vec![ready[2].clone()],
        "only the ready one is left"
    );
    // Crash repair at a plan's opening sweeps too.
    std::fs::rename(
        pool.join(&ready[2]),
        pool.join(format!("{}.taking.{dead}", ready[2])),
    )
    .expect("rename");
    rt.block_on(ops.remove_stale_locks(&fx.repo, &[], &[]))
        .expect("repair");
    assert!(fx.pooled().is_empty());
}

/// Breaks a pooled entry's folder.
type Damage = fn(&Path);

#[test]
fn a_damaged_entry_is_deleted_and_the_checkout_made_afresh() {
    let rt = runtime();
    let damages: [(&str, Damage); 4] = [
        ("garbage index", |e| {
            std::fs::write(e.join("index"), "not an index").expect("write")
        }),
        ("no files", |e| {
            std::fs::remove_dir_all(e.join("files")).expect("rm")
        }),
        ("no index", |e| {
            std::fs::remove_file(e.join("index")).expect("rm")
        }),
        ("a file where a folder is", |e| {
            std::fs::remove_dir_all(e.join("files/src")).expect("rm");
            std::fs::write(e.join("files/src"), "x").expect("write");
        }),
    ];
    for (label, damage) in damages {
        let fx = Fixture::new();
        let ops = Git2Operations::new();
        let head = fx.head();
        let wt = fx.wt("w");
        rt.block_on(ops.create_worktree(&fx.repo, &wt, &head))
            .expect("create");
        rt.block_on(ops.remove_worktree(&fx.repo, &wt))
            .expect("remove");
        let entry = fx.pool().join(&fx.pooled()[0]);
        damage(&entry);
        let again = fx.wt("again");
        rt.block_on(ops.create_worktree(&fx.repo, &again, &head))
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        fx.assert_fresh(&again, &head, label);
        assert!(fx.pooled().is_empty(), "{label}: the entry is gone");
    }
}

#[test]
fn clearing_the_pool_and_the_orphan_sweep_delete_rather_than_pool() {
    let fx = Fixture::new();
    let ops = Git2Operations::new();
    let rt = runtime();
    let head = fx.head();
    for name in ["p", "q", "orphan"] {
        rt.block_on(ops.create_worktree(&fx.repo, &fx.wt(name), &head))
            .expect("create");
    }
    for name in ["p", "q"] {
        rt.block_on(ops.remove_worktree(&fx.repo, &fx.wt(name)))
            .expect("remove");
    }
    let root = fx.repo.join(".worktrees");
    let removed = rt
        .block_on(ops.remove_orphaned_worktrees(&fx.repo, &root, &[]))
        .expect("sweep");
    assert_eq!(removed, vec![fx.wt("orphan")]);
    assert_eq!(fx.pooled().len(), 2, "an orphan is never pooled");
    let cleared = rt
        .block_on(ops.clear_worktree_pool(&fx.repo))
        .expect("clear");
    assert_eq!(cleared, 2);
    assert!(fx.pooled().is_empty());
    assert!(cli_linked_worktrees(&fx.repo).is_empty());
    fixtures::assert_git_healthy(&fx.repo);
}

#[test]
fn a_repository_with_attributes_is_never_pooled() {
    let fx = Fixture::new();
    std::fs::write(fx.repo.join(".gitattributes"), "*.md text eol=crlf\n").expect("write");
    git(&fx.repo, &["add", "-A"]);
    git(&fx.repo, &["commit", "-q", "-m", "attributes"]);
    let ops = Git2Operations::new();
    let rt = runtime();
    let (old, head) = (git(&fx.repo, &["rev-parse", "HEAD~1"]), fx.head());
    // A worktree whose index holds `.gitattributes` is not pooled; one without it is, and is
    // not used for a commit that has it.
    for (name, commit) in [("with", &head), ("without", &old)] {
        rt.block_on(ops.create_worktree(&fx.repo, &fx.wt(name), commit))
            .expect("create");
        rt.block_on(ops.remove_worktree(&fx.repo, &fx.wt(name)))
            .expect("remove");
    }
    assert_eq!(fx.pooled().len(), 1);
    rt.block_on(ops.create_worktree(&fx.repo, &fx.wt("again"), &head))
        .expect("create");
    assert_eq!(fx.pooled().len(), 1, "left for a commit it can serve");
    fx.assert_fresh(&fx.wt("again"), &head, "attributes");
}
