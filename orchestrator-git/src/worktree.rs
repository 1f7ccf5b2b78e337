//! Linked worktrees in git's own on-disk format.
//!
//! libgit2's `git_worktree_add` always creates a branch named after the worktree; the orchestrator
//! wants detached worktrees, so the administrative files are written here exactly as
//! `git worktree add --detach` writes them:
//!
//! ```text
//! <common>/worktrees/<name>/gitdir     "<worktree>/.git"
//! <common>/worktrees/<name>/commondir  "../.."
//! <common>/worktrees/<name>/HEAD       "<commit id>"
//! <common>/worktrees/<name>/locked     "initializing" (only while being created)
//! <worktree>/.git                      "gitdir: <common>/worktrees/<name>"
//! ```
//!
//! The `locked` marker keeps `git worktree prune` away during creation and tells a retry that a
//! previous attempt did not finish.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::{Oid, Repository};
use orchestrator_core::git::{GitError, JobBranch};

use crate::builder::PoolLimits;
use crate::checkout;
use crate::error::{self, Context};
use crate::paths::{self, Mark, Marks};
use crate::pool;
use crate::refs;
use crate::repos::Repos;

/// Content of the `locked` marker while a worktree is being created.
const INITIALIZING: &str = "initializing";

/// The worktree folder an administrative folder (`<common>/worktrees/<name>`) points at.
pub(crate) fn registered_path(admin: &Path) -> Option<PathBuf> {
    let gitdir = std::fs::read_to_string(admin.join("gitdir")).ok()?;
    let dot_git = PathBuf::from(gitdir.trim_end_matches(['\n', '\r']));
    let folder = dot_git.parent()?.to_path_buf();
    Some(paths::resolve_physical(&folder).unwrap_or(folder))
}

/// The administrative folder of the worktree at `path` (physical), if the repository has one.
fn admin_of(repo: &Repository, path: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(repo.commondir().join("worktrees")).ok()?;
    entries
        .flatten()
        .map(|e| e.path())
        .find(|admin| registered_path(admin).as_deref() == Some(path))
}

/// The administrative folder the `.git` file of the worktree at `path` names, as written.
pub(crate) fn linked_admin(path: &Path) -> Option<PathBuf> {
    let content = std::fs::read_to_string(path.join(".git")).ok()?;
    content
        .trim_end()
        .strip_prefix("gitdir: ")
        .map(PathBuf::from)
}

/// Whether the HEAD of the linked worktree at `path` names a branch (`ref: ...`) rather than
/// holding a commit id (detached), read from its HEAD file; `None` when the files are not of
/// that plain form (libgit2 is asked then).
pub(crate) fn head_names_branch(path: &Path) -> Option<bool> {
    let head = path.join(linked_admin(path)?).join("HEAD");
    // A HEAD that is a symbolic link (git before 1.5 wrote one) names a branch by pointing at
    // it, and reading through it would show the branch's commit id: left to libgit2.
    if !std::fs::symlink_metadata(&head).ok()?.is_file() {
        return None;
    }
    let head = std::fs::read_to_string(head).ok()?;
    let head = head.trim_end();
    if head.starts_with("ref: ") {
        Some(true)
    } else if matches!(head.len(), 40 | 64) && head.bytes().all(|b| b.is_ascii_hexdigit()) {
        Some(false)
    } else {
        None
    }
}

/// Whether `path/.git` points into this repository's worktree administration (a worktree of
/// ours, even if its administrative folder is gone).
fn points_to_us(repo: &Repository, path: &Path) -> bool {
    let Some(target) = linked_admin(path) else {
        return false;
    };
    let Ok(common) = std::fs::canonicalize(repo.commondir()) else {
        return false;
    };
    paths::resolve_physical(&target)
        .is_ok_and(|t| t.parent() == Some(common.join("worktrees").as_path()))
}

/// Whether the `locked` marker in `admin` says a creation is under way (or was interrupted).
fn is_initializing(admin: &Path) -> bool {
    std::fs::read_to_string(admin.join("locked")).is_ok_and(|reason| reason.trim() == INITIALIZING)
}

