//! Core's repository conformance suite, run against the file store with default options and
//! with settings that compact the journal all the time.

use std::sync::atomic::{AtomicUsize, Ordering};

use orchestrator_core::conformance::repository::run_all;
use orchestrator_storage::{Compaction, Durability, FsOptions, FsPlanRepository};

async fn suite(options: FsOptions) {
    let root = tempfile::tempdir().expect("temp dir");
    let n = AtomicUsize::new(0);
    run_all(|| {
        let dir = root
            .path()
            .join(n.fetch_add(1, Ordering::Relaxed).to_string());
        let options = options.clone();
        async move { FsPlanRepository::with_options(dir, options) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_default_options() {
    suite(FsOptions::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_constant_compaction_without_fsync() {
    let compaction = Compaction::default()
        .min_journal_bytes(0)
        .snapshot_percent(0)
        .max_journal_records(3);
    suite(
        FsOptions::default()
            .durability(Durability::Flush)
            .compaction(compaction)
            .log_max_bytes(512),
    )
    .await;
}

#[tokio::test]
async fn conformance_current_thread_runtime() {
    suite(FsOptions::default().durability(Durability::Flush)).await;
}
