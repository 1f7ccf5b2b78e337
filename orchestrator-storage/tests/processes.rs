//! Tests with real processes: `kill -9` at random points while a child appends (every other
//! child with `Durability::Flush`, every third compacting in the background), and plan locks
//! held by another process.
//!
//! The test binary re-executes itself as the child: `child_process` does nothing unless
//! `ORCH_STORAGE_TEST_CHILD` says which child to be.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{apply_range, batch_len, change, plan};
use orchestrator_core::ids::PlanId;
use orchestrator_core::state::StateChange;
use orchestrator_core::{PlanRepository, StoreError};
use orchestrator_storage::{Compaction, Durability, FsOptions, FsPlanRepository};
use orchestrator_testkit::fixtures::Rng;

const CHILD: &str = "ORCH_STORAGE_TEST_CHILD";
const ROOT: &str = "ORCH_STORAGE_TEST_ROOT";
const PLAN: &str = "ORCH_STORAGE_TEST_PLAN";
const START: &str = "ORCH_STORAGE_TEST_START";
const FLUSH_ONLY: &str = "ORCH_STORAGE_TEST_FLUSH_ONLY";
const BACKGROUND: &str = "ORCH_STORAGE_TEST_BACKGROUND";

/// Compacts every ~15 appends, so that kills also land inside compactions (in the
/// background ones, between the new journal and the snapshot that names it).
fn crash_options(durability: Durability, background: bool) -> FsOptions {
    let compaction = Compaction::default()
        .min_journal_bytes(1500)
        .snapshot_percent(0);
    let compaction = if background {
        compaction.background_bytes(0)
    } else {
        compaction.background_bytes(u64::MAX)
    };
    FsOptions::default()
        .durability(durability)
        .compaction(compaction)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// Entry point of the child processes.
#[test]
fn child_process() {
    match std::env::var(CHILD).as_deref() {
        Ok("append") => append_child(),
        Ok("lock") => lock_child(),
        _ => {}
    }
}

/// Appends numbered batches forever from change `START`, printing `ack <end>` after each
/// append returns.
fn append_child() {
    // A kill -9 loses nothing written, flushed to the disk or not.
    let durability = if std::env::var(FLUSH_ONLY).is_ok() {
        Durability::Flush
    } else {
        Durability::Full
    };
    let background = std::env::var(BACKGROUND).is_ok();
    let store = FsPlanRepository::with_options(env(ROOT), crash_options(durability, background));
    let plan = PlanId::from(env(PLAN));
    let mut i: u64 = env(START).parse().expect("start");
    let mut out = std::io::stdout().lock();
    runtime().block_on(async {
        loop {
            let len = batch_len(i);
            let batch: Vec<StateChange> = (i..i + len).map(change).collect();
            store.append(&plan, &batch).await.expect("append");
            i += len;
            writeln!(out, "ack {i}")
                .and_then(|()| out.flush())
                .expect("ack");
        }
    });
}

/// Holds the plan's lease; `release` on stdin drops it; exits at the end of stdin.
fn lock_child() {
    let store = FsPlanRepository::new(env(ROOT));
    let plan = PlanId::from(env(PLAN));
    let rt = runtime();
    let mut lease = Some(rt.block_on(store.acquire(&plan)).expect("acquire"));
    let mut out = std::io::stdout().lock();
    writeln!(out, "locked {}", std::process::id()).expect("write");
    out.flush().expect("flush");
    for line in std::io::stdin().lines() {
        if line.expect("stdin").trim() == "release" {
            lease = None;
            writeln!(out, "released")
                .and_then(|()| out.flush())
                .expect("write");
        }
    }
    drop(lease);
}

/// How an appending child stores: without flushes, and compacting in the background.
#[derive(Clone, Copy, Default)]
struct Mode {
    flush_only: bool,
    background: bool,
}

fn spawn_child(kind: &str, root: &Path, plan: &PlanId, start: u64, mode: Mode) -> Child {
    let exe = std::env::current_exe().expect("test binary");
    let mut command = Command::new(exe);
    if mode.flush_only {
        command.env(FLUSH_ONLY, "1");
    }
    if mode.background {
        command.env(BACKGROUND, "1");
    }
    command
        .args([
            "child_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(CHILD, kind)
        .env(ROOT, root)
        .env(PLAN, plan.as_str())
        .env(START, start.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child")
}

/// Forwards the child's stdout lines to a channel.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn generation(root: &Path, plan: &PlanId) -> u64 {
    let path = root.join("plans").join(plan.as_str()).join("plan.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json");
    v["generation"].as_u64().expect("generation")
}

#[test]
fn kill_9_at_random_points_loses_nothing_acknowledged() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    const TRIALS: usize = 220;
    let seed = std::env::var("ORCH_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        });
    eprintln!("crash test seed {seed} (set ORCH_CRASH_SEED to replay)");
    let mut rng = Rng::new(seed);
    let root = tempfile::tempdir().expect("tempdir");
    let rt = runtime();
    let record = plan(3);
    let id = record.state.id.clone();
    rt.block_on(FsPlanRepository::new(root.path()).create(&record))
        .expect("create");

    let started = Instant::now();
    let mut expected = record;
    let mut applied = 0u64; // changes known to be in the plan (always a batch boundary)
    let (mut unacked_but_kept, mut before_any_ack) = (0, 0);
    for trial in 0..TRIALS {
        let mode = Mode {
            flush_only: trial % 2 == 1,
            background: trial % 3 == 2,
        };
        let mut child = spawn_child("append", root.path(), &id, applied, mode);
        let acks = lines_of(&mut child);
        let mut acked = applied;
        if rng.below_u64(4) == 0 {
            // Anywhere, startup included.
            std::thread::sleep(Duration::from_micros(rng.below_u64(15_000)));
        } else {
            // After a random number of acknowledged appends, plus a little.
            let want = rng.below_u64(40);
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut seen = 0;
            while seen < want && Instant::now() < deadline {
                if let Ok(line) = acks.recv_timeout(Duration::from_millis(100)) {
                    if let Some(n) = line.strip_prefix("ack ") {
                        acked = n.parse().expect("ack number");
                        seen += 1;
                    }
                }
            }
            std::thread::sleep(Duration::from_micros(rng.below_u64(400)));
        }
        child.kill().expect("kill");
        child.wait().expect("wait");
        // Everything the child printed before it died.
        for line in acks.iter() {
            if let Some(n) = line.strip_prefix("ack ") {
                acked = n.parse().expect("ack number");
            }
        }
        if acked == applied {
            before_any_ack += 1;
        }
        // Reload in a fresh handle: always readable, holding everything acknowledged...
        let loaded = rt
            .block_on(FsPlanRepository::new(root.path()).load(&id))
            .unwrap_or_else(|e| panic!("trial {trial}: reload failed after kill: {e}"));
        apply_range(&mut expected, applied, acked);
        applied = acked;
        if loaded != expected {
            // ...or, at most, the one batch in flight when the child died, complete.
            let len = batch_len(applied);
            apply_range(&mut expected, applied, applied + len);
            applied += len;
            unacked_but_kept += 1;
            assert!(
                loaded == expected,
                "trial {trial}: the reloaded plan is not the acknowledged prefix (changes 0..{}) \
                 nor that prefix plus the batch in flight",
                applied - len
            );
        }
    }
    let generations = generation(root.path(), &id);
    let elapsed = started.elapsed();
    eprintln!(
        "{TRIALS} kills in {elapsed:?}: {applied} changes kept, {unacked_but_kept} kills kept an \
         unacknowledged batch, {before_any_ack} kills before any ack, {generations} compactions"
    );
    assert!(applied > 500, "too few changes got through: {applied}");
    assert!(
        generations > 20,
        "compaction was not exercised: {generations}"
    );
}

#[test]
fn a_second_process_cannot_take_a_plan_and_gets_it_when_the_first_dies() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    let rt = runtime();
    let store = FsPlanRepository::new(root.path());
    let record = plan(3);
    let id = record.state.id.clone();
    rt.block_on(store.create(&record)).expect("create");

    let expect_locked_by = |pid: u32| {
        match rt.block_on(store.acquire(&id)) {
            Err(StoreError::Locked { plan, owner }) => {
                assert_eq!(plan, id);
                assert_eq!(owner, format!("process {pid}"));
            }
            r => panic!("acquire while another process holds the plan: {r:?}"),
        }
        match rt.block_on(store.delete(&id)) {
            Err(StoreError::Locked { owner, .. }) => assert_eq!(owner, format!("process {pid}")),
            r => panic!("delete while another process holds the plan: {r:?}"),
        }
    };
    let wait_for = |lines: &mpsc::Receiver<String>, prefix: &str| -> String {
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("child never printed {prefix:?}"));
            if line.starts_with(prefix) {
                return line;
            }
        }
    };

    // The lease is released when its holder drops it...
    let mut child = spawn_child("lock", root.path(), &id, 0, Mode::default());
    let lines = lines_of(&mut child);
    let line = wait_for(&lines, "locked ");
    assert_eq!(line, format!("locked {}", child.id()));
    expect_locked_by(child.id());
    // Others may still read and append; only running the plan is exclusive.
    rt.block_on(store.append(&id, &[change(0)]))
        .expect("append");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "release").expect("write");
    wait_for(&lines, "released");
    drop(
        rt.block_on(store.acquire(&id))
            .expect("acquire after release"),
    );
    drop(stdin);
    child.wait().expect("wait");

    // ...and when its holder is killed.
    let mut child = spawn_child("lock", root.path(), &id, 0, Mode::default());
    let lines = lines_of(&mut child);
    wait_for(&lines, "locked ");
    expect_locked_by(child.id());
    child.kill().expect("kill");
    child.wait().expect("wait");
    let lease = rt
        .block_on(store.acquire(&id))
        .expect("acquire after the holder died");
    drop(lease);
    let loaded = rt.block_on(store.load(&id)).expect("load");
    let mut expected = record;
    apply_range(&mut expected, 0, 1);
    assert_eq!(loaded, expected);
}
