//! [`AgentWorkRunner`]: the `agent` work runner.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::composite::{SplitManifest, MANIFEST_FILE};
use orchestrator_core::plan::WorkSpec;
use orchestrator_core::runner::{
    LogStream, WorkContext, WorkFailure, WorkOutput, WorkResult, WorkRunner,
};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::prepare::{first_line, materialize, prepare, resume_wanted};

mod resolve;
mod verdict;
use super::pressure::{checkpoint_prompt, Pressure, THRESHOLD_VAR};
use super::{
    AgentCommand, AgentRequest, AgentRunner, AgentUsage, ClaudeCode, CodexCli, ContextPressure,
    CopilotCli, FailureClass, GeminiCli, Redactor, RetryPolicy, Transcript,
};
use crate::env::ChildEnv;
use crate::error::Error;
use crate::plugins::Plugins;
use crate::runners::wrong_kind;
use crate::session::steer::{steering_prompt, SteerInbox};
use crate::supervise::{Invocation, Outcome, Supervisor, SupervisorOptions};
use verdict::{conclude, start_failure, with_session};

/// Default grace between a CLI's final result event and its exit.
const RESULT_GRACE: Duration = Duration::from_secs(10);

/// Runs `agent` work specs through agent CLIs. Register it as
/// `Orchestrator::builder().runner("agent", AgentWorkRunner::new())`.
///
/// The spec's `agent` (else [`AgentWorkRunner::default_agent`], `copilot` by default) picks
/// an [`AgentRunner`] from the registry: `copilot`, `claude`, `codex` and `gemini` are built
/// in; [`AgentWorkRunner::register`] adds or replaces one. Each run:
///
/// 1. writes the instructions (the spec's `instructions`, or the `instructionsFile` read
///    from the worktree) to `<worktree>/.orchestrator/agent/<phase>-<attempt>/instructions.md`
///    and prompts the CLI to follow that file;
/// 2. builds the environment: the host's less [`REMOVED_ENV_VARS`](crate::REMOVED_ENV_VARS),
///    the runner's extra env, the plan/job env, the spec env, then `HOME`, `XDG_*_HOME` (the
///    agent's home for this worktree) and `TMPDIR`/`TMP`/`TEMP` (this run's), then the CLI's own
///    variables (config dirs, endpoint) — never the user's own configuration;
/// 3. resumes the context's session when the spec's `resumeSession` is not `false`;
/// 4. runs the CLI headless in the worktree under the [`Supervisor`]: output lines, with
///    secrets [redacted](super::Redactor), go to the phase log and events, and to the CLI's
///    parser; the spec's `timeout` (ms, covering all tries) and cancellation stop the whole
///    process tree;
/// 5. once the CLI printed its final result, gives it [`AgentWorkRunner::result_grace`] to
///    exit, then stops it and takes the result as it was reported (some CLIs hang on open
///    handles after finishing);
/// 6. retries [transient](super::FailureClass::Transient) failures with exponential backoff
///    ([`RetryPolicy`]), resuming the session the failed try started; when the CLI says the
///    session to resume does not exist ([`AgentRunner::session_lost`]; a CLI may not save a
///    session whose first model call failed), starts a new session at once instead;
/// 7. when the job [may split](orchestrator_core::WorkContext::may_split) and the run's
///    context crossed the [`ContextPressure`] threshold, resumes the session once more to ask
///    the agent for a checkpoint: its work left in the files and the remaining work in the
///    split manifest, which the engine turns into sub-jobs;
/// 8. returns the session id and the [`AgentUsage`] as metrics — on failure the session id
///    too, so a retry of the job resumes it.
///
/// ```
/// use orchestrator_agents::agent::{AgentWorkRunner, GenericAgent};
/// let runner = AgentWorkRunner::new()
///     .register("mine", GenericAgent::new("my-agent").arg("{prompt}"))
///     .default_agent("claude");
/// assert_eq!(
///     runner.agent_names().collect::<Vec<_>>(),
///     ["claude", "codex", "copilot", "gemini", "mine"]
/// );
/// ```
#[derive(Debug, Clone)]
pub struct AgentWorkRunner {
    agents: BTreeMap<String, Arc<dyn AgentRunner>>,
    default_agent: String,
    retry: RetryPolicy,
    result_grace: Duration,
    supervisor: Supervisor,
    context: ContextPressure,
    plugins: Arc<Plugins>,
}

