//! Behaviour of the file store beyond the shared conformance suite: layout, persistence
//! across handles, compaction, log rotation, cost per transition, ids that are not folder
//! names.

mod common;

use std::fs;

use common::{
    append_full_run, apply_range, change, files_in, full_run, journal_header, json_record, plan,
};
use orchestrator_core::ids::{NodeId, PlanId};
use orchestrator_core::plan::WorkSpec;
use orchestrator_core::repository::{AttemptSpecs, LogKey, LogQuery};
use orchestrator_core::state::{NodeStatus, Phase, StateChange, SCHEMA_VERSION};
use orchestrator_core::{PlanRepository, StoreError};
use orchestrator_storage::{Compaction, Durability, FsOptions, FsPlanRepository};

#[tokio::test]
async fn files_are_laid_out_as_the_spec_says() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::new(root.path().join(".orchestrator"));
    let record = plan(3);
    let id = record.state.id.clone();
    let node = record.state.nodes[1].id.clone();
    store.create(&record).await.expect("create");
    store.append(&id, &[change(0)]).await.expect("append");
    let specs = AttemptSpecs {
        work: Some(WorkSpec::agent("# Do it\nwell")),
        prechecks: Some(WorkSpec::shell("true")),
        postchecks: None,
    };
    store
        .save_attempt_specs(&id, &node, 2, &specs)
        .await
        .expect("specs");
    let key = LogKey {
        plan: id.clone(),
        node: node.clone(),
        phase: Phase::MergeFi,
        attempt: 2,
    };
    store.append_log(&key, "merged\n").await.expect("log");

    let dir = root.path().join(".orchestrator/plans").join(id.as_str());
    assert_eq!(store.plan_dir(&id).as_deref(), Some(dir.as_path()));
    assert_eq!(
        files_in(&dir),
        [
            "journal-000000.log",
            "journal.lock",
            "logs",
            "owner.lock",
            "plan.json",
            "specs"
        ]
    );
    let snapshot: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("plan.json")).expect("read")).expect("json");
    // The schema version plus two: a snapshot whose lists may be compact and hold counts of
    // fresh nodes with derived ids.
    assert_eq!(snapshot["schemaVersion"], 3);
    assert_eq!(snapshot["generation"], 0);
    assert_eq!(snapshot["record"]["state"]["id"], id.as_str());
    let attempt = dir.join("specs").join(node.as_str()).join("attempts/2");
    assert_eq!(
        files_in(&attempt),
        ["prechecks.json", "work.json", "work.md"]
    );
    assert_eq!(
        fs::read_to_string(attempt.join("work.md")).expect("md"),
        "# Do it\nwell"
    );
    let log = dir.join("logs").join(node.as_str()).join("2/merge-fi.log");
    assert_eq!(fs::read_to_string(log).expect("log"), "merged\n");
}

#[tokio::test]
async fn plans_survive_a_new_handle_and_handles_see_each_others_writes() {
    let root = tempfile::tempdir().expect("tempdir");
    let a = FsPlanRepository::new(root.path());
    let record = plan(3);
    let id = record.state.id.clone();
    a.create(&record).await.expect("create");
    let b = FsPlanRepository::new(root.path());
    let mut expected = record.clone();
    // Two handles (as two processes would) append in turns; each must notice the other's
    // changes before writing its own.
    for i in 0..120u64 {
        let store = if (i / 3) % 2 == 0 { &a } else { &b };
        store.append(&id, &[change(i)]).await.expect("append");
        apply_range(&mut expected, i, i + 1);
        if i % 17 == 0 {
            assert_eq!(a.load(&id).await.expect("load a"), expected, "a at {i}");
            assert_eq!(b.load(&id).await.expect("load b"), expected, "b at {i}");
        }
    }
    let fresh = FsPlanRepository::new(root.path());
    assert_eq!(fresh.load(&id).await.expect("load"), expected);
    let listing = fresh.list().await.expect("list");
    assert_eq!(listing.plans.len(), 1);
}

