//! Timer work (SPEC §12) through the engine, on the in-memory store: a timer job waits
//! (`waiting`, `waitingFor: timer`) with its deadline stored, runs no work, and then lets its
//! dependents run; a restart neither restarts nor skips the deadline, an overdue timer fires
//! at once; pause, cancel, force-fail and retry each do what the rule says; bad timer specs
//! are refused naming the field.
//!
//! The rules: the deadline is computed once, when the job would start (`seconds` from then,
//! or the `until` instant), and journaled with the wait. A timer that comes due while the plan
//! is paused makes its job ready; it runs when the plan resumes. Cancel cancels a waiting
//! timer job; force-fail fails it (`force_failed`); a retry waits again, from a new deadline.

use std::time::Duration;

use orchestrator_core::ids::now_millis;
use orchestrator_core::plan::{
    parse_plan, validate, Isolation, JobSpec, PlanFormat, PlanSpec, TimerSpec, ValidationContext,
    WorkSpec,
};
use orchestrator_core::state::{FailureReason, NodeStatus, WaitingFor};
use orchestrator_core::{
    report, InMemoryPlanRepository, Orchestrator, OrchestratorEvent, PlanId, PlanStatus,
    RetryRequest,
};

mod common;

use common::{ran, Ran};

fn orchestrator(repo: &InMemoryPlanRepository, ran: &Ran) -> Orchestrator {
    common::recording(repo, ran)
}

/// `cool` (a timer) -> `after`; `free` runs meanwhile.
fn plan(timer: WorkSpec) -> PlanSpec {
    PlanSpec::new("timed")
        .isolation(Isolation::None)
        .job(JobSpec::new("cool", "Cool down", timer))
        .job(JobSpec::new("after", "After", WorkSpec::shell("after")).depends_on(["cool"]))
        .job(JobSpec::new("free", "Free", WorkSpec::shell("free")))
}

/// The timer job's `(since, until)`, asserting that it waits on its timer.
async fn deadline(o: &Orchestrator, id: &PlanId) -> (u64, u64) {
    let record = o.status(id).await.expect("status");
    let node = &record.state.nodes[0];
    assert_eq!(node.status, NodeStatus::Waiting);
    let w = node.extra.waiting.as_ref().expect("a wait");
    assert_eq!(w.waiting_for, WaitingFor::Timer);
    (w.since, w.until.expect("a timer has a deadline"))
}

async fn started(o: &Orchestrator, timer: WorkSpec, dir: &std::path::Path) -> PlanId {
    common::run_until_waiting(o, plan(timer), dir).await
}

#[tokio::test]
async fn a_timer_job_waits_for_its_deadline_without_running_then_its_dependents_run() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let mut events = o.subscribe();
    let dir = tempfile::tempdir().expect("tempdir");
    let id = started(&o, WorkSpec::timer(0.4), dir.path()).await;

    assert_eq!(ran(&r), ["free"], "the dependent waits for the timer");
    let (since, until) = deadline(&o, &id).await;
    assert_eq!(
        until - since,
        400,
        "seconds count from when the job would start"
    );
    let record = o.status(&id).await.expect("status");
    let job = report::job_json(&record, 0);
    assert_eq!(job["waitingFor"], "timer");
    assert_eq!(job["waiting"]["until"], until);
    let mut attention = None;
    while let Ok(e) = events.try_recv() {
        if let OrchestratorEvent::AttentionNeeded { waiting, .. } = e {
            attention = Some((waiting.waiting_for, waiting.until));
        }
    }
    assert_eq!(attention, Some((WaitingFor::Timer, Some(until))));

    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(
        ran(&r),
        ["free", "after"],
        "a timer runs no work of its own"
    );
    let record = o.status(&id).await.expect("status");
    let attempt = record.state.nodes[0].last_attempt().expect("attempt");
    assert!(
        attempt.started_at >= until,
        "the timer job ran at {} before its deadline {until}",
        attempt.started_at
    );
    assert!(record.state.nodes[0].extra.waiting.is_none());
}

