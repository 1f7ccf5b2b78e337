//! The tools that build and change plans: scaffold, add jobs, finalize, reshape, update, bulk
//! update, clone, and the self-test plan. Each is a thin layer over
//! [`Orchestrator::scaffold_plan`](orchestrator_core::Orchestrator::scaffold_plan),
//! [`edit_plan`](orchestrator_core::Orchestrator::edit_plan) and
//! [`finalize_plan`](orchestrator_core::Orchestrator::finalize_plan).

use orchestrator_core::plan::{
    parse_plan, Isolation, JobSpec, JobUpdate, PlanEdit, PlanFormat, PlanSpec, PlanUpdate, WorkSpec,
};
use orchestrator_core::state::PlanRecord;
use orchestrator_core::view::PlanView;
use orchestrator_core::{NodeStatus, OrchestratorEvent, PlanId, PlanStatus, RetryRequest};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::{json, Map, Value};

use crate::args::{ArgError, Args};
use crate::edit_args::{
    parse_at, top_level_changes, AddJobInput, AddJobsArgs, BulkUpdateArgs, CloneArgs, FinalizeArgs,
    IntegrationTestArgs, JobTarget, ReshapeArgs, ScaffoldInput, UpdateJobInput, UpdatePlanArgs,
    NOT_CHANGES,
};
use crate::report;
use crate::server::{
    answer, retry_and_continue, run, Failure, OrchestratorMcp, ToolResult, MAX_JOBS_PER_CALL,
};

const JOB_ALLOWED: &str = "a job object: producerId, task, work, dependencies (required), name, \
     prechecks, postchecks, instructions, baseBranch, expectsNoChanges, autoHeal, group, env";

