//! Engine behaviour with `isolation: "none"` and closure runners: scheduling, limits,
//! lifecycle commands, retry, force-fail, chaining, events and restart recovery.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::runner::{WorkFailure, WorkResult};
use orchestrator_core::state::{AttemptStatus, FailureReason, PlanRecord};
use orchestrator_core::{
    Error, FnRunner, InMemoryPlanRepository, NodeStatus, Orchestrator, OrchestratorEvent,
    OrchestratorOptions, Phase, PlanRepository, PlanStatus, RetryRequest, WorkContext, WorkOutput,
};

fn shell(cmd: &str) -> WorkSpec {
    WorkSpec::shell(cmd)
}

/// Jobs whose shell command is their behaviour: `ok`, `fail`, `sleep:<ms>`, `hang`.
fn scripted() -> FnRunner {
    FnRunner::new(|spec: WorkSpec, ctx: WorkContext| async move {
        let WorkSpec::Shell(s) = spec else {
            return Err(WorkFailure::new("not shell"));
        };
        behave(&s.command, &ctx).await
    })
}

async fn behave(cmd: &str, ctx: &WorkContext) -> WorkResult {
    if let Some(ms) = cmd.strip_prefix("sleep:") {
        let ms: u64 = ms.parse().unwrap_or(10);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => {}
            () = ctx.cancel.cancelled() => return Err(WorkFailure::canceled()),
        }
        return Ok(WorkOutput::default());
    }
    match cmd {
        "fail" => Err(WorkFailure::new("scripted failure").exit_code(1)),
        "hang" => {
            ctx.cancel.cancelled().await;
            Err(WorkFailure::canceled())
        }
        _ => Ok(WorkOutput::default()),
    }
}

fn orchestrator(store: InMemoryPlanRepository) -> Orchestrator {
    Orchestrator::builder()
        .repository(store)
        .runner("shell", scripted())
        .build()
        .expect("valid builder")
}

fn plan(jobs: &[(&str, &str, &[&str])]) -> PlanSpec {
    let mut spec = PlanSpec::new("test").isolation(Isolation::None);
    for (id, cmd, deps) in jobs {
        spec = spec.job(
            JobSpec::new(*id, format!("task {id}"), shell(cmd)).depends_on(deps.iter().copied()),
        );
    }
    spec
}

fn status_of(record: &PlanRecord, producer: &str) -> NodeStatus {
    let i = record
        .spec
        .jobs
        .iter()
        .position(|j| j.producer_id == producer)
        .expect("job exists");
    record.state.nodes[i].status
}

