//! The git plug-in point: [`GitOperations`], its typed errors, and the conflict-resolver hook.
//!
//! Implementations: `memory::MemoryGit` (in core with the `testing` feature, for tests: commits
//! in memory, worktrees as real folders) and `Git2Operations` in the `orchestrator-git` crate.
//! Both run `conformance::git::run_all` (also behind `testing`).

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

// A fake for tests; a default build of core leaves it out.
#[cfg(feature = "testing")]
pub mod memory;
mod retrying;

pub use retrying::Retrying;

/// A commit id (hex).
pub type CommitId = String;

/// Lines and files changed between two commits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffStats {
    /// Files changed.
    pub files_changed: usize,
    /// Lines added.
    pub insertions: usize,
    /// Lines removed.
    pub deletions: usize,
}

/// Git failures the engine reacts to, as data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// A merge produced conflicts; nothing was changed.
    #[error("merge conflict in {}: {}", .context, .paths.join(", "))]
    MergeConflict {
        /// What was being merged (e.g. `merging abc123 into orchestrator/snapshot/...`).
        context: String,
        /// Conflicting paths, sorted.
        paths: Vec<String>,
    },
    /// The branch is checked out in a worktree with uncommitted changes; nothing was changed.
    #[error("branch `{branch}` is checked out at {} with uncommitted changes ({}); commit or stash them first", .path.display(), .files.join(", "))]
    DirtyCheckout {
        /// Branch.
        branch: String,
        /// The worktree that has it checked out.
        path: PathBuf,
        /// Some of the changed files.
        files: Vec<String>,
    },
    /// A compare-and-swap ref update found another value: someone else moved it.
    #[error("ref `{reference}` moved concurrently: expected {}, found {}", .expected.as_deref().unwrap_or("<absent>"), .actual.as_deref().unwrap_or("<absent>"))]
    RefChanged {
        /// The ref.
        reference: String,
        /// Value expected.
        expected: Option<CommitId>,
        /// Value found.
        actual: Option<CommitId>,
    },
    /// A revision, branch or worktree does not exist.
    #[error("{what} not found")]
    NotFound {
        /// What was looked for.
        what: String,
    },
    /// A branch name that git's ref-format rules reject.
    #[error("invalid branch name {name:?}: {reason}")]
    InvalidBranchName {
        /// The name.
        name: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// The default branch (or a checked-out branch) may not be deleted or reset.
    #[error("refusing to {operation} branch `{branch}`: {reason}")]
    ProtectedBranch {
        /// The branch.
        branch: String,
        /// What was refused.
        operation: String,
        /// Why.
        reason: String,
    },
    /// A branch that exists but does not contain the expected base.
    #[error("branch `{branch}` exists and has diverged from {base}: {hint}")]
    Diverged {
        /// The branch.
        branch: String,
        /// The base it should contain.
        base: CommitId,
        /// What the user can do.
        hint: String,
    },
    /// A path outside the allowed root (traversal, symlink escape).
    #[error("path {} is outside {}", .path.display(), .root.display())]
    PathOutsideRoot {
        /// The path.
        path: PathBuf,
        /// The root it must stay in.
        root: PathBuf,
    },
    /// Any other failure of the git layer.
    #[error("git {operation} failed: {message}")]
    Other {
        /// Operation.
        operation: String,
        /// Message from the git layer.
        message: String,
        /// Whether trying again may help (lock contention, I/O hiccups).
        retryable: bool,
    },
}

/// The error of an operation a git layer does not offer.
fn unsupported(operation: &str) -> GitError {
    GitError::Other {
        operation: operation.to_owned(),
        message: "this git layer does not support it (use orchestrator_git::Git2Operations)"
            .to_owned(),
        retryable: false,
    }
}

impl GitError {
    /// Whether trying again may help.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            GitError::Other {
                retryable: true,
                ..
            } | GitError::RefChanged { .. }
        )
    }

    /// Shorthand for [`GitError::Other`].
    pub fn other(operation: impl Into<String>, message: impl ToString) -> Self {
        GitError::Other {
            operation: operation.into(),
            message: message.to_string(),
            retryable: false,
        }
    }
}

/// How [`GitOperations::merge_into_branch`] lands a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MergeStyle {
    /// Always a two-parent merge commit (leaves into the snapshot branch).
    MergeCommit,
    /// Fast-forward when the branch is an ancestor of the commit, else a merge commit
    /// (the final merge of the snapshot onto the target).
    FastForward,
}

