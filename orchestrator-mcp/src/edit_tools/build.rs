//! The tools that build plans step by step or from another: scaffold, add one job or many,
//! finalize, and clone; and parsing a plan object from tool arguments.

use orchestrator_core::plan::{parse_plan, PlanEdit, PlanFormat, PlanSpec};
use orchestrator_core::PlanStatus;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::{json, Map, Value};

use super::apply::edit_failure;
use super::job_args::plan_arg;
use crate::args::{ArgError, Args};
use crate::edit_args::{
    top_level_changes, AddJobInput, AddJobsArgs, CloneArgs, FinalizeArgs, ScaffoldInput,
};
use crate::server::{answer, run, Failure, OrchestratorMcp, ToolResult, MAX_JOBS_PER_CALL};

impl OrchestratorMcp {
    async fn scaffold(&self, args: &Args<ScaffoldInput>) -> Result<(Value, String), Failure> {
        let mut raw = args.raw().clone();
        raw.entry("jobs").or_insert_with(|| json!([]));
        let spec = self.parse_plan_args(&raw, "scaffold_copilot_plan")?;
        let id = self
            .orchestrator
            .scaffold_plan(spec, self.repo.clone())
            .await
            .map_err(|e| edit_failure(e, &|_| "jobs".to_owned()))?;
        let (mut doc, text) = self.edited(&id, "plan scaffolded").await?;
        doc["message"] = json!(format!(
            "Plan {id} is being scaffolded. Add jobs with add_copilot_plan_job or \
             add_copilot_plan_jobs, then call finalize_copilot_plan to validate and start it."
        ));
        Ok((doc, text))
    }

    /// Parses a plan object from tool arguments, naming the field of a mistake.
    pub(crate) fn parse_plan_args(
        &self,
        raw: &Map<String, Value>,
        tool: &str,
    ) -> Result<PlanSpec, Failure> {
        let text =
            serde_json::to_string(raw).map_err(|e| Failure::other("invalid", e.to_string()))?;
        let spec = parse_plan(&text, PlanFormat::Json, tool).map_err(|e| match e {
            orchestrator_core::Error::Parse { path, message, .. } => {
                let field = path.unwrap_or_else(|| "(plan)".to_owned());
                let value = crate::args::value_at(raw, &field);
                Failure::Arg(ArgError::new(
                    field,
                    value,
                    message,
                    "see the tool's input schema (camelCase or snake_case fields)",
                ))
            }
            // More than one problem: all of them, the first one's field named.
            e @ orchestrator_core::Error::Invalid(_) => edit_failure(e, &|_| "jobs".to_owned()),
            e => e.into(),
        })?;
        if spec.jobs.len() > MAX_JOBS_PER_CALL {
            return Err(ArgError::new(
                "jobs",
                Some(json!(format!("{} jobs", spec.jobs.len()))),
                "too many jobs for one call",
                format!(
                    "0 to {MAX_JOBS_PER_CALL} jobs; add more with add_copilot_plan_jobs or run \
                     larger plans from a plan file"
                ),
            )
            .into());
        }
        Ok(spec)
    }

    async fn add_jobs(
        &self,
        plan: &str,
        jobs: Vec<(String, Value)>,
    ) -> Result<(Value, String), Failure> {
        let id = self.owned_plan(plan).await?;
        let record = self.record(&id).await?;
        if jobs.len() > MAX_JOBS_PER_CALL {
            return Err(ArgError::new(
                "jobs",
                Some(json!(format!("{} jobs", jobs.len()))),
                "too many jobs for one call",
                format!("1 to {MAX_JOBS_PER_CALL} jobs per call"),
            )
            .into());
        }
        let mut edits = Vec::with_capacity(jobs.len());
        let mut fields = Vec::with_capacity(jobs.len());
        for (field, value) in jobs {
            edits.push(PlanEdit::AddJob {
                job: Box::new(Self::parse_job(&field, value, &record)?),
            });
            fields.push(field);
        }
        let n = edits.len();
        self.apply(
            &id,
            edits,
            &|i| fields.get(i).cloned().unwrap_or_default(),
            &format!("{n} job(s) added"),
        )
        .await
    }
}

