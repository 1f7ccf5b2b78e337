//! Waiting for approval (SPEC §12) through the engine, on the in-memory store: a ready
//! `approval: before` job is held (`waiting`, `waitingFor: approval`) without running, the plan
//! is `waiting`, and approve, reject, retry, cancel, pause, force-fail and a restart each do
//! what the rule says.
//!
//! The rules: approve makes the job ready (it runs when the plan runs, so a paused plan runs
//! it on resume); reject fails it with reason `rejected` and blocks its dependents; retry of a
//! rejected job holds it for approval again; cancel cancels a waiting job; force-fail fails
//! it (`force_failed`); the wait is journaled, so a plan reopened after a restart still waits.

use std::sync::Arc;

use orchestrator_core::plan::{Approval, Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::state::{FailureReason, NodeStatus, WaitingFor};
use orchestrator_core::{
    report, Error, FnRunner, InMemoryPlanRepository, Orchestrator, OrchestratorEvent, PlanId,
    PlanStatus, RetryRequest, WorkOutput,
};

mod common;

use common::{ran, Ran};

fn orchestrator(repo: &InMemoryPlanRepository, ran: &Ran) -> Orchestrator {
    common::recording(repo, ran)
}

/// `gate` (approval before) -> `after`; `free` runs meanwhile.
fn plan() -> PlanSpec {
    PlanSpec::new("gated")
        .isolation(Isolation::None)
        .job(
            JobSpec::new("gate", "Deploy to production", WorkSpec::shell("deploy"))
                .approval(Approval::Before),
        )
        .job(JobSpec::new("after", "After", WorkSpec::shell("after")).depends_on(["gate"]))
        .job(JobSpec::new("free", "Free", WorkSpec::shell("free")))
}

async fn status_of(o: &Orchestrator, id: &PlanId, job: usize) -> NodeStatus {
    o.status(id).await.expect("status").state.nodes[job].status
}

async fn started(o: &Orchestrator, dir: &std::path::Path) -> PlanId {
    common::run_until_waiting(o, plan(), dir).await
}

#[tokio::test]
async fn an_approval_before_job_waits_then_runs_when_approved() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let mut events = o.subscribe();
    let dir = tempfile::tempdir().expect("tempdir");
    let id = started(&o, dir.path()).await;

    assert_eq!(
        ran(&r),
        ["free"],
        "the gated job and its dependent did not run"
    );
    let record = o.status(&id).await.expect("status");
    assert_eq!(record.state.nodes[0].status, NodeStatus::Waiting);
    assert_eq!(record.state.nodes[1].status, NodeStatus::Pending);
    let job = report::job_json(&record, 0);
    assert_eq!(job["status"], "waiting");
    assert_eq!(job["waitingFor"], "approval");
    assert_eq!(job["waiting"]["prompt"], "Deploy to production");
    assert_eq!(
        report::job_json(&record, 2)["waitingFor"],
        serde_json::Value::Null
    );

    let mut attention = None;
    while let Ok(e) = events.try_recv() {
        if let OrchestratorEvent::AttentionNeeded {
            producer_id,
            waiting,
            ..
        } = e
        {
            attention = Some((producer_id, waiting.waiting_for));
        }
    }
    assert_eq!(attention, Some(("gate".to_owned(), WaitingFor::Approval)));

    o.approve(&id, "gate").await.expect("approve");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(ran(&r), ["free", "gate", "after"]);
}

