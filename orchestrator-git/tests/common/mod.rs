//! Helpers of this crate's tests: the conformance suite's repository, made with the `git` CLI,
//! and its fixture for `Git2Operations`. The git CLI helpers and checks are shared:
//! `orchestrator_testkit::fixtures`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_core::conformance::git::{write_files, GitFixture, INITIAL_FILES};
use orchestrator_core::git::GitOperations as _;
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::{git_output, init_repo, Checked};

/// A fresh repository at `dir/repo` on `main` holding [`INITIAL_FILES`] in one commit, as a
/// canonical path.
pub fn fixture_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    init_repo(&repo, INITIAL_FILES);
    std::fs::canonicalize(&repo).expect("canonicalizing the fixture repository")
}

/// A conformance fixture: a CLI-made repository and `ops`.
pub fn fixture(ops: Git2Operations) -> GitFixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = fixture_repo(dir.path());
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

/// A commit of `files` on `base`, made in a new worktree `repo/.worktrees/<name>` (left there)
/// through `git2`; returns its id.
pub async fn commit_in(
    git2: &Git2Operations,
    repo: &Path,
    name: &str,
    base: &str,
    files: &[(&str, &str)],
) -> String {
    let wt = repo.join(".worktrees").join(name);
    git2.create_worktree(repo, &wt, base)
        .await
        .expect("create worktree");
    write_files(&wt, files).expect("write");
    git2.commit_all(&wt, name)
        .await
        .expect("commit")
        .expect("a change")
}
