//! Property test of waiting (SPEC §12): random DAGs whose gated jobs (`approval: before`) are
//! approved or rejected at random, in random order, and whose timer jobs wait random
//! deadlines (some gated too: approval first, then the timer), while other jobs run; the plan
//! always ends in the state a reference model predicts: a rejected job fails with reason
//! `rejected`, everything downstream of it is blocked, every other job succeeds, no gated job
//! gated `before` runs before it is approved, one gated `after` ran its phases once (approved
//! or rejected) before the decision, no timer job starts before its deadline, and a timer job
//! runs no work.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use orchestrator_core::plan::{Approval, Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::state::{FailureReason, WaitingFor};
use orchestrator_core::{FnRunner, NodeStatus, Orchestrator, PlanStatus, WorkOutput};

#[derive(Debug, Clone)]
struct Case {
    /// deps[i]: earlier nodes node i depends on.
    deps: Vec<Vec<usize>>,
    /// None: not gated; Some(true): approved; Some(false): rejected.
    gate: Vec<Option<bool>>,
    /// Some(ms): a timer job waiting that long.
    timer: Vec<Option<u16>>,
    /// A gated job is gated `after` its phases (else `before` it starts).
    after: Vec<bool>,
    /// The order decisions are taken among the jobs waiting at a time (a seed).
    order: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=24).prop_flat_map(|n| {
        let deps = (0..n)
            .map(|i| {
                if i == 0 {
                    Just(Vec::new()).boxed()
                } else {
                    proptest::collection::vec(0..i, 0..=2.min(i)).boxed()
                }
            })
            .collect::<Vec<_>>();
        let gate = proptest::collection::vec(
            prop_oneof![6 => Just(None), 3 => Just(Some(true)), 1 => Just(Some(false))],
            n,
        );
        let timer = proptest::collection::vec(
            prop_oneof![3 => Just(None), 1 => (0u16..60).prop_map(Some)],
            n,
        );
        let after = proptest::collection::vec(any::<bool>(), n);
        (deps, gate, timer, after, any::<u64>()).prop_map(|(deps, gate, timer, after, order)| {
            Case {
                deps,
                gate,
                timer,
                after,
                order,
            }
        })
    })
}

fn name(i: usize) -> String {
    format!("job-{i:03}")
}

/// The model: per job, succeeded / failed (rejected) / blocked.
fn expected(c: &Case) -> Vec<NodeStatus> {
    let mut out: Vec<NodeStatus> = Vec::with_capacity(c.deps.len());
    for (i, deps) in c.deps.iter().enumerate() {
        let upstream_bad = deps
            .iter()
            .any(|&d| matches!(out[d], NodeStatus::Failed | NodeStatus::Blocked));
        out.push(if upstream_bad {
            NodeStatus::Blocked
        } else if c.gate[i] == Some(false) {
            NodeStatus::Failed
        } else {
            NodeStatus::Succeeded
        });
    }
    out
}

