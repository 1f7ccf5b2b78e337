//! [`OrchestratorMcp`]: the tools, each a thin layer over [`Orchestrator`].

use std::fmt::Write;
use std::path::PathBuf;

use orchestrator_core::plan::WorkSpec;
use orchestrator_core::repository::LogQuery;
use orchestrator_core::state::NodeState;
use orchestrator_core::view::{GraphFormat, PlanView};
use orchestrator_core::{Orchestrator, Phase, PlanId, PlanStatus, RetryRequest};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::args::{
    ArgError, Args, GraphArgs, JobArgs, ListJobsArgs, ListPlansArgs, LogsArgs, PauseArgs, PlanArgs,
    PlanInput, RetryJobArgs, RetryPlanArgs,
};
use crate::report;

/// Jobs one `create_copilot_plan` call accepts (the reference's limit).
pub const MAX_JOBS_PER_CALL: usize = 500;

/// The names of the tools this server offers, in the order they are listed.
pub const TOOL_NAMES: [&str; 28] = [
    "create_copilot_plan",
    "scaffold_copilot_plan",
    "add_copilot_plan_job",
    "add_copilot_plan_jobs",
    "finalize_copilot_plan",
    "get_copilot_plan_status",
    "list_copilot_plans",
    "get_copilot_job_logs",
    "get_copilot_job_attempts",
    "cancel_copilot_plan",
    "pause_copilot_plan",
    "resume_copilot_plan",
    "delete_copilot_plan",
    "archive_copilot_plan",
    "recover_copilot_plan",
    "retry_copilot_plan",
    "reshape_copilot_plan",
    "update_copilot_plan",
    "get_copilot_plan_graph",
    "clone_copilot_plan",
    "get_copilot_job",
    "list_copilot_jobs",
    "retry_copilot_job",
    "force_fail_copilot_job",
    "get_copilot_job_failure_context",
    "update_copilot_plan_job",
    "bulk_update_copilot_plan_jobs",
    "run_copilot_integration_test",
];

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

/// What a tool answers: a result (structured JSON and a short text) or a tool-level error.
pub(crate) type ToolResult = Result<CallToolResult, rmcp::ErrorData>;

/// A tool failure shown to the model.
pub(crate) enum Failure {
    Arg(ArgError),
    /// The engine refused or failed: its error's kind ([`orchestrator_core::Error::kind`]),
    /// whether trying again may help, and the message.
    Engine {
        kind: &'static str,
        retryable: bool,
        message: String,
    },
}

impl From<ArgError> for Failure {
    fn from(e: ArgError) -> Self {
        Failure::Arg(e)
    }
}

impl From<orchestrator_core::Error> for Failure {
    fn from(e: orchestrator_core::Error) -> Self {
        Failure::engine(&e, e.to_string())
    }
}

impl From<orchestrator_core::StoreError> for Failure {
    fn from(e: orchestrator_core::StoreError) -> Self {
        orchestrator_core::Error::Store(e).into()
    }
}

impl Failure {
    /// A failure of the engine's kind `e`, told as `message`.
    pub(crate) fn engine(e: &orchestrator_core::Error, message: String) -> Self {
        Failure::Engine {
            kind: e.kind(),
            retryable: e.is_retryable(),
            message,
        }
    }

    /// A failure of this server's own (`kind` as [`orchestrator_core::Error::kind`] names
    /// kinds), not retryable.
    pub(crate) fn other(kind: &'static str, message: String) -> Self {
        Failure::Engine {
            kind,
            retryable: false,
            message,
        }
    }

    /// An argument error about another field: `field` maps the field it named.
    pub(crate) fn in_field(self, field: impl FnOnce(String) -> String) -> Self {
        match self {
            Failure::Arg(mut e) => {
                e.field = field(e.field);
                Failure::Arg(e)
            }
            f => f,
        }
    }
}

