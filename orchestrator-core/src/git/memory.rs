//! [`MemoryGit`]: a fake [`GitOperations`] for tests.
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::{
    CommitId, ConflictResolver, DiffStats, GitError, GitOperations, JobBranch, MergeStyle,
};

/// A tree: slash-separated relative path to file content.
type Tree = BTreeMap<String, Arc<Vec<u8>>>;

/// How many changed files a [`GitError::DirtyCheckout`] names at most.
const DIRTY_FILES_SHOWN: usize = 20;

/// An in-memory [`GitOperations`] whose worktrees are real folders.
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

#[derive(Default)]
struct State {
    repos: BTreeMap<PathBuf, Repo>,
    next_id: u64,
}

struct Repo {
    default_branch: String,
    head: Head,
    branches: BTreeMap<String, CommitId>,
    commits: HashMap<CommitId, Commit>,
    /// Linked worktrees (canonical path) and their detached HEAD.
    worktrees: BTreeMap<PathBuf, CommitId>,
    /// Patterns of `.git/info/exclude`.
    excludes: Vec<String>,
}

#[derive(Clone, PartialEq, Eq)]
enum Head {
    Branch(String),
    Detached(CommitId),
}

struct Commit {
    parents: Vec<CommitId>,
    tree: Arc<Tree>,
}

/// The outcome of a three-way merge.
#[derive(Default)]
struct Merge {
    /// Everything that merged cleanly.
    tree: Tree,
    /// Paths changed differently on both sides, sorted.
    conflicts: Vec<ConflictSides>,
}

struct ConflictSides {
    path: String,
    ours: Option<Arc<Vec<u8>>>,
    theirs: Option<Arc<Vec<u8>>>,
}

impl Merge {
    fn conflict_paths(&self) -> Vec<String> {
        self.conflicts.iter().map(|c| c.path.clone()).collect()
    }