/// A branch a job attached its worktree to (see [`GitOperations::release_job_branch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobBranch {
    /// The branch name (`x` for `refs/heads/x`).
    pub name: String,
    /// Whether it was deleted (the job created it); else it is left as the job left it.
    pub deleted: bool,
}

/// Resolves merge conflicts by editing the conflicting files in a worktree (e.g. with an agent).
#[async_trait]
pub trait ConflictResolver: Send + Sync + Debug + 'static {
    /// Edits `paths` in `worktree` so that they hold the resolved content (no conflict markers).
    /// The git layer then stages and commits them. An error leaves the merge failed.
    async fn resolve(&self, worktree: &Path, paths: &[String]) -> Result<(), GitError>;
}

/// Everything the engine needs from git. All paths are absolute; `repo` is the main checkout.
///
/// Rules every implementation follows (the conformance suite checks them): nothing ever checks
/// out, resets or commits in the user's main worktree except bringing a *clean* checked-out branch
/// to a new commit after [`GitOperations::merge_into_branch`]; the default branch is never
/// deleted; ref updates are compare-and-swap.
#[async_trait]
pub trait GitOperations: Send + Sync + Debug + 'static {
    /// Resolves a revision (branch, tag, commit, `HEAD`) to a commit id.
    async fn resolve(&self, repo: &Path, rev: &str) -> Result<CommitId, GitError>;

    /// The branch checked out in the main worktree; `None` when HEAD is detached.
    async fn current_branch(&self, repo: &Path) -> Result<Option<String>, GitError>;

    /// The repository's default branch (`origin/HEAD`, `init.defaultBranch`, `main`, `master`).
    async fn default_branch(&self, repo: &Path) -> Result<String, GitError>;

    /// The commit a local branch points at, `None` if it does not exist.
    async fn branch_tip(&self, repo: &Path, branch: &str) -> Result<Option<CommitId>, GitError>;

    /// Creates or moves `branch` to `new` if it currently points at `expected`
    /// (`None`: it must not exist). Otherwise [`GitError::RefChanged`] and no change.
    async fn update_branch(
        &self,
        repo: &Path,
        branch: &str,
        new: &str,
        expected: Option<&str>,
    ) -> Result<(), GitError>;

    /// Points the ref `name` at `commit`, creating or overwriting it. Only for the SDK's own
    /// namespace: `name` must start with [`OWN_REFS`] (`refs/orchestrator/`), so no branch or
    /// tag is ever moved; anything else is [`GitError::InvalidBranchName`]. Session checkpoints
    /// (`refs/orchestrator/sessions/<id>/turn-<n>`) are written this way.
    async fn set_ref(&self, repo: &Path, name: &str, commit: &str) -> Result<(), GitError>;

    /// Deletes the ref `name` (in [`OWN_REFS`], as for [`GitOperations::set_ref`]); deleting
    /// a missing ref is not an error.
    async fn delete_ref(&self, repo: &Path, name: &str) -> Result<(), GitError>;

    /// Deletes a local branch; refuses the default branch and checked-out branches.
    /// Deleting a missing branch is not an error.
    async fn delete_branch(&self, repo: &Path, branch: &str) -> Result<(), GitError>;

    /// Whether `ancestor` is reachable from `descendant` (a commit is its own ancestor).
    async fn is_ancestor(
        &self,
        repo: &Path,
        ancestor: &str,
        descendant: &str,
    ) -> Result<bool, GitError>;

    /// Creates a detached worktree at `commit` in `path`. If a valid worktree of this repository
    /// already exists there it is kept as it is (retry reuses it).
    async fn create_worktree(&self, repo: &Path, path: &Path, commit: &str)
        -> Result<(), GitError>;

    /// Removes a worktree and its folder (symlinked folders inside are unlinked, their targets
    /// kept). Removing a missing worktree is not an error.
    async fn remove_worktree(&self, repo: &Path, path: &Path) -> Result<(), GitError>;

    /// Deletes the folder at `path` if it is *not* a valid worktree of `repo` any more — a job
    /// removed its `.git`, pointed it at another repository, or a creation was interrupted —
    /// together with what is left of its registration. Returns whether it deleted anything; a
    /// valid worktree and a missing folder are left as they are (`false`).
    ///
    /// Unlike [`GitOperations::remove_worktree`], which refuses folders that are not worktrees,
    /// this is for paths the engine itself recorded as a job's worktree: they are its own even
    /// when a job broke them. The path must lie inside the worktree root; symbolic links are
    /// unlinked, never followed.
    async fn remove_broken_worktree(&self, repo: &Path, path: &Path) -> Result<bool, GitError>;

    /// Undoes a job's `git checkout -b` / `git switch` in its worktree: if the worktree's HEAD
    /// is attached to a branch, detaches it at the same commit (so the engine's commits never
    /// move a branch) and deletes the branch when the job made it — surely created after the
    /// worktree was (implementations may leave a branch whose age they cannot tell apart), and
    /// not checked out anywhere else; its commits are all in the worktree's HEAD, so
    /// nothing is lost. A branch that existed before is left where the job left it. Returns the
    /// branch and whether it was deleted; `None` when HEAD was detached (the normal case).
    async fn release_job_branch(
        &self,
        repo: &Path,
        worktree: &Path,
    ) -> Result<Option<JobBranch>, GitError>;

    /// Linked worktrees of the repository (the main checkout excluded).
    async fn list_worktrees(&self, repo: &Path) -> Result<Vec<PathBuf>, GitError>;

    /// The commit checked out in a worktree.
    async fn head(&self, worktree: &Path) -> Result<CommitId, GitError>;

    /// Merges `commits` into the worktree's HEAD one after another, committing each merge with
    /// `message`; commits already contained are skipped. Conflicts go to `resolver` when given,
    /// else [`GitError::MergeConflict`] with the worktree left at its previous HEAD.
    /// Returns the new HEAD.
    async fn merge_into_worktree(
        &self,
        worktree: &Path,
        commits: &[CommitId],
        message: &str,
        resolver: Option<&dyn ConflictResolver>,
    ) -> Result<CommitId, GitError>;

    /// Stages everything in the worktree (respecting `.gitignore`) and commits it with `message`.
    /// `Ok(None)` when there is nothing to commit.
    async fn commit_all(
        &self,
        worktree: &Path,
        message: &str,
    ) -> Result<Option<CommitId>, GitError>;

    /// Brings a worktree back to exactly `commit`: HEAD detached there, index and files as in
    /// the commit, untracked files removed. Ignored files stay (what setup installed, the
    /// symlinked folders), and so does nothing else. The engine calls it before a phase runs
    /// again, so that it runs on the state the phase began with, not on a half-done attempt.
    async fn reset_worktree(&self, worktree: &Path, commit: &str) -> Result<(), GitError>;

    /// Merges `commit` into `branch` without any checkout (in memory), updating the ref by
    /// compare-and-swap, serialized per repository. When the branch is checked out in the main
    /// worktree and clean, its working tree and index follow; when dirty,
    /// [`GitError::DirtyCheckout`] and nothing changes. Returns the branch's new tip.
    async fn merge_into_branch(
        &self,
        repo: &Path,
        branch: &str,
        commit: &str,
        message: &str,
        style: MergeStyle,
    ) -> Result<CommitId, GitError>;

    /// Merges `commits` one after another in memory (no checkout, no ref moved), each merge
    /// committed with `message`; commits already contained are skipped. Returns the result:
    /// the first commit when the others add nothing. Conflicts are
    /// [`GitError::MergeConflict`]. Remote execution (SPEC §16) computes a job's merge-fi with
    /// it. The default says the layer cannot.
    async fn merge_commits(
        &self,
        repo: &Path,
        commits: &[CommitId],
        message: &str,
    ) -> Result<CommitId, GitError> {
        let _ = (repo, commits, message);
        Err(unsupported("merge commits"))
    }

    /// Pushes `commit` to `remote` (a URL or path every machine can reach) as `reference` (a
    /// full ref name), replacing what the remote has there. The default says the layer cannot.
    async fn push(
        &self,
        repo: &Path,
        remote: &str,
        commit: &str,
        reference: &str,
    ) -> Result<(), GitError> {
        let _ = (repo, remote, commit, reference);
        Err(unsupported("push"))
    }

    /// Fetches `reference` of `remote` into the same ref of `repo` (so the commit stays
    /// reachable) and returns its commit; only the objects `repo` lacks travel. The default
    /// says the layer cannot.
    async fn fetch(
        &self,
        repo: &Path,
        remote: &str,
        reference: &str,
    ) -> Result<CommitId, GitError> {
        let _ = (repo, remote, reference);
        Err(unsupported("fetch"))
    }

    /// Deletes every ref of `repo` under `prefix` (a folder of the SDK's own refs, e.g.
    /// `refs/orchestrator/jobs/<planId>/`) and returns how many there were. The default
    /// knows none.
    async fn delete_refs_under(&self, repo: &Path, prefix: &str) -> Result<usize, GitError> {
        let _ = (repo, prefix);
        Ok(0)
    }

    /// Files and lines changed from `from` to `to`.
    async fn diff_stats(&self, repo: &Path, from: &str, to: &str) -> Result<DiffStats, GitError>;

    /// Keeps `patterns` (e.g. `/.worktrees/`) out of `git status` via `.git/info/exclude`.
    async fn exclude(&self, repo: &Path, patterns: &[&str]) -> Result<(), GitError>;

    /// Removes the worktrees of `repo` directly under `root` whose folder is not in `live`
    /// (left behind by crashes). Folders that are not worktrees of `repo` are left alone.
    /// Returns the folders removed. The default removes what [`GitOperations::list_worktrees`]
    /// lists; an implementation that can tell its own folders whose registration is gone
    /// removes those too.
    async fn remove_orphaned_worktrees(
        &self,
        repo: &Path,
        root: &Path,
        live: &[PathBuf],
    ) -> Result<Vec<PathBuf>, GitError> {
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let root = canonical(root);
        let live: std::collections::HashSet<PathBuf> = live.iter().map(|p| canonical(p)).collect();
        let mut removed = Vec::new();
        for wt in self.list_worktrees(repo).await? {
            let path = canonical(&wt);
            if path.parent() == Some(root.as_path()) && !live.contains(&path) {
                self.remove_worktree(repo, &wt).await?;
                removed.push(wt);
            }
        }
        Ok(removed)
    }

    /// Lets worktrees live under `root` as well as where the implementation already allows
    /// (a plan's own `worktreeRoot`, or the orchestrator's): one that keeps worktree paths
    /// inside known roots adds it. The engine calls it before it creates anything there, so a
    /// root is configured once, on the orchestrator or the plan. The default does nothing.
    fn allow_worktree_root(&self, root: &Path) -> Result<(), GitError> {
        let _ = root;
        Ok(())
    }

    /// Deletes the finished worktrees an implementation keeps to make new worktrees from (a
    /// worktree pool), e.g. when a plan is archived; returns how many it deleted. Worktrees in
    /// use are not affected. The default keeps no pool.
    async fn clear_worktree_pool(&self, repo: &Path) -> Result<usize, GitError> {
        let _ = repo;
        Ok(0)
    }

    /// Crash repair: removes the lock files a killed process left in these worktrees'
    /// administrative folders (`HEAD.lock`, `index.lock`) and on these branches' refs; they
    /// would make every later commit or merge there fail. The engine calls it only while it
    /// holds the plan's lease, for the plan's own worktrees and branches, so nobody else is
    /// writing there. Returns the files removed. An implementation also repairs here what a
    /// killed process leaves that is nobody's (the registrations of worktrees whose folder is
    /// gone, as `git worktree prune` does; a worktree pool's half-moved entries). The default
    /// does nothing (stores without lock files).
    async fn remove_stale_locks(
        &self,
        repo: &Path,
        worktrees: &[PathBuf],
        branches: &[String],
    ) -> Result<Vec<PathBuf>, GitError> {
        let _ = (repo, worktrees, branches);
        Ok(Vec::new())
    }
}

