//! Damaged files give clear errors that name the file; a damaged plan does not hide the
//! others from `list`; a torn journal tail is dropped and repaired.

mod common;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use common::{apply_range, change, journal_header, plan};
use orchestrator_core::ids::PlanId;
use orchestrator_core::plan::WorkSpec;
use orchestrator_core::repository::AttemptSpecs;
use orchestrator_core::state::{PlanRecord, SCHEMA_VERSION};
use orchestrator_core::{PlanRepository, StoreError};
use orchestrator_storage::FsPlanRepository;

struct Fixture {
    _root: tempfile::TempDir,
    store: FsPlanRepository,
    record: PlanRecord,
    dir: PathBuf,
}

impl Fixture {
    /// A store holding one healthy plan with 10 changes in its journal, plus the plan to damage.
    async fn new() -> (Fixture, PlanRecord) {
        let root = tempfile::tempdir().expect("tempdir");
        let store = FsPlanRepository::new(root.path());
        let healthy = plan(3);
        store.create(&healthy).await.expect("create");
        let record = plan(3);
        store.create(&record).await.expect("create");
        for i in 0..10 {
            store
                .append(&record.state.id, &[change(i)])
                .await
                .expect("append");
        }
        let dir = store.plan_dir(&record.state.id).expect("dir");
        let mut expected = record.clone();
        apply_range(&mut expected, 0, 10);
        (
            Fixture {
                _root: root,
                store,
                record,
                dir,
            },
            expected,
        )
    }

    fn id(&self) -> &PlanId {
        &self.record.state.id
    }

    fn snapshot(&self) -> PathBuf {
        self.dir.join("plan.json")
    }

    fn journal(&self) -> PathBuf {
        self.dir.join("journal-000000.log")
    }

    /// Loads through a fresh handle (no cache) and through `list`, expecting the same error.
    async fn damaged(&self) -> StoreError {
        self.damaged_files(true).await
    }

    /// Like [`Fixture::damaged`]; `own_handle` also checks the handle that wrote the plan
    /// (which trusts its cache while the files' sizes and identities are unchanged, as they
    /// are after an in-place edit of a journal that keeps its length).
    async fn damaged_files(&self, own_handle: bool) -> StoreError {
        let fresh = FsPlanRepository::new(self.store.root());
        let err = fresh.load(self.id()).await.expect_err("load must fail");
        let listing = fresh.list().await.expect("list still works");
        assert_eq!(listing.plans.len(), 1, "the healthy plan is still listed");
        assert_eq!(listing.damaged.len(), 1, "the damaged plan is reported");
        assert_eq!(&listing.damaged[0].0, self.id());
        assert_eq!(listing.damaged[0].1.to_string(), err.to_string());
        if own_handle {
            // The handle that wrote the plan notices the change on disk too.
            let own = self
                .store
                .load(self.id())
                .await
                .expect_err("own handle must fail");
            assert_eq!(own.to_string(), err.to_string());
        }
        err
    }
}

