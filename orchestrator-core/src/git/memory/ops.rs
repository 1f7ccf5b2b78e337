//! The [`GitOperations`] implementation of [`MemoryGit`]; each method locks the shared state and
//! leans on the model, merge, worktree and ref helpers of the sibling modules.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use super::super::{
    check_own_ref, CommitId, ConflictResolver, DiffStats, GitError, GitOperations, JobBranch,
    MergeStyle,
};
use super::diff::{is_binary, line_changes};
use super::model::Head;
use super::refs::{check_branch_name, protect, short};
use super::worktree::{
    canonical, confine, dirty_files, io_error, is_empty_dir, not_found_repo, read_tree_files,
    write_tree_files,
};
use super::{MemoryGit, Tree};

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

    async fn set_ref(&self, repo: &Path, name: &str, commit: &str) -> Result<(), GitError> {
        check_own_ref(name)?;
        let key = canonical(repo)?;
        let mut state = self.lock();
        let r = state.repo_mut(&key)?;
        let id = r.resolve(commit)?;
        r.own_refs.insert(name.to_string(), id);
        Ok(())
    }

    async fn delete_ref(&self, repo: &Path, name: &str) -> Result<(), GitError> {
        check_own_ref(name)?;
        let key = canonical(repo)?;
        self.lock().repo_mut(&key)?.own_refs.remove(name);
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