/// The namespace of the refs the SDK writes itself ([`GitOperations::set_ref`]).
pub const OWN_REFS: &str = "refs/orchestrator/";

/// Checks that `name` is a ref of the SDK's own namespace ([`OWN_REFS`]) with a valid name
/// after it (git's ref-format rules for each component).
///
/// ```
/// use orchestrator_core::git::check_own_ref;
/// assert!(check_own_ref("refs/orchestrator/sessions/s1/turn-0").is_ok());
/// assert!(check_own_ref("refs/heads/main").is_err());
/// assert!(check_own_ref("refs/orchestrator/a..b").is_err());
/// ```
pub fn check_own_ref(name: &str) -> Result<(), GitError> {
    let invalid = |reason: &str| GitError::InvalidBranchName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    let Some(rest) = name.strip_prefix(OWN_REFS) else {
        return Err(invalid("the SDK only writes refs under refs/orchestrator/"));
    };
    let bad_part = |part: &str| {
        part.is_empty()
            || part.starts_with('.')
            || part.ends_with(".lock")
            || part.ends_with('.')
            || part.contains("..")
            || part.contains("@{")
            || part
                .chars()
                .any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c))
    };
    if rest.split('/').any(bad_part) {
        return Err(invalid(
            "a component is empty, starts with `.`, ends with `.lock` or `.`, or holds `..`, `@{`, a space, a control character or one of ~ ^ : ? * [ \\",
        ));
    }
    Ok(())
}

