//! Conformance suite for [`PlanRepository`]: every store runs [`run_all`] in its own tests.
//!
//! ```
//! use orchestrator_core::conformance::repository::run_all;
//! use orchestrator_core::InMemoryPlanRepository;
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! run_all(|| async { InMemoryPlanRepository::new() }).await;
//! # });
//! ```
//!
//! Each case gets a fresh, empty store from the factory and panics with a message naming the
//! case when the store misbehaves (this is test support code: a failed check is a test
//! failure). The cases are listed once, in [`run_all`], so a backend cannot skip one.

use std::future::Future;
use std::sync::Arc;

use crate::ids::{NodeId, PlanId};
use crate::plan::WorkSpec;
use crate::repository::{AttemptSpecs, LogKey, LogQuery, PlanRepository, StoreError};
use crate::state::{NodeStatus, Phase, PlanStatus, StateChange};

mod fixtures;

use fixtures::{diamond_run, node, record, record_at, start_node, succeed_node, T0};

/// Runs every case against stores made by `factory` (one fresh, empty store per case).
///
/// Panics, naming the case, on the first check that fails.
pub async fn run_all<F, Fut, R>(factory: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = R>,
    R: PlanRepository,
{
    create_then_load_round_trips(factory().await).await;
    create_twice_is_already_exists(factory().await).await;
    a_staged_plan_is_seen_once_created_and_never_if_discarded(factory().await).await;
    missing_plan_is_not_found(factory().await).await;
    append_then_load_equals_replay(factory().await).await;
    an_owned_list_is_appended_and_a_refused_one_comes_back_whole(factory().await).await;
    many_small_appends(factory().await).await;
    empty_append_is_a_no_op(factory().await).await;
    rejected_change_leaves_state_untouched(factory().await).await;
    appends_from_concurrent_tasks_all_land(factory().await).await;
    list_is_newest_first(factory().await).await;
    delete_removes_everything(factory().await).await;
    acquire_is_exclusive_until_dropped(factory().await).await;
    attempt_specs_round_trip(factory().await).await;
    logs_by_phase_attempt_and_tail(factory().await).await;
}

// ---------------------------------------------------------------------------------------------
// Case helpers

fn ok<T>(case: &str, what: &str, r: Result<T, StoreError>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("[{case}] {what} failed: {e}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Cases

async fn create_then_load_round_trips<R: PlanRepository>(store: R) {
    const CASE: &str = "create_then_load_round_trips";
    let plan = record("round trip");
    ok(CASE, "create", store.create(&plan).await);
    let loaded = ok(CASE, "load", store.load(&plan.state.id).await);
    assert_eq!(
        loaded, plan,
        "[{CASE}] loaded record differs from the created one"
    );
    // A second load reads the same.
    let again = ok(CASE, "second load", store.load(&plan.state.id).await);
    assert_eq!(again, plan, "[{CASE}] second load differs");
}

async fn a_staged_plan_is_seen_once_created_and_never_if_discarded<R: PlanRepository>(store: R) {
    const CASE: &str = "a_staged_plan_is_seen_once_created_and_never_if_discarded";
    let plan = record("staged");
    let staged = ok(CASE, "stage", store.stage(&plan).await);
    let listed = ok(CASE, "list while staged", store.list().await);
    assert!(
        listed.plans.is_empty() && listed.damaged.is_empty(),
        "[{CASE}] a staged plan is listed before it is created"
    );
    assert!(
        matches!(
            store.load(&plan.state.id).await,
            Err(StoreError::NotFound(_))
        ),
        "[{CASE}] a staged plan loads before it is created"
    );
    ok(
        CASE,
        "create staged",
        store.create_staged(&plan, staged).await,
    );
    assert_eq!(
        ok(CASE, "load", store.load(&plan.state.id).await),
        plan,
        "[{CASE}] the created plan differs from the staged one"
    );
    // Staged again under a taken id: refused, and nothing of it is left.
    let staged = store.stage(&plan).await;
    let created = match staged {
        Ok(staged) => store.create_staged(&plan, staged).await,
        Err(e) => Err(e),
    };
    assert!(
        matches!(created, Err(StoreError::AlreadyExists(_))),
        "[{CASE}] staging a taken id answered {created:?}"
    );
    // Discarded: never seen.
    let other = record("discarded");
    let staged = ok(CASE, "stage another", store.stage(&other).await);
    store.discard(staged).await;
    assert!(
        matches!(
            store.load(&other.state.id).await,
            Err(StoreError::NotFound(_))
        ),
        "[{CASE}] a discarded plan loads"
    );
    let listed = ok(CASE, "list", store.list().await);
    let ids: Vec<_> = listed.plans.iter().map(|p| p.plan_id.clone()).collect();
    assert_eq!(ids, vec![plan.state.id.clone()], "[{CASE}] listed");
    assert!(listed.damaged.is_empty(), "[{CASE}] damaged plans");
}

async fn create_twice_is_already_exists<R: PlanRepository>(store: R) {
    const CASE: &str = "create_twice_is_already_exists";
    let plan = record("twice");
    ok(CASE, "create", store.create(&plan).await);
    ok(
        CASE,
        "append",
        store
            .append(&plan.state.id, &[StateChange::Paused { at: T0 + 1 }])
            .await,
    );
    let mut other = record("other plan, same id");
    other.state.id = plan.state.id.clone();
    match store.create(&other).await {
        Err(StoreError::AlreadyExists(id)) => assert_eq!(id, plan.state.id, "[{CASE}] wrong id"),
        r => panic!("[{CASE}] second create returned {r:?}, expected AlreadyExists"),
    }
    // The first plan is untouched, its journal included.
    let loaded = ok(CASE, "load", store.load(&plan.state.id).await);
    assert_eq!(loaded.spec.name, "twice", "[{CASE}] plan was overwritten");
    assert!(loaded.state.paused, "[{CASE}] journal was lost");
}

fn expect_not_found<T: std::fmt::Debug>(
    case: &str,
    what: &str,
    id: &PlanId,
    r: Result<T, StoreError>,
) {
    match r {
        Err(StoreError::NotFound(got)) => assert_eq!(&got, id, "[{case}] {what}: wrong id"),
        r => panic!("[{case}] {what} of a missing plan returned {r:?}, expected NotFound"),
    }
}

async fn missing_plan_is_not_found<R: PlanRepository>(store: R) {
    const CASE: &str = "missing_plan_is_not_found";
    // One plan exists, so the store is not merely empty.
    ok(CASE, "create", store.create(&record("present")).await);
    let id = PlanId::random();
    let node = NodeId::random();
    expect_not_found(CASE, "load", &id, store.load(&id).await);
    expect_not_found(
        CASE,
        "append",
        &id,
        store.append(&id, &[StateChange::Paused { at: T0 }]).await,
    );
    expect_not_found(CASE, "delete", &id, store.delete(&id).await);
    expect_not_found(CASE, "acquire", &id, store.acquire(&id).await);
    expect_not_found(
        CASE,
        "save_attempt_specs",
        &id,
        store
            .save_attempt_specs(&id, &node, 1, &AttemptSpecs::default())
            .await,
    );
    expect_not_found(
        CASE,
        "load_attempt_specs",
        &id,
        store.load_attempt_specs(&id, &node, 1).await,
    );
    let key = LogKey {
        plan: id.clone(),
        node: node.clone(),
        phase: Phase::Work,
        attempt: 1,
    };
    expect_not_found(CASE, "append_log", &id, store.append_log(&key, "x\n").await);
    expect_not_found(
        CASE,
        "read_log",
        &id,
        store.read_log(&id, &node, LogQuery::new()).await,
    );
    let listing = ok(CASE, "list", store.list().await);
    assert_eq!(
        listing.plans.len(),
        1,
        "[{CASE}] list changed by failed calls"
    );
}

async fn append_then_load_equals_replay<R: PlanRepository>(store: R) {
    const CASE: &str = "append_then_load_equals_replay";
    let plan = record("replay");
    let id = plan.state.id.clone();
    append_diamond(CASE, &store, &plan, false).await;
    let loaded = ok(CASE, "final load", store.load(&id).await);
    assert_eq!(
        loaded.status(),
        PlanStatus::Succeeded,
        "[{CASE}] final status"
    );
    assert_eq!(
        loaded.state.nodes[1].attempts.len(),
        2,
        "[{CASE}] attempts of b"
    );
    assert!(
        matches!(&loaded.spec.jobs[1].work, WorkSpec::Agent(a)
            if a.instructions.as_deref() == Some("Write b, and create the folder first.")),
        "[{CASE}] replaced specs were not kept"
    );
    let summary = ok(CASE, "list", store.list().await);
    assert_eq!(summary.plans.len(), 1, "[{CASE}] list length");
    assert_eq!(
        summary.plans[0].status,
        PlanStatus::Succeeded,
        "[{CASE}] list shows a stale status"
    );
}

/// Creates `plan` and appends the batches of [`diamond_run`] to it, with `append` or (when
/// `owned`) `append_owned`, checking the loaded plan after each; returns the plan they make.
async fn append_diamond<R: PlanRepository>(
    case: &str,
    store: &R,
    plan: &crate::state::PlanRecord,
    owned: bool,
) -> crate::state::PlanRecord {
    let id = &plan.state.id;
    ok(case, "create", store.create(plan).await);
    let mut expected = plan.clone();
    for (i, batch) in diamond_run().into_iter().enumerate() {
        for change in &batch {
            if let Err(e) = expected.apply(change) {
                panic!("[{case}] fixture batch {i} does not apply: {e}");
            }
        }
        let result = match owned {
            true => store.append_owned(id, batch).await.0,
            false => store.append(id, &batch).await,
        };
        ok(case, "append", result);
        let loaded = ok(case, "load", store.load(id).await);
        assert_eq!(loaded, expected, "[{case}] state after batch {i} differs");
    }
    expected
}

async fn an_owned_list_is_appended_and_a_refused_one_comes_back_whole<R: PlanRepository>(store: R) {
    const CASE: &str = "an_owned_list_is_appended_and_a_refused_one_comes_back_whole";
    let plan = record("owned");
    let id = plan.state.id.clone();
    let expected = append_diamond(CASE, &store, &plan, true).await;
    // Refused, by the plan or for want of one: the list comes back as it was, to retry.
    let bad = vec![node(T0 + 50, 99, NodeStatus::Ready)];
    let (result, back) = store.append_owned(&id, bad.clone()).await;
    assert!(
        matches!(result, Err(StoreError::Rejected { .. })),
        "[{CASE}] appending {bad:?} returned {result:?}, expected Rejected"
    );
    assert_eq!(back, bad, "[{CASE}] a rejected list comes back whole");
    let (result, back) = store.append_owned(&PlanId::random(), bad.clone()).await;
    assert!(
        matches!(result, Err(StoreError::NotFound(_))),
        "[{CASE}] appending to a missing plan returned {result:?}, expected NotFound"
    );
    assert_eq!(
        back, bad,
        "[{CASE}] a list for a missing plan comes back whole"
    );
    let loaded = ok(CASE, "final load", store.load(&id).await);
    assert_eq!(loaded, expected, "[{CASE}] a refused list changed the plan");
}

async fn many_small_appends<R: PlanRepository>(store: R) {
    const CASE: &str = "many_small_appends";
    let plan = record("many");
    let id = plan.state.id.clone();
    ok(CASE, "create", store.create(&plan).await);
    ok(
        CASE,
        "append",
        store.append(&id, &start_node(0, T0, None)).await,
    );
    let mut expected = ok(CASE, "load", store.load(&id).await);
    for i in 0..600u64 {
        let change = if i % 3 == 0 {
            StateChange::Session {
                node: 0,
                session_id: format!("session {i}"),
            }
        } else {
            StateChange::Metrics {
                node: 0,
                metrics: serde_json::json!({ "i": i, "text": "x".repeat((i % 50) as usize) }),
            }
        };
        if let Err(e) = expected.apply(&change) {
            panic!("[{CASE}] fixture change {i} does not apply: {e}");
        }
        ok(CASE, "append", store.append(&id, &[change]).await);
        if i % 97 == 0 {
            let loaded = ok(CASE, "load", store.load(&id).await);
            assert_eq!(loaded, expected, "[{CASE}] state after change {i} differs");
        }
    }
    let loaded = ok(CASE, "final load", store.load(&id).await);
    assert_eq!(loaded, expected, "[{CASE}] final state differs");
}

async fn empty_append_is_a_no_op<R: PlanRepository>(store: R) {
    const CASE: &str = "empty_append_is_a_no_op";
    let plan = record("empty");
    ok(CASE, "create", store.create(&plan).await);
    ok(CASE, "append", store.append(&plan.state.id, &[]).await);
    let loaded = ok(CASE, "load", store.load(&plan.state.id).await);
    assert_eq!(loaded, plan, "[{CASE}] an empty append changed the plan");
}

async fn rejected_change_leaves_state_untouched<R: PlanRepository>(store: R) {
    const CASE: &str = "rejected_change_leaves_state_untouched";
    let plan = record("rejected");
    let id = plan.state.id.clone();
    ok(CASE, "create", store.create(&plan).await);
    let batch = start_node(0, T0, None);
    ok(CASE, "append", store.append(&id, &batch).await);
    let before = ok(CASE, "load", store.load(&id).await);
    // pending -> running skips two states; node 99 does not exist.
    for bad in [
        node(T0 + 5, 1, NodeStatus::Running),
        node(T0 + 5, 99, NodeStatus::Ready),
    ] {
        match store.append(&id, std::slice::from_ref(&bad)).await {
            Err(StoreError::Rejected { plan, .. }) => assert_eq!(plan, id, "[{CASE}] wrong id"),
            r => panic!("[{CASE}] appending {bad:?} returned {r:?}, expected Rejected"),
        }
        let after = ok(CASE, "load", store.load(&id).await);
        assert_eq!(after, before, "[{CASE}] a rejected change altered the plan");
    }
    // The store still accepts valid changes afterwards.
    let more = succeed_node(0, T0 + 10, Phase::MergeFi);
    ok(
        CASE,
        "append after rejection",
        store.append(&id, &more).await,
    );
    let mut expected = before;
    for c in &more {
        if let Err(e) = expected.apply(c) {
            panic!("[{CASE}] fixture does not apply: {e}");
        }
    }
    let after = ok(CASE, "load", store.load(&id).await);
    assert_eq!(after, expected, "[{CASE}] state after recovery differs");
}

async fn appends_from_concurrent_tasks_all_land<R: PlanRepository>(store: R) {
    const CASE: &str = "appends_from_concurrent_tasks_all_land";
    let store = Arc::new(store);
    let plan = record("concurrent");
    let id = plan.state.id.clone();
    ok(CASE, "create", store.create(&plan).await);
    let other = record("concurrent, other plan");
    ok(CASE, "create other", store.create(&other).await);
    let mut tasks = Vec::new();
    for task in 0..8usize {
        let store = store.clone();
        let (id, other) = (id.clone(), other.state.id.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..25usize {
                let change = StateChange::Session {
                    node: task % 5,
                    session_id: format!("t{task}-{i}"),
                };
                let target = if i % 2 == 0 { &id } else { &other };
                store.append(target, &[change]).await?;
            }
            Ok::<(), StoreError>(())
        }));
    }
    for t in tasks {
        match t.await {
            Ok(r) => ok(CASE, "concurrent append", r),
            Err(e) => panic!("[{CASE}] task panicked: {e}"),
        }
    }
    let loaded = ok(CASE, "load", store.load(&id).await);
    // Every node's last session is the last one some task wrote to it on this plan.
    for n in 0..5usize {
        let sid = loaded.state.nodes[n]
            .extra
            .session_id
            .clone()
            .unwrap_or_default();
        let ok_end = (0..8)
            .filter(|t| t % 5 == n)
            .any(|t| sid == format!("t{t}-24"));
        assert!(ok_end, "[{CASE}] node {n} ends with session {sid:?}");
    }
    let other_loaded = ok(CASE, "load other", store.load(&other.state.id).await);
    for n in 0..5usize {
        let sid = other_loaded.state.nodes[n]
            .extra
            .session_id
            .clone()
            .unwrap_or_default();
        let ok_end = (0..8)
            .filter(|t| t % 5 == n)
            .any(|t| sid == format!("t{t}-23"));
        assert!(
            ok_end,
            "[{CASE}] other plan: node {n} ends with session {sid:?}"
        );
    }
}

async fn list_is_newest_first<R: PlanRepository>(store: R) {
    const CASE: &str = "list_is_newest_first";
    let empty = ok(CASE, "list empty", store.list().await);
    assert!(empty.plans.is_empty(), "[{CASE}] a new store lists plans");
    assert!(
        empty.damaged.is_empty(),
        "[{CASE}] a new store lists damage"
    );
    // Created out of time order; three share a creation time (creation order breaks the tie).
    let old = record_at("old", T0);
    let newest = record_at("newest", T0 + 5000);
    let tie1 = record_at("tie 1", T0 + 1000);
    let tie2 = record_at("tie 2", T0 + 1000);
    let tie3 = record_at("tie 3", T0 + 1000);
    for r in [&old, &newest, &tie1, &tie2, &tie3] {
        ok(CASE, "create", store.create(r).await);
    }
    ok(
        CASE,
        "append",
        store
            .append(
                &tie2.state.id,
                &[StateChange::PlanStarted {
                    at: T0 + 2000,
                    base_commit: None,
                    target_branch: None,
                    snapshot_branch: None,
                }],
            )
            .await,
    );
    let listing = ok(CASE, "list", store.list().await);
    let names: Vec<&str> = listing.plans.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["newest", "tie 3", "tie 2", "tie 1", "old"],
        "[{CASE}] wrong order"
    );
    assert!(listing.damaged.is_empty(), "[{CASE}] damage reported");
    let tie2_summary = &listing.plans[2];
    assert_eq!(tie2_summary.plan_id, tie2.state.id, "[{CASE}] id");
    assert_eq!(tie2_summary.created_at, T0 + 1000, "[{CASE}] createdAt");
    assert_eq!(tie2_summary.status, PlanStatus::Running, "[{CASE}] status");
    assert_eq!(
        listing.plans[0].status,
        PlanStatus::Pending,
        "[{CASE}] status"
    );
}