#[tokio::test]
async fn compaction_keeps_everything_and_leaves_one_journal() {
    let root = tempfile::tempdir().expect("tempdir");
    let options = FsOptions::default().compaction(
        Compaction::default()
            .min_journal_bytes(2048)
            .snapshot_percent(0)
            .max_journal_records(1_000_000),
    );
    let store = FsPlanRepository::with_options(root.path(), options.clone());
    let record = plan(4);
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let mut expected = record.clone();
    let batches = common::batches(1500);
    for range in &batches {
        let batch: Vec<StateChange> = range.clone().map(change).collect();
        store.append(&id, &batch).await.expect("append");
        apply_range(&mut expected, range.start, range.end);
    }
    let stats = store.io_stats();
    assert!(stats.compactions >= 10, "{stats:?}");
    assert_eq!(Some(stats.changes), batches.last().map(|r| r.end));
    let dir = store.plan_dir(&id).expect("dir");
    let journals: Vec<String> = files_in(&dir)
        .into_iter()
        .filter(|n| n.starts_with("journal-"))
        .collect();
    assert_eq!(journals.len(), 1, "{journals:?}");
    assert!(!files_in(&dir).iter().any(|n| n.contains(".tmp-")));
    let fresh = FsPlanRepository::with_options(root.path(), options);
    assert_eq!(fresh.load(&id).await.expect("load"), expected);
    assert_eq!(store.load(&id).await.expect("load"), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_in_the_background_keeps_everything_for_every_reader() {
    // Every snapshot is written on its own thread while appends go on: a reader with a fresh
    // handle, after each append, finds exactly what was appended so far.
    let root = tempfile::tempdir().expect("tempdir");
    let options = FsOptions::default().compaction(
        Compaction::default()
            .min_journal_bytes(2048)
            .snapshot_percent(0)
            .background_bytes(0),
    );
    let store = FsPlanRepository::with_options(root.path(), options.clone());
    let record = plan(4);
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let mut expected = record.clone();
    // One reader keeps its copy between loads (and must see when it is behind), the other
    // reads afresh each time.
    let watcher = FsPlanRepository::with_options(root.path(), options.clone());
    for range in common::batches(1500) {
        let batch: Vec<StateChange> = range.clone().map(change).collect();
        store.append(&id, &batch).await.expect("append");
        apply_range(&mut expected, range.start, range.end);
        let reader = FsPlanRepository::with_options(root.path(), options.clone());
        let loaded = reader.load(&id).await.expect("load");
        assert_eq!(loaded, expected, "fresh reader after change {}", range.end);
        let watched = watcher.load(&id).await.expect("load");
        assert_eq!(
            watched, expected,
            "keeping reader after change {}",
            range.end
        );
    }
    let stats = store.io_stats();
    assert!(stats.compactions >= 3, "{stats:?}");
    assert_eq!(store.load(&id).await.expect("load"), expected);
    // Dropped, the store finishes its last snapshot: one journal is left.
    let dir = store.plan_dir(&id).expect("dir");
    drop(store);
    let names = files_in(&dir);
    assert_eq!(
        names.iter().filter(|n| n.starts_with("journal-")).count(),
        1,
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains(".tmp-")), "{names:?}");
    let fresh = FsPlanRepository::with_options(root.path(), options);
    assert_eq!(fresh.load(&id).await.expect("load"), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_racing_background_compactions_find_whole_states() {
    // A reader in another handle loads the plan over and over while the writer appends and
    // compacts in the background as often as it can: every state it finds is the state after
    // some whole batch, never the old journal's prefix followed by the new journal.
    let root = tempfile::tempdir().expect("tempdir");
    let options = FsOptions::default()
        .durability(Durability::Flush)
        .compaction(
            Compaction::default()
                .min_journal_bytes(0)
                .snapshot_percent(0)
                .background_bytes(0),
        );
    let store = FsPlanRepository::with_options(root.path(), options.clone());
    let record = plan(4);
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let mut states = vec![record.clone()];
    let mut batches = Vec::new();
    for range in common::batches(3000) {
        let mut next = states[states.len() - 1].clone();
        apply_range(&mut next, range.start, range.end);
        states.push(next);
        batches.push(range.map(change).collect::<Vec<_>>());
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (done, id) = (done.clone(), id.clone());
        let reader = FsPlanRepository::with_options(root.path(), options);
        tokio::spawn(async move {
            let mut found = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                found.push(reader.load(&id).await.expect("every read succeeds"));
            }
            found
        })
    };
    for batch in &batches {
        store.append(&id, batch).await.expect("append");
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let found = reader.await.expect("reader");
    assert!(found.len() > 10, "the reader read {} times", found.len());
    for state in &found {
        assert!(
            states.contains(state),
            "a state that no prefix of the batches makes"
        );
    }
    assert!(store.io_stats().compactions >= 3, "{:?}", store.io_stats());
}

#[tokio::test]
async fn a_settled_or_dropped_store_leaves_its_background_snapshot_in_place() {
    // The process ends with its store: the snapshot being written is finished first, so the
    // plan is not left as a temporary file and two journals.
    let root = tempfile::tempdir().expect("tempdir");
    let options = FsOptions::default().compaction(
        Compaction::default()
            .min_journal_bytes(0)
            .snapshot_percent(0)
            .background_bytes(0),
    );
    let store = FsPlanRepository::with_options(root.path(), options);
    let record = plan(400);
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let dir = store.plan_dir(&id).expect("dir");
    let batch: Vec<StateChange> = (0..20).map(change).collect();
    store.append(&id, &batch).await.expect("append");
    assert_eq!(store.io_stats().compactions, 1, "the append started one");
    // Settling waits for it, and so does dropping the last handle.
    store.settle();
    let settled = files_in(&dir);
    drop(store);
    assert_eq!(settled, files_in(&dir));
    assert_eq!(
        files_in(&dir),
        [
            "journal-000001.log",
            "journal.lock",
            "owner.lock",
            "plan.json"
        ]
    );
    let mut expected = record;
    apply_range(&mut expected, 0, 20);
    let fresh = FsPlanRepository::new(root.path());
    assert_eq!(fresh.load(&id).await.expect("load"), expected);
}

#[tokio::test]
async fn a_spec_replaced_between_compactions_is_in_the_next_snapshot() {
    // Compactions reuse the spec's JSON while the spec is unchanged: a replaced one must be
    // written anew, by this handle and by one that read the plan from disk.
    let root = tempfile::tempdir().expect("tempdir");
    let options = FsOptions::default().compaction(
        Compaction::default()
            .min_journal_bytes(0)
            .snapshot_percent(0)
            .max_journal_records(1),
    );
    let store = FsPlanRepository::with_options(root.path(), options.clone());
    let record = plan(4);
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let mut expected = record.clone();
    for (round, handle) in [
        &store,
        &FsPlanRepository::with_options(root.path(), options.clone()),
    ]
    .into_iter()
    .enumerate()
    {
        let replaced = StateChange::SpecsReplaced {
            node: round,
            work: Some(Box::new(WorkSpec::shell(format!("echo replaced {round}")))),
            prechecks: None,
            postchecks: None,
        };
        let batch = [replaced, change(round as u64)];
        handle.append(&id, &batch).await.expect("append");
        for c in &batch {
            expected.apply(c).expect("applies");
        }
        // Every append compacts (one record is due): the snapshot alone holds the state.
        let fresh = FsPlanRepository::with_options(root.path(), options.clone());
        let loaded = fresh.load(&id).await.expect("load");
        assert_eq!(loaded, expected, "round {round}");
        let snapshot = fs::read_to_string(store.plan_dir(&id).expect("dir").join("plan.json"));
        let text = snapshot.expect("snapshot");
        assert!(
            text.contains(&format!("echo replaced {round}")),
            "round {round}"
        );
    }
    assert!(store.io_stats().compactions >= 1);
}

#[tokio::test]
async fn compaction_counts_each_change_as_16_bytes_at_least() {
    // Binary records take a few bytes a change; a reload replays changes, not bytes.
    let root = tempfile::tempdir().expect("tempdir");
    let options = FsOptions::default()
        .durability(Durability::Flush)
        .compaction(
            Compaction::default()
                .min_journal_bytes(100 * 16)
                .snapshot_percent(0),
        );
    let store = FsPlanRepository::with_options(root.path(), options);
    let record = plan(10);
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let process = |i: u32| StateChange::Process {
        node: (i % 10) as usize,
        pgid: i,
        running: true,
    };
    for batch in 0..10 {
        let changes: Vec<StateChange> = (batch * 10..batch * 10 + 10).map(process).collect();
        store.append(&id, &changes).await.expect("append");
    }
    let stats = store.io_stats();
    assert!(stats.journal_bytes_written < 1000, "{stats:?}");
    assert_eq!(
        stats.compactions, 0,
        "100 changes count as 1,600 bytes: not over"
    );
    store.append(&id, &[process(100)]).await.expect("append");
    assert_eq!(store.io_stats().compactions, 1, "101 changes are");
}

#[tokio::test]
async fn a_plan_that_ends_is_compacted_once_in_the_background() {
    let root = tempfile::tempdir().expect("tempdir");
    // Never due while it runs: only its end folds the journal.
    let options = FsOptions::default()
        .durability(Durability::Flush)
        .compaction(Compaction::default().snapshot_percent(10_000));
    let store = FsPlanRepository::with_options(root.path(), options);
    let (record, small) = (plan(3_000), plan(10));
    let (id, small_id) = (record.state.id.clone(), small.state.id.clone());
    store.create(&record).await.expect("create");
    store.create(&small).await.expect("create");
    let mut expected = append_full_run(&store, &record).await;
    append_full_run(&store, &small).await;
    assert_eq!(
        store.io_stats().compactions,
        0,
        "nothing is due while they run"
    );
    let ended = StateChange::Ended { at: 900_000 };
    expected.apply(&ended).expect("applies");
    store
        .append(&small_id, std::slice::from_ref(&ended))
        .await
        .expect("append");
    store.append(&id, &[ended]).await.expect("append");
    store.settle();
    assert_eq!(
        store.io_stats().compactions,
        1,
        "the large plan's 24k changes are past min_journal_bytes, the small plan's 80 are not"
    );
    let dir = store.plan_dir(&id).expect("dir");
    let files = files_in(&dir);
    let journals: Vec<&String> = files.iter().filter(|f| f.starts_with("journal-")).collect();
    assert_eq!(journals, ["journal-000001.log"], "{files:?}");
    assert_eq!(
        fs::read(dir.join("journal-000001.log")).expect("journal"),
        journal_header(SCHEMA_VERSION + 1, 1),
        "the snapshot alone holds the ended plan"
    );
    let small_dir = store.plan_dir(&small_id).expect("dir");
    assert!(small_dir.join("journal-000000.log").is_file());
    // This handle and a fresh one both read the whole run.
    assert_eq!(store.load(&id).await.expect("load"), expected);
    let fresh = FsPlanRepository::new(root.path());
    assert_eq!(fresh.load(&id).await.expect("load"), expected);
}

#[tokio::test]
async fn one_transition_costs_the_same_bytes_on_small_and_large_plans() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::with_options(
        root.path(),
        FsOptions::default().durability(Durability::Flush),
    );
    let mut costs = Vec::new();
    for nodes in [10, 1_000, 10_000] {
        let record = plan(nodes);
        let id = record.state.id.clone();
        store.create(&record).await.expect("create");
        let before = store.io_stats();
        let ready = StateChange::Node {
            node: 7,
            status: NodeStatus::Ready,
            at: 5,
        };
        store.append(&id, &[ready]).await.expect("append");
        let after = store.io_stats();
        costs.push(after.state_bytes_written() - before.state_bytes_written());
    }
    assert!(costs.iter().all(|&c| c == costs[0] && c < 100), "{costs:?}");
}

#[tokio::test]
async fn a_whole_run_of_a_large_plan_round_trips() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::with_options(
        root.path(),
        FsOptions::default().durability(Durability::Flush),
    );
    let record = plan(2_000);
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let expected = append_full_run(&store, &record).await;
    let fresh = FsPlanRepository::new(root.path());
    let loaded = fresh.load(&id).await.expect("load");
    assert_eq!(loaded, expected);
    assert!(loaded
        .state
        .nodes
        .iter()
        .all(|n| n.status == NodeStatus::Succeeded));
}

#[tokio::test]
async fn logs_rotate_and_read_across_the_rotation() {
    let root = tempfile::tempdir().expect("tempdir");
    let store =
        FsPlanRepository::with_options(root.path(), FsOptions::default().log_max_bytes(1024));
    let record = plan(3);
    let id = record.state.id.clone();
    let node = record.state.nodes[0].id.clone();
    store.create(&record).await.expect("create");
    let key = LogKey {
        plan: id.clone(),
        node: node.clone(),
        phase: Phase::Work,
        attempt: 1,
    };
    let mut written = String::new();
    for i in 0..200 {
        let line = format!("output line {i:04} .........................\n");
        store.append_log(&key, &line).await.expect("log");
        written.push_str(&line);
    }
    let dir = store
        .plan_dir(&id)
        .expect("dir")
        .join("logs")
        .join(node.as_str())
        .join("1");
    assert_eq!(files_in(&dir), ["work.log", "work.log.1"]);
    let log = store
        .read_log(&id, &node, LogQuery::new())
        .await
        .expect("read");
    assert!(written.ends_with(&log), "not the end of the log");
    assert!(
        log.len() > 1024 && log.len() <= 2048,
        "{} bytes kept",
        log.len()
    );
    assert!(log.starts_with("output line"), "starts mid-line");
    let tail = store
        .read_log(&id, &node, LogQuery::new().phase(Phase::Work).tail(2))
        .await
        .expect("tail");
    assert_eq!(
        tail,
        "output line 0198 .........................\noutput line 0199 .........................\n"
    );
}

#[tokio::test]
async fn ids_that_are_not_folder_names_are_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::new(root.path().join("store"));
    let mut record = plan(3);
    record.state.id = PlanId::from("../escape");
    assert!(matches!(
        store.create(&record).await,
        Err(StoreError::Rejected { .. })
    ));
    assert!(matches!(
        store.load(&PlanId::from("../escape")).await,
        Err(StoreError::NotFound(_))
    ));
    let record = plan(3);
    store.create(&record).await.expect("create");
    let bad = NodeId::from("../../outside");
    let r = store
        .save_attempt_specs(&record.state.id, &bad, 1, &AttemptSpecs::default())
        .await;
    assert!(matches!(r, Err(StoreError::Rejected { .. })), "{r:?}");
    let key = LogKey {
        plan: record.state.id.clone(),
        node: bad,
        phase: Phase::Work,
        attempt: 1,
    };
    let r = store.append_log(&key, "x\n").await;
    assert!(matches!(r, Err(StoreError::Rejected { .. })), "{r:?}");
    assert_eq!(files_in(root.path()), ["store"]);
}