    /// The merged tree with conflict markers in the conflicting files.
    fn marked_tree(&self) -> Tree {
        let mut tree = self.tree.clone();
        for c in &self.conflicts {
            let mut marked = b"<<<<<<< ours\n".to_vec();
            marked.extend_from_slice(c.ours.as_deref().map_or(&[][..], |v| v.as_slice()));
            marked.extend_from_slice(b"=======\n");
            marked.extend_from_slice(c.theirs.as_deref().map_or(&[][..], |v| v.as_slice()));
            marked.extend_from_slice(b">>>>>>> theirs\n");
            tree.insert(c.path.clone(), Arc::new(marked));
        }
        tree
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

impl State {
    fn repo(&self, key: &Path) -> Result<&Repo, GitError> {
        self.repos.get(key).ok_or_else(|| not_found_repo(key))
    }

    fn repo_mut(&mut self, key: &Path) -> Result<&mut Repo, GitError> {
        self.repos.get_mut(key).ok_or_else(|| not_found_repo(key))
    }

    /// The repository owning the linked worktree at `path` (canonical).
    fn worktree_owner(&self, path: &Path) -> Result<PathBuf, GitError> {
        self.repos
            .iter()
            .find(|(_, r)| r.worktrees.contains_key(path))
            .map(|(k, _)| k.clone())
            .ok_or_else(|| GitError::NotFound {
                what: format!("worktree {}", path.display()),
            })
    }

    /// A fresh 40-hex commit id.
    fn new_id(&mut self, parents: &[CommitId], tree: &Tree, message: &str) -> CommitId {
        self.next_id += 1;
        let mut out = String::with_capacity(48);
        for salt in 0u8..3 {
            let mut h = DefaultHasher::new();
            (salt, self.next_id, parents, message).hash(&mut h);
            for (path, content) in tree {
                (path, content.as_slice()).hash(&mut h);
            }
            out.push_str(&format!("{:016x}", h.finish()));
        }
        out.truncate(40);
        out
    }

    /// Records a commit in `repo` and returns its id.
    fn commit(
        &mut self,
        key: &Path,
        parents: Vec<CommitId>,
        tree: Tree,
        message: &str,
    ) -> Result<CommitId, GitError> {
        let id = self.new_id(&parents, &tree, message);
        let tree = Arc::new(tree);
        self.repo_mut(key)?
            .commits
            .insert(id.clone(), Commit { parents, tree });
        Ok(id)
    }
}

impl Repo {
    fn resolve(&self, rev: &str) -> Result<CommitId, GitError> {
        let not_found = || GitError::NotFound {
            what: format!("revision `{rev}`"),
        };
        if rev == "HEAD" {
            return self.head_commit();
        }
        let branch = rev.strip_prefix("refs/heads/").unwrap_or(rev);
        if let Some(id) = self.branches.get(branch) {
            return Ok(id.clone());
        }
        if self.commits.contains_key(rev) {
            return Ok(rev.to_string());
        }
        if rev.len() >= 4 && rev.chars().all(|c| c.is_ascii_hexdigit()) {
            let mut matches = self.commits.keys().filter(|id| id.starts_with(rev));
            if let (Some(id), None) = (matches.next(), matches.next()) {
                return Ok(id.clone());
            }
        }
        Err(not_found())
    }

    fn head_commit(&self) -> Result<CommitId, GitError> {
        match &self.head {
            Head::Detached(id) => Ok(id.clone()),
            Head::Branch(b) => self
                .branches
                .get(b)
                .cloned()
                .ok_or_else(|| GitError::NotFound {
                    what: format!("branch `{b}`"),
                }),
        }
    }

    fn tree_of(&self, id: &str) -> Result<Arc<Tree>, GitError> {
        self.commits
            .get(id)
            .map(|c| c.tree.clone())
            .ok_or_else(|| GitError::NotFound {
                what: format!("commit {id}"),
            })
    }

    fn checked_out(&self, branch: &str) -> bool {
        self.head == Head::Branch(branch.to_string())
    }

    fn is_ancestor(&self, ancestor: &str, descendant: &str) -> bool {
        self.ancestors(descendant).contains(ancestor)
    }

    /// Every commit reachable from `id`, itself included.
    fn ancestors(&self, id: &str) -> HashSet<CommitId> {
        let mut seen = HashSet::new();
        let mut queue = VecDeque::from([id.to_string()]);
        while let Some(c) = queue.pop_front() {
            if let Some(commit) = self.commits.get(&c) {
                queue.extend(commit.parents.iter().cloned());
            }
            seen.insert(c);
        }
        seen
    }

    /// The best common ancestor of `a` and `b` (one that no other common ancestor descends from).
    fn merge_base(&self, a: &str, b: &str) -> Option<CommitId> {
        let of_a = self.ancestors(a);
        let common: BTreeSet<CommitId> = self.ancestors(b).intersection(&of_a).cloned().collect();
        common
            .iter()
            .find(|c| {
                !common
                    .iter()
                    .any(|other| other != *c && self.is_ancestor(c, other))
            })
            .cloned()
    }

    /// Three-way merge of the trees of `ours` and `theirs` (merge base: their best common
    /// ancestor). Conflicting paths are left out of the merged tree.
    fn merge(&self, ours: &str, theirs: &str) -> Result<Merge, GitError> {
        let base = match self.merge_base(ours, theirs) {
            Some(b) => self.tree_of(&b)?,
            None => Arc::new(Tree::new()),
        };
        let (o, t) = (self.tree_of(ours)?, self.tree_of(theirs)?);
        let paths: BTreeSet<&String> = base.keys().chain(o.keys()).chain(t.keys()).collect();
        let mut merge = Merge::default();
        for path in paths {
            let (b, ov, tv) = (base.get(path), o.get(path), t.get(path));
            let pick = if ov == tv || tv == b {
                ov
            } else if ov == b {
                tv
            } else {
                merge.conflicts.push(ConflictSides {
                    path: path.clone(),
                    ours: ov.cloned(),
                    theirs: tv.cloned(),
                });
                continue;
            };
            if let Some(content) = pick {
                merge.tree.insert(path.clone(), content.clone());
            }
        }
        Ok(merge)
    }

    /// The user's checkout as a tree (ignored files and linked worktrees left out).
    fn read_checkout(&self, key: &Path) -> Result<Tree, GitError> {
        let skip: Vec<&Path> = self.worktrees.keys().map(PathBuf::as_path).collect();
        read_tree_files(key, &self.excludes, &skip)
    }
}

#[async_trait]
impl GitOperations for MemoryGit {
    async fn resolve(&self, repo: &Path, rev: &str) -> Result<CommitId, GitError> {
        let key = canonical(repo)?;
        self.lock().repo(&key)?.resolve(rev)
    }

    async fn current_branch(&self, repo: &Path) -> Result<Option<String>, GitError> {
        let key = canonical(repo)?;
        Ok(match &self.lock().repo(&key)?.head {
            Head::Branch(b) => Some(b.clone()),
            Head::Detached(_) => None,
        })
    }

    async fn default_branch(&self, repo: &Path) -> Result<String, GitError> {
        let key = canonical(repo)?;
        Ok(self.lock().repo(&key)?.default_branch.clone())
    }

    async fn branch_tip(&self, repo: &Path, branch: &str) -> Result<Option<CommitId>, GitError> {
        let key = canonical(repo)?;
        Ok(self.lock().repo(&key)?.branches.get(branch).cloned())
    }

    async fn update_branch(
        &self,
        repo: &Path,
        branch: &str,
        new: &str,
        expected: Option<&str>,
    ) -> Result<(), GitError> {
        check_branch_name(branch)?;
        let key = canonical(repo)?;
        let mut state = self.lock();
        let r = state.repo_mut(&key)?;
        protect(r, branch, "reset")?;
        let new = r.resolve(new)?;
        let actual = r.branches.get(branch).cloned();
        let expected_id = expected.map(|e| r.resolve(e).unwrap_or_else(|_| e.to_string()));
        if actual != expected_id {
            return Err(GitError::RefChanged {
                reference: format!("refs/heads/{branch}"),
                expected: expected.map(str::to_string),
                actual,
            });
        }
        r.branches.insert(branch.to_string(), new);
        Ok(())
    }

    async fn delete_branch(&self, repo: &Path, branch: &str) -> Result<(), GitError> {
        check_branch_name(branch)?;
        let key = canonical(repo)?;
        let mut state = self.lock();
        let r = state.repo_mut(&key)?;
        protect(r, branch, "delete")?;
        r.branches.remove(branch);
        Ok(())
    }

    async fn is_ancestor(
        &self,
        repo: &Path,
        ancestor: &str,
        descendant: &str,
    ) -> Result<bool, GitError> {
        let key = canonical(repo)?;
        let state = self.lock();
        let r = state.repo(&key)?;
        let (a, d) = (r.resolve(ancestor)?, r.resolve(descendant)?);
        Ok(r.is_ancestor(&a, &d))
    }

    async fn create_worktree(
        &self,
        repo: &Path,
        path: &Path,
        commit: &str,
    ) -> Result<(), GitError> {
        let key = canonical(repo)?;
        let target = confine(&key, path)?;
        let mut state = self.lock();
        let r = state.repo_mut(&key)?;
        let id = r.resolve(commit)?;
        if r.worktrees.contains_key(&target) && target.is_dir() {
            return Ok(()); // a retry: keep it as it is
        }
        if target.exists() && !is_empty_dir(&target) {
            return Err(GitError::other(
                "create worktree",
                format!("{} exists and is not a worktree", target.display()),
            ));
        }
        let tree = r.tree_of(&id)?;
        std::fs::create_dir_all(&target).map_err(|e| io_error("create worktree", &target, e))?;
        if let Err(e) = write_tree_files(&target, &Tree::new(), &tree) {
            let _ = std::fs::remove_dir_all(&target);
            return Err(e);
        }
        r.worktrees.insert(target, id);
        Ok(())
    }

    async fn remove_worktree(&self, repo: &Path, path: &Path) -> Result<(), GitError> {
        let key = canonical(repo)?;
        let target = confine(&key, path)?;
        let mut state = self.lock();
        let r = state.repo_mut(&key)?;
        let registered = r.worktrees.contains_key(&target);
        // `confine` resolved symbolic links: `target` is the real folder.
        if target.exists() {
            if !registered && !is_empty_dir(&target) {
                return Err(GitError::other(
                    "remove worktree",
                    format!(
                        "{} is not a worktree; refusing to delete it",
                        target.display()
                    ),
                ));
            }
            // `remove_dir_all` unlinks symbolic links instead of following them.
            std::fs::remove_dir_all(&target)
                .map_err(|e| io_error("remove worktree", &target, e))?;
        }
        r.worktrees.remove(&target);
        Ok(())
    }

    async fn remove_broken_worktree(&self, repo: &Path, path: &Path) -> Result<bool, GitError> {
        let key = canonical(repo)?;
        let target = confine(&key, path)?;
        let mut state = self.lock();
        let r = state.repo_mut(&key)?;
        // The fake keeps no `.git` in its worktrees: a registered folder is valid while it exists.
        if r.worktrees.contains_key(&target) && target.is_dir() {
            return Ok(false);
        }
        let registered = r.worktrees.remove(&target).is_some();
        let exists = target.symlink_metadata().is_ok();
        if exists {
            // `confine` resolved symbolic links, and `remove_dir_all` unlinks links inside.
            std::fs::remove_dir_all(&target)
                .map_err(|e| io_error("remove broken worktree", &target, e))?;
        }
        Ok(exists || registered)
    }

    async fn release_job_branch(
        &self,
        repo: &Path,
        worktree: &Path,
    ) -> Result<Option<JobBranch>, GitError> {
        let key = canonical(repo)?;
        let path = canonical(worktree)?;
        let state = self.lock();
        // The fake's worktrees are always detached: a job cannot attach them to a branch.
        match state.repo(&key)?.worktrees.contains_key(&path) {
            true => Ok(None),
            false => Err(not_found_repo(&path)),
        }
    }

    async fn list_worktrees(&self, repo: &Path) -> Result<Vec<PathBuf>, GitError> {
        let key = canonical(repo)?;
        Ok(self.lock().repo(&key)?.worktrees.keys().cloned().collect())
    }

    async fn head(&self, worktree: &Path) -> Result<CommitId, GitError> {
        let path = canonical(worktree)?;
        let state = self.lock();
        if let Some(main) = state.repos.get(&path) {
            return main.head_commit();
        }
        let owner = state.worktree_owner(&path)?;
        let r = state.repo(&owner)?;
        r.worktrees
            .get(&path)
            .cloned()
            .ok_or_else(|| not_found_repo(&path))
    }

    async fn merge_into_worktree(
        &self,
        worktree: &Path,
        commits: &[CommitId],
        message: &str,
        resolver: Option<&dyn ConflictResolver>,
    ) -> Result<CommitId, GitError> {
        let path = canonical(worktree)?;
        let start = self.head(&path).await?;
        let mut head = start.clone();
        for commit in commits {
            // Merge in memory; without a resolver, a conflict leaves the worktree at `start`.
            let (key, theirs, merge) = {
                let mut state = self.lock();
                let key = state.worktree_owner(&path)?;
                let r = state.repo(&key)?;
                let theirs = r.resolve(commit)?;
                if r.is_ancestor(&theirs, &head) {
                    continue;
                }
                if r.is_ancestor(&head, &theirs) {
                    head = theirs;
                    continue;
                }
                let merge = r.merge(&head, &theirs)?;
                if merge.conflicts.is_empty() {
                    head = state.commit(&key, vec![head.clone(), theirs], merge.tree, message)?;
                    continue;
                }
                (key, theirs, merge)
            };
            let Some(resolver) = resolver else {
                return Err(GitError::MergeConflict {
                    context: format!("merging {} into {}", short(&theirs), path.display()),
                    paths: merge.conflict_paths(),
                });
            };
            // The resolver edits real files: bring the worktree to the state so far first.
            self.checkout_worktree(&path, &head)?;
            let sides = (head.as_str(), theirs.as_str());
            head = self
                .resolve_conflict(&key, &path, &start, &merge, sides, message, resolver)
                .await?;
        }
        self.checkout_worktree(&path, &head)?;
        Ok(head)
    }

    async fn commit_all(
        &self,
        worktree: &Path,
        message: &str,
    ) -> Result<Option<CommitId>, GitError> {
        let path = canonical(worktree)?;
        let mut state = self.lock();
        let key = state.worktree_owner(&path)?;
        let r = state.repo(&key)?;
        let head = r
            .worktrees
            .get(&path)
            .cloned()
            .ok_or_else(|| not_found_repo(&path))?;
        let tree = read_tree_files(&path, &r.excludes, &[])?;
        if *r.tree_of(&head)? == tree {
            return Ok(None);
        }
        let id = state.commit(&key, vec![head], tree, message)?;
        state.repo_mut(&key)?.worktrees.insert(path, id.clone());
        Ok(Some(id))
    }

    async fn reset_worktree(&self, worktree: &Path, commit: &str) -> Result<(), GitError> {
        let path = canonical(worktree)?;
        let mut state = self.lock();
        let key = state.worktree_owner(&path)?;
        let r = state.repo_mut(&key)?;
        if !r.worktrees.contains_key(&path) {
            return Err(not_found_repo(&path));
        }
        let id = r.resolve(commit)?;
        let target = r.tree_of(&id)?;
        // What is there now, ignored files left out: exactly what the reset may replace.
        let current = read_tree_files(&path, &r.excludes, &[])?;
        write_tree_files(&path, &current, &target)?;
        r.worktrees.insert(path, id);
        Ok(())
    }

    async fn merge_into_branch(
        &self,
        repo: &Path,
        branch: &str,
        commit: &str,
        message: &str,
        style: MergeStyle,
    ) -> Result<CommitId, GitError> {
        let key = canonical(repo)?;
        let mut state = self.lock();
        let r = state.repo(&key)?;
        let tip = r
            .branches
            .get(branch)
            .cloned()
            .ok_or_else(|| GitError::NotFound {
                what: format!("branch `{branch}`"),
            })?;
        let theirs = r.resolve(commit)?;
        if r.is_ancestor(&theirs, &tip) {
            return Ok(tip);
        }
        let new_tree = if style == MergeStyle::FastForward && r.is_ancestor(&tip, &theirs) {
            None
        } else {
            let merge = r.merge(&tip, &theirs)?;
            if !merge.conflicts.is_empty() {
                return Err(GitError::MergeConflict {
                    context: format!("merging {} into {branch}", short(&theirs)),
                    paths: merge.conflict_paths(),
                });
            }
            Some(merge.tree)
        };
        // The user's checkout must be clean before anything changes.
        let old = r.tree_of(&tip)?;
        let checkout = if r.checked_out(branch) {
            let new = match &new_tree {
                Some(tree) => Arc::new(tree.clone()),
                None => r.tree_of(&theirs)?,
            };
            let dirty = dirty_files(&old, &new, &r.read_checkout(&key)?);
            if !dirty.is_empty() {
                return Err(GitError::DirtyCheckout {
                    branch: branch.to_string(),
                    path: key.clone(),
                    files: dirty,
                });
            }
            Some(new)
        } else {
            None
        };
        let new_tip = match new_tree {
            Some(tree) => state.commit(&key, vec![tip, theirs], tree, message)?,
            None => theirs,
        };
        if let Some(new) = checkout {
            write_tree_files(&key, &old, &new)?;
        }
        state
            .repo_mut(&key)?
            .branches
            .insert(branch.to_string(), new_tip.clone());
        Ok(new_tip)
    }

    async fn diff_stats(&self, repo: &Path, from: &str, to: &str) -> Result<DiffStats, GitError> {
        let key = canonical(repo)?;
        let state = self.lock();
        let r = state.repo(&key)?;
        let a = r.tree_of(&r.resolve(from)?)?;
        let b = r.tree_of(&r.resolve(to)?)?;
        let mut stats = DiffStats::default();
        let paths: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        for path in paths {
            let (x, y) = (a.get(path), b.get(path));
            if x == y {
                continue;
            }
            stats.files_changed += 1;
            let empty = Vec::new();
            let (x, y) = (
                x.map_or(&empty, |c| c.as_ref()),
                y.map_or(&empty, |c| c.as_ref()),
            );
            if is_binary(x) || is_binary(y) {
                continue;
            }
            let (del, ins) = line_changes(x, y);
            stats.deletions += del;
            stats.insertions += ins;
        }
        Ok(stats)
    }

    async fn exclude(&self, repo: &Path, patterns: &[&str]) -> Result<(), GitError> {
        let key = canonical(repo)?;
        let mut state = self.lock();
        let r = state.repo_mut(&key)?;
        for p in patterns {
            if !r.excludes.iter().any(|e| e == p) {
                r.excludes.push(p.to_string());
            }
        }
        Ok(())
    }
}

impl MemoryGit {
    /// Writes the conflicted merge of `theirs` into the worktree (which is at `ours`), lets
    /// `resolver` edit it, and commits the result. When the resolver fails, the worktree goes back
    /// to `start`.
    #[allow(clippy::too_many_arguments)]
    async fn resolve_conflict(
        &self,
        key: &Path,
        worktree: &Path,
        start: &str,
        merge: &Merge,
        (ours, theirs): (&str, &str),
        message: &str,
        resolver: &dyn ConflictResolver,
    ) -> Result<CommitId, GitError> {
        let parents = vec![ours.to_string(), theirs.to_string()];
        let (ours, start_tree, excludes) = {
            let state = self.lock();
            let r = state.repo(key)?;
            (r.tree_of(ours)?, r.tree_of(start)?, r.excludes.clone())
        };
        let marked = merge.marked_tree();
        write_tree_files(worktree, &ours, &marked)?;
        let paths = merge.conflict_paths();
        let resolved = match resolver.resolve(worktree, &paths).await {
            Ok(()) => read_tree_files(worktree, &excludes, &[]).and_then(|tree| {
                let left: Vec<String> = paths
                    .iter()
                    .filter(|p| tree.get(*p).is_some_and(|c| super::has_conflict_markers(c)))
                    .cloned()
                    .collect();
                if left.is_empty() {
                    Ok(tree)
                } else {
                    Err(GitError::MergeConflict {
                        context: format!(
                            "merging {} into {}: the resolver left conflict markers",
                            short(theirs),
                            worktree.display()
                        ),
                        paths: left,
                    })
                }
            }),
            Err(e) => Err(e),
        };
        let mut state = self.lock();
        let head = match resolved {
            Ok(tree) => state.commit(key, parents, tree, message)?,
            Err(e) => {
                write_tree_files(worktree, &marked, &start_tree)?;
                state
                    .repo_mut(key)?
                    .worktrees
                    .insert(worktree.to_path_buf(), start.to_string());
                return Err(e);
            }
        };
        state
            .repo_mut(key)?
            .worktrees
            .insert(worktree.to_path_buf(), head.clone());
        Ok(head)
    }

    /// Brings the worktree's files and HEAD to `commit`, refusing to overwrite local edits.
    fn checkout_worktree(&self, worktree: &Path, commit: &str) -> Result<(), GitError> {
        let mut state = self.lock();
        let key = state.worktree_owner(worktree)?;
        let r = state.repo_mut(&key)?;
        let old_id = r.worktrees.get(worktree).cloned().unwrap_or_default();
        if old_id == commit {
            return Ok(());
        }
        let (old, new) = (r.tree_of(&old_id)?, r.tree_of(commit)?);
        let current = read_tree_files(worktree, &r.excludes, &[])?;
        let clobbered: Vec<String> = old
            .keys()
            .chain(new.keys())
            .filter(|p| {
                let (o, n, c) = (old.get(*p), new.get(*p), current.get(*p));
                o != n && c != o && c != n
            })
            .cloned()
            .collect();
        if !clobbered.is_empty() {
            return Err(GitError::other(
                "checkout",
                format!(
                    "local changes in {} would be overwritten: {}",
                    worktree.display(),
                    clobbered.join(", ")
                ),
            ));
        }
        write_tree_files(worktree, &old, &new)?;
        r.worktrees
            .insert(worktree.to_path_buf(), commit.to_string());
        Ok(())
    }
}

/// Refuses to move or delete the default branch or the branch checked out in the main checkout.
fn protect(r: &Repo, branch: &str, operation: &str) -> Result<(), GitError> {
    let reason = if branch == r.default_branch {
        "it is the default branch"
    } else if r.checked_out(branch) {
        "it is checked out in the main worktree"
    } else {
        return Ok(());
    };
    Err(GitError::ProtectedBranch {
        branch: branch.to_string(),
        operation: operation.to_string(),
        reason: reason.to_string(),
    })
}

/// Files whose state would be lost by moving a checkout from `old` to `new`: tracked files that
/// differ from `old`, and untracked files at paths `new` adds. Sorted, at most
/// [`DIRTY_FILES_SHOWN`].
fn dirty_files(old: &Tree, new: &Tree, current: &Tree) -> Vec<String> {
    let modified = old
        .iter()
        .filter(|(p, c)| current.get(*p) != Some(*c))
        .map(|(p, _)| p);
    let untracked = current.keys().filter(|p| {
        !old.contains_key(*p) && new.get(*p).is_some_and(|n| Some(n) != current.get(*p))
    });
    let all: BTreeSet<&String> = modified.chain(untracked).collect();
    all.into_iter().take(DIRTY_FILES_SHOWN).cloned().collect()
}

/// Checks a branch name against git's ref-format rules (`git check-ref-format --branch`).
fn check_branch_name(name: &str) -> Result<(), GitError> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.starts_with('-') {
        Some("it starts with `-`")
    } else if name == "HEAD" || name == "@" {
        Some("it is reserved")
    } else if name.contains("..") {
        Some("it contains `..`")
    } else if name.contains("@{") {
        Some("it contains `@{`")
    } else if name.contains("//") || name.starts_with('/') || name.ends_with('/') {
        Some("it has an empty path component")
    } else if name.ends_with('.') {
        Some("it ends with `.`")
    } else if name
        .chars()
        .any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c))
    {
        Some("it contains a space, a control character or one of ~ ^ : ? * [ \\")
    } else if name
        .split('/')
        .any(|part| part.starts_with('.') || part.ends_with(".lock"))
    {
        Some("a component starts with `.` or ends with `.lock`")
    } else {
        None
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(GitError::InvalidBranchName {
            name: name.to_string(),
            reason: reason.to_string(),
        }),
    }
}