fn run(c: &Case) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    rt.block_on(async {
        let ran: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = ran.clone();
        let o = Orchestrator::builder()
            .runner(
                "shell",
                FnRunner::sync(move |_, ctx| {
                    seen.lock().expect("lock").push(ctx.producer_id.clone());
                    Ok(WorkOutput::default())
                }),
            )
            .build()
            .expect("build");
        let mut plan = PlanSpec::new("gates").isolation(Isolation::None);
        for (i, deps) in c.deps.iter().enumerate() {
            let work = match c.timer[i] {
                Some(ms) => WorkSpec::timer(f64::from(ms) / 1000.0),
                None => WorkSpec::shell("ok"),
            };
            let mut job =
                JobSpec::new(name(i), "t", work).depends_on(deps.iter().map(|&d| name(d)));
            if c.gate[i].is_some() {
                job = job.approval(if c.after[i] {
                    Approval::After
                } else {
                    Approval::Before
                });
            }
            plan = plan.job(job);
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let id = o.run(plan, dir.path()).await.expect("run");
        let mut rng = c.order | 1;
        let mut decided: HashSet<usize> = HashSet::new();
        // Each timer's deadline, as seen while it waited.
        let mut deadlines: HashMap<usize, u64> = HashMap::new();
        loop {
            let status = o.wait_or_waiting(&id).await.expect("wait");
            if status.is_terminal() {
                break;
            }
            prop_assert_eq!(status, PlanStatus::Waiting);
            let record = o.status(&id).await.expect("status");
            let mut waiting = Vec::new();
            for (i, node) in record.state.nodes[..c.deps.len()].iter().enumerate() {
                let Some(w) = node.extra.waiting.as_ref() else {
                    continue;
                };
                prop_assert_eq!(node.status, NodeStatus::Waiting);
                match w.waiting_for {
                    WaitingFor::Approval => waiting.push(i),
                    WaitingFor::Timer => {
                        prop_assert!(c.timer[i].is_some(), "{} is no timer", name(i));
                        prop_assert!(
                            c.gate[i] != Some(false) || c.after[i],
                            "{} waits on its timer before its approval",
                            name(i)
                        );
                        deadlines.insert(i, w.until.unwrap_or(u64::MAX));
                    }
                    other => prop_assert!(false, "{} waits for {}", name(i), other),
                }
            }
            if waiting.is_empty() {
                // Only timers wait: they fire by themselves.
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                continue;
            }
            // One decision at a time, picked by the seed.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = waiting.swap_remove((rng % waiting.len() as u64) as usize);
            prop_assert!(decided.insert(i), "{} waited twice", name(i));
            let ran_before = ran.lock().expect("lock").contains(&name(i));
            if c.after[i] {
                // Gated after: its phases passed first (a timer runs no work).
                prop_assert_eq!(
                    ran_before,
                    c.timer[i].is_none(),
                    "{} before its approval",
                    name(i)
                );
            } else {
                prop_assert!(!ran_before, "{} ran before its approval", name(i));
            }
            match c.gate[i] {
                Some(true) => o.approve(&id, &name(i)).await.expect("approve"),
                Some(false) => o.reject(&id, &name(i), "no").await.expect("reject"),
                None => prop_assert!(false, "{} is not gated but waited", name(i)),
            }
        }
        let record = o.status(&id).await.expect("status");
        let got: Vec<NodeStatus> = record.state.nodes[..c.deps.len()]
            .iter()
            .map(|n| n.status)
            .collect();
        prop_assert_eq!(&got, &expected(c));
        for (i, node) in record.state.nodes[..c.deps.len()].iter().enumerate() {
            if got[i] == NodeStatus::Failed {
                let reason = node.last_attempt().and_then(|a| a.extra.failure_reason);
                prop_assert_eq!(reason, Some(FailureReason::Rejected));
            }
            let runs = ran
                .lock()
                .expect("lock")
                .iter()
                .filter(|r| **r == name(i))
                .count();
            // A job gated after its phases ran them once, approved or rejected.
            let reached = got[i] == NodeStatus::Succeeded
                || (c.after[i] && c.gate[i] == Some(false) && got[i] == NodeStatus::Failed);
            let should = usize::from(reached && c.timer[i].is_none());
            prop_assert_eq!(runs, should, "{} ran {} times", name(i), runs);
            if let (Some(until), Some(attempt)) = (deadlines.get(&i), node.last_attempt()) {
                prop_assert!(
                    attempt.started_at >= *until,
                    "{} started before its deadline",
                    name(i)
                );
            }
        }
        let plan_status = record.status();
        let want = if got.iter().all(|s| *s == NodeStatus::Succeeded) {
            PlanStatus::Succeeded
        } else {
            PlanStatus::Failed
        };
        prop_assert_eq!(plan_status, want);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn approvals_rejections_and_timers_end_as_the_model_says(c in case()) {
        run(&c)?;
    }
}