async fn wait_until(
    o: &Orchestrator,
    id: &orchestrator_core::PlanId,
    f: impl Fn(&PlanRecord) -> bool,
) -> PlanRecord {
    for _ in 0..500 {
        let r = o.status(id).await.expect("status");
        if f(&r) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("condition not reached in time");
}

#[tokio::test]
async fn failure_blocks_dependents_and_independent_jobs_finish() {
    let o = orchestrator(InMemoryPlanRepository::new());
    let id = o
        .run(
            plan(&[
                ("aaa", "fail", &[]),
                ("bbb", "ok", &["aaa"]),
                ("ccc", "ok", &["bbb"]),
                ("ddd", "ok", &[]),
            ]),
            std::env::temp_dir(),
        )
        .await
        .expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = o.status(&id).await.expect("status");
    assert_eq!(status_of(&r, "aaa"), NodeStatus::Failed);
    assert_eq!(status_of(&r, "bbb"), NodeStatus::Blocked);
    assert_eq!(status_of(&r, "ccc"), NodeStatus::Blocked);
    assert_eq!(status_of(&r, "ddd"), NodeStatus::Succeeded);
    let attempt = r.state.nodes[0].last_attempt().expect("attempt");
    assert_eq!(attempt.extra.failed_phase, Some(Phase::Work));
    assert!(attempt
        .extra
        .error
        .as_deref()
        .unwrap_or("")
        .contains("scripted failure"));
    assert!(r.state.ended_at.is_some());
}

#[tokio::test]
async fn retry_with_replaced_work_succeeds() {
    let o = orchestrator(InMemoryPlanRepository::new());
    let id = o
        .run(
            plan(&[("aaa", "fail", &[]), ("bbb", "ok", &["aaa"])]),
            std::env::temp_dir(),
        )
        .await
        .expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let err = o
        .retry(&id, RetryRequest::jobs(["bbb"]))
        .await
        .expect_err("blocked job");
    assert!(err.to_string().contains("only failed jobs"), "{err}");
    // A replacement that makes the plan invalid is refused, naming the job, and changes nothing.
    let before = o.status(&id).await.expect("status");
    let err = o
        .retry(&id, RetryRequest::jobs(["aaa"]).with_work(shell("  ")))
        .await
        .expect_err("empty work");
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
    assert!(err.to_string().contains("aaa"), "{err}");
    assert_eq!(
        o.status(&id).await.expect("status"),
        before,
        "a refused retry records nothing"
    );
    let n = o
        .retry(&id, RetryRequest::jobs(["aaa"]).with_work(shell("ok")))
        .await
        .expect("retry");
    assert_eq!(n, 1);
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let r = o.status(&id).await.expect("status");
    assert_eq!(r.state.nodes[0].attempts.len(), 2);
    assert_eq!(r.state.nodes[0].attempts[1].resumed_from, Some(Phase::Work));
    assert_eq!(
        r.spec.jobs[0].work,
        shell("ok"),
        "replacement persisted in the spec"
    );
    let stored = o.repository().load(&id).await.expect("load");
    assert_eq!(stored, r, "the store holds exactly the engine's state");
}

/// A runner that sleeps briefly and records the most jobs it ever saw running at once.
fn counting_runner() -> (FnRunner, Arc<AtomicUsize>) {
    let current = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (c, p) = (current, peak.clone());
    let runner = FnRunner::new(move |_spec, _ctx| {
        let (c, p) = (c.clone(), p.clone());
        async move {
            let now = c.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(3)).await;
            c.fetch_sub(1, Ordering::SeqCst);
            Ok(WorkOutput::default())
        }
    });
    (runner, peak)
}

#[tokio::test]
async fn max_parallel_is_never_exceeded() {
    let (runner, peak) = counting_runner();
    let o = Orchestrator::builder()
        .runner("shell", runner)
        .build()
        .expect("build");
    let mut spec = PlanSpec::new("wide")
        .isolation(Isolation::None)
        .max_parallel(3);
    for i in 0..40 {
        spec = spec.job(JobSpec::new(format!("j{i:03}"), "t", shell("ok")));
    }
    let id = o.run(spec, std::env::temp_dir()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "runs exactly maxParallel at once"
    );
}

#[tokio::test]
async fn global_capacity_is_shared_by_plans() {
    let (runner, peak) = counting_runner();
    let o = Orchestrator::builder()
        .runner("shell", runner)
        .options(OrchestratorOptions::default().global_capacity(4))
        .build()
        .expect("build");
    let mut ids = Vec::new();
    for k in 0..3 {
        let mut spec = PlanSpec::new(format!("p{k}")).isolation(Isolation::None);
        for i in 0..20 {
            spec = spec.job(JobSpec::new(format!("j{i:03}"), "t", shell("ok")));
        }
        ids.push(o.run(spec, std::env::temp_dir()).await.expect("run"));
    }
    for id in &ids {
        assert_eq!(o.wait(id).await.expect("wait"), PlanStatus::Succeeded);
    }
    assert_eq!(peak.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn priority_prefers_the_longest_critical_path() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let o2 = order.clone();
    let runner = FnRunner::sync(move |_spec, ctx| {
        o2.lock().expect("lock").push(ctx.producer_id.clone());
        Ok(WorkOutput::default())
    });
    let o = Orchestrator::builder()
        .runner("shell", runner)
        .build()
        .expect("build");
    // `short` is listed first, but `long` heads a chain of three.
    let mut spec = plan(&[
        ("short", "ok", &[]),
        ("long", "ok", &[]),
        ("long2", "ok", &["long"]),
        ("long3", "ok", &["long2"]),
    ]);
    spec.max_parallel = Some(1);
    let id = o.run(spec, std::env::temp_dir()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let order = order.lock().expect("lock").clone();
    assert_eq!(order[0], "long", "{order:?}");
}

#[tokio::test]
async fn pause_starts_nothing_new_and_resume_continues() {
    let o = orchestrator(InMemoryPlanRepository::new());
    let id = o
        .run(
            plan(&[("aaa", "sleep:80", &[]), ("bbb", "ok", &["aaa"])]),
            std::env::temp_dir(),
        )
        .await
        .expect("run");
    o.pause(&id, false).await.expect("pause");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Paused);
    let r = o.status(&id).await.expect("status");
    assert_eq!(
        status_of(&r, "aaa"),
        NodeStatus::Succeeded,
        "running job finished"
    );
    assert_eq!(
        status_of(&r, "bbb"),
        NodeStatus::Ready,
        "nothing new started"
    );
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
}

#[tokio::test]
async fn pause_with_stop_requeues_running_jobs_from_their_phase() {
    let o = orchestrator(InMemoryPlanRepository::new());
    let id = o
        .run(plan(&[("aaa", "hang", &[])]), std::env::temp_dir())
        .await
        .expect("run");
    wait_until(&o, &id, |r| r.state.nodes[0].status == NodeStatus::Running).await;
    o.pause(&id, true).await.expect("pause");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Paused);
    let r = o.status(&id).await.expect("status");
    assert_eq!(r.state.nodes[0].status, NodeStatus::Ready);
    assert_eq!(r.state.nodes[0].extra.resume_from, Some(Phase::Work));
}

