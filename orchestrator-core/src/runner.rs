//! The work plug-in point: [`WorkRunner`] runs one work spec in a context, plus closure adapters.

use std::fmt::{self, Debug};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::events::{EventBus, OrchestratorEvent};
use crate::ids::{NodeId, NodeIndex, PlanId};
use crate::plan::{Env, WorkSpec};
use crate::repository::LogKey;
use crate::state::{FailureReason, Phase};

/// Everything a runner needs to run one spec for one phase of one attempt.
#[derive(Debug, Clone)]
pub struct WorkContext {
    /// Plan.
    pub plan_id: PlanId,
    /// Node index in the plan.
    pub node: NodeIndex,
    /// Node id.
    pub node_id: NodeId,
    /// The job's producerId.
    pub producer_id: String,
    /// The job's task description.
    pub task: String,
    /// Phase being run (`prechecks`, `work`, `postchecks`, `setup` for `worktreeInit`).
    pub phase: Phase,
    /// Attempt number (1-based).
    pub attempt: u32,
    /// Directory to run in: the job's worktree, or the plan's directory with `isolation: none`.
    pub dir: PathBuf,
    /// Plan env overlaid with job env; the runner overlays the spec's own `env` last.
    pub env: Env,
    /// Cancelled on cancel, pause-with-stop, force-fail or shutdown: stop promptly.
    pub cancel: CancellationToken,
    /// Where output lines go (phase log and events).
    pub log: LogSink,
    /// Agent session of an earlier phase or attempt, to resume.
    pub session_id: Option<String>,
    /// The previous run of this phase did not finish (it was interrupted, crashed or failed)
    /// and this run resumes its agent session on the worktree as that run left it: an agent
    /// runner tells the agent so, so that it continues rather than starts over.
    pub continues_unfinished: bool,
    /// The results of the jobs this one depends on (their outputs and commits, and the file
    /// [`crate::inputs::INPUTS_VAR`] names); `None` when none of them has one.
    pub inputs: Option<Arc<crate::inputs::Inputs>>,
    /// The job may split (SPEC §12): a [`crate::composite::MANIFEST_FILE`] its work leaves in
    /// [`WorkContext::dir`] turns its remaining work into sub-jobs. An agent runner whose
    /// agent's context fills asks it for one.
    pub may_split: bool,
    /// The agent's own tools for this run (SPEC §15): the MCP endpoint and token its CLI is
    /// given, when the engine serves them ([`crate::tools::AgentTools`]).
    pub tools: Option<crate::tools::ToolEndpoint>,
    /// Why the job's last wait ended (its timer fired, a person answered its question): an
    /// agent runner resumes the session with this message instead of the job's prompt.
    pub wake: Option<String>,
}

/// The environment variable every process a runner starts for a job carries (set by
/// `orchestrator-agents`' supervisor), and its descendants inherit: `<planId>/<nodeId>/<run>`,
/// the job's [`job_token_prefix`] and a value unique to the run. Processes that left the job's
/// process group (`setsid`, daemons) are found by it, even after the owner of the plan died.
pub const JOB_TOKEN_VAR: &str = "ORCHESTRATOR_JOB_TOKEN";

/// The start of the [`JOB_TOKEN_VAR`] value of every process run for job `node` of `plan`.
///
/// ```
/// use orchestrator_core::{NodeId, PlanId};
/// let prefix = orchestrator_core::runner::job_token_prefix(&PlanId::from("p1"), &NodeId::from("n1"));
/// assert_eq!(prefix, "p1/n1/");
/// ```
pub fn job_token_prefix(plan: &PlanId, node: &NodeId) -> String {
    format!("{plan}/{node}/")
}

impl WorkContext {
    /// The [`job_token_prefix`] of this context's job.
    pub fn job_token_prefix(&self) -> String {
        job_token_prefix(&self.plan_id, &self.node_id)
    }

