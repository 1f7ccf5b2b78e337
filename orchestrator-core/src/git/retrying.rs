//! [`Retrying`]: the engine's wrapper around the plugged git layer, retrying what a git layer
//! marks as transient (a lock another process holds for a moment, an interrupted or
//! would-block I/O call) with a short backoff, so that a plan does not fail on contention.
//! Permanent errors pass through at once, unchanged.
//!
//! Retrying is safe because every operation either changes nothing when it fails with a
//! transient error (the lock was not taken, the write did not start) or is compare-and-swap.
//! A ref that moved (`RefChanged`) is a transient error only for
//! [`GitOperations::merge_into_branch`], which reads the tip again; elsewhere it is the answer
//! (a compare-and-swap that lost), and the caller decides.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use crate::backoff;

use super::{
    CommitId, ConflictResolver, DiffStats, GitError, GitOperations, JobBranch, MergeStyle,
};

/// A git layer whose transient errors are retried (see the module docs).
#[derive(Debug, Clone)]
pub struct Retrying(Arc<dyn GitOperations>);

impl Retrying {
    /// Wraps `git`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use orchestrator_core::git::{GitOperations, Retrying};
    /// // What the orchestrator's builder does with the git layer it is given.
    /// fn wrap(git: Arc<dyn GitOperations>) -> Arc<dyn GitOperations> {
    ///     Arc::new(Retrying::new(git))
    /// }
    /// # let _ = wrap;
    /// ```
    pub fn new(git: Arc<dyn GitOperations>) -> Self {
        Retrying(git)
    }
}

/// Runs `op` until it succeeds, fails permanently, or has been tried
/// [`TRIES`](crate::backoff::TRIES) times, on the shared [`backoff`] schedule.
async fn again<T, F, Fut>(what: &str, moved_is_transient: bool, op: F) -> Result<T, GitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, GitError>>,
{
    backoff::retry("git", what, |e| transient(e, moved_is_transient), op).await
}

fn transient(e: &GitError, moved_is_transient: bool) -> bool {
    match e {
        GitError::Other { retryable, .. } => *retryable,
        GitError::RefChanged { .. } => moved_is_transient,
        _ => false,
    }
}

#[async_trait]
impl GitOperations for Retrying {
    async fn resolve(&self, repo: &Path, rev: &str) -> Result<CommitId, GitError> {
        again("resolve", false, || self.0.resolve(repo, rev)).await
    }

    async fn current_branch(&self, repo: &Path) -> Result<Option<String>, GitError> {
        again("current branch", false, || self.0.current_branch(repo)).await
    }

    async fn default_branch(&self, repo: &Path) -> Result<String, GitError> {
        again("default branch", false, || self.0.default_branch(repo)).await
    }

    async fn branch_tip(&self, repo: &Path, branch: &str) -> Result<Option<CommitId>, GitError> {
        again("branch tip", false, || self.0.branch_tip(repo, branch)).await
    }

    async fn update_branch(
        &self,
        repo: &Path,
        branch: &str,
        new: &str,
        expected: Option<&str>,
    ) -> Result<(), GitError> {
        again("update branch", false, || {
            self.0.update_branch(repo, branch, new, expected)
        })
        .await
    }

    async fn set_ref(&self, repo: &Path, name: &str, commit: &str) -> Result<(), GitError> {
        again("set ref", false, || self.0.set_ref(repo, name, commit)).await
    }

    async fn delete_ref(&self, repo: &Path, name: &str) -> Result<(), GitError> {
        again("delete ref", false, || self.0.delete_ref(repo, name)).await
    }

    async fn delete_branch(&self, repo: &Path, branch: &str) -> Result<(), GitError> {
        again("delete branch", false, || {
            self.0.delete_branch(repo, branch)
        })
        .await
    }

    async fn is_ancestor(
        &self,
        repo: &Path,
        ancestor: &str,
        descendant: &str,
    ) -> Result<bool, GitError> {
        again("is ancestor", false, || {
            self.0.is_ancestor(repo, ancestor, descendant)
        })
        .await
    }

    async fn create_worktree(
        &self,
        repo: &Path,
        path: &Path,
        commit: &str,
    ) -> Result<(), GitError> {
        again("create worktree", false, || {
            self.0.create_worktree(repo, path, commit)
        })
        .await
    }

    async fn remove_worktree(&self, repo: &Path, path: &Path) -> Result<(), GitError> {
        again("remove worktree", false, || {
            self.0.remove_worktree(repo, path)
        })
        .await
    }

