//! Steering a plan while another `orchestrator` process runs it: cancel, pause, SIGTERM; then
//! recover, resume and archive.

mod common;

use std::time::Duration;

use common::Repo;
use orchestrator_testkit::fixtures::{job, job_doc, terminate, wait_child};
use serde_json::{json, Value};

/// A chain `first -> slow -> last`: `slow` sleeps long on its first attempt only (a marker
/// file outside the repository remembers it ran).
fn chain(repo: &Repo, name: &str, first_sleep: &str) -> std::path::PathBuf {
    let marker = repo.scratch.join("slow-ran");
    let slow = format!(
        "if [ ! -f '{m}' ]; then touch '{m}'; sleep {first_sleep}; fi; echo slow > slow.txt",
        m = marker.display()
    );
    repo.plan(
        &format!("{name}.json"),
        &json!({
            "name": name,
            "jobs": [
                job("first", "echo first > first.txt", &[]),
                job("slow", &slow, &["first"]),
                job("last", "cat slow.txt > last.txt", &["slow"]),
            ]
        }),
    )
}

fn slow_is_running(doc: &Value) -> bool {
    job_doc(doc, "slow")["status"] == "running"
}

#[test]
fn cancel_from_another_process_then_recover_resume_and_archive() {
    let repo = Repo::new();
    let plan = chain(&repo, "cancel-me", "60");
    let child = repo.spawn(&["run", plan.to_str().expect("utf-8"), "--json"]);
    let pid = child.id();
    let doc = repo.wait_for("slow to run", slow_is_running);
    let id = doc["planId"].as_str().expect("id").to_owned();

    // Commands that need the plan to themselves name the process that holds it.
    let busy = repo.run(&["archive", &id]);
    busy.expect_code(3);
    assert!(
        busy.stderr.contains(&format!("process {pid}")),
        "{}",
        busy.stderr
    );
    let busy = repo.run(&["resume", &id]);
    busy.expect_code(3);
    assert!(
        busy.stderr.contains(&format!("process {pid}")),
        "{}",
        busy.stderr
    );

    let cancel = repo.run(&["cancel", &id, "--json"]);
    cancel.expect_code(0);
    assert_eq!(cancel.json()["status"], "canceled");
    let run = wait_child(child, Duration::from_secs(20));
    run.expect_code(1);
    let doc = run.json();
    assert_eq!(doc["status"], "canceled");
    assert_eq!(job_doc(&doc, "first")["status"], "succeeded");
    assert_eq!(job_doc(&doc, "slow")["status"], "canceled");
    assert_eq!(job_doc(&doc, "last")["status"], "canceled");

    // A canceled plan does not resume until it is recovered.
    repo.run(&["resume", &id]).expect_code(1);
    let refused = repo.run(&["resume", &id, "--json"]);
    refused.expect_code(1);
    assert_eq!(refused.json()["status"], "canceled", "the plan as it is");
    assert!(
        refused.stderr.contains("recover it first"),
        "{}",
        refused.stderr
    );
    let recover = repo.run(&["recover", &id, "--json"]);
    recover.expect_code(0);
    assert_eq!(recover.json()["status"], "paused");
    assert!(repo
        .branches()
        .contains(&"orchestrator/cancel-me".to_owned()));

    let resume = repo.run(&["resume", &id, "--json"]);
    resume.expect_code(0);
    assert_eq!(resume.json()["status"], "succeeded");
    assert_eq!(repo.show("orchestrator/cancel-me", "last.txt"), "slow\n");

    // Archive: worktrees and branches gone, state kept and shown as archived.
    let archive = repo.run(&["archive", &id]);
    archive.expect_code(0);
    assert!(
        repo.extra_worktrees().is_empty(),
        "{:?}",
        repo.extra_worktrees()
    );
    assert_eq!(repo.branches(), ["main"]);
    assert_eq!(repo.status(Some(&id))["status"], "archived");
    let refused = repo.run(&["resume", &id, "--json"]);
    refused.expect_code(1);
    assert_eq!(refused.json()["status"], "archived");
    let logs = repo.run(&["logs", &id, "first"]);
    logs.expect_code(0);
    assert!(!logs.stdout.is_empty(), "logs are kept");
    assert!(repo.git_output(&["fsck", "--full"]).status.success());
}