    /// A context for running a spec outside any plan (tests, doctests, tools): phase `work`,
    /// attempt 1, an empty environment overlay, a fresh cancellation token and a detached log.
    ///
    /// ```
    /// let ctx = orchestrator_core::WorkContext::detached(std::env::temp_dir());
    /// assert_eq!(ctx.attempt, 1);
    /// ```
    pub fn detached(dir: impl Into<PathBuf>) -> Self {
        WorkContext {
            plan_id: PlanId::from("detached"),
            node: 0,
            node_id: NodeId::from("detached"),
            producer_id: "detached".into(),
            task: "detached".into(),
            phase: Phase::Work,
            attempt: 1,
            dir: dir.into(),
            env: Env::new(),
            cancel: CancellationToken::new(),
            log: LogSink::detached(),
            session_id: None,
            continues_unfinished: false,
            inputs: None,
            may_split: false,
            tools: None,
            wake: None,
        }
    }
}

/// What a successful run reports back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct WorkOutput {
    /// Agent session id to resume later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Usage or other metrics, stored on the attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<serde_json::Value>,
    /// What the work produced for whoever reads its result (SPEC §12): an agent's final
    /// reply, a shell or process job's stdout. Recorded on the attempt of a `work` phase
    /// (the engine keeps its last [`MAX_OUTPUT_BYTES`]), shown as the job's `"output"` and
    /// handed to the jobs that depend on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// The most of a work's output an attempt keeps (1 MiB): a longer one keeps its end, from a
/// line start (the whole stream stays in the phase log).
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;

impl WorkOutput {
    /// This output with `text` as the work's output.
    ///
    /// ```
    /// let out = orchestrator_core::WorkOutput::default().with_output("42 files counted");
    /// assert_eq!(out.output.as_deref(), Some("42 files counted"));
    /// ```
    pub fn with_output(mut self, text: impl Into<String>) -> Self {
        self.output = Some(text.into());
        self
    }
}

/// `text` cut to its last [`MAX_OUTPUT_BYTES`], starting at a line (or, for one long line, a
/// character) boundary.
///
/// ```
/// let long = "x".repeat(10) + "\n" + &"y".repeat(orchestrator_core::runner::MAX_OUTPUT_BYTES);
/// assert_eq!(orchestrator_core::runner::output_tail(&long).len(), orchestrator_core::runner::MAX_OUTPUT_BYTES);
/// assert_eq!(orchestrator_core::runner::output_tail("short"), "short");
/// ```
pub fn output_tail(text: &str) -> &str {
    if text.len() <= MAX_OUTPUT_BYTES {
        return text;
    }
    let mut start = text.len() - MAX_OUTPUT_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = &text[start..];
    // From the first whole line, unless the tail is one line.
    match tail.find('\n') {
        Some(i) if i + 1 < tail.len() && start > 0 && !text[..start].ends_with('\n') => {
            &tail[i + 1..]
        }
        _ => tail,
    }
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{message}")]
#[non_exhaustive]
pub struct WorkFailure {
    /// What happened, for a person.
    pub message: String,
    /// Classification.
    pub reason: FailureReason,
    /// Exit code, for processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Session id, when an agent ran before failing (so a retry resumes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

impl WorkFailure {
    /// A failure of the phase with this message.
    pub fn new(message: impl Into<String>) -> Self {
        WorkFailure {
            message: message.into(),
            reason: FailureReason::PhaseFailed,
            exit_code: None,
            session_id: None,
        }
    }

    /// Sets the reason.
    pub fn reason(mut self, reason: FailureReason) -> Self {
        self.reason = reason;
        self
    }

    /// Sets the exit code.
    pub fn exit_code(mut self, code: i32) -> Self {
        self.exit_code = Some(code);
        self
    }

    /// Stopped through the cancellation token.
    pub fn canceled() -> Self {
        WorkFailure::new("canceled").reason(FailureReason::Canceled)
    }
}

/// Result of a run.
pub type WorkResult = Result<WorkOutput, WorkFailure>;

/// Runs work specs of some kind (`shell`, `process`, `agent`, or a host-defined one).
#[async_trait]
pub trait WorkRunner: Send + Sync + Debug + 'static {
    /// Runs `spec` in `ctx`. Must return promptly once `ctx.cancel` is cancelled.
    async fn run(&self, spec: &WorkSpec, ctx: &WorkContext) -> WorkResult;
}

/// What a [`Healer`] is asked to fix.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HealRequest {
    /// The shell or process spec that failed.
    pub spec: WorkSpec,
    /// How it failed (message with the last lines of output, exit code).
    pub failure: WorkFailure,
    /// 1 for the first heal of this phase, then 2, ... up to the budget.
    pub round: u32,
}