    async fn remove_broken_worktree(&self, repo: &Path, path: &Path) -> Result<bool, GitError> {
        again("remove broken worktree", false, || {
            self.0.remove_broken_worktree(repo, path)
        })
        .await
    }

    async fn release_job_branch(
        &self,
        repo: &Path,
        worktree: &Path,
    ) -> Result<Option<JobBranch>, GitError> {
        again("release job branch", false, || {
            self.0.release_job_branch(repo, worktree)
        })
        .await
    }

    async fn list_worktrees(&self, repo: &Path) -> Result<Vec<PathBuf>, GitError> {
        again("list worktrees", false, || self.0.list_worktrees(repo)).await
    }

    async fn head(&self, worktree: &Path) -> Result<CommitId, GitError> {
        again("head", false, || self.0.head(worktree)).await
    }

    async fn merge_into_worktree(
        &self,
        worktree: &Path,
        commits: &[CommitId],
        message: &str,
        resolver: Option<&dyn ConflictResolver>,
    ) -> Result<CommitId, GitError> {
        again("merge into worktree", false, || {
            self.0
                .merge_into_worktree(worktree, commits, message, resolver)
        })
        .await
    }

    async fn commit_all(
        &self,
        worktree: &Path,
        message: &str,
    ) -> Result<Option<CommitId>, GitError> {
        again("commit", false, || self.0.commit_all(worktree, message)).await
    }

    async fn reset_worktree(&self, worktree: &Path, commit: &str) -> Result<(), GitError> {
        again("reset worktree", false, || {
            self.0.reset_worktree(worktree, commit)
        })
        .await
    }

    async fn merge_into_branch(
        &self,
        repo: &Path,
        branch: &str,
        commit: &str,
        message: &str,
        style: MergeStyle,
    ) -> Result<CommitId, GitError> {
        // Another merge landed between reading the tip and moving it: merge again onto it.
        again("merge into branch", true, || {
            self.0
                .merge_into_branch(repo, branch, commit, message, style)
        })
        .await
    }

    async fn merge_commits(
        &self,
        repo: &Path,
        commits: &[CommitId],
        message: &str,
    ) -> Result<CommitId, GitError> {
        again("merge commits", false, || {
            self.0.merge_commits(repo, commits, message)
        })
        .await
    }

    async fn push(
        &self,
        repo: &Path,
        remote: &str,
        commit: &str,
        reference: &str,
    ) -> Result<(), GitError> {
        again("push", false, || {
            self.0.push(repo, remote, commit, reference)
        })
        .await
    }

    async fn fetch(
        &self,
        repo: &Path,
        remote: &str,
        reference: &str,
    ) -> Result<CommitId, GitError> {
        again("fetch", false, || self.0.fetch(repo, remote, reference)).await
    }

    async fn delete_refs_under(&self, repo: &Path, prefix: &str) -> Result<usize, GitError> {
        again("delete refs", false, || {
            self.0.delete_refs_under(repo, prefix)
        })
        .await
    }

    async fn diff_stats(&self, repo: &Path, from: &str, to: &str) -> Result<DiffStats, GitError> {
        again("diff stats", false, || self.0.diff_stats(repo, from, to)).await
    }

    async fn exclude(&self, repo: &Path, patterns: &[&str]) -> Result<(), GitError> {
        again("exclude", false, || self.0.exclude(repo, patterns)).await
    }

    async fn remove_orphaned_worktrees(
        &self,
        repo: &Path,
        root: &Path,
        live: &[PathBuf],
    ) -> Result<Vec<PathBuf>, GitError> {
        again("remove orphaned worktrees", false, || {
            self.0.remove_orphaned_worktrees(repo, root, live)
        })
        .await
    }

    fn allow_worktree_root(&self, root: &Path) -> Result<(), GitError> {
        self.0.allow_worktree_root(root)
    }

    async fn clear_worktree_pool(&self, repo: &Path) -> Result<usize, GitError> {
        again("clear worktree pool", false, || {
            self.0.clear_worktree_pool(repo)
        })
        .await
    }