pub(crate) fn answer(result: Result<(Value, String), Failure>) -> ToolResult {
    Ok(match result {
        Ok((mut value, text)) => {
            // Job specs in answers carry their env: secret values are shown redacted (the
            // engine still runs with them).
            let names = orchestrator_core::redact::SecretNames::from_env();
            orchestrator_core::redact::redact_env_json(&mut value, &names);
            let mut r = CallToolResult::structured(value);
            r.content = vec![ContentBlock::text(text)];
            r
        }
        Err(Failure::Arg(e)) => {
            let mut r = CallToolResult::structured_error(e.to_json());
            r.content = vec![ContentBlock::text(e.text())];
            r
        }
        Err(Failure::Engine {
            kind,
            retryable,
            message,
        }) => {
            // The kind lets a client branch (`locked`: another process runs the plan;
            // `job_not_found`; `merge_conflict` ...); `retryable` says whether to try again.
            let mut r = CallToolResult::structured_error(json!({
                "error": kind,
                "retryable": retryable,
                "message": message,
            }));
            r.content = vec![ContentBlock::text(format!("error: {message}"))];
            r
        }
    })
}

/// Runs a tool: parses its arguments as `T`, runs `body` with them and answers.
pub(crate) async fn run<T: DeserializeOwned>(
    args: &Args<T>,
    body: impl AsyncFnOnce(T) -> Result<(Value, String), Failure>,
) -> ToolResult {
    answer(match args.parse() {
        Ok(a) => body(a).await,
        Err(e) => Err(e.into()),
    })
}

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

/// One job of a plan, as a tool's arguments named it.
struct JobAt {
    id: PlanId,
    record: PlanView,
    /// The job's node index.
    n: usize,
    /// Its producerId (or `snapshot-validation`).
    label: String,
}

impl JobAt {
    fn node(&self) -> &NodeState {
        &self.record.state.nodes[self.n]
    }
}

/// The MCP server of one repository: the reference system's copilot tools over an
/// [`Orchestrator`]. Plans created here keep running inside the host process; stored plans
/// (from earlier sessions) are taken over when a tool needs to drive them.
///
/// ```no_run
/// # async fn f(o: orchestrator_core::Orchestrator) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// orchestrator_mcp::OrchestratorMcp::new(o, "/path/to/repo").serve_stdio().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OrchestratorMcp {
    pub(crate) orchestrator: Orchestrator,
    pub(crate) repo: PathBuf,
    tool_router: ToolRouter<Self>,
}

impl OrchestratorMcp {
    /// A server driving plans with `orchestrator` for the repository (or folder) `repo`.
    pub fn new(orchestrator: Orchestrator, repo: impl Into<PathBuf>) -> Self {
        OrchestratorMcp {
            orchestrator,
            repo: repo.into(),
            tool_router: Self::tool_router() + Self::edit_router(),
        }
    }

    /// The orchestrator.
    pub fn orchestrator(&self) -> &Orchestrator {
        &self.orchestrator
    }

    /// Serves on stdin/stdout until the client goes away, then releases every plan it drives
    /// (running jobs are stopped and resume from their phase when the plan is next started, for
    /// example by [`OrchestratorMcp::resume_interrupted`] in the next server).
    pub async fn serve_stdio(self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let orchestrator = self.orchestrator.clone();
        // Our line transport, not rmcp's: it answers the lines rmcp's would drop.
        let (stdin, stdout) = rmcp::transport::stdio();
        let service = self
            .serve(crate::stdio::LineTransport::new(stdin, stdout))
            .await?;
        let ended = service.waiting().await;
        for id in orchestrator.plan_ids() {
            let _ = orchestrator.release(&id).await;
        }
        ended?;
        Ok(())
    }

