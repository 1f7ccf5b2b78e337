//! `--notify CMD` (SPEC §12) through the built `orchestrator` binary on real git: the command
//! gets one JSON document on stdin for each job that starts waiting and one when `run`/`resume`
//! return (`plan_waiting` with `--until-waiting`, `plan_ended` at the end), in order; a failing
//! command is a warning that changes neither the run nor its exit code.

mod common;

use std::path::Path;

use common::Repo;
use orchestrator_testkit::fixtures::{job, job_doc};
use serde_json::{json, Value};

/// A plan whose `deploy` waits for approval, with a dependent and a free job.
fn gated_plan(repo: &Repo) -> String {
    repo.gated_plan().to_str().expect("utf-8").to_owned()
}

/// A `--notify` command appending each document to `file`, one per line.
fn append_to(file: &Path) -> String {
    let file = file.to_str().expect("utf-8");
    format!("cat >> '{file}'; echo >> '{file}'")
}

/// The JSON documents of `file`, in order.
fn documents(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

#[test]
fn attention_and_the_end_of_each_command_are_told_in_order() {
    let repo = Repo::new();
    let events = repo.scratch.join("events.jsonl");
    let notify = append_to(&events);
    let plan = gated_plan(&repo);
    let run = repo.run(&[
        "run",
        &plan,
        "--until-waiting",
        "--notify",
        &notify,
        "--json",
        "-q",
    ]);
    run.expect_code(4);
    let doc = run.json();
    let id = doc["planId"].as_str().expect("planId").to_owned();
    let deploy = job_doc(&doc, "deploy");

    let told = documents(&events);
    assert_eq!(told.len(), 2, "{told:#?}");
    let attention = &told[0];
    assert_eq!(attention["event"], "attention_needed", "{attention:#}");
    assert_eq!(attention["planId"], id.as_str());
    assert_eq!(attention["jobId"], deploy["jobId"]);
    assert_eq!(attention["producerId"], "deploy");
    assert_eq!(attention["waitingFor"], "approval");
    assert_eq!(attention["since"], deploy["waiting"]["since"]);
    assert!(attention["since"].as_u64().is_some(), "{attention:#}");
    assert!(attention.get("until").is_none(), "{attention:#}");
    assert_eq!(
        told[1],
        json!({"event": "plan_waiting", "planId": id, "name": "gated", "status": "waiting"})
    );

    repo.run(&["approve", &id, "deploy", "-q"]).expect_code(0);
    let resume = repo.run(&["resume", &id, "--notify", &notify, "-q"]);
    resume.expect_code(0);
    let told = documents(&events);
    assert_eq!(told.len(), 3, "nothing waits again: {told:#?}");
    assert_eq!(
        told[2],
        json!({"event": "plan_ended", "planId": id, "name": "gated", "status": "succeeded"})
    );
    assert!(!resume.stderr.contains("warning"), "{}", resume.stderr);
}

#[test]
fn a_failing_notify_command_is_a_warning_only() {
    let repo = Repo::new();
    let plan = gated_plan(&repo);
    let run = repo.run(&[
        "run",
        &plan,
        "--until-waiting",
        "--notify",
        "exit 3",
        "--json",
        "-q",
    ]);
    run.expect_code(4);
    // Its stdout is still the plan's JSON document alone.
    assert_eq!(run.json()["status"], "waiting");
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning: --notify command `exit 3`"))
        .collect();
    assert_eq!(warnings.len(), 2, "attention and end:\n{}", run.stderr);
    assert!(
        warnings.iter().all(|w| w.contains("exit code 3")),
        "{warnings:#?}"
    );

    // A plan that ends: the exit code is the plan's, with the warning.
    let done = repo.plan(
        "done.json",
        &json!({"name": "done", "jobs": [job("one", "echo 1 > one.txt", &[])]}),
    );
    let run = repo.run(&[
        "run",
        done.to_str().expect("utf-8"),
        "--notify",
        "echo to-stdout; exit 3",
        "--json",
        "-q",
    ]);
    run.expect_code(0);
    assert_eq!(run.json()["status"], "succeeded", "only the plan on stdout");
    assert!(run.stderr.contains("to-stdout"), "{}", run.stderr);
    assert!(
        run.stderr.contains("(plan_ended) failed with exit code 3"),
        "{}",
        run.stderr
    );
}
