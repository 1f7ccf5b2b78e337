//! `kill -9` of the CLI while jobs wait (SPEC §12), on real git: during a timer wait the
//! stored deadline is the original one after the restart (resumed before it, the job runs at
//! the deadline, not a whole wait later; resumed after it, the overdue timer fires at once);
//! during an approval wait the job still waits, is approved by another process and the plan
//! finishes. Every time the target tree is the one of an uninterrupted run, no worktree is
//! left and `git fsck --full` is clean.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Repo;
use orchestrator_testkit::fixtures::{copy_repo, job, job_doc};
use serde_json::{json, Value};

/// Seconds the timer job waits in the trials.
const TIMER_SECONDS: u64 = 5;

fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `first` -> `cool` (a timer) -> `last`, which records when it started in `stamp` (outside
/// the repository); `side` runs meanwhile. Each writes a file, so merges do real work.
fn timer_plan(seconds: u64, stamp: &std::path::Path) -> Value {
    json!({"name": "timed", "jobs": [
        job("first", "echo 1 > first.txt", &[]),
        {"producerId": "cool", "task": "Cool down", "dependencies": ["first"],
         "work": {"type": "timer", "seconds": seconds}},
        job("last", &format!("date +%s%3N > '{}'; echo 3 > last.txt", stamp.display()), &["cool"]),
        job("side", "echo s > side.txt", &[]),
    ]})
}

fn target_tree(repo: &Repo, id: &str) -> String {
    let doc = repo.status(Some(id));
    let target = doc["targetBranch"]
        .as_str()
        .expect("targetBranch")
        .to_owned();
    repo.tree_of(&target)
}

/// The stored deadline of `cool`, waiting on its timer.
fn stored_deadline(repo: &Repo, id: &str) -> u64 {
    let doc = repo.status(Some(id));
    let cool = job_doc(&doc, "cool");
    assert_eq!(cool["status"], "waiting", "{doc:#}");
    assert_eq!(cool["waitingFor"], "timer", "{doc:#}");
    cool["waiting"]["until"].as_u64().expect("until")
}

fn started_at(stamp: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(stamp).expect("the last job ran");
    text.trim().parse().expect("milliseconds")
}

/// Runs the timer plan in the background and kills it with SIGKILL once `cool` waits; gives
/// the plan's id and the deadline stored before the kill.
fn killed_while_the_timer_waits(repo: &Repo, plan: &str) -> (String, u64) {
    let mut child = repo.spawn(&["run", plan, "-q"]);
    let doc = repo.wait_for("the timer to wait", |doc| {
        doc["jobs"]
            .as_array()
            .is_some_and(|jobs| jobs.iter().any(|j| j["waitingFor"] == "timer"))
    });
    child.kill().expect("kill -9");
    let _ = child.wait();
    let id = doc["planId"].as_str().expect("planId").to_owned();
    let until = stored_deadline(repo, &id);
    (id, until)
}

#[test]
fn kill_9_during_a_timer_wait_keeps_the_original_deadline() {
    let pristine = Repo::new();
    let stamp = pristine.scratch.join("reference-stamp");
    let reference_plan = pristine.plan("timed-0.json", &timer_plan(0, &stamp));
    let template = pristine.scratch.join("template");
    copy_repo(&pristine.dir, &template);
    let run = pristine.run(&[
        "run",
        reference_plan.to_str().expect("utf-8"),
        "--json",
        "-q",
    ]);
    run.expect_code(0);
    let reference_id = run.json()["planId"].as_str().expect("planId").to_owned();
    let reference = target_tree(&pristine, &reference_id);
    pristine.assert_clean("uninterrupted");

    // Resumed before the deadline: the job waits out what is left of the original wait.
    let early = Repo::copy_of(&template);
    let stamp = early.scratch.join("stamp");
    let plan = early.plan("timed.json", &timer_plan(TIMER_SECONDS, &stamp));
    let (id, until) = killed_while_the_timer_waits(&early, plan.to_str().expect("utf-8"));
    std::thread::sleep(Duration::from_millis(1_500));
    let mut resume = early.spawn(&["resume", &id, "-q"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        stored_deadline(&early, &id),
        until,
        "the restart kept the deadline"
    );
    let status = resume.wait().expect("resume");
    assert!(status.success(), "resume failed");
    let ran = started_at(&stamp);
    assert!(ran >= until, "the dependent ran {} ms early", until - ran);
    assert!(
        ran < until + 1_500,
        "the wait restarted: the dependent ran {} ms after the original deadline",
        ran - until
    );
    assert_eq!(early.status(Some(&id))["status"], "succeeded");
    assert_eq!(
        target_tree(&early, &id),
        reference,
        "early resume: the tree"
    );
    early.assert_clean("early resume");

    // Resumed after the deadline: the overdue timer fires at once.
    let late = Repo::copy_of(&template);
    let stamp = late.scratch.join("stamp");
    let plan = late.plan("timed.json", &timer_plan(TIMER_SECONDS, &stamp));
    let (id, until) = killed_while_the_timer_waits(&late, plan.to_str().expect("utf-8"));
    let left = until.saturating_sub(now_millis());
    std::thread::sleep(Duration::from_millis(left + 300));
    let resumed = now_millis();
    let started = Instant::now();
    let resume = late.run(&["resume", &id, "--json", "-q"]);
    resume.expect_code(0);
    assert_eq!(resume.json()["status"], "succeeded");
    let ran = started_at(&stamp);
    assert!(ran >= resumed, "the dependent ran before the resume");
    assert!(
        started.elapsed() < Duration::from_secs(TIMER_SECONDS),
        "the overdue timer waited again ({:?})",
        started.elapsed()
    );
    assert_eq!(target_tree(&late, &id), reference, "late resume: the tree");
    late.assert_clean("late resume");
}

#[test]
fn kill_9_during_an_approval_wait_then_approve_and_resume() {
    let plan_doc = |gate: bool| {
        let mut deploy = job("deploy", "echo d > deploy.txt", &["build"]);
        if gate {
            deploy["approval"] = json!("before");
        }
        json!({"name": "gated", "jobs": [
            job("build", "echo b > build.txt", &[]),
            deploy,
            job("after", "echo a > after.txt", &["deploy"]),
            job("free", "echo f > free.txt", &[]),
        ]})
    };
    let pristine = Repo::new();
    let template = pristine.scratch.join("template");
    copy_repo(&pristine.dir, &template);
    let plan = pristine.plan("plain.json", &plan_doc(false));
    let run = pristine.run(&["run", plan.to_str().expect("utf-8"), "--json", "-q"]);
    run.expect_code(0);
    let reference = target_tree(&pristine, run.json()["planId"].as_str().expect("planId"));

    let repo = Repo::copy_of(&template);
    let plan = repo.plan("gated.json", &plan_doc(true));
    let mut child = repo.spawn(&["run", plan.to_str().expect("utf-8"), "-q"]);
    let doc = repo.wait_for("the approval wait", |doc| doc["status"] == "waiting");
    child.kill().expect("kill -9");
    let _ = child.wait();
    let id = doc["planId"].as_str().expect("planId").to_owned();

    let doc = repo.status(Some(&id));
    assert_eq!(job_doc(&doc, "deploy")["waitingFor"], "approval", "{doc:#}");
    assert_eq!(job_doc(&doc, "after")["status"], "pending");
    assert!(!repo.dir.join("deploy.txt").exists());
    repo.run(&["approve", &id, "deploy"]).expect_code(0);
    let resume = repo.run(&["resume", &id, "--json", "-q"]);
    resume.expect_code(0);
    assert_eq!(resume.json()["status"], "succeeded");
    assert_eq!(target_tree(&repo, &id), reference, "the tree");
    repo.assert_clean("approved after a kill");
}
