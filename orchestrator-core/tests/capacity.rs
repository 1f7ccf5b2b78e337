//! The engine with a shared capacity (`OrchestratorBuilder::capacity`): it bounds the jobs of
//! every orchestrator holding it, on top of each one's `global_capacity` and each plan's
//! `maxParallel`, and a plan waiting for a slot still serves commands.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::capacity::ProcessSlots;
use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::{FnRunner, Orchestrator, OrchestratorOptions, PlanStatus, WorkOutput};

/// A runner that counts the jobs running at once (across every orchestrator it is given to)
/// and keeps the highest count.
fn counting_runner(now: Arc<AtomicUsize>, most: Arc<AtomicUsize>) -> FnRunner {
    FnRunner::new(move |_spec, _ctx| {
        let (now, most) = (now.clone(), most.clone());
        async move {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(15)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            Ok(WorkOutput::default())
        }
    })
}

fn wide(name: &str, jobs: usize) -> PlanSpec {
    (0..jobs).fold(PlanSpec::new(name).isolation(Isolation::None), |spec, i| {
        spec.job(JobSpec::new(
            format!("job{i:03}"),
            "t",
            WorkSpec::shell("ok"),
        ))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_capacity_bounds_every_orchestrator_holding_it() {
    let (now, most) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
    let shared = ProcessSlots::new(3).expect("slots");
    let build = || {
        Orchestrator::builder()
            .runner(
                "shell",
                counting_runner(Arc::clone(&now), Arc::clone(&most)),
            )
            .capacity(shared.clone())
            .options(OrchestratorOptions::default().global_capacity(8))
            .build()
            .expect("build")
    };
    let (a, b) = (build(), build());
    let ia = a
        .run(wide("a", 12), std::env::temp_dir())
        .await
        .expect("run a");
    let ib = b
        .run(wide("b", 12), std::env::temp_dir())
        .await
        .expect("run b");
    assert_eq!(a.wait(&ia).await.expect("wait a"), PlanStatus::Succeeded);
    assert_eq!(b.wait(&ib).await.expect("wait b"), PlanStatus::Succeeded);
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 3, "{most} jobs at once with 3 shared slots");
    assert_eq!(most, 3, "the shared slots were never all used");
}

#[tokio::test]
async fn the_smaller_of_global_capacity_and_max_parallel_still_applies() {
    for (global, max_parallel, expected) in [(2, None, 2), (8, Some(1), 1)] {
        let (now, most) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
        let o = Orchestrator::builder()
            .runner("shell", counting_runner(now, Arc::clone(&most)))
            .capacity(ProcessSlots::new(5).expect("slots"))
            .options(OrchestratorOptions::default().global_capacity(global))
            .build()
            .expect("build");
        let mut spec = wide("p", 10);
        spec.max_parallel = max_parallel;
        let id = o.run(spec, std::env::temp_dir()).await.expect("run");
        assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
        assert_eq!(most.load(Ordering::SeqCst), expected, "global {global}");
    }
}

#[tokio::test]
async fn a_plan_waiting_for_a_slot_still_answers_and_pauses() {
    let shared = ProcessSlots::new(1).expect("slots");
    let held = {
        use orchestrator_core::Capacity;
        shared.try_acquire().expect("try").expect("free")
    };
    let o = Orchestrator::builder()
        .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
        .capacity(shared)
        .build()
        .expect("build");
    let id = o
        .run(wide("p", 3), std::env::temp_dir())
        .await
        .expect("run");
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Nothing can start, but the actor's turns go on.
    assert_eq!(o.plan_status(&id).expect("status"), PlanStatus::Running);
    o.pause(&id, false)
        .await
        .expect("pause while waiting for a slot");
    drop(held);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(o.plan_status(&id).expect("status"), PlanStatus::Paused);
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
}