impl Default for AgentWorkRunner {
    fn default() -> Self {
        AgentWorkRunner::empty()
            .register("copilot", CopilotCli::new())
            .register("claude", ClaudeCode::new())
            .register("codex", CodexCli::new())
            .register("gemini", GeminiCli::new())
    }
}

impl AgentWorkRunner {
    /// The four built-in CLIs, `copilot` as the default agent, default retries and grace.
    pub fn new() -> Self {
        AgentWorkRunner::default()
    }

    /// No agents registered (the default agent is still `copilot`).
    pub fn empty() -> Self {
        AgentWorkRunner {
            agents: BTreeMap::new(),
            default_agent: "copilot".into(),
            retry: RetryPolicy::default(),
            result_grace: RESULT_GRACE,
            supervisor: Supervisor::new(),
            context: ContextPressure::new(),
            plugins: Arc::new(Plugins::empty()),
        }
    }

    /// Registers `runner` under `name`, replacing any runner of that name.
    pub fn register(self, name: impl Into<String>, runner: impl AgentRunner) -> Self {
        self.register_arc(name, Arc::new(runner))
    }

    /// Registers a shared `runner` under `name`, replacing any runner of that name.
    pub fn register_arc(mut self, name: impl Into<String>, runner: Arc<dyn AgentRunner>) -> Self {
        self.agents.insert(name.into(), runner);
        self
    }

    /// The agent used when a spec names none. Default: `copilot`.
    pub fn default_agent(mut self, name: impl Into<String>) -> Self {
        self.default_agent = name.into();
        self
    }

    /// How transient failures are retried. Default: [`RetryPolicy::default`].
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// How long a CLI may take to exit after its final result. Default: 10 s.
    pub fn result_grace(mut self, grace: Duration) -> Self {
        self.result_grace = grace;
        self
    }

    /// When a run's context counts as full enough to ask the agent for a checkpoint (a split
    /// manifest). Default: [`ContextPressure::new`] (0.8 of the model's window);
    /// [`ContextPressure::off`] never asks. The variable
    /// [`THRESHOLD_VAR`](super::THRESHOLD_VAR) overrides the threshold per run.
    ///
    /// ```
    /// use orchestrator_agents::agent::{AgentWorkRunner, ContextPressure};
    /// let runner = AgentWorkRunner::new()
    ///     .context_pressure(ContextPressure::new().threshold(0.6).window("my-model", 32_000));
    /// assert_eq!(runner.context().limit(Some("my-model"), None), Some(19_200));
    /// ```
    pub fn context_pressure(mut self, pressure: ContextPressure) -> Self {
        self.context = pressure;
        self
    }

    /// The loaded plugins (SPEC §15; [`crate::plugins`]). Default: none.
    ///
    /// A spec's `agent` that names no registered CLI but a plugin agent runs that agent: on
    /// its `cli` (else the [default agent](AgentWorkRunner::default_agent)), with its `model`
    /// unless the spec names a `model` or `modelTier`, its system prompt at the top of the
    /// instructions and the skills it uses (its `skills`, else every skill of its plugin) in a
    /// "## Skills" section after them, and its `tools` as the CLI's allowed tools
    /// ([`AgentRequest::allowed_tools`]). The MCP servers of every plugin are handed to every
    /// run's CLI, next to the agents' own tool server ([`AgentRequest::mcp_servers`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use orchestrator_agents::agent::AgentWorkRunner;
    /// use orchestrator_agents::plugins::PluginPlaces;
    /// let dir = tempfile::tempdir()?;
    /// std::fs::create_dir_all(dir.path().join("agents"))?;
    /// std::fs::write(dir.path().join("plugin.json"), r#"{"name": "team"}"#)?;
    /// std::fs::write(dir.path().join("agents/reviewer.agent.md"), "---\nname: reviewer\ncli: claude\n---\nYou review.\n")?;
    /// let plugins = PluginPlaces::new().dir(dir.path()).load()?;
    /// let runner = AgentWorkRunner::new().plugins(Arc::new(plugins));
    /// assert!(runner.loaded_plugins().agent("reviewer").is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn plugins(mut self, plugins: Arc<Plugins>) -> Self {
        self.plugins = plugins;
        self
    }

    /// The loaded plugins ([`AgentWorkRunner::plugins`]).
    pub fn loaded_plugins(&self) -> &Arc<Plugins> {
        &self.plugins
    }

    /// The context pressure settings ([`AgentWorkRunner::context_pressure`]).
    pub fn context(&self) -> &ContextPressure {
        &self.context
    }

    /// Options of the process supervisor.
    pub fn supervisor_options(mut self, options: SupervisorOptions) -> Self {
        self.supervisor = Supervisor::with_options(options);
        self
    }

    /// The agent used when a spec names none ([`AgentWorkRunner::default_agent`]).
    pub fn default_agent_name(&self) -> &str {
        &self.default_agent
    }

    /// The registered agent names, sorted.
    pub fn agent_names(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }

    /// The runner registered under `name`.
    pub fn agent(&self, name: &str) -> Option<&Arc<dyn AgentRunner>> {
        self.agents.get(name)
    }
}

