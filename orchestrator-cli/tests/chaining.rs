//! Plan chaining (`resumeAfterPlan`) across processes: a plan chained to one that another
//! `orchestrator` process runs starts when that plan succeeds (it used to stay pending forever,
//! its waiter failing silently because the plan was not this process's).

mod common;

use std::time::{Duration, Instant};

use common::Repo;
use orchestrator_testkit::fixtures::{job, wait_child};
use serde_json::json;

/// Milliseconds since the epoch written by `date +%s%3N` into `path`.
fn millis_in(path: &std::path::Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no time in {}", path.display()))
}

#[test]
fn a_plan_chained_to_one_another_process_runs_starts_when_that_one_succeeds() {
    let repo = Repo::new();
    let started = repo.scratch.join("first.started");
    let chained = repo.scratch.join("second.ran");
    let first = repo.plan(
        "first.json",
        &json!({"name": "first", "jobs": [job(
            "slow",
            &format!("touch '{}'; sleep 1.5; echo done > first.txt", started.display()),
            &[],
        )]}),
    );
    let runner = repo.spawn(&["run", first.to_str().expect("utf-8"), "-q"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the first plan never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let first_id = repo.latest_plan().expect("the first plan is stored");

    // Another process runs the chained plan: it waits for the first, run elsewhere.
    let second = repo.plan(
        "second.json",
        &json!({"name": "second", "resumeAfterPlan": first_id, "jobs": [job(
            "after",
            &format!("date +%s%3N > '{}'; echo after > after.txt", chained.display()),
            &[],
        )]}),
    );
    let waiter = repo.spawn(&["run", second.to_str().expect("utf-8"), "--json", "-q"]);
    let first_run = wait_child(runner, Duration::from_secs(60));
    first_run.expect_code(0);
    let second_run = wait_child(waiter, Duration::from_secs(60));
    second_run.expect_code(0);
    assert_eq!(
        second_run.json()["status"],
        "succeeded",
        "{}",
        second_run.stderr
    );

    let first_doc = repo.status(Some(&first_id));
    let first_ended = first_doc["endedAt"].as_u64().expect("endedAt");
    assert!(
        millis_in(&chained) >= first_ended,
        "the chained job ran at {} ms, before the first plan ended at {first_ended} ms",
        millis_in(&chained)
    );
    assert_eq!(repo.show("orchestrator/second", "after.txt"), "after\n");
}
