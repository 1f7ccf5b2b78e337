//! `AgentWorkRunner` with fake agent CLIs (`common::fakes`) when things go wrong: retries of
//! transient failures only (resuming the session, or starting afresh when it cannot be
//! resumed), permanent failures, redaction of secrets from the log, the hang guard, timeouts
//! killing the whole tree, cancel, and clear startup errors for unknown agents and missing
//! programs.
#![cfg(unix)]

mod common;

use std::time::{Duration, Instant};

use common::ctx;
use common::fakes::{agent_spec, faked, usage, Fake, CLAUDE_API_500, CLAUDE_OK};
use orchestrator_agents::agent::{AgentWorkRunner, ClaudeCode, RetryPolicy};
use orchestrator_core::runner::WorkRunner;
use orchestrator_core::state::FailureReason;
use orchestrator_testkit::fixtures::{alive, dies_within, read_pid};

#[tokio::test]
async fn a_transient_failure_is_retried_and_resumes_its_session() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(
        root.path(),
        "claude",
        &format!("if [ \"$n\" = 1 ]; then\n{CLAUDE_API_500}\nfi\n{CLAUDE_OK}"),
    );
    let runner = faked("claude", &fake);
    let c = ctx(wt.path());
    let out = runner
        .run(&agent_spec("claude", |_| {}), &c)
        .await
        .expect("retried");
    assert_eq!(fake.calls(), 2);
    assert!(fake
        .argv(2)
        .windows(2)
        .any(|w| w == ["--resume", "sess-claude-1"]));
    let u = usage(&out);
    assert_eq!(u.input_tokens, Some(165), "usage of both tries is summed");
}

#[tokio::test]
async fn a_session_that_cannot_be_resumed_is_started_afresh() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(
        root.path(),
        "claude",
        &format!(
            r#"case " $* " in *" --resume "*)
echo 'No conversation found with session ID: gone-1'
echo '{{"type":"result","subtype":"error_during_execution","duration_ms":0,"is_error":true,"num_turns":0,"session_id":"gone-1","total_cost_usd":0}}'
exit 1 ;;
esac
{CLAUDE_OK}"#
        ),
    );
    let runner = faked("claude", &fake).retry(RetryPolicy::never());
    // The worktree has the agent's session folder, but not this session.
    std::fs::create_dir_all(wt.path().join(".orchestrator/agent/sessions/claude")).expect("mkdir");
    let mut c = ctx(wt.path());
    c.session_id = Some("gone-1".into());
    let out = runner
        .run(&agent_spec("claude", |_| {}), &c)
        .await
        .expect("a fresh session works");
    assert_eq!(fake.calls(), 2);
    assert!(fake.argv(1).contains(&"gone-1".to_string()));
    assert!(!fake.argv(2).contains(&"--resume".to_string()));
    assert_eq!(out.session_id.as_deref(), Some("sess-claude-1"));
    let log = c.log.take();
    assert!(
        log.contains("the agent cannot resume session gone-1; starting a new session"),
        "{log}"
    );
}

