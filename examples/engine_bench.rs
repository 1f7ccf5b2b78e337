//! Engine throughput: a random DAG (about two dependencies per node) of no-op jobs, in-memory
//! store, `isolation: "none"`. Also a chain (each node depends on the previous one).
//!
//! ```text
//! cargo run --release --example engine_bench -- --nodes 100000 [--chain 10000] [--capacity 256]
//! ```
//! The last line is `nodes=<n> seconds=<s> nodes_per_sec=<r>` for the random DAG.

use std::time::Instant;

use orchestrator::core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator::core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, OrchestratorOptions, PlanStatus, WorkOutput,
};

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `n` jobs; job `i` depends on up to two random earlier jobs (or on `i-1` for a chain).
pub fn plan(n: usize, chain: bool) -> PlanSpec {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut spec = PlanSpec::new(if chain { "chain" } else { "random-dag" }).isolation(Isolation::None);
    spec.jobs.reserve(n);
    for i in 0..n {
        let mut job = JobSpec::new(format!("n{i:07}"), "noop", WorkSpec::shell("true"));
        if chain {
            if i > 0 {
                job.dependencies.push(format!("n{:07}", i - 1));
            }
        } else if i >= 2 {
            let a = rng.below(i);
            let mut b = rng.below(i);
            if b == a {
                b = (a + 1) % i;
            }
            job.dependencies.push(format!("n{a:07}"));
            job.dependencies.push(format!("n{b:07}"));
        } else if i == 1 {
            job.dependencies.push("n0000000".into());
        }
        spec.jobs.push(job);
    }
    spec
}

async fn run(spec: PlanSpec, capacity: usize) -> f64 {
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
    let secs = start.elapsed().as_secs_f64();
    eprintln!("  (validate+store {created:.3}s, run {:.3}s)", secs - created);
    assert_eq!(status, PlanStatus::Succeeded);
    secs
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        if chain > 0 {
            let secs = run(plan(chain, true), capacity).await;
            println!("chain nodes={chain} seconds={secs:.3}");
        }
        let secs = run(plan(nodes, false), capacity).await;
        println!(
            "nodes={nodes} seconds={secs:.3} nodes_per_sec={:.0}",
            nodes as f64 / secs
        );
    });
}
