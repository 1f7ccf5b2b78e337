//! The tools on whole plans: create, status, list, cancel, pause, resume, retry, graph,
//! archive, recover and delete.

use orchestrator_core::view::GraphFormat;
use orchestrator_core::RetryRequest;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::{json, Value};

use super::{answer, run, Failure, OrchestratorMcp, ToolResult};
use crate::args::{
    ArgError, Args, GraphArgs, ListPlansArgs, PauseArgs, PlanArgs, PlanInput, RetryPlanArgs,
};

const PLAN_STATUSES: [&str; 9] = [
    "scaffolding",
    "pending",
    "running",
    "pausing",
    "paused",
    "succeeded",
    "failed",
    "canceled",
    "archived",
];

impl OrchestratorMcp {
    async fn create(&self, args: &Args<PlanInput>) -> Result<(Value, String), Failure> {
        let spec = self.parse_plan_args(args.raw(), "create_copilot_plan")?;
        let isolation = spec.isolation;
        let id = self
            .orchestrator
            .create_plan(spec, self.repo.clone())
            .await
            .map_err(|e| match e {
                orchestrator_core::Error::Invalid(errors) => Failure::Arg(ArgError::new(
                    "jobs",
                    None,
                    errors.to_string(),
                    "a valid plan: unique producerIds, known dependencies, no cycles",
                )),
                e => e.into(),
            })?;
        self.orchestrator.start(&id).await?;
        let record = self.record(&id).await?;
        let mapping = crate::edit_tools::job_mapping(&record);
        let status = record.status().as_str();
        let doc = json!({
            "success": true,
            "planId": id,
            "name": record.spec.name,
            "status": status,
            "jobMapping": mapping,
            "jobCount": record.spec.jobs.len(),
            "targetBranch": record.state.target_branch,
            "isolation": isolation,
            "message": format!(
                "Plan created with {} jobs; it runs in the background. \
                 Poll get_copilot_plan_status with planId {id}.",
                record.spec.jobs.len()
            ),
        });
        let text = format!(
            "plan {} ({id}) created with {} jobs, status {status}; poll get_copilot_plan_status",
            record.spec.name,
            record.spec.jobs.len()
        );
        Ok((doc, text))
    }

    async fn list_plans(&self, args: ListPlansArgs) -> Result<(Value, String), Failure> {
        if let Some(s) = &args.status {
            if !PLAN_STATUSES.contains(&s.as_str()) {
                return Err(ArgError::new(
                    "status",
                    Some(json!(s)),
                    "unknown plan status",
                    format!("one of {}", PLAN_STATUSES.join(", ")),
                )
                .into());
            }
        }
        let listing = self.orchestrator.repository().list().await?;
        let mut plans = Vec::new();
        let mut text = String::new();
        for p in &listing.plans {
            let status = self
                .orchestrator
                .plan_status(&p.plan_id)
                .unwrap_or(p.status);
            if args.status.as_deref().is_some_and(|s| s != status.as_str()) {
                continue;
            }
            plans.push(json!({
                "planId": p.plan_id,
                "name": p.name,
                "status": status.as_str(),
                "createdAt": p.created_at,
            }));
            text.push_str(&format!("{}  {}  {}\n", p.plan_id, status.as_str(), p.name));
        }
        let damaged: Vec<Value> = listing
            .damaged
            .iter()
            .map(|(id, e)| json!({"planId": id, "error": e.to_string()}))
            .collect();
        if plans.is_empty() {
            text.push_str("no plans\n");
        }
        Ok((
            json!({"plans": plans, "count": plans.len(), "damaged": damaged}),
            text,
        ))
    }
}