#[tokio::test]
async fn cancel_stops_running_jobs() {
    let o = orchestrator(InMemoryPlanRepository::new());
    let id = o
        .run(
            plan(&[("aaa", "hang", &[]), ("bbb", "ok", &["aaa"])]),
            std::env::temp_dir(),
        )
        .await
        .expect("run");
    wait_until(&o, &id, |r| r.state.nodes[0].status == NodeStatus::Running).await;
    o.cancel(&id).await.expect("cancel");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Canceled);
    let r = o.status(&id).await.expect("status");
    assert_eq!(status_of(&r, "aaa"), NodeStatus::Canceled);
    assert_eq!(status_of(&r, "bbb"), NodeStatus::Canceled);
    assert!(
        o.resume(&id).await.is_err(),
        "a canceled plan does not resume"
    );
}

#[tokio::test]
async fn force_fail_kills_a_hanging_job_and_retry_resumes() {
    let o = orchestrator(InMemoryPlanRepository::new());
    let id = o
        .run(
            plan(&[("aaa", "hang", &[]), ("bbb", "ok", &["aaa"])]),
            std::env::temp_dir(),
        )
        .await
        .expect("run");
    let err = o
        .force_fail(&id, "bbb")
        .await
        .expect_err("bbb is not running");
    assert!(err.to_string().contains("not running"), "{err}");
    assert!(o.force_fail(&id, "nope").await.is_err());
    wait_until(&o, &id, |r| r.state.nodes[0].status == NodeStatus::Running).await;
    o.force_fail(&id, "aaa").await.expect("force fail");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = o.status(&id).await.expect("status");
    let a = r.state.nodes[0].last_attempt().expect("attempt");
    assert_eq!(a.extra.failure_reason, Some(FailureReason::ForceFailed));
    assert_eq!(status_of(&r, "bbb"), NodeStatus::Blocked);
    o.retry(&id, RetryRequest::all_failed().with_work(shell("ok")))
        .await
        .expect("retry");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
}

#[tokio::test]
async fn chained_plan_starts_after_the_first_succeeds() {
    let o = orchestrator(InMemoryPlanRepository::new());
    let first = o
        .create_plan(plan(&[("aaa", "sleep:50", &[])]), std::env::temp_dir())
        .await
        .expect("create");
    let mut second = plan(&[("bbb", "ok", &[])]);
    second.resume_after_plan = Some(first.to_string());
    let second = o.run(second, std::env::temp_dir()).await.expect("run");
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(o.plan_status(&second).expect("status"), PlanStatus::Pending);
    o.start(&first).await.expect("start");
    assert_eq!(o.wait(&second).await.expect("wait"), PlanStatus::Succeeded);
    let a = o
        .status(&first)
        .await
        .expect("status")
        .state
        .ended_at
        .expect("ended");
    let b = o
        .status(&second)
        .await
        .expect("status")
        .state
        .started_at
        .expect("started");
    assert!(b >= a, "second started after first ended");
}