#[tool_router(router = build_router, vis = "pub(super)")]
impl OrchestratorMcp {
    #[tool(
        name = "scaffold_copilot_plan",
        description = "Start a plan that is built step by step (for plans too large for one \
            create_copilot_plan call, or assembled while exploring). Takes the same fields as \
            create_copilot_plan with `jobs` optional. The plan's status is `scaffolding` and \
            nothing runs until finalize_copilot_plan. Returns planId."
    )]
    async fn scaffold_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<ScaffoldInput>>,
    ) -> ToolResult {
        answer(self.scaffold(&args).await)
    }

    #[tool(
        name = "add_copilot_plan_job",
        description = "Add one job to a plan: planId plus the job's fields (producerId, task, \
            work, dependencies, ...). Works on scaffolded plans and on running or paused ones \
            (the job starts once its dependencies succeed). Dependencies name jobs already in \
            the plan. Returns the updated jobMapping."
    )]
    async fn add_copilot_plan_job(
        &self,
        Parameters(args): Parameters<Args<AddJobInput>>,
    ) -> ToolResult {
        answer(
            async {
                let raw = args.raw();
                let plan = plan_arg(raw)?.to_owned();
                let job = match raw.get("job") {
                    Some(job) => ("job".to_owned(), job.clone()),
                    None => (
                        String::new(),
                        top_level_changes(raw, &["planId", "plan_id"]),
                    ),
                };
                self.add_jobs(&plan, vec![job]).await
            }
            .await,
        )
    }

    #[tool(
        name = "add_copilot_plan_jobs",
        description = "Add several jobs to a plan at once (up to 500 per call): planId and \
            `jobs`, each with the fields of a job in create_copilot_plan. Dependencies may name \
            jobs already in the plan or earlier in the list. All or none are added."
    )]
    async fn add_copilot_plan_jobs(
        &self,
        Parameters(args): Parameters<Args<AddJobsArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let jobs = a
                .jobs
                .into_iter()
                .enumerate()
                .map(|(i, v)| (format!("jobs[{i}]"), v))
                .collect();
            self.add_jobs(&a.plan_id, jobs).await
        })
        .await
    }

    #[tool(
        name = "finalize_copilot_plan",
        description = "Finish a scaffolded plan: validate it as a whole (every problem is \
            listed) and start it (unless startPaused). Returns jobMapping (producerId -> jobId); \
            poll get_copilot_plan_status afterwards."
    )]
    async fn finalize_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<FinalizeArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let id = self.owned_plan(&a.plan_id).await?;
            self.orchestrator
                .finalize_plan(&id)
                .await
                .map_err(|e| edit_failure(e, &|_| "planId".to_owned()))?;
            let paused = self.orchestrator.plan_status(&id)? == PlanStatus::Paused;
            match a.start_paused {
                Some(true) if !paused => self.orchestrator.pause(&id, false).await?,
                Some(false) if paused => self.orchestrator.resume(&id).await?,
                _ => {}
            }
            self.orchestrator.start(&id).await.map_err(|e| {
                let message = format!(
                    "the plan is finalized but could not start: {e}; fix the cause and call \
                     resume_copilot_plan"
                );
                Failure::engine(&e, message)
            })?;
            self.edited(&id, "plan finalized").await
        })
        .await
    }

    #[tool(
        name = "clone_copilot_plan",
        description = "Create a new plan with the same jobs and options as an existing one \
            (fresh state, new planId) and start it (unless startPaused). Useful to run a \
            finished plan again. Returns the new planId and jobMapping."
    )]
    async fn clone_copilot_plan(
        &self,
        Parameters(args): Parameters<Args<CloneArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let source = self.plan_id(&a.plan_id).await?;
            let record = self.record(&source).await?;
            let mut spec = (*record.spec).clone();
            spec.name = a.name.unwrap_or_else(|| format!("{} (copy)", spec.name));
            if let Some(p) = a.start_paused {
                spec.start_paused = p;
            }
            let scaffolding = record.state.scaffolding;
            let id = if scaffolding {
                self.orchestrator
                    .scaffold_plan(spec, record.state.repo.clone())
                    .await
            } else {
                self.orchestrator
                    .create_plan(spec, record.state.repo.clone())
                    .await
            }
            .map_err(|e| edit_failure(e, &|_| "planId".to_owned()))?;
            if !scaffolding {
                self.orchestrator.start(&id).await?;
            }
            let (mut doc, text) = self
                .edited(&id, &format!("plan {source} cloned as {id}"))
                .await?;
            doc["clonedFrom"] = json!(source);
            Ok((doc, text))
        })
        .await
    }
}
