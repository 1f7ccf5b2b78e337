//! [`MemoryGit`]: a fake [`GitOperations`](super::GitOperations) for tests.
//!
//! Commits, trees and branches live in memory; worktrees and the user's checkout are real folders
//! on disk, so code that runs commands in a worktree works unchanged. It follows the same rules as
//! the real implementation and passes the same conformance suite
//! ([`crate::conformance::git::run_all`]).
//!
//! Simplifications, on purpose: trees map paths to file contents (no modes; symbolic links in a
//! worktree are not committed), merges are 3-way at file granularity (a path changed differently
//! on both sides is a conflict), `.gitignore` is read from the worktree's top folder only and
//! understands plain names, `dir/` patterns, a leading `/`, `*`, `?` and `!`, and there is no index
//! (so no staged changes).

mod diff;
mod ignore;
mod merge;
mod model;
mod ops;
mod refs;
#[cfg(test)]
mod tests;
mod worktree;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{CommitId, GitError};
use model::{Commit, Head, Repo, State};
use refs::check_branch_name;
use worktree::{canonical, dirty_files, io_error, write_tree_files};

/// A tree: slash-separated relative path to file content.
type Tree = BTreeMap<String, Arc<Vec<u8>>>;

/// How many changed files a [`GitError::DirtyCheckout`] names at most.
const DIRTY_FILES_SHOWN: usize = 20;

/// An in-memory [`GitOperations`](super::GitOperations) whose worktrees are real folders.
///
/// Register a repository with [`MemoryGit::init_repo`]; its folder becomes the user's checkout of
/// the default branch. Clones share the same state.
///
/// ```
/// use orchestrator_core::git::memory::MemoryGit;
/// use orchestrator_core::git::{GitOperations, MergeStyle};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let repo = dir.path().join("repo");
/// let git = MemoryGit::new();
/// let base = git.init_repo(&repo, "main", &[("README.md", "hello\n")])?;
///
/// let rt = tokio::runtime::Builder::new_current_thread().build()?;
/// rt.block_on(async {
///     // A job: a detached worktree, one new file, a commit.
///     let wt = repo.join(".worktrees").join("job-1");
///     git.create_worktree(&repo, &wt, &base).await?;
///     std::fs::write(wt.join("notes.txt"), "done\n").map_err(|e| {
///         orchestrator_core::GitError::other("write", e)
///     })?;
///     let commit = git.commit_all(&wt, "[Plan] write notes").await?.expect("a change");
///
///     // Land it on a branch in memory, then clean up.
///     git.update_branch(&repo, "orchestrator/snapshot/demo", &base, None).await?;
///     let tip = git
///         .merge_into_branch(&repo, "orchestrator/snapshot/demo", &commit, "merge", MergeStyle::FastForward)
///         .await?;
///     assert_eq!(tip, commit);
///     git.remove_worktree(&repo, &wt).await?;
///     assert!(git.list_worktrees(&repo).await?.is_empty());
///     Ok::<_, orchestrator_core::GitError>(())
/// })?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub struct MemoryGit {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for MemoryGit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("MemoryGit")
            .field("repos", &state.repos.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl MemoryGit {
    /// An empty fake with no repositories.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a repository at `path` (created if missing, files written into it) whose
    /// `default_branch` holds `files` in one initial commit and is checked out. Returns that
    /// commit.
    pub fn init_repo(
        &self,
        path: &Path,
        default_branch: &str,
        files: &[(&str, &str)],
    ) -> Result<CommitId, GitError> {
        check_branch_name(default_branch)?;
        std::fs::create_dir_all(path).map_err(|e| io_error("init repository", path, e))?;
        let key = canonical(path)?;
        let tree: Tree = files
            .iter()
            .map(|(p, c)| (p.to_string(), Arc::new(c.as_bytes().to_vec())))
            .collect();
        write_tree_files(&key, &Tree::new(), &tree)?;
        let mut state = self.lock();
        let id = state.new_id(&[], &tree, "initial commit");
        let mut repo = Repo {
            default_branch: default_branch.to_string(),
            head: Head::Branch(default_branch.to_string()),
            branches: BTreeMap::new(),
            own_refs: BTreeMap::new(),
            commits: HashMap::new(),
            worktrees: BTreeMap::new(),
            excludes: Vec::new(),
        };
        repo.commits.insert(
            id.clone(),
            Commit {
                parents: Vec::new(),
                tree: Arc::new(tree),
            },
        );
        repo.branches.insert(default_branch.to_string(), id.clone());
        state.repos.insert(key, repo);
        Ok(id)
    }

    /// Checks out `rev` in the main checkout like `git switch` does (a branch name attaches HEAD
    /// to it, anything else detaches at that commit), updating the folder's files. A test hook
    /// that stands for the user's own actions; it refuses a dirty checkout.
    pub fn switch(&self, repo: &Path, rev: &str) -> Result<(), GitError> {
        let key = canonical(repo)?;
        let mut state = self.lock();
        let r = state.repo_mut(&key)?;
        let (head, target) = match r.branches.get(rev) {
            Some(tip) => (Head::Branch(rev.to_string()), tip.clone()),
            None => {
                let id = r.resolve(rev)?;
                (Head::Detached(id.clone()), id)
            }
        };
        let old = r.tree_of(&r.head_commit()?)?;
        let new = r.tree_of(&target)?;
        let current = r.read_checkout(&key)?;
        let dirty = dirty_files(&old, &new, &current);
        if !dirty.is_empty() {
            return Err(GitError::DirtyCheckout {
                branch: rev.to_string(),
                path: key.clone(),
                files: dirty,
            });
        }
        write_tree_files(&key, &old, &new)?;
        r.head = head;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