impl HealRequest {
    /// A request to fix what made `spec` fail.
    pub fn new(spec: WorkSpec, failure: WorkFailure, round: u32) -> Self {
        HealRequest {
            spec,
            failure,
            round,
        }
    }
}

/// Auto-heal (SPEC §3): when a shell or process phase fails, the attempt fails and a new
/// attempt starts that first lets the healer (typically an agent) fix the worktree, then runs
/// the phase again; up to [`crate::OrchestratorOptions::auto_heal_budget`] heals in a row per
/// phase. A job opts out with
/// `autoHeal: false`, a spec with `onFailure.noAutoHeal`.
#[async_trait]
pub trait Healer: Send + Sync + Debug + 'static {
    /// Tries to fix what made `request.spec` fail, working in `ctx.dir`. An error ends healing.
    /// The output's metrics (an agent's usage) are stored on the heal's attempt.
    async fn heal(&self, request: &HealRequest, ctx: &WorkContext) -> WorkResult;
}

/// A process group a dead owner of a plan left running: its leader's pid and the folder its
/// job ran in (the job's worktree, or the plan's folder with `isolation: none`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leftover {
    /// Process group id; 0 when none was recorded (a crash can come between a job's start
    /// and the record of its group): then only [`Leftover::token_prefix`] finds its processes.
    pub pgid: u32,
    /// Where its job ran: only processes working there may be stopped (pids get reused).
    pub dir: PathBuf,
    /// The job's [`job_token_prefix`]: processes whose [`JOB_TOKEN_VAR`] starts with it were
    /// started for the job, and are stopped too wherever they work, whatever their group.
    pub token_prefix: Option<String>,
}

impl Leftover {
    /// A group `pgid` that ran in `dir`.
    pub fn new(pgid: u32, dir: impl Into<PathBuf>) -> Self {
        Leftover {
            pgid,
            dir: dir.into(),
            token_prefix: None,
        }
    }

    /// Sets [`Leftover::token_prefix`].
    pub fn token_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.token_prefix = Some(prefix.into());
        self
    }
}

/// Stops [`Leftover`] process groups when a plan is taken over after a crash, returning the
/// groups it stopped. Blocking is fine: the engine calls it on a blocking thread.
#[derive(Clone)]
pub struct Reaper(Arc<ReapFn>);

type ReapFn = dyn Fn(&[Leftover]) -> Vec<u32> + Send + Sync;

impl Reaper {
    /// A reaper calling `f`.
    pub fn new(f: impl Fn(&[Leftover]) -> Vec<u32> + Send + Sync + 'static) -> Self {
        Reaper(Arc::new(f))
    }

    /// Stops `leftovers`; returns the groups stopped.
    pub fn reap(&self, leftovers: &[Leftover]) -> Vec<u32> {
        (self.0)(leftovers)
    }
}

impl Debug for Reaper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reaper")
    }
}

/// Which stream a log line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LogStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// The orchestrator's own notes.
    System,
}

/// Collects a phase's output lines: buffered for the phase log, and published as events.
///
/// A sink with a writer ([`LogSink::with_writer`], the engine's writes to the plan's
/// repository) hands its buffer on in chunks: producers that can wait call
/// [`LogSink::write_line`], which writes the buffer out once it holds
/// [`LogSink::FLUSH_BYTES`], so memory stays bounded however much a process prints.
#[derive(Clone)]
pub struct LogSink {
    inner: Arc<LogInner>,
}

