//! Resolving a tool's plan and job arguments: a plan id or unique prefix, taking a stored plan
//! over, and a job named by `jobId` or `producerId`.

use orchestrator_core::state::NodeState;
use orchestrator_core::view::PlanView;
use orchestrator_core::PlanId;
use serde_json::json;

use super::{Failure, OrchestratorMcp};
use crate::args::ArgError;

/// One job of a plan, as a tool's arguments named it.
pub(super) struct JobAt {
    pub(super) id: PlanId,
    pub(super) record: PlanView,
    /// The job's node index.
    pub(super) n: usize,
    /// Its producerId (or `snapshot-validation`).
    pub(super) label: String,
}

impl JobAt {
    pub(super) fn node(&self) -> &NodeState {
        &self.record.state.nodes[self.n]
    }
}

impl OrchestratorMcp {
    /// A plan id from an argument: exact, or a unique prefix of a stored plan's id.
    pub(crate) async fn plan_id(&self, arg: &str) -> Result<PlanId, Failure> {
        let arg = arg.trim();
        let not_found = |message: String| {
            ArgError::new(
                "planId",
                Some(json!(arg)),
                message,
                "the planId of an existing plan (list_copilot_plans lists them) or a unique prefix",
            )
        };
        if arg.is_empty() {
            return Err(not_found("empty".into()).into());
        }
        let exact = PlanId::from(arg);
        if self.drives(&exact) {
            return Ok(exact);
        }
        let listing = self.orchestrator.repository().list().await?;
        orchestrator_core::view::find_plan(&listing, arg).map_err(|e| match e {
            orchestrator_core::Error::AmbiguousPlan { matches, .. } => {
                not_found(format!("matches {} plans", matches.len())).into()
            }
            _ => not_found("no such plan".into()).into(),
        })
    }

    /// Whether this server drives the plan (a lookup, without listing every plan).
    fn drives(&self, id: &PlanId) -> bool {
        self.orchestrator.plan_status(id).is_ok()
    }

    /// The plan's current view (live when this server drives it, else as stored).
    pub(crate) async fn record(&self, id: &PlanId) -> Result<PlanView, Failure> {
        Ok(self.orchestrator.view(id).await?)
    }

    /// Resolves a plan id (or prefix) and takes the plan over, as every tool that drives a plan
    /// must.
    pub(crate) async fn owned_plan(&self, arg: &str) -> Result<PlanId, Failure> {
        let id = self.plan_id(arg).await?;
        self.own(&id).await?;
        Ok(id)
    }

    /// Makes sure this server drives the plan (takes a stored one over).
    pub(crate) async fn own(&self, id: &PlanId) -> Result<(), Failure> {
        if self.drives(id) {
            return Ok(());
        }
        self.orchestrator.open_plan(id).await.map_err(|e| match e {
            orchestrator_core::Error::Store(orchestrator_core::StoreError::Locked {
                owner,
                ..
            }) => Failure::other(
                "locked",
                format!(
                    "plan {id} is being run by {owner}; it can be inspected here but not driven \
                     until that process releases it"
                ),
            ),
            e => e.into(),
        })
    }

    /// Resolves `jobId`/`producerId` to a node index and its label.
    pub(crate) fn job(
        record: &PlanView,
        job_id: Option<&str>,
        producer_id: Option<&str>,
    ) -> Result<(usize, String), Failure> {
        let (field, value) = match (job_id, producer_id) {
            (Some(j), _) => ("jobId", j),
            (None, Some(p)) => ("producerId", p),
            (None, None) => {
                return Err(ArgError::new(
                    "jobId",
                    None,
                    "give `jobId` or `producerId`",
                    "a node id or producerId from list_copilot_jobs",
                )
                .into())
            }
        };
        let n = record.resolve(value).map_err(|e| {
            let message = match e {
                // The reference is the argument's value: the message need not repeat the plan.
                orchestrator_core::Error::JobNotFound { reference, .. } => format!(
                    "no job `{reference}`: name a producerId, a node id or a unique job name"
                ),
                e => e.to_string(),
            };
            ArgError::new(
                field,
                Some(json!(value)),
                message,
                format!(
                    "one of the plan's jobs: {}",
                    record
                        .spec
                        .jobs
                        .iter()
                        .take(20)
                        .map(|j| j.producer_id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        // `producerId` names a job by producerId only (the snapshot node by its label).
        if field == "producerId" && record.job(n).is_some_and(|j| j.producer_id != value) {
            return Err(ArgError::new(
                field,
                Some(json!(value)),
                "no job has this producerId",
                "the producerId of one of the plan's jobs",
            )
            .into());
        }
        Ok((n, record.label(n).to_owned()))
    }

    /// Resolves a plan (an id or a unique prefix) and one of its jobs (`jobId` or
    /// `producerId`).
    pub(super) async fn job_at(
        &self,
        plan: &str,
        job_id: Option<&str>,
        producer_id: Option<&str>,
    ) -> Result<JobAt, Failure> {
        let id = self.plan_id(plan).await?;
        let record = self.record(&id).await?;
        let (n, label) = Self::job(&record, job_id, producer_id)?;
        Ok(JobAt {
            id,
            record,
            n,
            label,
        })
    }
}
