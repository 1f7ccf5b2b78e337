//! Benchmarks of the file store.
//!
//! Printed figures (before criterion's): bytes written per transition on 1k- and 10k-node
//! plans (one transition alone, and a whole run with compaction amortized in).
//!
//! Criterion groups:
//! - `reload_10k`: a fresh handle loading a 10k-node plan after a whole run, as the run left
//!   it, and with the largest journal the default compaction policy lets grow (25% of the
//!   snapshot);
//! - `run_10k`: appending every transition of a 10k-node run (8 changes per node, batches of
//!   1 to 50 changes) to the in-memory store and to the file store with each durability;
//! - `create_10k`: the creation of a 10k-job plan (its snapshot encoded and its folder
//!   written) with [`Durability::Flush`], so that the disk's flush does not drown the work.
#![allow(missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::Criterion;
use orchestrator_core::state::{PlanRecord, StateChange};
use orchestrator_core::{InMemoryPlanRepository, PlanId, PlanRepository};
use orchestrator_storage::{Compaction, Durability, FsOptions, FsPlanRepository};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

async fn run(store: &impl PlanRepository, id: &PlanId, batches: &[Vec<StateChange>]) {
    for batch in batches {
        store.append(id, batch).await.expect("append");
    }
}

fn print_figures(rt: &tokio::runtime::Runtime) {
    println!("\n== bytes written per transition ==");
    for nodes in [1_000, 10_000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FsPlanRepository::new(dir.path());
        let record = common::plan(nodes);
        let id = record.state.id.clone();
        rt.block_on(store.create(&record)).expect("create");
        let created = store.io_stats();
        // One transition on its own.
        let one = [StateChange::Node {
            node: nodes / 2,
            status: orchestrator_core::NodeStatus::Ready,
            at: 1,
        }];
        rt.block_on(store.append(&id, &one)).expect("append");
        let single = store.io_stats().state_bytes_written() - created.state_bytes_written();
        // A whole run (the node made ready above is left out of it).
        let record2 = common::plan(nodes);
        let id2 = record2.state.id.clone();
        rt.block_on(store.create(&record2)).expect("create");
        let before = store.io_stats();
        let batches = common::full_run(nodes);
        let started = Instant::now();
        rt.block_on(run(&store, &id2, &batches));
        let elapsed = started.elapsed();
        let after = store.io_stats();
        let changes = (after.changes - before.changes) as f64;
        let journal = (after.journal_bytes_written - before.journal_bytes_written) as f64;
        let snapshot = (after.snapshot_bytes_written - before.snapshot_bytes_written) as f64;
        println!(
            "{nodes:>6} nodes: one transition alone {single} B; whole run of {changes} changes \
             in {} batches: journal {:.1} B/change, with compaction amortized {:.1} B/change \
             ({} compactions, {} fsyncs, {:.0} ms with Durability::Full)",
            batches.len(),
            journal / changes,
            (journal + snapshot) / changes,
            after.compactions - before.compactions,
            after.fsyncs - before.fsyncs,
            elapsed.as_secs_f64() * 1e3,
        );
        let plan_dir = store.plan_dir(&id2).expect("dir");
        println!(
            "        after the run: snapshot {} KiB, journal {} KiB",
            file_kib(&plan_dir, "plan.json"),
            journal_kib(&plan_dir),
        );
    }
    println!();
}

fn file_kib(dir: &Path, name: &str) -> u64 {
    std::fs::metadata(dir.join(name))
        .map(|m| m.len() / 1024)
        .unwrap_or(0)
}

fn journal_kib(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("journal-0"))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum::<u64>()
        / 1024
}

