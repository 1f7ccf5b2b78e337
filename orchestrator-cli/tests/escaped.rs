//! A process that left its job's process group (`setsid`) ends with the job, through the real
//! binary (issue 12, item 7): on a job's timeout, and after `kill -9` of `orchestrator run`,
//! when the next `orchestrator resume` takes the plan over.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::time::Duration;

use common::Repo;
use orchestrator_testkit::fixtures::{alive, gone_within, job, kill, on_path, wait_for_pid};
use serde_json::json;

fn have_setsid() -> bool {
    let found = on_path("setsid");
    if !found {
        println!("skipped: `setsid` is not installed, so no process can leave its group");
    }
    found
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
    let pid = wait_for_pid(&pid_file, Duration::from_secs(30));
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
    let pid = wait_for_pid(&pid_file, Duration::from_secs(30));
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
