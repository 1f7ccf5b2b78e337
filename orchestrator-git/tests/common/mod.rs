//! Test helpers: real repositories made with the `git` CLI, and checks against it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use orchestrator_core::conformance::git::{write_files, GitFixture, INITIAL_FILES};
use orchestrator_git::Git2Operations;

/// A `git` command isolated from the machine's configuration.
pub fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    cmd
}

/// Runs git and returns its output, whatever the exit code.
pub fn git_output(dir: &Path, args: &[&str]) -> Output {
    match git_cmd(dir).args(args).output() {
        Ok(out) => out,
        Err(e) => panic!("running git {args:?}: {e}"),
    }
}

/// Runs git, panics unless it succeeds, returns stdout trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_output(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {} failed: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// A fresh repository at `dir/repo` on `main` holding [`INITIAL_FILES`] in one commit.
pub fn init_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["config", "user.email", "test@example.com"]);
    write_files(&repo, INITIAL_FILES).expect("write files");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    std::fs::canonicalize(&repo).expect("canonical repo")
}

/// Keeps a temporary folder and checks the repository with the `git` CLI when dropped:
/// `git fsck --full` is clean and `git worktree list` shows only live worktrees.
pub struct Checked {
    pub repo: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Drop for Checked {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        assert_git_healthy(&self.repo);
    }
}

/// `git fsck --full` reports nothing and every worktree git lists is a live folder.
pub fn assert_git_healthy(repo: &Path) {
    let out = git_output(repo, &["fsck", "--full", "--no-progress", "--no-dangling"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.trim().is_empty(),
        "git fsck --full: {text}"
    );
    for (path, info) in cli_worktrees(repo).into_iter().skip(1) {
        assert!(
            path.join(".git").is_file(),
            "git lists a worktree that is gone: {path:?}"
        );
        assert!(
            !info.contains("prunable"),
            "git sees a prunable worktree {path:?}: {info}"
        );
        git(&path, &["status", "--porcelain"]);
    }
}

/// `git worktree list --porcelain` as (path, the rest of its record), main checkout first.
pub fn cli_worktrees(repo: &Path) -> Vec<(PathBuf, String)> {
    let text = git(repo, &["worktree", "list", "--porcelain"]);
    text.split("\n\n")
        .filter(|r| !r.trim().is_empty())
        .map(|record| {
            let mut lines = record.lines();
            let path = lines
                .next()
                .and_then(|l| l.strip_prefix("worktree "))
                .map(PathBuf::from)
                .unwrap_or_default();
            (path, lines.collect::<Vec<_>>().join("\n"))
        })
        .collect()
}

/// The linked worktrees `git worktree list` shows, canonical.
pub fn cli_linked_worktrees(repo: &Path) -> Vec<PathBuf> {
    let mut list: Vec<PathBuf> = cli_worktrees(repo)
        .into_iter()
        .skip(1)
        .map(|(p, _)| std::fs::canonicalize(&p).unwrap_or(p))
        .collect();
    list.sort();
    list
}

/// A conformance fixture: a CLI-made repository and `ops`.
pub fn fixture(ops: Git2Operations) -> GitFixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = init_repo(dir.path());
    GitFixture {
        git: Arc::new(ops),
        repo: repo.clone(),
        default_branch: "main".to_string(),
        switch: Arc::new(|repo: &Path, rev: &str| {
            let branch = format!("refs/heads/{rev}");
            let is_branch = git_output(repo, &["show-ref", "--verify", "--quiet", &branch])
                .status
                .success();
            let args: Vec<&str> = if is_branch {
                vec!["switch", "-q", "--no-guess", rev]
            } else {
                vec!["switch", "-q", "--detach", rev]
            };
            let out = git_output(repo, &args);
            if out.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        }),
        guard: Box::new(Checked { repo, dir }),
    }
}

/// Everything the user sees of their checkout: HEAD, the branch's ref, the index file, and every
/// file (tracked, untracked and ignored) outside `.git`, `.worktrees` and `.orchestrator`.
pub fn snapshot_checkout(repo: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut snap = BTreeMap::new();
    let git_dir = repo.join(".git");
    for name in ["HEAD", "index"] {
        if let Ok(bytes) = std::fs::read(git_dir.join(name)) {
            snap.insert(format!(".git/{name}"), bytes);
        }
    }
    let head = git(repo, &["rev-parse", "HEAD"]);
    snap.insert("rev-parse HEAD".to_string(), head.into_bytes());
    let branch = git_output(repo, &["symbolic-ref", "-q", "HEAD"]);
    snap.insert("symbolic-ref HEAD".to_string(), branch.stdout);
    let mut pending = vec![repo.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(repo)
                .expect("inside")
                .to_string_lossy()
                .into_owned();
            if [".git", ".worktrees", ".orchestrator"].contains(&rel.as_str()) {
                continue;
            }
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                pending.push(path);
            } else {
                snap.insert(rel, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    snap
}

/// A small deterministic random generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
