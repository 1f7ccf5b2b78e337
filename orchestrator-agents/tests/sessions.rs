//! Sessions (SPEC §14) with a scripted stand-in CLI: a shell script that keeps its
//! conversation in its `HOME` (the session's CLI state folder, as the real CLIs do), does
//! what the prompt says (`write FILE TEXT`, `sleep N`, `fail`), and replies with the whole
//! conversation so far. Real git repositories, checked with the `git` CLI. The real CLIs
//! are driven in `real_sessions.rs`.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use orchestrator_agents::agent::{AgentWorkRunner, GenericAgent};
use orchestrator_agents::session::{
    conformance, FileSessionRepository, MemorySessionRepository, NewSession, SessionEvent,
    Sessions, TurnStatus,
};
use orchestrator_agents::Error;
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::{git, git_try, TempRepo};

/// The stand-in CLI. Its conversation is `$HOME/conversation` (one prompt per line); it
/// resumes only a session it knows (`$HOME/session`), like a real CLI.
const FAKE_CLI: &str = r#"#!/bin/sh
prompt="$1"; session="$2"
conv="$HOME/conversation"
if [ -n "$session" ]; then
  if [ "$(cat "$HOME/session" 2>/dev/null)" != "$session" ]; then
    echo "no such session: $session" >&2; exit 3
  fi
else
  session="fake-$$"; echo "$session" > "$HOME/session"; : > "$conv"
fi
printf '%s\n' "$prompt" | head -n 1 >> "$conv"
echo "argv: $*" >&2
case "$prompt" in
  write\ *) set -- $prompt; printf '%s\n' "$3" > "$2" ;;
  sleep\ *) set -- $prompt; sleep "$2" ;;
  fail*) echo "failing as asked" >&2; exit 1 ;;
esac
history=$(tr '\n' '|' < "$conv")
printf '{"session_id":"%s"}\n' "$session"
printf '{"type":"result","result":"%s"}\n' "$history"
"#;

struct Fixture {
    repo: TempRepo,
    sessions: Sessions,
    _bin: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let repo = TempRepo::new();
    let bin = tempfile::tempdir().expect("bin dir");
    let program = bin.path().join("fake-cli");
    std::fs::write(&program, FAKE_CLI).expect("write fake cli");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let agent = GenericAgent::new(program.display().to_string())
        .arg("{prompt}")
        .optional(["{session}"]);
    let agents = AgentWorkRunner::empty()
        .register("fake", agent)
        .default_agent("fake");
    let sessions = Sessions::builder(&repo.dir)
        .git(Git2Operations::new())
        .agents(agents)
        .build()
        .expect("sessions");
    Fixture {
        repo,
        sessions,
        _bin: bin,
    }
}

fn read(path: PathBuf) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

#[tokio::test]
async fn the_repositories_pass_the_conformance_suite() {
    let cases = conformance::run_all(|| async { MemorySessionRepository::new() }).await;
    assert_eq!(cases, 7);
    let dirs = std::sync::Mutex::new(Vec::new());
    let cases = conformance::run_all(|| {
        let dir = tempfile::tempdir().expect("dir");
        let store = FileSessionRepository::new(dir.path().join("sessions"));
        dirs.lock().expect("dirs").push(dir);
        async move { store }
    })
    .await;
    assert_eq!(cases, 7);
}

