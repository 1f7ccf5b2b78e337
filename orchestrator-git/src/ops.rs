//! [`Git2Operations`]: the [`GitOperations`] implementation, the blocking-pool and
//! per-repository-lock plumbing its methods share, and the small worktree helpers they use.
//! Its options are in `builder.rs`; merging into a worktree in `worktree_merge.rs`, landing on a
//! branch in `landing.rs`, exclude patterns and stale locks in `housekeeping.rs`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use git2::{Oid, Repository, Signature};
use orchestrator_core::git::{
    check_own_ref, CommitId, ConflictResolver, DiffStats, GitError, GitOperations, JobBranch,
    MergeStyle,
};

use crate::builder::{Git2OperationsBuilder, Identity, PoolLimits};
use crate::error::{self, Context};
use crate::housekeeping::{exclude, stale_locks};
use crate::landing::land;
use crate::merge::{self, Step};
use crate::repos::Repos;
use crate::settles::{self, Settles};
use crate::worktree::Removal;
use crate::worktree_merge::{advance, Advance};
use crate::{checkout, paths, pool, refs, remote, worktree};

/// How often a removal looks again whether the creation of the same worktree has ended.
const CREATION_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// [`GitOperations`] on libgit2. Cheap to clone; clones share the per-repository locks.
///
/// Worktree administration, ref updates and merges into branches are serialized per repository
/// within a process; across processes, ref updates stay compare-and-swap. A worktree's files
/// are written, and a pooled worktree's tidied, outside that lock: only the registration
/// is serialized, so that jobs starting together check out at once (a removal of a worktree
/// being created waits for its creation).
///
/// Making one turns off libgit2's strict object creation, a setting of the whole process (see
/// [`git2::opts::strict_object_creation`]): every tree, index entry and commit these
/// operations write references objects they just read from the repository or wrote to it, and
/// checking each again costs a file read per loose object (most of a job's commit on a
/// repository of a thousand files). It also turns off the hashing of every object read to
/// check it against its name, as `git` does not hash on reads either: a damaged object still
/// fails to inflate (each object, loose or packed, is a zlib stream with its own checksum).
#[derive(Debug, Clone)]
pub struct Git2Operations {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    identity: Option<Identity>,
    fallback: Identity,
    /// Worktree roots besides the repository's folder: from the builder, and added by the
    /// engine for plans with a root of their own ([`GitOperations::allow_worktree_root`]).
    roots: std::sync::RwLock<Vec<PathBuf>>,
    locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
    /// The bounds of each repository's worktree pool (`pool.rs`).
    pool: PoolLimits,
    /// Worktrees being removed, and so maybe settled into a pool, by repository (as the
    /// caller names it: the engine passes a plan's repository path the same way each time).
    settles: Settles,
    /// Repositories kept open for the operations that hold their lock (`repos.rs`).
    pub(crate) repos: Repos,
    /// Worktrees kept open from their creation to their job's commit (`repos.rs`).
    pub(crate) worktrees: Repos,
    /// Repositories kept open only to walk their history (merge bases; see `merge_step`).
    walks: Repos,
}

impl Default for Git2Operations {
    fn default() -> Self {
        Self::new()
    }
}

impl Git2Operations {
    /// Operations with the default options: identity from the repository's configuration, else
    /// `Orchestrator <orchestrator@localhost>`; worktrees only inside the repository folder.
    pub fn new() -> Self {
        // The default identity is valid: nothing to check.
        Git2OperationsBuilder::default().assemble()
    }

    /// A builder for non-default options.
    pub fn builder() -> Git2OperationsBuilder {
        Git2OperationsBuilder::default()
    }

