//! Sessions (SPEC §14) with the real agent CLIs — Claude Code, Codex, Copilot CLI, Gemini
//! CLI — against the testkit's scripted model server: a second turn resumes the first one's
//! conversation (the server sees turn 1's prompt in turn 2's request), `revert 1` restores
//! turn 1's files (checked with `git`) and the next request carries only the conversation up
//! to turn 1, `fork 1` starts a session at turn 1 that diverges on its own, model and effort
//! switched between turns reach the CLI's argv, and `steer` reaches the model before a long
//! turn ends.
//!
//! A test whose CLI is missing says so on stderr and passes (`scripts/install-agent-clis.sh`
//! installs them). Everything is offline: the CLIs only talk to the server on 127.0.0.1.
#![cfg(unix)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::clis::runner_for;
use common::installed;
use orchestrator_agents::agent::{AgentWorkRunner, Permission, PermissionPolicy, ToolKind};
use orchestrator_agents::session::{NewSession, SessionEvent, SessionRecord, Sessions};
use orchestrator_core::plan::Effort;
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::{git, TempRepo};
use orchestrator_testkit::{ModelServer, Script, Turn};

/// The real CLIs are heavy (Node.js, a few hundred MB each): one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The models a session starts with and switches to, per CLI.
fn models(cli: &str) -> (&'static str, &'static str) {
    match cli {
        "claude" => ("claude-sonnet-4-5", "claude-opus-4-1"),
        "gemini" => ("gemini-2.5-pro", "gemini-2.5-flash"),
        _ => ("gpt-5.5", "gpt-5-mini"),
    }
}

/// Sessions of `repo` with `cli` talking to `server`.
fn sessions(cli: &str, program: &Path, repo: &TempRepo, server: &ModelServer) -> Sessions {
    let agents = AgentWorkRunner::empty()
        .register_arc(cli, runner_for(cli, program, server))
        .default_agent(cli);
    Sessions::builder(&repo.dir)
        .git(Git2Operations::new())
        .agents(agents)
        .build()
        .expect("sessions")
}

/// The bodies of the model requests made since `from`, as text.
fn bodies_since(server: &ModelServer, from: usize) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .skip(from)
        .map(|r| r.to_json()["body"].to_string())
        .collect()
}

/// Whether some request since `from` that carries `prompt` also carries `text`.
fn request_with(server: &ModelServer, from: usize, prompt: &str, text: &str) -> bool {
    bodies_since(server, from)
        .iter()
        .any(|b| b.contains(prompt) && b.contains(text))
}

