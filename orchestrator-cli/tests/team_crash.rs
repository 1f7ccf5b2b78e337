//! Fault injection in a reflect team (SPEC §13): `kill -9` of the CLI at random moments of a
//! three-iteration loop run by a stand-in `claude` (Claude Code's stream-json lines). Every
//! time, `orchestrator resume` goes on from the stored iteration: the same sub-jobs as an
//! uninterrupted run, no worker that had succeeded before the kill runs again, and the same
//! tree on the target branch. `CRASH_SEED=<n>` replays a run.

#![cfg(unix)]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{kill_trials, stand_in_claude, Repo};
use orchestrator_testkit::fixtures::{copy_repo, seed_from_env, Rng};
use serde_json::{json, Value};

const TRIALS: usize = 6;
const TARGET: &str = "feature/team";

/// A `claude` that answers by the job it is told it is: plans assign alice and bob, workers
/// write `<worker>-<round>.txt` (and log `done <job>` to `log`), syntheses name their round,
/// the evaluator scores 0.5, 0.6, then 0.95.
fn stand_in(bin: &Path, log: &Path) {
    let cases = format!(
        r#"  plan) reply='@worker:alice write your file\n@worker:bob write yours' ;;
  synthesis) reply="synthesis of round $round" ;;
  evaluate)
    case "$round" in 1) s=0.5 ;; 2) s=0.6 ;; *) s=0.95 ;; esac
    reply="Score: $s\nRationale: round $round" ;;
  *) sleep 0.2; echo "$step $round" > "$step-$round.txt"; echo "done $id" >> '{log}'; reply="wrote $step-$round.txt" ;;"#,
        log = log.display()
    );
    stand_in_claude(bin, &cases);
}

fn plan() -> Value {
    json!({"name": "team crash", "targetBranch": TARGET, "jobs": [
        {"producerId": "team", "task": "the team", "dependencies": [],
         "work": {"type": "team", "prompt": "Write the files", "agent": "claude",
                  "workers": [{"name": "alice"}, {"name": "bob"}],
                  "evaluator": {"threshold": 0.9}}}
    ]})
}