/// Resolves `path` (symbolic links of its existing part included) and checks that it lies
/// strictly inside `root`.
fn confine(root: &Path, path: &Path) -> Result<PathBuf, GitError> {
    let outside = || GitError::PathOutsideRoot {
        path: path.to_path_buf(),
        root: root.to_path_buf(),
    };
    if !path.is_absolute() {
        return Err(outside());
    }
    let resolved = super::resolve_physical(path).map_err(|(p, e)| match e.kind() {
        std::io::ErrorKind::NotFound => GitError::NotFound {
            what: format!("path {}", p.display()),
        },
        _ => io_error("resolve path", &p, e),
    })?;
    if resolved.starts_with(root) && resolved != root {
        Ok(resolved)
    } else {
        Err(outside())
    }
}

fn canonical(path: &Path) -> Result<PathBuf, GitError> {
    std::fs::canonicalize(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => GitError::NotFound {
            what: format!("path {}", path.display()),
        },
        _ => io_error("resolve path", path, e),
    })
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

fn not_found_repo(path: &Path) -> GitError {
    GitError::NotFound {
        what: format!("repository {}", path.display()),
    }
}

fn io_error(operation: &str, path: &Path, e: std::io::Error) -> GitError {
    GitError::Other {
        operation: operation.to_string(),
        message: format!("{}: {e}", path.display()),
        retryable: false,
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// Moves the files under `dir` from tree `old` to tree `new`: writes what differs, deletes what
/// `new` lacks (and folders left empty).
fn write_tree_files(dir: &Path, old: &Tree, new: &Tree) -> Result<(), GitError> {
    for (path, content) in new {
        if old.get(path) == Some(content) && dir.join(path).is_file() {
            continue;
        }
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error("checkout", parent, e))?;
        }
        std::fs::write(&file, content.as_slice()).map_err(|e| io_error("checkout", &file, e))?;
    }
    for path in old.keys().filter(|p| !new.contains_key(*p)) {
        let file = dir.join(path);
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("checkout", &file, e)),
        }
        let mut parent = file.parent();
        while let Some(p) = parent.filter(|p| *p != dir && is_empty_dir(p)) {
            let _ = std::fs::remove_dir(p);
            parent = p.parent();
        }
    }
    Ok(())
}

