//! A phase that runs again starts where the phase started (SPEC §3, issue: re-runs on top of
//! half-done work). Jobs here append to files, so a re-run on top of a partial run is visible
//! in the result: every way of stopping a run (SIGKILL, SIGTERM, SIGINT, a failure and
//! `retry`) in every phase a job runs (setup, prechecks, work, postchecks) must end with the
//! tree of an uninterrupted run.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{kill_trials, run_and_kill, Repo};
use orchestrator_testkit::fixtures::{
    copy_repo, seed_from_env, signal, wait_child, wait_for_file, Rng,
};
use serde_json::{json, Value};

/// A marker file outside the repository: the first run of a phase creates it and then hangs
/// (until it is stopped); a later run sees it and goes straight on.
fn hang_once(marker: &Path) -> String {
    format!(
        "if [ ! -e '{m}' ]; then touch '{m}'; sleep 60; fi",
        m = marker.display()
    )
}

/// How a run is stopped before it ends.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Kill,
    Term,
    Int,
    /// The phase fails after its partial work; `retry` runs it again.
    Fail,
}

/// The phase a job appends in before it is stopped.
#[derive(Debug, Clone, Copy)]
enum In {
    Setup,
    Prechecks,
    Work,
    Postchecks,
}

/// One job whose `phase` appends a line to a file and then is stopped by `stop`.
fn one_job_plan(phase: In, stop: Stop, marker: &Path) -> Value {
    let then = match stop {
        Stop::Fail => format!(
            "if [ ! -e '{m}' ]; then touch '{m}'; exit 1; fi",
            m = marker.display()
        ),
        _ => hang_once(marker),
    };
    let appending = |file: &str| format!("echo line >> {file}; {then}");
    let mut job = json!({
        "producerId": "append",
        "task": "append a line",
        "work": "echo work >> work.txt",
        "dependencies": [],
    });
    let mut plan = json!({"name": "rerun", "jobs": []});
    match phase {
        In::Setup => plan["worktreeInit"] = json!([appending("setup.txt")]),
        In::Prechecks => job["prechecks"] = json!(appending("pre.txt")),
        In::Work => job["work"] = json!(appending("README.md")),
        // After the commit: a leftover of the stopped run makes the check fail.
        In::Postchecks => {
            job["postchecks"] = json!(format!(
                "echo line >> post.tmp; test \"$(wc -l < post.tmp)\" -eq 1; {then}"
            ))
        }
    }
    plan["jobs"] = json!([job]);
    plan
}

/// The files of the target branch with their contents.
fn result(repo: &Repo) -> Vec<(String, String)> {
    repo.files_at("orchestrator/rerun")
        .into_iter()
        .map(|f| {
            let text = repo.show("orchestrator/rerun", &f);
            (f, text)
        })
        .collect()
}

fn expected(phase: In) -> Vec<(String, String)> {
    let mut files = vec![
        ("README.md".to_owned(), "hello\n".to_owned()),
        ("shared.txt".to_owned(), "one\ntwo\nthree\n".to_owned()),
    ];
    match phase {
        // Once by the job's setup, once by the snapshot validation's (it runs worktreeInit too
        // and commits what it changes).
        In::Setup => files.push(("setup.txt".into(), "line\nline\n".into())),
        In::Prechecks => files.push(("pre.txt".into(), "line\n".into())),
        In::Work => files[0].1 = "hello\nline\n".into(),
        In::Postchecks => {}
    }
    if !matches!(phase, In::Work) {
        files.push(("work.txt".into(), "work\n".into()));
    }
    files.sort();
    files
}

fn stop_and_rerun(phase: In, stop: Stop) {
    let label = format!("{phase:?} stopped by {stop:?}");
    let repo = Repo::new();
    let marker = repo.scratch.join("stopped-once");
    let file = repo.plan("plan.json", &one_job_plan(phase, stop, &marker));
    let file = file.to_str().expect("utf-8");
    match stop {
        Stop::Fail => {
            repo.run(&["run", file, "-q"]).expect_code(1);
            let id = repo.latest_plan().expect("a stored plan");
            repo.run(&["retry", &id, "-q"]).expect_code(0);
        }
        Stop::Kill | Stop::Term | Stop::Int => {
            let child = repo.spawn(&["run", file, "-q"]);
            wait_for_file(
                &marker,
                Duration::from_secs(30),
                &format!("{label}: the phase to start"),
            );
            let pid = child.id();
            match stop {
                Stop::Kill => signal(pid, "KILL"),
                Stop::Term => signal(pid, "TERM"),
                _ => signal(pid, "INT"),
            }
            let stopped = wait_child(child, Duration::from_secs(30));
            assert_ne!(stopped.code, 0, "{label}: the run was stopped");
            let id = repo.latest_plan().expect("a stored plan");
            let resumed = repo.run(&["resume", &id, "--json", "-q"]);
            resumed.expect_code(0);
            assert_eq!(resumed.json()["status"], "succeeded", "{label}");
        }
    }
    assert_eq!(
        result(&repo),
        expected(phase),
        "{label}: the result differs"
    );
    assert!(
        repo.extra_worktrees().is_empty(),
        "{label}: worktrees left: {:?}",
        repo.extra_worktrees()
    );
}