async fn delete_removes_everything<R: PlanRepository>(store: R) {
    const CASE: &str = "delete_removes_everything";
    let keep = record("keep");
    let gone = record("gone");
    let node = gone.state.nodes[0].id.clone();
    ok(CASE, "create", store.create(&keep).await);
    ok(CASE, "create", store.create(&gone).await);
    let id = gone.state.id.clone();
    ok(
        CASE,
        "append",
        store.append(&id, &start_node(0, T0, None)).await,
    );
    let specs = AttemptSpecs {
        work: Some(WorkSpec::shell("make")),
        ..AttemptSpecs::default()
    };
    ok(
        CASE,
        "save specs",
        store.save_attempt_specs(&id, &node, 1, &specs).await,
    );
    let key = LogKey {
        plan: id.clone(),
        node: node.clone(),
        phase: Phase::Work,
        attempt: 1,
    };
    ok(
        CASE,
        "append log",
        store.append_log(&key, "building\n").await,
    );

    ok(CASE, "delete", store.delete(&id).await);
    expect_not_found(CASE, "load after delete", &id, store.load(&id).await);
    expect_not_found(CASE, "second delete", &id, store.delete(&id).await);
    let listing = ok(CASE, "list", store.list().await);
    let ids: Vec<&PlanId> = listing.plans.iter().map(|p| &p.plan_id).collect();
    assert_eq!(ids, [&keep.state.id], "[{CASE}] list after delete");

    // The id can be used again, and nothing of the old plan shows through.
    ok(CASE, "re-create", store.create(&gone).await);
    let loaded = ok(CASE, "load re-created", store.load(&id).await);
    assert_eq!(
        loaded, gone,
        "[{CASE}] old journal leaked into the new plan"
    );
    let log = ok(
        CASE,
        "read log",
        store.read_log(&id, &node, LogQuery::new()).await,
    );
    assert_eq!(log, "", "[{CASE}] old logs leaked into the new plan");
    let specs = ok(
        CASE,
        "load specs",
        store.load_attempt_specs(&id, &node, 1).await,
    );
    assert_eq!(specs, AttemptSpecs::default(), "[{CASE}] old specs leaked");
    // The other plan is untouched.
    let kept = ok(CASE, "load kept", store.load(&keep.state.id).await);
    assert_eq!(kept, keep, "[{CASE}] delete touched another plan");
}

