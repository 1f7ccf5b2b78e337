//! The durable file store against the in-memory store, end to end through the engine: a
//! random DAG of no-op jobs (`isolation: "none"`) run to the end with each store, alternating,
//! several rounds; then bytes written per transition and the reload time of the plan.
//!
//! Each store's line ends with where its median run's time went: `run()` is what
//! `Orchestrator::run` took (validation, and the plan's creation in the store, as started),
//! `rest` the run's jobs until the plan's end is stored. The file store's creation writes and
//! flushes the whole plan before its first job starts (SPEC §5).
//!
//! The `disk floor` line is what this disk alone needs for that flush: the bytes of the
//! plan's first snapshot written into a new folder, flushed, the folder renamed into place and
//! its parent flushed, with `std` only; right after another such flush (`hot`), and right
//! after a memory-store run (`after a run`), as the file store's creations above come. A
//! virtual disk can take several times longer to flush after it was idle. `best ratio` is the
//! memory store's run plus that flush: what any store that makes a plan durable before it
//! starts can reach on this disk.
//!
//! Every measured run, and every flush of the floor, starts with the temporary folder's file
//! system written back ([`quiesce`]): a flush-durability run leaves its ~4 MB of snapshots and
//! journals unflushed, and ext4 (`data=ordered`) wrote them out inside the next fsync, the next
//! full-durability plan's creation, which was charged 2-3 ms of the other run's writes.
//!
//! ```text
//! cargo run --release --example store_bench -- [--nodes 10000] [--rounds 5]
//! ```

use std::fs::File;
use std::io::Write;
use std::path::Path;
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
    quiesce(&std::env::temp_dir());
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

/// Makes `bytes` durable as a new plan's folder is made durable: written into a new folder,
/// the file and the folder flushed, the folder renamed into place (`<parent>/<name>`) and
/// `parent` flushed. Returns the milliseconds it took.
fn flush_as_created(parent: &Path, name: &str, bytes: &[u8]) -> f64 {
    quiesce(parent);
    let started = Instant::now();
    let tmp = parent.join(format!(".create-{name}"));
    std::fs::create_dir(&tmp).expect("new folder");
    let mut file = File::create(tmp.join("plan.json")).expect("new file");
    file.write_all(bytes).expect("write");
    file.sync_all().expect("flush the file");
    File::open(&tmp)
        .and_then(|folder| folder.sync_all())
        .expect("flush the folder");
    std::fs::rename(&tmp, parent.join(name)).expect("rename");
    File::open(parent)
        .and_then(|folder| folder.sync_all())
        .expect("flush the parent");
    started.elapsed().as_secs_f64() * 1e3
}

/// The medians of [`flush_as_created`] of the plan's first snapshot (the bytes the file store
/// flushes when it creates the plan), right after another and right after a memory-store run;
/// and the snapshot's size in KB.
async fn disk_floor(dir: &Path, nodes: usize, rounds: usize) -> (f64, f64, usize) {
    let o = Orchestrator::builder()
        .repository(FsPlanRepository::new(dir.join("first-snapshot")))
        .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
        .build()
        .expect("valid options");
    let spec = synthetic::random_dag(nodes, 1, "true");
    let id = o
        .create_plan(spec, std::env::temp_dir())
        .await
        .expect("stored");
    let snapshot = dir.join(format!("first-snapshot/plans/{id}/plan.json"));
    let bytes = std::fs::read(&snapshot).expect("the plan's snapshot");
    let floor = dir.join("floor");
    std::fs::create_dir(&floor).expect("folder");
    let (mut hot, mut cold) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        run(Arc::new(InMemoryPlanRepository::new()), nodes).await;
        cold.push(flush_as_created(&floor, &format!("cold-{round}"), &bytes));
        hot.push(flush_as_created(&floor, &format!("hot-{round}"), &bytes));
    }
    (median(hot), median(cold), bytes.len() / 1000)
}

/// Writes back the dirty pages of the file system holding `dir` (`syncfs`), so that the next
/// measured run does not pay for an earlier one's writes (a no-op where there is no
/// `syncfs`).
fn quiesce(dir: &Path) {
    #[cfg(target_os = "linux")]
    if let Ok(folder) = File::open(dir) {
        // A failure only leaves the measurement as it was without this.
        let _ = nix::unistd::syncfs(&folder);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = dir;
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
    let extra_ms = (median(full.created.clone()) - median(mem.created.clone())) * 1e3;
    let ((m, ms), (f, fs), (fl, fls)) = (mem.report(), full.report(), flush.report());
    println!("nodes={nodes} rounds={rounds}");
    println!("memory      median={m:.3}s {ms}");
    println!("file(full)  median={f:.3}s ratio={:.2} {fs}", f / m);
    println!("file(flush) median={fl:.3}s ratio={:.2} {fls}", fl / m);

    let (hot, cold, kb) = disk_floor(dir.path(), nodes, rounds).await;
    println!(
        "disk floor ({kb} KB flushed as a plan is created, std only): hot {hot:.2} ms, after a run {cold:.2} ms; file(full) run() - memory run() {extra_ms:.1} ms; best ratio {:.2}",
        (m + cold / 1e3) / m
    );

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