/// The log of turn `n` of `session`.
fn turn_log(repo: &TempRepo, session: &SessionRecord, n: u32) -> String {
    let file = repo
        .dir
        .join(".orchestrator/sessions")
        .join(&session.id)
        .join(format!("turn-{n}.log"));
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn conversation_script() -> Script {
    Script::new()
        .on_prompt(
            Turn::when("TURN-ONE")
                .write_file("a.txt", "one\n")
                .final_text("wrote one"),
        )
        .on_prompt(
            Turn::when("TURN-TWO")
                .write_file("a.txt", "two\n")
                .final_text("wrote two"),
        )
        .on_prompt(Turn::when("TURN-THREE").final_text("three done"))
        .on_prompt(
            Turn::when("FORKED")
                .write_file("f.txt", "forked\n")
                .final_text("forked done"),
        )
}

/// Turns, revert, fork and the model/effort switch for `cli`.
async fn conversation(cli: &str) {
    let Some(program) = installed(cli) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let server = ModelServer::start(conversation_script())
        .await
        .expect("server");
    let repo = TempRepo::new();
    let s = sessions(cli, &program, &repo, &server);
    let (first_model, second_model) = models(cli);
    let session = s
        .create(NewSession::new().model(first_model))
        .await
        .expect("create");

    let mut events = s.subscribe();
    let t1 = s
        .send(&session.id, "TURN-ONE: create a.txt")
        .await
        .unwrap_or_else(|e| panic!("{cli} turn 1: {e}"));
    assert_eq!(
        std::fs::read_to_string(session.dir.join("a.txt"))
            .ok()
            .as_deref(),
        Some("one\n")
    );
    let turn1 = git(
        &repo.dir,
        &[
            "rev-parse",
            &format!("refs/orchestrator/sessions/{}/turn-1", session.id),
        ],
    );
    assert_eq!(Some(&turn1), t1.checkpoint.as_ref());
    // The turn's typed events: the write as a tool call and its result, the reply text.
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push(e);
    }
    let call = seen.iter().any(
        |e| matches!(e, SessionEvent::ToolCall { input, .. } if input.to_string().contains("a.txt")),
    );
    assert!(call, "{cli}: the write is a ToolCall event: {seen:?}");
    let result = seen.iter().any(|e| {
        matches!(
            e,
            SessionEvent::ToolResult {
                is_error: false,
                ..
            }
        )
    });
    assert!(result, "{cli}: its result is a ToolResult event");
    let text = seen
        .iter()
        .any(|e| matches!(e, SessionEvent::Text { text, .. } if text.contains("wrote one")));
    assert!(text, "{cli}: the reply is a Text event");
    assert_eq!(git(&repo.dir, &["show", &format!("{turn1}:a.txt")]), "one");

    let before = server.requests().len();
    s.send(&session.id, "TURN-TWO: change a.txt")
        .await
        .unwrap_or_else(|e| panic!("{cli} turn 2: {e}"));
    assert!(
        request_with(&server, before, "TURN-TWO", "TURN-ONE"),
        "{cli}: the second turn's request carries the first turn's messages"
    );
    assert!(
        turn_log(&repo, &session, 2).contains(first_model),
        "{cli}: the model reached argv"
    );

    // Model and effort switched between turns reach the CLI's argv.
    s.set_model(&session.id, Some(second_model.into()), Some(Effort::High))
        .await
        .expect("set model");
    s.send(&session.id, "TURN-THREE: nothing to do")
        .await
        .unwrap_or_else(|e| panic!("{cli} turn 3: {e}"));
    let log = turn_log(&repo, &session, 3);
    let start = log
        .lines()
        .find(|l| l.contains("starting agent"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        start.contains(second_model),
        "{cli}: switched model in argv: {start}"
    );
    match cli {
        "claude" => assert!(start.contains("--effort high"), "{start}"),
        "codex" => assert!(start.contains("model_reasoning_effort=high"), "{start}"),
        "copilot" => assert!(start.contains("--reasoning-effort high"), "{start}"),
        // Gemini CLI has no effort option: the log says so instead of pretending.
        _ => assert!(log.contains("has no option for effort"), "{log}"),
    }

    // revert 1: turn 1's files exactly, and the conversation up to turn 1 only.
    s.revert(&session.id, 1).await.expect("revert");
    assert_eq!(git(&session.dir, &["rev-parse", "HEAD"]), turn1);
    assert_eq!(git(&session.dir, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(session.dir.join("a.txt"))
            .ok()
            .as_deref(),
        Some("one\n")
    );
    let before = server.requests().len();
    let after = s
        .send(&session.id, "TURN-THREE: after the revert")
        .await
        .unwrap_or_else(|e| panic!("{cli} turn after revert: {e}"));
    assert_eq!(
        after.turn, 2,
        "{cli}: the turn after a revert to 1 is turn 2"
    );
    let bodies = bodies_since(&server, before);
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("after the revert") && b.contains("TURN-ONE")),
        "{cli}: the conversation goes on from turn 1"
    );
    assert!(
        !bodies.iter().any(|b| b.contains("TURN-TWO")),
        "{cli}: the reverted turn is not in the conversation"
    );

    // fork 1: a second session at turn 1 that diverges on its own.
    let fork = s.fork(&session.id, Some(1)).await.expect("fork");
    assert_eq!(git(&fork.dir, &["rev-parse", "HEAD"]), turn1);
    let before = server.requests().len();
    s.send(&fork.id, "FORKED: write f.txt")
        .await
        .unwrap_or_else(|e| panic!("{cli} fork turn: {e}"));
    assert!(
        request_with(&server, before, "FORKED", "TURN-ONE"),
        "{cli}: the fork carries the conversation up to turn 1"
    );
    assert!(
        fork.dir.join("f.txt").is_file(),
        "{cli}: the fork's turn wrote in the fork's worktree"
    );
    assert!(
        !session.dir.join("f.txt").exists(),
        "{cli}: the source is untouched"
    );
}

