//! Retrying jobs: the replacement specs a retry tool may give (`newWork`, `newPrechecks`,
//! `newPostchecks`) and starting the plan again after the retry.

use orchestrator_core::plan::WorkSpec;
use orchestrator_core::{Orchestrator, PlanId, PlanStatus, RetryRequest};
use serde_json::Value;

use super::{Failure, OrchestratorMcp};
use crate::args::ArgError;

/// Retries `request` and starts the plan again unless it is paused; returns how many jobs are
/// retried.
pub(crate) async fn retry_and_continue(
    orchestrator: &Orchestrator,
    id: &PlanId,
    request: RetryRequest,
) -> orchestrator_core::Result<usize> {
    let n = orchestrator.retry(id, request).await?;
    if orchestrator.plan_status(id)? != PlanStatus::Paused {
        orchestrator.start(id).await?;
    }
    Ok(n)
}

impl OrchestratorMcp {
    /// Work specs from a `newWork`-like argument.
    fn work(field: &str, value: Option<Value>) -> Result<Option<WorkSpec>, Failure> {
        let Some(value) = value else { return Ok(None) };
        serde_path_to_error::deserialize::<_, WorkSpec>(value.clone())
            .map(Some)
            .map_err(|e| {
                let path = e.path().to_string();
                let field = if path.is_empty() || path == "." {
                    field.to_owned()
                } else {
                    format!("{field}.{path}")
                };
                ArgError::new(
                    field,
                    Some(value),
                    e.inner().to_string(),
                    "a shell command string, \"@agent <instructions>\", or an object with \
                     \"type\": \"shell\" | \"process\" | \"agent\"",
                )
                .into()
            })
    }

    /// `request` with a retry tool's replacement specs (`newWork`, `newPrechecks`,
    /// `newPostchecks`) and `clearWorktree`.
    pub(super) fn with_new_specs(
        mut request: RetryRequest,
        work: Option<Value>,
        prechecks: Option<Value>,
        postchecks: Option<Value>,
        clear_worktree: bool,
    ) -> Result<RetryRequest, Failure> {
        request.work = Self::work("newWork", work)?;
        request.prechecks = Self::work("newPrechecks", prechecks)?;
        request.postchecks = Self::work("newPostchecks", postchecks)?;
        request.clear_worktree = clear_worktree;
        Ok(request)
    }

    /// Takes the plan over, retries `request` and starts the plan again unless it is paused;
    /// returns how many jobs are retried.
    pub(super) async fn retry(&self, id: &PlanId, request: RetryRequest) -> Result<usize, Failure> {
        self.own(id).await?;
        Ok(retry_and_continue(&self.orchestrator, id, request).await?)
    }
}
