//! The supervisor with real processes: streaming, process-tree kill on timeout, cancel and
//! drop, leftovers, daemons holding the output open, exit codes and signals.
#![cfg(unix)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::stdout_lines;
use orchestrator_agents::{Ending, Error, Invocation, Outcome, Supervisor, SupervisorOptions};
use orchestrator_core::runner::{LogSink, LogStream};
use orchestrator_core::OrchestratorEvent;
use orchestrator_testkit::fixtures::{
    self, alive, dies_within, on_path, read_pid, unreaped_child_of_ours,
};
use tokio_util::sync::CancellationToken;

fn sh(dir: &std::path::Path, script: &str) -> Invocation {
    Invocation::new("sh", dir).args(["-c", script])
}

async fn run(sup: &Supervisor, inv: &Invocation, log: &LogSink) -> Outcome {
    sup.run(inv, &CancellationToken::new(), log)
        .await
        .expect("started")
}

#[tokio::test]
async fn output_lines_arrive_in_order_with_stderr_marked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let script = "i=1; while [ $i -le 300 ]; do echo out$i; i=$((i+1)); done; \
                  echo err1 >&2; echo err2 >&2; printf 'no newline at end'";
    let outcome = run(&Supervisor::new(), &sh(dir.path(), script), &log).await;
    assert!(outcome.success(), "{outcome:?}");
    let text = log.take();
    let out = stdout_lines(&text);
    let mut expected: Vec<String> = (1..=300).map(|i| format!("out{i}")).collect();
    expected.push("no newline at end".into());
    assert_eq!(out, expected.iter().map(String::as_str).collect::<Vec<_>>());
    let err: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("[stderr] "))
        .collect();
    assert_eq!(err, ["[stderr] err1", "[stderr] err2"]);
    assert_eq!(outcome.stderr_tail, ["err1", "err2"]);
    assert!(!outcome.output_abandoned);
}

#[tokio::test]
async fn lines_are_published_while_the_process_still_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, mut events) = common::ctx_with_events(dir.path());
    let go = dir.path().join("go");
    let script = "echo first; echo warn >&2; while [ ! -f go ]; do sleep 0.01; done; echo second";
    let inv = sh(dir.path(), script);
    let log = ctx.log.clone();
    let task = tokio::spawn(async move {
        Supervisor::new()
            .run(&inv, &CancellationToken::new(), &log)
            .await
    });

    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .expect("a line arrives before the process ends")
            .expect("bus open");
        if let OrchestratorEvent::Log { stream, line, .. } = event {
            seen.push((stream, line));
        }
    }
    seen.sort_by_key(|(s, _)| *s == LogStream::Stderr);
    assert_eq!(
        seen,
        [
            (LogStream::Stdout, "first".to_string()),
            (LogStream::Stderr, "warn".to_string())
        ]
    );
    assert!(!task.is_finished(), "the process is still waiting for `go`");
    std::fs::write(&go, "").expect("write go");
    let outcome = task.await.expect("join").expect("started");
    assert!(outcome.success());
    assert!(ctx.log.take().ends_with("second\n"));
}

#[tokio::test]
async fn long_lines_are_cut_and_invalid_utf8_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let sup = Supervisor::with_options(SupervisorOptions::default().max_line_bytes(100));
    let script = "head -c 200000 /dev/zero | tr '\\000' x; echo; printf '\\377ok\\n'";
    let outcome = run(&sup, &sh(dir.path(), script), &log).await;
    assert!(outcome.success());
    let text = log.take();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        lines[0],
        format!("{} … [199900 more bytes cut]", "x".repeat(100))
    );
    assert_eq!(lines[1], "\u{fffd}ok");
}

