//! A driver for the controllers' unit tests: asks a controller, "runs" the sub-jobs it
//! spawns with a scripted answer, and asks again, until it is done or failed — the engine's
//! loop without the engine.

use orchestrator_core::composite::{ChildFacts, CompositeFacts, Controller, Decision};
use orchestrator_core::plan::{JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::NodeStatus;

/// What a drive ended with.
pub(crate) struct Drive {
    /// The final decision (Done, Keep or Failed).
    pub(crate) decision: Decision,
    /// Every sub-job spawned, in order.
    pub(crate) spawned: Vec<JobSpec>,
    /// The progress shown after each decision that spawned.
    pub(crate) progress: Vec<String>,
    /// The sub-jobs run again, in order.
    pub(crate) retried: Vec<String>,
}

impl Drive {
    pub(crate) fn ids(&self) -> Vec<&str> {
        self.spawned
            .iter()
            .map(|j| j.producer_id.as_str())
            .collect()
    }

    /// The failure reason (panics when the drive did not fail).
    pub(crate) fn reason(&self) -> &str {
        match &self.decision {
            Decision::Failed { reason } => reason,
            other => panic!("not failed: {other:?}"),
        }
    }

    /// The final output, parsed (panics without one).
    pub(crate) fn output(&self) -> serde_json::Value {
        let text = match &self.decision {
            Decision::Done { output } | Decision::Keep { output, .. } => output.clone(),
            other => panic!("not done: {other:?}"),
        };
        serde_json::from_str(&text.expect("an output")).expect("JSON")
    }
}

/// The instructions of an agent sub-job (empty for other work).
pub(crate) fn instructions(job: &JobSpec) -> &str {
    match &job.work {
        WorkSpec::Agent(a) => a.instructions.as_deref().unwrap_or(""),
        _ => "",
    }
}

/// The facts of `job` with the sub-jobs `done` (producerId, status, output, attempts).
fn facts_of<'a>(
    plan: &'a PlanSpec,
    job: &'a JobSpec,
    done: &'a [(String, NodeStatus, String, u32)],
) -> CompositeFacts<'a> {
    let children = done
        .iter()
        .map(|(id, status, out, n)| ChildFacts::new(id, *status, Some(out.as_str())).attempts(*n))
        .collect();
    CompositeFacts::new(plan, job)
        .commit("base")
        .children(children)
}

/// Runs sub-job `j` of `parent` with `answer`, its output judged by the controller's check.
fn run(
    controller: &dyn Controller,
    parent: &JobSpec,
    j: &JobSpec,
    answer: &mut impl FnMut(&JobSpec) -> (NodeStatus, String),
) -> (NodeStatus, String) {
    let (status, out) = answer(j);
    let status = match status {
        NodeStatus::Succeeded if controller.check(parent, j, Some(&out)).is_err() => {
            NodeStatus::Failed
        }
        other => other,
    };
    (status, out)
}

/// Drives `controller` on a plan whose only job has `work`, answering each spawned sub-job
/// with `answer` (its status and output); at most 200 decisions.
pub(crate) fn drive(
    controller: &dyn Controller,
    work: serde_json::Value,
    mut answer: impl FnMut(&JobSpec) -> (NodeStatus, String),
) -> Drive {
    let work: WorkSpec = serde_json::from_value(work).expect("work");
    let job = JobSpec::new("team", "the team", work);
    let plan = PlanSpec::new("p").job(job.clone());
    let mut done: Vec<(String, NodeStatus, String, u32)> = Vec::new();
    let mut spawned = Vec::new();
    let mut progress = Vec::new();
    let mut retried = Vec::new();
    for _ in 0..200 {
        match controller.decide(&facts_of(&plan, &job, &done)) {
            Decision::Spawn(jobs) => {
                for j in &jobs {
                    assert_eq!(j.extra.parent.as_deref(), Some("team"), "{}", j.producer_id);
                    let (status, out) = run(controller, &job, j, &mut answer);
                    done.push((j.producer_id.clone(), status, out, 1));
                }
                spawned.extend(jobs);
                progress.extend(controller.progress(&facts_of(&plan, &job, &done)));
            }
            Decision::Retry {
                jobs,
                after_seconds,
            } => {
                assert!(after_seconds > 0.0, "a back-off");
                for id in jobs {
                    let j = spawned
                        .iter()
                        .find(|j: &&JobSpec| j.producer_id == id)
                        .expect("a retried sub-job was spawned")
                        .clone();
                    let (status, out) = run(controller, &job, &j, &mut answer);
                    let entry = done.iter_mut().find(|d| d.0 == id).expect("ran");
                    assert_eq!(
                        entry.1,
                        NodeStatus::Failed,
                        "only failed sub-jobs are retried"
                    );
                    *entry = (id, status, out, entry.3 + 1);
                    retried.push(j.producer_id.clone());
                }
            }
            decision => {
                return Drive {
                    retried,
                    decision,
                    spawned,
                    progress,
                }
            }
        }
    }
    panic!(
        "no end after 200 decisions: {:?}",
        spawned.iter().map(|j| &j.producer_id).collect::<Vec<_>>()
    );
}