async fn acquire_is_exclusive_until_dropped<R: PlanRepository>(store: R) {
    const CASE: &str = "acquire_is_exclusive_until_dropped";
    let a = record("a");
    let b = record("b");
    ok(CASE, "create", store.create(&a).await);
    ok(CASE, "create", store.create(&b).await);
    let lease = ok(CASE, "acquire", store.acquire(&a.state.id).await);
    match store.acquire(&a.state.id).await {
        Err(StoreError::Locked { plan, owner }) => {
            assert_eq!(plan, a.state.id, "[{CASE}] wrong plan");
            assert!(!owner.trim().is_empty(), "[{CASE}] Locked names no owner");
        }
        r => panic!("[{CASE}] second acquire returned {r:?}, expected Locked"),
    }
    // Other plans are independent, and the owner can still write.
    let lease_b = ok(CASE, "acquire other plan", store.acquire(&b.state.id).await);
    ok(
        CASE,
        "append while leased",
        store
            .append(&a.state.id, &[StateChange::Paused { at: T0 + 1 }])
            .await,
    );
    drop(lease);
    let again = ok(CASE, "acquire after drop", store.acquire(&a.state.id).await);
    drop(again);
    drop(lease_b);
    let _third = ok(
        CASE,
        "acquire after second drop",
        store.acquire(&a.state.id).await,
    );
}

