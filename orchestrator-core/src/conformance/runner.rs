//! Conformance suite for [`WorkRunner`]: every runner that starts programs runs [`run_all`] in
//! its own tests.
//!
//! Runners differ in the shape of their specs (a shell command, an executable and arguments,
//! an agent's instructions), so the suite does not write specs itself: it asks the fixture
//! for a spec that does what a small [`Script`] says ("print these lines", "print these
//! variables", "sleep", "exit 3"), then puts its own environment layer on it and runs it in a
//! fresh worktree folder. [`Script::sh`] is the same intent as a POSIX `sh` command, which is
//! all a shell-based fixture needs.
//!
//! ```no_run
//! use std::sync::Arc;
//! use orchestrator_core::conformance::runner::{run_all, RunnerFixture, Script};
//! use orchestrator_core::plan::WorkSpec;
//! use orchestrator_core::runner::WorkRunner;
//!
//! /// `runner` runs shell work (for example `orchestrator_agents::ShellRunner`).
//! #[derive(Debug)]
//! struct Shell(Arc<dyn WorkRunner>);
//!
//! impl RunnerFixture for Shell {
//!     fn runner(&self) -> &dyn WorkRunner {
//!         self.0.as_ref()
//!     }
//!     fn spec(&self, script: &Script) -> WorkSpec {
//!         WorkSpec::shell(script.sh())
//!     }
//! }
//!
//! # async fn demo(shell_runner: Arc<dyn WorkRunner>) {
//! run_all(|| {
//!     let runner = shell_runner.clone();
//!     async move { Shell(runner) }
//! })
//! .await;
//! # }
//! ```
//!
//! The cases, listed once in [`run_all`] so that a runner cannot skip one:
//!
//! - output lines reach the context's [`LogSink`](crate::runner::LogSink) (its buffer and its
//!   log events), in order;
//! - a failing program's exit code is on the [`WorkFailure`](crate::runner::WorkFailure);
//! - the work runs in the context's directory (the job's worktree);
//! - the environment is the host's, overlaid by the context's plan/job env, overlaid by the
//!   spec's own env;
//! - a run whose cancellation token fires returns promptly, failed with
//!   [`FailureReason::Canceled`], and so does a run whose token fired before it began;
//! - the process groups a runner starts are reported to the log's process hook, and each one
//!   it reports started is reported ended by the time the run returns (the engine records
//!   them to stop what a crashed owner left running).
//!
//! Each case panics with a message naming it on the first check that fails (this is test
//! support code: a failed check is a test failure). The cases need a Unix-like `sh`, `sleep`,
//! `printf` and `pwd` only when the fixture uses them.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::events::{EventBus, OrchestratorEvent};
use crate::ids::{NodeId, PlanId};
use crate::plan::{Env, WorkSpec};
use crate::runner::{LogSink, LogStream, WorkContext, WorkResult, WorkRunner};
use crate::state::{FailureReason, Phase};

/// How long any one run may take before the case fails as hung (generous: loaded machines,
/// agent runners writing their run folders).
const PATIENCE: Duration = Duration::from_secs(30);
/// How long a canceled run may take to return once its token fired: the supervisor's grace
/// between SIGTERM and SIGKILL plus slack, far below the sleep it interrupts.
const PROMPT: Duration = Duration::from_secs(10);
/// How long the sleeping script runs when nobody stops it.
const LONG_SLEEP: Duration = Duration::from_secs(120);
/// How long the cancel case lets the work start before it cancels it.
const HEAD_START: Duration = Duration::from_millis(300);

/// What a case wants the work to do; a [`RunnerFixture`] turns it into a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Script {
    /// Print each line to standard output, then exit with code 0.
    Print(Vec<String>),
    /// Print `NAME=value` for each variable, one line each (`NAME=` when it is unset), then
    /// exit with code 0. The names are plain `[A-Z_]+`.
    PrintEnv(Vec<String>),
    /// Print the working directory (one line), then exit with code 0.
    PrintCwd,
    /// Print one line, then sleep this long (a case cancels it well before).
    Sleep(Duration),
    /// Print one line to standard error, then exit with this code (never 0).
    Exit(i32),
}

