//! The background compaction's states, step by step, as a crash would leave them.

use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
use orchestrator_core::PlanRepository;

use super::*;
use crate::options::Compaction;
use crate::stats::Counters;
use crate::FsPlanRepository;

struct Fixture {
    _root: tempfile::TempDir,
    plan: PlanId,
    paths: PlanPaths,
    options: FsOptions,
    counters: Counters,
}

impl Fixture {
    /// A stored plan of three jobs whose snapshots are always written in the background.
    fn new() -> Fixture {
        let root = tempfile::tempdir().expect("tempdir");
        let mut spec = PlanSpec::new("background").isolation(Isolation::None);
        for i in 0..3 {
            spec = spec.job(JobSpec::new(
                format!("job-{i}"),
                "T",
                WorkSpec::shell("true"),
            ));
        }
        let nodes = PlanGraph::build(&spec).expect("valid").node_count();
        let record = PlanRecord::new(PlanId::random(), spec, "/repo".into(), nodes, 1);
        let plan = record.state.id.clone();
        let store = FsPlanRepository::new(root.path());
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(store.create(&record))
            .expect("create");
        let paths = PlanPaths::of(&root.path().join("plans"), &plan).expect("paths");
        let options = FsOptions::default().compaction(
            Compaction::default()
                .background_bytes(0)
                .min_journal_bytes(0),
        );
        Fixture {
            _root: root,
            plan,
            paths,
            options,
            counters: Counters::default(),
        }
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            plan: &self.plan,
            paths: &self.paths,
            options: &self.options,
            counters: &self.counters,
        }
    }

    /// The plan as a new reader finds it on disk.
    fn read(&self) -> Live {
        Live::read(&self.ctx()).expect("read")
    }

    /// The files of the plan folder, sorted.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.paths.dir)
            .expect("plan folder")
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| !n.ends_with(".lock"))
            .collect();
        names.sort();
        names
    }

    /// The plan read, four changes appended, and a background compaction started.
    fn compacting(&self) -> (Live, SnapshotJob) {
        let ctx = self.ctx();
        let mut live = self.read();
        live.append(&ctx, &batch(0, 4)).expect("append");
        let job = live.start_compaction(&ctx).expect("start").expect("a job");
        (live, job)
    }

    /// The generation `plan.json` names.
    fn snapshot_generation(&self) -> u64 {
        let bytes = fs::read(self.paths.snapshot()).expect("snapshot");
        snapshot::open(&bytes, &self.paths.snapshot())
            .expect("envelope")
            .generation
    }
}

/// Session ids `from..to`, one change each, on the plan's three nodes.
fn batch(from: usize, to: usize) -> Vec<StateChange> {
    (from..to)
        .map(|i| StateChange::Session {
            node: i % 3,
            session_id: format!("session-{i}"),
        })
        .collect()
}

#[test]
fn a_snapshot_written_in_the_background_keeps_every_change_at_every_step() {
    let f = Fixture::new();
    let ctx = f.ctx();
    let mut live = f.read();
    live.append(&ctx, &batch(0, 4)).expect("append");
    let before = f.read();
    assert!(before.is_current(&ctx).expect("current"));
    let job = live.start_compaction(&ctx).expect("start").expect("a job");
    // The new journal is there, the snapshot still names the old one.
    assert_eq!(
        f.files(),
        ["journal-000000.log", "journal-000001.log", "plan.json"]
    );
    assert_eq!(f.snapshot_generation(), 0);
    assert_eq!(f.read().record, live.record);

    // Appends go to the new journal while the job runs; a reader replays both.
    live.append(&ctx, &batch(4, 9)).expect("append");
    let reader = f.read();
    assert_eq!(reader.record, live.record);
    assert_eq!((reader.snapshot_generation, reader.generation), (0, 1));
    assert!(live.is_current(&ctx).expect("current"));
    // A compaction due meanwhile waits for the one under way.
    assert!(live.start_compaction(&ctx).expect("start").is_none());
    // A reader that read the plan before the new journal existed sees it is behind.
    assert!(!before.is_current(&ctx).expect("current"));

    job.run(&ctx);
    live.finish_pending(&ctx);
    assert_eq!(f.files(), ["journal-000001.log", "plan.json"]);
    assert_eq!(f.snapshot_generation(), 1);
    assert!(live.is_current(&ctx).expect("current"), "its own snapshot");
    assert_eq!(f.read().record, live.record);

    // The next one starts once this one is in place.
    live.append(&ctx, &batch(9, 12)).expect("append");
    let _job = live.start_compaction(&ctx).expect("start").expect("a job");
    assert!(f.files().contains(&"journal-000002.log".to_owned()));
    assert_eq!(f.read().record, live.record);
}

