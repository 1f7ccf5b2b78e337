//! What a parked agent costs and how punctually it wakes (SPEC §15): a plan of `--nodes`
//! independent agent jobs whose agents each call a long `wait` on their first run — the job
//! parks in `waiting(timer)`, its attempt open — with deadlines spread over `--spread` ms,
//! `--delay` ms from now. In-memory store, `isolation: "none"`, a no-op agent runner and a
//! stand-in tool server (the engine's side of `wait` only: no CLI, no HTTP).
//!
//! ```text
//! cargo run --release --example park_bench -- --nodes 1000 [--delay 3000] [--spread 2000]
//! ```
//! Prints one line of `key=value`: RSS and threads before the plan and with every job parked,
//! bytes per parked job, and how late each job's session resumed after its deadline (median,
//! p99 and max, in ms). Linux only for the memory and thread figures (`/proc/self/status`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orchestrator::core::ids::now_millis;
use orchestrator::core::plan::{AgentSpec, Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator::core::tools::{AgentTools, Park, ToolEndpoint, ToolJob, ToolOutcome};
use orchestrator::core::{
    FnRunner, InMemoryPlanRepository, NodeStatus, Orchestrator, PlanStatus, WorkOutput,
};

#[path = "support/proc_stats.rs"]
mod proc_stats;
use proc_stats::{arg, rss_and_threads};

/// The engine's side of `wait`: every job's first run ends with a wait until its deadline.
#[derive(Debug, Default)]
struct Waits {
    /// Deadline of each job (by producerId), set when it parks.
    deadlines: Mutex<HashMap<String, u64>>,
    /// The runs in progress: endpoint token -> producerId.
    open: Mutex<HashMap<String, String>>,
    first: u64,
    spread: u64,
    nodes: u64,
}

impl AgentTools for Waits {
    fn open(&self, job: ToolJob) -> Result<ToolEndpoint, String> {
        let token = format!("{}-{}", job.producer_id, job.attempt);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.insert(token.clone(), job.producer_id);
        Ok(ToolEndpoint::new("http://127.0.0.1:0/unused", token))
    }

    fn close(&self, endpoint: &ToolEndpoint) -> ToolOutcome {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let Some(job) = open.remove(&endpoint.token) else {
            return ToolOutcome::default();
        };
        let mut deadlines = self.deadlines.lock().unwrap_or_else(|e| e.into_inner());
        if deadlines.contains_key(&job) {
            return ToolOutcome::default(); // woken: this run finishes the job
        }
        let i: u64 = job.trim_start_matches("agent-").parse().unwrap_or(0);
        let until = self.first + self.spread * i / self.nodes.max(1);
        deadlines.insert(job, until);
        let mut outcome = ToolOutcome::default();
        outcome.park = Some(Park::Timer {
            until,
            wake: "The timer you set fired.".into(),
        });
        outcome
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes = arg(&args, "--nodes").unwrap_or(1_000);
    let delay = arg(&args, "--delay").unwrap_or(3_000);
    let spread = arg(&args, "--spread").unwrap_or(2_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let waits = Arc::new(Waits {
            first: now_millis() + delay,
            spread,
            nodes,
            ..Waits::default()
        });
        // When each job's resumed run started (the run that carries the wake-up message).
        let woke: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let seen = woke.clone();
        let orchestrator = Orchestrator::builder()
            .repository(InMemoryPlanRepository::new())
            .runner(
                "agent",
                FnRunner::sync(move |_, ctx| {
                    if ctx.wake.is_some() {
                        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                        seen.insert(ctx.producer_id.clone(), now_millis());
                    }
                    Ok(WorkOutput::default())
                }),
            )
            .agent_tools(waits.clone())
            .build()
            .expect("valid options");
        let mut spec = PlanSpec::new("parked agents").isolation(Isolation::None);
        for i in 0..nodes {
            spec = spec.job(JobSpec::new(
                format!("agent-{i}"),
                "wait, then finish",
                WorkSpec::Agent(Box::new(AgentSpec {
                    instructions: Some("wait, then finish".into()),
                    ..AgentSpec::default()
                })),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (rss_before, threads_before) = rss_and_threads();
        let id = orchestrator
            .create_plan(spec, std::env::temp_dir())
            .await
            .expect("plan is valid");
        let (rss_created, _) = rss_and_threads();
        let start = Instant::now();
        orchestrator.start(&id).await.expect("plan starts");
        let status = orchestrator.wait_or_waiting(&id).await.expect("plan waits");
        let to_park = start.elapsed().as_secs_f64();
        assert_eq!(status, PlanStatus::Waiting, "every job parked");
        let record = orchestrator.status(&id).await.expect("status");
        let parked = record
            .state
            .nodes
            .iter()
            .filter(|n| n.status == NodeStatus::Waiting)
            .count();
        drop(record);
        let (rss_parked, threads_parked) = rss_and_threads();
        let status = orchestrator.wait(&id).await.expect("plan ends");
        assert_eq!(status, PlanStatus::Succeeded);

        let deadlines = waits.deadlines.lock().unwrap_or_else(|e| e.into_inner());
        let woke = woke.lock().unwrap_or_else(|e| e.into_inner());
        let mut late: Vec<u64> = deadlines
            .iter()
            .filter_map(|(job, until)| Some(woke.get(job)?.saturating_sub(*until)))
            .collect();
        late.sort_unstable();
        let early = deadlines
            .iter()
            .filter(|(job, until)| woke.get(*job).is_some_and(|w| w < until))
            .count();
        println!(
            "nodes={nodes} parked={parked} woken={} woken_early={early} \
             rss_kb_before={rss_before} rss_kb_stored={rss_created} rss_kb_parked={rss_parked} \
             bytes_per_parked_job={} threads_before={threads_before} \
             threads_parked={threads_parked} seconds_to_park={to_park:.3} \
             late_ms_median={} late_ms_p99={} late_ms_max={}",
            late.len(),
            rss_parked.saturating_sub(rss_created) * 1024 / nodes.max(1),
            percentile(&late, 0.5),
            percentile(&late, 0.99),
            late.last().copied().unwrap_or(0),
        );
    });
}