    async fn remove_stale_locks(
        &self,
        repo: &Path,
        worktrees: &[PathBuf],
        branches: &[String],
    ) -> Result<Vec<PathBuf>, GitError> {
        again("remove stale locks", false, || {
            self.0.remove_stale_locks(repo, worktrees, branches)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::TRIES;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A git layer whose `head` fails `failures` times with `error`, then answers.
    #[derive(Debug)]
    struct Flaky {
        failures: u32,
        calls: AtomicU32,
        error: fn() -> GitError,
    }

    #[async_trait]
    impl GitOperations for Flaky {
        async fn resolve(&self, _: &Path, _: &str) -> Result<CommitId, GitError> {
            unreachable!()
        }
        async fn current_branch(&self, _: &Path) -> Result<Option<String>, GitError> {
            unreachable!()
        }
        async fn default_branch(&self, _: &Path) -> Result<String, GitError> {
            unreachable!()
        }
        async fn branch_tip(&self, _: &Path, _: &str) -> Result<Option<CommitId>, GitError> {
            unreachable!()
        }
        async fn update_branch(
            &self,
            _: &Path,
            _: &str,
            _: &str,
            _: Option<&str>,
        ) -> Result<(), GitError> {
            unreachable!()
        }
        async fn set_ref(&self, _: &Path, _: &str, _: &str) -> Result<(), GitError> {
            unreachable!()
        }
        async fn delete_ref(&self, _: &Path, _: &str) -> Result<(), GitError> {
            unreachable!()
        }
        async fn delete_branch(&self, _: &Path, _: &str) -> Result<(), GitError> {
            unreachable!()
        }
        async fn is_ancestor(&self, _: &Path, _: &str, _: &str) -> Result<bool, GitError> {
            unreachable!()
        }
        async fn create_worktree(&self, _: &Path, _: &Path, _: &str) -> Result<(), GitError> {
            unreachable!()
        }
        async fn remove_worktree(&self, _: &Path, _: &Path) -> Result<(), GitError> {
            unreachable!()
        }
        async fn remove_broken_worktree(&self, _: &Path, _: &Path) -> Result<bool, GitError> {
            unreachable!()
        }
        async fn release_job_branch(
            &self,
            _: &Path,
            _: &Path,
        ) -> Result<Option<JobBranch>, GitError> {
            unreachable!()
        }
        async fn list_worktrees(&self, _: &Path) -> Result<Vec<PathBuf>, GitError> {
            unreachable!()
        }
        async fn head(&self, _: &Path) -> Result<CommitId, GitError> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            if n < self.failures {
                Err((self.error)())
            } else {
                Ok("head".into())
            }
        }
        async fn merge_into_worktree(
            &self,
            _: &Path,
            _: &[CommitId],
            _: &str,
            _: Option<&dyn ConflictResolver>,
        ) -> Result<CommitId, GitError> {
            unreachable!()
        }
        async fn commit_all(&self, _: &Path, _: &str) -> Result<Option<CommitId>, GitError> {
            unreachable!()
        }
        async fn reset_worktree(&self, _: &Path, _: &str) -> Result<(), GitError> {
            unreachable!()
        }
        async fn merge_into_branch(
            &self,
            _: &Path,
            _: &str,
            _: &str,
            _: &str,
            _: MergeStyle,
        ) -> Result<CommitId, GitError> {
            unreachable!()
        }
        async fn diff_stats(&self, _: &Path, _: &str, _: &str) -> Result<DiffStats, GitError> {
            unreachable!()
        }
        async fn exclude(&self, _: &Path, _: &[&str]) -> Result<(), GitError> {
            unreachable!()
        }
    }

    fn locked() -> GitError {
        GitError::Other {
            operation: "head".into(),
            message: "index.lock is held".into(),
            retryable: true,
        }
    }

    fn broken() -> GitError {
        GitError::other("head", "corrupt object")
    }

    fn flaky(failures: u32, error: fn() -> GitError) -> (Arc<Flaky>, Retrying) {
        let inner = Arc::new(Flaky {
            failures,
            calls: AtomicU32::new(0),
            error,
        });
        (inner.clone(), Retrying::new(inner))
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_until_the_operation_succeeds() {
        let (inner, git) = flaky(TRIES - 1, locked);
        assert_eq!(
            git.head(Path::new("/wt")).await.ok().as_deref(),
            Some("head")
        );
        assert_eq!(inner.calls.load(Ordering::SeqCst), TRIES);
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_error_that_stays_is_returned_after_the_last_try() {
        let (inner, git) = flaky(u32::MAX, locked);
        let e = git.head(Path::new("/wt")).await.err();
        assert!(e.is_some_and(|e| e.is_retryable()));
        assert_eq!(inner.calls.load(Ordering::SeqCst), TRIES);
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_errors_are_returned_at_once() {
        let (inner, git) = flaky(u32::MAX, broken);
        let e = git.head(Path::new("/wt")).await.err();
        assert!(e.is_some_and(|e| !e.is_retryable()));
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
    }
}