/// Resolves `path` physically: `..` and `.` are applied and every existing prefix has its
/// symbolic links resolved, so the result is where the path really points (its missing tail
/// kept as written). On failure, the prefix that could not be resolved and why. Shared by the
/// git layers to keep worktree paths inside their roots.
///
/// ```
/// let dir = std::env::temp_dir();
/// let here = orchestrator_core::git::resolve_physical(&dir.join("a/../b")).unwrap();
/// assert!(here.ends_with("b"));
/// ```
pub fn resolve_physical(path: &Path) -> Result<PathBuf, (PathBuf, std::io::Error)> {
    let mut resolved = PathBuf::new();
    // Once `resolved` is canonical, a component that exists and is not a symbolic link keeps
    // it so: only the first existing component and each link need `canonicalize`, which reads
    // every component of the path again (canonicalizing each prefix cost a path of k
    // components k² reads, for every worktree path the git layer checks).
    let mut canonical = false;
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                resolved.pop();
            }
            std::path::Component::CurDir => {}
            other => {
                resolved.push(other);
                match std::fs::symlink_metadata(&resolved) {
                    Ok(meta) if canonical && !meta.file_type().is_symlink() => {}
                    Ok(_) => {
                        resolved = std::fs::canonicalize(&resolved).map_err(|e| (resolved, e))?;
                        canonical = true;
                    }
                    // Missing: the tail is kept as written.
                    Err(_) => {}
                }
            }
        }
    }
    Ok(resolved)
}