/// What a run does besides running the CLI: the steering inbox it watches (a message there
/// interrupts the CLI, which is then resumed with it), and who else sees each output line.
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    /// Where steering messages arrive.
    pub(crate) inbox: Option<SteerInbox>,
    /// Called after each output line was parsed, with the transcript so far (which then
    /// records tool activity for it to take).
    pub(crate) on_line: Option<LineHook>,
    /// Called with each steering message as it is taken from the inbox.
    pub(crate) on_steer: Option<SteerHook>,
}

/// See [`Hooks::on_line`].
pub(crate) type LineHook =
    Arc<dyn Fn(LogStream, &str, &mut Transcript, Option<&StdinLines>) + Send + Sync>;

/// See [`Hooks::on_steer`].
pub(crate) type SteerHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Where a run's stdin lines go (the CLI reads them while it works).
pub(crate) type StdinLines = tokio::sync::mpsc::UnboundedSender<String>;

/// A run's stdin while the CLI works, shared by the line observer (which closes it once the
/// CLI reported its result) and the steering watch (which writes steering into it).
#[derive(Default)]
struct Live {
    stdin: Mutex<Option<StdinLines>>,
    /// Results to let pass before the final one: each live steering interrupts the CLI's
    /// current step, and it reports the cut-short turn before it takes the message.
    extra_results: std::sync::atomic::AtomicU32,
}

impl Live {
    /// Writes `lines`; false when stdin is closed.
    fn send(&self, lines: Vec<String>) -> bool {
        let stdin = self.stdin.lock().unwrap_or_else(|e| e.into_inner());
        match stdin.as_ref() {
            Some(tx) => lines.into_iter().all(|line| tx.send(line).is_ok()),
            None => false,
        }
    }
}

/// What ended or changed a run from outside: steering messages that stopped it (to be resumed
/// with them) and those handed to it live.
#[derive(Default)]
struct Steering {
    stopped_by: Vec<String>,
    live: Vec<String>,
}

/// One try's result, and what the transcript said.
pub(crate) struct Tried {
    pub(crate) result: Result<(), (WorkFailure, FailureClass)>,
    pub(crate) usage: AgentUsage,
    /// The agent's final reply ([`Transcript::reply`]).
    pub(crate) reply: Option<String>,
    /// Steering messages that interrupted the run (see [`Hooks::inbox`]): it is to be resumed
    /// with them.
    pub(crate) steered: Vec<String>,
    /// Steering messages handed to the CLI while it worked ([`AgentRunner::live_lines`]).
    pub(crate) steered_live: Vec<String>,
    /// The try failed because the session it was to resume does not exist.
    pub(crate) lost_session: bool,
    /// The largest context of its model calls ([`Transcript::peak_context_tokens`]).
    peak_context: Option<u64>,
    /// The context window the CLI reported ([`Transcript::context_window`]).
    context_window: Option<u64>,
}