impl Script {
    /// The intent as a POSIX `sh` command.
    ///
    /// ```
    /// use orchestrator_core::conformance::runner::Script;
    /// assert_eq!(Script::Exit(3).sh(), "echo 'exiting' >&2; exit 3");
    /// assert_eq!(Script::Print(vec!["it's".into()]).sh(), "printf '%s\\n' 'it'\\''s'");
    /// ```
    pub fn sh(&self) -> String {
        match self {
            Script::Print(lines) => {
                let quoted: Vec<String> = lines.iter().map(|l| sh_quote(l)).collect();
                format!("printf '%s\\n' {}", quoted.join(" "))
            }
            Script::PrintEnv(names) => names
                .iter()
                .map(|n| format!("printf '%s=%s\\n' {n} \"${{{n}-}}\""))
                .collect::<Vec<_>>()
                .join("; "),
            Script::PrintCwd => "pwd".to_owned(),
            Script::Sleep(d) => format!("echo 'sleeping'; sleep {}", d.as_secs().max(1)),
            Script::Exit(code) => format!("echo 'exiting' >&2; exit {code}"),
        }
    }
}

/// `text` as one single-quoted `sh` word.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A runner under test and how to write specs for it.
pub trait RunnerFixture: Send + Sync {
    /// The runner under test.
    fn runner(&self) -> &dyn WorkRunner;

    /// A spec of the runner's kind that does what `script` says. The suite sets the spec's
    /// `env` itself, so the fixture leaves it empty.
    fn spec(&self, script: &Script) -> WorkSpec;

    /// Whether the runner starts processes (and so must report their groups to the log's
    /// process hook). Default `true`; a runner that works in process says `false`.
    fn starts_processes(&self) -> bool {
        true
    }
}