/// `steer` during a long turn: the steering text reaches the model before the turn ends.
async fn steering(cli: &str) {
    let Some(program) = installed(cli) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().await;
    // The steering turn first: a CLI may send it in one message with the interrupted prompt
    // (Gemini CLI, whose interrupted call was never saved).
    let script = Script::new()
        .on_prompt(Turn::when("STEERED-NOW").final_text("took the steer"))
        .on_prompt(
            Turn::when("LONG-TURN")
                .shell("timeout 60 tail -f /dev/null; echo waited")
                .final_text("slept"),
        );
    let server = ModelServer::start(script).await.expect("server");
    let repo = TempRepo::new();
    let s = sessions(cli, &program, &repo, &server);
    let session = s.create(NewSession::new()).await.expect("create");
    let started = Instant::now();
    let turn = {
        let s = s.clone();
        let id = session.id.clone();
        tokio::spawn(async move { s.send(&id, "LONG-TURN: run the long command").await })
    };
    // Steer once the agent is running its long command (its tool call was answered).
    let deadline = Instant::now() + Duration::from_secs(90);
    while !bodies_since(&server, 0)
        .iter()
        .any(|b| b.contains("LONG-TURN"))
        || server.requests().is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "{cli}: the long turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    if let Err(e) = s.steer(&session.id, "STEERED-NOW: stop and report").await {
        panic!("{cli}: steer: {e}\n{}", turn_log(&repo, &session, 1));
    }
    // The steering text reaches the model while the turn still runs.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !bodies_since(&server, 0)
        .iter()
        .any(|b| b.contains("STEERED-NOW"))
    {
        assert!(
            Instant::now() < deadline,
            "{cli}: the steering text never reached the model"
        );
        assert!(
            !turn.is_finished(),
            "{cli}: the turn ended before the steering text reached the model"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let report = tokio::time::timeout(Duration::from_secs(120), turn)
        .await
        .expect("the steered turn ends")
        .expect("join")
        .unwrap_or_else(|e| panic!("{cli} steered turn: {e}"));
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{cli}: the turn ended before its long command would have ({:?}):\n{}",
        started.elapsed(),
        turn_log(&repo, &session, 1)
    );
    let record = s.get(&session.id).await.expect("get");
    assert_eq!(record.turns[0].steered, ["STEERED-NOW: stop and report"]);
    // Claude Code takes the message live, in the same process; the others are stopped and
    // their session resumed with it.
    let log = turn_log(&repo, &session, 1);
    let starts = log.matches("starting agent").count();
    if cli == "claude" {
        assert!(log.contains("steered live: STEERED-NOW"), "{log}");
        assert_eq!(starts, 1, "{cli}: no restart: {log}");
    } else {
        assert!(log.contains("steered: STEERED-NOW"), "{log}");
        assert_eq!(starts, 2, "{cli}: stopped and resumed: {log}");
    }
    assert_eq!(report.turn, 1);
}

#[tokio::test]
async fn claude_sessions_resume_revert_fork_and_switch_models() {
    conversation("claude").await;
}

#[tokio::test]
async fn codex_sessions_resume_revert_fork_and_switch_models() {
    conversation("codex").await;
}

#[tokio::test]
async fn copilot_sessions_resume_revert_fork_and_switch_models() {
    conversation("copilot").await;
}

#[tokio::test]
async fn gemini_sessions_resume_revert_fork_and_switch_models() {
    conversation("gemini").await;
}

#[tokio::test]
async fn claude_sessions_are_steered_while_they_work() {
    steering("claude").await;
}

#[tokio::test]
async fn codex_sessions_are_steered_while_they_work() {
    steering("codex").await;
}

#[tokio::test]
async fn copilot_sessions_are_steered_while_they_work() {
    steering("copilot").await;
}

#[tokio::test]
async fn gemini_sessions_are_steered_while_they_work() {
    steering("gemini").await;
}

/// A `read-only` session: the agent's write is denied (removed from its tools or refused)
/// and the turn's checkpoint is the base, the worktree unchanged.
async fn read_only(cli: &str) {
    let Some(program) = installed(cli) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let script = Script::new().on_prompt(
        Turn::when("WRITE-IT")
            .write_file("denied.txt", "no\n")
            .final_text("tried"),
    );
    let server = ModelServer::start(script).await.expect("server");
    let repo = TempRepo::new();
    let s = sessions(cli, &program, &repo, &server);
    let session = s
        .create(NewSession::new().permissions(PermissionPolicy::ReadOnly))
        .await
        .expect("create");
    let mut events = s.subscribe();
    let turn = s
        .send(&session.id, "WRITE-IT: create denied.txt")
        .await
        .unwrap_or_else(|e| panic!("{cli}: read-only turn: {e}"));
    assert!(
        !session.dir.join("denied.txt").exists(),
        "{cli}: the write was denied"
    );
    assert_eq!(git(&session.dir, &["status", "--porcelain"]), "", "{cli}");
    assert_eq!(
        turn.checkpoint, session.base,
        "{cli}: nothing to checkpoint"
    );
    // Copilot CLI refuses the call (the agent sees a failed tool result) and Codex the patch
    // (it says so in its log only: its JSON has no item for a rejected patch); Claude Code and
    // Gemini CLI take the write tools out of the agent's list instead.
    let (mut refused, mut rejected) = (false, false);
    while let Ok(e) = events.try_recv() {
        match e {
            SessionEvent::ToolResult { is_error: true, .. } => refused = true,
            SessionEvent::Output { line, .. } => rejected |= line.contains("patch rejected"),
            _ => {}
        }
    }
    match cli {
        "copilot" => assert!(
            refused,
            "{cli}: the denial reached the agent as a failed tool result"
        ),
        "codex" => assert!(rejected, "{cli}: the patch was rejected"),
        _ => {}
    }
}