    /// The operations with these options, unchecked (see [`Git2OperationsBuilder::build`]).
    pub(crate) fn with_options(
        identity: Option<Identity>,
        fallback: Identity,
        roots: Vec<PathBuf>,
        pool: PoolLimits,
    ) -> Self {
        static TRUST_OWN_OBJECTS: std::sync::Once = std::sync::Once::new();
        TRUST_OWN_OBJECTS.call_once(|| {
            git2::opts::strict_object_creation(false);
            git2::opts::strict_hash_verification(false);
        });
        Git2Operations {
            inner: Arc::new(Inner {
                identity,
                fallback,
                roots: std::sync::RwLock::new(roots),
                locks: Mutex::new(HashMap::new()),
                pool,
                settles: Settles::default(),
                repos: Repos::default(),
                worktrees: Repos::default(),
                walks: Repos::default(),
            }),
        }
    }

    /// Forgets worktree registrations whose folder is gone (`git worktree prune`). Returns the
    /// names of the registrations removed.
    pub async fn prune(&self, repo: &Path) -> Result<Vec<String>, GitError> {
        self.locked_repo(repo, "prune worktrees", |_, r| worktree::prune(r))
            .await
    }

    /// Runs `f` on the blocking pool.
    pub(crate) async fn run<T, F>(&self, operation: &str, f: F) -> Result<T, GitError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, GitError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| GitError::other(operation, e))?
    }

    /// Runs `f` on the blocking pool while holding the repository's lock.
    async fn locked<T, F>(&self, repo: &Path, operation: &str, f: F) -> Result<T, GitError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, GitError> + Send + 'static,
    {
        let key = tokio::fs::canonicalize(repo)
            .await
            .unwrap_or_else(|_| repo.to_path_buf());
        let lock = {
            let mut locks = self
                .inner
                .locks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            Arc::clone(locks.entry(key).or_default())
        };
        let guard = lock.lock_owned().await;
        self.run(operation, move |inner| {
            let result = f(inner);
            drop(guard);
            result
        })
        .await
    }

    /// Opens the repository at `repo` on the blocking pool and runs `f` on it.
    async fn on_repo<T, F>(&self, repo: &Path, operation: &str, f: F) -> Result<T, GitError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &Repository) -> Result<T, GitError> + Send + 'static,
    {
        let path = repo.to_path_buf();
        self.run(operation, move |inner| f(inner, &refs::open(&path)?))
            .await
    }

    /// [`Self::on_repo`] while holding the repository's lock, on a repository kept open
    /// between such operations (`repos.rs`).
    async fn locked_repo<T, F>(&self, repo: &Path, operation: &str, f: F) -> Result<T, GitError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &Repository) -> Result<T, GitError> + Send + 'static,
    {
        let path = repo.to_path_buf();
        self.locked(repo, operation, move |inner| {
            inner.repos.with(&path, |r| f(inner, r))
        })
        .await
    }

    /// One attempt at creating a worktree (see `worktree::Creation`): the registration takes
    /// the repository's lock, writing the files does not, so that jobs starting together
    /// write theirs at once. `Ok(false)`: a pooled worktree turned out unusable.
    ///
    /// When the pool is empty but a worktree of this process is being settled into it, the
    /// creation waits for that (see `settles.rs`) instead of checking out afresh.
    async fn create_once(
        &self,
        repo: &Path,
        path: &Path,
        commit: &str,
        pool: PoolLimits,
    ) -> Result<bool, GitError> {
        let deadline = tokio::time::Instant::now() + settles::WAIT_LIMIT;
        loop {
            // Another creation may take the entry this one waited for: then it waits for the
            // next, while any is coming.
            let settling = pool.enabled()
                && self.inner.settles.any(repo)
                && tokio::time::Instant::now() < deadline;
            let (path, commit) = (path.to_path_buf(), commit.to_string());
            let creation = self
                .locked_repo(repo, "create worktree", move |inner, repo| {
                    let target = inner.confine(repo, &path, false)?;
                    let commit = refs::resolve_commit(repo, &commit)?;
                    worktree::start(repo, &target, commit, &pool, settling)
                })
                .await?;
            let Some(creation) = creation else {
                self.inner.settles.wait(repo, deadline).await;
                continue;
            };
            let repo = repo.to_path_buf();
            return self
                .run("create worktree", move |inner| {
                    creation.finish(&inner.repos, &inner.worktrees, &repo)
                })
                .await;
        }
    }
}

