//! # orchestrator-git
//!
//! [`Git2Operations`]: the orchestrator's [`GitOperations`] on [libgit2](https://libgit2.org)
//! through the `git2` crate, with no network transport compiled in.
//!
//! What it does, and the rules it keeps:
//! - **Worktrees** are detached, created under the repository folder (by default; see
//!   [`Git2OperationsBuilder::worktree_root`]) in git's own on-disk format, so `git worktree list`
//!   and `git -C <worktree> status` work on them. A retry reuses a valid worktree; removal unlinks
//!   symbolic links (e.g. `node_modules`) before deleting, so their targets survive. Paths that
//!   leave the allowed roots (`..`, symbolic links) are refused with
//!   [`GitError::PathOutsideRoot`], and folders that are not worktrees of the repository are
//!   never deleted.
//! - **A worktree pool** per repository keeps removed worktrees (unregistered, in the git
//!   directory) and makes new ones from them by touching only the files that differ from the
//!   new commit, byte for byte what a fresh checkout writes; see
//!   [`Git2OperationsBuilder::worktree_pool`].
//! - **Merges** are computed in memory (`merge_commits`). Into a worktree the result is checked
//!   out; into a branch nothing is checked out, except that a branch the user has checked out
//!   *and clean* follows (a safe checkout); a dirty one is refused with
//!   [`GitError::DirtyCheckout`] and nothing changes.
//! - **Refs** move only by compare-and-swap, the default branch is never deleted or reset, and
//!   worktree administration, ref updates and merges into branches are serialized per repository.
//! - All libgit2 work runs on tokio's blocking pool; no user string reaches a shell.
//!
//! ```no_run
//! use orchestrator_core::git::{GitOperations, MergeStyle};
//! use orchestrator_git::Git2Operations;
//! use std::path::Path;
//!
//! # async fn demo() -> Result<(), orchestrator_core::GitError> {
//! let git = Git2Operations::new();
//! let repo = Path::new("/path/to/repo");
//! let base = git.resolve(repo, "HEAD").await?;
//! let wt = repo.join(".worktrees").join("job-1");
//! git.create_worktree(repo, &wt, &base).await?;
//! // ... a job edits files in `wt` ...
//! if let Some(commit) = git.commit_all(&wt, "[Plan] job 1").await? {
//!     git.update_branch(repo, "orchestrator/snapshot/demo", &base, None).await?;
//!     git.merge_into_branch(repo, "orchestrator/snapshot/demo", &commit, "merge job 1",
//!         MergeStyle::MergeCommit).await?;
//! }
//! git.remove_worktree(repo, &wt).await?;
//! # Ok(())
//! # }
//! ```

mod builder;
mod checkout;
mod error;
mod housekeeping;
mod landing;
mod merge;
mod nested;
mod ops;
mod paths;
#[cfg(unix)]
mod pool;
mod refs;
mod remote;
mod repos;
mod settled;
mod settles;
mod tidy;
mod tree_merge;
mod worktree;
mod worktree_merge;

/// Without unix stat data and file modes there is no pool: worktrees are made and deleted
/// afresh.
#[cfg(not(unix))]
mod pool {
    use crate::builder::PoolLimits;
    use git2::{Oid, Repository};
    use orchestrator_core::git::GitError;
    use std::path::Path;

    /// No worktree is ever parked.
    pub(crate) enum Parked {}

    impl Parked {
        pub(crate) fn settle(self) -> Result<(), GitError> {
            match self {}
        }
    }

    /// No worktree is ever taken from the pool.
    pub(crate) enum Taken {}

    impl Taken {
        pub(crate) fn fill(self) -> Result<bool, GitError> {
            match self {}
        }
    }

    pub(crate) fn park(
        _: &Repository,
        _: &Path,
        _: &Path,
        _: &PoolLimits,
        _: Option<Vec<git2::IndexEntry>>,
    ) -> Result<Option<Parked>, GitError> {
        Ok(None)
    }
    pub(crate) fn take(
        _: &Repository,
        _: &Path,
        _: Oid,
        _: &PoolLimits,
    ) -> Result<Option<Taken>, GitError> {
        Ok(None)
    }
    pub(crate) fn sweep(_: &Repository, _: &PoolLimits) -> Result<usize, GitError> {
        Ok(0)
    }
    pub(crate) fn clear(_: &Repository) -> Result<usize, GitError> {
        Ok(0)
    }
}

pub use builder::{Git2OperationsBuilder, Identity};
pub use ops::Git2Operations;
pub use orchestrator_core::git::{GitError, GitOperations};
