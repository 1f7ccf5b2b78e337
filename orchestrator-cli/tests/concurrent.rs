//! Plans of the same name started at the same time, in two processes of the built binary on
//! one repository: each gets a target branch of its own and both succeed.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::Repo;
use orchestrator_testkit::fixtures::{job, wait_child};
use serde_json::json;

#[test]
fn same_named_plans_at_the_same_time_get_their_own_target_branches() {
    let repo = Repo::new();
    let mut seen = BTreeSet::new();
    for round in 0..5 {
        let plans: Vec<_> = ["left", "right"]
            .iter()
            .map(|side| {
                let file = format!("{side}-{round}.txt");
                let plan = json!({"name": "twin", "jobs": [
                    job("work", &format!("echo {side} > {file}"), &[]),
                ]});
                (repo.plan(&format!("{side}-{round}.json"), &plan), file)
            })
            .collect();
        // Both processes are started before either is waited for, so they choose and create
        // their target branches at the same moment.
        let children: Vec<_> = plans
            .iter()
            .map(|(path, _)| {
                let path = path.to_str().expect("utf-8 path");
                repo.spawn(&["run", path, "--json"])
            })
            .collect();
        let runs: Vec<_> = children
            .into_iter()
            .map(|c| wait_child(c, Duration::from_secs(120)))
            .collect();
        let mut targets = Vec::new();
        for (run, (_, file)) in runs.iter().zip(&plans) {
            run.expect_code(0);
            let doc = run.json();
            assert_eq!(doc["status"], "succeeded", "round {round}: {doc:#}");
            let target = doc["targetBranch"]
                .as_str()
                .unwrap_or_else(|| panic!("round {round}: no targetBranch in {doc:#}"))
                .to_owned();
            assert!(target.starts_with("orchestrator/twin"), "{target}");
            // The branch holds this plan's result, checked with the git CLI.
            let side = file.split('-').next().unwrap_or_default();
            assert_eq!(repo.show(&target, file), format!("{side}\n"), "{target}");
            targets.push(target);
        }
        assert_ne!(targets[0], targets[1], "round {round}: a shared target");
        // ... and only its own: the other plan's file is not on it.
        for (target, (_, other)) in targets.iter().zip(plans.iter().rev()) {
            let files = repo.files_at(target);
            assert!(!files.contains(other), "{target} holds {other}: {files:?}");
        }
        for target in targets {
            assert!(
                seen.insert(target.clone()),
                "{target} reused by a later plan"
            );
        }
    }
    assert!(seen.contains("orchestrator/twin"), "{seen:?}");
    let fsck = repo.git_output(&["fsck", "--no-progress"]);
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
}