#[tokio::test]
async fn a_deadline_survives_a_restart_unchanged_and_an_overdue_timer_fires_at_once() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let (id, until) = {
        let o = orchestrator(&repo, &r);
        let id = started(&o, WorkSpec::timer(1.5), dir.path()).await;
        let (_, until) = deadline(&o, &id).await;
        o.release(&id).await.expect("release");
        (id, until)
    };
    // Down past the deadline: on the way back the timer is overdue.
    let left = until.saturating_sub(now_millis());
    tokio::time::sleep(Duration::from_millis(left + 200)).await;

    let o = orchestrator(&repo, &r);
    let reopened = now_millis();
    o.open_plan(&id).await.expect("reopen");
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let record = o.status(&id).await.expect("status");
    let attempt = record.state.nodes[0].last_attempt().expect("attempt");
    assert!(attempt.started_at >= until, "not skipped");
    assert!(
        attempt.started_at < reopened + 1_500,
        "the overdue timer waited again after the restart (started {} ms after reopening)",
        attempt.started_at - reopened
    );
    assert_eq!(ran(&r), ["free", "after"], "nothing ran twice");
}

#[tokio::test]
async fn a_deadline_not_yet_due_after_a_restart_is_kept_not_restarted() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let (id, until) = {
        let o = orchestrator(&repo, &r);
        let id = started(&o, WorkSpec::timer(2.0), dir.path()).await;
        let (_, until) = deadline(&o, &id).await;
        o.release(&id).await.expect("release");
        (id, until)
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let o = orchestrator(&repo, &r);
    o.open_plan(&id).await.expect("reopen");
    assert_eq!(o.plan_status(&id).expect("status"), PlanStatus::Waiting);
    assert_eq!(deadline(&o, &id).await.1, until, "the stored deadline");
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let record = o.status(&id).await.expect("status");
    let attempt = record.state.nodes[0].last_attempt().expect("attempt");
    assert!(attempt.started_at >= until);
    assert!(
        attempt.started_at < until + 1_500,
        "the timer restarted its two seconds after the restart"
    );
}

#[tokio::test]
async fn an_until_timer_waits_for_its_instant_and_one_in_the_past_fires_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let at = now_millis() + 600;
    let instant = jiff::Timestamp::from_millisecond(at as i64)
        .expect("instant")
        .to_string();
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let id = started(&o, WorkSpec::Timer(TimerSpec::until(instant)), dir.path()).await;
    assert_eq!(deadline(&o, &id).await.1, at);
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);

    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let past = WorkSpec::Timer(TimerSpec::until("2001-02-03T04:05:06+01:00"));
    let id = o.run(plan(past), dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let record = o.status(&id).await.expect("status");
    let attempt = record.state.nodes[0].last_attempt().expect("attempt");
    assert_eq!(
        attempt.status,
        orchestrator_core::state::AttemptStatus::Succeeded
    );
    assert_eq!(ran(&r).len(), 2);
}

