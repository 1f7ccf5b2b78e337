use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::ids::PlanId;
use crate::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
use crate::state::PhaseStatus;

/// A plan in `isolation: none` from `(id, deps)` pairs.
fn machine(jobs: &[(&str, &[&str])]) -> PlanMachine {
    let mut spec = PlanSpec::new("t").isolation(Isolation::None);
    for (id, deps) in jobs {
        spec = spec.job(
            JobSpec::new(*id, "task", WorkSpec::shell("true")).depends_on(deps.iter().copied()),
        );
    }
    let graph = PlanGraph::build(&spec).expect("valid test plan");
    let record = PlanRecord::new(
        PlanId::random(),
        spec,
        PathBuf::from("/tmp"),
        graph.node_count(),
        1,
    );
    PlanMachine::new(record, Arc::new(graph))
}

fn statuses(m: &PlanMachine) -> Vec<NodeStatus> {
    m.record().state.nodes.iter().map(|n| n.status).collect()
}

fn run(m: &mut PlanMachine, n: NodeIndex) {
    m.schedule(n, 2).expect("schedule");
    m.begin_attempt(n, 3).expect("begin");
}

use NodeStatus::*;

const DIAMOND: &[(&str, &[&str])] = &[
    ("aaa", &[]),
    ("bbb", &["aaa"]),
    ("ccc", &["aaa"]),
    ("ddd", &["bbb", "ccc"]),
];

#[test]
fn transition_table_is_exactly_spec_section_3() {
    let allowed = [
        (Pending, Ready),
        (Pending, Blocked),
        (Pending, Canceled),
        (Ready, Scheduled),
        (Ready, Blocked),
        (Ready, Canceled),
        (Scheduled, Running),
        (Scheduled, Failed),
        (Scheduled, Canceled),
        (Running, Succeeded),
        (Running, Failed),
        (Running, Canceled),
        (Running, CompletedSplit),
        (CompletedSplit, Succeeded),
        (CompletedSplit, Failed),
        // Canceled with its plan while its sub-jobs run (not in SPEC §3's table).
        (CompletedSplit, Canceled),
        (Failed, Pending),
        (Blocked, Pending),
        // SPEC §12 waiting (waiting -> running comes with the agents' own waits and
        // composite jobs; an approved `approval: after` job goes through ready, for a slot).
        (Ready, Waiting),
        (Running, Waiting),
        (Waiting, Ready),
        (Waiting, Failed),
        (Waiting, Canceled),
    ];
    for from in NodeStatus::ALL {
        for to in NodeStatus::ALL {
            assert_eq!(
                from.can_transition_to(to),
                allowed.contains(&(from, to)),
                "{from} -> {to}"
            );
        }
    }
}