impl Inner {
    pub(crate) fn signature(&self, repo: &Repository) -> Result<Signature<'static>, GitError> {
        if let Some(id) = &self.identity {
            return Signature::now(&id.name, &id.email).ctx("signature");
        }
        repo.signature()
            .or_else(|_| Signature::now(&self.fallback.name, &self.fallback.email))
            .ctx("signature")
    }

    /// `path` resolved physically, if it lies inside the repository's folder or a configured
    /// root (and outside `.git`). `allow_root` accepts a root itself (for orphan cleanup).
    fn confine(
        &self,
        repo: &Repository,
        path: &Path,
        allow_root: bool,
    ) -> Result<PathBuf, GitError> {
        let mut roots = Vec::new();
        if let Some(main) = refs::main_workdir(repo) {
            roots.push(paths::resolve_physical(&main)?);
        }
        let extra = self.roots.read().unwrap_or_else(|e| e.into_inner()).clone();
        for root in &extra {
            roots.push(paths::resolve_physical(root)?);
        }
        let git_dir = paths::resolve_physical(repo.commondir())?;
        if allow_root {
            let resolved = paths::resolve_physical(path)?;
            if roots.contains(&resolved) {
                return Ok(resolved);
            }
        }
        paths::confine(path, &roots, &git_dir)
    }
}

/// Opens a linked worktree (the main checkout is refused: nothing commits there).
pub(crate) fn open_worktree(path: &Path) -> Result<Repository, GitError> {
    let wt = refs::open(path)?;
    if !wt.is_worktree() {
        return Err(not_a_worktree(path));
    }
    Ok(wt)
}

fn not_a_worktree(path: &Path) -> GitError {
    GitError::NotFound {
        what: format!("linked worktree at {}", path.display()),
    }
}

fn head_of(repo: &Repository) -> Result<Oid, GitError> {
    repo.head()
        .and_then(|h| h.peel_to_commit())
        .map(|c| c.id())
        .ctx("read HEAD")
}

/// Crash repair of the worktree pool: deletes what crashes left half-moved and trims it to
/// `limits`. A failure is logged: the pool only saves time.
fn sweep_pool(repo: &Repository, limits: &PoolLimits) {
    match pool::sweep(repo, limits) {
        Ok(0) => {}
        Ok(n) => tracing::debug!(removed = n, "cleaned the worktree pool"),
        Err(e) => tracing::warn!(error = %e, "could not clean the worktree pool"),
    }
}

/// Crash repair of the registrations: forgets those whose folder is gone (`git worktree
/// prune`). A kill between moving or deleting a finished job's folder and deleting its
/// registration leaves one, and when no worktree is left under the plan's root the orphan
/// sweep, which prunes too, has nothing to look at. A failure is logged: a dangling
/// registration blocks nothing of ours.
fn forget_gone_worktrees(repo: &Repository) {
    match worktree::prune(repo) {
        Ok(names) if names.is_empty() => {}
        Ok(names) => tracing::debug!(?names, "forgot worktrees whose folder a crash removed"),
        Err(e) => tracing::warn!(error = %e, "could not prune worktree registrations"),
    }
}

pub(crate) fn short(id: Oid) -> String {
    id.to_string().chars().take(12).collect()
}

#[async_trait]
impl GitOperations for Git2Operations {
    async fn resolve(&self, repo: &Path, rev: &str) -> Result<CommitId, GitError> {
        let rev = rev.to_string();
        self.on_repo(repo, "resolve", move |_, r| {
            Ok(refs::resolve_commit(r, &rev)?.to_string())
        })
        .await
    }