#[async_trait]
impl WorkRunner for AgentWorkRunner {
    async fn run(&self, spec: &WorkSpec, ctx: &WorkContext) -> WorkResult {
        let WorkSpec::Agent(agent) = spec else {
            return Err(wrong_kind("agent", spec));
        };
        if ctx.cancel.is_cancelled() {
            return Err(WorkFailure::canceled());
        }
        let requested = agent.agent.as_deref().unwrap_or(&self.default_agent);
        let (name, runner, plugins) = self.resolve(requested)?;
        if let Some((plugin, _)) = plugins.agent {
            ctx.log.line(
                LogStream::System,
                &format!(
                    "agent `{requested}` of plugin `{}` ({}) runs on `{name}`",
                    plugin.name(),
                    plugin.dir().display()
                ),
            );
        }
        let mut request = prepare(name, agent, runner.as_ref(), ctx, plugins)?;
        // A running job's agent can be steered (`orchestrator session steer PLAN/JOB`).
        let inbox = SteerInbox::of(&ctx.dir);
        let _running = inbox
            .start()
            .map_err(|e| {
                ctx.log.line(
                    LogStream::System,
                    &format!("steering is off for this run: {e}"),
                )
            })
            .ok();
        let hooks = Hooks {
            inbox: Some(inbox),
            ..Hooks::default()
        };
        let deadline = agent
            .timeout
            .filter(|&ms| ms > 0)
            .map(|ms| Instant::now() + Duration::from_millis(ms));

        let mut total = AgentUsage::default();
        let attempts = self.retry.attempts.max(1);
        for attempt in 1..=attempts {
            let mut tried = self
                .run_steered(&runner, &mut request, ctx, deadline, &hooks)
                .await;
            if tried.lost_session {
                // E.g. a session whose first model call failed was never saved: start afresh
                // (once, without using up a try) rather than fail on every retry.
                ctx.log.line(
                    LogStream::System,
                    &format!(
                        "the agent cannot resume session {}; starting a new session",
                        request.resume.as_deref().unwrap_or_default()
                    ),
                );
                request.resume = None;
                tried = self
                    .run_steered(&runner, &mut request, ctx, deadline, &hooks)
                    .await;
            }
            total.absorb(&tried.usage);
            total.agent = Some(name.to_owned());
            let session = total.session_id.clone();
            match tried.result {
                Ok(()) => {
                    let model = tried.usage.model.as_deref().or(request.model.as_deref());
                    let pressure = self.pressure(&request, ctx, model, &tried);
                    let mut reply = tried.reply;
                    if let Some(pressure) = pressure {
                        let checkpoint = self
                            .checkpoint(&runner, &request, ctx, deadline, &session, pressure)
                            .await;
                        if let Some(checkpoint) = checkpoint {
                            total.absorb(&checkpoint.usage);
                            reply = checkpoint.reply.or(reply);
                        }
                    }
                    let mut output = WorkOutput::default();
                    output.session_id = total.session_id.clone();
                    output.metrics = Some(total.to_json());
                    output.output = reply;
                    return Ok(output);
                }
                Err((failure, FailureClass::Transient)) if attempt < attempts => {
                    let delay = self.retry.delay_before(attempt + 1);
                    ctx.log.line(
                        LogStream::System,
                        &format!(
                            "transient failure (try {attempt} of {attempts}), retrying in {} ms: {}",
                            delay.as_millis(),
                            first_line(&failure.message)
                        ),
                    );
                    tokio::select! {
                        () = ctx.cancel.cancelled() => {
                            return Err(with_session(WorkFailure::canceled(), session));
                        }
                        () = tokio::time::sleep(delay) => {}
                    }
                    if request.resume.is_none() && resume_wanted(agent) {
                        request.resume = session;
                    }
                }
                Err((failure, _)) => return Err(with_session(failure, session)),
            }
        }
        Err(WorkFailure::new("the agent was never started"))
    }
}