/// The `planId` (or `plan_id`) of arguments read without a typed struct.
fn plan_arg(raw: &Map<String, Value>) -> Result<&str, ArgError> {
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

/// A refused edit or invalid result, as an argument error naming the field: `field_of(i)` is
/// the argument holding edit `i`.
fn edit_failure(
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
    /// Parses a job given at `field`; dependencies naming a jobId become producerIds.
    fn parse_job(field: &str, value: Value, record: &PlanRecord) -> Result<JobSpec, Failure> {
        let mut job: JobSpec = parse_at(field, value, JOB_ALLOWED)?;
        deps_by_producer_id(&mut job.dependencies, record);
        Ok(job)
    }

    /// The producerId of the job a reference names (`field` is the argument it came from).
    fn producer_of(
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

    /// Applies `edits` to the plan and answers with its status and job mapping.
    async fn apply(
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
    async fn edited(&self, id: &PlanId, what: &str) -> Result<(Value, String), Failure> {
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

    /// A job update from named changes (an object) and top-level fields.
    fn job_update(
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
    fn job_change(
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

#[tool_router(router = edit_router, vis = "pub(crate)")]
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
                let base = format!("operations[{i}]");
                let spec = |op_spec: Option<Value>| match op_spec {
                    Some(v) => Self::parse_job(&format!("{base}.spec"), v, &record),
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
                        &record,
                        &base,
                        op.job_id.as_deref(),
                        op.producer_id.as_deref(),
                    ),
                };
                let anchor = |existing: &Option<String>| match existing {
                    Some(e) if added.iter().any(|a| a == e) => Ok(e.clone()),
                    Some(e) => Self::producer_of(&record, &base, Some(e), None),
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
                            .map(|d| Self::producer_of(&record, &base, Some(&d), None).unwrap_or(d))
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

    #[tool(
        name = "run_copilot_integration_test",
        description = "Create and run a small deterministic self-test plan that exercises the \
            engine end to end: a root job, a fan-out of two jobs, a fan-in job that needs both, \
            and a job that fails on purpose (its dependent is blocked) and is then retried by \
            the server with corrected work, after which the plan succeeds. Its result lands on \
            a branch `orchestrator/self-test-<id>`, never the current one. Poll \
            get_copilot_plan_status with the returned planId."
    )]
    async fn run_copilot_integration_test(
        &self,
        Parameters(args): Parameters<Args<IntegrationTestArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let (spec, dir) = self.self_test_plan(a.start_paused)?;
            let id = self
                .orchestrator
                .create_plan(spec, dir)
                .await
                .map_err(|e| edit_failure(e, &|_| "(self-test)".to_owned()))?;
            self.orchestrator.start(&id).await?;
            self.retry_when_failed(
                id.clone(),
                "flaky".into(),
                "mkdir -p selftest && echo fixed > selftest/flaky.txt",
            );
            let (mut doc, text) = self.edited(&id, "self-test plan started").await?;
            doc["expected"] = json!(
                "setup succeeds; left and right run in parallel; join needs both; flaky \
                 fails and blocks after-flaky; the server retries flaky with new work; \
                 the plan ends succeeded"
            );
            Ok((doc, text))
        })
        .await
    }
}

impl OrchestratorMcp {
    /// The self-test plan and the folder it runs in: worktrees of the server's repository
    /// when it is a git repository, else a fresh temporary folder.
    fn self_test_plan(
        &self,
        start_paused: bool,
    ) -> Result<(PlanSpec, std::path::PathBuf), Failure> {
        let tag: String = PlanId::random().as_str().chars().take(8).collect();
        let in_git = self.repo.join(".git").exists();
        let job = |id: &str, task: &str, cmd: &str, deps: &[&str]| {
            let mut j =
                JobSpec::new(id, task, WorkSpec::shell(cmd)).depends_on(deps.iter().copied());
            j.auto_heal = Some(false);
            j
        };
        let write = |file: &str| format!("mkdir -p selftest && echo {file} > selftest/{file}.txt");
        let mut spec = PlanSpec::new(format!("self-test {tag}"))
            .job(job("setup", "Self-test: root job", &write("setup"), &[]))
            .job(job("left", "Self-test: fan-out left", &write("left"), &["setup"]))
            .job(job("right", "Self-test: fan-out right", &write("right"), &["setup"]))
            .job(job(
                "join",
                "Self-test: fan-in",
                "test -f selftest/left.txt && test -f selftest/right.txt && cat selftest/left.txt selftest/right.txt > selftest/join.txt",
                &["left", "right"],
            ))
            .job(job(
                "flaky",
                "Self-test: fails until retried",
                "echo 'this job fails on purpose; the self-test retries it' >&2; exit 1",
                &["setup"],
            ))
            .job(job("after-flaky", "Self-test: blocked, then unblocked", &write("after"), &["flaky"]));
        spec.start_paused = start_paused;
        if in_git {
            spec = spec.target_branch(format!("orchestrator/self-test-{tag}"));
            Ok((spec, self.repo.clone()))
        } else {
            let dir = std::env::temp_dir().join(format!("orchestrator-self-test-{tag}"));
            std::fs::create_dir_all(&dir)
                .map_err(|e| Failure::other("io", format!("create {}: {e}", dir.display())))?;
            Ok((spec.isolation(Isolation::None), dir))
        }
    }

    /// In the background: once `job` has failed, retry it with `work` (event-driven: checked
    /// now and at each failure in the plan, for as long as the plan lives).
    fn retry_when_failed(&self, id: PlanId, job: String, work: &str) {
        let o = self.orchestrator.clone();
        let work = WorkSpec::shell(work);
        let mut events = o.subscribe();
        tokio::spawn(async move {
            loop {
                let Ok(record) = o.status(&id).await else {
                    return;
                };
                let Some(n) = record.spec.jobs.iter().position(|j| j.producer_id == job) else {
                    return;
                };
                match record.state.nodes[n].status {
                    NodeStatus::Failed => {
                        let mut request = RetryRequest::jobs([job.clone()]);
                        request.work = Some(work);
                        let _ = retry_and_continue(&o, &id, request).await;
                        return;
                    }
                    NodeStatus::Succeeded | NodeStatus::Canceled => return,
                    _ => {}
                }
                // Wait for the next failure in this plan (or a gap in the events).
                loop {
                    match events.recv().await {
                        Ok(OrchestratorEvent::NodeTransition { plan, to, .. })
                            if plan == id && to == NodeStatus::Failed =>
                        {
                            break
                        }
                        Ok(_) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    }
                }
            }
        });
    }
}
