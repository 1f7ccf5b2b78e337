//! Three-way merges for [`MemoryGit`]: the merge result, merge-base search,
//! the file-level merge of two commits, and handing conflicts to a resolver.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use super::super::{CommitId, ConflictResolver, GitError};
use super::model::Repo;
use super::refs::short;
use super::worktree::{read_tree_files, write_tree_files};
use super::{MemoryGit, Tree};

/// The outcome of a three-way merge.
#[derive(Default)]
pub(super) struct Merge {
    /// Everything that merged cleanly.
    pub(super) tree: Tree,
    /// Paths changed differently on both sides, sorted.
    pub(super) conflicts: Vec<ConflictSides>,
}

pub(super) struct ConflictSides {
    pub(super) path: String,
    pub(super) ours: Option<Arc<Vec<u8>>>,
    pub(super) theirs: Option<Arc<Vec<u8>>>,
}

impl Merge {
    pub(super) fn conflict_paths(&self) -> Vec<String> {
        self.conflicts.iter().map(|c| c.path.clone()).collect()
    }

    /// The merged tree with conflict markers in the conflicting files.
    pub(super) fn marked_tree(&self) -> Tree {
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

impl Repo {
    /// The best common ancestor of `a` and `b` (one that no other common ancestor descends from).
    pub(super) fn merge_base(&self, a: &str, b: &str) -> Option<CommitId> {
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
    pub(super) fn merge(&self, ours: &str, theirs: &str) -> Result<Merge, GitError> {
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
}

impl MemoryGit {
    /// Writes the conflicted merge of `theirs` into the worktree (which is at `ours`), lets
    /// `resolver` edit it, and commits the result. When the resolver fails, the worktree goes back
    /// to `start`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn resolve_conflict(
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
                    .filter(|p| {
                        tree.get(*p)
                            .is_some_and(|c| super::super::has_conflict_markers(c))
                    })
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
}
