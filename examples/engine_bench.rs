//! Engine throughput: a random DAG (about two dependencies per node) of no-op jobs, in-memory
//! store, `isolation: "none"`; also a chain (each node depends on the previous one).
//!
//! ```text
//! cargo run --release --example engine_bench -- --nodes 100000 [--chain 10000] [--capacity 256] [--current-thread]
//! ```
//! The last line is `nodes=<n> seconds=<s> nodes_per_sec=<r>` for the random DAG; the time
//! covers validation, storing the plan, and running it to the end.

use std::time::Instant;

use orchestrator::core::plan::PlanSpec;
use orchestrator::core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, OrchestratorOptions, PlanStatus, WorkOutput,
};
use orchestrator::synthetic;

/// The allocator the `orchestrator` binary ships with (its malloc and free are several times
/// cheaper than glibc's for a run's many small objects).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs `spec` to the end; returns (seconds to validate and store, total seconds).
async fn run(spec: PlanSpec, capacity: usize) -> (f64, f64) {
    let orchestrator = Orchestrator::builder()
        .repository(InMemoryPlanRepository::new())
        .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
        .options(OrchestratorOptions::default().global_capacity(capacity))
        .build()
        .expect("valid options");
    let start = Instant::now();
    let id = orchestrator
        .create_plan(spec, std::env::temp_dir())
        .await
        .expect("plan is valid");
    let created = start.elapsed().as_secs_f64();
    orchestrator.start(&id).await.expect("plan starts");
    let status = orchestrator.wait(&id).await.expect("plan ends");
    assert_eq!(status, PlanStatus::Succeeded);
    (created, start.elapsed().as_secs_f64())
}

fn arg(args: &[String], name: &str) -> Option<usize> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes = arg(&args, "--nodes").unwrap_or(100_000);
    let chain = arg(&args, "--chain").unwrap_or(10_000);
    let capacity = arg(&args, "--capacity").unwrap_or(256);
    let current_thread = args.iter().any(|a| a == "--current-thread");
    let rt = if current_thread {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    }
    .expect("tokio runtime");
    rt.block_on(async {
        if chain > 0 {
            let (_, secs) = run(synthetic::chain(chain, "true"), capacity).await;
            println!("chain nodes={chain} seconds={secs:.3}");
        }
        let (created, secs) = run(synthetic::random_dag(nodes, 1, "true"), capacity).await;
        println!(
            "validate+store seconds={created:.3} run seconds={:.3}",
            secs - created
        );
        println!(
            "nodes={nodes} seconds={secs:.3} nodes_per_sec={:.0}",
            nodes as f64 / secs
        );
    });
}