/// Runs every case against fixtures made by `factory` (a fresh one per case).
///
/// Panics, naming the case, on the first check that fails.
pub async fn run_all<F, Fut, X>(factory: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = X>,
    X: RunnerFixture,
{
    output_lines_reach_the_log(&factory().await).await;
    a_failure_carries_the_exit_code(&factory().await).await;
    the_work_runs_in_the_worktree(&factory().await).await;
    the_env_is_host_then_plan_and_job_then_spec(&factory().await).await;
    a_canceled_run_stops_promptly(&factory().await).await;
    a_run_canceled_before_it_starts_fails_at_once(&factory().await).await;
    process_groups_are_reported_started_and_ended(&factory().await).await;
}

/// One case's context: a fresh worktree folder, a log publishing events, and the process
/// groups its hook saw.
struct Harness {
    case: &'static str,
    _root: tempfile::TempDir,
    ctx: WorkContext,
    events: tokio::sync::broadcast::Receiver<OrchestratorEvent>,
    groups: Arc<Mutex<Vec<(u32, bool)>>>,
}

impl Harness {
    fn new(case: &'static str) -> Harness {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{case}: temp dir: {e}"));
        // A space in the path: runners pass the directory on, never through a shell.
        let dir = root.path().join("job worktree");
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{case}: worktree folder: {e}"));
        let bus = EventBus::new(1024);
        let events = bus.subscribe();
        let groups = Arc::new(Mutex::new(Vec::new()));
        let hook = {
            let groups = groups.clone();
            Arc::new(move |pgid: u32, started: bool| {
                groups
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((pgid, started));
            })
        };
        let plan = PlanId::from("conformance");
        let log = LogSink::with_process_hook(plan.clone(), 0, Phase::Work, 1, bus, hook);
        let ctx = WorkContext {
            plan_id: plan,
            node: 0,
            node_id: NodeId::from("conformance-node"),
            producer_id: "conformance".into(),
            task: format!("runner conformance case {case}"),
            phase: Phase::Work,
            attempt: 1,
            dir,
            env: Env::new(),
            cancel: CancellationToken::new(),
            log,
            session_id: None,
            continues_unfinished: false,
            inputs: None,
            may_split: false,
            tools: None,
            wake: None,
        };
        Harness {
            case,
            _root: root,
            ctx,
            events,
            groups,
        }
    }

    /// Runs `spec`, failing the case when the run hangs, then checks that every process group
    /// reported started was reported ended.
    async fn run(&self, fixture: &dyn RunnerFixture, spec: &WorkSpec) -> WorkResult {
        let case = self.case;
        let result = tokio::time::timeout(PATIENCE, fixture.runner().run(spec, &self.ctx))
            .await
            .unwrap_or_else(|_| panic!("{case}: the run did not return within {PATIENCE:?}"));
        self.all_groups_ended();
        result
    }

    fn groups(&self) -> Vec<(u32, bool)> {
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn all_groups_ended(&self) {
        let case = self.case;
        let groups = self.groups();
        for &(pgid, started) in &groups {
            if started {
                assert!(
                    groups.contains(&(pgid, false)),
                    "{case}: process group {pgid} was reported started but never ended: {groups:?}"
                );
            }
        }
    }

    /// The lines buffered in the phase log so far (a runner may add notes of its own around
    /// the program's output, so cases look for their lines among others).
    fn log_lines(&self) -> Vec<String> {
        self.ctx.log.take().lines().map(str::to_owned).collect()
    }

    /// The lines published as log events so far, with their streams.
    fn event_lines(&mut self) -> Vec<(LogStream, String)> {
        let mut lines = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            if let OrchestratorEvent::Log { stream, line, .. } = event {
                lines.push((stream, line));
            }
        }
        lines
    }
}

/// `spec` with `env` as its own environment layer.
fn with_env(mut spec: WorkSpec, env: Env) -> WorkSpec {
    match &mut spec {
        WorkSpec::Shell(s) => s.extra.make_mut().env = env,
        WorkSpec::Process(p) => p.env = env,
        WorkSpec::Agent(a) => a.env = env,
        WorkSpec::Timer(_) | WorkSpec::Team(_) | WorkSpec::Pipeline(_) => {}
    }
    spec
}

/// Whether `wanted` appears in `lines` in this order (other lines may come between).
fn in_order(lines: &[String], wanted: &[&str]) -> bool {
    let mut rest = lines.iter();
    wanted
        .iter()
        .all(|w| rest.by_ref().any(|line| line.as_str() == *w))
}

async fn output_lines_reach_the_log(fixture: &dyn RunnerFixture) {
    let mut h = Harness::new("output_lines_reach_the_log");
    let case = h.case;
    let wanted = ["conformance: first line", "conformance: second line"];
    let spec = fixture.spec(&Script::Print(
        wanted.iter().map(|s| s.to_string()).collect(),
    ));
    if let Err(e) = h.run(fixture, &spec).await {
        panic!("{case}: printing two lines failed: {e} ({e:?})");
    }
    let logged = h.log_lines();
    assert!(
        in_order(&logged, &wanted),
        "{case}: the phase log lacks the printed lines in order: {logged:#?}"
    );
    let published: Vec<String> = h
        .event_lines()
        .into_iter()
        .filter(|(stream, _)| *stream == LogStream::Stdout)
        .map(|(_, line)| line)
        .collect();
    assert!(
        in_order(&published, &wanted),
        "{case}: the stdout log events lack the printed lines in order: {published:#?}"
    );
}

async fn a_failure_carries_the_exit_code(fixture: &dyn RunnerFixture) {
    let h = Harness::new("a_failure_carries_the_exit_code");
    let case = h.case;
    let failure = match h.run(fixture, &fixture.spec(&Script::Exit(3))).await {
        Ok(out) => panic!("{case}: a program exiting with code 3 succeeded: {out:?}"),
        Err(failure) => failure,
    };
    assert_eq!(
        failure.exit_code,
        Some(3),
        "{case}: the failure does not carry exit code 3: {failure:?}"
    );
    assert_ne!(
        failure.reason,
        FailureReason::Canceled,
        "{case}: nothing canceled the run: {failure:?}"
    );
    let logged = h.log_lines();
    assert!(
        logged.iter().any(|l| l.contains("exiting")),
        "{case}: the program's stderr line is not in the phase log: {logged:#?}"
    );
}

async fn the_work_runs_in_the_worktree(fixture: &dyn RunnerFixture) {
    let h = Harness::new("the_work_runs_in_the_worktree");
    let case = h.case;
    if let Err(e) = h.run(fixture, &fixture.spec(&Script::PrintCwd)).await {
        panic!("{case}: printing the working directory failed: {e} ({e:?})");
    }
    let worktree = canonical(case, &h.ctx.dir);
    let logged = h.log_lines();
    let ran_in = logged
        .iter()
        .filter(|line| Path::new(line.as_str()).is_absolute())
        .filter_map(|line| std::fs::canonicalize(line).ok())
        .collect::<Vec<PathBuf>>();
    assert!(
        ran_in.contains(&worktree),
        "{case}: the work did not run in the worktree {}: {logged:#?}",
        worktree.display()
    );
}

fn canonical(case: &str, path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|e| panic!("{case}: {}: {e}", path.display()))
}