/// A 10k-node plan after a whole run, then filler changes until the journal is `fill`% of the
/// snapshot (appended through a store that never compacts).
fn plan_after_run(rt: &tokio::runtime::Runtime, root: &Path, fill: u64) -> PlanRecord {
    let no_compaction = Compaction::default()
        .min_journal_bytes(u64::MAX)
        .max_journal_records(u64::MAX);
    let store = FsPlanRepository::with_options(
        root,
        FsOptions::default()
            .durability(Durability::Flush)
            .compaction(no_compaction),
    );
    // The run itself goes through a default store, so it ends with whatever journal the
    // default policy leaves.
    let default_store =
        FsPlanRepository::with_options(root, FsOptions::default().durability(Durability::Flush));
    let record = common::plan(10_000);
    let id = record.state.id.clone();
    rt.block_on(default_store.create(&record)).expect("create");
    rt.block_on(run(&default_store, &id, &common::full_run(10_000)));
    let dir = store.plan_dir(&id).expect("dir");
    let snapshot = std::fs::metadata(dir.join("plan.json"))
        .map(|m| m.len())
        .unwrap_or(0);
    let mut i = 0u64;
    while journal_kib(&dir) * 1024 * 100 < snapshot * fill {
        let batch: Vec<StateChange> = (i..i + 20)
            .map(|j| StateChange::Session {
                node: (j % 10_000) as usize,
                session_id: format!("session-{j:08}"),
            })
            .collect();
        rt.block_on(store.append(&id, &batch)).expect("append");
        i += 20;
    }
    rt.block_on(FsPlanRepository::new(root).load(&id))
        .expect("load")
}

fn bench_reload(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("reload_10k");
    for (name, fill) in [("after_run", 0), ("journal_at_25pct_of_snapshot", 25)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = plan_after_run(rt, dir.path(), fill);
        let id = record.state.id.clone();
        let plan_dir = FsPlanRepository::new(dir.path())
            .plan_dir(&id)
            .expect("dir");
        println!(
            "reload_10k/{name}: snapshot {} KiB, journal {} KiB",
            file_kib(&plan_dir, "plan.json"),
            journal_kib(&plan_dir)
        );
        group.bench_function(name, |b| {
            b.iter(|| {
                let fresh = FsPlanRepository::new(dir.path());
                rt.block_on(fresh.load(&id)).expect("load")
            })
        });
    }
    group.finish();
}

/// Creates a 10k-node plan (not timed) and times appending `batches` to it.
fn timed_run(
    rt: &tokio::runtime::Runtime,
    batches: &[Vec<StateChange>],
    store: &impl PlanRepository,
) -> Duration {
    let record = common::plan(10_000);
    let id = record.state.id.clone();
    rt.block_on(store.create(&record)).expect("create");
    let started = Instant::now();
    rt.block_on(run(store, &id, batches));
    started.elapsed()
}

fn bench_run(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let batches = common::full_run(10_000);
    let changes: usize = batches.iter().map(Vec::len).sum();
    println!("run_10k: {changes} changes in {} batches", batches.len());
    let mut group = c.benchmark_group("run_10k");
    group.sample_size(10);
    group.bench_function("memory", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| timed_run(rt, &batches, &InMemoryPlanRepository::new()))
                .sum()
        })
    });
    for (name, durability) in [
        ("file_flush", Durability::Flush),
        ("file_full", Durability::Full),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let dir = tempfile::tempdir().expect("tempdir");
                        let options = FsOptions::default().durability(durability);
                        let store = FsPlanRepository::with_options(dir.path(), options);
                        timed_run(rt, &batches, &store)
                    })
                    .sum()
            })
        });
    }
    group.finish();
}

fn bench_create(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let record = common::plan(10_000);
    let mut group = c.benchmark_group("create_10k");
    group.bench_function("file_flush", |b| {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = FsOptions::default().durability(Durability::Flush);
        let store = FsPlanRepository::with_options(dir.path(), options);
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let mut plan = record.clone();
                    plan.state.id = PlanId::random();
                    let started = Instant::now();
                    rt.block_on(store.create(&plan)).expect("create");
                    let took = started.elapsed();
                    // Deleted before the kernel writes it back: 2,000 creations would
                    // otherwise leave ~1.7 GB for the disk to write while the next ones run.
                    rt.block_on(store.delete(&plan.state.id)).expect("delete");
                    took
                })
                .sum()
        })
    });
    group.finish();
}

fn main() {
    let rt = runtime();
    print_figures(&rt);
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    bench_reload(&mut c, &rt);
    bench_run(&mut c, &rt);
    bench_create(&mut c, &rt);
    c.final_summary();
}