/// Reads the files under `dir` as a tree, leaving out `.git`, symbolic links, the folders in
/// `skip`, and what `.gitignore` or `excludes` ignore.
fn read_tree_files(dir: &Path, excludes: &[String], skip: &[&Path]) -> Result<Tree, GitError> {
    let mut rules: Vec<IgnoreRule> = excludes
        .iter()
        .filter_map(|l| IgnoreRule::parse(l))
        .collect();
    if let Ok(text) = std::fs::read_to_string(dir.join(".gitignore")) {
        rules.extend(text.lines().filter_map(IgnoreRule::parse));
    }
    let mut tree = Tree::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((folder, prefix)) = pending.pop() {
        // A folder's own `.gitignore` applies below it (the root's was read above).
        if !prefix.is_empty() {
            if let Ok(text) = std::fs::read_to_string(folder.join(".gitignore")) {
                let scoped = text.lines().filter_map(IgnoreRule::parse);
                rules.extend(scoped.map(|r| r.under(&prefix)));
            }
        }
        let entries =
            std::fs::read_dir(&folder).map_err(|e| io_error("read worktree", &folder, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error("read worktree", &folder, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            let kind = entry
                .file_type()
                .map_err(|e| io_error("read worktree", &entry.path(), e))?;
            if name == ".git" || kind.is_symlink() || skip.contains(&entry.path().as_path()) {
                continue;
            }
            if ignored(&rules, &rel, kind.is_dir()) {
                continue;
            }
            if kind.is_dir() {
                pending.push((entry.path(), format!("{rel}/")));
            } else {
                let content = std::fs::read(entry.path())
                    .map_err(|e| io_error("read worktree", &entry.path(), e))?;
                tree.insert(rel, Arc::new(content));
            }
        }
    }
    Ok(tree)
}

/// One line of a `.gitignore`.
struct IgnoreRule {
    pattern: String,
    negate: bool,
    dir_only: bool,
    /// Matched against the whole path (it had a `/` before its end) instead of the file name.
    anchored: bool,
    /// The folder (`/`-terminated, empty for the root) whose `.gitignore` holds the rule: it
    /// matches only below it, relative to it.
    base: String,
}

impl IgnoreRule {
    fn parse(line: &str) -> Option<Self> {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let (negate, line) = match line.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let (dir_only, line) = match line.strip_suffix('/') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let anchored = line.contains('/');
        let pattern = line.trim_start_matches('/').to_string();
        (!pattern.is_empty()).then_some(Self {
            pattern,
            negate,
            dir_only,
            anchored,
            base: String::new(),
        })
    }

    /// The rule as read from the `.gitignore` of folder `base` (`/`-terminated).
    fn under(mut self, base: &str) -> Self {
        self.base = base.to_string();
        self
    }

    fn matches(&self, rel: &str, is_dir: bool) -> bool {
        if self.dir_only && !is_dir {
            return false;
        }
        let Some(rel) = rel.strip_prefix(self.base.as_str()) else {
            return false;
        };
        let subject = if self.anchored {
            rel
        } else {
            rel.rsplit('/').next().unwrap_or(rel)
        };
        glob(self.pattern.as_bytes(), subject.as_bytes())
    }
}

fn ignored(rules: &[IgnoreRule], rel: &str, is_dir: bool) -> bool {
    rules
        .iter()
        .rev()
        .find(|r| r.matches(rel, is_dir))
        .is_some_and(|r| !r.negate)
}

/// `*` (not crossing `/`) and `?` wildcards.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len())
            .take_while(|&i| i == 0 || text[i - 1] != b'/')
            .any(|i| glob(rest, &text[i..])),
        Some((b'?', rest)) => text
            .split_first()
            .is_some_and(|(c, t)| *c != b'/' && glob(rest, t)),
        Some((p, rest)) => text
            .split_first()
            .is_some_and(|(c, t)| c == p && glob(rest, t)),
    }
}

