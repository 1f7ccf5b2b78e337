//! Dehydration of a parked agent (SPEC §15, [`crate::tools::SessionArchive`]): when its turn
//! ends with a wait longer than the plan's `dehydrateAfter`, its CLI state is archived and
//! its worktree removed (its files are in the checkpoint commit just made); when it wakes,
//! merge-fi makes the worktree again at the checkpoint and the state is restored before the
//! session resumes. A failure to dehydrate keeps the worktree (the job parks as usual); a
//! failure to hydrate fails the attempt and keeps the blob.

use super::*;
use crate::tools::{session_key, Park, AGENT_STATE_DIR, DEFAULT_DEHYDRATE_AFTER};

impl NodeRun {
    /// Dehydrates the parked agent in `wt` when its `park` is a long enough timer, the engine
    /// has a session archive and there is CLI state to keep.
    pub(super) async fn dehydrate(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        park: &Park,
        checkpoint: &str,
        log: &LogSink,
    ) {
        let (Some(archive), Park::Timer { until, .. }) = (&self.ctx.sessions, park) else {
            return;
        };
        let after = self
            .spec
            .dehydrate_after
            .map_or(DEFAULT_DEHYDRATE_AFTER, std::time::Duration::from_secs);
        let left = until.saturating_sub(now_millis());
        let state = wt.join(AGENT_STATE_DIR);
        if u128::from(left) <= after.as_millis() || !state.is_dir() {
            return;
        }
        let key = session_key(self.plan.as_str(), self.node_id.as_str());
        let producer = self.job().map_or("", |j| j.producer_id.as_str());
        let attributes = [
            ("plan", self.plan.as_str()),
            ("job", producer),
            ("checkpoint", checkpoint),
        ];
        if let Err(e) = archive.store(&key, &state, &attributes).await {
            log.line(
                LogStream::System,
                &format!("could not dehydrate the session ({e}); its worktree stays"),
            );
            return;
        }
        if let Err(e) = git.remove_worktree(&self.repo, wt).await {
            log.line(
                LogStream::System,
                &format!("could not remove the worktree after dehydrating ({e}); it stays"),
            );
            return;
        }
        log.line(
            LogStream::System,
            &format!(
                "dehydrated the session to `{key}` and removed the worktree; it is made again at \
                 {checkpoint} when the job wakes"
            ),
        );
        self.send(StateChange::Dehydrated {
            node: self.node,
            blob: Some(key),
        });
    }

    /// Restores a dehydrated session's CLI state into its new worktree `wt`, and forgets the
    /// blob once the state is back.
    pub(super) async fn hydrate(&self, wt: &Path, log: &LogSink) -> PhaseResult {
        let Some(key) = &self.dehydrated else {
            return Ok(());
        };
        let p = Phase::MergeFi;
        let fail = |message: String| NodeFailure::new(p, FailureReason::StartupError, message);
        let archive = self.ctx.sessions.as_ref().ok_or_else(|| {
            fail(format!(
                "the session is dehydrated to `{key}`, but this engine has no session archive \
                 (configure the same blob store the plan ran with)"
            ))
        })?;
        let state = wt.join(AGENT_STATE_DIR);
        // A fresh worktree may hold an empty state folder; anything else in it is not ours to
        // overwrite.
        let _ = std::fs::remove_dir(&state);
        archive.restore(key, &state).await.map_err(|e| {
            fail(format!(
                "cannot hydrate the session from `{key}`: {e} (the blob is kept)"
            ))
        })?;
        log.line(
            LogStream::System,
            &format!("hydrated the session from `{key}`"),
        );
        if let Err(e) = archive.forget(key).await {
            log.line(
                LogStream::System,
                &format!("could not delete the blob `{key}` after hydrating: {e}"),
            );
        }
        self.send(StateChange::Dehydrated {
            node: self.node,
            blob: None,
        });
        Ok(())
    }
}
