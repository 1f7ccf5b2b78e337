//! The snapshot-validation node: brings the snapshot up to date with the target, runs setup
//! and `verifyRi`, commits what they changed and merges the result onto the target branch.
//! When nothing runs on the snapshot and the target has not moved, no worktree is made: the
//! snapshot's tip is merged as it is.

use super::job::WorktreeStart;
use super::*;
use crate::git::CommitId;

/// The tips of a plan's snapshot and target branches when its validation begins.
struct SnapshotTips {
    snapshot: CommitId,
    target: CommitId,
}

/// Where the snapshot node's phases run.
enum SnapshotStart {
    /// On a worktree of the snapshot, laid out as this says.
    Worktree(WorktreeStart),
    /// Nowhere: nothing runs on the snapshot and the target has not moved, so the commit to
    /// merge onto the target is the snapshot's tip.
    Tip(CommitId),
}

impl NodeRun {
    pub(super) async fn run_snapshot(&self) -> PhaseResult {
        let git = self.git()?.clone();
        let (Some(snapshot), Some(target)) =
            (self.snapshot_branch.clone(), self.target_branch.clone())
        else {
            return Err(NodeFailure::new(
                Phase::MergeFi,
                FailureReason::StartupError,
                "the plan has no snapshot or target branch",
            ));
        };
        let wt = self.worktree.clone().unwrap_or_else(|| {
            self.worktree_root()
                .join(crate::engine::snapshot_worktree_name(&self.plan))
        });
        // A worktree is needed to run setup or `verifyRi`, or to merge a target that moved
        // (a conflict goes to the resolver there). Without them the snapshot's tip is the
        // result, and a checkout of the whole tree (then its removal) would only add to the
        // plan's last, serial step. A worktree an earlier run laid out is used again.
        let bare =
            self.worktree.is_none() && self.spec.verify_ri.is_none() && !self.snapshot_setup();
        let start = self
            .phase(Phase::MergeFi, |log| async {
                let tips = self.snapshot_tips(&git, &snapshot, &target).await?;
                if bare && self.contains(&git, &tips.snapshot, &tips.target).await? {
                    log.line(
                        LogStream::System,
                        &format!(
                            "{target} has not moved and nothing runs on the snapshot: merging its tip {} without a worktree",
                            tips.snapshot
                        ),
                    );
                    return Ok(SnapshotStart::Tip(tips.snapshot));
                }
                self.snapshot_fi(&git, &snapshot, &target, &tips, &wt, log)
                    .await
                    .map(SnapshotStart::Worktree)
            })
            .await?;
        let tip = match start {
            SnapshotStart::Tip(tip) => Some(tip),
            SnapshotStart::Worktree(laid_out) => {
                self.validate_snapshot(&wt, laid_out).await?;
                None
            }
        };
        let commit = match (self.runs(Phase::Commit), &self.prev_commit) {
            // Resuming the final merge: the validated commit was recorded.
            (false, Some(commit)) => commit.clone(),
            _ => {
                let commit = self
                    .phase(Phase::Commit, |log| async {
                        match &tip {
                            Some(tip) => Ok(tip.clone()),
                            None => self.snapshot_commit(&git, &wt, log).await,
                        }
                    })
                    .await?;
                self.send(StateChange::Commit {
                    node: self.node,
                    commit: commit.clone(),
                });
                commit
            }
        };
        self.phase(Phase::MergeRi, |log| {
            self.snapshot_merge(&git, &target, &commit, log)
        })
        .await?;
        Ok(())
    }

    /// Runs setup and `verifyRi` on the snapshot worktree `wt`, laid out as `laid_out` says.
    async fn validate_snapshot(&self, wt: &Path, laid_out: WorktreeStart) -> PhaseResult {
        // As for jobs (see `WorktreeStart`): after a reset, setup and verifyRi run again.
        let from = if laid_out == WorktreeStart::Reset && self.resume_from <= Phase::Work {
            Phase::Setup
        } else {
            self.resume_from
        };
        if from <= Phase::Setup && self.snapshot_setup() {
            self.phase(Phase::Setup, |log| self.setup(wt, log)).await?;
        }
        if let Some(verify) = self.spec.verify_ri.as_ref().filter(|_| from <= Phase::Work) {
            self.phase(Phase::Work, |log| {
                self.run_spec(Phase::Work, verify, wt, log)
            })
            .await?;
        }
        Ok(())
    }

    /// Whether the snapshot has a setup to run (`worktreeInit` or `additionalSymlinkDirs`).
    fn snapshot_setup(&self) -> bool {
        !self.spec.worktree_init.is_empty() || !self.spec.additional_symlink_dirs.is_empty()
    }