#[tokio::test]
async fn timeout_kills_the_whole_process_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let script =
        "echo $$ > leader.pid; sleep 100 & echo $! > grandchild.pid; echo started; sleep 100";
    let inv = sh(dir.path(), script).timeout(Some(Duration::from_millis(500)));
    let start = Instant::now();
    let outcome = run(&Supervisor::new(), &inv, &log).await;
    let took = start.elapsed();
    assert_eq!(outcome.ending, Ending::TimedOut(Duration::from_millis(500)));
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(
        took < Duration::from_millis(2000),
        "SIGTERM ends it well within the grace: {took:?}"
    );
    let grandchild = read_pid(&dir.path().join("grandchild.pid")).await;
    let leader = read_pid(&dir.path().join("leader.pid")).await;
    assert!(!alive(grandchild), "grandchild {grandchild} survived");
    assert!(!alive(leader));
    assert!(!unreaped_child_of_ours(leader), "the child was reaped");
    let text = log.take();
    assert!(text.contains("started\n"));
    assert!(
        text.contains("timed out after 500 ms: stopping the process group"),
        "{text}"
    );
}

#[tokio::test]
async fn processes_ignoring_sigterm_get_sigkill_after_the_grace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let sup = Supervisor::with_options(
        SupervisorOptions::default().kill_grace(Duration::from_millis(300)),
    );
    let script = "trap '' TERM; sleep 100 & echo $! > grandchild.pid; wait";
    let inv = sh(dir.path(), script).timeout(Some(Duration::from_millis(300)));
    let start = Instant::now();
    let outcome = run(&sup, &inv, &log).await;
    let took = start.elapsed();
    assert_eq!(outcome.ending, Ending::TimedOut(Duration::from_millis(300)));
    assert!(
        took >= Duration::from_millis(600),
        "waited the grace: {took:?}"
    );
    assert!(took < Duration::from_millis(2500), "{took:?}");
    let grandchild = read_pid(&dir.path().join("grandchild.pid")).await;
    // SIGKILL was sent to the group; the kernel may take a moment to finish the process off
    // on a loaded machine.
    assert!(
        dies_within(grandchild, Duration::from_secs(2)).await,
        "the grandchild ignoring SIGTERM got SIGKILL"
    );
}

#[tokio::test]
async fn cancel_kills_the_tree_promptly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let cancel = CancellationToken::new();
    let inv = sh(
        dir.path(),
        "sleep 100 & echo $! > grandchild.pid; sleep 100",
    );
    let (c, l) = (cancel.clone(), log.clone());
    let task = tokio::spawn(async move { Supervisor::new().run(&inv, &c, &l).await });
    let grandchild = read_pid(&dir.path().join("grandchild.pid")).await;
    assert!(alive(grandchild));
    let start = Instant::now();
    cancel.cancel();
    let outcome = task.await.expect("join").expect("started");
    assert!(
        start.elapsed() < Duration::from_millis(1500),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(outcome.ending, Ending::Canceled);
    assert!(!alive(grandchild));
    assert!(log.take().contains("canceled: stopping the process group"));
}