#[test]
fn the_next_append_puts_a_handed_over_snapshot_in_place() {
    let f = Fixture::new();
    let ctx = f.ctx();
    let (mut live, job) = f.compacting();
    job.run(&ctx);
    assert_eq!(f.snapshot_generation(), 0, "handed over, not in place yet");
    live.append(&ctx, &batch(4, 6)).expect("append");
    assert_eq!(f.snapshot_generation(), 1);
    assert_eq!(f.files(), ["journal-000001.log", "plan.json"]);
    assert_eq!(f.read().record, live.record);
}

#[test]
fn a_job_that_never_ran_leaves_the_pair_to_the_next_compaction() {
    let f = Fixture::new();
    let ctx = f.ctx();
    let (mut live, job) = f.compacting();
    // Its thread could not start.
    drop(job);
    live.append(&ctx, &batch(4, 6)).expect("append");
    assert!(live.start_compaction(&ctx).expect("start").is_none());
    assert_eq!(f.snapshot_generation(), 2);
    assert_eq!(f.files(), ["journal-000002.log", "plan.json"]);
    assert_eq!(f.read().record, live.record);
}

#[test]
fn a_crash_before_the_snapshot_is_in_place_loses_nothing_and_the_pair_is_folded_later() {
    let f = Fixture::new();
    let ctx = f.ctx();
    let (mut live, job) = f.compacting();
    live.append(&ctx, &batch(4, 9)).expect("append");
    // The process dies with the snapshot written to its temporary file only.
    job.run(&ctx);
    let expected = live.record.clone();
    drop(live);
    assert_eq!(f.files().len(), 4, "{:?}", f.files());

    let mut after = f.read();
    assert_eq!(after.record, expected);
    after.append(&ctx, &batch(9, 11)).expect("append");
    let mut expected = expected;
    for change in batch(9, 11) {
        expected.apply(&change).expect("applies");
    }
    assert_eq!(f.read().record, expected);
    assert_eq!(
        f.files(),
        ["journal-000000.log", "journal-000001.log", "plan.json"],
        "the leftover temporary file is removed, both journals are kept"
    );
    // The pair is folded within the append that finds the journal due.
    assert!(after.start_compaction(&ctx).expect("start").is_none());
    assert_eq!(f.files(), ["journal-000002.log", "plan.json"]);
    assert_eq!(f.snapshot_generation(), 2);
    assert_eq!(f.read().record, expected);
}

#[test]
fn a_torn_journal_ends_the_history_before_the_next_one() {
    let f = Fixture::new();
    let ctx = f.ctx();
    let mut live = f.read();
    live.append(&ctx, &batch(0, 4)).expect("append");
    let kept = live.record.clone();
    live.append(&ctx, &batch(4, 6)).expect("append");
    let _job = live.start_compaction(&ctx).expect("start").expect("a job");
    live.append(&ctx, &batch(6, 9)).expect("append");
    drop(live);
    // A machine crash without full durability lost the old journal's last bytes.
    let old = f.paths.journal(0);
    let len = fs::metadata(&old).expect("journal").len();
    OpenOptions::new()
        .write(true)
        .open(&old)
        .and_then(|file| file.set_len(len - 1))
        .expect("truncate");

    let mut after = f.read();
    assert_eq!(
        after.record, kept,
        "the torn record and what follows it are gone"
    );
    after.append(&ctx, &batch(20, 22)).expect("append");
    let mut expected = kept;
    for change in batch(20, 22) {
        expected.apply(&change).expect("applies");
    }
    assert_eq!(f.read().record, expected);
    assert_eq!(f.files(), ["journal-000000.log", "plan.json"]);
}

#[test]
fn a_snapshot_overtaken_by_another_writers_compaction_is_dropped() {
    let f = Fixture::new();
    let ctx = f.ctx();
    let (mut live, job) = f.compacting();
    // Another process reads the pair and folds it while the job runs.
    let mut other = f.read();
    other.append(&ctx, &batch(4, 6)).expect("append");
    other.compact(&ctx).expect("compact");
    job.run(&ctx);
    live.finish_pending(&ctx);
    assert_eq!(f.snapshot_generation(), 2);
    assert_eq!(f.files(), ["journal-000002.log", "plan.json"]);
    assert_eq!(f.read().record, other.record);
    assert!(
        !live.is_current(&ctx).expect("current"),
        "it reads the plan again"
    );
}
