//! Approvals (SPEC §12) through the built `orchestrator` binary on real git: `run
//! --until-waiting` returns with exit code 4 while a job waits for approval; `approve` from
//! another process (the plan then run by nobody, or by a running `resume`); `reject` with a
//! reason fails the job and blocks its dependents; approving what does not wait is exit 2.

mod common;

use std::time::{Duration, Instant};

use common::Repo;
use orchestrator_testkit::fixtures::{job, job_doc, wait_child};
use serde_json::{json, Value};

fn gated_plan(repo: &Repo) -> String {
    let plan = repo.gated_plan();
    let run = repo.run(&[
        "run",
        plan.to_str().expect("utf-8"),
        "--until-waiting",
        "--json",
        "-q",
    ]);
    run.expect_code(4);
    let doc = run.json();
    assert_eq!(doc["status"], "waiting", "{doc:#}");
    assert_eq!(job_doc(&doc, "deploy")["waitingFor"], "approval");
    assert_eq!(job_doc(&doc, "after")["status"], "pending");
    assert_eq!(job_doc(&doc, "free")["status"], "succeeded");
    assert!(
        run.stderr.contains("orchestrator approve"),
        "{}",
        run.stderr
    );
    doc["planId"].as_str().expect("planId").to_owned()
}

#[test]
fn approved_from_another_process_then_resumed() {
    let repo = Repo::new();
    let id = gated_plan(&repo);
    // Stored as waiting, not paused.
    assert_eq!(repo.status(Some(&id))["status"], "waiting");

    let wrong = repo.run(&["approve", &id, "free"]);
    wrong.expect_code(2);
    assert!(
        wrong.stderr.contains("job `free` waits for nothing"),
        "{}",
        wrong.stderr
    );
    let wrong = repo.run(&["approve", &id, "no-such-job"]);
    wrong.expect_code(2);

    repo.run(&["approve", &id, "deploy", "-q"]).expect_code(0);
    let status = repo.status(Some(&id));
    assert_eq!(job_doc(&status, "deploy")["status"], "ready", "{status:#}");
    repo.run(&["resume", &id, "-q"]).expect_code(0);
    let status = repo.status(Some(&id));
    assert_eq!(status["status"], "succeeded");
    let target = status["targetBranch"].as_str().expect("target");
    for file in ["deploy.txt", "after.txt", "free.txt"] {
        assert!(!repo.show(target, file).is_empty(), "{file} landed");
    }
}

