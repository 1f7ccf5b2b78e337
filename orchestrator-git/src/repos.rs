//! Repositories kept open between the operations that hold a repository's lock.
//!
//! Opening a repository reads its configuration (system, global, local, worktree), checks its
//! ownership and finds its folders: about forty system calls, several times per job. And a
//! repository opened afresh has an empty object cache, so each operation read the same
//! commits and trees again (a merge's ancestry walk, the target's tree). A kept repository
//! sees what others change as a fresh one would: libgit2 reads references from disk at each
//! lookup, reloads a configuration file whose stamp changed, and looks for new packs when an
//! object is missing; objects are named by their content, so a cached one never goes stale.
//!
//! A repository is taken out while an operation uses it, so no two threads share one (a
//! `git2::Repository` is `Send`, not `Sync`). One replaced at the same path (deleted and
//! created again) is told apart by the identity of its git folder and opened afresh.
//!
//! Linked worktrees are kept the same way (a [`Repos`] of their own, from a creation to the
//! job's commit). A worktree's git folder is its administrative folder, and its `.git` file
//! counts too: a job that deletes or rewrites that file gets, as with a fresh handle, the
//! repository the file now names or none. The index of a kept handle is libgit2's loaded
//! one: an operation reads it through [`current_index`], which reloads it when the file
//! changed.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use git2::{Index, IndexEntry, Repository};
use orchestrator_core::git::GitError;

use crate::error::Context;
use crate::paths::FileStamp;
use crate::refs;

/// How many repositories are kept open; beyond it, one is closed to make room (a process
/// works on a few repositories at a time, and each keeps file descriptors and caches).
const KEPT: usize = 8;

/// Open repositories by the path they were opened at.
#[derive(Default)]
pub(crate) struct Repos {
    idle: Mutex<HashMap<PathBuf, Kept>>,
}

struct Kept {
    repo: Repository,
    /// The repository's git folder when it was opened: see [`identity`].
    id: Identity,
}

impl std::fmt::Debug for Repos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.idle.lock().map_or(0, |idle| idle.len());
        f.debug_struct("Repos").field("kept", &kept).finish()
    }
}

/// What tells the repository a handle was opened on from one at the same path since.
#[derive(PartialEq)]
struct Identity {
    /// Device, inode and (where the file system records it) creation time of the git folder:
    /// a folder created again may get the inode of the one deleted.
    git_dir: (u64, u64, Option<std::time::SystemTime>),
    /// The working folder's `.git` when it is a file (a linked worktree's), which a job may
    /// rewrite in place. (A main repository's is the git folder itself, whose times change
    /// with every lock file.)
    dot_git: Option<FileStamp>,
}

/// The [`Identity`] of `repo`, if its git folder exists.
fn identity(repo: &Repository) -> Option<Identity> {
    let git_dir = std::fs::metadata(repo.path()).ok()?;
    let dot_git = repo
        .workdir()
        .and_then(|w| std::fs::symlink_metadata(w.join(".git")).ok())
        .filter(|m| !m.is_dir())
        .map(|m| FileStamp::of(&m));
    Some(Identity {
        git_dir: (git_dir.dev(), git_dir.ino(), git_dir.created().ok()),
        dot_git,
    })
}

/// The index of `repo`, as its file is now: a kept handle's is the one it loaded, which
/// `Index::read(false)` reloads when the file changed (a job ran `git add`, say) and leaves
/// as it is otherwise.
pub(crate) fn current_index(repo: &Repository) -> Result<Index, GitError> {
    let mut index = repo.index().ctx("read index")?;
    index.read(false).ctx("read index")?;
    Ok(index)
}

/// The entries of `repo`'s index as its file holds them now (see [`current_index`]): a kept
/// handle's loaded index is not read again when the file is unchanged.
pub(crate) fn index_entries(repo: &Repository) -> Result<Vec<IndexEntry>, GitError> {
    Ok(current_index(repo)?.iter().collect())
}

impl Repos {
    /// Takes the handle kept for `path` out for good, if it is still the repository there:
    /// that of a worktree being removed, which would only go stale.
    pub(crate) fn take(&self, path: &Path) -> Option<Repository> {
        let kept = self.lock().remove(path)?;
        (identity(&kept.repo).as_ref() == Some(&kept.id)).then_some(kept.repo)
    }