#[tokio::test]
async fn read_only_sessions_leave_the_worktree_unchanged() {
    for cli in common::clis::CLIS {
        read_only(cli).await;
    }
}

/// An `ask` policy with Claude Code (`--permission-prompt-tool stdio`): each tool request
/// reaches the host as a `PermissionRequested` event, nothing runs before the answer, and the
/// answer is honored — an allowed write happens, a denied one does not and the agent is told
/// the reason.
#[tokio::test]
async fn claude_ask_policy_puts_tool_requests_to_the_host() {
    let cli = "claude";
    let Some(program) = installed(cli) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let script = Script::new()
        .on_prompt(
            Turn::when("ALLOW-IT")
                .write_file("yes.txt", "yes\n")
                .final_text("wrote yes"),
        )
        .on_prompt(
            Turn::when("DENY-IT")
                .write_file("no.txt", "no\n")
                .final_text("tried no"),
        );
    let server = ModelServer::start(script).await.expect("server");
    let repo = TempRepo::new();
    let s = sessions(cli, &program, &repo, &server);
    let session = s
        .create(NewSession::new().permissions(PermissionPolicy::Ask))
        .await
        .expect("create");
    let cases = [
        (
            "ALLOW-IT: write yes.txt",
            Permission::Allow,
            "yes.txt",
            true,
        ),
        (
            "DENY-IT: write no.txt",
            Permission::deny("not now, says the host"),
            "no.txt",
            false,
        ),
    ];
    for (prompt, decision, file, written) in cases {
        let mut events = s.subscribe();
        let turn = {
            let (s, id) = (s.clone(), session.id.clone());
            tokio::spawn(async move { s.send(&id, prompt).await })
        };
        let request = loop {
            match tokio::time::timeout(Duration::from_secs(90), events.recv()).await {
                Ok(Ok(SessionEvent::PermissionRequested { request, .. })) => break request,
                Ok(Ok(_)) => continue,
                other => panic!("{prompt}: no permission request reached the host: {other:?}"),
            }
        };
        assert_eq!(request.tool, "Write");
        assert_eq!(request.kind, Some(ToolKind::Write));
        assert!(request.target.ends_with(file), "{request:?}");
        assert!(
            !session.dir.join(file).exists(),
            "nothing runs before the host answers"
        );
        s.answer_permission(&session.id, &request.id, decision)
            .expect("answer");
        tokio::time::timeout(Duration::from_secs(90), turn)
            .await
            .expect("the turn ends after the answer")
            .expect("join")
            .unwrap_or_else(|e| panic!("{prompt}: {e}"));
        assert_eq!(session.dir.join(file).exists(), written, "{prompt}");
    }
    assert!(
        bodies_since(&server, 0)
            .iter()
            .any(|b| b.contains("not now, says the host")),
        "the agent saw the host's reason as the tool's result"
    );
    let e = s
        .answer_permission(&session.id, "no-such-request", Permission::Allow)
        .expect_err("unknown request");
    assert!(
        e.to_string()
            .contains("no open permission request `no-such-request`"),
        "{e}"
    );
}

/// Codex, Copilot CLI and Gemini CLI cannot put a tool request to the host: under `ask` the
/// write is denied, and the turn's log says so once.
#[tokio::test]
async fn ask_policy_is_denied_where_the_cli_cannot_ask_the_host() {
    for cli in ["codex", "copilot", "gemini"] {
        let Some(program) = installed(cli) else {
            continue;
        };
        let _one = ONE_AT_A_TIME.lock().await;
        let script = Script::new().on_prompt(
            Turn::when("ASK-IT")
                .write_file("asked.txt", "x\n")
                .final_text("tried"),
        );
        let server = ModelServer::start(script).await.expect("server");
        let repo = TempRepo::new();
        let s = sessions(cli, &program, &repo, &server);
        let session = s
            .create(NewSession::new().permissions(PermissionPolicy::Ask))
            .await
            .expect("create");
        // A CLI may end such a turn with an error of its own; the worktree is what counts.
        let _ = s.send(&session.id, "ASK-IT: write asked.txt").await;
        assert!(!session.dir.join("asked.txt").exists(), "{cli}: denied");
        let log = turn_log(&repo, &session, 1);
        assert!(
            log.contains("cannot ask the host about tool requests"),
            "{cli}: not supported by {cli}, and the log says so: {log}"
        );
    }
}
