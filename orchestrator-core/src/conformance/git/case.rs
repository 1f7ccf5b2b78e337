//! The running-case helper shared by every group of cases: [`Case`] (the case's name, prefixed
//! to every failure, and its fixture) with its step helpers, plus small shared constants.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::git::{CommitId, GitError, GitOperations};

use super::{write_files, GitFixture};

/// A running case: its name (prefixed to every failure) and its fixture.
pub(super) struct Case<'a> {
    pub(super) name: &'static str,
    pub(super) fx: &'a GitFixture,
}

impl Case<'_> {
    pub(super) fn git(&self) -> &dyn GitOperations {
        self.fx.git.as_ref()
    }

    pub(super) fn repo(&self) -> &Path {
        &self.fx.repo
    }

    pub(super) fn main(&self) -> &str {
        &self.fx.default_branch
    }

    /// Unwraps `result`, naming the case and step on failure.
    #[track_caller]
    pub(super) fn ok<T>(&self, step: &str, result: Result<T, GitError>) -> T {
        match result {
            Ok(v) => v,
            Err(e) => panic!("[{}] {step}: unexpected error: {e:?}", self.name),
        }
    }

    /// The error of `result`, naming the case and step when it succeeded.
    #[track_caller]
    pub(super) fn err<T: std::fmt::Debug>(
        &self,
        step: &str,
        result: Result<T, GitError>,
    ) -> GitError {
        match result {
            Ok(v) => panic!("[{}] {step}: expected an error, got Ok({v:?})", self.name),
            Err(e) => e,
        }
    }

    #[track_caller]
    pub(super) fn check(&self, cond: bool, what: impl std::fmt::Display) {
        assert!(cond, "[{}] {what}", self.name);
    }

    #[track_caller]
    pub(super) fn same<T: PartialEq + std::fmt::Debug>(&self, left: T, right: T, what: &str) {
        assert_eq!(left, right, "[{}] {what}", self.name);
    }

    pub(super) fn wt(&self, name: &str) -> PathBuf {
        self.repo().join(".worktrees").join(name)
    }

    pub(super) fn write(&self, dir: &Path, files: &[(&str, &str)]) {
        if let Err(e) = write_files(dir, files) {
            panic!("[{}] writing files in {}: {e}", self.name, dir.display());
        }
    }

    pub(super) fn read(&self, file: &Path) -> Option<String> {
        std::fs::read_to_string(file).ok()
    }

    pub(super) fn switch(&self, rev: &str) {
        if let Err(e) = (self.fx.switch)(self.repo(), rev) {
            panic!("[{}] switching the main checkout to {rev}: {e}", self.name);
        }
    }

    pub(super) async fn base(&self) -> CommitId {
        let tip = self.ok(
            "branch_tip(default)",
            self.git().branch_tip(self.repo(), self.main()).await,
        );
        match tip {
            Some(tip) => tip,
            None => panic!("[{}] the default branch has no tip", self.name),
        }
    }

    /// Creates worktree `name` at `base`, writes `files`, removes `delete`, commits.
    pub(super) async fn commit_on(
        &self,
        name: &str,
        base: &str,
        files: &[(&str, &str)],
        delete: &[&str],
    ) -> (PathBuf, CommitId) {
        let wt = self.wt(name);
        self.ok(
            "create_worktree",
            self.git().create_worktree(self.repo(), &wt, base).await,
        );
        self.write(&wt, files);
        for path in delete {
            if let Err(e) = std::fs::remove_file(wt.join(path)) {
                panic!("[{}] deleting {path}: {e}", self.name);
            }
        }
        let commit = self.ok(
            "commit_all",
            self.git().commit_all(&wt, &format!("[Plan] {name}")).await,
        );
        match commit {
            Some(c) => (wt, c),
            None => panic!(
                "[{}] commit_all in {name} found nothing to commit",
                self.name
            ),
        }
    }

    pub(super) async fn ancestor(&self, ancestor: &str, descendant: &str) -> bool {
        self.ok(
            "is_ancestor",
            self.git()
                .is_ancestor(self.repo(), ancestor, descendant)
                .await,
        )
    }

    pub(super) async fn tip(&self, branch: &str) -> Option<CommitId> {
        self.ok(
            "branch_tip",
            self.git().branch_tip(self.repo(), branch).await,
        )
    }

    /// The content of `file` in `commit`, read through a throwaway worktree.
    pub(super) async fn file_at(&self, commit: &str, file: &str) -> Option<String> {
        let wt = self.wt(&format!("peek-{}", &commit[..commit.len().min(12)]));
        self.ok(
            "create_worktree(peek)",
            self.git().create_worktree(self.repo(), &wt, commit).await,
        );
        let content = self.read(&wt.join(file));
        self.ok(
            "remove_worktree(peek)",
            self.git().remove_worktree(self.repo(), &wt).await,
        );
        content
    }

    pub(super) async fn worktree_set(&self) -> BTreeSet<PathBuf> {
        let list = self.ok(
            "list_worktrees",
            self.git().list_worktrees(self.repo()).await,
        );
        list.iter().map(|p| canonical(p)).collect()
    }
}

pub(super) fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

pub(super) const UNKNOWN_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