    /// The tips of the snapshot and target branches; a missing one fails the phase.
    async fn snapshot_tips(
        &self,
        git: &Arc<dyn GitOperations>,
        snapshot: &str,
        target: &str,
    ) -> PhaseResult<SnapshotTips> {
        Ok(SnapshotTips {
            snapshot: self.tip_of(git, "snapshot", snapshot).await?,
            target: self.tip_of(git, "target", target).await?,
        })
    }

    /// The tip of `branch` (the plan's `what` branch), which must exist.
    async fn tip_of(
        &self,
        git: &Arc<dyn GitOperations>,
        what: &str,
        branch: &str,
    ) -> PhaseResult<CommitId> {
        let p = Phase::MergeFi;
        git.branch_tip(&self.repo, branch)
            .await
            .map_err(|e| NodeFailure::git(p, e))?
            .ok_or_else(|| {
                NodeFailure::new(
                    p,
                    FailureReason::PhaseFailed,
                    format!("{what} branch `{branch}` is missing"),
                )
            })
    }

    /// Whether commit `tip` contains `other` (the target has not moved past the snapshot).
    async fn contains(
        &self,
        git: &Arc<dyn GitOperations>,
        tip: &str,
        other: &str,
    ) -> PhaseResult<bool> {
        git.is_ancestor(&self.repo, other, tip)
            .await
            .map_err(|e| NodeFailure::git(Phase::MergeFi, e))
    }

    /// Commits what setup and `verifyRi` changed (if anything) on the snapshot worktree's
    /// HEAD. The snapshot branch is not moved: it stays where the validation began, so a
    /// validation that runs again (after a crash) starts from there, and the commit reaches
    /// the target through the final merge.
    async fn snapshot_commit(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        log: LogSink,
    ) -> PhaseResult<String> {
        let p = Phase::Commit;
        let before = git.head(wt).await.map_err(|e| NodeFailure::git(p, e))?;
        let msg = format!("{} snapshot validation", self.ctx.options.commit_prefix);
        match git
            .commit_all(wt, &msg)
            .await
            .map_err(|e| NodeFailure::git(p, e))?
        {
            Some(c) => {
                log.line(
                    LogStream::System,
                    &format!("verification changes committed: {c}"),
                );
                Ok(c)
            }
            None => Ok(before),
        }
    }

    /// The final merge: the validated snapshot onto the target branch.
    async fn snapshot_merge(
        &self,
        git: &Arc<dyn GitOperations>,
        target: &str,
        commit: &str,
        log: LogSink,
    ) -> PhaseResult {
        let msg = format!(
            "{} merge plan {} into {target}",
            self.ctx.options.commit_prefix, self.spec.name
        );
        let tip = git
            .merge_into_branch(&self.repo, target, commit, &msg, MergeStyle::FastForward)
            .await
            .map_err(|e| NodeFailure::git(Phase::MergeRi, e))?;
        log.line(LogStream::System, &format!("{target} now at {tip}"));
        Ok(())
    }

    /// Brings the snapshot worktree up: at the snapshot branch, with the target's new commits
    /// merged in when the target moved since the plan started.
    async fn snapshot_fi(
        &self,
        git: &Arc<dyn GitOperations>,
        snapshot: &str,
        target: &str,
        tips: &SnapshotTips,
        wt: &Path,
        log: LogSink,
    ) -> PhaseResult<WorktreeStart> {
        let p = Phase::MergeFi;
        // Validation that runs again starts from the snapshot as it was, not on what a
        // stopped run of setup or verifyRi left.
        let laid_out = self
            .lay_out_worktree(git, wt, &tips.snapshot, false, &log)
            .await?;
        let head = git.head(wt).await.map_err(|e| NodeFailure::git(p, e))?;
        if !self.contains(git, &head, &tips.target).await? {
            log.line(
                LogStream::System,
                &format!(
                    "{target} moved to {}; bringing the snapshot up to date",
                    tips.target
                ),
            );
            let merged = git
                .merge_into_worktree(
                    wt,
                    std::slice::from_ref(&tips.target),
                    &format!(
                        "{} update snapshot from target",
                        self.ctx.options.commit_prefix
                    ),
                    self.ctx.resolver.as_deref(),
                )
                .await
                .map_err(|e| NodeFailure::git(p, e))?;
            git.update_branch(&self.repo, snapshot, &merged, Some(&tips.snapshot))
                .await
                .map_err(|e| NodeFailure::git(p, e))?;
        }
        Ok(laid_out)
    }
}