#[tool_router(router = plan_router, vis = "pub(super)")]
impl OrchestratorMcp {
    #[tool(
        name = "create_copilot_plan",
        description = "Create a plan of jobs (a DAG) and start it. Each job runs in its own git \
            worktree off the base branch with its dependencies' commits merged in; its work (a shell \
            command, a process or an AI agent) is committed, and the leaf jobs' commits are merged \
            into the target branch at the end. Returns planId, status and jobMapping \
            (producerId -> jobId). The plan keeps running after this call returns: poll \
            get_copilot_plan_status. Example: {\"name\":\"add tests\",\"jobs\":[{\"producerId\":\"lint\",\
            \"task\":\"fix lint\",\"work\":\"npm run lint -- --fix\",\"dependencies\":[]},\
            {\"producerId\":\"tests\",\"task\":\"add tests\",\"work\":\"@agent add unit tests for src/x\",\
            \"dependencies\":[\"lint\"]}]}"
    )]
    async fn create_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<PlanInput>>,
    ) -> ToolResult {
        answer(self.create(&args).await)
    }

    #[tool(
        name = "get_copilot_plan_status",
        description = "A plan's status (scaffolding, pending, running, pausing, paused, succeeded, \
            failed, canceled, archived) with every job's status, attempts, commit and error, and \
            counts. Poll this after create_copilot_plan until the status is succeeded, failed or \
            canceled. For failed jobs read get_copilot_job_logs, then retry_copilot_job."
    )]
    async fn get_copilot_plan_status(
        &self,
        Parameters(args): Parameters<Args<PlanArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let id = self.plan_id(&a.plan_id).await?;
            self.status_doc(&id).await
        })
        .await
    }

    #[tool(
        name = "list_copilot_plans",
        description = "Every plan of the repository, newest first: planId, name, status, createdAt. \
            Optionally only those with a given status."
    )]
    async fn list_copilot_plans(
        &self,
        Parameters(args): Parameters<Args<ListPlansArgs>>,
    ) -> ToolResult {
        run(&args, async |a| self.list_plans(a).await).await
    }

    #[tool(
        name = "cancel_copilot_plan",
        description = "Cancel a plan: running jobs are stopped, nothing else starts. Worktrees are \
            kept; recover_copilot_plan makes a canceled plan runnable again."
    )]
    async fn cancel_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<PlanArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            self.drive(
                &a.plan_id,
                async |id| self.orchestrator.cancel(id).await,
                |_, (), _| None,
            )
            .await
        })
        .await
    }

    #[tool(
        name = "pause_copilot_plan",
        description = "Pause a plan: no new job starts; running jobs finish (or, with \
            stopRunning, are stopped and later resume from the phase they were in). Continue with \
            resume_copilot_plan."
    )]
    async fn pause_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<PauseArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            self.drive(
                &a.plan_id,
                async |id| self.orchestrator.pause(id, a.stop_running).await,
                |_, (), _| None,
            )
            .await
        })
        .await
    }

    #[tool(
        name = "resume_copilot_plan",
        description = "Resume a paused plan (or one created with startPaused, or a stored plan \
            left paused or interrupted by a restart). It runs on in the background."
    )]
    async fn resume_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<PlanArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            self.drive(
                &a.plan_id,
                async |id| self.orchestrator.resume(id).await,
                |_, (), _| None,
            )
            .await
        })
        .await
    }

    #[tool(
        name = "retry_copilot_plan",
        description = "Retry failed jobs of a plan: the ones named by jobIds/producerIds, or every \
            failed job when neither is given. Each resumes from the phase that failed (commit \
            failures from work) in its worktree; newWork/newPrechecks/newPostchecks replace the \
            specs, clearWorktree starts over in a fresh worktree. Blocked dependents run again \
            once their dependencies succeed."
    )]
    async fn retry_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<RetryPlanArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let id = self.plan_id(&a.plan_id).await?;
            let request = Self::with_new_specs(
                RetryRequest::jobs(a.job_ids.iter().chain(&a.producer_ids).cloned()),
                a.new_work,
                a.new_prechecks,
                a.new_postchecks,
                a.clear_worktree,
            )?;
            let record = self.record(&id).await?;
            for r in &a.job_ids {
                Self::job(&record, Some(r), None).map_err(|f| f.in_field(|_| "jobIds".into()))?;
            }
            for r in &a.producer_ids {
                Self::job(&record, None, Some(r))
                    .map_err(|f| f.in_field(|_| "producerIds".into()))?;
            }
            let n = self.retry(&id, request).await?;
            let (mut doc, text) = self
                .status_after(&id, &format!("retrying {n} job(s)"))
                .await?;
            doc["retried"] = json!(n);
            Ok((doc, text))
        })
        .await
    }

    #[tool(
        name = "get_copilot_plan_graph",
        description = "The plan's DAG as a Mermaid flowchart (default) or Graphviz dot, with each \
            job's status; or, with format gantt, a Mermaid gantt chart of the phases each attempt \
            ran (failed ones marked crit)."
    )]
    async fn get_copilot_plan_graph(
        &self,
        Parameters(args): Parameters<Args<GraphArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let name = a.format.as_deref().unwrap_or("mermaid");
            let Some(format) = GraphFormat::parse(name) else {
                return Err(ArgError::new(
                    "format",
                    Some(json!(name)),
                    "unknown graph format",
                    "mermaid, dot or gantt",
                )
                .into());
            };
            let id = self.plan_id(&a.plan_id).await?;
            let text = self.record(&id).await?.render(format)?;
            let format = format.as_str();
            Ok((json!({"planId": id, "format": format, "graph": text}), text))
        })
        .await
    }

    #[tool(
        name = "archive_copilot_plan",
        description = "Archive an ended plan: remove its worktrees, snapshot and target branches \
            (never the default branch); state and logs are kept and it is marked archived."
    )]
    async fn archive_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<PlanArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            self.drive(
                &a.plan_id,
                async |id| self.orchestrator.archive(id).await,
                |id, removed, doc| {
                    doc["archive"] = json!(removed);
                    Some(format!("plan {id} archived"))
                },
            )
            .await
        })
        .await
    }

    #[tool(
        name = "recover_copilot_plan",
        description = "Recover a failed or canceled plan: the target branch exists again at the \
            base, succeeded jobs' worktrees are recreated at their commits, the other jobs are \
            pending again, and the plan is left paused: call resume_copilot_plan to run it."
    )]
    async fn recover_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<PlanArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            self.drive(
                &a.plan_id,
                async |id| self.orchestrator.recover(id).await,
                |id, (), _| Some(format!("plan {id} recovered (paused)")),
            )
            .await
        })
        .await
    }

    #[tool(
        name = "delete_copilot_plan",
        description = "Delete a plan: cancel it if it is still active, remove its worktrees and \
            branches (as archive does), then delete its state and logs. Cannot be undone."
    )]
    async fn delete_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<PlanArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let id = self.owned_plan(&a.plan_id).await?;
            let status = self.orchestrator.plan_status(&id)?;
            if !status.is_terminal() {
                self.orchestrator.cancel(&id).await?;
                let _ = self.orchestrator.wait(&id).await;
            }
            let mut warnings = Vec::new();
            if self.orchestrator.plan_status(&id)? != orchestrator_core::PlanStatus::Archived {
                if let Err(e) = self.orchestrator.archive(&id).await {
                    warnings.push(format!("cleaning up: {e}"));
                }
            }
            self.orchestrator.close(&id).await?;
            self.orchestrator.repository().delete(&id).await?;
            Ok((
                json!({"success": true, "planId": id, "deleted": true, "warnings": warnings}),
                format!("plan {id} deleted"),
            ))
        })
        .await
    }
}