async fn attempt_specs_round_trip<R: PlanRepository>(store: R) {
    const CASE: &str = "attempt_specs_round_trip";
    let plan = record("specs");
    let id = plan.state.id.clone();
    let node = plan.state.nodes[1].id.clone();
    let other = plan.state.nodes[2].id.clone();
    ok(CASE, "create", store.create(&plan).await);
    let first = AttemptSpecs {
        work: Some(WorkSpec::agent(
            "# Task\n\nWrite `b`.\n- keep tests green\n",
        )),
        prechecks: Some(WorkSpec::shell("test -f a")),
        postchecks: Some(WorkSpec::process("cargo", ["test", "--quiet"])),
    };
    let second = AttemptSpecs {
        work: Some(WorkSpec::shell("make b")),
        ..AttemptSpecs::default()
    };
    ok(
        CASE,
        "save 1",
        store.save_attempt_specs(&id, &node, 1, &first).await,
    );
    ok(
        CASE,
        "save 2",
        store.save_attempt_specs(&id, &node, 2, &first).await,
    );
    // Saving again replaces the attempt's specs entirely.
    ok(
        CASE,
        "re-save 2",
        store.save_attempt_specs(&id, &node, 2, &second).await,
    );
    let got1 = ok(
        CASE,
        "load 1",
        store.load_attempt_specs(&id, &node, 1).await,
    );
    assert_eq!(got1, first, "[{CASE}] attempt 1");
    let got2 = ok(
        CASE,
        "load 2",
        store.load_attempt_specs(&id, &node, 2).await,
    );
    assert_eq!(got2, second, "[{CASE}] attempt 2 after re-save");
    let none = ok(
        CASE,
        "load 3",
        store.load_attempt_specs(&id, &node, 3).await,
    );
    assert_eq!(none, AttemptSpecs::default(), "[{CASE}] unsaved attempt");
    let none = ok(
        CASE,
        "other node",
        store.load_attempt_specs(&id, &other, 1).await,
    );
    assert_eq!(none, AttemptSpecs::default(), "[{CASE}] other node");
    let empty = AttemptSpecs::default();
    ok(
        CASE,
        "save empty",
        store.save_attempt_specs(&id, &other, 1, &empty).await,
    );
    let got = ok(
        CASE,
        "load empty",
        store.load_attempt_specs(&id, &other, 1).await,
    );
    assert_eq!(got, empty, "[{CASE}] empty specs");
}