#[tokio::test]
async fn turns_resume_the_conversation_and_checkpoint_the_worktree() {
    let f = fixture();
    let s = f.sessions.create(NewSession::new()).await.expect("create");
    assert!(s.dir.is_dir(), "the session has its worktree");
    let base = git(f.repo.dir.as_path(), &["rev-parse", "HEAD"]);
    let turn0 = git(
        f.repo.dir.as_path(),
        &[
            "rev-parse",
            &format!("refs/orchestrator/sessions/{}/turn-0", s.id),
        ],
    );
    assert_eq!(turn0, base, "turn-0 is the base");

    let mut events = f.sessions.subscribe();
    let t1 = f
        .sessions
        .send(&s.id, "write a.txt one")
        .await
        .expect("turn 1");
    assert_eq!(t1.turn, 1);
    assert_eq!(t1.reply.as_deref(), Some("write a.txt one|"));
    let t2 = f
        .sessions
        .send(&s.id, "write b.txt two")
        .await
        .expect("turn 2");
    assert_eq!(
        t2.reply.as_deref(),
        Some("write a.txt one|write b.txt two|"),
        "the second turn resumed the first one's conversation"
    );
    let ref2 = format!("refs/orchestrator/sessions/{}/turn-2", s.id);
    assert_eq!(
        git(f.repo.dir.as_path(), &["rev-parse", &ref2]),
        t2.checkpoint.clone().expect("checkpoint")
    );
    assert_eq!(
        git(f.repo.dir.as_path(), &["show", &format!("{ref2}:a.txt")]),
        "one"
    );
    assert_eq!(
        git(f.repo.dir.as_path(), &["show", &format!("{ref2}:b.txt")]),
        "two"
    );
    assert_eq!(
        git(f.repo.dir.as_path(), &["rev-parse", "HEAD"]),
        base,
        "no branch moved, nothing in the user's checkout"
    );
    assert_eq!(git(f.repo.dir.as_path(), &["status", "--porcelain"]), "");

    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(matches!(
        seen.first(),
        Some(SessionEvent::TurnStarted { turn: 1, .. })
    ));
    assert!(seen
        .iter()
        .any(|e| matches!(e, SessionEvent::Text { text, .. } if text.contains("two"))));
    assert!(seen
        .iter()
        .any(|e| matches!(e, SessionEvent::Output { line, .. } if line.contains("argv"))));
    assert!(matches!(
        seen.last(),
        Some(SessionEvent::TurnEnded {
            turn: 2,
            status: TurnStatus::Succeeded,
            ..
        })
    ));

    // A new host process (a new Sessions over the same store) goes on with the session.
    let again = fixture_over(&f);
    let t3 = again
        .send(&s.id[..6], "write c.txt three")
        .await
        .expect("turn 3 by prefix");
    assert_eq!(
        t3.reply.as_deref(),
        Some("write a.txt one|write b.txt two|write c.txt three|")
    );
}

fn fixture_over(f: &Fixture) -> Sessions {
    let program = f._bin.path().join("fake-cli");
    let agent = GenericAgent::new(program.display().to_string())
        .arg("{prompt}")
        .optional(["{session}"]);
    Sessions::builder(f.repo.dir.as_path())
        .git(Git2Operations::new())
        .agents(
            AgentWorkRunner::empty()
                .register("fake", agent)
                .default_agent("fake"),
        )
        .build()
        .expect("sessions")
}

#[tokio::test]
async fn revert_restores_the_files_and_the_conversation_of_a_turn() {
    let f = fixture();
    let s = f.sessions.create(NewSession::new()).await.expect("create");
    f.sessions
        .send(&s.id, "write a.txt one")
        .await
        .expect("turn 1");
    f.sessions
        .send(&s.id, "write a.txt changed")
        .await
        .expect("turn 2");
    f.sessions
        .send(&s.id, "write b.txt new")
        .await
        .expect("turn 3");
    let reverted = f.sessions.revert(&s.id, 1).await.expect("revert");
    assert_eq!(reverted.turns.len(), 1);
    assert_eq!(read(s.dir.join("a.txt")).as_deref(), Some("one"));
    assert!(!s.dir.join("b.txt").exists(), "turn 3's file is gone");
    let turn1 = git(
        f.repo.dir.as_path(),
        &[
            "rev-parse",
            &format!("refs/orchestrator/sessions/{}/turn-1", s.id),
        ],
    );
    assert_eq!(git(&s.dir, &["rev-parse", "HEAD"]), turn1);
    assert_eq!(
        git(&s.dir, &["status", "--porcelain"]),
        "",
        "the worktree is exactly turn 1"
    );
    let turn3 = format!("refs/orchestrator/sessions/{}/turn-3", s.id);
    assert_eq!(
        git_try(
            f.repo.dir.as_path(),
            &["rev-parse", "--verify", "-q", &turn3]
        ),
        None,
        "the dropped turns' refs are deleted"
    );
    let t = f
        .sessions
        .send(&s.id, "write c.txt after")
        .await
        .expect("turn after revert");
    assert_eq!(t.turn, 2);
    assert_eq!(
        t.reply.as_deref(),
        Some("write a.txt one|write c.txt after|"),
        "the conversation goes on from turn 1"
    );

    let e = f.sessions.revert(&s.id, 7).await.expect_err("no turn 7");
    assert!(matches!(e, Error::NoSuchTurn { turn: 7, .. }), "{e}");
    assert!(
        e.to_string().contains("0, 1, 2"),
        "names the turns there are: {e}"
    );
}