struct LogInner {
    plan: PlanId,
    node: NodeIndex,
    phase: Phase,
    attempt: u32,
    /// Secrets replaced in every line before it is buffered or published.
    redactor: Given<Arc<crate::redact::Redactor>>,
    buffer: Mutex<String>,
    events: EventBus,
    processes: Processes,
    writer: Given<Writer>,
    /// Held while a chunk is taken and written, so chunks reach the writer in order even when
    /// stdout and stderr readers flush at the same time.
    writing: tokio::sync::Mutex<()>,
    /// Set before the first chunk is taken: from then on [`LogSink::flush`] always takes
    /// `writing`, so it waits for a chunk another reader is writing.
    flushing: std::sync::atomic::AtomicBool,
}

/// Who hears of the process groups a sink's runner starts and ends.
enum Processes {
    Nobody,
    Hook(ProcessHook),
    /// The engine's own (every phase of every job has one: no closure to allocate).
    Engine(crate::engine::messages::ProcessReports),
}

impl Processes {
    fn report(&self, pgid: u32, running: bool) {
        match self {
            Processes::Nobody => {}
            Processes::Hook(hook) => hook(pgid, running),
            Processes::Engine(reports) => reports.report(pgid, running),
        }
    }
}

/// A part of a sink it is made with, or given once later through a builder method (the first
/// one stays). Not a bare `OnceLock`: setting one is a synchronised call, and the engine makes
/// a sink with both parts for every phase of every job.
struct Given<T> {
    made: Option<T>,
    later: std::sync::OnceLock<T>,
}

impl<T> Given<T> {
    fn made(value: Option<T>) -> Self {
        Given {
            made: value,
            later: std::sync::OnceLock::new(),
        }
    }

    fn get(&self) -> Option<&T> {
        self.made.as_ref().or_else(|| self.later.get())
    }

    fn give(&self, value: T) {
        if self.made.is_none() {
            let _ = self.later.set(value);
        }
    }
}

/// Writes one chunk of a phase log (whole lines, each ending in `\n`) to where the log is kept.
pub type LogWriter = Arc<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>;

/// Where a sink writes its buffer out. The store is a case of its own, not a [`LogWriter`]
/// closure: every phase of every job has a sink, and this keeps its set-up to no allocation.
enum Writer {
    Store(Arc<dyn crate::PlanRepository>, LogKey),
    Custom(LogWriter),
}

impl Writer {
    async fn write(&self, text: String) {
        match self {
            Writer::Store(repository, key) => {
                if let Err(e) = repository.append_log(key, &text).await {
                    tracing::warn!(error = %e, "could not store the phase log");
                }
            }
            Writer::Custom(writer) => writer(text).await,
        }
    }
}

/// Receives the process groups a runner starts (`true`) and sees end (`false`).
pub type ProcessHook = Arc<dyn Fn(u32, bool) + Send + Sync>;

impl Debug for LogSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogSink")
            .field("plan", &self.inner.plan)
            .field("node", &self.inner.node)
            .field("phase", &self.inner.phase)
            .finish()
    }
}

