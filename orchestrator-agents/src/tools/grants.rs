//! The open grants: one per run of a job's agent, keyed by its token, holding what the run's
//! agent asked of the engine until the run ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use orchestrator_core::tools::{CronChange, Park, ToolJob, ToolOutcome};

/// One run's grant: the job it acts for and what its agent asked for so far.
#[derive(Debug)]
pub(crate) struct Grant {
    pub(crate) job: ToolJob,
    asked: Mutex<ToolOutcome>,
}

impl Grant {
    /// Records the wait the turn ends with; refused when one is recorded already (a turn ends
    /// once).
    pub(crate) fn park(&self, park: Park) -> Result<(), String> {
        let mut asked = self.lock();
        if asked.park.is_some() {
            return Err(
                "this turn already ends with a wait, a question or a sub-agent call; end the \
                 turn now (one such call per turn)"
                    .to_owned(),
            );
        }
        asked.park = Some(park);
        Ok(())
    }

    /// Records a change of the job's cron (the last one of the run wins).
    pub(crate) fn cron(&self, change: CronChange) {
        self.lock().cron = Some(change);
    }

    /// Whether the job has a cron now: the one it started with unless the run changed it.
    pub(crate) fn has_cron(&self) -> bool {
        match &self.lock().cron {
            Some(CronChange::Set(_)) => true,
            Some(_) => false,
            None => self.job.cron.is_some(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ToolOutcome> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Open grants by token.
#[derive(Debug, Default)]
pub(crate) struct Grants {
    open: Mutex<HashMap<String, Arc<Grant>>>,
    refused: AtomicU64,
}

impl Grants {
    /// Opens a grant for `job`: a fresh random token (two v4 UUIDs: 244 random bits).
    pub(crate) fn open(&self, job: ToolJob) -> String {
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let grant = Arc::new(Grant {
            job,
            asked: Mutex::new(ToolOutcome::default()),
        });
        self.lock().insert(token.clone(), grant);
        token
    }

    /// Closes the grant of `token` (it is refused from now on): what its agent asked for.
    pub(crate) fn close(&self, token: &str) -> ToolOutcome {
        let Some(grant) = self.lock().remove(token) else {
            return ToolOutcome::default();
        };
        let asked = std::mem::take(&mut *grant.lock());
        asked
    }

    /// The grant of `token` if it is open and was given to job `node` of `plan` (the path the
    /// request names); otherwise the refusal is counted and logged.
    pub(crate) fn check(&self, token: Option<&str>, plan: &str, node: &str) -> Option<Arc<Grant>> {
        let grant = token.and_then(|t| self.lock().get(t).cloned());
        let fits = grant
            .as_ref()
            .is_some_and(|g| g.job.plan_id.as_str() == plan && g.job.node_id.as_str() == node);
        if fits {
            return grant;
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        match grant {
            Some(g) => tracing::warn!(
                plan,
                node,
                token_job = %g.job.producer_id,
                "agent tool call refused: the token belongs to another job"
            ),
            None => tracing::warn!(plan, node, "agent tool call refused: no valid token"),
        }
        None
    }

    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Grant>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}
