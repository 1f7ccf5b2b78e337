//! Reading the job arguments of the editing tools: the plan of untyped arguments, a job to
//! add, the job a reference names, and a job's changes (top-level fields and/or `changes`).

use orchestrator_core::plan::{JobSpec, JobUpdate};
use orchestrator_core::state::PlanRecord;
use orchestrator_core::view::PlanView;
use serde_json::{Map, Value};

use super::JOB_ALLOWED;
use crate::args::ArgError;
use crate::edit_args::{parse_at, top_level_changes, JobTarget, NOT_CHANGES};
use crate::server::{Failure, OrchestratorMcp};

/// The `planId` (or `plan_id`) of arguments read without a typed struct.
pub(super) fn plan_arg(raw: &Map<String, Value>) -> Result<&str, ArgError> {
    raw.get("planId")
        .or_else(|| raw.get("plan_id"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ArgError::new(
                "planId",
                raw.get("planId").cloned(),
                "missing or not a string",
                "the plan's id (or a unique prefix), as returned by create or scaffold",
            )
        })
}

/// Rewrites dependencies naming a job by its node id to its producerId (the plan format's
/// form).
fn deps_by_producer_id(deps: &mut [String], record: &PlanRecord) {
    for dep in deps {
        if let Some(n) = record.state.nodes.iter().position(|n| n.id.as_str() == dep) {
            if let Some(j) = record.spec.jobs.get(n) {
                dep.clone_from(&j.producer_id);
            }
        }
    }
}

impl OrchestratorMcp {
    /// Parses a job given at `field`; dependencies naming a jobId become producerIds.
    pub(super) fn parse_job(
        field: &str,
        value: Value,
        record: &PlanRecord,
    ) -> Result<JobSpec, Failure> {
        let mut job: JobSpec = parse_at(field, value, JOB_ALLOWED)?;
        deps_by_producer_id(&mut job.dependencies, record);
        Ok(job)
    }

    /// The producerId of the job a reference names (`field` is the argument it came from).
    pub(super) fn producer_of(
        record: &PlanView,
        field: &str,
        job_id: Option<&str>,
        producer_id: Option<&str>,
    ) -> Result<String, Failure> {
        let (n, _) = Self::job(record, job_id, producer_id).map_err(|f| {
            f.in_field(|inner| {
                if field.is_empty() {
                    inner
                } else {
                    format!("{field}.{inner}")
                }
            })
        })?;
        match record.job(n) {
            Some(j) => Ok(j.producer_id.clone()),
            None => Err(ArgError::new(
                if field.is_empty() { "jobId" } else { field },
                job_id.or(producer_id).map(Value::from),
                "the snapshot-validation node is part of every plan and cannot be edited",
                "one of the plan's own jobs",
            )
            .into()),
        }
    }

    /// A job update from named changes (an object) and top-level fields.
    pub(super) fn job_update(
        field: &str,
        nested: Option<&Value>,
        top: Value,
        record: &PlanRecord,
    ) -> Result<JobUpdate, Failure> {
        let allowed = "task, name, work, prechecks, postchecks, instructions, dependencies, env, \
                       expectsNoChanges, autoHeal, group, baseBranch";
        let mut merged = match nested {
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                return Err(ArgError::new(
                    format!("{field}changes"),
                    Some(other.clone()),
                    "must be an object",
                    allowed,
                )
                .into())
            }
            None => Map::new(),
        };
        if let Value::Object(top) = top {
            merged.extend(top);
        }
        if merged.is_empty() {
            return Err(ArgError::new(
                format!("{field}changes"),
                None,
                "nothing to change",
                allowed,
            )
            .into());
        }
        let mut update: JobUpdate =
            parse_at(field.trim_end_matches('.'), Value::Object(merged), allowed)?;
        if let Some(deps) = &mut update.dependencies {
            deps_by_producer_id(deps, record);
        }
        Ok(update)
    }

    /// The job an update object names and its changes (top-level fields and/or `changes`);
    /// `base` is where the object sits in the arguments.
    pub(super) fn job_change(
        record: &PlanView,
        base: &str,
        obj: &Map<String, Value>,
    ) -> Result<(String, JobUpdate), Failure> {
        let target: JobTarget = parse_at(base, Value::Object(obj.clone()), "jobId or producerId")?;
        let job = Self::producer_of(
            record,
            base,
            target.job_id.as_deref(),
            target.producer_id.as_deref(),
        )?;
        let nested = obj
            .get("changes")
            .or_else(|| obj.get("update"))
            .or_else(|| obj.get("updates"));
        let prefix = if base.is_empty() {
            String::new()
        } else {
            format!("{base}.")
        };
        let update = Self::job_update(
            &prefix,
            nested,
            top_level_changes(obj, &NOT_CHANGES),
            record,
        )?;
        Ok((job, update))
    }
}
