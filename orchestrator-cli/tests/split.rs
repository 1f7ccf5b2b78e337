//! Plans that grow (SPEC §12) through the built `orchestrator` binary on real git: a job that
//! leaves a split manifest becomes `completed_split`, its items run as sub-jobs in their own
//! worktrees branching from its commit, their commits merge back into it, and its commit (with
//! theirs) flows on to its dependent and the target. Then `kill -9` at random moments of the
//! same plan: `resume` always gives the tree of an uninterrupted run, with the same sub-jobs
//! (none lost, none added twice), no leftover worktree and `git fsck` clean.
//!
//! The moments come from a seed printed at the start; `SPLIT_SEED=<n>` replays a run.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{run_and_kill, Repo};
use orchestrator_testkit::fixtures::{copy_repo, job, job_doc, seed_from_env, Rng};
use serde_json::{json, Value};

const TRIALS: usize = 20;

/// `big` (split allowed) writes `big.txt` and the manifest of `items.json` in `scratch`;
/// `after` depends on it and checks that every item's file reached it.
fn plan(scratch: &Path) -> Value {
    let manifest = scratch.join("items.json");
    let items = json!({"items": [
        {"name": "one", "task": "First part", "instructions": "sleep 0.2; echo 1 > one.txt"},
        {"name": "two", "task": "Second part", "dependsOn": ["one"],
         "instructions": "sleep 0.2; test -f one.txt && echo 2 > two.txt"},
        {"name": "three", "task": "Third part", "instructions": "sleep 0.15; echo 3 > three.txt"},
    ]});
    std::fs::write(&manifest, items.to_string()).expect("write the manifest");
    json!({"name": "growing", "maxParallel": 2, "jobs": [
        {"producerId": "big", "task": "Do it all", "dependencies": [], "split": "allow",
         "work": format!("sleep 0.05; echo big > big.txt; cp '{}' .orchestrator-split.json",
                         manifest.display())},
        job("after", "test -f one.txt && test -f two.txt && test -f three.txt && echo a > after.txt",
            &["big"]),
    ]})
}

fn target_tree(repo: &Repo, id: &str) -> String {
    let doc = repo.status(Some(id));
    repo.tree_of(doc["targetBranch"].as_str().expect("targetBranch"))
}

