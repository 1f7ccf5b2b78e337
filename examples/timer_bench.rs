//! What a waiting job costs (SPEC §12: "a waiting job costs no process and no thread"): a plan
//! of `--nodes` independent timer jobs (an hour each), in-memory store, `isolation: "none"`,
//! run until every job waits on its timer; then the process idles for `--idle` seconds with
//! all of them waiting, and the plan is canceled.
//!
//! ```text
//! cargo run --release --example timer_bench -- --nodes 10000 [--idle 3]
//! ```
//! Prints one line of `key=value`: the memory (RSS) and threads of the process before the plan,
//! with the plan stored, and with every job waiting; bytes per node stored and per waiting
//! node (what waiting adds: the wait record, its journal entries and the timer's heap entry);
//! the CPU time the process used per second of idling; the time to put them all waiting and to
//! cancel them. Run it at two sizes: flat per-node numbers mean a waiting job costs no thread.
//! Linux only for the memory, thread and CPU figures (read from `/proc/self`).

use std::time::{Duration, Instant};

use orchestrator::core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator::core::{
    FnRunner, InMemoryPlanRepository, NodeStatus, Orchestrator, PlanStatus, WorkOutput,
};

#[path = "support/proc_stats.rs"]
mod proc_stats;
use proc_stats::{arg, rss_and_threads};

/// CPU time (user + system) this process used so far, in milliseconds.
fn cpu_ms() -> u64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces, inside parentheses).
    let rest = text.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name; clock
    // ticks of 10 ms on Linux.
    (ticks(11) + ticks(12)) * 10
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes = arg(&args, "--nodes").unwrap_or(10_000) as usize;
    let idle = arg(&args, "--idle").unwrap_or(3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let orchestrator = Orchestrator::builder()
            .repository(InMemoryPlanRepository::new())
            .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
            .build()
            .expect("valid options");
        let mut spec = PlanSpec::new("timers").isolation(Isolation::None);
        for i in 0..nodes {
            spec = spec.job(JobSpec::new(
                format!("wait-{i:06}"),
                "wait an hour",
                WorkSpec::timer(3600.0),
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
        let to_wait = start.elapsed().as_secs_f64();
        assert_eq!(status, PlanStatus::Waiting);
        let record = orchestrator.status(&id).await.expect("status");
        let waiting = record.state.nodes[..nodes]
            .iter()
            .filter(|n| n.status == NodeStatus::Waiting)
            .count();
        assert_eq!(waiting, nodes, "every timer job waits");
        drop(record);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (rss_waiting, threads_waiting) = rss_and_threads();

        let cpu_start = cpu_ms();
        tokio::time::sleep(Duration::from_secs(idle)).await;
        let idle_cpu = (cpu_ms() - cpu_start) as f64 / idle.max(1) as f64;
        let (rss_idle, threads_idle) = rss_and_threads();

        let start = Instant::now();
        orchestrator.cancel(&id).await.expect("cancel");
        assert_eq!(
            orchestrator.wait(&id).await.expect("plan ends"),
            PlanStatus::Canceled
        );
        let to_cancel = start.elapsed().as_secs_f64();

        let per = |kb: u64, base: u64| kb.saturating_sub(base) * 1024 / nodes as u64;
        println!(
            "nodes={nodes} rss_kb_before={rss_before} rss_kb_stored={rss_created} \
             rss_kb_waiting={rss_waiting} rss_kb_after_idle={rss_idle} \
             bytes_per_node_stored={} bytes_per_waiting_node={} \
             threads_before={threads_before} threads_waiting={threads_waiting} \
             threads_after_idle={threads_idle} idle_cpu_ms_per_s={idle_cpu:.1} \
             seconds_to_wait={to_wait:.3} seconds_to_cancel={to_cancel:.3}",
            per(rss_created, rss_before),
            per(rss_waiting, rss_created),
        );
    });
}