/// Whether the worktree with administrative folder `admin` is complete and usable: its `.git`
/// file still names `admin` (a job may have pointed it at another repository) and its HEAD is
/// a readable commit.
fn is_valid(admin: &Path, path: &Path) -> bool {
    is_valid_by(admin, path, None)
}

/// [`is_valid`], reading HEAD through `kept` (the worktree's handle kept in a [`Repos`],
/// which is the repository a fresh handle would open) when given.
fn is_valid_by(admin: &Path, path: &Path, kept: Option<&Repository>) -> bool {
    if is_initializing(admin) {
        return false;
    }
    let names_admin = linked_admin(path)
        .and_then(|named| paths::resolve_physical(&named).ok())
        .zip(paths::resolve_physical(admin).ok())
        .is_some_and(|(named, admin)| named == admin);
    let has_commit = |wt: &Repository| wt.head().and_then(|h| h.peel_to_commit()).is_ok();
    names_admin
        && match kept {
            Some(wt) => has_commit(wt),
            None => Repository::open(path).is_ok_and(|wt| has_commit(&wt)),
        }
}

/// Deletes the folder at `path` (physical, confined) unless it is a valid worktree of `repo`,
/// with its registration if one is left. Returns whether anything was deleted.
pub(crate) fn remove_broken(repo: &Repository, path: &Path) -> Result<bool, GitError> {
    if is_creating(path) {
        return Ok(false); // not broken: being made
    }
    let admin = admin_of(repo, path);
    if admin
        .as_deref()
        .is_some_and(|a| path.is_dir() && is_valid(a, path))
    {
        return Ok(false);
    }
    let exists = std::fs::symlink_metadata(path).is_ok();
    paths::remove_tree(path)?;
    if let Some(admin) = &admin {
        paths::remove_tree(admin)?;
    }
    Ok(exists || admin.is_some())
}

/// Worktrees (physical paths) this process is creating: their files are written without the
/// repository's lock, so the operations that take it leave them alone meanwhile.
static CREATING: Marks = Marks::new();

/// Whether this process is creating the worktree at `path` (physical) right now.
pub(crate) fn is_creating(path: &Path) -> bool {
    CREATING.contains(path)
}

/// A worktree creation begun by [`start`] under the repository's lock; [`Creation::finish`]
/// writes its files without it. Meanwhile the worktree is registered with the `locked` marker
/// of a creation under way and has its `.git` file, and [`is_creating`] tells the operations
/// that do take the lock to leave it alone. Dropped unfinished, it leaves what a crash would:
/// an unfinished creation that the next attempt starts over.
pub(crate) enum Creation {
    /// The valid worktree was already there.
    Done,
    /// Every file is to be written.
    Fresh {
        path: PathBuf,
        admin: PathBuf,
        commit: Oid,
        _creating: Mark,
    },
    /// A pooled worktree is to be brought to the commit.
    Pooled(pool::Taken, Mark),
}

/// Starts creating a detached worktree of `repo` at `path` (physical, confined) checked out at
/// `commit`, or keeps the valid one that is already there. A pooled worktree is used when
/// there is one (within `pool`'s limits), else every file is written. `Ok(None)`: nothing was
/// done because `settling` (an entry is being settled into the pool) and the pool has no ready
/// entry; the caller waits for the settle and starts again.
pub(crate) fn start(
    repo: &Repository,
    path: &Path,
    commit: Oid,
    pool: &PoolLimits,
    settling: bool,
) -> Result<Option<Creation>, GitError> {
    if is_creating(path) {
        return Err(GitError::other(
            "create worktree",
            format!("{} is being created already", path.display()),
        ));
    }
    if let Some(admin) = admin_of(repo, path) {
        if path.is_dir() && is_valid(&admin, path) {
            return Ok(Some(Creation::Done));
        }
        // An attempt that did not finish: start over.
        paths::remove_tree(path)?;
        paths::remove_tree(&admin)?;
    } else if path.exists() && !paths::is_empty_dir(path) {
        if !points_to_us(repo, path) {
            return Err(GitError::other(
                "create worktree",
                format!(
                    "{} exists and is not a worktree of this repository",
                    path.display()
                ),
            ));
        }
        paths::remove_tree(path)?; // ours, but its registration is gone: recreate it
    }
    checkout::tree_of(repo, commit)?; // a commit with a readable tree, before touching the disk
    if settling && pool.enabled() && !pool::has_ready(repo) {
        return Ok(None);
    }
    let creating = CREATING.mark(path);
    if let Some(taken) = pool::take(repo, path, commit, pool)? {
        return Ok(Some(Creation::Pooled(taken, creating)));
    }
    std::fs::create_dir_all(path).map_err(|e| error::io("create worktree", path, e))?;
    let admin = claim_admin_dir(repo, path)?;
    if let Err(e) = register(&admin, path, commit) {
        let _ = paths::remove_tree(path);
        let _ = paths::remove_tree(&admin);
        return Err(e);
    }
    Ok(Some(Creation::Fresh {
        path: path.to_path_buf(),
        admin,
        commit,
        _creating: creating,
    }))
}

