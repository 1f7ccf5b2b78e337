//! Applying edits to a plan and what an editing tool answers: a refused edit or an invalid
//! result as an argument error naming the field, and the plan's status with its job mapping.

use orchestrator_core::plan::PlanEdit;
use orchestrator_core::state::PlanRecord;
use orchestrator_core::PlanId;
use serde_json::{json, Map, Value};

use crate::args::ArgError;
use crate::report;
use crate::server::{Failure, OrchestratorMcp};

/// `producerId -> jobId` of every job of the plan.
pub(crate) fn job_mapping(record: &PlanRecord) -> Map<String, Value> {
    record
        .spec
        .jobs
        .iter()
        .zip(&record.state.nodes)
        .map(|(j, n)| (j.producer_id.clone(), json!(n.id)))
        .collect()
}

/// A refused edit or invalid result, as an argument error naming the field: `field_of(i)` is
/// the argument holding edit `i`.
pub(super) fn edit_failure(
    e: orchestrator_core::Error,
    field_of: &(dyn Fn(usize) -> String + Sync),
) -> Failure {
    match e {
        orchestrator_core::Error::Edit { source, .. } => Failure::Arg(ArgError::new(
            field_of(source.index),
            source.job.clone().map(Value::from),
            source.message.clone(),
            "an edit the job's state allows (see the tool description)",
        )),
        orchestrator_core::Error::Invalid(errors) => {
            let first = errors.errors().first();
            let field = first.map_or_else(
                || "jobs".to_owned(),
                |e| match &e.job {
                    Some(job) => format!("{job}.{}", e.field),
                    None => e.field.clone(),
                },
            );
            Failure::Arg(ArgError::new(
                field,
                first.map(|e| Value::from(e.value.clone())),
                errors.to_string(),
                "a valid plan: unique producerIds (^[a-z0-9-]{3,64}$), known dependencies, no \
                 cycles",
            ))
        }
        e => e.into(),
    }
}

impl OrchestratorMcp {
    /// Applies `edits` to the plan and answers with its status and job mapping.
    pub(super) async fn apply(
        &self,
        id: &PlanId,
        edits: Vec<PlanEdit>,
        field_of: &(dyn Fn(usize) -> String + Sync),
        what: &str,
    ) -> Result<(Value, String), Failure> {
        self.own(id).await?;
        self.orchestrator
            .edit_plan(id, edits)
            .await
            .map_err(|e| edit_failure(e, field_of))?;
        self.edited(id, what).await
    }

    /// The answer of a tool that changed a plan: its status and options, counts and the job
    /// mapping, but not every job in detail (get_copilot_plan_status has those), so that an
    /// answer stays small while a large plan is built call by call.
    pub(super) async fn edited(&self, id: &PlanId, what: &str) -> Result<(Value, String), Failure> {
        let record = self.record(id).await?;
        let mut doc = report::plan_json(&record);
        if let Some(map) = doc.as_object_mut() {
            map.remove("jobs");
        }
        doc["success"] = json!(true);
        doc["jobMapping"] = Value::Object(job_mapping(&record));
        doc["jobCount"] = json!(record.spec.jobs.len());
        Ok((doc, format!("{what}\n{}", report::plan_text(&record))))
    }
}