#[tokio::test]
async fn delete_is_refused_while_another_handle_runs_the_plan() {
    let root = tempfile::tempdir().expect("tempdir");
    let runner = FsPlanRepository::new(root.path());
    let other = FsPlanRepository::new(root.path());
    let record = plan(3);
    let id = record.state.id.clone();
    runner.create(&record).await.expect("create");
    let lease = runner.acquire(&id).await.expect("acquire");
    match other.delete(&id).await {
        Err(StoreError::Locked { owner, .. }) => {
            assert!(owner.contains(&std::process::id().to_string()), "{owner}")
        }
        r => panic!("delete of a running plan: {r:?}"),
    }
    other.load(&id).await.expect("still there");
    // The lease holder itself may delete it.
    runner.delete(&id).await.expect("delete by the owner");
    drop(lease);
    assert!(matches!(
        other.load(&id).await,
        Err(StoreError::NotFound(_))
    ));
}

#[tokio::test]
async fn an_empty_root_lists_nothing_and_leftovers_are_ignored() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::new(root.path().join("missing"));
    let listing = store.list().await.expect("list");
    assert!(listing.plans.is_empty() && listing.damaged.is_empty());
    let store = FsPlanRepository::new(root.path());
    let record = plan(3);
    store.create(&record).await.expect("create");
    // Leftovers of an interrupted create and delete, and a stray file.
    let plans = root.path().join("plans");
    fs::create_dir_all(plans.join(".create-x-1")).expect("mkdir");
    fs::create_dir_all(plans.join(".deleted-y-1/specs")).expect("mkdir");
    fs::write(plans.join("README"), "hi").expect("write");
    let listing = store.list().await.expect("list");
    assert_eq!(listing.plans.len(), 1);
    assert!(listing.damaged.is_empty(), "{:?}", listing.damaged);
    assert!(!plans.join(".deleted-y-1").exists());
}

