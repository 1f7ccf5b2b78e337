//! Machine-wide capacity (`--machine-slots`, `ORCHESTRATOR_MACHINE_SLOTS`): two `orchestrator
//! run` processes sharing 3 slots never run more than 3 jobs at once (and do run 3), and a slot
//! held by a process killed with SIGKILL is free again.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::Repo;
use orchestrator_testkit::fixtures::{job, wait_child};
use serde_json::json;

/// A job that counts itself in `scratch/count` while it runs (under `flock` on
/// `scratch/lock`), records the highest count in `scratch/max`, and sleeps meanwhile.
fn counted_job(id: &str, scratch: &Path) -> serde_json::Value {
    let d = scratch.display();
    let work = format!(
        "flock {d}/lock sh -c 'n=$(($(cat {d}/count) + 1)); echo $n > {d}/count; \
         if [ $n -gt $(cat {d}/max) ]; then echo $n > {d}/max; fi' && \
         sleep 0.4 && \
         flock {d}/lock sh -c 'echo $(($(cat {d}/count) - 1)) > {d}/count'"
    );
    job(id, &work, &[])
}

fn read_number(path: &Path) -> u32 {
    let text = std::fs::read_to_string(path).expect("read counter");
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}: not a number: {text:?}", path.display()))
}

#[test]
fn two_processes_sharing_three_machine_slots_never_run_more_than_three_jobs() {
    let repo = Repo::new();
    std::fs::write(repo.scratch.join("count"), "0\n").expect("write");
    std::fs::write(repo.scratch.join("max"), "0\n").expect("write");
    let slots = repo.scratch.join("slots");
    let plans: Vec<_> = ["left", "right"]
        .iter()
        .map(|side| {
            let jobs: Vec<_> = (0..6)
                .map(|i| counted_job(&format!("{side}-{i}"), &repo.scratch))
                .collect();
            // Six independent jobs and no plan limit: only the machine's slots hold them back.
            let plan = json!({"name": side, "isolation": "none", "maxParallel": 0, "jobs": jobs});
            repo.plan(&format!("{side}.json"), &plan)
        })
        .collect();
    let path = |i: usize| plans[i].to_str().expect("utf-8 path").to_owned();
    // One process gets the limit from the environment, the other from the flag.
    let left = repo
        .command(&["run", &path(0), "--json", "--quiet"])
        .env("ORCHESTRATOR_MACHINE_SLOTS", "3")
        .env("ORCHESTRATOR_SLOTS_DIR", &slots)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn left");
    let right = repo
        .command(&["run", &path(1), "--json", "--quiet", "--machine-slots", "3"])
        .env("ORCHESTRATOR_SLOTS_DIR", &slots)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn right");
    for (side, child) in [("left", left), ("right", right)] {
        let run = wait_child(child, Duration::from_secs(120));
        run.expect_code(0);
        assert_eq!(run.json()["status"], "succeeded", "{side}: {}", run.stderr);
    }
    let most = read_number(&repo.scratch.join("max"));
    assert!(most <= 3, "{most} jobs ran at once with 3 machine slots");
    assert_eq!(most, 3, "the 12 jobs never used the 3 slots at once");
    assert_eq!(read_number(&repo.scratch.join("count")), 0);
}

#[test]
fn a_bad_machine_slots_variable_is_invalid_input_naming_it() {
    let repo = Repo::new();
    let plan = repo.plan(
        "p.json",
        &json!({"name": "p", "isolation": "none", "jobs": [job("one", "true", &[])]}),
    );
    let out = repo
        .command(&["run", plan.to_str().expect("utf-8 path")])
        .env("ORCHESTRATOR_MACHINE_SLOTS", "three")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ORCHESTRATOR_MACHINE_SLOTS=three"),
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
fn the_slot_of_a_process_killed_with_sigkill_is_free_again() {
    let repo = Repo::new();
    let slots = repo.scratch.join("slots");
    let started = repo.scratch.join("started");
    // The job says it runs, then sleeps in the same process (its pid is the one recorded).
    let holder = repo.plan(
        "holder.json",
        &json!({"name": "holder", "isolation": "none", "jobs": [job(
            "hold",
            &format!("echo $$ > {} && exec sleep 60", started.display()),
            &[],
        )]}),
    );
    let mut child = repo
        .command(&["run", holder.to_str().expect("utf-8 path"), "--quiet"])
        .args(["--machine-slots", "1"])
        .env("ORCHESTRATOR_SLOTS_DIR", &slots)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn holder");
    let deadline = Instant::now() + Duration::from_secs(60);
    let job_pid = loop {
        if let Ok(text) = std::fs::read_to_string(&started) {
            if let Ok(pid) = text.trim().parse::<u32>() {
                break pid;
            }
        }
        assert!(Instant::now() < deadline, "the holder's job never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The only slot is taken now: a second plan waits for it.
    let waiting = repo.plan(
        "waiting.json",
        &json!({"name": "waiting", "isolation": "none", "jobs": [job("quick", "true", &[])]}),
    );
    let second = repo
        .command(&[
            "run",
            waiting.to_str().expect("utf-8 path"),
            "--json",
            "--quiet",
        ])
        .args(["--machine-slots", "1"])
        .env("ORCHESTRATOR_SLOTS_DIR", &slots)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn second");
    std::thread::sleep(Duration::from_millis(500));
    // kill -9: no destructor runs; only the kernel closing its files frees the slot. The job
    // itself lives on (it never had the slot file: opened close-on-exec).
    child.kill().expect("kill -9 the holder");
    let _ = child.wait();
    let run = wait_child(second, Duration::from_secs(60));
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &job_pid.to_string()])
        .status();
    run.expect_code(0);
    assert_eq!(run.json()["status"], "succeeded", "{}", run.stderr);
}