    async fn current_branch(&self, repo: &Path) -> Result<Option<String>, GitError> {
        self.on_repo(repo, "current branch", |_, r| refs::current_branch(r))
            .await
    }

    async fn default_branch(&self, repo: &Path) -> Result<String, GitError> {
        self.on_repo(repo, "default branch", |_, r| refs::default_branch(r))
            .await
    }

    async fn branch_tip(&self, repo: &Path, branch: &str) -> Result<Option<CommitId>, GitError> {
        let branch = branch.to_string();
        self.on_repo(repo, "branch tip", move |_, r| {
            Ok(refs::branch_tip(r, &branch)?.map(|o| o.to_string()))
        })
        .await
    }

    async fn update_branch(
        &self,
        repo: &Path,
        branch: &str,
        new: &str,
        expected: Option<&str>,
    ) -> Result<(), GitError> {
        refs::check_branch_name(branch)?;
        let (branch, new) = (branch.to_string(), new.to_string());
        let expected = expected.map(str::to_string);
        self.locked_repo(repo, "update branch", move |_, repo| {
            refs::protect(repo, &branch, "reset")?;
            let new = refs::resolve_commit(repo, &new)?;
            let expected_id = match &expected {
                None => None,
                Some(text) => match refs::resolve_commit(repo, text) {
                    Ok(id) => Some(id),
                    Err(_) => {
                        return Err(GitError::RefChanged {
                            reference: refs::branch_ref(&branch),
                            expected: expected.clone(),
                            actual: refs::branch_tip(repo, &branch)?.map(|o| o.to_string()),
                        })
                    }
                },
            };
            let log = format!("orchestrator: update {branch}");
            refs::compare_and_swap(repo, &branch, new, expected_id, expected.as_deref(), &log)
        })
        .await
    }

    async fn set_ref(&self, repo: &Path, name: &str, commit: &str) -> Result<(), GitError> {
        check_own_ref(name)?;
        let (name, commit) = (name.to_string(), commit.to_string());
        self.locked_repo(repo, "set ref", move |_, repo| {
            let id = refs::resolve_commit(repo, &commit)?;
            repo.reference(&name, id, true, "orchestrator: checkpoint")
                .ctx("set ref")
                .map(drop)
        })
        .await
    }

    async fn delete_ref(&self, repo: &Path, name: &str) -> Result<(), GitError> {
        check_own_ref(name)?;
        let name = name.to_string();
        self.locked_repo(repo, "delete ref", move |_, repo| {
            match repo.find_reference(&name) {
                Ok(mut reference) => reference.delete().ctx("delete ref"),
                Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(()),
                Err(e) => Err(error::git("delete ref", e)),
            }
        })
        .await
    }

    async fn delete_branch(&self, repo: &Path, branch: &str) -> Result<(), GitError> {
        refs::check_branch_name(branch)?;
        let branch = branch.to_string();
        self.locked_repo(repo, "delete branch", move |_, repo| {
            refs::protect(repo, &branch, "delete")?;
            match repo.find_reference(&refs::branch_ref(&branch)) {
                Ok(mut reference) => reference.delete().ctx("delete branch"),
                Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(()),
                Err(e) => Err(error::git("delete branch", e)),
            }
        })
        .await
    }

    async fn is_ancestor(
        &self,
        repo: &Path,
        ancestor: &str,
        descendant: &str,
    ) -> Result<bool, GitError> {
        let (a, d) = (ancestor.to_string(), descendant.to_string());
        self.on_repo(repo, "is ancestor", move |_, repo| {
            let (a, d) = (
                refs::resolve_commit(repo, &a)?,
                refs::resolve_commit(repo, &d)?,
            );
            Ok(a == d || repo.graph_descendant_of(d, a).ctx("is ancestor")?)
        })
        .await
    }