#[tokio::test]
async fn files_of_older_builds_still_load_and_are_compacted_before_binary_records() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::new(root.path());
    let record = plan(40);
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let dir = store.plan_dir(&id).expect("dir");
    let journal = dir.join("journal-000000.log");
    // The snapshot of an older build: envelope version 1, every job and node an object.
    let snapshot = dir.join("plan.json");
    let read_json = |path: &std::path::Path| -> serde_json::Value {
        serde_json::from_slice(&fs::read(path).expect("read")).expect("json")
    };
    let current = read_json(&snapshot);
    assert_eq!(current["schemaVersion"], SCHEMA_VERSION + 2);
    assert!(current["record"]["spec"]["jobs"][0].is_array(), "{current}");
    // 40 fresh nodes whose ids are derived: their count.
    assert_eq!(current["record"]["state"]["nodes"], serde_json::json!([40]));
    let old = serde_json::json!({
        "schemaVersion": 1,
        "generation": 0,
        "createdNs": current["createdNs"],
        "record": record,
    });
    fs::write(&snapshot, serde_json::to_vec(&old).expect("json")).expect("write");
    // The journal of an older build: header version 1, every batch a JSON array, rare
    // changes among them.
    let mut batches = full_run(40);
    batches[3].push(StateChange::Message {
        node: 2,
        message: "a rare change".into(),
    });
    let mut bytes = journal_header(1, 0);
    let mut expected = record.clone();
    for batch in &batches {
        bytes.extend(json_record(batch));
        for c in batch {
            expected.apply(c).expect("applies");
        }
    }
    fs::write(&journal, &bytes).expect("write");
    let fresh = FsPlanRepository::new(root.path());
    assert_eq!(fresh.load(&id).await.expect("load"), expected);

    // The first append compacts: older builds must never find a binary record under a
    // header they read (the new header's version they refuse as unsupported).
    let more = StateChange::Paused { at: 200_000 };
    fresh
        .append(&id, std::slice::from_ref(&more))
        .await
        .expect("append");
    expected.apply(&more).expect("applies");
    assert_eq!(fresh.io_stats().compactions, 1);
    assert!(!journal.exists());
    let grown = fs::read(dir.join("journal-000001.log")).expect("read");
    assert_eq!(grown[..24], journal_header(SCHEMA_VERSION + 1, 1));
    assert_eq!(grown[24 + 8], 0x01, "the new record is binary");
    assert!(grown.len() - 24 < 16, "{} bytes", grown.len() - 24);
    let again = FsPlanRepository::new(root.path());
    assert_eq!(again.load(&id).await.expect("load"), expected);
    // The compaction wrote the snapshot in the current format too.
    let rewritten = read_json(&snapshot);
    assert_eq!(rewritten["schemaVersion"], SCHEMA_VERSION + 2);
    assert!(
        rewritten["record"]["spec"]["jobs"][0].is_array(),
        "{rewritten}"
    );
}

