//! The durable file store against the in-memory store, end to end through the engine: a
//! random DAG of no-op jobs (`isolation: "none"`) run to the end with each store, alternating,
//! several rounds; then bytes written per transition and the reload time of the plan.
//!
//! Each store's line ends with where its median run's time went: `run()` is what
//! `Orchestrator::run` took (validation, and the plan's creation in the store, as started),
//! `rest` the run's jobs until the plan's end is stored. The file store's creation writes and
//! flushes the whole plan before its first job starts (SPEC §5).
//!
//! ```text
//! cargo run --release --example store_bench -- [--nodes 10000] [--rounds 5]
//! ```

use std::sync::Arc;
use std::time::Instant;

use orchestrator::core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, OrchestratorOptions, PlanRepository,
    PlanStatus, WorkOutput,
};
use orchestrator::storage::{Durability, FsOptions, FsPlanRepository};
use orchestrator::synthetic;

/// The allocator the `orchestrator` binary ships with (its malloc and free are several times
/// cheaper than glibc's for a run's many small objects).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One run to the end: its seconds in all, the seconds `Orchestrator::run` took (validation,
/// creation in the store), and the plan's id.
async fn run(
    store: Arc<dyn PlanRepository>,
    nodes: usize,
) -> (f64, f64, orchestrator::core::PlanId) {
    let o = Orchestrator::builder()
        .repository_arc(store)
        .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
        .options(OrchestratorOptions::default().global_capacity(256))
        .build()
        .expect("valid options");
    let spec = synthetic::random_dag(nodes, 1, "true");
    let started = Instant::now();
    let id = o.run(spec, std::env::temp_dir()).await.expect("plan runs");
    let created = started.elapsed().as_secs_f64();
    assert_eq!(o.wait(&id).await.expect("plan ends"), PlanStatus::Succeeded);
    let secs = started.elapsed().as_secs_f64();
    o.close(&id).await.expect("close");
    (secs, created, id)
}

/// The medians of a store's runs: in all, and the part `Orchestrator::run` took.
#[derive(Default)]
struct Runs {
    total: Vec<f64>,
    created: Vec<f64>,
}

impl Runs {
    fn push(&mut self, (total, created, _): (f64, f64, orchestrator::core::PlanId)) {
        self.total.push(total);
        self.created.push(created);
    }

    /// The median run in seconds, and where its time went, for the report.
    fn report(self) -> (f64, String) {
        let total = median(self.total);
        // The two medians are of different runs: the second part is their difference.
        let created = median(self.created);
        let split = format!(
            "(run() {:.1} ms, rest {:.1} ms)",
            created * 1e3,
            (total - created) * 1e3
        );
        (total, split)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn arg(args: &[String], name: &str) -> Option<usize> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes = arg(&args, "--nodes").unwrap_or(10_000);
    let rounds = arg(&args, "--rounds").unwrap_or(5);
    let dir = tempfile::tempdir().expect("temp dir");

    let (mut mem, mut full, mut flush) = (Runs::default(), Runs::default(), Runs::default());
    for round in 0..rounds {
        mem.push(run(Arc::new(InMemoryPlanRepository::new()), nodes).await);
        // A large plan's snapshots are written in the background: the run is over when the
        // plan is, and the next one starts once they are written (not on top of them).
        let fs = FsPlanRepository::new(dir.path().join(format!("full-{round}")));
        full.push(run(Arc::new(fs.clone()), nodes).await);
        fs.settle();
        let fs = FsPlanRepository::with_options(
            dir.path().join(format!("flush-{round}")),
            FsOptions::default().durability(Durability::Flush),
        );
        flush.push(run(Arc::new(fs.clone()), nodes).await);
        fs.settle();
    }
    let ((m, ms), (f, fs), (fl, fls)) = (mem.report(), full.report(), flush.report());
    println!("nodes={nodes} rounds={rounds}");
    println!("memory      median={m:.3}s {ms}");
    println!("file(full)  median={f:.3}s ratio={:.2} {fs}", f / m);
    println!("file(flush) median={fl:.3}s ratio={:.2} {fls}", fl / m);

    for n in [1_000usize, 10_000] {
        let fs = FsPlanRepository::new(dir.path().join(format!("bytes-{n}")));
        let (_, _, id) = run(Arc::new(fs.clone()), n).await;
        fs.settle();
        let stats = fs.io_stats();
        let per = stats.journal_bytes_written as f64 / stats.changes.max(1) as f64;
        let all = stats.state_bytes_written() as f64 / stats.changes.max(1) as f64;
        println!(
            "bytes/transition nodes={n}: journal={per:.1} with-snapshots={all:.1} (changes={} appends={} fsyncs={} compactions={})",
            stats.changes, stats.appends, stats.fsyncs, stats.compactions
        );
        if n == 10_000 {
            let mut times = Vec::new();
            for _ in 0..7 {
                let fresh = FsPlanRepository::new(dir.path().join(format!("bytes-{n}")));
                let t = Instant::now();
                let record = fresh.load(&id).await.expect("reload");
                times.push(t.elapsed().as_secs_f64() * 1000.0);
                assert_eq!(record.status(), PlanStatus::Succeeded);
            }
            println!("reload nodes={n} median={:.1}ms", median(times));
        }
    }
}
