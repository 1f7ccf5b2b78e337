//! The reshape tool: operations that add, remove and rewire jobs, applied in order, all or
//! none.

use orchestrator_core::plan::PlanEdit;
use orchestrator_core::view::PlanView;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::{json, Value};

use super::JOB_ALLOWED;
use crate::args::{ArgError, Args};
use crate::edit_args::{ReshapeArgs, ReshapeOp};
use crate::server::{run, Failure, OrchestratorMcp, ToolResult};

#[tool_router(router = reshape_router, vis = "pub(super)")]
impl OrchestratorMcp {
    #[tool(
        name = "reshape_copilot_plan",
        description = "Change the shape of a plan while it is scaffolded, running, paused or \
            failed: `operations` applied in order, all or none. Each has `type`: add_node (alias \
            add_job) with `spec` (a job); remove_node (alias remove_job) with jobId/producerId \
            (its dependents inherit its dependencies); update_deps with jobId/producerId and \
            `dependencies`; add_before / add_after with `spec` and `existingJobId`. Jobs that are \
            running, succeeded or canceled keep their place; failed jobs can be removed. The \
            result is validated like a new plan."
    )]
    async fn reshape_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<ReshapeArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let id = self.owned_plan(&a.plan_id).await?;
            let record = self.record(&id).await?;
            let mut edits = Vec::with_capacity(a.operations.len());
            // Jobs added by earlier operations of this call, which later ones may name.
            let mut added: Vec<String> = Vec::new();
            for (i, op) in a.operations.into_iter().enumerate() {
                let edit = Self::reshape_edit(&record, &added, &format!("operations[{i}]"), op)?;
                if let PlanEdit::AddJob { job }
                | PlanEdit::AddBefore { job, .. }
                | PlanEdit::AddAfter { job, .. } = &edit
                {
                    added.push(job.producer_id.clone());
                }
                edits.push(edit);
            }
            let n = edits.len();
            self.apply(
                &id,
                edits,
                &|i| format!("operations[{i}]"),
                &format!("{n} operation(s) applied"),
            )
            .await
        })
        .await
    }
}

impl OrchestratorMcp {
    /// The edit one reshape operation asks for; `base` is where the operation sits in the
    /// arguments. `added` are the jobs earlier operations of the same call add: later ones may
    /// name them before they exist in the plan.
    fn reshape_edit(
        record: &PlanView,
        added: &[String],
        base: &str,
        op: ReshapeOp,
    ) -> Result<PlanEdit, Failure> {
        let spec = |op_spec: Option<Value>| match op_spec {
            Some(v) => Self::parse_job(&format!("{base}.spec"), v, record),
            None => Err(ArgError::new(
                format!("{base}.spec"),
                None,
                "this operation needs the new job in `spec`",
                JOB_ALLOWED,
            )
            .into()),
        };
        let named = op.job_id.as_deref().or(op.producer_id.as_deref());
        let target = || match named {
            Some(n) if added.iter().any(|a| a == n) => Ok(n.to_owned()),
            _ => Self::producer_of(
                record,
                base,
                op.job_id.as_deref(),
                op.producer_id.as_deref(),
            ),
        };
        let anchor = |existing: &Option<String>| match existing {
            Some(e) if added.iter().any(|a| a == e) => Ok(e.clone()),
            Some(e) => Self::producer_of(record, base, Some(e), None),
            None => Err(ArgError::new(
                format!("{base}.existingJobId"),
                None,
                "this operation needs the existing job in `existingJobId`",
                "a jobId or producerId of the plan",
            )
            .into()),
        };
        let edit = match op.op.as_str() {
            "add_node" | "add_job" | "addNode" | "addJob" => PlanEdit::AddJob {
                job: Box::new(spec(op.spec)?),
            },
            "remove_node" | "remove_job" | "removeNode" | "removeJob" => {
                PlanEdit::RemoveJob { job: target()? }
            }
            "update_deps" | "updateDeps" => PlanEdit::UpdateDeps {
                job: target()?,
                dependencies: op
                    .dependencies
                    .ok_or_else(|| {
                        ArgError::new(
                            format!("{base}.dependencies"),
                            None,
                            "update_deps needs `dependencies`",
                            "a list of producerIds (may be empty)",
                        )
                    })?
                    .into_iter()
                    .map(|d| Self::producer_of(record, base, Some(&d), None).unwrap_or(d))
                    .collect(),
            },
            "add_before" | "addBefore" => PlanEdit::AddBefore {
                before: anchor(&op.existing_job_id)?,
                job: Box::new(spec(op.spec)?),
            },
            "add_after" | "addAfter" => PlanEdit::AddAfter {
                after: anchor(&op.existing_job_id)?,
                job: Box::new(spec(op.spec)?),
            },
            other => {
                return Err(ArgError::new(
                    format!("{base}.type"),
                    Some(json!(other)),
                    "unknown operation",
                    "add_node (add_job), remove_node (remove_job), update_deps, \
                     add_before, add_after",
                )
                .into())
            }
        };
        Ok(edit)
    }
}
