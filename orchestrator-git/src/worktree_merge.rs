//! Merging a list of commits into a linked worktree: the in-memory rounds ([`advance`]) and,
//! when one conflicts, the round handed to a [`ConflictResolver`]
//! ([`Git2Operations::resolve_with`]). The trait method that drives them is
//! `merge_into_worktree` in `ops.rs`.

use std::path::Path;
use std::sync::Arc;

use git2::{Oid, Repository};
use orchestrator_core::git::{CommitId, ConflictResolver, GitError};

use crate::merge::{self, Step};
use crate::ops::{open_worktree, short, Git2Operations, Inner};
use crate::refs;

impl Git2Operations {
    /// Writes the conflicted merge of `theirs` into the worktree at `path` (moving it to `ours`
    /// first), lets `resolver` edit the conflicting `paths`, and commits the result. On any
    /// failure, or when conflict markers are left, the worktree goes back to `start`.
    pub(crate) async fn resolve_with(
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

/// Where merging a list of commits into a worktree stopped.
pub(crate) enum Advance {
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
pub(crate) fn advance(
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
        match merge::merge_step(wt, wt, head, theirs, true, &signature, message)? {
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