#[tokio::test]
async fn a_staged_plan_lives_in_a_hidden_folder_until_created_and_is_gone_when_discarded() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::new(root.path().join(".orchestrator"));
    let plans = root.path().join(".orchestrator/plans");
    let hidden = || -> Vec<String> {
        files_in(&plans)
            .into_iter()
            .filter(|n| n.starts_with(".create-"))
            .collect()
    };
    let record = plan(3);
    let id = record.state.id.clone();

    // Staged: written, flushed, hidden.
    let staged = store.stage(&record).await.expect("stage");
    assert_eq!(hidden().len(), 1);
    assert!(!plans.join(id.as_str()).exists());
    assert!(matches!(
        store.load(&id).await,
        Err(StoreError::NotFound(_))
    ));
    // Created: moved into place whole, and read back by a fresh handle.
    store.create_staged(&record, staged).await.expect("create");
    assert_eq!(files_in(&plans), [id.to_string()]);
    let fresh = FsPlanRepository::new(root.path().join(".orchestrator"));
    assert_eq!(fresh.load(&id).await.expect("load"), record);

    // Staged under a taken id: refused by the stage itself, nothing left.
    assert!(matches!(
        store.stage(&record).await,
        Err(StoreError::AlreadyExists(_))
    ));
    assert!(hidden().is_empty());

    // Taken between the stage and the creation: refused, the staged folder removed, the
    // plan that took the id untouched.
    let other = plan(2);
    let staged = store.stage(&other).await.expect("stage");
    fresh
        .create(&other)
        .await
        .expect("another handle creates it");
    let created = store.create_staged(&other, staged).await;
    assert!(
        matches!(created, Err(StoreError::AlreadyExists(_))),
        "{created:?}"
    );
    assert!(hidden().is_empty());
    assert_eq!(fresh.load(&other.state.id).await.expect("load"), other);

    // Discarded, or dropped unused: removed.
    let third = plan(4);
    let staged = store.stage(&third).await.expect("stage");
    assert_eq!(hidden().len(), 1);
    store.discard(staged).await;
    assert!(hidden().is_empty());
    drop(store.stage(&third).await.expect("stage"));
    assert!(hidden().is_empty());
    assert!(!plans.join(third.state.id.as_str()).exists());
}