#[test]
fn every_way_of_stopping_a_phase_reruns_it_from_where_it_began() {
    let phases = [In::Setup, In::Prechecks, In::Work, In::Postchecks];
    let stops = [Stop::Kill, Stop::Term, Stop::Int, Stop::Fail];
    let cases: Vec<(In, Stop)> = phases
        .iter()
        .flat_map(|&p| stops.iter().map(move |&s| (p, s)))
        .collect();
    // Four at a time: the runs mostly wait for a signal.
    std::thread::scope(|s| {
        let workers: Vec<_> = cases
            .chunks(cases.len().div_ceil(4))
            .map(|chunk| {
                s.spawn(move || {
                    for &(phase, stop) in chunk {
                        stop_and_rerun(phase, stop);
                    }
                })
            })
            .collect();
        for worker in workers {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

const TRIALS: usize = 20;
const TARGET: &str = "orchestrator/appending";

/// A chain and a fan of jobs that append to shared files in every phase they run: setup
/// (`worktreeInit`), prechecks and work, with short sleeps between the lines so that a kill
/// lands mid-phase. `d` joins the chain and the fan and has a postcheck that fails on a
/// leftover of an earlier run.
fn appending_plan() -> Value {
    let job = |id: &str, deps: &[&str], file: &str| {
        json!({
            "producerId": id,
            "task": format!("append {id}"),
            "env": {"JOB": id},
            "prechecks": "echo pre >> pre-$JOB.txt; sleep 0.05",
            "work": format!(
                "echo {id}1 >> {file}; sleep 0.1; echo {id}2 >> {file}; sleep 0.1; echo {id}3 >> {file}"
            ),
            "dependencies": deps,
        })
    };
    let mut d = job("d-join", &["b-chain", "c-fan"], "log.txt");
    d["postchecks"] = json!("echo post >> post.tmp; test \"$(wc -l < post.tmp)\" -eq 1");
    json!({
        "name": "appending",
        "maxParallel": 2,
        "worktreeInit": ["echo init >> setup-$JOB.txt; sleep 0.05"],
        "jobs": [
            job("a-root", &[], "log.txt"),
            job("b-chain", &["a-root"], "log.txt"),
            job("c-fan", &["a-root"], "fan.txt"),
            d,
        ],
    })
}

/// The target branch's files with their contents: compared whole, so that a difference
/// shows which file got a line twice.
fn tree(repo: &Repo) -> Vec<(String, String)> {
    repo.files_at(TARGET)
        .into_iter()
        .map(|f| {
            let text = repo.show(TARGET, &f);
            (f, text)
        })
        .collect()
}

#[test]
fn kill_9_at_random_moments_of_appending_jobs_gives_the_uninterrupted_tree() {
    let seed = seed_from_env("CRASH_SEED");
    let mut rng = Rng::new(seed);
    let pristine = Repo::new();
    let plan_file = pristine.plan("appending.json", &appending_plan());
    let plan_arg = plan_file.to_str().expect("utf-8").to_owned();
    let template = pristine.scratch.join("template");
    copy_repo(&pristine.dir, &template);

    let started = Instant::now();
    pristine
        .run(&["run", &plan_arg, "--json", "-q"])
        .expect_code(0);
    let full = started.elapsed();
    let reference = tree(&pristine);
    // Every job's lines once, in order: the reference is the uninterrupted run.
    assert_eq!(
        pristine.show(TARGET, "log.txt"),
        "a-root1\na-root2\na-root3\nb-chain1\nb-chain2\nb-chain3\nd-join1\nd-join2\nd-join3\n"
    );
    assert_eq!(pristine.show(TARGET, "setup-d-join.txt"), "init\n");
    eprintln!("uninterrupted run: {full:?}");

    let window = full.as_millis() as u64;
    let moments: Vec<Duration> = (0..TRIALS * 3)
        .map(|_| Duration::from_millis(rng.below_u64(window)))
        .collect();
    let trial = |n: usize, &moment: &Duration| -> bool {
        let repo = Repo::copy_of(&template);
        let label = format!("trial {n} (CRASH_SEED={seed})");
        if let Some(run) = run_and_kill(&repo, &["run", &plan_arg, "-q"], moment) {
            run.expect_code(0);
            assert_eq!(tree(&repo), reference, "{label}: the tree differs");
            return false;
        }
        let Some(id) = repo.latest_plan() else {
            repo.run(&["run", &plan_arg, "-q"]).expect_code(0);
            assert_eq!(tree(&repo), reference, "{label}: the tree differs");
            return false;
        };
        let resume = repo.run(&["resume", &id, "--json", "-q"]);
        resume.expect_code(0);
        assert_eq!(tree(&repo), reference, "{label}: the tree differs");
        let left = repo.extra_worktrees();
        assert!(left.is_empty(), "{label}: worktrees left: {left:?}");
        true
    };
    // Two at a time: the jobs mostly sleep, and it halves the test's time.
    let (ran, resumed) = kill_trials(&moments, TRIALS, 2, trial);
    eprintln!("{resumed} of {ran} trials were resumed after a kill");
    assert!(resumed >= TRIALS / 2, "too few kills landed mid-run");
}
