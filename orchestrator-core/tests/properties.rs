//! Property tests of the engine on random DAGs (up to 200 nodes) with random failures and
//! retries: ordering, blocking, limits, terminal states and derived plan status.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
use orchestrator_core::runner::WorkFailure;
use orchestrator_core::state::PlanRecord;
use orchestrator_core::{FnRunner, NodeStatus, Orchestrator, PlanStatus, RetryRequest, WorkOutput};

#[derive(Debug, Clone)]
struct Case {
    /// deps[i]: earlier nodes node i depends on.
    deps: Vec<Vec<usize>>,
    fails: Vec<bool>,
    max_parallel: u32,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=200, 0u32..=6).prop_flat_map(|(n, max_parallel)| {
        let deps = (0..n)
            .map(|i| {
                if i == 0 {
                    Just(Vec::new()).boxed()
                } else {
                    proptest::collection::vec(0..i, 0..=3.min(i)).boxed()
                }
            })
            .collect::<Vec<_>>();
        let fails = proptest::collection::vec(proptest::bool::weighted(0.1), n);
        (deps, fails).prop_map(move |(deps, fails)| Case {
            deps,
            fails,
            max_parallel,
        })
    })
}

fn name(i: usize) -> String {
    format!("job-{i:03}")
}

fn spec(c: &Case) -> PlanSpec {
    let mut s = PlanSpec::new("prop").isolation(Isolation::None);
    if c.max_parallel > 0 {
        s.max_parallel = Some(c.max_parallel);
    }
    for (i, deps) in c.deps.iter().enumerate() {
        let cmd = if c.fails[i] { "fail" } else { "ok" };
        s = s.job(
            JobSpec::new(name(i), "t", WorkSpec::shell(cmd))
                .depends_on(deps.iter().map(|&d| name(d))),
        );
    }
    s
}

/// The plan status SPEC §3 defines, computed independently of the engine.
fn derived(record: &PlanRecord) -> PlanStatus {
    let st: Vec<NodeStatus> = record.state.nodes.iter().map(|n| n.status).collect();
    let unfinished = st.iter().any(|s| !s.is_terminal());
    if unfinished {
        return if record.state.paused {
            PlanStatus::Paused
        } else {
            PlanStatus::Running
        };
    }
    if st.contains(&NodeStatus::Canceled) {
        PlanStatus::Canceled
    } else if st
        .iter()
        .any(|s| matches!(s, NodeStatus::Failed | NodeStatus::Blocked))
    {
        PlanStatus::Failed
    } else {
        PlanStatus::Succeeded
    }
}

struct Probe {
    done: Mutex<HashSet<String>>,
    running: AtomicUsize,
    peak: AtomicUsize,
    violations: Mutex<Vec<String>>,
}

fn check(c: Case) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    rt.block_on(async move {
        let probe = Arc::new(Probe {
            done: Mutex::new(HashSet::new()),
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            violations: Mutex::new(Vec::new()),
        });
        let deps: Arc<Vec<Vec<String>>> = Arc::new(
            c.deps
                .iter()
                .map(|d| d.iter().map(|&x| name(x)).collect())
                .collect(),
        );
        let (p, d) = (probe.clone(), deps.clone());
        let runner = FnRunner::new(move |spec: WorkSpec, ctx| {
            let (p, d) = (p.clone(), d.clone());
            async move {
                let now = p.running.fetch_add(1, Ordering::SeqCst) + 1;
                p.peak.fetch_max(now, Ordering::SeqCst);
                {
                    let done = p.done.lock().expect("lock");
                    for dep in &d[ctx.node] {
                        if !done.contains(dep) {
                            p.violations
                                .lock()
                                .expect("lock")
                                .push(format!("{} started before {dep}", ctx.producer_id));
                        }
                    }
                }
                tokio::task::yield_now().await;
                let ok = matches!(&spec, WorkSpec::Shell(s) if s.command == "ok");
                if ok {
                    p.done.lock().expect("lock").insert(ctx.producer_id.clone());
                }
                p.running.fetch_sub(1, Ordering::SeqCst);
                if ok {
                    Ok(WorkOutput::default())
                } else {
                    Err(WorkFailure::new("scripted"))
                }
            }
        });
        let o = Orchestrator::builder()
            .runner("shell", runner)
            .build()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let plan = spec(&c);
        let graph = PlanGraph::build(&plan).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let id = o
            .run(plan, std::env::temp_dir())
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let status = o
            .wait(&id)
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let record = o
            .status(&id)
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?;

        let v = probe.violations.lock().expect("lock").clone();
        prop_assert!(v.is_empty(), "ordering violations: {v:?}");
        if c.max_parallel > 0 {
            prop_assert!(
                probe.peak.load(Ordering::SeqCst) <= c.max_parallel as usize,
                "maxParallel exceeded"
            );
        }
        for n in &record.state.nodes {
            prop_assert!(n.status.is_terminal(), "non-terminal node {:?}", n.status);
        }
        prop_assert_eq!(status, derived(&record));
        prop_assert_eq!(record.status(), derived(&record));

        // blocked == exactly the descendants of failed nodes
        let mut expected_blocked = HashSet::new();
        for (i, n) in record.state.nodes.iter().enumerate() {
            if n.status == NodeStatus::Failed {
                expected_blocked.extend(graph.descendants(i));
            }
        }
        let blocked: HashSet<usize> = record
            .state
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.status == NodeStatus::Blocked)
            .map(|(i, _)| i)
            .collect();
        prop_assert_eq!(&blocked, &expected_blocked);
        let failed: HashSet<usize> = (0..c.fails.len()).filter(|&i| c.fails[i]).collect();
        let actually_failed: HashSet<usize> = record
            .state
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.status == NodeStatus::Failed)
            .map(|(i, _)| i)
            .collect();
        prop_assert!(
            actually_failed.iter().all(|i| failed.contains(i)),
            "only scripted failures fail"
        );

        if status == PlanStatus::Failed {
            // Retrying every failed node with succeeding work ends succeeded (possibly in rounds,
            // as nodes that were blocked may reveal their own scripted failures).
            let mut rounds = 0;
            loop {
                o.retry(
                    &id,
                    RetryRequest::all_failed().with_work(WorkSpec::shell("ok")),
                )
                .await
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let s = o
                    .wait(&id)
                    .await
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                rounds += 1;
                if s == PlanStatus::Succeeded {
                    break;
                }
                prop_assert!(rounds < 200, "retries never converge");
            }
            let v = probe.violations.lock().expect("lock").clone();
            prop_assert!(v.is_empty(), "ordering violations after retry: {v:?}");
        }
        let record = o
            .status(&id)
            .await
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(record
            .state
            .nodes
            .iter()
            .all(|n| n.status == NodeStatus::Succeeded));
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_dags_keep_every_invariant(c in case()) {
        check(c)?;
    }
}