#[tokio::test]
async fn pause_cancel_force_fail_and_retry_of_a_waiting_timer() {
    let dir = tempfile::tempdir().expect("tempdir");

    // Pause: the timer comes due while paused; its job is ready and runs on resume.
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let id = started(&o, WorkSpec::timer(0.3), dir.path()).await;
    o.pause(&id, false).await.expect("pause");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Paused);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let record = o.status(&id).await.expect("status");
    assert_eq!(record.state.nodes[0].status, NodeStatus::Ready, "fired");
    assert_eq!(record.state.nodes[1].status, NodeStatus::Pending);
    assert_eq!(ran(&r), ["free"], "a paused plan starts nothing");
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);

    // Cancel: the waiting timer job is canceled with the plan.
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let id = started(&o, WorkSpec::timer(3600.0), dir.path()).await;
    o.cancel(&id).await.expect("cancel");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Canceled);
    let record = o.status(&id).await.expect("status");
    assert_eq!(record.state.nodes[0].status, NodeStatus::Canceled);

    // Force-fail, then retry: it waits again, from a new deadline.
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r);
    let id = started(&o, WorkSpec::timer(0.5), dir.path()).await;
    o.force_fail(&id, "cool").await.expect("force-fail");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let record = o.status(&id).await.expect("status");
    let last = record.state.nodes[0].last_attempt().expect("attempt");
    assert_eq!(last.extra.failure_reason, Some(FailureReason::ForceFailed));
    assert_eq!(record.state.nodes[1].status, NodeStatus::Blocked);
    let retried_at = now_millis();
    o.retry(&id, RetryRequest::all_failed())
        .await
        .expect("retry");
    assert_eq!(
        o.wait_or_waiting(&id).await.expect("wait"),
        PlanStatus::Waiting
    );
    let (since, until) = deadline(&o, &id).await;
    assert!(since >= retried_at && until == since + 500);
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(ran(&r), ["free", "after"]);
}

#[test]
fn bad_timers_are_refused_naming_the_field() {
    let with_work = |work: &str| {
        format!(
            r#"{{"name":"p","jobs":[{{"producerId":"aaa","task":"t","dependencies":[],"work":{work}}}]}}"#
        )
    };
    let problems = |work: &str| -> Vec<(String, String)> {
        let plan = parse_plan(&with_work(work), PlanFormat::Json, "plan.json").expect("parses");
        match validate(&plan, ValidationContext::default()) {
            Ok(_) => Vec::new(),
            Err(errors) => errors
                .errors()
                .iter()
                .map(|e| (e.field.clone(), e.message.clone()))
                .collect(),
        }
    };
    let field_of = |work: &str| {
        let found = problems(work);
        assert_eq!(found.len(), 1, "{work}: {found:?}");
        found[0].0.clone()
    };
    assert_eq!(field_of(r#"{"type":"timer","seconds":-1}"#), "work.seconds");
    assert_eq!(
        field_of(r#"{"type":"timer","seconds":1e12}"#),
        "work.seconds"
    );
    assert_eq!(
        field_of(r#"{"type":"timer","until":"tomorrow"}"#),
        "work.until"
    );
    assert_eq!(
        field_of(r#"{"type":"timer","until":"2026-12-24T18:00:00"}"#),
        "work.until",
        "an instant needs its offset"
    );
    assert_eq!(field_of(r#"{"type":"timer"}"#), "work.type");
    assert_eq!(
        field_of(r#"{"type":"timer","seconds":1,"until":"2026-12-24T18:00:00Z"}"#),
        "work.type"
    );
    assert!(problems(r#"{"type":"timer","seconds":0.25}"#).is_empty());
    assert!(problems(r#"{"type":"timer","until":"2026-12-24T18:00:00+01:00"}"#).is_empty());

    // Fields of other work types are refused by name when the plan is read.
    let err = parse_plan(
        &with_work(r#"{"type":"timer","seconds":1,"command":"x"}"#),
        PlanFormat::Json,
        "plan.json",
    )
    .expect_err("refused");
    assert!(
        err.to_string()
            .contains("`command` does not belong to timer work"),
        "{err}"
    );
    let err = parse_plan(
        &with_work(r#"{"type":"shell","command":"x","seconds":1}"#),
        PlanFormat::Json,
        "plan.json",
    )
    .expect_err("refused");
    assert!(err.to_string().contains("`seconds`"), "{err}");

    // A check must run something.
    let plan = parse_plan(
        r#"{"name":"p","jobs":[{"producerId":"aaa","task":"t","dependencies":[],"work":"true",
            "prechecks":{"type":"timer","seconds":1}}]}"#,
        PlanFormat::Json,
        "plan.json",
    )
    .expect("parses");
    let errors = validate(&plan, ValidationContext::default()).expect_err("refused");
    assert_eq!(errors.errors()[0].field, "prechecks.type");
}