#[tokio::test]
async fn events_cover_transitions_phases_logs_and_status() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let runner = FnRunner::sync(|_spec, ctx| {
        ctx.log.line(
            orchestrator_core::runner::LogStream::Stdout,
            "hello from the job",
        );
        Ok(WorkOutput::default())
    });
    let o = Orchestrator::builder()
        .runner("shell", runner)
        .on_event(move |e| s2.lock().expect("lock").push(e.clone()))
        .build()
        .expect("build");
    let id = o
        .run(plan(&[("aaa", "ok", &[])]), std::env::temp_dir())
        .await
        .expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let seen = seen.lock().expect("lock").clone();
    let transitions: Vec<(NodeStatus, NodeStatus)> = seen
        .iter()
        .filter_map(|e| match e {
            OrchestratorEvent::NodeTransition { from, to, .. } => Some((*from, *to)),
            _ => None,
        })
        .collect();
    assert_eq!(
        transitions,
        [
            (NodeStatus::Pending, NodeStatus::Ready),
            (NodeStatus::Ready, NodeStatus::Scheduled),
            (NodeStatus::Scheduled, NodeStatus::Running),
            (NodeStatus::Running, NodeStatus::Succeeded)
        ]
    );
    assert!(seen.iter().any(|e| matches!(
        e,
        OrchestratorEvent::PhaseStarted {
            phase: Phase::Work,
            ..
        }
    )));
    assert!(seen
        .iter()
        .any(|e| matches!(e, OrchestratorEvent::Log { line, .. } if line == "hello from the job")));
    // The plan is announced before anything of it, and its status changes from `pending`
    // to `succeeded`, each change from where the last one left it (a change made while the
    // last was being written is announced with it), as for a plan created and then started
    // (`run` stores it started).
    assert!(
        matches!(&seen[0], OrchestratorEvent::PlanCreated { plan, .. } if *plan == id),
        "{:?}",
        seen[0]
    );
    let statuses: Vec<(PlanStatus, PlanStatus)> = seen
        .iter()
        .filter_map(|e| match e {
            OrchestratorEvent::PlanStatusChanged { from, to, .. } => Some((*from, *to)),
            _ => None,
        })
        .collect();
    let chain: Vec<PlanStatus> = statuses.iter().map(|(from, _)| *from).collect();
    let ends: Vec<PlanStatus> = statuses.iter().map(|(_, to)| *to).collect();
    assert_eq!(chain.first(), Some(&PlanStatus::Pending), "{statuses:?}");
    assert_eq!(ends.last(), Some(&PlanStatus::Succeeded), "{statuses:?}");
    assert_eq!(chain[1..], ends[..ends.len() - 1], "{statuses:?}");
    let log = o
        .repository()
        .read_log(
            &id,
            &o.status(&id).await.expect("status").state.nodes[0].id,
            Default::default(),
        )
        .await
        .expect("log");
    assert!(log.contains("hello from the job"), "{log}");
}

#[tokio::test]
async fn event_stream_delivers_plan_status() {
    use futures::StreamExt;
    let o = orchestrator(InMemoryPlanRepository::new());
    let mut events = Box::pin(o.events());
    let id = o
        .run(plan(&[("aaa", "ok", &[])]), std::env::temp_dir())
        .await
        .expect("run");
    let done = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(e) = events.next().await {
            if matches!(&e, OrchestratorEvent::PlanStatusChanged { plan, to: PlanStatus::Succeeded, .. } if *plan == id) {
                return true;
            }
        }
        false
    })
    .await
    .expect("in time");
    assert!(done);
}