#[test]
fn approve_reaches_a_plan_another_process_runs() {
    let repo = Repo::new();
    let plan = repo.plan(
        "gated.json",
        &json!({"name": "gated", "jobs": [
            {"producerId": "deploy", "task": "Deploy", "work": "echo d > deploy.txt",
             "dependencies": [], "approval": "before"},
            job("after", "echo a > after.txt", &["deploy"]),
        ]}),
    );
    // `run` keeps running while the job waits (an approval may come from anywhere); it holds
    // the plan from its creation on, so every request below reaches it.
    let runner = repo.spawn(&["run", plan.to_str().expect("utf-8"), "-q"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        if let Some(id) = repo.latest_plan() {
            if repo.status(Some(&id))["status"] == "waiting" {
                break id;
            }
        }
        assert!(Instant::now() < deadline, "the plan never waited");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Refused by the running process as it would be here (exit 2).
    let wrong = repo.run(&["approve", &id, "after"]);
    wrong.expect_code(2);
    assert!(wrong.stderr.contains("is being run by"), "{}", wrong.stderr);
    assert!(
        wrong
            .stderr
            .contains("job `after` waits for nothing (it is pending)"),
        "{}",
        wrong.stderr
    );

    let approve = repo.run(&["approve", &id, "deploy"]);
    approve.expect_code(0);
    assert!(
        approve.stderr.contains("is being run by"),
        "{}",
        approve.stderr
    );
    let done = wait_child(runner, Duration::from_secs(60));
    assert_eq!(
        done.code, 0,
        "run ends when the approved job and its dependent did: {}",
        done.stderr
    );
    assert_eq!(repo.status(Some(&id))["status"], "succeeded");
}

#[test]
fn a_rejection_fails_the_job_with_its_reason_and_blocks_its_dependents() {
    let repo = Repo::new();
    let id = gated_plan(&repo);
    repo.run(&["reject", &id, "deploy", "--reason", "not on a Friday", "-q"])
        .expect_code(0);
    let status = repo.status(Some(&id));
    assert_eq!(status["status"], "failed", "{status:#}");
    let deploy = job_doc(&status, "deploy");
    assert_eq!(deploy["status"], "failed");
    assert_eq!(deploy["failureReason"], "rejected");
    assert_eq!(deploy["error"], "rejected: not on a Friday");
    assert_eq!(job_doc(&status, "after")["status"], "blocked");
    assert_eq!(job_doc(&status, "after")["blockedBy"], json!(["deploy"]));
    // Nothing of it ran or landed.
    let target = status["targetBranch"].as_str().expect("target");
    let files = repo.git(&["ls-tree", "-r", "--name-only", target]);
    assert!(!files.contains("deploy.txt"), "{files}");
    let again: Value = repo.status(Some(&id));
    assert_eq!(job_doc(&again, "deploy")["attempts"], 1);
}

#[test]
fn an_approval_after_job_commits_then_waits_and_lands_only_when_approved() {
    let repo = Repo::new();
    let count = repo.scratch.join("migrate-runs");
    let plan = repo.plan(
        "reviewed.json",
        &json!({"name": "reviewed", "jobs": [
            {"producerId": "migrate", "task": "Write the migration",
             "work": format!("echo m >> '{}'; echo m > migrate.sql", count.display()),
             "dependencies": [], "approval": "after"},
            job("seed", "echo s > seed.txt", &["migrate"]),
            job("free", "echo f > free.txt", &[]),
            {"producerId": "docs", "task": "Document it", "work": "echo d > docs.txt",
             "dependencies": [], "approval": "after"},
        ]}),
    );
    let run = repo.run(&[
        "run",
        plan.to_str().expect("utf-8"),
        "--until-waiting",
        "--json",
        "-q",
    ]);
    run.expect_code(4);
    let doc = run.json();
    let id = doc["planId"].as_str().expect("planId").to_owned();
    let migrate = job_doc(&doc, "migrate");
    assert_eq!(migrate["status"], "waiting", "{doc:#}");
    assert_eq!(migrate["waitingFor"], "approval");
    let commit = migrate["commit"]
        .as_str()
        .expect("committed before the wait");
    assert!(migrate["waiting"]["prompt"]
        .as_str()
        .is_some_and(|p| p.contains(commit)));
    assert_eq!(job_doc(&doc, "seed")["status"], "pending");
    // The commit exists, the target does not have it yet.
    let files = repo.git(&["ls-tree", "-r", "--name-only", commit]);
    assert!(files.contains("migrate.sql"), "{files}");
    let target = doc["targetBranch"].as_str().expect("target").to_owned();
    let landed = repo.git(&["ls-tree", "-r", "--name-only", &target]);
    assert!(!landed.contains("migrate.sql"), "{landed}");
    // A leaf held after its phases: not merged (merge-ri into the snapshot branch, which
    // lands on the target at the end) until approved.
    assert_eq!(job_doc(&doc, "docs")["status"], "waiting");
    let snapshot = doc["snapshotBranch"].as_str().expect("snapshot branch");
    let merged = repo.git(&["ls-tree", "-r", "--name-only", snapshot]);
    assert!(
        merged.contains("free.txt") && !merged.contains("docs.txt"),
        "{merged}"
    );

    repo.run(&["approve", &id, "migrate", "-q"]).expect_code(0);
    repo.run(&["approve", &id, "docs", "-q"]).expect_code(0);
    let resume = repo.run(&["resume", &id, "--json", "-q"]);
    resume.expect_code(0);
    assert_eq!(resume.json()["status"], "succeeded");
    let landed = repo.git(&["ls-tree", "-r", "--name-only", &target]);
    for file in ["migrate.sql", "seed.txt", "free.txt", "docs.txt"] {
        assert!(landed.contains(file), "{file} missing: {landed}");
    }
    let runs = std::fs::read_to_string(&count).expect("ran");
    assert_eq!(runs.lines().count(), 1, "the approved work ran once");
    let status = repo.status(Some(&id));
    assert_eq!(job_doc(&status, "migrate")["attempts"], 1);
    assert_eq!(job_doc(&status, "migrate")["commit"], commit);
    repo.assert_clean("approved after");
}