#[tokio::test]
async fn a_rejected_job_fails_with_its_reason_blocks_its_dependents_and_waits_again_on_retry() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = started(&o, dir.path()).await;

    o.reject(&id, "gate", "not on a Friday")
        .await
        .expect("reject");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let record = o.status(&id).await.expect("status");
    let gate = &record.state.nodes[0];
    assert_eq!(gate.status, NodeStatus::Failed);
    assert_eq!(
        gate.extra.error.as_deref(),
        Some("rejected: not on a Friday")
    );
    let last = gate
        .last_attempt()
        .expect("an attempt records the rejection");
    assert_eq!(last.extra.failure_reason, Some(FailureReason::Rejected));
    assert!(last.phases.is_empty(), "nothing of it ran");
    assert_eq!(record.state.nodes[1].status, NodeStatus::Blocked);
    assert_eq!(report::job_json(&record, 0)["failureReason"], "rejected");

    o.retry(&id, RetryRequest::all_failed())
        .await
        .expect("retry");
    assert_eq!(
        o.wait_or_waiting(&id).await.expect("wait"),
        PlanStatus::Waiting
    );
    assert_eq!(
        status_of(&o, &id, 0).await,
        NodeStatus::Waiting,
        "held for approval again"
    );
    assert_eq!(
        status_of(&o, &id, 1).await,
        NodeStatus::Pending,
        "unblocked"
    );
    o.approve(&id, "gate").await.expect("approve");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(ran(&r), ["free", "gate", "after"]);
}

#[tokio::test]
async fn approving_what_does_not_wait_names_what_it_waits_for() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = started(&o, dir.path()).await;

    let e = o
        .approve(&id, "free")
        .await
        .expect_err("free does not wait");
    assert!(matches!(e, Error::NotWaiting { .. }), "{e:?}");
    assert_eq!(e.kind(), "not_waiting");
    let message = e.to_string();
    assert!(
        message.contains("job `free` waits for nothing (it is succeeded)"),
        "{message}"
    );
    assert!(
        message.contains("only a job waiting for approval can be approved"),
        "{message}"
    );

    let e = o
        .answer(&id, "gate", "yes")
        .await
        .expect_err("gate waits for approval");
    assert!(
        e.to_string().contains("job `gate` waits for approval"),
        "{e}"
    );
    assert!(e.to_string().contains("can be answered"), "{e}");

    let e = o.reject(&id, "nope", "x").await.expect_err("unknown job");
    assert!(matches!(e, Error::JobNotFound { .. }), "{e:?}");
    assert_eq!(
        status_of(&o, &id, 0).await,
        NodeStatus::Waiting,
        "nothing changed"
    );
}

#[tokio::test]
async fn cancel_pause_and_force_fail_of_a_waiting_job() {
    let dir = tempfile::tempdir().expect("tempdir");

    // Cancel: the waiting job is canceled with the plan.
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let id = started(&o, dir.path()).await;
    o.cancel(&id).await.expect("cancel");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Canceled);
    assert_eq!(status_of(&o, &id, 0).await, NodeStatus::Canceled);

    // Pause: an approval is kept, and the job runs when the plan resumes.
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let id = started(&o, dir.path()).await;
    o.pause(&id, false).await.expect("pause");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Paused);
    o.approve(&id, "gate").await.expect("approve while paused");
    assert_eq!(status_of(&o, &id, 0).await, NodeStatus::Ready);
    assert_eq!(ran(&r), ["free"], "a paused plan starts nothing");
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);

    // Force-fail: the waiting job fails as force-failed; its dependent is blocked.
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let id = started(&o, dir.path()).await;
    o.force_fail(&id, "gate").await.expect("force-fail");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let record = o.status(&id).await.expect("status");
    let last = record.state.nodes[0].last_attempt().expect("attempt");
    assert_eq!(last.extra.failure_reason, Some(FailureReason::ForceFailed));
    assert_eq!(record.state.nodes[1].status, NodeStatus::Blocked);
}

#[tokio::test]
async fn a_wait_survives_a_restart() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let id = {
        let o = orchestrator(&repo, &r);
        let id = started(&o, dir.path()).await;
        o.release(&id).await.expect("release");
        id
    };
    let o = orchestrator(&repo, &r);
    o.open_plan(&id).await.expect("reopen");
    assert_eq!(o.plan_status(&id).expect("status"), PlanStatus::Waiting);
    assert_eq!(status_of(&o, &id, 0).await, NodeStatus::Waiting);
    o.approve(&id, "gate")
        .await
        .expect("approve after the restart");
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(ran(&r), ["free", "gate", "after"], "nothing ran twice");
}