    async fn create_worktree(
        &self,
        repo: &Path,
        path: &Path,
        commit: &str,
    ) -> Result<(), GitError> {
        if !self
            .create_once(repo, path, commit, self.inner.pool)
            .await?
        {
            // The pooled worktree was unusable and is gone: check out afresh.
            self.create_once(repo, path, commit, PoolLimits::DISABLED)
                .await?;
        }
        Ok(())
    }

    async fn remove_worktree(&self, repo: &Path, path: &Path) -> Result<(), GitError> {
        // Counted from the call (before the worktree is parked, under the lock) until it is
        // settled, so that a creation that starts meanwhile knows an entry is coming.
        let _settling = self
            .inner
            .pool
            .enabled()
            .then(|| self.inner.settles.begin(repo));
        loop {
            let path = path.to_path_buf();
            let removal = self
                .locked_repo(repo, "remove worktree", move |inner, repo| {
                    let target = inner.confine(repo, &path, false)?;
                    worktree::remove(repo, &target, Some((&inner.pool, &inner.worktrees)))
                })
                .await?;
            match removal {
                Removal::Done => return Ok(()),
                // Settling a parked worktree (a walk of its files) needs no lock either.
                Removal::Parked(parked) => {
                    return self.run("remove worktree", |_| parked.settle()).await
                }
                // Its creation (a job canceled while it started) ends first, as it did when
                // the creation held the lock throughout.
                Removal::Busy => tokio::time::sleep(CREATION_POLL).await,
            }
        }
    }

    async fn remove_orphaned_worktrees(
        &self,
        repo: &Path,
        root: &Path,
        live: &[PathBuf],
    ) -> Result<Vec<PathBuf>, GitError> {
        let (root, live) = (root.to_path_buf(), live.to_vec());
        self.locked_repo(repo, "remove orphaned worktrees", move |inner, r| {
            let root = inner.confine(r, &root, true)?;
            let live: BTreeSet<PathBuf> = live
                .iter()
                .filter_map(|p| paths::resolve_physical(p).ok())
                .collect();
            let removed = worktree::remove_orphans(r, &root, &live)?;
            sweep_pool(r, &inner.pool);
            Ok(removed)
        })
        .await
    }

    fn allow_worktree_root(&self, root: &Path) -> Result<(), GitError> {
        if !root.is_absolute() {
            return Err(GitError::other(
                "configure",
                format!("worktree root {} is not an absolute path", root.display()),
            ));
        }
        let mut roots = self.inner.roots.write().unwrap_or_else(|e| e.into_inner());
        if !roots.iter().any(|r| r == root) {
            roots.push(root.to_path_buf());
        }
        Ok(())
    }

    async fn remove_broken_worktree(&self, repo: &Path, path: &Path) -> Result<bool, GitError> {
        let path = path.to_path_buf();
        self.locked_repo(repo, "remove broken worktree", move |inner, repo| {
            let target = inner.confine(repo, &path, false)?;
            worktree::remove_broken(repo, &target)
        })
        .await
    }

    async fn release_job_branch(
        &self,
        repo: &Path,
        worktree: &Path,
    ) -> Result<Option<JobBranch>, GitError> {
        let path = worktree.to_path_buf();
        // The common case, a detached HEAD, is answered from the worktree's HEAD file alone,
        // without opening the repository or taking the lock that merges take.
        let probe = path.clone();
        let attached = self
            .run(
                "release job branch",
                move |_| match worktree::head_names_branch(&probe) {
                    Some(attached) => Ok(attached),
                    None => Ok(!open_worktree(&probe)?.head_detached().ctx("read HEAD")?),
                },
            )
            .await?;
        if !attached {
            return Ok(None);
        }
        self.locked_repo(repo, "release job branch", move |_, repo| {
            worktree::release_branch(repo, &open_worktree(&path)?)
        })
        .await
    }

    async fn list_worktrees(&self, repo: &Path) -> Result<Vec<PathBuf>, GitError> {
        self.on_repo(repo, "list worktrees", |_, r| worktree::list(r))
            .await
    }