    /// Takes over and starts again every stored plan that was running when its last owner
    /// stopped (a restarted server continues its plans). Paused, scaffolded and ended plans
    /// are left alone, and so are plans another process is running. Returns the plans resumed.
    pub async fn resume_interrupted(&self) -> Vec<PlanId> {
        let Ok(listing) = self.orchestrator.repository().list().await else {
            return Vec::new();
        };
        let mut resumed = Vec::new();
        // The stored summary tells the plans that cannot have been interrupted (ended, paused,
        // scaffolded): only the others are read.
        let candidates = listing.plans.into_iter().filter(|s| {
            !s.status.is_terminal()
                && !matches!(s.status, PlanStatus::Paused | PlanStatus::Scaffolding)
        });
        for summary in candidates {
            let id = summary.plan_id;
            let Ok(record) = self.orchestrator.repository().load(&id).await else {
                continue;
            };
            let s = &record.state;
            let interrupted = s.started_at.is_some()
                && !s.paused
                && !s.scaffolding
                && !s.canceled
                && !s.archived
                && !record.status().is_terminal();
            if !interrupted {
                continue;
            }
            if self.orchestrator.open_plan(&id).await.is_ok()
                && self.orchestrator.start(&id).await.is_ok()
            {
                resumed.push(id);
            }
        }
        resumed
    }

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
    fn with_new_specs(
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
    async fn retry(&self, id: &PlanId, request: RetryRequest) -> Result<usize, Failure> {
        self.own(id).await?;
        Ok(retry_and_continue(&self.orchestrator, id, request).await?)
    }

    /// Resolves a plan (an id or a unique prefix) and one of its jobs (`jobId` or
    /// `producerId`).
    async fn job_at(
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

    /// The plan's status: the document and the text.
    pub(crate) async fn status_doc(&self, id: &PlanId) -> Result<(Value, String), Failure> {
        let view = self.record(id).await?;
        Ok((view.to_json(), report::plan_text(&view)))
    }

    /// The plan's status after a tool changed it, the text led by `done` (what happened).
    async fn status_after(&self, id: &PlanId, done: &str) -> Result<(Value, String), Failure> {
        let (doc, text) = self.status_doc(id).await?;
        Ok((doc, format!("{done}\n{text}")))
    }

    /// A tool that drives a whole plan: resolves the plan (an id or a unique prefix) and takes
    /// it over, runs `op` on it, and answers with the plan's status. `done` adds what `op`
    /// returned to the status document and says what happened (the text's first line), if
    /// anything.
    async fn drive<R>(
        &self,
        plan: &str,
        op: impl AsyncFnOnce(&PlanId) -> orchestrator_core::Result<R>,
        done: impl FnOnce(&PlanId, R, &mut Value) -> Option<String>,
    ) -> Result<(Value, String), Failure> {
        let id = self.owned_plan(plan).await?;
        let outcome = op(&id).await?;
        let (mut doc, text) = self.status_doc(&id).await?;
        let text = match done(&id, outcome, &mut doc) {
            Some(done) => format!("{done}\n{text}"),
            None => text,
        };
        Ok((doc, text))
    }

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

    async fn logs(&self, args: LogsArgs) -> Result<(Value, String), Failure> {
        let phase = match &args.phase {
            Some(p) => Some(Phase::parse(p).ok_or_else(|| {
                ArgError::new(
                    "phase",
                    Some(json!(p)),
                    "unknown phase",
                    format!("one of {}", Phase::ALL.map(Phase::as_str).join(", ")),
                )
            })?),
            None => None,
        };
        let job = self
            .job_at(
                &args.plan_id,
                args.job_id.as_deref(),
                args.producer_id.as_deref(),
            )
            .await?;
        let (id, label, node) = (&job.id, &job.label, job.node());
        if let Some(a) = args.attempt {
            if a == 0 || a as usize > node.attempts.len() {
                return Err(ArgError::new(
                    "attempt",
                    Some(json!(a)),
                    "no such attempt",
                    format!("1 to {} (the job's attempts)", node.attempts.len()),
                )
                .into());
            }
        }
        let mut query = LogQuery::new();
        if let Some(a) = args.attempt {
            query = query.attempt(a);
        }
        if let Some(t) = args.tail {
            query = query.tail(t);
        }
        let phases: Vec<Phase> = phase.map_or_else(|| Phase::ALL.to_vec(), |p| vec![p]);
        let mut text = String::new();
        let mut by_phase = serde_json::Map::new();
        for p in phases {
            let log = self
                .orchestrator
                .repository()
                .read_log(id, &node.id, query.phase(p))
                .await?;
            if log.is_empty() {
                continue;
            }
            if phase.is_none() {
                text.push_str(&format!("== {p} ==\n"));
            }
            text.push_str(&log);
            if !log.ends_with('\n') {
                text.push('\n');
            }
            by_phase.insert(p.as_str().to_owned(), json!(log));
        }
        if text.is_empty() {
            text = format!(
                "no logs for job `{label}` (status {}, {} attempt(s))",
                node.status,
                node.attempts.len()
            );
        }
        Ok((
            json!({
                "planId": id,
                "jobId": node.id,
                "producerId": label,
                "status": node.status.as_str(),
                "phases": by_phase,
                "logs": text,
            }),
            text,
        ))
    }
}

#[tool_router]
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
        name = "get_copilot_job_logs",
        description = "A job's logs, per phase (merge-fi, setup, prechecks, work, commit, postchecks, \
            merge-ri). Name the job by jobId or producerId; narrow with phase, attempt and tail \
            (last N lines). Read these to see why a job failed."
    )]
    async fn get_copilot_job_logs(
        &self,
        Parameters(args): Parameters<Args<LogsArgs>>,
    ) -> ToolResult {
        run(&args, async |a| self.logs(a).await).await
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
        name = "get_copilot_job",
        description = "One job in detail: its spec (task, work, dependencies, group), status, \
            commit, worktree, error and every attempt with its phases and timings. Name it by \
            jobId or producerId."
    )]
    async fn get_copilot_job(&self, Parameters(args): Parameters<Args<JobArgs>>) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            let node = job.node();
            let text = format!(
                "job {} ({}): {}, {} attempt(s){}",
                job.label,
                node.id,
                node.status,
                node.attempts.len(),
                node.error
                    .as_deref()
                    .map(|e| format!(", error: {e}"))
                    .unwrap_or_default()
            );
            Ok((report::job_detail(&job.record, job.n), text))
        })
        .await
    }

    #[tool(
        name = "list_copilot_jobs",
        description = "A plan's jobs with jobId, producerId, name, status, attempts, commit and \
            error; optionally only those with a status (pending, ready, scheduled, running, \
            succeeded, failed, blocked, canceled, completed_split) or in a group."
    )]
    async fn list_copilot_jobs(
        &self,
        Parameters(args): Parameters<Args<ListJobsArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            if let Some(s) = &a.status {
                let all = orchestrator_core::NodeStatus::ALL.map(|s| s.as_str());
                if !all.contains(&s.as_str()) {
                    return Err(ArgError::new(
                        "status",
                        Some(json!(s)),
                        "unknown job status",
                        format!("one of {}", all.join(", ")),
                    )
                    .into());
                }
            }
            let id = self.plan_id(&a.plan_id).await?;
            let record = self.record(&id).await?;
            let all = match report::plan_json(&record)["jobs"].take() {
                Value::Array(jobs) => jobs,
                _ => Vec::new(),
            };
            // A group matches itself and the groups below it.
            let group = a
                .group
                .as_deref()
                .map(|g| (g, format!("{}/", g.trim_end_matches('/'))));
            let in_group = |j: &Value| match &group {
                Some((g, below)) => j["group"]
                    .as_str()
                    .is_some_and(|jg| jg == *g || jg.starts_with(below.as_str())),
                None => true,
            };
            let jobs: Vec<Value> = all
                .into_iter()
                .filter(|j| a.status.as_deref().is_none_or(|s| j["status"] == s))
                .filter(in_group)
                .collect();
            let text = jobs
                .iter()
                .map(|j| {
                    format!(
                        "{}  {}  {}",
                        j["producerId"].as_str().unwrap_or(""),
                        j["status"].as_str().unwrap_or(""),
                        j["nodeId"].as_str().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            Ok((
                json!({"planId": id, "count": jobs.len(), "jobs": jobs}),
                if text.is_empty() {
                    "no jobs match".to_owned()
                } else {
                    text
                },
            ))
        })
        .await
    }

    #[tool(
        name = "retry_copilot_job",
        description = "Retry one failed job (by jobId or producerId). It resumes from the failed \
            phase; newWork/newPrechecks/newPostchecks replace its specs (e.g. a corrected \
            command or clearer agent instructions), clearWorktree starts over. The plan then \
            runs on in the background."
    )]
    async fn retry_copilot_job(
        &self,
        Parameters(args): Parameters<Args<RetryJobArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            let request = Self::with_new_specs(
                RetryRequest::jobs([job.node().id.to_string()]),
                a.new_work,
                a.new_prechecks,
                a.new_postchecks,
                a.clear_worktree,
            )?;
            self.retry(&job.id, request).await?;
            self.status_after(&job.id, &format!("retrying job {}", job.label))
                .await
        })
        .await
    }

    #[tool(
        name = "force_fail_copilot_job",
        description = "Fail a running (stuck) job now, killing its process tree. It can then be \
            retried with retry_copilot_job."
    )]
    async fn force_fail_copilot_job(
        &self,
        Parameters(args): Parameters<Args<JobArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            self.own(&job.id).await?;
            self.orchestrator
                .force_fail(&job.id, job.node().id.as_str())
                .await?;
            self.status_after(&job.id, &format!("job {} force-failed", job.label))
                .await
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
    #[tool(
        name = "get_copilot_job_attempts",
        description = "Every attempt of a job (by jobId or producerId): number, status, start \
            and end times, the phase it resumed from, each phase's status and timing, the failed \
            phase, the failure reason and error. Read logs of an attempt with \
            get_copilot_job_logs and `attempt`."
    )]
    async fn get_copilot_job_attempts(
        &self,
        Parameters(args): Parameters<Args<JobArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            let (label, node) = (&job.label, job.node());
            let attempts = serde_json::to_value(&node.attempts).unwrap_or(Value::Null);
            let mut text = format!("job {label}: {} attempt(s)\n", node.attempts.len());
            for at in &node.attempts {
                let error = at.error.as_deref().and_then(|e| e.lines().next());
                let _ = writeln!(
                    text,
                    "  #{} {:?}{}",
                    at.number,
                    at.status,
                    error.map(|e| format!(": {e}")).unwrap_or_default()
                );
            }
            Ok((
                json!({
                    "planId": job.id,
                    "jobId": node.id,
                    "producerId": label,
                    "status": node.status.as_str(),
                    "count": node.attempts.len(),
                    "attempts": attempts,
                }),
                text,
            ))
        })
        .await
    }

    #[tool(
        name = "get_copilot_job_failure_context",
        description = "Why a job failed, in one call: its error, failed phase, failure reason, \
            the last 100 lines of the failed phase's log, and its work spec. Use it before \
            retry_copilot_job (with newWork to fix the job)."
    )]
    async fn get_copilot_job_failure_context(
        &self,
        Parameters(args): Parameters<Args<JobArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            let (id, label, node) = (&job.id, &job.label, job.node());
            let last = node.last_attempt();
            let phase = last.and_then(|at| at.failed_phase);
            let log = match (phase, last) {
                (Some(p), Some(at)) => {
                    self.orchestrator
                        .repository()
                        .read_log(
                            id,
                            &node.id,
                            LogQuery::new().phase(p).attempt(at.number).tail(100),
                        )
                        .await?
                }
                _ => String::new(),
            };
            let work = job
                .record
                .job(job.n)
                .and_then(|j| serde_json::to_value(&j.work).ok());
            let text = match &node.error {
                Some(e) => format!(
                    "job {label} is {} (phase {}): {e}\n{log}",
                    node.status,
                    phase.map_or("-", Phase::as_str)
                ),
                None => format!("job {label} is {}; no failure recorded", node.status),
            };
            Ok((
                json!({
                    "planId": id,
                    "jobId": node.id,
                    "producerId": label,
                    "status": node.status.as_str(),
                    "error": node.error,
                    "failedPhase": phase,
                    "failureReason": last.and_then(|at| at.failure_reason),
                    "attempts": node.attempts.len(),
                    "log": log,
                    "work": work,
                }),
                text,
            ))
        })
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for OrchestratorMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "orchestrator-mcp",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Runs plans of coding jobs (a DAG) in git worktrees of this repository. \
                 create_copilot_plan starts a plan and returns its planId; poll \
                 get_copilot_plan_status until it ends; on failure read get_copilot_job_logs \
                 and fix with retry_copilot_job (optionally with newWork).",
            )
    }
}