#[tokio::test]
async fn dropping_the_run_kills_the_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inv = sh(
        dir.path(),
        "sleep 100 & echo $! > grandchild.pid; sleep 100",
    );
    let task = tokio::spawn(async move {
        Supervisor::new()
            .run(&inv, &CancellationToken::new(), &LogSink::detached())
            .await
    });
    let grandchild = read_pid(&dir.path().join("grandchild.pid")).await;
    task.abort();
    assert!(task.await.is_err(), "aborted");
    assert!(dies_within(grandchild, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn leftovers_in_the_group_are_stopped_when_the_command_exits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let start = Instant::now();
    let inv = sh(
        dir.path(),
        "sleep 100 & echo $! > grandchild.pid; echo done",
    );
    let outcome = run(&Supervisor::new(), &inv, &log).await;
    assert!(
        start.elapsed() < Duration::from_millis(1500),
        "{:?}",
        start.elapsed()
    );
    assert!(outcome.success());
    assert!(!outcome.output_abandoned);
    let grandchild = read_pid(&dir.path().join("grandchild.pid")).await;
    assert!(!alive(grandchild));
    let text = log.take();
    assert!(text.contains("done\n"), "{text}");
    assert!(text.contains("stopping processes the command left running"));
}

#[tokio::test]
async fn a_daemon_holding_the_output_open_does_not_hang_the_run() {
    if !on_path("setsid") {
        println!("skipped: `setsid` is not installed, so no process can leave the group");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    // Leftovers kept: stopped, the daemon would close its output (tests/escaped.rs).
    let sup = Supervisor::with_options(
        SupervisorOptions::default()
            .drain_timeout(Duration::from_millis(300))
            .kill_leftovers(false),
    );
    // The daemon starts its own session (leaving the group) and keeps stdout/stderr open.
    let script = "setsid sh -c 'echo $$ > daemon.pid; exec sleep 30' & \
                  while [ ! -s daemon.pid ]; do sleep 0.01; done; echo main-done";
    let start = Instant::now();
    let outcome = run(&sup, &sh(dir.path(), script), &log).await;
    let took = start.elapsed();
    let daemon = read_pid(&dir.path().join("daemon.pid")).await;
    let daemon_was_alive = alive(daemon);
    fixtures::kill(daemon);
    assert!(outcome.success(), "{outcome:?}");
    assert!(outcome.output_abandoned);
    assert!(
        daemon_was_alive,
        "leftovers were kept, so it was not stopped"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    let text = log.take();
    assert!(text.contains("main-done\n"));
    assert!(
        text.contains("stopped reading output 300 ms after the command ended"),
        "{text}"
    );
}

#[tokio::test]
async fn leftovers_may_be_kept_and_are_then_only_detached_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let sup = Supervisor::with_options(
        SupervisorOptions::default()
            .kill_leftovers(false)
            .drain_timeout(Duration::from_millis(200)),
    );
    let inv = sh(dir.path(), "sleep 30 & echo $! > grandchild.pid");
    let outcome = run(&sup, &inv, &log).await;
    let grandchild = read_pid(&dir.path().join("grandchild.pid")).await;
    let was_alive = alive(grandchild);
    fixtures::kill(grandchild);
    assert!(outcome.success() && outcome.output_abandoned);
    assert!(was_alive);
}

#[tokio::test]
async fn exit_codes_and_signals_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let sup = Supervisor::new();
    let cases = [
        ("true", Ending::Exited(0)),
        ("exit 3", Ending::Exited(3)),
        ("exit 255", Ending::Exited(255)),
        ("kill -9 $$", Ending::Signaled(9)),
        ("kill -TERM $$", Ending::Signaled(15)),
    ];
    for (script, ending) in cases {
        let outcome = run(&sup, &sh(dir.path(), script), &log).await;
        assert_eq!(outcome.ending, ending, "{script}");
    }
    assert_eq!(
        Ending::Signaled(9).to_string(),
        "killed by signal 9 (SIGKILL)"
    );
}

#[tokio::test]
async fn observers_see_every_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let inv = sh(dir.path(), "echo a; echo b >&2").observe(move |stream, line| {
        s.lock().expect("lock").push((stream, line.to_owned()));
    });
    run(&Supervisor::new(), &inv, &LogSink::detached()).await;
    let mut seen = seen.lock().expect("lock").clone();
    seen.sort_by_key(|(s, _)| *s == LogStream::Stderr);
    assert_eq!(
        seen,
        [
            (LogStream::Stdout, "a".to_string()),
            (LogStream::Stderr, "b".to_string())
        ]
    );
}

#[tokio::test]
async fn missing_program_or_directory_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = LogSink::detached();
    let cancel = CancellationToken::new();
    let err = Supervisor::new()
        .run(
            &Invocation::new("no-such-program-4711", dir.path()),
            &cancel,
            &log,
        )
        .await
        .expect_err("missing");
    assert!(
        matches!(&err, Error::ProgramNotFound { program } if program == "no-such-program-4711")
    );
    assert!(
        err.to_string()
            .contains("`no-such-program-4711` was not found"),
        "{err}"
    );
    assert!(!err.is_retryable());

    let gone = dir.path().join("gone");
    let err = Supervisor::new()
        .run(&Invocation::new("true", &gone), &cancel, &log)
        .await
        .expect_err("no dir");
    assert!(matches!(err, Error::CwdMissing { .. }), "{err}");

    let not_exec = dir.path().join("plain.txt");
    std::fs::write(&not_exec, "echo hi").expect("write");
    let err = Supervisor::new()
        .run(&Invocation::new(&not_exec, dir.path()), &cancel, &log)
        .await
        .expect_err("not executable");
    assert!(matches!(err, Error::Spawn { .. }), "{err}");
}
