//! Secrets and permissions of the file store (issue 12, item 3): the values of secret env
//! variables never reach `plan.json`, the journal or the stored specs, but come back whole
//! when the plan is loaded; every file is `0600` and every folder `0700`.

use std::path::{Path, PathBuf};

use orchestrator_core::ids::PlanId;
use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
use orchestrator_core::redact::SecretNames;
use orchestrator_core::repository::AttemptSpecs;
use orchestrator_core::state::{PlanRecord, StateChange};
use orchestrator_core::{PlanRepository, StoreError};
use orchestrator_storage::{Compaction, FsOptions, FsPlanRepository};

const PLAN_KEY: &str = "sk-plan0123456789abcdefghij";
const JOB_TOKEN: &str = "job-token-value";
const SPEC_PASSWORD: &str = "p\"ss\\word with quotes";
const CONFIGURED: &str = "https://hooks.example/secret-path";
const SHAPED: &str = "ghp_0123456789abcdefghijABCDEFGHIJ";
const LATER: &str = "added-later-secret";

fn secrets() -> [&'static str; 6] {
    [
        PLAN_KEY,
        JOB_TOKEN,
        SPEC_PASSWORD,
        CONFIGURED,
        SHAPED,
        LATER,
    ]
}

fn shell_with_env(command: &str, env: &[(&str, &str)]) -> WorkSpec {
    let mut work = WorkSpec::shell(command);
    if let WorkSpec::Shell(s) = &mut work {
        for (k, v) in env {
            s.extra.make_mut().env.insert((*k).into(), (*v).into());
        }
    }
    work
}

fn record() -> PlanRecord {
    let mut spec = PlanSpec::new("secrets")
        .isolation(Isolation::None)
        .job(
            JobSpec::new(
                "first",
                "First",
                shell_with_env("echo $DB_PASSWORD", &[("DB_PASSWORD", SPEC_PASSWORD)]),
            )
            .env("MY_TOKEN", JOB_TOKEN)
            .env("HOOK_URL", CONFIGURED),
        )
        .job(JobSpec::new("second", "Second", WorkSpec::shell("true")).env("GH", SHAPED));
    spec.env.insert("API_KEY".into(), PLAN_KEY.into());
    spec.env.insert("MODE".into(), "plain-value".into());
    let nodes = PlanGraph::build(&spec).expect("valid").node_count();
    PlanRecord::new(PlanId::random(), spec, PathBuf::from("/repo"), nodes, 1_000)
}

fn options() -> FsOptions {
    FsOptions::default().secret_env(SecretNames::parse("HOOK_URL"))
}

/// Every file under `root`, with its text.
fn files(root: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                let text = String::from_utf8_lossy(&bytes).into_owned();
                out.push((path, text));
            }
        }
    }
    out
}

/// No secret in any file but `secrets.json`, which holds every one.
fn assert_kept_apart(root: &Path, expected: &[&str]) {
    let mut table = String::new();
    for (path, text) in files(root) {
        if path.file_name().is_some_and(|n| n == "secrets.json") {
            table = text;
            continue;
        }
        for secret in secrets() {
            // Quotes and backslashes are escaped in JSON: look for the escaped form too.
            let escaped = serde_json::to_string(secret).expect("json");
            let escaped = escaped.trim_matches('"');
            assert!(
                !text.contains(secret) && !text.contains(escaped),
                "{secret} in {}:\n{text}",
                path.display()
            );
        }
        if path.file_name().is_some_and(|n| n == "plan.json") {
            assert!(text.contains("plain-value"), "only secrets are kept apart");
        }
    }
    for secret in expected {
        let escaped = serde_json::to_string(secret).expect("json");
        assert!(
            table.contains(&escaped),
            "{secret} not in secrets.json: {table}"
        );
    }
}

/// An edit of node 1 that brings a new secret value, [`LATER`].
fn deploy_edit() -> StateChange {
    StateChange::SpecsReplaced {
        node: 1,
        work: Some(Box::new(shell_with_env(
            "deploy",
            &[("DEPLOY_TOKEN", LATER)],
        ))),
        prechecks: None,
        postchecks: None,
    }
}

#[tokio::test]
async fn secret_env_values_are_kept_apart_and_come_back_whole() {
    let root = tempfile::tempdir().expect("tempdir");
    let options = options().compaction(Compaction::default().max_journal_records(3));
    let store = FsPlanRepository::with_options(root.path(), options.clone());
    let mut expected = record();
    let id = expected.state.id.clone();
    store.create(&expected).await.expect("create");
    assert_kept_apart(root.path(), &secrets()[..5]);
    let fresh = FsPlanRepository::with_options(root.path(), options.clone());
    assert_eq!(fresh.load(&id).await.expect("load"), expected);

    // An edit brings a new secret: it goes to the table, not the journal.
    let change = deploy_edit();
    store
        .append(&id, std::slice::from_ref(&change))
        .await
        .expect("append");
    expected.apply(&change).expect("applies");
    assert_kept_apart(root.path(), &secrets());
    let fresh = FsPlanRepository::with_options(root.path(), options.clone());
    assert_eq!(fresh.load(&id).await.expect("load"), expected);

    // Compactions rewrite plan.json from the record, real values and all: hidden again.
    for at in 0..5 {
        let change = StateChange::Paused { at };
        store
            .append(&id, std::slice::from_ref(&change))
            .await
            .expect("append");
        expected.apply(&change).expect("applies");
    }
    assert!(store.io_stats().compactions > 0, "a compaction ran");
    assert_kept_apart(root.path(), &secrets());
    let fresh = FsPlanRepository::with_options(root.path(), options);
    assert_eq!(fresh.load(&id).await.expect("load"), expected);
    assert_eq!(store.load(&id).await.expect("load"), expected);
}