#[tokio::test]
async fn fork_starts_a_session_at_a_turn_that_diverges_on_its_own() {
    let f = fixture();
    let s = f.sessions.create(NewSession::new()).await.expect("create");
    f.sessions
        .send(&s.id, "write a.txt one")
        .await
        .expect("turn 1");
    f.sessions
        .send(&s.id, "write a.txt two")
        .await
        .expect("turn 2");
    let fork = f.sessions.fork(&s.id, Some(1)).await.expect("fork");
    assert_ne!(fork.id, s.id);
    assert_eq!(fork.forked_from, Some((s.id.clone(), 1)));
    assert_eq!(read(fork.dir.join("a.txt")).as_deref(), Some("one"));
    let turn1 = git(
        f.repo.dir.as_path(),
        &[
            "rev-parse",
            &format!("refs/orchestrator/sessions/{}/turn-1", s.id),
        ],
    );
    assert_eq!(
        git(&fork.dir, &["rev-parse", "HEAD"]),
        turn1,
        "the fork starts at turn 1"
    );
    let t = f
        .sessions
        .send(&fork.id, "write f.txt forked")
        .await
        .expect("fork turn");
    assert_eq!(t.turn, 2);
    assert_eq!(
        t.reply.as_deref(),
        Some("write a.txt one|write f.txt forked|")
    );
    assert_eq!(
        read(s.dir.join("a.txt")).as_deref(),
        Some("two"),
        "the source is untouched"
    );
    assert!(!s.dir.join("f.txt").exists());
    let t3 = f
        .sessions
        .send(&s.id, "write g.txt source")
        .await
        .expect("source turn 3");
    assert_eq!(
        t3.reply.as_deref(),
        Some("write a.txt one|write a.txt two|write g.txt source|")
    );
    assert!(
        !fork.dir.join("g.txt").exists(),
        "the two diverge independently"
    );
}

#[tokio::test]
async fn a_failed_turn_leaves_the_session_at_its_last_checkpoint() {
    let f = fixture();
    let s = f.sessions.create(NewSession::new()).await.expect("create");
    f.sessions
        .send(&s.id, "write a.txt one")
        .await
        .expect("turn 1");
    std::fs::write(s.dir.join("stray.txt"), "half-done").expect("stray");
    let e = f
        .sessions
        .send(&s.id, "fail now")
        .await
        .expect_err("turn 2 fails");
    assert!(matches!(e, Error::TurnFailed { turn: 2, .. }), "{e}");
    assert!(!s.dir.join("stray.txt").exists(), "back at the checkpoint");
    let record = f.sessions.get(&s.id).await.expect("get");
    assert_eq!(record.turns[1].status, TurnStatus::Failed);
    let t = f
        .sessions
        .send(&s.id, "write b.txt two")
        .await
        .expect("turn 3");
    assert_eq!(
        t.reply.as_deref(),
        Some("write a.txt one|write b.txt two|"),
        "the failed turn is not in the conversation"
    );
}