#[tokio::test]
async fn an_approved_job_stopped_by_a_pause_is_not_held_again() {
    // The gated job's first run blocks until it is stopped; its second run ends at once.
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = runs.clone();
    let o = Orchestrator::builder()
        .repository(InMemoryPlanRepository::new())
        .runner(
            "shell",
            FnRunner::new(move |_, ctx| {
                let first = ctx.producer_id == "gate"
                    && seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
                async move {
                    if first {
                        ctx.cancel.cancelled().await;
                        return Err(orchestrator_core::runner::WorkFailure::canceled());
                    }
                    Ok(WorkOutput::default())
                }
            }),
        )
        .build()
        .expect("build");
    let dir = tempfile::tempdir().expect("tempdir");
    let id = started(&o, dir.path()).await;
    o.approve(&id, "gate").await.expect("approve");
    while status_of(&o, &id, 0).await != NodeStatus::Running {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    o.pause(&id, true).await.expect("pause, stopping the job");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Paused);
    o.resume(&id).await.expect("resume");
    assert_eq!(
        o.wait_or_waiting(&id).await.expect("wait"),
        PlanStatus::Succeeded,
        "the approval still holds after the pause"
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 2);
}

/// `check` (approval after) -> `dep`; `free` runs meanwhile.
fn after_plan() -> PlanSpec {
    PlanSpec::new("reviewed")
        .isolation(Isolation::None)
        .job(
            JobSpec::new("check", "Change the schema", WorkSpec::shell("change"))
                .approval(Approval::After),
        )
        .job(JobSpec::new("dep", "Dependent", WorkSpec::shell("dep")).depends_on(["check"]))
        .job(JobSpec::new("free", "Free", WorkSpec::shell("free")))
}

async fn held_after(o: &Orchestrator, dir: &std::path::Path) -> PlanId {
    common::run_until_waiting(o, after_plan(), dir).await
}

#[tokio::test]
async fn an_approval_after_job_runs_its_phases_then_waits_with_its_attempt_open() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = held_after(&o, dir.path()).await;

    let mut done = ran(&r);
    done.sort();
    assert_eq!(done, ["check", "free"], "its work ran; its dependent waits");
    let record = o.status(&id).await.expect("status");
    let node = &record.state.nodes[0];
    assert_eq!(node.status, NodeStatus::Waiting);
    let waiting = node.extra.waiting.as_ref().expect("waits");
    assert_eq!(waiting.waiting_for, WaitingFor::Approval);
    assert!(waiting
        .prompt
        .as_deref()
        .is_some_and(|p| p.contains("Change the schema")));
    assert_eq!(node.attempts.len(), 1);
    assert_eq!(
        node.attempts[0].status,
        orchestrator_core::state::AttemptStatus::Running,
        "the attempt goes on after the approval"
    );
    assert_eq!(record.state.nodes[1].status, NodeStatus::Pending);

    o.approve(&id, "check").await.expect("approve");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let runs = ran(&r);
    assert_eq!(
        runs.iter().filter(|j| *j == "check").count(),
        1,
        "the approved work is not run again: {runs:?}"
    );
    assert_eq!(runs.last().map(String::as_str), Some("dep"));
    let record = o.status(&id).await.expect("status");
    let node = &record.state.nodes[0];
    assert_eq!(node.attempts.len(), 1, "one attempt, held in the middle");
    assert_eq!(
        node.attempts[0].status,
        orchestrator_core::state::AttemptStatus::Succeeded
    );
}