#[tokio::test]
async fn compactions_in_the_background_hide_secret_values_too() {
    let root = tempfile::tempdir().expect("tempdir");
    // Every compaction on a thread of its own: the snapshot is hidden when it is put in place.
    let compaction = Compaction::default()
        .max_journal_records(3)
        .background_bytes(0);
    let options = options().compaction(compaction);
    let store = FsPlanRepository::with_options(root.path(), options.clone());
    let mut expected = record();
    let id = expected.state.id.clone();
    store.create(&expected).await.expect("create");
    let mut changes = vec![deploy_edit()];
    changes.extend((0..8).map(|at| StateChange::Paused { at }));
    for change in changes {
        store
            .append(&id, std::slice::from_ref(&change))
            .await
            .expect("append");
        expected.apply(&change).expect("applies");
    }
    store.settle();
    assert!(store.io_stats().compactions > 0, "a compaction ran");
    assert_kept_apart(root.path(), &secrets());
    let fresh = FsPlanRepository::with_options(root.path(), options);
    assert_eq!(fresh.load(&id).await.expect("load"), expected);
    assert_eq!(store.load(&id).await.expect("load"), expected);
}

#[tokio::test]
async fn attempt_specs_keep_secrets_apart() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::with_options(root.path(), options());
    let record = record();
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let node = record.state.nodes[0].id.clone();
    let specs = AttemptSpecs {
        work: Some(shell_with_env("deploy", &[("DEPLOY_TOKEN", LATER)])),
        prechecks: Some(shell_with_env("check", &[("DB_PASSWORD", SPEC_PASSWORD)])),
        postchecks: None,
    };
    store
        .save_attempt_specs(&id, &node, 2, &specs)
        .await
        .expect("save");
    assert_kept_apart(root.path(), &secrets());
    let fresh = FsPlanRepository::with_options(root.path(), options());
    assert_eq!(
        fresh.load_attempt_specs(&id, &node, 2).await.expect("load"),
        specs
    );
}

#[tokio::test]
async fn a_missing_secrets_file_is_damage_naming_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::with_options(root.path(), options());
    let record = record();
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let table = store.plan_dir(&id).expect("dir").join("secrets.json");
    std::fs::remove_file(&table).expect("remove");
    let fresh = FsPlanRepository::with_options(root.path(), options());
    match fresh.load(&id).await {
        Err(StoreError::Corrupt { path, message }) => {
            assert!(path.ends_with("plan.json"), "{}", path.display());
            assert!(
                message.contains("secrets.json, which is missing"),
                "{message}"
            );
        }
        other => panic!("expected damage, got {other:?}"),
    }
}

#[tokio::test]
async fn a_plan_without_secrets_has_no_secrets_file() {
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::new(root.path());
    let spec = PlanSpec::new("plain")
        .isolation(Isolation::None)
        .job(JobSpec::new("only", "Only", WorkSpec::shell("true")).env("MODE", "fast"));
    let nodes = PlanGraph::build(&spec).expect("valid").node_count();
    let record = PlanRecord::new(PlanId::random(), spec, PathBuf::from("/r"), nodes, 1);
    store.create(&record).await.expect("create");
    let dir = store.plan_dir(&record.state.id).expect("dir");
    assert!(!dir.join("secrets.json").exists());
}

#[cfg(unix)]
#[tokio::test]
async fn files_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    // An existing, world-readable store folder (made by an older version) is restricted too.
    let root = tmp.path().join(".orchestrator");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let store = FsPlanRepository::with_options(&root, options());
    let record = record();
    let id = record.state.id.clone();
    store.create(&record).await.expect("create");
    let node = record.state.nodes[0].id.clone();
    store
        .append(&id, &[StateChange::Paused { at: 5 }])
        .await
        .expect("append");
    let specs = AttemptSpecs {
        work: Some(WorkSpec::agent("do it")),
        ..AttemptSpecs::default()
    };
    store
        .save_attempt_specs(&id, &node, 1, &specs)
        .await
        .expect("specs");
    let key = orchestrator_core::repository::LogKey {
        plan: id.clone(),
        node: node.clone(),
        phase: orchestrator_core::Phase::Work,
        attempt: 1,
    };
    store.append_log(&key, "a line\n").await.expect("log");
    let lease = store.acquire(&id).await.expect("lease");
    drop(lease);

    let mut seen = (0, 0);
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        let mode = std::fs::metadata(&dir).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
        seen.0 += 1;
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", path.display());
                seen.1 += 1;
            }
        }
    }
    // plans/, the plan, specs/<node>/attempts/1 and logs/<node>/1 (+ root).
    assert!(seen.0 >= 8 && seen.1 >= 8, "{seen:?}");
}

#[tokio::test]
async fn an_edit_among_transitions_keeps_its_secrets_apart() {
    // The journal's binary records never hold env: a batch with an edit goes as JSON, with
    // its secret values (and every string equal to one) hidden, transitions and all.
    let root = tempfile::tempdir().expect("tempdir");
    let store = FsPlanRepository::with_options(root.path(), options());
    let mut expected = record();
    let id = expected.state.id.clone();
    store.create(&expected).await.expect("create");
    let batch = vec![
        StateChange::Node {
            node: 1,
            status: orchestrator_core::state::NodeStatus::Ready,
            at: 7,
        },
        deploy_edit(),
        StateChange::Message {
            node: 1,
            message: LATER.into(),
        },
    ];
    store.append(&id, &batch).await.expect("append");
    for c in &batch {
        expected.apply(c).expect("applies");
    }
    assert_kept_apart(root.path(), &secrets());
    let fresh = FsPlanRepository::with_options(root.path(), options());
    assert_eq!(fresh.load(&id).await.expect("load"), expected);
}