impl LogSink {
    /// A sink for one phase of one attempt of a node.
    pub fn new(
        plan: PlanId,
        node: NodeIndex,
        phase: Phase,
        attempt: u32,
        events: EventBus,
    ) -> Self {
        LogSink {
            inner: Arc::new(LogInner {
                plan,
                node,
                phase,
                attempt,
                redactor: Given::made(None),
                buffer: Mutex::new(String::new()),
                events,
                processes: Processes::Nobody,
                writer: Given::made(None),
                writing: tokio::sync::Mutex::new(()),
                flushing: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// A sink that also hands the process groups a runner starts and ends to `hook`: the
    /// engine records them so that whoever takes the plan over after a crash can stop what the
    /// dead owner left running.
    pub fn with_process_hook(
        plan: PlanId,
        node: NodeIndex,
        phase: Phase,
        attempt: u32,
        events: EventBus,
        hook: ProcessHook,
    ) -> Self {
        let mut sink = LogSink::new(plan, node, phase, attempt, events);
        if let Some(inner) = Arc::get_mut(&mut sink.inner) {
            inner.processes = Processes::Hook(hook);
        }
        sink
    }

    /// The sink of one phase as the engine sets it up: [`LogSink::with_process_hook`],
    /// [`LogSink::stored_in`] and [`LogSink::redacting`] in one, each set as the sink is made
    /// (every phase of every job has one: no cell is set after the fact).
    pub(crate) fn for_phase(
        key: LogKey,
        node: NodeIndex,
        events: EventBus,
        reports: crate::engine::messages::ProcessReports,
        repository: Arc<dyn crate::PlanRepository>,
        redactor: Arc<crate::redact::Redactor>,
    ) -> Self {
        LogSink {
            inner: Arc::new(LogInner {
                plan: key.plan.clone(),
                node,
                phase: key.phase,
                attempt: key.attempt,
                redactor: Given::made(Some(redactor)),
                buffer: Mutex::new(String::new()),
                events,
                processes: Processes::Engine(reports),
                writer: Given::made(Some(Writer::Store(repository, key))),
                writing: tokio::sync::Mutex::new(()),
                flushing: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// This sink (and its clones), replacing the secrets `redactor` knows in every line (phase
    /// log and log events alike) and in [`LogSink::redact`]. A sink has at most one redactor:
    /// a second call keeps the first.
    pub fn redacting(self, redactor: Arc<crate::redact::Redactor>) -> Self {
        self.inner.redactor.give(redactor);
        self
    }

    /// `text` with the secrets this sink redacts replaced (for failure messages and other text
    /// that quotes output).
    pub fn redact<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        match self.inner.redactor.get() {
            Some(r) => r.redact(text),
            None => std::borrow::Cow::Borrowed(text),
        }
    }

    /// A runner started a process group led by `pgid` (Unix) for this phase.
    pub fn process_started(&self, pgid: u32) {
        self.inner.processes.report(pgid, true);
    }

    /// The process group led by `pgid` has ended (or was stopped).
    pub fn process_ended(&self, pgid: u32) {
        self.inner.processes.report(pgid, false);
    }

    /// A sink that only buffers (tests, detached use).
    pub fn detached() -> Self {
        LogSink::new(
            PlanId::from("detached"),
            0,
            Phase::Work,
            1,
            EventBus::new(1),
        )
    }

    /// Records one line (without its newline), its secrets redacted.
    pub fn line(&self, stream: LogStream, text: &str) {
        let text = &*self.redact(text);
        {
            let mut buf = self.inner.buffer.lock().unwrap_or_else(|e| e.into_inner());
            if stream == LogStream::Stderr {
                buf.push_str("[stderr] ");
            }
            buf.push_str(text);
            buf.push('\n');
        }
        let i = &self.inner;
        i.events.emit_with(|| OrchestratorEvent::Log {
            plan: i.plan.clone(),
            node: i.node,
            phase: i.phase,
            attempt: i.attempt,
            stream,
            line: text.to_owned(),
        });
    }

    /// Buffer size at which [`LogSink::write_line`] writes the buffer out (256 KiB).
    pub const FLUSH_BYTES: usize = 256 * 1024;

    /// This sink, writing its buffer out through `writer` (see [`LogSink::write_line`] and
    /// [`LogSink::flush`]). A sink has at most one writer: a second call keeps the first.
    pub fn with_writer(self, writer: LogWriter) -> Self {
        self.inner.writer.give(Writer::Custom(writer));
        self
    }

    /// This sink, writing its buffer out to `repository`'s log `key`. A chunk that cannot be
    /// stored is reported through `tracing` and dropped: a log must not fail the phase.
    pub fn stored_in(self, repository: Arc<dyn crate::PlanRepository>, key: LogKey) -> Self {
        self.inner.writer.give(Writer::Store(repository, key));
        self
    }

    /// Records one line like [`LogSink::line`]; then, if the sink has a writer and its buffer
    /// holds [`LogSink::FLUSH_BYTES`] or more, waits for the buffer to be written out. Output
    /// readers call this: waiting for the store is what keeps a fast writer's output from
    /// piling up in memory.
    pub async fn write_line(&self, stream: LogStream, text: &str) {
        self.line(stream, text);
        if self.inner.writer.get().is_some() && self.buffered() >= Self::FLUSH_BYTES {
            self.flush().await;
        }
    }

    /// Writes out everything buffered so far through the writer, if the sink has one (else
    /// the buffer stays for [`LogSink::take`]).
    pub async fn flush(&self) {
        let Some(writer) = self.inner.writer.get() else {
            return;
        };
        // Nothing buffered and no chunk ever taken (so none in flight): nothing to wait for.
        // Most phases print nothing; this spares them the lock.
        if !self
            .inner
            .flushing
            .load(std::sync::atomic::Ordering::Acquire)
            && self.buffered() == 0
        {
            return;
        }
        self.inner
            .flushing
            .store(true, std::sync::atomic::Ordering::Release);
        // Uncontended (no other reader is writing a chunk) is the common case: no lock future.
        let _serial = match self.inner.writing.try_lock() {
            Ok(serial) => serial,
            Err(_) => self.inner.writing.lock().await,
        };
        let text = self.take();
        if !text.is_empty() {
            writer.write(text).await;
        }
    }

    fn buffered(&self) -> usize {
        self.inner
            .buffer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Takes what was buffered so far.
    pub fn take(&self) -> String {
        std::mem::take(&mut *self.inner.buffer.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

type AsyncFn = dyn Fn(WorkSpec, WorkContext) -> BoxFuture<'static, WorkResult> + Send + Sync;
type SyncFn = dyn Fn(&WorkSpec, &WorkContext) -> WorkResult + Send + Sync;

/// A [`WorkRunner`] made of a closure.
///
/// ```
/// use orchestrator_core::runner::{FnRunner, WorkOutput, WorkFailure};
/// let ok = FnRunner::sync(|_spec, _ctx| Ok(WorkOutput::default()));
/// let slow = FnRunner::new(|_spec, ctx| async move {
///     ctx.log.line(orchestrator_core::runner::LogStream::Stdout, "working");
///     tokio::time::sleep(std::time::Duration::from_millis(1)).await;
///     Err(WorkFailure::new("nope"))
/// });
/// # let _ = (ok, slow);
/// ```
#[derive(Clone)]
pub struct FnRunner(FnKind);

#[derive(Clone)]
enum FnKind {
    Async(Arc<AsyncFn>),
    Sync(Arc<SyncFn>),
}

impl FnRunner {
    /// From an async closure taking owned copies of the spec and context.
    pub fn new<F, Fut>(f: F) -> Self
    where
        F: Fn(WorkSpec, WorkContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = WorkResult> + Send + 'static,
    {
        FnRunner(FnKind::Async(Arc::new(move |s, c| Box::pin(f(s, c)))))
    }

    /// From a synchronous closure (quick, non-blocking work such as test doubles).
    pub fn sync<F>(f: F) -> Self
    where
        F: Fn(&WorkSpec, &WorkContext) -> WorkResult + Send + Sync + 'static,
    {
        FnRunner(FnKind::Sync(Arc::new(f)))
    }
}

impl Debug for FnRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnRunner")
    }
}

#[async_trait]
impl WorkRunner for FnRunner {
    async fn run(&self, spec: &WorkSpec, ctx: &WorkContext) -> WorkResult {
        match &self.0 {
            FnKind::Async(f) => f(spec.clone(), ctx.clone()).await,
            FnKind::Sync(f) => f(spec, ctx),
        }
    }
}