    async fn head(&self, worktree: &Path) -> Result<CommitId, GitError> {
        self.on_repo(worktree, "head", |_, wt| Ok(head_of(wt)?.to_string()))
            .await
    }

    async fn merge_into_worktree(
        &self,
        worktree: &Path,
        commits: &[CommitId],
        message: &str,
        resolver: Option<&dyn ConflictResolver>,
    ) -> Result<CommitId, GitError> {
        let path = worktree.to_path_buf();
        let all: Arc<[CommitId]> = commits.into();
        let message: Arc<str> = message.into();
        // The worktree's HEAD before the merge; read by the first round, which opens it anyway.
        let mut start = None;
        let mut head = None;
        let mut from = 0;
        loop {
            let (p, c, m) = (path.clone(), Arc::clone(&all), Arc::clone(&message));
            let (began, step) = self
                .run("merge", move |inner| {
                    let wt = open_worktree(&p)?;
                    let head = match head {
                        Some(id) => id,
                        None => head_of(&wt)?,
                    };
                    let result = advance(inner, &wt, head, &c, from, &m)?;
                    if let Advance::Done(id) = result {
                        merge::move_worktree(&wt, id)?;
                    }
                    Ok((head, result))
                })
                .await?;
            let start = *start.get_or_insert(began);
            let (at, ours, theirs, paths) = match step {
                Advance::Done(id) => return Ok(id.to_string()),
                Advance::Conflict {
                    at,
                    ours,
                    theirs,
                    paths,
                } => (at, ours, theirs, paths),
            };
            let Some(resolver) = resolver else {
                // Nothing was checked out yet: the worktree is still at `start`.
                return Err(GitError::MergeConflict {
                    context: format!("merging {} into worktree {}", short(theirs), path.display()),
                    paths,
                });
            };
            head = Some(
                self.resolve_with(resolver, &path, start, (ours, theirs), paths, &message)
                    .await?,
            );
            from = at + 1;
        }
    }

    async fn commit_all(
        &self,
        worktree: &Path,
        message: &str,
    ) -> Result<Option<CommitId>, GitError> {
        let (path, message) = (worktree.to_path_buf(), message.to_string());
        self.run("commit", move |inner| {
            // The handle the creation opened, when it is still the worktree there.
            let commit = inner.worktrees.with(&path, |wt| {
                if !wt.is_worktree() {
                    return Err(not_a_worktree(&path));
                }
                let signature = inner.signature(wt)?;
                inner.repos.with(wt.commondir(), |main| {
                    merge::commit_all(wt, main, &signature, &message)
                })
            })?;
            Ok(commit.map(|id| id.to_string()))
        })
        .await
    }