#[tokio::test]
async fn a_permanent_failure_is_not_retried_and_keeps_the_session() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(
        root.path(),
        "codex",
        r#"echo '{"type":"thread.started","thread_id":"thread-x"}'
echo '{"type":"error","message":"model gpt-9 does not exist"}'
echo '{"type":"turn.failed","error":{"message":"model gpt-9 does not exist"}}'
exit 1"#,
    );
    let runner = faked("codex", &fake);
    let failure = runner
        .run(&agent_spec("codex", |_| {}), &ctx(wt.path()))
        .await
        .expect_err("fails");
    assert_eq!(fake.calls(), 1);
    assert_eq!(failure.reason, FailureReason::PhaseFailed);
    assert_eq!(failure.exit_code, Some(1));
    assert_eq!(failure.session_id.as_deref(), Some("thread-x"));
    assert!(
        failure.message.contains("model gpt-9 does not exist"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn transient_failures_give_up_after_the_policy() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(
        root.path(),
        "copilot",
        r#"echo '{"type":"session.background_tasks_changed","data":{},"ephemeral":true}'
echo '{"type":"session.error","data":{"errorType":"query","message":"Failed to get response from the AI model; retried 5 times (total retry wait time: 15.98 seconds) Last error: 429 Too Many Requests","statusCode":429}}'
echo '{"type":"result","timestamp":"t","sessionId":"cp-429","exitCode":1,"usage":{"premiumRequests":0,"totalApiDurationMs":0,"sessionDurationMs":590,"codeChanges":{"linesAdded":0,"linesRemoved":0,"filesModified":[]}}}'
exit 1"#,
    );
    let runner = faked("copilot", &fake);
    let failure = runner
        .run(&agent_spec("copilot", |_| {}), &ctx(wt.path()))
        .await
        .expect_err("fails");
    assert_eq!(fake.calls(), 3);
    assert!(
        failure.message.contains("429 Too Many Requests"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn secrets_are_redacted_from_the_log() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(
        root.path(),
        "claude",
        &format!(
            "echo \"key is $MY_SERVICE_API_KEY\"\necho \"token ghp_0123456789abcdefghijABCDEFGHIJ\" >&2\n\
             echo \"auth: Bearer $MY_SERVICE_API_KEY-extra\"\n{CLAUDE_OK}"
        ),
    );
    let runner = faked("claude", &fake);
    let spec = agent_spec("claude", |a| {
        a.env
            .insert("MY_SERVICE_API_KEY".into(), "s3cr3t-value-42".into());
    });
    let (c, mut events) = common::ctx_with_events(wt.path());
    runner.run(&spec, &c).await.expect("runs");
    let log = c.log.take();
    assert!(!log.contains("s3cr3t-value-42"), "{log}");
    assert!(!log.contains("ghp_0123"), "{log}");
    assert!(log.contains("key is [REDACTED]"), "{log}");
    assert!(log.contains("[stderr] token [REDACTED]"), "{log}");
    assert!(log.contains("auth: Bearer [REDACTED]"), "{log}");
    while let Ok(event) = events.try_recv() {
        let text = format!("{event:?}");
        assert!(!text.contains("s3cr3t-value-42"), "{text}");
    }
}

#[tokio::test]
async fn the_hang_guard_ends_a_cli_that_does_not_exit_after_its_result() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(root.path(), "claude", &format!("{CLAUDE_OK}\nsleep 600"));
    let runner = faked("claude", &fake);
    let started = Instant::now();
    let out = runner
        .run(&agent_spec("claude", |_| {}), &ctx(wt.path()))
        .await
        .expect("taken as completed");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.session_id.as_deref(), Some("sess-claude-1"));
    assert_eq!(fake.calls(), 1);
}

#[tokio::test]
async fn a_timeout_kills_the_whole_tree_and_is_not_retried() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let pid_file = root.path().join("grandchild.pid");
    let fake = Fake::new(
        root.path(),
        "gemini",
        &format!("sleep 600 &\necho $! > '{}'\nsleep 600", pid_file.display()),
    );
    let runner = faked("gemini", &fake);
    let spec = agent_spec("gemini", |a| a.timeout = Some(400));
    let started = Instant::now();
    let failure = runner
        .run(&spec, &ctx(wt.path()))
        .await
        .expect_err("times out");
    assert_eq!(failure.reason, FailureReason::Timeout);
    assert!(started.elapsed() < Duration::from_secs(10));
    let grandchild = read_pid(&pid_file).await;
    assert!(
        dies_within(grandchild, Duration::from_secs(5)).await,
        "grandchild {grandchild} survived"
    );
    assert!(!alive(grandchild));
    assert_eq!(fake.calls(), 1);
}

#[tokio::test]
async fn cancel_stops_the_agent() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(root.path(), "claude", "sleep 600");
    let runner = faked("claude", &fake);
    let c = ctx(wt.path());
    let cancel = c.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let failure = runner
        .run(&agent_spec("claude", |_| {}), &c)
        .await
        .expect_err("canceled");
    assert_eq!(failure.reason, FailureReason::Canceled);
    assert_eq!(fake.calls(), 1);
}

#[tokio::test]
async fn unknown_agents_and_missing_programs_are_clear_startup_errors() {
    let wt = tempfile::tempdir().expect("worktree");
    let runner = AgentWorkRunner::new();
    let failure = runner
        .run(&agent_spec("nope", |_| {}), &ctx(wt.path()))
        .await
        .expect_err("unknown");
    assert_eq!(failure.reason, FailureReason::StartupError);
    assert!(
        failure
            .message
            .contains("unknown agent `nope`; known agents: claude, codex, copilot, gemini"),
        "{}",
        failure.message
    );
    let runner =
        AgentWorkRunner::new().register("claude", ClaudeCode::new().program("no-such-claude-4711"));
    let failure = runner
        .run(&agent_spec("claude", |_| {}), &ctx(wt.path()))
        .await
        .expect_err("missing");
    assert_eq!(failure.reason, FailureReason::StartupError);
    assert!(
        failure
            .message
            .contains("`no-such-claude-4711` was not found"),
        "{}",
        failure.message
    );
}