/// Git's rule: a NUL byte in the first 8000 bytes makes a file binary.
fn is_binary(content: &[u8]) -> bool {
    content.iter().take(8000).any(|b| *b == 0)
}

/// Lines removed and added by a minimal line diff of `a` to `b`.
fn line_changes(a: &[u8], b: &[u8]) -> (usize, usize) {
    let a: Vec<&[u8]> = a.split_inclusive(|c| *c == b'\n').collect();
    let b: Vec<&[u8]> = b.split_inclusive(|c| *c == b'\n').collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[prefix..], &b[prefix..]);
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[..a.len() - suffix], &b[..b.len() - suffix]);
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        return (a.len(), b.len()); // too large for the quadratic table: count it all as changed
    }
    // Longest common subsequence, one row at a time.
    let mut row = vec![0usize; b.len() + 1];
    for x in a {
        let mut diagonal = 0;
        for (j, y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if x == y {
                diagonal + 1
            } else {
                above.max(row[j])
            };
            diagonal = above;
        }
    }
    let common = row[b.len()];
    (a.len() - common, b.len() - common)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::git::{run_all, GitFixture, INITIAL_FILES};

    #[tokio::test]
    async fn memory_git_passes_the_conformance_suite() {
        run_all(|| async {
            let dir = tempfile::tempdir().expect("temp dir");
            let repo = dir.path().join("repo");
            let git = MemoryGit::new();
            git.init_repo(&repo, "main", INITIAL_FILES)
                .expect("init repo");
            let switcher = git.clone();
            GitFixture {
                git: Arc::new(git),
                repo,
                default_branch: "main".to_string(),
                switch: Arc::new(move |repo: &Path, rev: &str| {
                    switcher.switch(repo, rev).map_err(|e| e.to_string())
                }),
                guard: Box::new(dir),
            }
        })
        .await;
    }

    #[test]
    fn branch_names_follow_git_rules() {
        for bad in [
            "", "-x", "a..b", "a b", "x.lock", "a/.b", "a~1", "a@{1}", "a/", "a//b", "x.",
        ] {
            assert!(
                check_branch_name(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
        for good in [
            "main",
            "orchestrator/snapshot/abc-123",
            "feature_x.y",
            "a@b",
        ] {
            assert!(
                check_branch_name(good).is_ok(),
                "{good:?} should be accepted"
            );
        }
    }

    #[test]
    fn ignore_rules_match_like_git() {
        let rules: Vec<IgnoreRule> = ["target/", "*.log", "/only-top", "docs/tmp", "!keep.log"]
            .iter()
            .filter_map(|l| IgnoreRule::parse(l))
            .collect();
        assert!(ignored(&rules, "target", true));
        assert!(ignored(&rules, "a/target", true));
        assert!(!ignored(&rules, "target", false));
        assert!(ignored(&rules, "x/debug.log", false));
        assert!(!ignored(&rules, "keep.log", false));
        assert!(ignored(&rules, "only-top", false));
        assert!(!ignored(&rules, "a/only-top", false));
        assert!(ignored(&rules, "docs/tmp", false));
    }

    #[test]
    fn line_changes_are_minimal() {
        assert_eq!(line_changes(b"a\nb\nc\n", b"a\nB\nc\nd\n"), (1, 2));
        assert_eq!(line_changes(b"", b"x\ny"), (0, 2));
        assert_eq!(line_changes(b"same\n", b"same\n"), (0, 0));
    }
}
