//! Helpers shared by the engine tests: an orchestrator whose shell jobs record their
//! producerIds, on a given in-memory store.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use orchestrator_core::plan::PlanSpec;
use orchestrator_core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, PlanId, PlanStatus, WorkOutput,
};

/// The producerIds of the shell jobs that ran, in order.
pub type Ran = Arc<Mutex<Vec<String>>>;

/// An orchestrator on `repo` whose shell jobs succeed at once, recording themselves in `ran`.
pub fn recording(repo: &InMemoryPlanRepository, ran: &Ran) -> Orchestrator {
    let ran = ran.clone();
    Orchestrator::builder()
        .repository(repo.clone())
        .runner(
            "shell",
            FnRunner::sync(move |_, ctx| {
                ran.lock().expect("lock").push(ctx.producer_id.clone());
                Ok(WorkOutput::default())
            }),
        )
        .build()
        .expect("build")
}

/// What ran so far.
pub fn ran(r: &Ran) -> Vec<String> {
    r.lock().expect("lock").clone()
}

/// Runs `plan` in `dir` until it is `waiting`; panics when it ends otherwise.
pub async fn run_until_waiting(o: &Orchestrator, plan: PlanSpec, dir: &std::path::Path) -> PlanId {
    let id = o.run(plan, dir).await.expect("run");
    assert_eq!(
        o.wait_or_waiting(&id).await.expect("wait"),
        PlanStatus::Waiting
    );
    id
}
