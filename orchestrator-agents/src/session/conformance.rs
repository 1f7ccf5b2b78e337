//! The conformance suite every [`SessionRepository`] passes: run it from a test of an
//! implementation with a factory of empty repositories.
//!
//! ```no_run
//! # async fn run() {
//! use orchestrator_agents::session::{conformance, MemorySessionRepository};
//! let cases = conformance::run_all(|| async { MemorySessionRepository::new() }).await;
//! assert!(cases > 0);
//! # }
//! ```

use std::future::Future;
use std::path::PathBuf;

use super::record::{SessionRecord, TurnRecord, TurnStatus};
use super::repository::SessionRepository;
use crate::error::Error;

/// Runs every case, each on a fresh repository from `factory`; panics with the case's name on
/// the first broken rule. Returns how many cases ran.
pub async fn run_all<R, F, Fut>(factory: F) -> usize
where
    R: SessionRepository,
    F: Fn() -> Fut,
    Fut: Future<Output = R>,
{
    round_trip(&factory().await).await;
    create_is_once(&factory().await).await;
    save_needs_a_session(&factory().await).await;
    list_is_oldest_first(&factory().await).await;
    delete_removes(&factory().await).await;
    lock_is_exclusive(&factory().await).await;
    ids_are_checked(&factory().await).await;
    7
}

fn record(id: &str, created_at: u64) -> SessionRecord {
    let mut r = SessionRecord::new(id, "claude", PathBuf::from("/repo"), PathBuf::from("/wt"));
    r.created_at = created_at;
    r
}

fn turn(n: u32) -> TurnRecord {
    TurnRecord {
        turn: n,
        prompt: format!("prompt {n}"),
        steered: vec!["faster".into()],
        status: TurnStatus::Succeeded,
        reply: Some(format!("reply {n}")),
        error: None,
        checkpoint: Some("0123456789abcdef0123456789abcdef01234567".into()),
        cli_session: Some("cli-1".into()),
        model: Some("m".into()),
        effort: None,
        usage: Some(serde_json::json!({"inputTokens": 10})),
        started_at: 1,
        ended_at: Some(2),
    }
}

async fn round_trip(repo: &impl SessionRepository) {
    let mut r = record("s-1", 5);
    r.turns.push(turn(1));
    repo.create(&r).await.expect("round_trip: create");
    let loaded = repo.load("s-1").await.expect("round_trip: load");
    assert_eq!(
        loaded.as_ref(),
        Some(&r),
        "round_trip: the record reads back as written"
    );
    r.turns.push(turn(2));
    r.closed = true;
    repo.save(&r).await.expect("round_trip: save");
    let loaded = repo.load("s-1").await.expect("round_trip: load again");
    assert_eq!(
        loaded,
        Some(r),
        "round_trip: a saved record replaces the old one"
    );
    let missing = repo.load("s-404").await.expect("round_trip: load missing");
    assert_eq!(missing, None, "round_trip: a missing session is None");
}

async fn create_is_once(repo: &impl SessionRepository) {
    repo.create(&record("s-1", 1))
        .await
        .expect("create_is_once: first");
    let again = repo.create(&record("s-1", 2)).await;
    assert!(
        matches!(again, Err(Error::SessionExists { .. })),
        "create_is_once: a second create of one id is refused, got {again:?}"
    );
    let kept = repo.load("s-1").await.expect("create_is_once: load");
    assert_eq!(
        kept.map(|r| r.created_at),
        Some(1),
        "create_is_once: the first stays"
    );
}

async fn save_needs_a_session(repo: &impl SessionRepository) {
    let saved = repo.save(&record("s-9", 1)).await;
    assert!(
        matches!(saved, Err(Error::UnknownSession { .. })),
        "save_needs_a_session: saving an unknown session is refused, got {saved:?}"
    );
    let loaded = repo.load("s-9").await.expect("save_needs_a_session: load");
    assert_eq!(loaded, None, "save_needs_a_session: nothing was created");
}

async fn list_is_oldest_first(repo: &impl SessionRepository) {
    for (id, at) in [("s-b", 3), ("s-a", 1), ("s-c", 2)] {
        repo.create(&record(id, at)).await.expect("list: create");
    }
    let ids: Vec<String> = repo
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["s-a", "s-c", "s-b"], "list_is_oldest_first");
}

async fn delete_removes(repo: &impl SessionRepository) {
    repo.create(&record("s-1", 1))
        .await
        .expect("delete: create");
    repo.delete("s-1").await.expect("delete");
    assert_eq!(
        repo.load("s-1").await.expect("delete: load"),
        None,
        "delete_removes"
    );
    repo.delete("s-1")
        .await
        .expect("delete_removes: deleting a missing one is fine");
    repo.create(&record("s-1", 2))
        .await
        .expect("delete_removes: the id is free again");
}

async fn lock_is_exclusive(repo: &impl SessionRepository) {
    let missing = repo.lock("s-1").await;
    assert!(
        matches!(missing, Err(Error::UnknownSession { .. })),
        "lock_is_exclusive: an unknown session cannot be locked, got {missing:?}"
    );
    repo.create(&record("s-1", 1)).await.expect("lock: create");
    repo.create(&record("s-2", 1)).await.expect("lock: create");
    let held = repo
        .lock("s-1")
        .await
        .expect("lock_is_exclusive: first lock");
    let second = repo.lock("s-1").await;
    match second {
        Err(Error::SessionBusy { pid, .. }) => assert_eq!(
            pid,
            Some(std::process::id()),
            "lock_is_exclusive: the refusal names the holder's pid"
        ),
        other => panic!("lock_is_exclusive: a second lock is refused, got {other:?}"),
    }
    let other = repo.lock("s-2").await;
    assert!(other.is_ok(), "lock_is_exclusive: locks are per session");
    drop(held);
    let again = repo.lock("s-1").await;
    assert!(
        again.is_ok(),
        "lock_is_exclusive: a dropped lock is free, got {again:?}"
    );
}

async fn ids_are_checked(repo: &impl SessionRepository) {
    for bad in ["", "../x", "a/b", "-x"] {
        let created = repo.create(&record(bad, 1)).await;
        assert!(
            matches!(created, Err(Error::InvalidSessionId { .. })),
            "ids_are_checked: `{bad}` is refused, got {created:?}"
        );
    }
}
