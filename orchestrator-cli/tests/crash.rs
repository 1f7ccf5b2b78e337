//! Fault injection: `kill -9` of the CLI at random moments of a 30-job plan. Every time,
//! `orchestrator resume` finishes the plan with the same tree on the target branch as an
//! uninterrupted run, no worktree is left, and `git fsck --full` is clean.
//!
//! The moments come from a seed printed at the start; `CRASH_SEED=<n>` replays a run.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{kill_trials, run_and_kill, Repo};
#[cfg(target_os = "linux")]
use orchestrator_testkit::fixtures::{alive, gone_within, wait_for_file, wait_for_pid};
use orchestrator_testkit::fixtures::{copy_repo, job, seed_from_env, Rng};
use serde_json::{json, Value};

const JOBS: usize = 30;
const TRIALS: usize = 20;
const TARGET: &str = "orchestrator/crash";

/// A binary tree of jobs (job i depends on job (i-1)/2), each sleeping a little and writing
/// its own file, plus one line in a shared file at the root so merges do real work.
fn plan() -> Value {
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| {
            let id = format!("job-{i:02}");
            let work = format!("sleep 0.0{}; echo {i} > f{i:02}.txt", i % 4 + 1);
            let parent = (i > 0).then(|| format!("job-{:02}", (i - 1) / 2));
            job(
                &id,
                &work,
                &parent.iter().map(String::as_str).collect::<Vec<_>>(),
            )
        })
        .collect();
    json!({"name": "crash", "maxParallel": 4, "jobs": jobs})
}

fn tree(repo: &Repo) -> String {
    repo.tree_of(TARGET)
}

fn check(repo: &Repo, reference: &str, label: &str) {
    assert_eq!(tree(repo), reference, "{label}: the final tree differs");
    repo.assert_clean(label);
}

#[test]
fn kill_9_at_random_moments_then_resume_gives_the_same_tree() {
    let seed = seed_from_env("CRASH_SEED");
    let mut rng = Rng::new(seed);

    let pristine = Repo::new();
    let plan_file = pristine.plan("crash.json", &plan());
    let plan_arg = plan_file.to_str().expect("utf-8").to_owned();
    let template = pristine.scratch.join("template");
    copy_repo(&pristine.dir, &template);

    // The uninterrupted run gives the reference tree and the length of a run.
    let started = Instant::now();
    pristine
        .run(&["run", &plan_arg, "--json", "-q"])
        .expect_code(0);
    let full = started.elapsed();
    let reference = tree(&pristine);
    check(&pristine, &reference, "uninterrupted");
    eprintln!("uninterrupted run: {full:?}");

    // The moments are drawn up front, so a seed replays the same kills whatever the threads do.
    let window = full.as_millis() as u64 + 100;
    let moments: Vec<(Duration, Duration)> = (0..TRIALS * 3)
        .map(|_| {
            (
                Duration::from_millis(rng.below_u64(window)),
                Duration::from_millis(rng.below_u64(window)),
            )
        })
        .collect();
    let trial = |n: usize, &(first, second): &(Duration, Duration)| -> bool {
        let repo = Repo::copy_of(&template);
        let label = format!("trial {n} (CRASH_SEED={seed})");
        if let Some(run) = run_and_kill(&repo, &["run", &plan_arg, "-q"], first) {
            // It ended before the kill: nothing to resume.
            run.expect_code(0);
            check(&repo, &reference, &label);
            return false;
        }
        let Some(id) = repo.latest_plan() else {
            // Killed before the plan was stored: running it again is all there is to do.
            repo.run(&["run", &plan_arg, "-q"]).expect_code(0);
            check(&repo, &reference, &label);
            return false;
        };
        // Every other trial, the first resume is killed too.
        if n % 2 == 1 {
            let _ = run_and_kill(&repo, &["resume", &id, "-q"], second);
        }
        let resume = repo.run(&["resume", &id, "--json", "-q"]);
        resume.expect_code(0);
        assert_eq!(resume.json()["status"], "succeeded", "{label}");
        check(&repo, &reference, &label);
        true
    };
    // Two at a time: the jobs mostly sleep, and it halves the test's time.
    let (ran, resumed) = kill_trials(&moments, TRIALS, 2, trial);
    eprintln!("{resumed} of {ran} trials were resumed after a kill");
    assert!(resumed >= TRIALS / 2, "too few kills landed mid-run");
}

#[cfg(target_os = "linux")]
#[test]
fn the_next_owner_stops_the_job_processes_a_killed_cli_left_running() {
    let repo = Repo::new();
    let first = repo.scratch.join("first.pid");
    let second = repo.scratch.join("second.pid");
    // The job records its shell's pid (the process group's leader) and then runs long; a
    // later attempt records into the second file.
    let work = format!(
        "if [ -f '{f}' ]; then echo $$ > '{s}'; else echo $$ > '{f}'; fi; sleep 300",
        f = first.display(),
        s = second.display()
    );
    let file = repo.plan(
        "plan.json",
        &json!({"name": "long", "jobs": [job("long", &work, &[])]}),
    );
    let mut cli = repo.spawn(&["run", file.to_str().expect("utf-8")]);
    wait_for_file(&first, Duration::from_secs(30), "the job to start");
    let leftover = wait_for_pid(&first, Duration::from_secs(5));
    // Give the engine a moment to journal the process group, then kill the CLI only.
    std::thread::sleep(Duration::from_millis(300));
    cli.kill().expect("kill -9");
    let _ = cli.wait();
    assert!(alive(leftover), "the job outlives a kill -9 of the CLI");

    // The next owner stops it before running the job again.
    let mut resumed = repo.spawn(&["resume", &repo.latest_plan().expect("plan")]);
    assert!(
        gone_within(leftover, Duration::from_secs(30)),
        "the leftover job {leftover} still runs"
    );
    let again = wait_for_pid(&second, Duration::from_secs(5));
    assert_ne!(again, leftover);
    // SIGTERM pauses cleanly and stops the new attempt's processes too.
    let _ = Command::new("kill")
        .args(["-TERM", &resumed.id().to_string()])
        .status();
    let _ = resumed.wait();
    assert!(
        gone_within(again, Duration::from_secs(10)),
        "the resumed job {again} still runs"
    );
}