async fn the_env_is_host_then_plan_and_job_then_spec(fixture: &dyn RunnerFixture) {
    let mut h = Harness::new("the_env_is_host_then_plan_and_job_then_spec");
    let case = h.case;
    let layer = |pairs: &[(&str, &str)]| -> Env {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    h.ctx.env = layer(&[
        ("CONFORMANCE_PLAN_ONLY", "from the plan"),
        ("CONFORMANCE_BOTH", "from the plan"),
    ]);
    let spec_env = layer(&[
        ("CONFORMANCE_BOTH", "from the spec"),
        ("CONFORMANCE_SPEC_ONLY", "from the spec"),
    ]);
    // `PATH` stands for the host's environment: no layer sets it, and every runner must pass
    // it on (the programs it starts are found through it).
    let host_path = std::env::var("PATH").ok();
    let mut names = vec![
        "CONFORMANCE_PLAN_ONLY",
        "CONFORMANCE_BOTH",
        "CONFORMANCE_SPEC_ONLY",
    ];
    if host_path.is_some() {
        names.push("PATH");
    }
    let script = Script::PrintEnv(names.iter().map(|n| n.to_string()).collect());
    let spec = with_env(fixture.spec(&script), spec_env);
    if let Err(e) = h.run(fixture, &spec).await {
        panic!("{case}: printing the environment failed: {e} ({e:?})");
    }
    let logged = h.log_lines();
    let mut wanted = vec![
        "CONFORMANCE_PLAN_ONLY=from the plan".to_owned(),
        "CONFORMANCE_BOTH=from the spec".to_owned(),
        "CONFORMANCE_SPEC_ONLY=from the spec".to_owned(),
    ];
    if let Some(path) = host_path {
        wanted.push(format!("PATH={path}"));
    }
    for line in &wanted {
        assert!(
            logged.contains(line),
            "{case}: the work did not see `{line}`: {logged:#?}"
        );
    }
}

async fn a_canceled_run_stops_promptly(fixture: &dyn RunnerFixture) {
    let h = Harness::new("a_canceled_run_stops_promptly");
    let case = h.case;
    let spec = fixture.spec(&Script::Sleep(LONG_SLEEP));
    let canceled_at = Arc::new(Mutex::new(None::<Instant>));
    let canceler = {
        let token = h.ctx.cancel.clone();
        let canceled_at = canceled_at.clone();
        async move {
            tokio::time::sleep(HEAD_START).await;
            *canceled_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            token.cancel();
        }
    };
    let (result, ()) = tokio::join!(h.run(fixture, &spec), canceler);
    let took = canceled_at
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .map(|at| at.elapsed());
    match took {
        Some(took) => assert!(
            took <= PROMPT,
            "{case}: the run took {took:?} to return after its token fired"
        ),
        None => panic!("{case}: a {LONG_SLEEP:?} sleep returned before it was canceled"),
    }
    match result {
        Ok(out) => panic!("{case}: a canceled run succeeded: {out:?}"),
        Err(failure) => assert_eq!(
            failure.reason,
            FailureReason::Canceled,
            "{case}: a canceled run failed for another reason: {failure:?}"
        ),
    }
}

async fn a_run_canceled_before_it_starts_fails_at_once(fixture: &dyn RunnerFixture) {
    let h = Harness::new("a_run_canceled_before_it_starts_fails_at_once");
    let case = h.case;
    h.ctx.cancel.cancel();
    let began = Instant::now();
    let result = h
        .run(fixture, &fixture.spec(&Script::Sleep(LONG_SLEEP)))
        .await;
    let took = began.elapsed();
    assert!(
        took <= PROMPT,
        "{case}: a run whose token had fired took {took:?}"
    );
    match result {
        Ok(out) => panic!("{case}: a canceled run succeeded: {out:?}"),
        Err(failure) => assert_eq!(
            failure.reason,
            FailureReason::Canceled,
            "{case}: a canceled run failed for another reason: {failure:?}"
        ),
    }
}

async fn process_groups_are_reported_started_and_ended(fixture: &dyn RunnerFixture) {
    let h = Harness::new("process_groups_are_reported_started_and_ended");
    let case = h.case;
    let spec = fixture.spec(&Script::Print(vec!["conformance: groups".into()]));
    if let Err(e) = h.run(fixture, &spec).await {
        panic!("{case}: printing a line failed: {e} ({e:?})");
    }
    let groups = h.groups();
    if fixture.starts_processes() && cfg!(unix) {
        assert!(
            groups.iter().any(|&(_, started)| started),
            "{case}: the runner started a program but reported no process group"
        );
    }
    assert!(
        groups.iter().all(|&(pgid, _)| pgid > 0),
        "{case}: a reported process group id is 0: {groups:?}"
    );
    // Harness::run checked that each one ended.
}
