//! Editing plans: scaffolding, finalize, and reshaping live plans while jobs run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use orchestrator_core::git::memory::MemoryGit;
use orchestrator_core::plan::{Isolation, JobSpec, JobUpdate, PlanEdit, PlanSpec, WorkSpec};
use orchestrator_core::runner::{WorkFailure, WorkResult};
use orchestrator_core::state::PlanRecord;
use orchestrator_core::{
    Error, FnRunner, InMemoryPlanRepository, NodeStatus, Orchestrator, PlanId, PlanRepository,
    PlanStatus, RetryRequest, WorkContext, WorkOutput,
};

/// Jobs whose shell command is their behaviour: `ok`, `fail`, or `wait:<path>` (runs until
/// the file exists).
fn scripted() -> FnRunner {
    FnRunner::new(|spec: WorkSpec, ctx: WorkContext| async move {
        let WorkSpec::Shell(s) = spec else {
            return Err(WorkFailure::new("not shell"));
        };
        behave(&s.command, &ctx).await
    })
}

async fn behave(cmd: &str, ctx: &WorkContext) -> WorkResult {
    if let Some(file) = cmd.strip_prefix("wait:") {
        let path = PathBuf::from(file);
        while !path.exists() {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
                () = ctx.cancel.cancelled() => return Err(WorkFailure::canceled()),
            }
        }
        return Ok(WorkOutput::default());
    }
    match cmd {
        "fail" => Err(WorkFailure::new("scripted failure").exit_code(1)),
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

fn job(id: &str, cmd: &str, deps: &[&str]) -> JobSpec {
    let mut job = JobSpec::new(id, format!("task {id}"), WorkSpec::shell(cmd))
        .depends_on(deps.iter().copied());
    // In worktree plans the scripted jobs change nothing.
    job.extra.make_mut().expects_no_changes = true;
    job
}

fn wait(dir: &Path, file: &str) -> String {
    format!("wait:{}", dir.join(file).display())
}

fn plan(jobs: &[(&str, &str, &[&str])]) -> PlanSpec {
    jobs.iter().fold(
        PlanSpec::new("reshape").isolation(Isolation::None),
        |spec, (id, cmd, deps)| spec.job(job(id, cmd, deps)),
    )
}

fn index(record: &PlanRecord, producer: &str) -> usize {
    record
        .spec
        .jobs
        .iter()
        .position(|j| j.producer_id == producer)
        .unwrap_or_else(|| panic!("no job {producer}"))
}

fn status_of(record: &PlanRecord, producer: &str) -> NodeStatus {
    record.state.nodes[index(record, producer)].status
}

fn deps_of(record: &PlanRecord, producer: &str) -> Vec<String> {
    record.spec.jobs[index(record, producer)]
        .dependencies
        .clone()
}

async fn wait_for(o: &Orchestrator, id: &PlanId, producer: &str, status: NodeStatus) {
    for _ in 0..2000 {
        let r = o.status(id).await.expect("status");
        if status_of(&r, producer) == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("{producer} never became {status}");
}

fn release(dir: &Path, file: &str) {
    std::fs::write(dir.join(file), "go").expect("write release file");
}

fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    (dir, path)
}

#[tokio::test]
async fn scaffold_add_finalize_run() {
    let (_t, dir) = temp();
    let store = InMemoryPlanRepository::new();
    let o = orchestrator(store.clone());
    let id = o
        .scaffold_plan(PlanSpec::new("built").isolation(Isolation::None), &dir)
        .await
        .expect("scaffold");
    assert_eq!(o.plan_status(&id).expect("status"), PlanStatus::Scaffolding);
    let refused = o
        .start(&id)
        .await
        .expect_err("cannot start while scaffolding");
    assert!(refused.to_string().contains("finalize"), "{refused}");
    let finalize_empty = o.finalize_plan(&id).await.expect_err("no jobs");
    assert!(
        matches!(finalize_empty, Error::Invalid(_)),
        "{finalize_empty}"
    );

    o.edit_plan(
        &id,
        vec![PlanEdit::AddJob {
            job: Box::new(job("aaa", "ok", &[])),
        }],
    )
    .await
    .expect("add aaa");
    o.edit_plan(
        &id,
        vec![
            PlanEdit::AddJob {
                job: Box::new(job("bbb", "ok", &["aaa"])),
            },
            PlanEdit::AddJob {
                job: Box::new(job("ccc", "ok", &["aaa"])),
            },
            PlanEdit::AddJob {
                job: Box::new(job("ddd", "ok", &["bbb", "ccc"])),
            },
        ],
    )
    .await
    .expect("add the rest");
    // An unknown dependency is refused, and nothing of the batch is applied.
    let bad = o
        .edit_plan(
            &id,
            vec![
                PlanEdit::AddJob {
                    job: Box::new(job("eee", "ok", &[])),
                },
                PlanEdit::AddJob {
                    job: Box::new(job("fff", "ok", &["nope"])),
                },
            ],
        )
        .await
        .expect_err("unknown dependency");
    assert!(bad.to_string().contains("unknown dependency"), "{bad}");
    let r = o.status(&id).await.expect("status");
    assert_eq!(r.spec.jobs.len(), 4);
    assert_eq!(
        store.load(&id).await.expect("stored").spec.jobs.len(),
        4,
        "the store has the scaffolded jobs"
    );

    o.finalize_plan(&id).await.expect("finalize");
    o.start(&id).await.expect("start");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let r = store.load(&id).await.expect("stored");
    assert!(r
        .state
        .nodes
        .iter()
        .all(|n| n.status == NodeStatus::Succeeded));
}

#[tokio::test]
async fn reshape_while_jobs_run_keeps_their_progress() {
    let (_t, dir) = temp();
    let store = InMemoryPlanRepository::new();
    let o = orchestrator(store.clone());
    // `doomed` sits before the running `slow` in node order, so removing it moves `slow`.
    let (gate, slow) = (wait(&dir, "gate"), wait(&dir, "slow"));
    let spec = plan(&[
        ("gate", &gate, &[]),
        ("doomed", "ok", &["gate"]),
        ("slow", &slow, &[]),
        ("last", "ok", &["gate", "slow"]),
    ]);
    let id = o.run(spec, &dir).await.expect("run");
    wait_for(&o, &id, "gate", NodeStatus::Running).await;
    wait_for(&o, &id, "slow", NodeStatus::Running).await;
    let before = o.status(&id).await.expect("status");
    let slow_id = before.state.nodes[index(&before, "slow")].id.clone();

    o.edit_plan(
        &id,
        vec![
            PlanEdit::RemoveJob {
                job: "doomed".into(),
            },
            PlanEdit::AddAfter {
                job: Box::new(job("after-gate", "ok", &[])),
                after: "gate".into(),
            },
            PlanEdit::AddBefore {
                job: Box::new(job("before-last", "ok", &[])),
                before: "last".into(),
            },
        ],
    )
    .await
    .expect("reshape");
    let r = o.status(&id).await.expect("status");
    assert_eq!(index(&r, "slow"), 1, "slow moved down one slot");
    assert_eq!(r.state.nodes[1].id, slow_id, "with its identity");
    assert_eq!(status_of(&r, "slow"), NodeStatus::Running);
    assert_eq!(deps_of(&r, "after-gate"), ["gate"]);
    assert_eq!(deps_of(&r, "last"), ["before-last"]);
    assert_eq!(deps_of(&r, "before-last"), ["after-gate", "slow"]);

    // Removing or rewiring a running job is refused and changes nothing.
    let e = o
        .edit_plan(&id, vec![PlanEdit::RemoveJob { job: "slow".into() }])
        .await
        .expect_err("running");
    assert!(matches!(e, Error::Edit { .. }), "{e}");
    assert!(e.to_string().contains("running"), "{e}");

    release(&dir, "slow");
    release(&dir, "gate");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let r = store.load(&id).await.expect("stored");
    assert_eq!(r.spec.jobs.len(), 5);
    for n in &r.state.nodes {
        assert_eq!(n.status, NodeStatus::Succeeded);
        assert_eq!(n.attempts.len(), 1, "each job ran once");
    }
    // The running job's progress landed on it, not on the node that took its old slot.
    let slow = &r.state.nodes[index(&r, "slow")];
    assert_eq!(slow.id, slow_id);
    assert!(!slow.attempts[0].phases.is_empty());
}

#[tokio::test]
async fn failed_jobs_can_be_fixed_or_removed() {
    let (_t, dir) = temp();
    let store = InMemoryPlanRepository::new();
    let o = orchestrator(store.clone());
    let spec = plan(&[
        ("aaa", "ok", &[]),
        ("bad", "fail", &["aaa"]),
        ("ccc", "ok", &["bad"]),
        ("zzz", "fail", &[]),
        ("yyy", "ok", &["zzz"]),
    ]);
    let id = o.run(spec, &dir).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = o.status(&id).await.expect("status");
    assert_eq!(status_of(&r, "ccc"), NodeStatus::Blocked);

    // Fix `bad` for its retry; drop `zzz`, which unblocks `yyy`.
    o.edit_plan(
        &id,
        vec![
            PlanEdit::UpdateJob {
                job: "bad".into(),
                update: Box::new(JobUpdate {
                    work: Some(WorkSpec::shell("ok")),
                    ..JobUpdate::default()
                }),
            },
            PlanEdit::RemoveJob { job: "zzz".into() },
        ],
    )
    .await
    .expect("edit");
    let r = o.status(&id).await.expect("status");
    assert_eq!(status_of(&r, "bad"), NodeStatus::Failed);
    assert_eq!(status_of(&r, "ccc"), NodeStatus::Blocked);
    assert!(deps_of(&r, "yyy").is_empty());
    o.retry(&id, RetryRequest::all_failed())
        .await
        .expect("retry");
    o.start(&id).await.expect("continue");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let r = store.load(&id).await.expect("stored");
    assert_eq!(r.state.nodes[index(&r, "bad")].attempts.len(), 2);
    assert_eq!(status_of(&r, "yyy"), NodeStatus::Succeeded);

    // A succeeded plan cannot change.
    let e = o
        .edit_plan(
            &id,
            vec![PlanEdit::AddJob {
                job: Box::new(job("late", "ok", &[])),
            }],
        )
        .await
        .expect_err("succeeded");
    assert!(e.to_string().contains("succeeded"), "{e}");
}

#[tokio::test]
async fn a_cycle_is_refused_and_the_plan_is_unchanged() {
    let (_t, dir) = temp();
    let o = orchestrator(InMemoryPlanRepository::new());
    let mut spec = plan(&[("aaa", "ok", &[]), ("bbb", "ok", &["aaa"])]);
    spec.start_paused = true;
    let id = o.run(spec, &dir).await.expect("run");
    let e = o
        .edit_plan(
            &id,
            vec![PlanEdit::UpdateDeps {
                job: "aaa".into(),
                dependencies: vec!["bbb".into()],
            }],
        )
        .await
        .expect_err("cycle");
    assert!(
        e.to_string().contains("aaa -> bbb -> aaa") || e.to_string().contains("bbb -> aaa -> bbb"),
        "{e}"
    );
    let r = o.status(&id).await.expect("status");
    assert!(deps_of(&r, "aaa").is_empty());
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
}

#[tokio::test]
async fn in_worktree_plans_a_running_job_may_not_become_a_leaf() {
    let (_t, dir) = temp();
    let repo = dir.join("repo");
    let git = MemoryGit::new();
    git.init_repo(&repo, "main", &[("README.md", "hello\n")])
        .expect("init");
    let o = Orchestrator::builder()
        .git(git)
        .runner("shell", scripted())
        .build()
        .expect("build");
    let mut spec = plan(&[("aaa", &wait(&dir, "aaa"), &[]), ("bbb", "ok", &["aaa"])]);
    spec.isolation = Isolation::Worktree;
    let id = o.run(spec, &repo).await.expect("run");
    wait_for(&o, &id, "aaa", NodeStatus::Running).await;
    let e = o
        .edit_plan(&id, vec![PlanEdit::RemoveJob { job: "bbb".into() }])
        .await
        .expect_err("would skip the merge into the snapshot");
    assert!(e.to_string().contains("leaf"), "{e}");
    release(&dir, "aaa");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
}

/// A job's completion and a reshape that removes nodes before it, handled in one actor turn
/// with an event subscriber: the completion's events are published with the indices they were
/// recorded with, and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reshape_in_the_same_turn_as_a_completion_keeps_events_and_state() {
    use std::sync::{Arc, Mutex, OnceLock};

    let (_t, dir) = temp();
    let gate = dir.join("gate");
    let cell: Arc<OnceLock<(Orchestrator, PlanId)>> = Arc::new(OnceLock::new());
    let fired = Arc::new(Mutex::new(false));
    let edited: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let (c, f, g, e) = (cell.clone(), fired.clone(), gate.clone(), edited.clone());
    let o = Orchestrator::builder()
        .runner("shell", scripted())
        .on_event(move |event| {
            let orchestrator_core::OrchestratorEvent::PhaseStarted { node: 0, .. } = event else {
                return;
            };
            let mut fired = f.lock().unwrap_or_else(|p| p.into_inner());
            if *fired {
                return;
            }
            *fired = true;
            let _ = std::fs::write(&g, "go");
            let (c, e) = (c.clone(), e.clone());
            let handle = tokio::runtime::Handle::current();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                handle.spawn(async move {
                    if let Some((o, id)) = c.get() {
                        let r = o
                            .edit_plan(
                                id,
                                vec![
                                    PlanEdit::RemoveJob { job: "ppp".into() },
                                    PlanEdit::RemoveJob { job: "qqq".into() },
                                ],
                            )
                            .await;
                        *e.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("{r:?}"));
                    }
                });
            });
            // Hold the actor so that aaa's completion and the edit arrive in one turn.
            std::thread::sleep(Duration::from_millis(300));
        })
        .build()
        .expect("build");
    let spec = plan(&[
        ("aaa", &wait(&dir, "gate"), &[]),
        ("ppp", "ok", &["aaa"]),
        ("qqq", "ok", &["aaa"]),
        ("bbb", "ok", &["aaa"]),
    ]);
    let id = o.create_plan(spec, &dir).await.expect("create");
    cell.set((o.clone(), id.clone())).ok();
    o.start(&id).await.expect("start");
    let status = tokio::time::timeout(Duration::from_secs(10), o.wait(&id))
        .await
        .expect("the plan ends")
        .expect("the engine is alive");
    assert_eq!(status, PlanStatus::Succeeded);
    let r = o.status(&id).await.expect("status");
    assert_eq!(r.spec.jobs.len(), 2);
    assert_eq!(status_of(&r, "aaa"), NodeStatus::Succeeded);
    assert_eq!(r.state.nodes[index(&r, "aaa")].attempts.len(), 1);
    assert_eq!(
        edited.lock().unwrap_or_else(|p| p.into_inner()).as_deref(),
        Some("Ok(())")
    );
}