impl AgentWorkRunner {
    /// Whether the run `tried` of `request`, which ended well, should be asked for a
    /// checkpoint ([`ContextPressure::checkpoint_wanted`], with the threshold of
    /// [`THRESHOLD_VAR`] in the run's environment when set).
    fn pressure(
        &self,
        request: &AgentRequest,
        ctx: &WorkContext,
        model: Option<&str>,
        tried: &Tried,
    ) -> Option<Pressure> {
        if !ctx.may_split {
            return None;
        }
        let value = request.env.get_str(THRESHOLD_VAR);
        let settings = self
            .context
            .overridden(value.as_deref())
            .unwrap_or_else(|note| {
                ctx.log.line(LogStream::System, &note);
                self.context.clone()
            });
        settings.checkpoint_wanted(
            ctx.may_split,
            &ctx.dir,
            model,
            tried.context_window,
            tried.peak_context,
        )
    }

    /// Resumes `session` with the [`checkpoint_prompt`] (see [`ContextPressure`]). Returns the
    /// checkpoint run when it ended well; a failed one is logged, and an invalid manifest it
    /// left removed, so that the job ends unsplit.
    async fn checkpoint(
        &self,
        runner: &Arc<dyn AgentRunner>,
        request: &AgentRequest,
        ctx: &WorkContext,
        deadline: Option<Instant>,
        session: &Option<String>,
        pressure: Pressure,
    ) -> Option<Tried> {
        let note = format!(
            "the agent's context reached {} of {} tokens (threshold {:.0}%)",
            pressure.tokens,
            pressure.window,
            pressure.threshold * 100.0
        );
        let Some(session) = session.clone() else {
            ctx.log.line(
                LogStream::System,
                &format!("{note}, but it reported no session to resume; no checkpoint"),
            );
            return None;
        };
        ctx.log.line(
            LogStream::System,
            &format!(
                "{note}; resuming session {session} to ask for a checkpoint and a split                  manifest ({MANIFEST_FILE})"
            ),
        );
        let mut checkpoint = request.clone();
        checkpoint.resume = Some(session);
        checkpoint.prompt = checkpoint_prompt(&ctx.dir, &pressure);
        let tried = self
            .try_once(runner, &checkpoint, ctx, deadline, &Hooks::default())
            .await;
        let manifest = ctx.dir.join(MANIFEST_FILE);
        match &tried.result {
            Ok(()) if manifest.exists() => return Some(tried),
            Ok(()) => ctx.log.line(
                LogStream::System,
                "the checkpoint run wrote no split manifest; the job goes on unsplit",
            ),
            Err((failure, _)) => ctx.log.line(
                LogStream::System,
                &format!(
                    "the checkpoint run failed; the job goes on unsplit: {}",
                    first_line(&failure.message)
                ),
            ),
        }
        let invalid = std::fs::read_to_string(&manifest)
            .ok()
            .is_some_and(|text| SplitManifest::parse(&text).is_err());
        if invalid && tried.result.is_err() {
            if let Err(e) = std::fs::remove_file(&manifest) {
                ctx.log.line(
                    LogStream::System,
                    &format!(
                        "cannot remove the partial manifest {}: {e}",
                        manifest.display()
                    ),
                );
            }
        }
        Some(tried).filter(|t| t.result.is_ok())
    }

    /// Runs `request` until it ends other than by steering: each steering message
    /// interrupts the CLI, which is resumed (its session, the files as it left them) with the
    /// message as the prompt; without a session to resume, it starts again with the message
    /// after the prompt. `request` keeps the last prompt and session; the answer's usage and
    /// steering messages cover every round.
    pub(crate) async fn run_steered(
        &self,
        runner: &Arc<dyn AgentRunner>,
        request: &mut AgentRequest,
        ctx: &WorkContext,
        deadline: Option<Instant>,
        hooks: &Hooks,
    ) -> Tried {
        let mut spent = AgentUsage::default();
        let mut steered = Vec::new();
        loop {
            let mut tried = self.try_once(runner, request, ctx, deadline, hooks).await;
            steered.append(&mut tried.steered_live);
            if tried.steered.is_empty() || ctx.cancel.is_cancelled() {
                spent.absorb(&tried.usage);
                tried.usage = spent;
                steered.append(&mut tried.steered);
                tried.steered = steered;
                return tried;
            }
            spent.absorb(&tried.usage);
            let session = tried.usage.session_id.clone().or(request.resume.take());
            ctx.log.line(
                LogStream::System,
                &format!(
                    "steered: {}; {}",
                    first_line(&tried.steered.join(" / ")),
                    match &session {
                        Some(id) => format!("resuming session {id} with the message"),
                        None => "no session to resume; starting again with the message".into(),
                    }
                ),
            );
            request.prompt = match &session {
                Some(_) => steering_prompt(&tried.steered),
                None => format!("{}\n\n{}", request.prompt, steering_prompt(&tried.steered)),
            };
            request.resume = session;
            steered.append(&mut tried.steered);
        }
    }