    async fn reset_worktree(&self, worktree: &Path, commit: &str) -> Result<(), GitError> {
        let (path, commit) = (worktree.to_path_buf(), commit.to_string());
        self.run("reset worktree", move |_| {
            let wt = open_worktree(&path)?;
            let id = refs::resolve_commit(&wt, &commit)?;
            checkout::reset_to(&wt, id)
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
        refs::check_branch_name(branch)?;
        let (branch, commit, message) =
            (branch.to_string(), commit.to_string(), message.to_string());
        self.locked_repo(repo, "merge into branch", move |inner, repo| {
            let tip = refs::branch_tip(repo, &branch)?.ok_or_else(|| GitError::NotFound {
                what: format!("branch `{branch}`"),
            })?;
            let theirs = refs::resolve_commit(repo, &commit)?;
            let signature = inner.signature(repo)?;
            let fast_forward = style == MergeStyle::FastForward;
            let step = inner.walks.with(repo.path(), |walk| {
                merge::merge_step(repo, walk, tip, theirs, fast_forward, &signature, &message)
            })?;
            let new = match step {
                Step::Contained => return Ok(tip.to_string()),
                Step::Moved(id) => id,
                Step::Conflict(paths) => {
                    return Err(GitError::MergeConflict {
                        context: format!("merging {} into {branch}", short(theirs)),
                        paths,
                    })
                }
            };
            land(repo, &branch, tip, new, &message)?;
            Ok(new.to_string())
        })
        .await
    }

    async fn merge_commits(
        &self,
        repo: &Path,
        commits: &[CommitId],
        message: &str,
    ) -> Result<CommitId, GitError> {
        let (commits, message) = (commits.to_vec(), message.to_string());
        self.on_repo(repo, "merge commits", move |inner, repo| {
            let Some(first) = commits.first() else {
                return Err(GitError::NotFound {
                    what: "a commit to merge (the list is empty)".into(),
                });
            };
            let head = refs::resolve_commit(repo, first)?;
            match advance(inner, repo, head, &commits, 1, &message)? {
                Advance::Done(id) => Ok(id.to_string()),
                Advance::Conflict {
                    ours,
                    theirs,
                    paths,
                    ..
                } => Err(GitError::MergeConflict {
                    context: format!("merging {} into {}", short(theirs), short(ours)),
                    paths,
                }),
            }
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
        remote::push(repo, remote, commit, reference).await
    }

    async fn fetch(
        &self,
        repo: &Path,
        remote: &str,
        reference: &str,
    ) -> Result<CommitId, GitError> {
        remote::fetch(repo, remote, reference).await
    }

    async fn delete_refs_under(&self, repo: &Path, prefix: &str) -> Result<usize, GitError> {
        let prefix = format!("{}/", prefix.trim_end_matches('/'));
        // A folder of the SDK's own refs: checked as a ref inside it would be.
        check_own_ref(&format!("{prefix}x"))?;
        self.locked_repo(repo, "delete refs", move |_, repo| {
            let names: Vec<String> = repo
                .references_glob(&format!("{prefix}*"))
                .ctx("delete refs")?
                .filter_map(|r| r.ok().and_then(|r| r.name().map(str::to_owned)))
                .collect();
            for name in &names {
                match repo.find_reference(name) {
                    Ok(mut reference) => reference.delete().ctx("delete refs")?,
                    Err(e) if e.code() == git2::ErrorCode::NotFound => {}
                    Err(e) => return Err(error::git("delete refs", e)),
                }
            }
            Ok(names.len())
        })
        .await
    }

    async fn diff_stats(&self, repo: &Path, from: &str, to: &str) -> Result<DiffStats, GitError> {
        let (from, to) = (from.to_string(), to.to_string());
        self.on_repo(repo, "diff stats", move |_, repo| {
            let (a, b) = (
                refs::resolve_commit(repo, &from)?,
                refs::resolve_commit(repo, &to)?,
            );
            merge::diff_stats(repo, a, b)
        })
        .await
    }

    async fn exclude(&self, repo: &Path, patterns: &[&str]) -> Result<(), GitError> {
        let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
        self.locked_repo(repo, "exclude", move |_, repo| exclude(repo, &patterns))
            .await
    }

    async fn remove_stale_locks(
        &self,
        repo: &Path,
        worktrees: &[PathBuf],
        branches: &[String],
    ) -> Result<Vec<PathBuf>, GitError> {
        let (worktrees, branches) = (worktrees.to_vec(), branches.to_vec());
        self.locked_repo(repo, "remove stale locks", move |inner, repo| {
            sweep_pool(repo, &inner.pool);
            forget_gone_worktrees(repo);
            Ok(stale_locks(repo, &worktrees, &branches)
                .into_iter()
                .filter(|p| std::fs::remove_file(p).is_ok())
                .collect())
        })
        .await
    }

    async fn clear_worktree_pool(&self, repo: &Path) -> Result<usize, GitError> {
        self.locked_repo(repo, "clear worktree pool", |_, repo| pool::clear(repo))
            .await
    }
}