impl Creation {
    /// Writes the worktree's files and index and ends its registration. `Ok(false)`: a pooled
    /// worktree turned out unusable and is gone; the caller starts again without the pool.
    /// (`repos`, `worktrees` and `repo`: see [`pool::Taken::fill`].)
    pub(crate) fn finish(
        self,
        repos: &Repos,
        worktrees: &Repos,
        repo: &Path,
    ) -> Result<bool, GitError> {
        match self {
            Creation::Done => Ok(true),
            Creation::Pooled(taken, _creating) => taken.fill(repos, worktrees, repo),
            Creation::Fresh {
                path,
                admin,
                commit,
                ..
            } => {
                let written = worktrees.with(&path, |wt| {
                    let tree = checkout::tree_of(wt, commit)?;
                    checkout::populate(wt, &tree)
                });
                match written {
                    Ok(()) => finish_registration(&admin).map(|()| true),
                    Err(e) => {
                        let _ = paths::remove_tree(&path);
                        let _ = paths::remove_tree(&admin);
                        Err(e)
                    }
                }
            }
        }
    }
}

/// Ends a creation: removes the `locked` marker [`register`] wrote.
pub(crate) fn finish_registration(admin: &Path) -> Result<(), GitError> {
    std::fs::remove_file(admin.join("locked")).map_err(|e| error::io("create worktree", admin, e))
}

/// Creates `<common>/worktrees/<name>` with a name derived from the folder's and unused yet.
pub(crate) fn claim_admin_dir(repo: &Repository, path: &Path) -> Result<PathBuf, GitError> {
    let parent = repo.commondir().join("worktrees");
    std::fs::create_dir_all(&parent).map_err(|e| error::io("create worktree", &parent, e))?;
    let base: String = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let base = base.trim_start_matches('.');
    let base = if base.is_empty() { "worktree" } else { base };
    for n in 0..10_000u32 {
        let name = if n == 0 {
            base.to_string()
        } else {
            format!("{base}{n}")
        };
        let admin = parent.join(name);
        match std::fs::create_dir(&admin) {
            Ok(()) => return Ok(admin),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(error::io("create worktree", &admin, e)),
        }
    }
    Err(GitError::other("create worktree", "no free worktree name"))
}

/// Writes the administrative files and the worktree's `.git` file, with the `locked` marker
/// of a creation under way.
fn register(admin: &Path, path: &Path, commit: Oid) -> Result<(), GitError> {
    register_from(admin, path, commit, path)
}

/// [`register`] for a worktree whose folder is still at `folder` and will be renamed to
/// `path`: its `.git` file is written there, so that the worktree is never at `path` without
/// one (a crash then leaves what a retry knows as an unfinished creation of ours).
pub(crate) fn register_from(
    admin: &Path,
    path: &Path,
    commit: Oid,
    folder: &Path,
) -> Result<(), GitError> {
    let write = |file: PathBuf, content: String| {
        std::fs::write(&file, content).map_err(|e| error::io("create worktree", &file, e))
    };
    write(admin.join("locked"), format!("{INITIALIZING}\n"))?;
    write(admin.join("commondir"), "../..\n".to_string())?;
    write(
        admin.join("gitdir"),
        format!("{}\n", path.join(".git").display()),
    )?;
    write(admin.join("HEAD"), format!("{commit}\n"))?;
    write(
        folder.join(".git"),
        format!("gitdir: {}\n", admin.display()),
    )
}