    /// One run of the CLI: its command prepared, supervised to its end, and judged.
    async fn try_once(
        &self,
        runner: &Arc<dyn AgentRunner>,
        request: &AgentRequest,
        ctx: &WorkContext,
        deadline: Option<Instant>,
        hooks: &Hooks,
    ) -> Tried {
        let failed = |failure: WorkFailure| Tried {
            result: Err((failure, FailureClass::Permanent)),
            usage: AgentUsage::default(),
            reply: None,
            steered: Vec::new(),
            steered_live: Vec::new(),
            lost_session: false,
            peak_context: None,
            context_window: None,
        };
        let (command, env, redactor) = match start_command(runner.as_ref(), request, ctx) {
            Ok(parts) => parts,
            Err(f) => return failed(f),
        };

        let mut fresh = Transcript::default();
        fresh.record_tools = hooks.on_line.is_some();
        let transcript = Arc::new(Mutex::new(fresh));
        // The CLI's stdin: its command's input lines, then whatever the hook answers, until
        // it reports its result (closing stdin then lets it exit).
        let (stdin, feed) = if !command.input.is_empty() || request.ask_host || request.live {
            let (lines, feed) = tokio::sync::mpsc::unbounded_channel();
            for line in &command.input {
                let _ = lines.send(line.clone());
            }
            (Some(lines), Some(feed))
        } else {
            (None, None)
        };
        let live = Arc::new(Live {
            stdin: Mutex::new(stdin),
            ..Live::default()
        });
        let finished = Arc::new(Notify::new());
        let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let invocation = Invocation::with_env(&command.program, &request.dir, env)
            .args(&command.args)
            .timeout(timeout)
            .job_token_prefix(ctx.job_token_prefix())
            .rewrite(move |line| redactor.redact(&line))
            .observe(observer(
                runner,
                &transcript,
                &finished,
                hooks.on_line.clone(),
                live.clone(),
            ));
        let invocation = match feed {
            Some(feed) => invocation.input(feed),
            None => invocation,
        };

        let (outcome, hung, steering) = self
            .supervise(&invocation, ctx, &finished, hooks, runner, &live)
            .await;
        let t = std::mem::take(&mut *transcript.lock().unwrap_or_else(|e| e.into_inner()));
        let mut tried = match outcome {
            Ok(outcome) => conclude(runner.as_ref(), request, ctx, &outcome, t, hung),
            Err(e) => failed(start_failure(e, &request.agent)),
        };
        tried.steered = steering.stopped_by;
        tried.steered_live = steering.live;
        tried
    }