    /// Runs `f` on the repository at `path`: a kept one when it is still the repository there,
    /// else one opened now. It is kept afterwards when `f` succeeded.
    pub(crate) fn with<T>(
        &self,
        path: &Path,
        f: impl FnOnce(&Repository) -> Result<T, GitError>,
    ) -> Result<T, GitError> {
        let kept = self.lock().remove(path);
        let kept = match kept {
            Some(k) if identity(&k.repo).as_ref() == Some(&k.id) => k,
            _ => {
                let repo = refs::open(path)?;
                let Some(id) = identity(&repo) else {
                    // Nothing to tell a replacement by: used once, not kept.
                    return f(&repo);
                };
                Kept { repo, id }
            }
        };
        let result = f(&kept.repo);
        if result.is_ok() {
            let mut idle = self.lock();
            // Full, and not replacing a handle opened for the same path meanwhile: one goes.
            if idle.len() >= KEPT && !idle.contains_key(path) {
                if let Some(other) = idle.keys().next().cloned() {
                    idle.remove(&other);
                }
            }
            idle.insert(path.to_path_buf(), kept);
        }
        result
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Kept>> {
        // A panic mid-operation leaves the map whole (each change is one insert or remove).
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Context;
    use git2::Oid;

    type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

    fn init(path: &Path) -> Result<Repository> {
        let repo = Repository::init(path)?;
        let sig = git2::Signature::now("t", "t@example.invalid")?;
        let tree = repo.treebuilder(None)?.write()?;
        repo.commit(
            Some("HEAD"),
            &sig,
            &sig,
            "base",
            &repo.find_tree(tree)?,
            &[],
        )?;
        Ok(repo)
    }

    fn head(repo: &Repository) -> std::result::Result<Option<Oid>, GitError> {
        Ok(repo.head().ctx("read HEAD")?.target())
    }

    #[test]
    fn a_kept_repository_sees_new_refs_and_a_replaced_one_is_opened_again() -> Result {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("r");
        let first = init(&path)?;
        let repos = Repos::default();
        assert_eq!(repos.with(&path, head)?, head(&first)?);

        // A commit made through another handle is seen by the kept one.
        let sig = git2::Signature::now("t", "t@example.invalid")?;
        let parent = first.head()?.peel_to_commit()?;
        let next = first.commit(
            Some("HEAD"),
            &sig,
            &sig,
            "next",
            &parent.tree()?,
            &[&parent],
        )?;
        drop(parent);
        assert_eq!(repos.with(&path, head)?, Some(next));

        // Deleted and created again at the same path: the new repository is read, not the
        // kept handle's.
        drop(first);
        std::fs::remove_dir_all(&path)?;
        let again = init(&path)?;
        assert_eq!(repos.with(&path, head)?, head(&again)?);

        // Gone: the error names it, and nothing is kept for it.
        std::fs::remove_dir_all(&path)?;
        let err = repos.with(&path, head).expect_err("no repository is there");
        assert!(err.to_string().contains("git repository at"), "{err}");
        assert!(repos.lock().is_empty());
        Ok(())
    }

    #[test]
    fn a_failed_operation_does_not_keep_its_repository_and_the_count_is_bounded() -> Result {
        let dir = tempfile::tempdir()?;
        let repos = Repos::default();
        let path = dir.path().join("r");
        init(&path)?;
        let failed: std::result::Result<(), _> =
            repos.with(&path, |_| Err(GitError::other("test", "failed on purpose")));
        assert!(failed.is_err());
        assert!(repos.lock().is_empty());
        for i in 0..KEPT + 3 {
            let p = dir.path().join(format!("r{i}"));
            init(&p)?;
            repos.with(&p, |_| Ok(()))?;
        }
        assert_eq!(repos.lock().len(), KEPT);

        // A handle put back where one for the same path was kept meanwhile (an operation on
        // another thread) replaces it; no other repository is closed for it.
        let kept: Vec<PathBuf> = repos.lock().keys().cloned().collect();
        for path in &kept {
            repos.with(path, |_| repos.with(path, |_| Ok(())))?;
        }
        let mut now: Vec<PathBuf> = repos.lock().keys().cloned().collect();
        now.sort();
        let mut before = kept;
        before.sort();
        assert_eq!(now, before);
        Ok(())
    }

    #[test]
    fn a_kept_worktree_whose_git_file_is_rewritten_or_deleted_is_opened_again() -> Result {
        let dir = tempfile::tempdir()?;
        let main = init(&dir.path().join("main"))?;
        let wt_path = dir.path().join("wt");
        main.worktree("wt", &wt_path, None)?;
        let repos = Repos::default();
        let admin = |r: &Repository| Ok(r.path().to_path_buf());
        let first = repos.with(&wt_path, admin)?;
        assert_eq!(repos.with(&wt_path, admin)?, first, "kept");

        // Pointed elsewhere in place (same inode): the kept handle is not used.
        let dot_git = wt_path.join(".git");
        std::fs::write(&dot_git, "gitdir: /nonexistent/elsewhere/and/longer\n")?;
        let err = repos.with(&wt_path, admin).expect_err("points nowhere");
        assert!(err.to_string().contains("repository"), "{err}");
        // Deleted: nor is it.
        std::fs::remove_file(&dot_git)?;
        assert!(repos.with(&wt_path, admin).is_err());
        assert!(repos.lock().is_empty());
        Ok(())
    }
}