#[tokio::test]
async fn steering_interrupts_the_turn_and_resumes_it_with_the_message() {
    let f = fixture();
    let s = f.sessions.create(NewSession::new()).await.expect("create");
    f.sessions
        .send(&s.id, "write a.txt one")
        .await
        .expect("turn 1");
    let e = f
        .sessions
        .steer(&s.id, "too early")
        .await
        .expect_err("not running");
    assert!(matches!(e, Error::NotRunning { .. }), "{e}");
    let sessions = f.sessions.clone();
    let id = s.id.clone();
    let turn = tokio::spawn(async move { sessions.send(&id, "sleep 30").await });
    let mut steered = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if f.sessions.steer(&s.id, "please hurry").await.is_ok() {
            steered = true;
            break;
        }
    }
    assert!(steered, "the running turn takes the message");
    let t = tokio::time::timeout(Duration::from_secs(20), turn)
        .await
        .expect("the steered turn ends well before the sleep would")
        .expect("join")
        .expect("turn");
    let reply = t.reply.unwrap_or_default();
    assert!(
        reply.starts_with("write a.txt one|sleep 30|The user interrupted you"),
        "{reply}"
    );
    let record = f.sessions.get(&s.id).await.expect("get");
    assert_eq!(record.turns[1].steered, ["please hurry"]);
    let log = std::fs::read_to_string(
        f.repo
            .dir
            .as_path()
            .join(".orchestrator/sessions")
            .join(&s.id)
            .join("turn-2.log"),
    )
    .expect("turn log");
    assert!(log.contains("steered: please hurry"), "{log}");
}

#[tokio::test]
async fn a_second_turn_at_once_is_refused_with_the_first_ones_pid() {
    let f = fixture();
    let s = f.sessions.create(NewSession::new()).await.expect("create");
    let sessions = f.sessions.clone();
    let id = s.id.clone();
    let first = tokio::spawn(async move { sessions.send(&id, "sleep 2").await });
    let mut refused = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Err(e) = f.sessions.send(&s.id, "write x.txt no").await {
            refused = Some(e);
            break;
        }
    }
    let e = refused.expect("the second send is refused");
    assert!(
        matches!(e, Error::SessionBusy { pid: Some(p), .. } if p == std::process::id()),
        "{e}"
    );
    first.await.expect("join").expect("the first turn");
}

#[tokio::test]
async fn bad_input_names_what_was_given_and_what_exists() {
    let f = fixture();
    let e = f.sessions.send("nope", "hi").await.expect_err("unknown");
    assert!(
        e.to_string()
            .contains("unknown session `nope`; there are no sessions"),
        "{e}"
    );
    let s = f.sessions.create(NewSession::new()).await.expect("create");
    let e = f.sessions.send("nope", "hi").await.expect_err("unknown");
    assert!(e.to_string().contains(&s.id), "lists the sessions: {e}");
    let e = f
        .sessions
        .create(NewSession::new().agent("nobody"))
        .await
        .expect_err("agent");
    assert!(
        e.to_string()
            .contains("unknown agent `nobody`; known agents: fake"),
        "{e}"
    );
    let e = f
        .sessions
        .create(NewSession::new().base("no-such-rev"))
        .await
        .expect_err("base");
    assert!(e.to_string().contains("no-such-rev"), "{e}");
    f.sessions
        .send(&s.id, "write a.txt one")
        .await
        .expect("turn 1");
    let tip = f
        .sessions
        .close(&s.id, Some("session-result"))
        .await
        .expect("close");
    assert_eq!(
        git(f.repo.dir.as_path(), &["show", "session-result:a.txt"]),
        "one"
    );
    assert_eq!(
        tip,
        Some(git(f.repo.dir.as_path(), &["rev-parse", "session-result"]))
    );
    assert!(!s.dir.exists(), "closing removes the worktree");
    let e = f.sessions.send(&s.id, "more").await.expect_err("closed");
    assert!(matches!(e, Error::SessionClosed { .. }), "{e}");
    let e = f
        .sessions
        .fork(&s.id, Some(1))
        .await
        .expect_err("worktree gone");
    assert!(matches!(e, Error::WorktreeGone { .. }), "{e}");
}
