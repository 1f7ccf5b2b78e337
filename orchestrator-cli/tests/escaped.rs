//! A process that left its job's process group (`setsid`) ends with the job, through the real
//! binary (issue 12, item 7): on a job's timeout, and after `kill -9` of `orchestrator run`,
//! when the next `orchestrator resume` takes the plan over.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::Repo;
use orchestrator_testkit::fixtures::job;
use serde_json::json;

fn have_setsid() -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("setsid").is_file()));
    if !found {
        println!("skipped: `setsid` is not installed, so no process can leave its group");
    }
    found
}

/// A running process (a zombie does not count).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

fn wait_for_pid(path: &Path) -> i32 {
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no pid in {}", path.display());
}

fn gone_within(pid: i32, within: Duration) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

fn kill(pid: i32) {
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
}

/// Shell that starts a grandchild in a session of its own, which writes its pid to `pid_file`
/// and sleeps.
fn escape(pid_file: &Path) -> String {
    format!(
        "setsid sh -c 'echo $$ > {}; exec sleep 1000' &",
        pid_file.display()
    )
}

#[test]
fn a_setsid_grandchild_ends_with_its_jobs_timeout() {
    if !have_setsid() {
        return;
    }
    let repo = Repo::new();
    let pid_file = repo.scratch.join("escaped.pid");
    let work = json!({
        "type": "shell",
        "command": format!("{} sleep 1000", escape(&pid_file)),
        "timeout": 1000,
    });
    let mut hangs = job("hangs", "", &[]);
    hangs["work"] = work;
    let plan = repo.plan("timeout.json", &json!({"name": "timeout", "jobs": [hangs]}));
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json", "-q"]);
    run.expect_code(1);
    let pid = wait_for_pid(&pid_file);
    let gone = gone_within(pid, Duration::from_secs(3));
    if !gone {
        kill(pid);
    }
    assert!(
        gone,
        "the setsid grandchild {pid} outlived its job's timeout"
    );
}

#[test]
fn resume_after_kill_9_stops_a_setsid_grandchild_of_the_dead_run() {
    if !have_setsid() {
        return;
    }
    let repo = Repo::new();
    let pid_file = repo.scratch.join("escaped.pid");
    let ran = repo.scratch.join("ran-once");
    // The first run leaves a grandchild in its own session and hangs; the run after the crash
    // just does its work.
    let work = format!(
        "if [ -f {ran} ]; then echo done > done.txt; exit 0; fi; touch {ran}; {} sleep 1000",
        escape(&pid_file),
        ran = ran.display()
    );
    let plan = repo.plan(
        "escape.json",
        &json!({"name": "escape", "jobs": [job("escapes", &work, &[])]}),
    );
    let mut child = repo.spawn(&["run", plan.to_str().expect("utf-8"), "-q"]);
    let pid = wait_for_pid(&pid_file);
    child.kill().expect("kill -9");
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        alive(pid),
        "precondition: the grandchild outlives the killed CLI"
    );

    let list = repo.run(&["list", "--json"]);
    list.expect_code(0);
    let id = list.json()["plans"][0]["planId"]
        .as_str()
        .expect("plan id")
        .to_owned();
    let resume = repo.run(&["resume", &id, "--json", "-q"]);
    let gone = gone_within(pid, Duration::from_secs(5));
    if !gone {
        kill(pid);
    }
    resume.expect_code(0);
    assert_eq!(resume.json()["status"], "succeeded");
    assert!(
        gone,
        "the setsid grandchild {pid} of the killed run outlived the resume"
    );
}
