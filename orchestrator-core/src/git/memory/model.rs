//! The repository model behind [`MemoryGit`](super::MemoryGit): the shared state, each
//! repository's branches, commits and worktrees, and revision lookup and ancestry.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::{CommitId, GitError};
use super::worktree::{not_found_repo, read_tree_files};
use super::Tree;

#[derive(Default)]
pub(super) struct State {
    pub(super) repos: BTreeMap<PathBuf, Repo>,
    pub(super) next_id: u64,
}

pub(super) struct Repo {
    pub(super) default_branch: String,
    pub(super) head: Head,
    pub(super) branches: BTreeMap<String, CommitId>,
    /// The SDK's own refs (`refs/orchestrator/...`), by full name.
    pub(super) own_refs: BTreeMap<String, CommitId>,
    pub(super) commits: HashMap<CommitId, Commit>,
    /// Linked worktrees (canonical path) and their detached HEAD.
    pub(super) worktrees: BTreeMap<PathBuf, CommitId>,
    /// Patterns of `.git/info/exclude`.
    pub(super) excludes: Vec<String>,
}

#[derive(Clone, PartialEq, Eq)]
pub(super) enum Head {
    Branch(String),
    Detached(CommitId),
}

pub(super) struct Commit {
    pub(super) parents: Vec<CommitId>,
    pub(super) tree: Arc<Tree>,
}

impl State {
    pub(super) fn repo(&self, key: &Path) -> Result<&Repo, GitError> {
        self.repos.get(key).ok_or_else(|| not_found_repo(key))
    }

    pub(super) fn repo_mut(&mut self, key: &Path) -> Result<&mut Repo, GitError> {
        self.repos.get_mut(key).ok_or_else(|| not_found_repo(key))
    }

    /// The repository owning the linked worktree at `path` (canonical).
    pub(super) fn worktree_owner(&self, path: &Path) -> Result<PathBuf, GitError> {
        self.repos
            .iter()
            .find(|(_, r)| r.worktrees.contains_key(path))
            .map(|(k, _)| k.clone())
            .ok_or_else(|| GitError::NotFound {
                what: format!("worktree {}", path.display()),
            })
    }

    /// A fresh 40-hex commit id.
    pub(super) fn new_id(&mut self, parents: &[CommitId], tree: &Tree, message: &str) -> CommitId {
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
    pub(super) fn commit(
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
    pub(super) fn resolve(&self, rev: &str) -> Result<CommitId, GitError> {
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
        if let Some(id) = self.own_refs.get(rev) {
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

    pub(super) fn head_commit(&self) -> Result<CommitId, GitError> {
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

    pub(super) fn tree_of(&self, id: &str) -> Result<Arc<Tree>, GitError> {
        self.commits
            .get(id)
            .map(|c| c.tree.clone())
            .ok_or_else(|| GitError::NotFound {
                what: format!("commit {id}"),
            })
    }

    pub(super) fn checked_out(&self, branch: &str) -> bool {
        self.head == Head::Branch(branch.to_string())
    }

    pub(super) fn is_ancestor(&self, ancestor: &str, descendant: &str) -> bool {
        self.ancestors(descendant).contains(ancestor)
    }

    /// Every commit reachable from `id`, itself included.
    pub(super) fn ancestors(&self, id: &str) -> HashSet<CommitId> {
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

    /// The user's checkout as a tree (ignored files and linked worktrees left out).
    pub(super) fn read_checkout(&self, key: &Path) -> Result<Tree, GitError> {
        let skip: Vec<&Path> = self.worktrees.keys().map(PathBuf::as_path).collect();
        read_tree_files(key, &self.excludes, &skip)
    }
}