/// Detaches the linked worktree `wt` of `repo` if a job attached its HEAD to a branch, and
/// deletes that branch when the job created it: its reflog begins with a creation in a later
/// second than the worktree's registration, and no other checkout holds it.
pub(crate) fn release_branch(
    repo: &Repository,
    wt: &Repository,
) -> Result<Option<JobBranch>, GitError> {
    let head = wt.head().ctx("read HEAD")?;
    if !head.is_branch() {
        return Ok(None);
    }
    let name = head.shorthand().unwrap_or_default().to_string();
    let tip = head.peel_to_commit().ctx("read HEAD")?.id();
    wt.set_head_detached(tip).ctx("detach HEAD")?;
    let registered = std::fs::metadata(wt.path().join("gitdir"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64);
    let reference = refs::branch_ref(&name);
    let created = repo.reflog(&reference).ok().and_then(|log| {
        // Entries are newest first: the creation is the last one.
        let first = log.iter().next_back()?;
        first
            .id_old()
            .is_zero()
            .then(|| first.committer().when().seconds())
    });
    // Reflog times have whole seconds: only a branch made in a later second than the
    // registration is surely the job's. One made in the same second is left (and reported):
    // a user's branch must never be taken for a job's.
    let made_by_job = matches!((created, registered), (Some(c), Some(r)) if c > r);
    let deleted = made_by_job && refs::checkouts_of(repo, &name)?.is_empty() && {
        refs::protect(repo, &name, "delete")?;
        let mut branch = repo
            .find_branch(&name, git2::BranchType::Local)
            .ctx("find branch")?;
        branch.delete().ctx("delete branch")?;
        true
    };
    Ok(Some(JobBranch { name, deleted }))
}

/// What [`remove`] did.
pub(crate) enum Removal {
    /// The worktree and its registration are gone (or were never there).
    Done,
    /// It is gone from its path and from git, into the pool: [`pool::Parked::settle`]
    /// finishes that without the repository's lock.
    Parked(pool::Parked),
    /// This process is creating it right now (see [`is_creating`]): nothing was done.
    Busy,
}

/// Removes the worktree at `path` (physical, confined) and its registration. A missing worktree
/// is fine; a folder that is not a worktree of `repo` is refused. With `pool`, a valid worktree
/// is parked in the pool (within its limits) instead of deleted; the worktree's handle kept in
/// its [`Repos`] is dropped then, and the index entries it has loaded go with the worktree.
pub(crate) fn remove(
    repo: &Repository,
    path: &Path,
    pool: Option<(&PoolLimits, &Repos)>,
) -> Result<Removal, GitError> {
    if is_creating(path) {
        return Ok(Removal::Busy);
    }
    let admin = admin_of(repo, path);
    if let (Some((limits, worktrees)), Some(admin)) = (pool, &admin) {
        let kept = worktrees.take(path);
        if path.is_dir() && is_valid_by(admin, path, kept.as_ref()) {
            // The index as the job's commit left it loaded, when that is still its file.
            let index = kept.and_then(|wt| crate::repos::index_entries(&wt).ok());
            if let Some(parked) = pool::park(repo, path, admin, limits, index)? {
                return Ok(Removal::Parked(parked));
            }
        }
    }
    let exists = std::fs::symlink_metadata(path).is_ok();
    if exists && admin.is_none() && !points_to_us(repo, path) && !paths::is_empty_dir(path) {
        return Err(GitError::other(
            "remove worktree",
            format!(
                "{} is not a worktree of this repository; refusing to delete it",
                path.display()
            ),
        ));
    }
    paths::remove_tree(path)?;
    if let Some(admin) = admin {
        paths::remove_tree(&admin)?;
    }
    Ok(Removal::Done)
}

/// The registered linked worktrees whose folder exists, sorted.
pub(crate) fn list(repo: &Repository) -> Result<Vec<PathBuf>, GitError> {
    let dir = repo.commondir().join("worktrees");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(error::io("list worktrees", &dir, e)),
    };
    let found: BTreeSet<PathBuf> = entries
        .flatten()
        .filter_map(|e| registered_path(&e.path()))
        .filter(|p| p.join(".git").exists())
        .collect();
    Ok(found.into_iter().collect())
}