#[tokio::test]
async fn reopened_plan_recovers_crashed_jobs_and_finishes() {
    let store = InMemoryPlanRepository::new();
    let o = orchestrator(store.clone());
    let id = o
        .run(
            plan(&[
                ("aaa", "ok", &[]),
                ("bbb", "hang", &["aaa"]),
                ("ccc", "ok", &["bbb"]),
            ]),
            std::env::temp_dir(),
        )
        .await
        .expect("run");
    wait_until(&o, &id, |r| r.state.nodes[1].status == NodeStatus::Running).await;
    // Simulate a crash: the stored state says `bbb` is running, but nobody runs it. A new
    // orchestrator on the same store (the old one's lease must go first) takes over.
    drop(o);
    let stored = store.load(&id).await.expect("load");
    assert_eq!(stored.state.nodes[1].status, NodeStatus::Running);
    let store2 = InMemoryPlanRepository::new();
    store2.create(&stored).await.expect("copy");
    let o2 = Orchestrator::builder()
        .repository(store2)
        .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
        .build()
        .expect("build");
    o2.open_plan(&id).await.expect("open");
    let r = o2.status(&id).await.expect("status");
    let a = r.state.nodes[1].last_attempt().expect("attempt");
    assert_eq!(
        a.extra.failure_reason,
        Some(FailureReason::Crashed),
        "{:#?}",
        r.state.nodes[1]
    );
    assert_eq!(r.state.nodes[1].status, NodeStatus::Ready);
    o2.start(&id).await.expect("start");
    assert_eq!(o2.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(
        o2.status(&id).await.expect("status").state.nodes[1]
            .attempts
            .len(),
        2
    );
}

#[tokio::test]
async fn a_second_owner_is_refused() {
    let store = InMemoryPlanRepository::new();
    let o = orchestrator(store.clone());
    let id = o
        .create_plan(plan(&[("aaa", "ok", &[])]), std::env::temp_dir())
        .await
        .expect("create");
    let other = orchestrator(store.clone());
    let err = other.open_plan(&id).await.expect_err("locked");
    assert!(err.to_string().contains("in use"), "{err}");
    o.close(&id).await.expect("close");
    other.open_plan(&id).await.expect("free after close");
}

#[tokio::test]
async fn missing_runner_fails_the_job_with_a_clear_message() {
    let o = Orchestrator::builder().build().expect("build");
    let id = o
        .run(plan(&[("aaa", "ok", &[])]), std::env::temp_dir())
        .await
        .expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = o.status(&id).await.expect("status");
    let err = r.state.nodes[0].extra.error.clone().unwrap_or_default();
    assert!(
        err.contains("no runner is registered for `shell` work"),
        "{err}"
    );
}

#[tokio::test]
async fn invalid_plans_and_options_are_refused() {
    let o = orchestrator(InMemoryPlanRepository::new());
    let err = o
        .create_plan(
            plan(&[("aaa", "ok", &["zzz"]), ("aaa", "ok", &[])]),
            std::env::temp_dir(),
        )
        .await
        .expect_err("invalid");
    let text = err.to_string();
    assert!(text.contains("zzz"), "{text}");
    let err = Orchestrator::builder()
        .options(OrchestratorOptions::default().global_capacity(0))
        .build()
        .expect_err("zero capacity");
    assert!(err.to_string().contains("global_capacity"));
    let worktree_plan = PlanSpec::new("w").job(JobSpec::new("aaa", "t", shell("ok")));
    let err = o
        .create_plan(worktree_plan, std::env::temp_dir())
        .await
        .expect_err("no git");
    assert!(err.to_string().contains("no git layer"), "{err}");
}

#[tokio::test]
async fn start_paused_waits_for_resume() {
    let o = orchestrator(InMemoryPlanRepository::new());
    let mut spec = plan(&[("aaa", "ok", &[])]);
    spec.start_paused = true;
    let id = o.run(spec, std::env::temp_dir()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Paused);
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
}

#[tokio::test]
async fn every_job_runs_exactly_once_in_dependency_order() {
    let done = Arc::new(Mutex::new(HashSet::new()));
    let d2 = done.clone();
    let spec = {
        let mut s = PlanSpec::new("layers").isolation(Isolation::None);
        for i in 0..50 {
            let deps: Vec<String> = if i >= 5 {
                vec![format!("j{:03}", i - 5), format!("j{:03}", i / 2)]
            } else {
                vec![]
            };
            s = s.job(JobSpec::new(format!("j{i:03}"), "t", shell("ok")).depends_on(deps));
        }
        s
    };
    let deps: Vec<Vec<String>> = spec.jobs.iter().map(|j| j.dependencies.clone()).collect();
    let runner = FnRunner::sync(move |_spec, ctx| {
        let mut d = d2.lock().expect("lock");
        for dep in &deps[ctx.node] {
            assert!(d.contains(dep), "{} started before {dep}", ctx.producer_id);
        }
        assert!(d.insert(ctx.producer_id.clone()), "ran twice");
        Ok(WorkOutput::default())
    });
    let o = Orchestrator::builder()
        .runner("shell", runner)
        .build()
        .expect("build");
    let id = o.run(spec, std::env::temp_dir()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(done.lock().expect("lock").len(), 50);
}

/// Fails unless `fixed` exists in the job's directory.
fn needs_fix_runner() -> FnRunner {
    FnRunner::sync(|_spec, ctx| {
        if ctx.dir.join("fixed").exists() {
            Ok(WorkOutput::default())
        } else {
            Err(WorkFailure::new("make: *** missing file `fixed`").exit_code(2))
        }
    })
}

#[derive(Debug)]
struct FixingHealer(Arc<AtomicUsize>);

#[async_trait::async_trait]
impl orchestrator_core::runner::Healer for FixingHealer {
    async fn heal(
        &self,
        request: &orchestrator_core::runner::HealRequest,
        ctx: &WorkContext,
    ) -> WorkResult {
        self.0.fetch_add(1, Ordering::SeqCst);
        assert!(request.failure.message.contains("missing file"));
        assert_eq!(request.failure.exit_code, Some(2));
        if request.round == 2 {
            std::fs::write(ctx.dir.join("fixed"), "")
                .map_err(|e| WorkFailure::new(e.to_string()))?;
        }
        Ok(WorkOutput::default())
    }
}

#[tokio::test]
async fn a_failing_shell_job_is_healed_and_the_plan_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heals = Arc::new(AtomicUsize::new(0));
    let o = Orchestrator::builder()
        .runner("shell", needs_fix_runner())
        .healer(FixingHealer(heals.clone()))
        .build()
        .expect("build");
    let id = o
        .run(
            plan(&[("aaa", "make", &[]), ("bbb", "make", &["aaa"])]),
            dir.path(),
        )
        .await
        .expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(heals.load(Ordering::SeqCst), 2, "healed once in two rounds");
    let r = o.status(&id).await.expect("status");
    // Each heal is an attempt of its own: the failure, a heal that did not fix it, a heal that did.
    let attempts = &r.state.nodes[0].attempts;
    let rounds: Vec<Option<u32>> = attempts
        .iter()
        .map(|a| a.extra.heal.as_ref().map(|h| h.round))
        .collect();
    assert_eq!(rounds, [None, Some(1), Some(2)]);
    assert_eq!(attempts[1].resumed_from, Some(Phase::Work));
    assert!(attempts[1]
        .extra
        .heal
        .as_ref()
        .is_some_and(|h| h.failure.contains("missing file")));
    assert_eq!(
        r.state.nodes[1].attempts.len(),
        1,
        "bbb found the fix in place"
    );
    for (attempt, line) in [(2, "auto-heal 1 of 4:"), (3, "auto-heal 2 of 4:")] {
        let log = o
            .repository()
            .read_log(
                &id,
                &r.state.nodes[0].id,
                orchestrator_core::repository::LogQuery::new().attempt(attempt),
            )
            .await
            .expect("log");
        assert!(log.contains(line), "attempt {attempt}: {log}");
    }
}

#[tokio::test]
async fn auto_heal_respects_opt_outs_and_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heals = Arc::new(AtomicUsize::new(0));
    let mut options = OrchestratorOptions::default();
    options.auto_heal_budget = 1;
    let o = Orchestrator::builder()
        .runner("shell", needs_fix_runner())
        .healer(FixingHealer(heals.clone()))
        .options(options)
        .build()
        .expect("build");
    let mut spec = plan(&[("aaa", "make", &[]), ("bbb", "make", &[])]);
    spec.jobs[0].extra.make_mut().auto_heal = Some(false);
    let id = o.run(spec, dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    assert_eq!(
        heals.load(Ordering::SeqCst),
        1,
        "aaa opted out; bbb got its budget of one round (which does not fix it)"
    );
    let r = o.status(&id).await.expect("status");
    assert_eq!(r.state.nodes[0].attempts.len(), 1);
    assert_eq!(
        r.state.nodes[1].attempts.len(),
        2,
        "one failure, one heal attempt"
    );
}

/// A healer that hangs (until canceled) the first time, then fixes the worktree; it records
/// the rounds it was asked for.
#[derive(Debug)]
struct SlowFirstHealer(Arc<Mutex<Vec<u32>>>);

#[async_trait::async_trait]
impl orchestrator_core::runner::Healer for SlowFirstHealer {
    async fn heal(
        &self,
        request: &orchestrator_core::runner::HealRequest,
        ctx: &WorkContext,
    ) -> WorkResult {
        let first = {
            let mut rounds = self.0.lock().unwrap_or_else(|e| e.into_inner());
            rounds.push(request.round);
            rounds.len() == 1
        };
        if first {
            ctx.cancel.cancelled().await;
            return Err(WorkFailure::canceled());
        }
        std::fs::write(ctx.dir.join("fixed"), "").map_err(|e| WorkFailure::new(e.to_string()))?;
        Ok(WorkOutput::default())
    }
}

#[tokio::test]
async fn a_heal_stopped_by_a_pause_is_done_again_in_the_same_round() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rounds = Arc::new(Mutex::new(Vec::new()));
    let mut options = OrchestratorOptions::default();
    options.auto_heal_budget = 1;
    let o = Orchestrator::builder()
        .runner("shell", needs_fix_runner())
        .healer(SlowFirstHealer(rounds.clone()))
        .options(options)
        .build()
        .expect("build");
    let id = o
        .run(plan(&[("aaa", "make", &[])]), dir.path())
        .await
        .expect("run");
    // The first heal hangs; pause with stop interrupts it.
    wait_until(&o, &id, |r| {
        r.state.nodes[0].attempts.len() == 2
            && r.state.nodes[0].attempts[1].status == AttemptStatus::Running
    })
    .await;
    wait_until(&o, &id, |_| {
        !rounds.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    })
    .await;
    o.pause(&id, true).await.expect("pause");
    wait_until(&o, &id, |r| {
        r.state.nodes[0].attempts[1].status != AttemptStatus::Running
    })
    .await;
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    // Budget 1: the interrupted heal did not use it up, and was done again as round 1.
    assert_eq!(*rounds.lock().unwrap_or_else(|e| e.into_inner()), [1, 1]);
    let r = o.status(&id).await.expect("status");
    let heals: Vec<Option<u32>> = r.state.nodes[0]
        .attempts
        .iter()
        .map(|a| a.extra.heal.as_ref().map(|h| h.round))
        .collect();
    assert_eq!(heals, [None, Some(1), Some(1)]);
}