fn assert_corrupt(err: &StoreError, file: &Path, words: &str) {
    match err {
        StoreError::Corrupt { path, message } => {
            assert_eq!(path, file, "{err}");
            assert!(message.contains(words), "{message:?} lacks {words:?}");
        }
        other => panic!("expected Corrupt naming {}, got {other:?}", file.display()),
    }
    assert!(
        err.to_string().contains(&file.display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn truncated_snapshot() {
    let (f, _) = Fixture::new().await;
    let bytes = fs::read(f.snapshot()).expect("read");
    fs::write(f.snapshot(), &bytes[..bytes.len() / 2]).expect("write");
    assert_corrupt(&f.damaged().await, &f.snapshot(), "truncated");
}

#[tokio::test]
async fn garbage_snapshot() {
    let (f, _) = Fixture::new().await;
    fs::write(f.snapshot(), b"\x00\x01 this is not json").expect("write");
    assert_corrupt(&f.damaged().await, &f.snapshot(), "not a plan snapshot");
}

#[tokio::test]
async fn empty_snapshot() {
    let (f, _) = Fixture::new().await;
    fs::write(f.snapshot(), b"").expect("write");
    assert_corrupt(&f.damaged().await, &f.snapshot(), "truncated");
}

#[tokio::test]
async fn snapshot_with_an_invalid_record() {
    let (f, _) = Fixture::new().await;
    let mut v: serde_json::Value =
        serde_json::from_slice(&fs::read(f.snapshot()).expect("read")).expect("json");
    // A pending node is stored as its id alone; as an object, it can have any status.
    let node = &mut v["record"]["state"]["nodes"][0];
    *node = serde_json::json!({ "id": node.clone(), "status": "exploded" });
    fs::write(f.snapshot(), serde_json::to_vec(&v).expect("json")).expect("write");
    assert_corrupt(&f.damaged().await, &f.snapshot(), "invalid plan record");
}

#[tokio::test]
async fn snapshot_of_another_plan() {
    let (f, _) = Fixture::new().await;
    let other = plan(3);
    let mut v: serde_json::Value =
        serde_json::from_slice(&fs::read(f.snapshot()).expect("read")).expect("json");
    v["record"]["state"]["id"] = other.state.id.as_str().into();
    fs::write(f.snapshot(), serde_json::to_vec(&v).expect("json")).expect("write");
    assert_corrupt(&f.damaged().await, &f.snapshot(), "instead of");
}

#[tokio::test]
async fn missing_snapshot() {
    let (f, _) = Fixture::new().await;
    fs::remove_file(f.snapshot()).expect("remove");
    assert_corrupt(&f.damaged().await, &f.snapshot(), "missing");
}

#[tokio::test]
async fn newer_schema_version_is_refused_naming_the_file() {
    let (f, _) = Fixture::new().await;
    let mut v: serde_json::Value =
        serde_json::from_slice(&fs::read(f.snapshot()).expect("read")).expect("json");
    // A snapshot's envelope version is its schema version + 2.
    v["schemaVersion"] = (SCHEMA_VERSION + 3).into();
    fs::write(f.snapshot(), serde_json::to_vec(&v).expect("json")).expect("write");
    let err = f.damaged().await;
    match &err {
        StoreError::SchemaVersion {
            path,
            found,
            supported,
        } => {
            assert_eq!(path, &f.snapshot());
            assert_eq!(*found, SCHEMA_VERSION + 1);
            assert_eq!(*supported, SCHEMA_VERSION);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("plan.json"), "{err}");
    // Appending is refused as well: nothing is written over a file this build cannot read.
    let r = f.store.append(f.id(), &[change(10)]).await;
    assert!(matches!(r, Err(StoreError::SchemaVersion { .. })), "{r:?}");
}

#[tokio::test]
async fn journal_of_a_newer_schema_version() {
    let (f, _) = Fixture::new().await;
    let mut bytes = fs::read(f.journal()).expect("read");
    // A journal's header version is its schema version + 1.
    bytes[..24].copy_from_slice(&journal_header(SCHEMA_VERSION + 2, 0));
    fs::write(f.journal(), bytes).expect("write");
    match f.damaged_files(false).await {
        StoreError::SchemaVersion { path, found, .. } => {
            assert_eq!(path, f.journal());
            assert_eq!(found, SCHEMA_VERSION + 1);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn garbage_journal() {
    let (f, _) = Fixture::new().await;
    fs::write(f.journal(), vec![0x5a; 300]).expect("write");
    assert_corrupt(&f.damaged().await, &f.journal(), "not a journal");
}

#[tokio::test]
async fn journal_damaged_in_the_middle() {
    let (f, _) = Fixture::new().await;
    let mut bytes = fs::read(f.journal()).expect("read");
    bytes[24 + 12] ^= 0x20; // inside the first record's payload
    fs::write(f.journal(), bytes).expect("write");
    assert_corrupt(&f.damaged_files(false).await, &f.journal(), "bad checksum");
}

#[tokio::test]
async fn torn_journal_tail_is_dropped_then_repaired() {
    let (f, expected) = Fixture::new().await;
    // Half of a record, as a crash in the middle of a write would leave it.
    let record = {
        let payload = br#"[{"op":"paused","at":1}]"#;
        let mut r = (payload.len() as u32).to_le_bytes().to_vec();
        r.extend(crc32fast::hash(payload).to_le_bytes());
        r.extend(payload);
        r
    };
    let mut file = OpenOptions::new()
        .append(true)
        .open(f.journal())
        .expect("open");
    file.write_all(&record[..record.len() - 5]).expect("write");
    drop(file);
    let fresh = FsPlanRepository::new(f.store.root());
    assert_eq!(fresh.load(f.id()).await.expect("load"), expected);
    assert_eq!(f.store.load(f.id()).await.expect("load"), expected);
    // The next append cuts the torn bytes first, so its record is readable.
    fresh.append(f.id(), &[change(10)]).await.expect("append");
    let mut expected = expected;
    apply_range(&mut expected, 10, 11);
    let again = FsPlanRepository::new(f.store.root());
    assert_eq!(again.load(f.id()).await.expect("load"), expected);
    assert_eq!(f.store.load(f.id()).await.expect("load"), expected);
}

#[tokio::test]
async fn damaged_attempt_specs() {
    let (f, _) = Fixture::new().await;
    let node = f.record.state.nodes[0].id.clone();
    let specs = AttemptSpecs {
        work: Some(WorkSpec::shell("make")),
        ..AttemptSpecs::default()
    };
    f.store
        .save_attempt_specs(f.id(), &node, 1, &specs)
        .await
        .expect("save");
    let file = f
        .dir
        .join("specs")
        .join(node.as_str())
        .join("attempts/1/work.json");
    fs::write(&file, "{\"type\":\"shell\",").expect("write");
    let err = f
        .store
        .load_attempt_specs(f.id(), &node, 1)
        .await
        .expect_err("must fail");
    assert_corrupt(&err, &file, "not a work spec");
}

#[tokio::test]
async fn empty_journal_is_damage_not_a_fresh_plan() {
    let (f, _) = Fixture::new().await;
    fs::write(f.journal(), b"").expect("write");
    assert_corrupt(&f.damaged().await, &f.journal(), "empty");
    // Nothing is written over it either: an append would start the plan from its snapshot.
    let r = f.store.append(f.id(), &[change(10)]).await;
    assert!(matches!(r, Err(StoreError::Corrupt { .. })), "{r:?}");
    assert_eq!(fs::read(f.journal()).expect("read"), b"");
}

#[tokio::test]
async fn missing_journal_is_damage_not_a_fresh_plan() {
    let (f, _) = Fixture::new().await;
    fs::remove_file(f.journal()).expect("remove");
    assert_corrupt(&f.damaged().await, &f.journal(), "missing");
    let r = f.store.append(f.id(), &[change(10)]).await;
    assert!(matches!(r, Err(StoreError::Corrupt { .. })), "{r:?}");
    assert!(!f.journal().exists(), "no journal is made up");
}