fn producer_ids(doc: &Value) -> Vec<String> {
    let mut ids: Vec<String> = doc["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["producerId"].as_str().unwrap_or("").to_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_split_job_grows_sub_jobs_whose_commits_flow_on_through_it() {
    let repo = Repo::new();
    let plan_file = repo.plan("growing.json", &plan(&repo.scratch));
    let run = repo.run(&["run", plan_file.to_str().expect("utf-8"), "--json", "-q"]);
    run.expect_code(0);
    let doc = run.json();
    assert_eq!(doc["status"], "succeeded", "{doc:#}");
    assert_eq!(
        producer_ids(&doc),
        ["after", "big", "big/one", "big/three", "big/two"]
    );
    let big = job_doc(&doc, "big");
    assert_eq!(big["status"], "succeeded");
    assert_eq!(
        big["attempts"], 2,
        "the split run and the merge of its sub-jobs"
    );
    let two = job_doc(&doc, "big/two");
    assert_eq!(two["parent"], "big");
    assert_eq!(two["dependencies"], json!(["big/one"]));
    assert_eq!(two["task"], "Second part");

    let id = doc["planId"].as_str().expect("planId");
    let target = doc["targetBranch"].as_str().expect("target");
    let files = repo.git(&["ls-tree", "-r", "--name-only", target]);
    for f in ["big.txt", "one.txt", "two.txt", "three.txt", "after.txt"] {
        assert!(files.contains(f), "{f} missing on the target: {files}");
    }
    assert!(
        !files.contains(".orchestrator-split.json"),
        "the manifest is never committed: {files}"
    );
    // Each sub-job's commit descends from big's first commit and is in the target's history.
    let log = repo.git(&["log", "--format=%s", target]);
    for task in ["Do it all", "First part", "Second part", "Third part"] {
        assert!(log.contains(task), "{task} not in the history:\n{log}");
    }
    repo.assert_clean("split run");
    assert_eq!(repo.status(Some(id))["status"], "succeeded");
}

#[test]
fn kill_9_at_random_moments_of_a_growing_plan_then_resume() {
    let seed = seed_from_env("SPLIT_SEED");
    let mut rng = Rng::new(seed);
    let pristine = Repo::new();
    let template = pristine.scratch.join("template");
    copy_repo(&pristine.dir, &template);
    let plan_doc = plan(&pristine.scratch);
    let plan_file = pristine.plan("growing.json", &plan_doc);
    let plan_arg = plan_file.to_str().expect("utf-8").to_owned();

    let started = Instant::now();
    let run = pristine.run(&["run", &plan_arg, "--json", "-q"]);
    run.expect_code(0);
    let full = started.elapsed();
    let reference_id = run.json()["planId"].as_str().expect("planId").to_owned();
    let reference = target_tree(&pristine, &reference_id);
    let reference_jobs = producer_ids(&run.json());
    eprintln!("uninterrupted run: {full:?} (SPLIT_SEED={seed})");

    let window = full.as_millis() as u64 + 50;
    let moments: Vec<Duration> = (0..TRIALS)
        .map(|_| Duration::from_millis(rng.below_u64(window)))
        .collect();
    let (mut resumed, mut after_split) = (0, 0);
    for (n, moment) in moments.into_iter().enumerate() {
        let repo = Repo::copy_of(&template);
        let label = format!("trial {n} at {moment:?} (SPLIT_SEED={seed})");
        if let Some(run) = run_and_kill(&repo, &["run", &plan_arg, "-q"], moment) {
            run.expect_code(0);
        } else if let Some(id) = repo.latest_plan() {
            if repo.status(Some(&id))["jobs"]
                .as_array()
                .is_some_and(|jobs| jobs.len() > 2)
            {
                after_split += 1;
            }
            let resume = repo.run(&["resume", &id, "--json", "-q"]);
            resume.expect_code(0);
            resumed += 1;
        } else {
            repo.run(&["run", &plan_arg, "-q"]).expect_code(0);
        }
        let id = repo.latest_plan().expect("a plan");
        let doc = repo.status(Some(&id));
        assert_eq!(doc["status"], "succeeded", "{label}: {doc:#}");
        assert_eq!(producer_ids(&doc), reference_jobs, "{label}: the sub-jobs");
        assert_eq!(target_tree(&repo, &id), reference, "{label}: the tree");
        repo.assert_clean(&label);
    }
    eprintln!(
        "{resumed} of {TRIALS} trials were resumed after a kill, {after_split} of them killed \
         after the split was recorded"
    );
}

#[test]
fn a_malformed_manifest_fails_the_job_naming_the_file_and_field_and_keeps_its_commit() {
    let repo = Repo::new();
    let manifest = repo.scratch.join("bad-items.json");
    std::fs::write(
        &manifest,
        r#"{"items": [{"name": "one", "task": "One", "instructions": "x", "dependsOn": ["zzz"]}]}"#,
    )
    .expect("write");
    let plan = repo.plan(
        "bad.json",
        &json!({"name": "bad-split", "jobs": [
            {"producerId": "big", "task": "Do it all", "dependencies": [], "split": "allow",
             "work": format!("echo big > big.txt; cp '{}' .orchestrator-split.json",
                             manifest.display())},
            job("after", "echo a > after.txt", &["big"]),
        ]}),
    );
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json", "-q"]);
    run.expect_code(1);
    let doc = run.json();
    let big = job_doc(&doc, "big");
    assert_eq!(big["status"], "failed", "{doc:#}");
    assert_eq!(big["failureReason"], "composite_failed");
    assert_eq!(
        big["error"],
        ".orchestrator-split.json: items[0].dependsOn[0]: `zzz` names no item of this manifest"
    );
    let commit = big["commit"]
        .as_str()
        .expect("the work so far is committed");
    let files = repo.git(&["ls-tree", "-r", "--name-only", commit]);
    assert!(files.contains("big.txt"), "{files}");
    assert!(!files.contains(".orchestrator-split.json"), "{files}");
    assert_eq!(job_doc(&doc, "after")["status"], "blocked");
    assert_eq!(
        doc["jobs"].as_array().map(Vec::len),
        Some(2),
        "nothing added"
    );
}
