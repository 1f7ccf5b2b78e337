//! Processes that leave their job's process group still end (issue 12, item 7): a `setsid`
//! grandchild is stopped on timeout, cancel, force-fail, when its run is dropped and when the
//! command exits; orphans are adopted (the supervisor is the child subreaper) and reaped; and
//! after a crash the next owner's reaper finds them by the job token in their environment.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::node;
use orchestrator_agents::{stop_leftovers, Ending, Invocation, ShellRunner, Supervisor};
use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::runner::{Leftover, LogSink, JOB_TOKEN_VAR};
use orchestrator_core::state::FailureReason;
use orchestrator_core::{NodeStatus, Orchestrator, PlanStatus};
use orchestrator_testkit::fixtures::{self, alive, dies_within, read_pid, unreaped_child_of_ours};
use tokio_util::sync::CancellationToken;

/// Starts a grandchild in a session of its own that writes its pid to `escaped.pid` and sleeps.
const ESCAPE: &str = "setsid sh -c 'echo $$ > escaped.pid; exec sleep 1000' & ";

fn sh(dir: &Path, script: &str) -> Invocation {
    Invocation::new("sh", dir).args(["-c", script])
}

fn have_setsid() -> bool {
    let found = fixtures::on_path("setsid");
    if !found {
        println!("skipped: `setsid` is not installed, so no process can leave its group");
    }
    found
}

/// The session of `pid`, from `/proc/<pid>/stat`.
fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Asserts the escaped grandchild of `dir` is gone, and was not left a zombie of ours.
async fn assert_gone(dir: &Path) {
    let pid = read_pid(&dir.join("escaped.pid")).await;
    let gone = dies_within(pid, Duration::from_secs(3)).await;
    if !gone {
        fixtures::kill(pid);
    }
    assert!(gone, "the escaped process {pid} outlived its run");
    // Reaped by the run's end (it was ours as the subreaper); a moment for the last SIGKILL.
    let end = Instant::now() + Duration::from_secs(2);
    while unreaped_child_of_ours(pid) && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!unreaped_child_of_ours(pid), "{pid} is an unreaped zombie");
}

#[tokio::test]
async fn a_setsid_grandchild_is_stopped_on_timeout() {
    if !have_setsid() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let inv =
        sh(dir.path(), &format!("{ESCAPE} sleep 1000")).timeout(Some(Duration::from_millis(500)));
    let outcome = Supervisor::new()
        .run(&inv, &CancellationToken::new(), &log)
        .await
        .expect("run");
    assert_eq!(outcome.ending, Ending::TimedOut(Duration::from_millis(500)));
    let pid = read_pid(&dir.path().join("escaped.pid")).await;
    assert_ne!(session_of(pid), session_of(std::process::id() as i32));
    assert_gone(dir.path()).await;
}

#[tokio::test]
async fn a_setsid_grandchild_is_stopped_on_cancel() {
    if !have_setsid() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cancel = CancellationToken::new();
    let inv = sh(dir.path(), &format!("{ESCAPE} sleep 1000"));
    let c = cancel.clone();
    let task =
        tokio::spawn(async move { Supervisor::new().run(&inv, &c, &LogSink::detached()).await });
    let pid = read_pid(&dir.path().join("escaped.pid")).await;
    assert!(alive(pid));
    cancel.cancel();
    let outcome = task.await.expect("join").expect("run");
    assert_eq!(outcome.ending, Ending::Canceled);
    assert_gone(dir.path()).await;
}

#[tokio::test]
async fn a_disowned_setsid_grandchild_is_stopped_when_the_command_exits() {
    if !have_setsid() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    // The shape of a daemonizing job: the main process returns at once.
    let inv = Invocation::new("bash", dir.path()).args([
        "-c",
        "setsid sh -c 'echo $$ > escaped.pid; sleep 1000' & disown; \
         while [ ! -s escaped.pid ]; do sleep 0.01; done; echo started",
    ]);
    let start = Instant::now();
    let outcome = Supervisor::new()
        .run(&inv, &CancellationToken::new(), &log)
        .await
        .expect("run");
    assert!(outcome.success(), "{outcome:?}");
    assert!(
        !outcome.output_abandoned,
        "the output closed with the process"
    );
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    let text = log.take();
    assert!(
        text.contains("left running outside its process group"),
        "{text}"
    );
    assert_gone(dir.path()).await;
}

#[tokio::test]
async fn an_escapee_that_also_cleared_its_environment_is_stopped_on_timeout() {
    if !have_setsid() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // No token to find it by: its parent chain leads to the main process.
    let script = "S=$(command -v setsid); P=$(command -v sleep); \
                  env -i \"$S\" /bin/sh -c \"echo \\$\\$ > escaped.pid; exec $P 1000\" & sleep 1000";
    let inv = sh(dir.path(), script).timeout(Some(Duration::from_millis(500)));
    let outcome = Supervisor::new()
        .run(&inv, &CancellationToken::new(), &LogSink::detached())
        .await
        .expect("run");
    assert_eq!(outcome.ending, Ending::TimedOut(Duration::from_millis(500)));
    assert_gone(dir.path()).await;
}