fn jobs_of(doc: &Value) -> Vec<(String, String)> {
    doc["jobs"]
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .map(|j| {
                    let id = j["producerId"].as_str().unwrap_or("").to_owned();
                    let status = j["status"].as_str().unwrap_or("").to_owned();
                    (id, status)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn done_counts(log: &Path) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        if let Some(id) = line.strip_prefix("done ") {
            *counts.entry(id.to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

struct Trial {
    repo: Repo,
    bin: PathBuf,
    log: PathBuf,
}

impl Trial {
    fn new(template: &Path) -> Trial {
        let repo = Repo::copy_of(template);
        let bin = repo.scratch.join("bin");
        let log = repo.scratch.join("runs.log");
        stand_in(&bin, &log);
        Trial { repo, bin, log }
    }

    fn run(&self, args: &[&str]) -> orchestrator_testkit::fixtures::Run {
        let out = self
            .repo
            .command_with_agents(&self.bin, args)
            .output()
            .expect("run");
        orchestrator_testkit::fixtures::Run::from(out)
    }
}

#[test]
fn kill_9_in_a_reflect_loop_then_resume_goes_on_from_the_stored_iteration() {
    let seed = seed_from_env("CRASH_SEED");
    let mut rng = Rng::new(seed);
    let pristine = Repo::new();
    let template = pristine.scratch.join("template");
    copy_repo(&pristine.dir, &template);
    let plan_file = pristine.plan("team.json", &plan());
    let plan_arg = plan_file.to_str().expect("utf-8").to_owned();

    // The uninterrupted run: the reference sub-jobs and tree.
    let reference = Trial::new(&template);
    let started = Instant::now();
    let run = reference.run(&["run", &plan_arg, "--json", "-q"]);
    run.expect_code(0);
    let full = started.elapsed();
    let doc = run.json();
    let output: Value =
        serde_json::from_str(doc["jobs"][0]["output"].as_str().expect("output")).expect("JSON");
    assert_eq!(output["exitReason"], "goal_met", "{output}");
    assert_eq!(output["iterations"], 3);
    let reference_jobs: Vec<String> = jobs_of(&doc).into_iter().map(|(id, _)| id).collect();
    assert_eq!(reference_jobs.len(), 16, "{reference_jobs:?}");
    let tree = reference.repo.tree_of(TARGET);
    assert!(done_counts(&reference.log).values().all(|&n| n == 1));
    eprintln!("uninterrupted run: {full:?} (CRASH_SEED={seed})");

    // Kills land in the first 70% of the uninterrupted run's time: a trial can run faster than
    // the reference run (warm caches), and a kill after its end tests nothing.
    let window = full.as_millis() as u64 * 7 / 10;
    let moments: Vec<Duration> = (0..TRIALS * 3)
        .map(|_| Duration::from_millis(100 + rng.below_u64(window.saturating_sub(200).max(1))))
        .collect();
    let one = |n: usize, &kill_at: &Duration| -> bool {
        let label = format!("trial {n} (CRASH_SEED={seed})");
        let trial = Trial::new(&template);
        let child = trial
            .repo
            .command_with_agents(&trial.bin, &["run", &plan_arg, "-q"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let killed = kill_after(child, kill_at);
        let Some(id) = trial.repo.latest_plan() else {
            return false;
        };
        if killed {
            // What had succeeded when the process died must not run again.
            let before = trial.run(&["status", &id, "--json"]).json();
            // A team that started shows its progress in its job JSON.
            if let Some(text) = before["jobs"][0]["output"].as_str() {
                let progress: Value = serde_json::from_str(text).expect("JSON progress");
                assert_eq!(progress["mode"], "reflect", "{label}: {progress}");
                assert!(
                    progress["iterations"].as_u64().is_some(),
                    "{label}: {progress}"
                );
            }
            let succeeded: Vec<String> = jobs_of(&before)
                .into_iter()
                .filter(|(_, s)| s == "succeeded")
                .map(|(id, _)| id)
                .collect();
            let resume = trial.run(&["resume", &id, "--json", "-q"]);
            resume.expect_code(0);
            let counts = done_counts(&trial.log);
            for id in succeeded.iter().filter(|id| counts.contains_key(*id)) {
                assert_eq!(counts[id], 1, "{label}: `{id}` ran again after the kill");
            }
        }
        let after = trial.run(&["status", &id, "--json"]).json();
        let jobs: Vec<String> = jobs_of(&after).into_iter().map(|(id, _)| id).collect();
        assert_eq!(jobs, reference_jobs, "{label}: other sub-jobs");
        assert_eq!(after["status"], "succeeded", "{label}");
        assert_eq!(
            trial.repo.tree_of(TARGET),
            tree,
            "{label}: the final tree differs"
        );
        trial.repo.assert_clean(&label);
        killed
    };
    // One at a time, as the uninterrupted run was timed.
    let (ran, resumed) = kill_trials(&moments, TRIALS, 1, one);
    eprintln!("{resumed} of {ran} trials were resumed after a kill");
    assert!(resumed >= TRIALS / 2, "too few kills landed mid-run");
}

/// Kills `child` with SIGKILL after `after` unless it ended first; whether it was killed.
fn kill_after(mut child: std::process::Child, after: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < after {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    true
}

#[test]
fn a_paused_team_stops_as_paused_and_resumes_to_the_same_tree() {
    let pristine = Repo::new();
    let template = pristine.scratch.join("template");
    copy_repo(&pristine.dir, &template);
    let plan_file = pristine.plan("team.json", &plan());
    let plan_arg = plan_file.to_str().expect("utf-8").to_owned();
    let reference = Trial::new(&template);
    reference.run(&["run", &plan_arg, "-q"]).expect_code(0);
    let tree = reference.repo.tree_of(TARGET);

    let trial = Trial::new(&template);
    let mut child = trial
        .repo
        .command_with_agents(&trial.bin, &["run", &plan_arg, "-q"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    // Once the first iteration's workers have run, pause from another command.
    let start = Instant::now();
    while done_counts(&trial.log).len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the workers never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let id = trial.repo.latest_plan().expect("plan");
    trial.run(&["pause", &id]).expect_code(0);
    let code = child.wait().expect("wait").code();
    assert_eq!(code, Some(1), "run stops paused");
    assert_eq!(
        trial.run(&["status", &id, "--json"]).json()["status"],
        "paused"
    );
    let resume = trial.run(&["resume", &id, "--json", "-q"]);
    resume.expect_code(0);
    assert_eq!(trial.repo.tree_of(TARGET), tree);
    trial.repo.assert_clean("paused and resumed");
}
