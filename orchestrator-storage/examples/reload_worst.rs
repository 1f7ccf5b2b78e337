//! The slowest reload of a plan that the default compaction policy lets happen: a whole run
//! of a plan of independent no-op jobs, then small changes (process starts and ends, a few
//! bytes each in the journal) until the default policy has compacted twice (the first time
//! on the finished plan, its largest snapshot); the plan is then rebuilt with the journal of
//! the second left uncompacted, and reloaded by fresh handles.
//!
//! ```text
//! cargo run --release -p orchestrator-storage --example reload_worst -- [--nodes 10000] [--reps 15]
//! ```
#![allow(missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::Instant;

use orchestrator_core::state::StateChange;
use orchestrator_core::{PlanId, PlanRepository};
use orchestrator_storage::{Compaction, Durability, FsOptions, FsPlanRepository};

/// Batch `i` of the small changes that follow the run: 20 process changes.
fn filler(i: u64, nodes: usize) -> Vec<StateChange> {
    (i * 20..(i + 1) * 20)
        .map(|k| {
            let node = (k % nodes as u64) as usize;
            StateChange::Process {
                node,
                pgid: 40_000 + node as u32,
                running: (k / nodes as u64).is_multiple_of(2),
            }
        })
        .collect()
}

fn store(root: &Path, compaction: Compaction) -> FsPlanRepository {
    let options = FsOptions::default()
        .durability(Durability::Flush)
        .compaction(compaction);
    FsPlanRepository::with_options(root, options)
}

/// A plan of `nodes` run to the end through a store of the default policy.
async fn after_run(root: &Path, nodes: usize) -> (FsPlanRepository, PlanId) {
    let store = store(root, Compaction::default());
    let record = common::plan(nodes);
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    for batch in common::full_run(nodes) {
        store.append(&id, &batch).await.expect("append");
    }
    (store, id)
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes = arg(&args, "--nodes", 10_000);
    let reps = arg(&args, "--reps", 15);
    let dir = tempfile::tempdir().expect("temp dir");

    // The filler batches after which the default policy compacts, twice.
    let probe_root = dir.path().join("probe");
    let (probe, probe_id) = after_run(&probe_root, nodes).await;
    let mut compacted_after = Vec::new();
    let mut batch = 0u64;
    while compacted_after.len() < 2 {
        let before = probe.io_stats().compactions;
        probe
            .append(&probe_id, &filler(batch, nodes))
            .await
            .expect("append");
        if probe.io_stats().compactions > before {
            compacted_after.push(batch);
        }
        batch += 1;
    }
    let (first, second) = (compacted_after[0], compacted_after[1]);
    // A large plan's snapshot is written in the background: the floor is that snapshot in
    // place, alone.
    probe.settle();

    // The same again up to the first compaction, then the batches up to the second through a
    // store that never compacts: the journal the policy compacted is left as it was.
    let root = dir.path().join("worst");
    let (default, id) = after_run(&root, nodes).await;
    let before = default.io_stats().compactions;
    for i in 0..=first {
        default
            .append(&id, &filler(i, nodes))
            .await
            .expect("append");
    }
    assert_eq!(
        default.io_stats().compactions,
        before + 1,
        "as in the probe"
    );
    default.settle();
    let never = store(
        &root,
        Compaction::default()
            .min_journal_bytes(u64::MAX)
            .max_journal_records(u64::MAX),
    );
    for i in first + 1..=second {
        never.append(&id, &filler(i, nodes)).await.expect("append");
    }
    let plan_dir = never.plan_dir(&id).expect("plan dir");
    let journal = std::fs::read_dir(&plan_dir)
        .expect("plan dir")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("journal-"))
        .map(|e| size(&e.path()))
        .unwrap_or(0);
    let snapshot = size(&plan_dir.join("plan.json"));

    // The probe's plan, just compacted, is the floor: its snapshot alone. The two are
    // reloaded in turn (the first reloads of a process are slower).
    let (mut floor, mut worst) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        floor.push(reload(&probe_root, &probe_id).await);
        worst.push(reload(&root, &id).await);
    }
    println!(
        "nodes={nodes}: worst journal {} KiB ({} changes) on a snapshot of {} KiB",
        journal / 1024,
        (second - first) * 20,
        snapshot / 1024,
    );
    println!("reload just compacted: {}", summary(floor));
    println!("reload worst:          {}", summary(worst));
}

/// Milliseconds a fresh handle takes to load `id`.
async fn reload(root: &Path, id: &PlanId) -> f64 {
    let fresh = FsPlanRepository::new(root);
    let started = Instant::now();
    fresh.load(id).await.expect("reload");
    started.elapsed().as_secs_f64() * 1e3
}

fn summary(mut times: Vec<f64>) -> String {
    times.sort_by(f64::total_cmp);
    format!(
        "median {:.1} ms (min {:.1}, max {:.1}, {} reloads)",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        times.len(),
    )
}