#[tokio::test]
async fn dropping_the_run_stops_a_setsid_grandchild() {
    if !have_setsid() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = sh(dir.path(), &format!("{ESCAPE} sleep 1000"));
    let task = tokio::spawn(async move {
        Supervisor::new()
            .run(&inv, &CancellationToken::new(), &LogSink::detached())
            .await
    });
    let pid = read_pid(&dir.path().join("escaped.pid")).await;
    task.abort();
    assert!(task.await.is_err(), "aborted");
    assert!(dies_within(pid, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn orphans_are_adopted_by_the_supervisor_and_reaped() {
    if !have_setsid() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // A double fork orphans the grandchild at once; it ends by itself while the job runs.
    let inv = sh(
        dir.path(),
        "(setsid sh -c 'echo $$ > escaped.pid; sleep 0.5' &); sleep 1.5",
    );
    let task = tokio::spawn(async move {
        Supervisor::new()
            .run(&inv, &CancellationToken::new(), &LogSink::detached())
            .await
    });
    let pid = read_pid(&dir.path().join("escaped.pid")).await;
    // Give the subshell a moment to exit, which orphans it.
    let me = std::process::id() as i32;
    let end = Instant::now() + Duration::from_secs(1);
    while parent_of(pid) != Some(me) && alive(pid) && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(parent_of(pid), Some(me), "the orphan was not adopted by us");
    let outcome = task.await.expect("join").expect("run");
    assert!(outcome.success(), "{outcome:?}");
    assert!(!alive(pid));
    assert!(
        !unreaped_child_of_ours(pid),
        "the orphan's zombie was not reaped"
    );
}

#[tokio::test]
async fn every_process_of_a_run_carries_the_job_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let inv = sh(dir.path(), &format!("echo ${JOB_TOKEN_VAR}")).job_token_prefix("plan/node/");
    let outcome = Supervisor::new()
        .run(&inv, &CancellationToken::new(), &log)
        .await
        .expect("run");
    assert!(outcome.success());
    let first = log.take();
    assert!(first.starts_with("plan/node/"), "{first}");
    Supervisor::new()
        .run(&inv, &CancellationToken::new(), &log)
        .await
        .expect("run");
    assert_ne!(log.take(), first, "two runs share a token");
}

#[tokio::test]
async fn the_crash_reaper_stops_processes_by_their_job_token() {
    if !have_setsid() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prefix = format!("reaper-test-{}/node/", std::process::id());
    // As a dead owner's job would have left them: in sessions of their own, not our children.
    let start = |token: &str, name: &str| {
        let status = Command::new("sh")
            .args([
                "-c",
                &format!("setsid sh -c 'echo $$ > {name}; exec sleep 1000' > /dev/null 2>&1 &"),
            ])
            .current_dir(dir.path())
            .env(JOB_TOKEN_VAR, token)
            .stdin(Stdio::null())
            .status()
            .expect("start");
        assert!(status.success());
    };
    start(&format!("{prefix}1/4242-0"), "escaped.pid");
    start("someone-else/node/1/4242-0", "other.pid");
    let escaped = read_pid(&dir.path().join("escaped.pid")).await;
    let other = read_pid(&dir.path().join("other.pid")).await;
    // The group is long gone and never worked here: only the token finds the process.
    let leftovers = [Leftover::new(999_999, "/nonexistent").token_prefix(prefix.as_str())];
    let stopped = tokio::task::spawn_blocking(move || stop_leftovers(&leftovers))
        .await
        .expect("join");
    assert_eq!(stopped, vec![999_999]);
    assert!(dies_within(escaped, Duration::from_secs(3)).await);
    let other_alive = alive(other);
    fixtures::kill(other);
    assert!(other_alive, "a process of another job was stopped");
}

#[tokio::test]
async fn force_fail_stops_a_setsid_grandchild() {
    if !have_setsid() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let o = Orchestrator::builder()
        .runner("shell", ShellRunner::new())
        .build()
        .expect("build");
    let plan = PlanSpec::new("escape")
        .isolation(Isolation::None)
        .job(JobSpec::new(
            "hangs",
            "Hangs",
            WorkSpec::shell(format!("{ESCAPE} sleep 1000")),
        ));
    let id = o.run(plan, dir.path()).await.expect("run");
    let pid = read_pid(&dir.path().join("escaped.pid")).await;
    assert!(alive(pid));
    o.force_fail(&id, "hangs").await.expect("force fail");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = o.status(&id).await.expect("status");
    let job = node(&r, "hangs");
    assert_eq!(job.status, NodeStatus::Failed);
    assert_eq!(
        job.last_attempt().and_then(|a| a.extra.failure_reason),
        Some(FailureReason::ForceFailed)
    );
    assert_gone(dir.path()).await;
}
