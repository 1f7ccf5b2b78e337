//! [`Git2Operations`]: the [`GitOperations`] implementation, its builder and options.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use git2::{Oid, Repository, Signature};
use orchestrator_core::git::{
    CommitId, ConflictResolver, DiffStats, GitError, GitOperations, JobBranch, MergeStyle,
};

use crate::error::{self, Context};
use crate::merge::{self, Step};
use crate::{checkout, paths, refs, worktree};

/// A commit author and committer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Name, e.g. `Orchestrator`.
    pub name: String,
    /// E-mail address, e.g. `orchestrator@localhost`.
    pub email: String,
}

impl Identity {
    /// An identity from a name and an e-mail address.
    pub fn new(name: impl Into<String>, email: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            email: email.into(),
        }
    }
}

impl Default for Identity {
    /// `Orchestrator <orchestrator@localhost>`.
    fn default() -> Self {
        Self::new("Orchestrator", "orchestrator@localhost")
    }
}

/// Options for [`Git2Operations`]; see [`Git2Operations::builder`].
#[derive(Debug, Clone, Default)]
pub struct Git2OperationsBuilder {
    identity: Option<Identity>,
    fallback: Identity,
    roots: Vec<PathBuf>,
}

impl Git2OperationsBuilder {
    /// Commits as `identity` always, whatever the repository's configuration says.
    pub fn identity(mut self, identity: Identity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Commits as `identity` when the repository's configuration has no `user.name` /
    /// `user.email` (default: [`Identity::default`]).
    pub fn fallback_identity(mut self, identity: Identity) -> Self {
        self.fallback = identity;
        self
    }

    /// Also allows worktrees under `root` (by default only inside the repository's folder).
    pub fn worktree_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.roots.push(root.into());
        self
    }

    /// Checks the options and builds the operations.
    pub fn build(self) -> Result<Git2Operations, GitError> {
        for identity in self.identity.iter().chain([&self.fallback]) {
            Signature::now(&identity.name, &identity.email).ctx("check identity")?;
        }
        if let Some(root) = self.roots.iter().find(|r| !r.is_absolute()) {
            return Err(GitError::other(
                "configure",
                format!("worktree root {} is not an absolute path", root.display()),
            ));
        }
        Ok(self.assemble())
    }

    /// The operations with these options, unchecked.
    fn assemble(self) -> Git2Operations {
        Git2Operations {
            inner: Arc::new(Inner {
                identity: self.identity,
                fallback: self.fallback,
                roots: std::sync::RwLock::new(self.roots),
                locks: Mutex::new(HashMap::new()),
            }),
        }
    }
}

/// [`GitOperations`] on libgit2. Cheap to clone; clones share the per-repository locks.
///
/// Worktree administration, ref updates and merges into branches are serialized per repository
/// within a process; across processes, ref updates stay compare-and-swap.
#[derive(Debug, Clone)]
pub struct Git2Operations {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    identity: Option<Identity>,
    fallback: Identity,
    /// Worktree roots besides the repository's folder: from the builder, and added by the
    /// engine for plans with a root of their own ([`GitOperations::allow_worktree_root`]).
    roots: std::sync::RwLock<Vec<PathBuf>>,
    locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
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

    /// Forgets worktree registrations whose folder is gone (`git worktree prune`). Returns the
    /// names of the registrations removed.
    pub async fn prune(&self, repo: &Path) -> Result<Vec<String>, GitError> {
        self.locked_repo(repo, "prune worktrees", |_, r| worktree::prune(r))
            .await
    }

    /// Runs `f` on the blocking pool.
    async fn run<T, F>(&self, operation: &str, f: F) -> Result<T, GitError>
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

    /// [`Self::on_repo`] while holding the repository's lock.
    async fn locked_repo<T, F>(&self, repo: &Path, operation: &str, f: F) -> Result<T, GitError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &Repository) -> Result<T, GitError> + Send + 'static,
    {
        let path = repo.to_path_buf();
        self.locked(repo, operation, move |inner| f(inner, &refs::open(&path)?))
            .await
    }
}