    /// Runs `invocation` under the supervisor; once the CLI reported its final result
    /// (`finished`), gives it [`AgentWorkRunner::result_grace`] to exit, then stops it; a
    /// message in `inbox` stops it too. Returns the supervisor's answer, whether the CLI had
    /// to be stopped as hung, and the steering messages that stopped it.
    async fn supervise(
        &self,
        invocation: &Invocation,
        ctx: &WorkContext,
        finished: &Notify,
        hooks: &Hooks,
        runner: &Arc<dyn AgentRunner>,
        live: &Live,
    ) -> (Result<Outcome, Error>, bool, Steering) {
        let stop = ctx.cancel.child_token();
        let hung = AtomicBool::new(false);
        let steering = Mutex::new(Steering::default());
        let steer = async {
            let Some(inbox) = hooks.inbox.as_ref() else {
                return std::future::pending::<Result<Outcome, Error>>().await;
            };
            loop {
                let messages = inbox.next().await;
                if let Some(hook) = &hooks.on_steer {
                    messages.iter().for_each(|m| hook(m));
                }
                let lines = runner.live_lines(&steering_prompt(&messages));
                // Before the lines go in, so that the result they cause is let pass.
                live.extra_results.fetch_add(1, Ordering::SeqCst);
                if lines.is_some_and(|lines| live.send(lines)) {
                    ctx.log.line(
                        LogStream::System,
                        &format!("steered live: {}", first_line(&messages.join(" / "))),
                    );
                    let mut s = steering.lock().unwrap_or_else(|e| e.into_inner());
                    s.live.extend(messages);
                    continue;
                }
                live.extra_results.fetch_sub(1, Ordering::SeqCst);
                steering
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .stopped_by = messages;
                // Hand the message over by resuming the session: stop this run.
                stop.cancel();
                return std::future::pending::<Result<Outcome, Error>>().await;
            }
        };
        let guard = async {
            finished.notified().await;
            tokio::time::sleep(self.result_grace).await;
            hung.store(true, Ordering::SeqCst);
            ctx.log.line(
                LogStream::System,
                &format!(
                    "the agent reported its result but did not exit within {} ms; stopping it",
                    self.result_grace.as_millis()
                ),
            );
            stop.cancel();
            // The supervisor now stops the process and returns; this arm never completes.
            std::future::pending::<Result<Outcome, Error>>().await
        };
        let outcome = tokio::select! {
            outcome = self.supervisor.run(invocation, &stop, &ctx.log) => outcome,
            never = guard => never,
            never = steer => never,
        };
        let steering = std::mem::take(&mut *steering.lock().unwrap_or_else(|e| e.into_inner()));
        (outcome, hung.load(Ordering::SeqCst), steering)
    }
}

/// The runner's command for `request`, its folders and files created, with the environment it
/// runs in and a redactor for that environment's secrets; logs its notes and the command line
/// (redacted).
fn start_command(
    runner: &dyn AgentRunner,
    request: &AgentRequest,
    ctx: &WorkContext,
) -> Result<(AgentCommand, ChildEnv, Redactor), WorkFailure> {
    let command = runner.command(request)?;
    materialize(&command.dirs, &command.files)?;
    let mut env = request.env.clone();
    for (name, value) in &command.env {
        env.set(name, value);
    }
    // The plugins' MCP servers' env and header values are secrets too.
    let redactor = request
        .mcp_servers
        .iter()
        .flat_map(|s| s.transport().secrets())
        .fold(Redactor::from_env(&env), |r, value| r.with_value(value));
    for note in &command.notes {
        ctx.log.line(LogStream::System, note);
    }
    let shown: Vec<String> = std::iter::once(command.program.to_string_lossy().into_owned())
        .chain(command.args_lossy())
        .map(|a| redactor.redact(&a))
        .collect();
    ctx.log.line(
        LogStream::System,
        &format!("starting agent `{}`: {}", request.agent, shown.join(" ")),
    );
    Ok((command, env, redactor))
}

/// The line observer of a run: feeds each output line to the runner's parser (and plain
/// lines to the transcript), and notifies `finished` when the transcript first says the CLI
/// reported its final result.
fn observer(
    runner: &Arc<dyn AgentRunner>,
    transcript: &Arc<Mutex<Transcript>>,
    finished: &Arc<Notify>,
    on_line: Option<LineHook>,
    live: Arc<Live>,
) -> impl Fn(LogStream, &str) + Send + Sync + 'static {
    let transcript = transcript.clone();
    let finished = finished.clone();
    let runner = runner.clone();
    move |stream, line| {
        let mut t = transcript.lock().unwrap_or_else(|e| e.into_inner());
        let was_finished = t.finished;
        if stream != LogStream::Stdout || !super::is_json_event(line) {
            t.plain_line(line);
        }
        runner.parse_line(stream, line, &mut t);
        let mut stdin = live.stdin.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(hook) = &on_line {
            hook(stream, line, &mut t, stdin.as_ref());
        }
        if t.finished && !was_finished {
            let passing = live
                .extra_results
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if passing {
                // The turn a live steering cut short: the CLI goes on with the message.
                t.finished = false;
                t.result_error = None;
            } else {
                // Its result is in: closing stdin lets a CLI reading it exit.
                *stdin = None;
                finished.notify_one();
            }
        }
    }
}
