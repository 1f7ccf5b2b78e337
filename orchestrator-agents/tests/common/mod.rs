//! Helpers of this crate's integration tests: work contexts, log lines, job states. The
//! process and waiting helpers are shared: `orchestrator_testkit::fixtures`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub mod clis;
pub mod fakes;

use orchestrator_core::events::{EventBus, OrchestratorEvent};
use orchestrator_core::plan::Env;
use orchestrator_core::runner::{LogSink, WorkContext};
use orchestrator_core::state::{NodeState, PlanRecord};
use orchestrator_core::{NodeId, Phase, PlanId};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// A context running in `dir` whose log only buffers.
pub fn ctx(dir: &Path) -> WorkContext {
    ctx_with_log(dir, LogSink::detached())
}

/// A context running in `dir` whose log also publishes events, and a subscription to them.
pub fn ctx_with_events(dir: &Path) -> (WorkContext, broadcast::Receiver<OrchestratorEvent>) {
    let bus = EventBus::new(1024);
    let rx = bus.subscribe();
    let log = LogSink::new(PlanId::from("plan"), 0, Phase::Work, 1, bus);
    (ctx_with_log(dir, log), rx)
}

fn ctx_with_log(dir: &Path, log: LogSink) -> WorkContext {
    WorkContext {
        plan_id: PlanId::from("plan"),
        node: 0,
        node_id: NodeId::from("node"),
        producer_id: "job".into(),
        task: "test task".into(),
        phase: Phase::Work,
        attempt: 1,
        dir: dir.to_owned(),
        env: Env::new(),
        cancel: CancellationToken::new(),
        log,
        session_id: None,
        continues_unfinished: false,
        inputs: None,
        may_split: false,
        tools: None,
        wake: None,
    }
}

/// Stdout lines of a detached log's text (stderr lines are prefixed `[stderr] `).
pub fn stdout_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| !l.starts_with("[stderr] "))
        .collect()
}

/// The state of the job `producer` in `record`.
pub fn node<'a>(record: &'a PlanRecord, producer: &str) -> &'a NodeState {
    let i = record
        .spec
        .jobs
        .iter()
        .position(|j| j.producer_id == producer)
        .expect("job exists");
    &record.state.nodes[i]
}

/// Where the real agent CLIs are installed (`scripts/install-agent-clis.sh`; `AGENT_CLIS_BIN`
/// overrides).
pub fn bin_dir() -> PathBuf {
    std::env::var_os("AGENT_CLIS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(".agent-clis")
                .join("bin")
        })
}

/// The CLI's executable, or `None` (after saying so) when it is not installed.
pub fn installed(cli: &str) -> Option<PathBuf> {
    let program = bin_dir().join(cli);
    if program.is_file() {
        Some(program)
    } else {
        eprintln!("skipped: {cli} not installed (run scripts/install-agent-clis.sh)");
        None
    }
}
