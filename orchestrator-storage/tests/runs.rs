//! Plans run through the file store: what `Orchestrator::run` writes before it returns.

mod common;

use std::sync::Arc;

use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::{
    FnRunner, NodeStatus, Orchestrator, PlanId, PlanRepository, PlanStatus, WorkOutput,
};
use orchestrator_storage::FsPlanRepository;
use tokio::sync::Semaphore;

/// The text of the snapshot the plan's creation wrote (`plan.json`, before any compaction).
fn created_snapshot(store: &FsPlanRepository, id: &PlanId) -> String {
    let dir = store.plan_dir(id).expect("a plan folder");
    std::fs::read_to_string(dir.join("plan.json")).expect("plan.json")
}

/// An orchestrator on `store` whose jobs each wait for a permit of `gate`.
fn gated(store: &FsPlanRepository, gate: &Arc<Semaphore>) -> Orchestrator {
    let gate = gate.clone();
    Orchestrator::builder()
        .repository(store.clone())
        .runner(
            "shell",
            FnRunner::new(move |_, _| {
                let gate = gate.clone();
                async move {
                    let permit = gate.acquire().await.expect("gate open");
                    permit.forget();
                    Ok(WorkOutput::default())
                }
            }),
        )
        .build()
        .expect("build")
}

fn two_jobs(name: &str) -> PlanSpec {
    PlanSpec::new(name)
        .isolation(Isolation::None)
        .job(JobSpec::new("first", "First", WorkSpec::shell("true")))
        .job(JobSpec::new("second", "Second", WorkSpec::shell("true")).depends_on(["first"]))
}

#[tokio::test]
async fn a_plan_run_at_once_is_stored_started_and_a_chained_one_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::new(dir.path().join("store"));
    let gate = Arc::new(Semaphore::new(0));
    let o = gated(&store, &gate);

    // Its creation is its start: the snapshot written before `run` returned says it started,
    // with its first job past pending, and nothing of the start is left for the journal.
    let id = o.run(two_jobs("at once"), dir.path()).await.expect("run");
    let snapshot = created_snapshot(&store, &id);
    assert!(snapshot.contains("\"startedAt\""), "{snapshot}");
    let stored = FsPlanRepository::new(dir.path().join("store"))
        .load(&id)
        .await
        .expect("load");
    assert!(stored.state.started_at.is_some());
    assert_ne!(stored.state.nodes[0].status, NodeStatus::Pending);
    assert_eq!(stored.state.nodes[1].status, NodeStatus::Pending);

    // A plan chained to one that has not succeeded waits: it is stored as created, and
    // starts (through the journal) once the first plan succeeds.
    let mut chained = two_jobs("chained");
    chained.resume_after_plan = Some(id.to_string());
    let next = o.run(chained, dir.path()).await.expect("run chained");
    let snapshot = created_snapshot(&store, &next);
    assert!(!snapshot.contains("\"startedAt\""), "{snapshot}");
    assert_eq!(o.plan_status(&next).expect("status"), PlanStatus::Pending);

    gate.add_permits(4);
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(o.wait(&next).await.expect("wait"), PlanStatus::Succeeded);
    for plan in [&id, &next] {
        o.close(plan).await.expect("close");
        let done = FsPlanRepository::new(dir.path().join("store"))
            .load(plan)
            .await
            .expect("reload");
        assert_eq!(done.status(), PlanStatus::Succeeded);
        assert!(done.state.started_at.is_some());
    }
}

/// `n` jobs, each depending on the one before.
fn chain(name: &str, n: usize) -> PlanSpec {
    let mut spec = PlanSpec::new(name).isolation(Isolation::None);
    for i in 0..n {
        let mut job = JobSpec::new(format!("job-{i}"), "T", WorkSpec::shell("true"));
        if i > 0 {
            job = job.depends_on([format!("job-{}", i - 1)]);
        }
        spec = spec.job(job);
    }
    spec
}

/// The names in the store's `plans` folder, hidden ones (creations under way) too.
fn plan_folders(store: &FsPlanRepository) -> Vec<String> {
    common::files_in(&store.root().join("plans"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_plan_is_written_while_it_is_checked_and_nothing_of_an_invalid_one_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::new(dir.path().join("store"));
    let gate = Arc::new(Semaphore::new(0));
    let o = gated(&store, &gate);

    // 2,000 jobs, the last depending on a job that does not exist: refused, and neither a
    // plan folder nor the hidden folder it was written into is left.
    let mut bad = chain("bad", 2_000);
    bad.jobs[1_999].dependencies.push("missing".into());
    let refused = o.run(bad, dir.path()).await;
    match refused {
        Err(orchestrator_core::Error::Invalid(problems)) => {
            assert_eq!(problems.0.len(), 1, "{problems:?}");
            assert_eq!(problems.0[0].value, "missing", "{problems:?}");
        }
        other => panic!("an unknown dependency: {other:?}"),
    }
    assert_eq!(plan_folders(&store), Vec::<String>::new());
    assert!(store.list().await.expect("list").plans.is_empty());

    // A valid one is stored before `run` returns, not started (the start follows through
    // the journal), and runs to the end.
    let id = o.run(chain("good", 2_000), dir.path()).await.expect("run");
    assert_eq!(plan_folders(&store), vec![id.to_string()]);
    let snapshot = created_snapshot(&store, &id);
    assert!(!snapshot.contains("\"startedAt\""), "{snapshot:.300}");
    let stored = FsPlanRepository::new(dir.path().join("store"))
        .load(&id)
        .await
        .expect("load");
    assert!(stored.state.started_at.is_some(), "the start is stored");
    assert_eq!(stored.state.nodes.len(), 2_000);
    gate.add_permits(2_000);
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    o.close(&id).await.expect("close");
    let done = FsPlanRepository::new(dir.path().join("store"))
        .load(&id)
        .await
        .expect("reload");
    assert_eq!(done.status(), PlanStatus::Succeeded);
    assert_eq!(plan_folders(&store), vec![id.to_string()]);
}
