//! The tools that change a plan's options and its jobs: update the plan, update one job, and
//! update many jobs at once.

use orchestrator_core::plan::{PlanEdit, PlanUpdate};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::{Map, Value};

use super::job_args::plan_arg;
use crate::args::{ArgError, Args};
use crate::edit_args::{
    parse_at, top_level_changes, BulkUpdateArgs, UpdateJobInput, UpdatePlanArgs,
};
use crate::server::{answer, run, OrchestratorMcp, ToolResult};

#[tool_router(router = update_router, vis = "pub(super)")]
impl OrchestratorMcp {
    #[tool(
        name = "update_copilot_plan",
        description = "Change plan options: name, maxParallel (takes effect at once), env, \
            verifyRi, cleanUpSuccessfulWork, additionalSymlinkDirs, worktreeInit (for jobs that \
            start from now on), and before the first start baseBranch/targetBranch."
    )]
    async fn update_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<UpdatePlanArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let id = self.owned_plan(&a.plan_id).await?;
            let update: PlanUpdate = parse_at(
                "",
                top_level_changes(args.raw(), &["planId", "plan_id"]),
                "name, maxParallel, env, verifyRi, cleanUpSuccessfulWork, \
                 additionalSymlinkDirs, worktreeInit, baseBranch, targetBranch",
            )?;
            self.apply(
                &id,
                vec![PlanEdit::UpdatePlan {
                    update: Box::new(update),
                }],
                &|_| "(arguments)".to_owned(),
                "plan updated",
            )
            .await
        })
        .await
    }

    #[tool(
        name = "update_copilot_plan_job",
        description = "Change one job (by jobId or producerId): task, work, prechecks, \
            postchecks, instructions, env, autoHeal, expectsNoChanges, dependencies (only before \
            it starts), name and group (any time). Fields go at the top level or in `changes`. \
            A failed job's new work is used by its next retry (retry_copilot_job)."
    )]
    async fn update_copilot_plan_job(
        &self,
        Parameters(args): Parameters<Args<UpdateJobInput>>,
    ) -> ToolResult {
        answer(
            async {
                let raw = args.raw();
                let plan = plan_arg(raw)?;
                let id = self.owned_plan(plan).await?;
                let record = self.record(&id).await?;
                let (job, update) = Self::job_change(&record, "", raw)?;
                self.apply(
                    &id,
                    vec![PlanEdit::UpdateJob {
                        job: job.clone(),
                        update: Box::new(update),
                    }],
                    &|_| "(arguments)".to_owned(),
                    &format!("job {job} updated"),
                )
                .await
            }
            .await,
        )
    }

    #[tool(
        name = "bulk_update_copilot_plan_jobs",
        description = "Change many jobs in one call, all or none: `updates` with one entry per \
            job ({producerId or jobId, plus the fields to change}), or `jobIds`/`producerIds` \
            with one `changes` object for all of them. Same rules as update_copilot_plan_job."
    )]
    async fn bulk_update_copilot_plan_jobs(
        &self,
        Parameters(args): Parameters<Args<BulkUpdateArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let id = self.owned_plan(&a.plan_id).await?;
            let record = self.record(&id).await?;
            let mut edits = Vec::new();
            let mut fields = Vec::new();
            for (i, entry) in a.updates.iter().enumerate() {
                let base = format!("updates[{i}]");
                let Value::Object(obj) = entry else {
                    return Err(ArgError::new(
                        base,
                        Some(entry.clone()),
                        "must be an object",
                        "{\"producerId\": ..., plus the fields to change}",
                    )
                    .into());
                };
                let (job, update) = Self::job_change(&record, &base, obj)?;
                edits.push(PlanEdit::UpdateJob {
                    job,
                    update: Box::new(update),
                });
                fields.push(base);
            }
            for (field, refs) in [("jobIds", &a.job_ids), ("producerIds", &a.producer_ids)] {
                for (i, r) in refs.iter().enumerate() {
                    let base = format!("{field}[{i}]");
                    let job = Self::producer_of(&record, &base, Some(r), None)?;
                    let update = Self::job_update(
                        "",
                        a.changes.as_ref(),
                        Value::Object(Map::new()),
                        &record,
                    )?;
                    edits.push(PlanEdit::UpdateJob {
                        job,
                        update: Box::new(update),
                    });
                    fields.push(base);
                }
            }
            if edits.is_empty() {
                return Err(ArgError::new(
                    "updates",
                    None,
                    "no job to update",
                    "`updates` entries, or `jobIds`/`producerIds` with `changes`",
                )
                .into());
            }
            let n = edits.len();
            self.apply(
                &id,
                edits,
                &|i| fields.get(i).cloned().unwrap_or_default(),
                &format!("{n} job(s) updated"),
            )
            .await
        })
        .await
    }
}