#[tokio::test]
async fn rejecting_cancelling_and_restarting_an_approval_after_job() {
    let dir = tempfile::tempdir().expect("tempdir");

    // Reject: the open attempt fails with the reason; the dependent is blocked.
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let id = held_after(&o, dir.path()).await;
    o.reject(&id, "check", "drops a column")
        .await
        .expect("reject");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let record = o.status(&id).await.expect("status");
    let node = &record.state.nodes[0];
    assert_eq!(node.attempts.len(), 1);
    assert_eq!(
        node.attempts[0].extra.failure_reason,
        Some(FailureReason::Rejected)
    );
    assert!(node
        .extra
        .error
        .as_deref()
        .is_some_and(|e| e.contains("drops a column")));
    assert_eq!(record.state.nodes[1].status, NodeStatus::Blocked);

    // Cancel: the open attempt is canceled with the job.
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let id = held_after(&o, dir.path()).await;
    o.cancel(&id).await.expect("cancel");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Canceled);
    let record = o.status(&id).await.expect("status");
    assert_eq!(
        record.state.nodes[0].attempts[0].status,
        orchestrator_core::state::AttemptStatus::Canceled
    );

    // A restart: the job still waits, and goes on after the approval without running again.
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let id = {
        let o = orchestrator(&repo, &r);
        let id = held_after(&o, dir.path()).await;
        o.release(&id).await.expect("release");
        id
    };
    let o = orchestrator(&repo, &r);
    o.open_plan(&id).await.expect("reopen");
    assert_eq!(o.plan_status(&id).expect("status"), PlanStatus::Waiting);
    o.approve(&id, "check")
        .await
        .expect("approve after the restart");
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(ran(&r).iter().filter(|j| *j == "check").count(), 1);
}

#[tokio::test]
async fn reshaping_around_a_waiting_job() {
    use orchestrator_core::plan::{JobUpdate, PlanEdit};
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = started(&o, dir.path()).await;

    // A waiting job keeps its place: its work, dependencies and existence are fixed while it
    // waits (reject or cancel it to change it); its display name may change.
    let err = o
        .edit_plan(
            &id,
            vec![PlanEdit::UpdateJob {
                job: "gate".into(),
                update: Box::new(JobUpdate {
                    work: Some(WorkSpec::shell("other")),
                    ..JobUpdate::default()
                }),
            }],
        )
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("waiting"), "{err}");
    let err = o
        .edit_plan(&id, vec![PlanEdit::RemoveJob { job: "gate".into() }])
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("waiting"), "{err}");
    o.edit_plan(
        &id,
        vec![PlanEdit::UpdateJob {
            job: "gate".into(),
            update: Box::new(JobUpdate {
                name: Some("Production deploy".into()),
                ..JobUpdate::default()
            }),
        }],
    )
    .await
    .expect("a new name");

    // A new job after it waits with the other dependents; the wait goes on unchanged.
    o.edit_plan(
        &id,
        vec![PlanEdit::AddJob {
            job: Box::new(
                JobSpec::new("notify", "Notify", WorkSpec::shell("notify")).depends_on(["gate"]),
            ),
        }],
    )
    .await
    .expect("add a dependent");
    assert_eq!(status_of(&o, &id, 0).await, NodeStatus::Waiting);
    o.approve(&id, "gate").await.expect("approve");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let mut done = ran(&r);
    done.sort();
    assert_eq!(done, ["after", "free", "gate", "notify"]);
}

#[tokio::test]
async fn archive_refuses_a_waiting_plan_and_recover_after_cancel_waits_again() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = started(&o, dir.path()).await;

    // Archive: only an ended plan; a waiting one is not (cancel it first).
    let err = o.archive(&id).await.expect_err("refused");
    assert!(err.to_string().contains("waiting"), "{err}");
    assert_eq!(status_of(&o, &id, 0).await, NodeStatus::Waiting);

    // Recover after cancel: the canceled gate is new work again and waits for approval.
    o.cancel(&id).await.expect("cancel");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Canceled);
    o.recover(&id).await.expect("recover");
    o.resume(&id).await.expect("resume");
    assert_eq!(
        o.wait_or_waiting(&id).await.expect("wait"),
        PlanStatus::Waiting
    );
    assert_eq!(status_of(&o, &id, 0).await, NodeStatus::Waiting);
    o.approve(&id, "gate").await.expect("approve");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
}