/// Whether `content` has lines starting with `<<<<<<<` and with `>>>>>>>` (a conflict left
/// unresolved).
pub fn has_conflict_markers(content: &[u8]) -> bool {
    let has = |marker: &[u8]| {
        content
            .split(|b| *b == b'\n')
            .any(|line| line.starts_with(marker))
    };
    has(b"<<<<<<<") && has(b">>>>>>>")
}

#[cfg(test)]
mod tests {
    use super::resolve_physical;

    #[test]
    fn a_path_resolves_through_links_dots_and_a_missing_tail() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        std::fs::create_dir_all(root.join("real/inner"))?;
        std::fs::create_dir_all(root.join("other"))?;
        std::os::unix::fs::symlink("real", root.join("link"))?;
        // A link inside a resolved folder, relative to where it lies, leading out of it.
        std::os::unix::fs::symlink("../../other", root.join("real/inner/up"))?;
        // A chain: one link to another.
        std::os::unix::fs::symlink("link", root.join("chain"))?;

        let cases = [
            ("link/inner", "real/inner"),
            ("chain/inner/./up", "other"),
            ("link/inner/up/../x/y", "x/y"),
            ("link/missing/../inner", "real/inner"),
            ("real/inner/nope/deeper", "real/inner/nope/deeper"),
            ("other", "other"),
        ];
        for (given, want) in cases {
            assert_eq!(
                resolve_physical(&root.join(given)).map_err(|(_, e)| e)?,
                root.join(want),
                "{given}"
            );
        }
        // `..` after a link applies to where the link points, as the kernel's lookup does.
        assert_eq!(
            resolve_physical(&root.join("link/inner/up/..")).map_err(|(_, e)| e)?,
            root
        );
        // A link to nothing is an error naming it.
        std::os::unix::fs::symlink("gone", root.join("dangling"))?;
        let (at, _) =
            resolve_physical(&root.join("dangling/x")).expect_err("a dangling link is an error");
        assert_eq!(at, root.join("dangling"));
        Ok(())
    }
}