/// How long an unfinished creation's registration is taken for one under way. A creation
/// holds its registration without its folder's `.git` file for a few system calls only (the
/// repository's lock covers that in this process, not in another).
const CREATION_GRACE: Duration = Duration::from_secs(60);

/// Forgets registrations whose folder is gone (as `git worktree prune`), keeping locked ones
/// unless the lock is an unfinished creation of ours older than [`CREATION_GRACE`] (a younger
/// one may be another process's, under way). Returns the names pruned.
pub(crate) fn prune(repo: &Repository) -> Result<Vec<String>, GitError> {
    let dir = repo.commondir().join("worktrees");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut pruned = Vec::new();
    for admin in entries.flatten().map(|e| e.path()) {
        let alive = registered_path(&admin).is_some_and(|p| p.join(".git").exists());
        let lock = std::fs::read_to_string(admin.join("locked")).ok();
        // A folder without `gitdir` or `locked` is a creation's first moment, or a crash's.
        let unfinished = match &lock {
            Some(reason) => reason.trim() == INITIALIZING,
            None => !admin.join("gitdir").exists(),
        };
        let locked = lock.is_some() && !unfinished;
        let under_way = unfinished && !paths::older_than(&admin, CREATION_GRACE);
        if !alive && !locked && !under_way {
            paths::remove_tree(&admin)?;
            pruned.push(
                admin
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
        }
    }
    Ok(pruned)
}

/// Removes the worktrees of `repo` directly under `root` that are not in `live` (physical
/// paths), then prunes. Folders that are not worktrees of `repo` are left alone. Returns the
/// folders removed.
pub(crate) fn remove_orphans(
    repo: &Repository,
    root: &Path,
    live: &BTreeSet<PathBuf>,
) -> Result<Vec<PathBuf>, GitError> {
    let mut removed = Vec::new();
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            prune(repo)?;
            return Ok(removed);
        }
        Err(e) => return Err(error::io("remove orphaned worktrees", root, e)),
    };
    for entry in entries.flatten() {
        let path = paths::resolve_physical(&entry.path())?;
        if live.contains(&path) || !path.starts_with(root) || !path.is_dir() || is_creating(&path) {
            continue;
        }
        let ours = admin_of(repo, &path).is_some() || points_to_us(repo, &path);
        if ours {
            // A crash's leftover is deleted, never pooled.
            remove(repo, &path, None)?;
            removed.push(path);
        }
    }
    prune(repo)?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::head_names_branch;

    #[test]
    fn a_head_file_tells_a_branch_from_a_commit_and_anything_else_is_left_to_libgit2(
    ) -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let (wt, admin) = (dir.path().join("wt"), dir.path().join("admin"));
        std::fs::create_dir_all(&wt)?;
        std::fs::create_dir_all(&admin)?;
        assert_eq!(head_names_branch(&wt), None, "no .git file");
        // A relative gitdir, as `worktree.useRelativePaths` writes it.
        std::fs::write(wt.join(".git"), "gitdir: ../admin\n")?;
        let cases = [
            ("ref: refs/heads/topic\n", Some(true)),
            ("0123456789abcdef0123456789abcdef01234567\n", Some(false)),
            ("0123456789abcdef\n", None),
            ("not a head\n", None),
        ];
        for (head, want) in cases {
            std::fs::write(admin.join("HEAD"), head)?;
            assert_eq!(head_names_branch(&wt), want, "{head:?}");
        }
        // A HEAD linked to a branch's file holds that branch's commit id when read through.
        std::fs::remove_file(admin.join("HEAD"))?;
        std::fs::write(
            admin.join("topic"),
            "0123456789abcdef0123456789abcdef01234567\n",
        )?;
        std::os::unix::fs::symlink("topic", admin.join("HEAD"))?;
        assert_eq!(head_names_branch(&wt), None, "a linked HEAD");
        Ok(())
    }
}