#[test]
fn invalid_transition_is_an_error_and_changes_nothing() {
    let mut m = machine(DIAMOND);
    m.start(1, None, None, None).expect("start");
    let before = m.record().clone();
    // ddd is pending: it cannot be scheduled.
    let err = m
        .schedule(3, 5)
        .expect_err("pending -> scheduled must be rejected");
    assert!(
        matches!(
            err,
            ApplyError::InvalidTransition {
                from: Pending,
                to: Scheduled,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(m.record(), &before);
    // succeeded is final.
    run(&mut m, 0);
    m.succeed(0, 4).expect("succeed");
    assert!(m.schedule(0, 5).is_err());
    assert!(
        m.retry(0, None, 5).is_err(),
        "only failed nodes can be retried"
    );
}

#[test]
fn start_makes_roots_ready_and_success_releases_dependents() {
    let mut m = machine(DIAMOND);
    m.start(1, None, None, None).expect("start");
    assert_eq!(statuses(&m), [Ready, Pending, Pending, Pending]);
    assert_eq!(m.drain_ready().collect::<Vec<_>>(), vec![0]);
    run(&mut m, 0);
    assert_eq!(m.status_of(0), Running);
    m.succeed(0, 4).expect("succeed");
    assert_eq!(statuses(&m), [Succeeded, Ready, Ready, Pending]);
    run(&mut m, 1);
    m.succeed(1, 5).expect("succeed");
    assert_eq!(m.status_of(3), Pending, "ddd still waits for ccc");
    run(&mut m, 2);
    m.succeed(2, 6).expect("succeed");
    assert_eq!(m.status_of(3), Ready);
    run(&mut m, 3);
    m.succeed(3, 7).expect("succeed");
    assert_eq!(m.plan_status(), PlanStatus::Succeeded);
    assert!(m.end_if_terminal(8).expect("end"));
    assert_eq!(m.record().state.ended_at, Some(8));
}

#[test]
fn failure_blocks_exactly_the_descendants() {
    let mut m = machine(&[
        ("aaa", &[]),
        ("bbb", &["aaa"]),
        ("ccc", &["bbb"]),
        ("ddd", &[]),
        ("eee", &["ddd"]),
    ]);
    m.start(1, None, None, None).expect("start");
    run(&mut m, 0);
    m.fail(
        0,
        4,
        "boom".into(),
        FailureReason::PhaseFailed,
        Some(Phase::Work),
    )
    .expect("fail");
    assert_eq!(statuses(&m), [Failed, Blocked, Blocked, Ready, Pending]);
    run(&mut m, 3);
    m.succeed(3, 5).expect("succeed");
    run(&mut m, 4);
    m.succeed(4, 6).expect("succeed");
    assert_eq!(
        m.plan_status(),
        PlanStatus::Failed,
        "a mix of failed and succeeded is failed"
    );
    let attempt = m.record().state.nodes[0]
        .last_attempt()
        .expect("attempt")
        .clone();
    assert_eq!(
        attempt.extra.failure_reason,
        Some(FailureReason::PhaseFailed)
    );
    assert_eq!(attempt.extra.failed_phase, Some(Phase::Work));
    assert_eq!(attempt.extra.error.as_deref(), Some("boom"));
}

#[test]
fn scheduled_node_can_fail_at_startup() {
    let mut m = machine(&[("aaa", &[]), ("bbb", &["aaa"])]);
    m.start(1, None, None, None).expect("start");
    m.schedule(0, 2).expect("schedule");
    m.fail(0, 3, "no runner".into(), FailureReason::StartupError, None)
        .expect("fail");
    assert_eq!(statuses(&m), [Failed, Blocked]);
}

#[test]
fn retry_unblocks_descendants_and_resumes_from_phase() {
    let mut m = machine(DIAMOND);
    m.start(1, None, None, None).expect("start");
    run(&mut m, 0);
    m.succeed(0, 2).expect("succeed");
    run(&mut m, 1);
    m.fail(
        1,
        3,
        "x".into(),
        FailureReason::PhaseFailed,
        Some(Phase::Commit),
    )
    .expect("fail");
    assert_eq!(m.status_of(3), Blocked);
    let resume = m.resume_phase_after_failure(1);
    assert_eq!(
        resume,
        Some(Phase::Work),
        "a failed commit resumes from work"
    );
    m.retry(1, resume, 4).expect("retry");
    assert_eq!(
        statuses(&m)[1],
        Ready,
        "dependencies succeeded: ready at once"
    );
    assert_eq!(statuses(&m)[3], Pending, "descendant unblocked");
    let (attempt, from) = {
        m.schedule(1, 5).expect("schedule");
        m.begin_attempt(1, 5).expect("begin")
    };
    assert_eq!((attempt, from), (2, Some(Phase::Work)));
    assert_eq!(
        m.record().state.nodes[1].attempts[1].resumed_from,
        Some(Phase::Work)
    );
}

#[test]
fn retry_keeps_descendants_blocked_by_another_failure() {
    let mut m = machine(DIAMOND);
    m.start(1, None, None, None).expect("start");
    run(&mut m, 0);
    m.succeed(0, 2).expect("succeed");
    run(&mut m, 1);
    run(&mut m, 2);
    m.fail(1, 3, "x".into(), FailureReason::PhaseFailed, None)
        .expect("fail");
    m.fail(2, 3, "y".into(), FailureReason::PhaseFailed, None)
        .expect("fail");
    m.retry(1, None, 4).expect("retry");
    assert_eq!(m.status_of(3), Blocked, "ccc still failed");
    m.retry(2, None, 4).expect("retry");
    assert_eq!(m.status_of(3), Pending);
}

#[test]
fn cancel_cancels_waiting_nodes_and_running_ones_on_completion() {
    let mut m = machine(DIAMOND);
    m.start(1, None, None, None).expect("start");
    run(&mut m, 0);
    m.cancel(2).expect("cancel");
    assert_eq!(statuses(&m), [Running, Canceled, Canceled, Canceled]);
    assert_eq!(m.plan_status(), PlanStatus::Canceled);
    m.cancel_node(0, 3).expect("cancel node");
    assert_eq!(m.status_of(0), Canceled);
    let a = m.record().state.nodes[0].last_attempt().expect("attempt");
    assert_eq!(a.status, AttemptStatus::Canceled);
}

#[test]
fn pause_and_resume_derive_plan_status() {
    let mut m = machine(DIAMOND);
    assert_eq!(m.plan_status(), PlanStatus::Pending);
    m.start(1, None, None, None).expect("start");
    assert_eq!(m.plan_status(), PlanStatus::Running);
    run(&mut m, 0);
    m.pause(2).expect("pause");
    assert_eq!(
        m.plan_status(),
        PlanStatus::Pausing,
        "a job is still running"
    );
    m.succeed(0, 3).expect("succeed");
    assert_eq!(m.plan_status(), PlanStatus::Paused);
    m.resume(4).expect("resume");
    assert_eq!(m.plan_status(), PlanStatus::Running);
}

#[test]
fn crashed_running_nodes_become_failed_attempts_and_are_requeued() {
    let mut m = machine(DIAMOND);
    m.start(1, None, None, None).expect("start");
    run(&mut m, 0);
    m.record_change(StateChange::PhaseStarted {
        node: 0,
        phase: Phase::Postchecks,
        at: 3,
    })
    .expect("phase");
    // Reload as a new process would.
    let record = m.record().clone();
    let graph = m.graph().clone();
    let mut m = PlanMachine::new(record, graph);
    assert_eq!(m.recover_crashed(9).expect("recover"), vec![0]);
    assert_eq!(m.status_of(0), Ready);
    let node = &m.record().state.nodes[0];
    let a = node.last_attempt().expect("attempt");
    assert_eq!(a.extra.failure_reason, Some(FailureReason::Crashed));
    assert_eq!(a.phases[0].status, PhaseStatus::Canceled);
    assert_eq!(node.extra.resume_from, Some(Phase::Postchecks));
}

#[test]
fn outbox_replays_to_the_same_record() {
    let mut m = machine(DIAMOND);
    let fresh = m.record().clone();
    m.start(1, None, None, None).expect("start");
    run(&mut m, 0);
    m.succeed(0, 2).expect("succeed");
    run(&mut m, 1);
    m.fail(1, 3, "x".into(), FailureReason::Timeout, Some(Phase::Work))
        .expect("fail");
    m.retry(1, Some(Phase::Work), 4).expect("retry");
    let mut replay = fresh;
    for (change, _) in m.drain_outbox() {
        replay.apply(&change).expect("replay");
    }
    assert_eq!(&replay, m.record());
    assert_eq!(
        replay.state.counts(),
        m.counts(),
        "incremental counts match a recount"
    );
}

#[test]
fn the_changes_of_several_steps_record_what_their_steps_record() {
    let mut m = machine(DIAMOND);
    let fresh = m.record().clone();
    m.start(1, None, None, None).expect("start");
    assert_eq!(m.launch(0, 2).expect("launch"), (1, None));
    assert_eq!(statuses(&m)[0], Running);
    m.record_change(StateChange::PhaseRan {
        node: 0,
        phase: Phase::Work,
        status: PhaseStatus::Succeeded,
        started_at: 3,
        at: 4,
        error: None,
    })
    .expect("phase ran");
    m.succeed(0, 5).expect("succeed");
    assert_eq!(statuses(&m)[..3], [Succeeded, Ready, Ready]);
    let changes: Vec<StateChange> = m.drain_outbox().map(|(c, _)| c).collect();
    let joined = changes.iter().filter(|c| c.steps().is_some()).count();
    assert_eq!(joined, 3, "{changes:?}");
    // Applying each joined change's steps instead gives the same record.
    let mut by_steps = fresh;
    for change in &changes {
        for step in change.steps().unwrap_or_else(|| vec![change.clone()]) {
            by_steps.apply(&step).expect("step applies");
        }
    }
    assert_eq!(&by_steps, m.record());
    let a = &by_steps.state.nodes[0].attempts[0];
    assert_eq!(
        (a.status, a.started_at, a.ended_at),
        (AttemptStatus::Succeeded, 2, Some(5))
    );
    assert_eq!((a.phases[0].started_at, a.phases[0].ended_at), (3, Some(4)));
    assert_eq!(
        by_steps.state.counts(),
        m.counts(),
        "incremental counts match a recount"
    );
    // A launch is checked like its steps: a node that is not ready cannot launch.
    let before = m.record().clone();
    assert!(m.launch(3, 6).is_err());
    assert_eq!(&before, m.record());
}

#[test]
fn recovery_makes_failed_blocked_and_canceled_nodes_pending_and_pauses() {
    let mut m = machine(&[("aaa", &[]), ("bbb", &["aaa"]), ("ccc", &[]), ("ddd", &[])]);
    m.start(1, None, None, None).expect("start");
    run(&mut m, 0);
    m.fail(
        0,
        2,
        "x".into(),
        FailureReason::PhaseFailed,
        Some(Phase::Work),
    )
    .expect("fail");
    run(&mut m, 2);
    m.succeed(2, 3).expect("succeed");
    m.cancel(4).expect("cancel");
    assert_eq!(statuses(&m), [Failed, Blocked, Succeeded, Canceled]);
    m.recover(5).expect("recover");
    assert_eq!(statuses(&m), [Ready, Pending, Succeeded, Ready]);
    assert_eq!(m.plan_status(), PlanStatus::Paused);
    assert!(!m.record().state.canceled);
    assert_eq!(m.counts(), m.record().state.counts());
    assert_eq!(m.record().state.nodes[0].attempts.len(), 1, "history kept");
}

#[test]
fn a_heal_interrupted_by_a_crash_is_done_again() {
    let mut m = machine(DIAMOND);
    m.start(1, None, None, None).expect("start");
    let heal = crate::state::Heal {
        round: 2,
        phase: Phase::Work,
        spec: crate::plan::WorkSpec::shell("make"),
        failure: "make: exit 2".into(),
        exit_code: Some(2),
    };
    m.record_change(StateChange::HealScheduled {
        node: 0,
        heal: Box::new(heal.clone()),
    })
    .expect("heal");
    run(&mut m, 0);
    m.record_change(StateChange::PhaseStarted {
        node: 0,
        phase: Phase::Work,
        at: 3,
    })
    .expect("phase");
    let record = m.record().clone();
    let graph = m.graph().clone();
    let mut m = PlanMachine::new(record, graph);
    m.recover_crashed(9).expect("recover");
    let node = &m.record().state.nodes[0];
    assert_eq!(
        node.extra.heal.as_deref(),
        Some(&heal),
        "scheduled again, same round"
    );
    assert_eq!(node.extra.resume_from, Some(Phase::Work));
}