#[tokio::test]
async fn new_work_on_a_job_that_failed_later_runs_on_retry() {
    let (_t, dir) = temp();
    let store = InMemoryPlanRepository::new();
    let o = orchestrator(store.clone());
    let mut spec = plan(&[("aaa", "ok", &[])]);
    spec.jobs[0].extra.make_mut().postchecks = Some(Box::new(WorkSpec::shell("fail")));
    let id = o.run(spec, &dir).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    o.edit_plan(
        &id,
        vec![PlanEdit::UpdateJob {
            job: "aaa".into(),
            update: Box::new(JobUpdate {
                work: Some(WorkSpec::shell("ok")),
                postchecks: Some(WorkSpec::shell("ok")),
                ..JobUpdate::default()
            }),
        }],
    )
    .await
    .expect("edit");
    o.retry(&id, RetryRequest::all_failed())
        .await
        .expect("retry");
    o.start(&id).await.expect("continue");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let r = store.load(&id).await.expect("stored");
    let attempts = &r.state.nodes[0].attempts;
    assert_eq!(
        attempts[0].extra.failed_phase,
        Some(orchestrator_core::Phase::Postchecks)
    );
    assert_eq!(
        attempts[1].resumed_from,
        Some(orchestrator_core::Phase::Work),
        "the new work runs, not only the checks after it"
    );
}