async fn logs_by_phase_attempt_and_tail<R: PlanRepository>(store: R) {
    const CASE: &str = "logs_by_phase_attempt_and_tail";
    let plan = record("logs");
    let id = plan.state.id.clone();
    let node = plan.state.nodes[0].id.clone();
    let quiet = plan.state.nodes[1].id.clone();
    ok(CASE, "create", store.create(&plan).await);
    let key = |phase, attempt| LogKey {
        plan: id.clone(),
        node: node.clone(),
        phase,
        attempt,
    };
    // Appended out of pipeline order; reads come back in pipeline order.
    for (phase, attempt, text) in [
        (Phase::Work, 1, "w1 one\n"),
        (Phase::MergeFi, 1, "fi1\n"),
        (Phase::Work, 1, "w1 two\n"),
        (Phase::Work, 2, "w2 a\nw2 b\n"),
        (Phase::Setup, 2, "s2\n"),
        (Phase::Work, 2, "w2 c\n"),
        (Phase::Postchecks, 2, "p2 ünïcode ✓\n"),
    ] {
        ok(
            CASE,
            "append_log",
            store.append_log(&key(phase, attempt), text).await,
        );
    }
    let read = |q: LogQuery| store.read_log(&id, &node, q);
    let all = ok(CASE, "read latest", read(LogQuery::new()).await);
    assert_eq!(
        all, "s2\nw2 a\nw2 b\nw2 c\np2 ünïcode ✓\n",
        "[{CASE}] latest attempt"
    );
    let first = ok(
        CASE,
        "read attempt 1",
        read(LogQuery::new().attempt(1)).await,
    );
    assert_eq!(first, "fi1\nw1 one\nw1 two\n", "[{CASE}] attempt 1");
    let work = ok(
        CASE,
        "read work",
        read(LogQuery::new().phase(Phase::Work)).await,
    );
    assert_eq!(
        work, "w2 a\nw2 b\nw2 c\n",
        "[{CASE}] work of latest attempt"
    );
    let work1 = read(LogQuery::new().phase(Phase::Work).attempt(1)).await;
    assert_eq!(
        ok(CASE, "read", work1),
        "w1 one\nw1 two\n",
        "[{CASE}] work 1"
    );
    let tail = ok(CASE, "tail", read(LogQuery::new().tail(2)).await);
    assert_eq!(tail, "w2 c\np2 ünïcode ✓\n", "[{CASE}] tail 2");
    let tail = read(LogQuery::new().phase(Phase::Work).tail(1)).await;
    assert_eq!(ok(CASE, "tail", tail), "w2 c\n", "[{CASE}] tail 1 of work");
    let tail = ok(CASE, "tail 0", read(LogQuery::new().tail(0)).await);
    assert_eq!(tail, "", "[{CASE}] tail 0");
    let tail = ok(CASE, "tail 99", read(LogQuery::new().tail(99)).await);
    assert_eq!(tail, all, "[{CASE}] tail beyond the start");
    let none = ok(
        CASE,
        "missing phase",
        read(LogQuery::new().phase(Phase::MergeRi)).await,
    );
    assert_eq!(none, "", "[{CASE}] a phase with no log");
    let none = ok(
        CASE,
        "missing attempt",
        read(LogQuery::new().attempt(7)).await,
    );
    assert_eq!(none, "", "[{CASE}] an attempt with no log");
    let quiet_log = store.read_log(&id, &quiet, LogQuery::new()).await;
    assert_eq!(
        ok(CASE, "quiet node", quiet_log),
        "",
        "[{CASE}] a node with no log"
    );
    // Attempt numbers compare as numbers: 10 is later than 9.
    ok(
        CASE,
        "append 9",
        store.append_log(&key(Phase::Work, 9), "nine\n").await,
    );
    ok(
        CASE,
        "append 10",
        store.append_log(&key(Phase::Work, 10), "ten\n").await,
    );
    let latest = ok(CASE, "read latest", read(LogQuery::new()).await);
    assert_eq!(latest, "ten\n", "[{CASE}] attempt 10 is the latest");
    // A big log reads back, and its tail is its last lines.
    let big_key = key(Phase::Commit, 11);
    let mut expected = String::new();
    for chunk in 0..200 {
        let text: String = (0..10)
            .map(|i| {
                format!(
                    "line {:05} {}\n",
                    chunk * 10 + i,
                    "=".repeat((chunk + i) % 80)
                )
            })
            .collect();
        ok(CASE, "append big", store.append_log(&big_key, &text).await);
        expected.push_str(&text);
    }
    // Stores may cap a log's size (rotation); what they keep is the end, in whole lines.
    let big = ok(CASE, "read big", read(LogQuery::new()).await);
    assert!(
        !big.is_empty() && expected.ends_with(&big),
        "[{CASE}] big log is not the end of what was written"
    );
    let cut = expected.len() - big.len();
    assert!(
        cut == 0 || expected.as_bytes()[cut - 1] == b'\n',
        "[{CASE}] big log starts mid-line"
    );
    let tail = ok(CASE, "tail big", read(LogQuery::new().tail(3)).await);
    assert_eq!(
        tail,
        crate::repository::tail_lines(&expected, 3),
        "[{CASE}] big tail"
    );
}