impl Inner {
    fn signature(&self, repo: &Repository) -> Result<Signature<'static>, GitError> {
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

impl Git2Operations {
    /// Writes the conflicted merge of `theirs` into the worktree at `path` (moving it to `ours`
    /// first), lets `resolver` edit the conflicting `paths`, and commits the result. On any
    /// failure, or when conflict markers are left, the worktree goes back to `start`.
    async fn resolve_with(
        &self,
        resolver: &dyn ConflictResolver,
        path: &Path,
        start: Oid,
        (ours, theirs): (Oid, Oid),
        paths: Vec<String>,
        message: &Arc<str>,
    ) -> Result<Oid, GitError> {
        let p = path.to_path_buf();
        let touched = self
            .run("merge", move |_| {
                let wt = open_worktree(&p)?;
                merge::move_worktree(&wt, ours)?;
                merge::write_conflict(&wt, ours, theirs).inspect_err(|_| {
                    let _ = merge::move_worktree(&wt, start);
                })
            })
            .await?;
        let outcome = resolver.resolve(path, &paths).await;
        let context = format!("merging {} into worktree {}", short(theirs), path.display());
        let (p, m) = (path.to_path_buf(), Arc::clone(message));
        self.run("merge", move |inner| {
            let wt = open_worktree(&p)?;
            let failure = match outcome {
                Err(e) => Some(e),
                Ok(()) => {
                    let left = merge::with_conflict_markers(&wt, &paths)?;
                    (!left.is_empty()).then(|| GitError::MergeConflict {
                        context: format!("{context}: the resolver left conflict markers"),
                        paths: left,
                    })
                }
            };
            if let Some(e) = failure {
                merge::undo_conflict(&wt, ours, &touched)?;
                merge::move_worktree(&wt, start)?;
                return Err(e);
            }
            let signature = inner.signature(&wt)?;
            merge::commit_resolution(&wt, ours, theirs, &touched, &signature, &m)
        })
        .await
    }
}

/// Opens a linked worktree (the main checkout is refused: nothing commits there).
fn open_worktree(path: &Path) -> Result<Repository, GitError> {
    let wt = refs::open(path)?;
    if !wt.is_worktree() {
        return Err(GitError::NotFound {
            what: format!("linked worktree at {}", path.display()),
        });
    }
    Ok(wt)
}

fn head_of(repo: &Repository) -> Result<Oid, GitError> {
    repo.head()
        .and_then(|h| h.peel_to_commit())
        .map(|c| c.id())
        .ctx("read HEAD")
}

/// Where merging a list of commits into a worktree stopped.
enum Advance {
    /// All merged (in memory); the final commit.
    Done(Oid),
    /// `commits[at]` conflicts with `ours`, the state merged so far.
    Conflict {
        at: usize,
        ours: Oid,
        theirs: Oid,
        paths: Vec<String>,
    },
}

/// Merges `commits[from..]` into `head` in memory, one after another.
fn advance(
    inner: &Inner,
    wt: &Repository,
    mut head: Oid,
    commits: &[CommitId],
    from: usize,
    message: &str,
) -> Result<Advance, GitError> {
    let signature = inner.signature(wt)?;
    for (at, rev) in commits.iter().enumerate().skip(from) {
        let theirs = refs::resolve_commit(wt, rev)?;
        match merge::merge_step(wt, head, theirs, true, &signature, message)? {
            Step::Contained => {}
            Step::Moved(id) => head = id,
            Step::Conflict(paths) => {
                return Ok(Advance::Conflict {
                    at,
                    ours: head,
                    theirs,
                    paths,
                })
            }
        }
    }
    Ok(Advance::Done(head))
}

fn short(id: Oid) -> String {
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
        let (path, commit) = (path.to_path_buf(), commit.to_string());
        self.locked_repo(repo, "create worktree", move |inner, repo| {
            let target = inner.confine(repo, &path, false)?;
            let commit = refs::resolve_commit(repo, &commit)?;
            worktree::create(repo, &target, commit)
        })
        .await
    }