#[test]
fn pause_from_another_process_then_resume() {
    let repo = Repo::new();
    let plan = chain(&repo, "pause-me", "1");
    let child = repo.spawn(&["run", plan.to_str().expect("utf-8"), "--json"]);
    let doc = repo.wait_for("slow to run", slow_is_running);
    let id = doc["planId"].as_str().expect("id").to_owned();

    // Pausing lets the running job finish and starts nothing new.
    let pause = repo.run(&["pause", &id, "--json"]);
    pause.expect_code(0);
    let paused = pause.json();
    assert_eq!(paused["status"], "paused");
    assert_eq!(job_doc(&paused, "slow")["status"], "succeeded");
    let last = &job_doc(&paused, "last")["status"];
    assert!(
        last == "ready" || last == "pending",
        "nothing new starts: {last}"
    );
    let run = wait_child(child, Duration::from_secs(20));
    run.expect_code(1);
    assert!(run.stderr.contains("orchestrator resume"), "{}", run.stderr);

    let resume = repo.run(&["resume", &id, "--json"]);
    resume.expect_code(0);
    let doc = resume.json();
    assert_eq!(doc["status"], "succeeded");
    assert_eq!(job_doc(&doc, "slow")["attempts"], 1);
    assert_eq!(repo.show("orchestrator/pause-me", "last.txt"), "slow\n");
    assert!(repo.extra_worktrees().is_empty());

    // Pausing a plan nobody runs acts on the stored plan; resuming it again is harmless.
    let again = repo.run(&["cancel", &id]);
    again.expect_code(3);
    assert!(again.stderr.contains("ended"), "{}", again.stderr);
}

#[test]
fn sigterm_pauses_cleanly_and_resume_continues() {
    let repo = Repo::new();
    let plan = chain(&repo, "signal-me", "60");
    let child = repo.spawn(&["run", plan.to_str().expect("utf-8")]);
    let doc = repo.wait_for("slow to run", slow_is_running);
    let id = doc["planId"].as_str().expect("id").to_owned();
    terminate(child.id());
    let run = wait_child(child, Duration::from_secs(20));
    run.expect_code(1);
    assert!(
        run.stderr.contains(&format!("orchestrator resume {id}")),
        "{}",
        run.stderr
    );
    let doc = repo.status(Some(&id));
    assert_eq!(doc["status"], "paused");
    assert_ne!(job_doc(&doc, "slow")["status"], "running");

    let resume = repo.run(&["resume", &id, "--json"]);
    resume.expect_code(0);
    let doc = resume.json();
    assert_eq!(doc["status"], "succeeded");
    assert_eq!(job_doc(&doc, "slow")["attempts"], 2);
    assert_eq!(repo.show("orchestrator/signal-me", "last.txt"), "slow\n");
    assert!(repo.extra_worktrees().is_empty());
}

#[test]
fn a_killed_run_resumes_and_retry_or_resume_of_unknown_plans_is_invalid_input() {
    let repo = Repo::new();
    let plan = chain(&repo, "kill-me", "15");
    let mut child = repo.spawn(&["run", plan.to_str().expect("utf-8"), "-q"]);
    let doc = repo.wait_for("slow to run", slow_is_running);
    let id = doc["planId"].as_str().expect("id").to_owned();
    child.kill().expect("kill -9");
    let _ = child.wait();
    // The store still says running; nothing holds it any more.
    assert_eq!(repo.status(Some(&id))["status"], "running");
    let resume = repo.run(&["resume", &id, "--json"]);
    resume.expect_code(0);
    let doc = resume.json();
    let slow = job_doc(&doc, "slow");
    assert_eq!(slow["status"], "succeeded");
    assert_eq!(slow["attempts"], 2, "the crashed attempt is kept: {slow}");
    assert!(repo.extra_worktrees().is_empty());

    repo.run(&["resume", "00000000-dead"]).expect_code(2);
    repo.run(&["retry", "00000000-dead"]).expect_code(2);
    repo.run(&["retry", &id, "nobody"]).expect_code(2);
    let nothing = repo.run(&["retry", &id]);
    nothing.expect_code(3);
    assert!(
        nothing.stderr.contains("no failed jobs"),
        "{}",
        nothing.stderr
    );
}
