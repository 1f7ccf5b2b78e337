//! Helpers shared by the integration tests: contexts, process liveness, waiting for files.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

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
    }
}

/// `(state, ppid)` of a process from `/proc`, or `None` when it is gone.
fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Whether `pid` still runs. A zombie does not count: in this container PID 1 does not reap
/// orphans, so a killed grandchild stays a zombie (and `kill -0` still succeeds on it).
pub fn alive(pid: i32) -> bool {
    if Path::new("/proc/self/stat").exists() {
        return proc_stat(pid).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X'));
    }
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `pid` is a zombie child of this test process (someone forgot to reap it).
pub fn unreaped_child_of_ours(pid: i32) -> bool {
    let me = i32::try_from(std::process::id()).unwrap_or(-1);
    proc_stat(pid).is_some_and(|(state, ppid)| state == 'Z' && ppid == me)
}

/// Waits until `pid` has stopped running, up to `within`.
pub async fn dies_within(pid: i32, within: Duration) -> bool {
    let end = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < end {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    !alive(pid)
}

/// Waits (up to 5 s) for `path` to hold a pid and returns it.
pub async fn read_pid(path: &Path) -> i32 {
    for _ in 0..500 {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no pid appeared in {}", path.display());
}

/// Kills `pid` (test cleanup of processes started outside any supervised group).
pub fn kill(pid: i32) {
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
}

/// Whether `program` is found on this machine's PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
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