    async fn remove_worktree(&self, repo: &Path, path: &Path) -> Result<(), GitError> {
        let path = path.to_path_buf();
        self.locked_repo(repo, "remove worktree", move |inner, repo| {
            let target = inner.confine(repo, &path, false)?;
            worktree::remove(repo, &target)
        })
        .await
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
            worktree::remove_orphans(r, &root, &live)
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
        // The common case, a detached HEAD, is answered from the worktree alone, without the
        // repository lock that merges take.
        let probe = path.clone();
        let attached = self
            .run("release job branch", move |_| {
                Ok(!open_worktree(&probe)?.head_detached().ctx("read HEAD")?)
            })
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
            let wt = open_worktree(&path)?;
            let signature = inner.signature(&wt)?;
            Ok(merge::commit_all(&wt, &signature, &message)?.map(|id| id.to_string()))
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
            let new =
                match merge::merge_step(repo, tip, theirs, fast_forward, &signature, &message)? {
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
        self.locked_repo(repo, "remove stale locks", move |_, repo| {
            Ok(stale_locks(repo, &worktrees, &branches)
                .into_iter()
                .filter(|p| std::fs::remove_file(p).is_ok())
                .collect())
        })
        .await
    }
}

/// Lock files in the administrative folders of `worktrees` (found through their `.git` file)
/// and on `branches`' refs.
fn stale_locks(repo: &Repository, worktrees: &[PathBuf], branches: &[String]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for wt in worktrees {
        let Some(admin) = worktree::linked_admin(wt) else {
            continue;
        };
        if let Ok(entries) = std::fs::read_dir(admin) {
            found.extend(
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "lock")),
            );
        }
    }
    let heads = repo.commondir().join("refs").join("heads");
    for branch in branches {
        if refs::check_branch_name(branch).is_ok() {
            let lock = heads.join(format!("{branch}.lock"));
            if lock.exists() {
                found.push(lock);
            }
        }
    }
    found
}

/// Moves `branch` from `tip` to `new` by compare-and-swap; every worktree that has it checked
/// out follows when clean (all are checked before any changes), else [`GitError::DirtyCheckout`].
fn land(
    repo: &Repository,
    branch: &str,
    tip: Oid,
    new: Oid,
    message: &str,
) -> Result<(), GitError> {
    // Linked worktrees are opened; the main checkout is `repo` itself (`None`), already open.
    let mut opened: Vec<Option<Repository>> = Vec::new();
    for holder in refs::checkouts_of(repo, branch)? {
        let is_repo = !repo.is_worktree() && repo.workdir() == Some(holder.as_path());
        let handle = if is_repo {
            None
        } else {
            Some(refs::open(&holder)?)
        };
        let wt = handle.as_ref().unwrap_or(repo);
        let files = {
            let (old_tree, new_tree) = (checkout::tree_of(wt, tip)?, checkout::tree_of(wt, new)?);
            checkout::dirty_files(wt, &old_tree, &new_tree)?
        };
        if !files.is_empty() {
            return Err(GitError::DirtyCheckout {
                branch: branch.to_string(),
                path: holder,
                files,
            });
        }
        opened.push(handle);
    }
    let checkouts: Vec<&Repository> = opened.iter().map(|h| h.as_ref().unwrap_or(repo)).collect();
    // Puts the checkouts already moved back (a failure of one or a lost compare-and-swap).
    let undo = |moved: &[&Repository]| {
        for wt in moved {
            if let Ok(old_tree) = checkout::tree_of(wt, tip) {
                let _ = checkout::switch_forced(wt, &old_tree);
            }
        }
    };
    for (i, wt) in checkouts.iter().enumerate() {
        let moved = checkout::tree_of(wt, new).and_then(|tree| checkout::switch_safely(wt, &tree));
        if let Err(e) = moved {
            undo(&checkouts[..i]);
            return Err(e);
        }
    }
    let log = format!("orchestrator: {message}");
    if let Err(e) =
        refs::compare_and_swap(repo, branch, new, Some(tip), Some(&tip.to_string()), &log)
    {
        undo(&checkouts);
        return Err(e);
    }
    Ok(())
}

/// Appends the patterns `.git/info/exclude` lacks.
fn exclude(repo: &Repository, patterns: &[String]) -> Result<(), GitError> {
    let file = repo.commondir().join("info").join("exclude");
    let existing = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(error::io("exclude", &file, e)),
    };
    let mut present: BTreeSet<&str> = existing.lines().map(str::trim_end).collect();
    let mut text = existing.clone();
    for pattern in patterns {
        if present.insert(pattern.as_str()) {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(pattern);
            text.push('\n');
        }
    }
    if text == existing {
        return Ok(());
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| error::io("exclude", dir, e))?;
    }
    paths::write_atomically(&file, text.as_bytes())
}