/// A plan large enough for its creation to split work over two threads (its producerIds
/// indexed while its jobs are checked, its nodes made while it is validated) is stored whole:
/// one pending node per job, each with an id of its own. A duplicate producerId in its last
/// job refuses it, naming both jobs, and stores nothing.
#[tokio::test]
async fn a_large_plan_is_stored_whole_or_refused_whole() {
    let count = orchestrator_core::parallel::LARGE_PLAN;
    let plan = |last: String| {
        let mut spec = PlanSpec::new("large").isolation(Isolation::None);
        spec.jobs = (0..count)
            .map(|i| {
                let id = if i + 1 == count {
                    last.clone()
                } else {
                    format!("job-{i}")
                };
                let job = JobSpec::new(id, "t", shell("ok"));
                match i {
                    0 => job,
                    _ => job.depends_on([format!("job-{}", i / 2)]),
                }
            })
            .collect();
        spec
    };
    let store = InMemoryPlanRepository::new();
    let o = orchestrator(store.clone());
    let dir = std::env::temp_dir();
    let duplicate = o.create_plan(plan("job-7".into()), &dir).await;
    let Err(Error::Invalid(problems)) = duplicate else {
        panic!("a repeated producerId must be refused: {duplicate:?}");
    };
    let last = count - 1;
    let texts: Vec<String> = problems.0.iter().map(|p| p.to_string()).collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(
        texts[0].contains(&format!("jobs[7] and jobs[{last}]")),
        "{texts:?}"
    );
    assert!(store.list().await.expect("list").plans.is_empty());

    let id = o
        .create_plan(plan(format!("job-{last}")), &dir)
        .await
        .expect("a valid large plan");
    let record = store.load(&id).await.expect("stored");
    assert_eq!(record.state.nodes.len(), count);
    assert!(record
        .state
        .nodes
        .iter()
        .all(|n| n.status == NodeStatus::Pending && n.attempts.is_empty()));
    let ids: HashSet<&str> = record.state.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids.len(), count, "every node has an id of its own");
    assert_eq!(o.plan_status(&id).expect("status"), PlanStatus::Pending);
}
