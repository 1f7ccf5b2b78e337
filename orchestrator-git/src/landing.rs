//! Landing a merge on a branch: the compare-and-swap of the ref, with every clean checkout of
//! the branch following it.

use git2::{Oid, Repository};
use orchestrator_core::git::GitError;

use crate::{checkout, refs};

/// Moves `branch` from `tip` to `new` by compare-and-swap; every worktree that has it checked
/// out follows when clean (all are checked before any changes), else [`GitError::DirtyCheckout`].
pub(crate) fn land(
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
