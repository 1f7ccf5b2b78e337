//! Agent work through the `orchestrator` binary, with a stand-in `claude` on PATH that prints
//! Claude Code's real stream-json lines: the usage lands in `status --json` per job, and
//! `ORCHESTRATOR_HEAL_AGENT` heals a failing shell job in a new attempt.

#![cfg(unix)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::Repo;
use orchestrator_testkit::fixtures::Run;
use serde_json::{json, Value};

/// A `claude` that writes `agent.txt` and `fixed.txt` in its working directory and prints an
/// init line and a result line as Claude Code 2.1 does with `--output-format stream-json`.
fn fake_claude(scratch: &Path) -> PathBuf {
    let bin = scratch.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let script = r#"#!/bin/sh
echo "written by the agent" > agent.txt
echo "fixed" > fixed.txt
echo '{"type":"system","subtype":"init","cwd":"'"$PWD"'","session_id":"sess-0001","model":"claude-test","tools":["Write","Bash"]}'
echo '{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"Done.","session_id":"sess-0001","total_cost_usd":0.0125,"duration_ms":42,"usage":{"input_tokens":1234,"cache_creation_input_tokens":0,"cache_read_input_tokens":200,"output_tokens":56}}'
"#;
    let path = bin.join("claude");
    std::fs::write(&path, script).expect("write fake");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    bin
}

fn run_with_agent(repo: &Repo, plan: &Value, heal: bool) -> Run {
    let bin = fake_claude(&repo.scratch);
    let file = repo.plan("plan.json", plan);
    let mut cmd = repo.command(&["run", file.to_str().expect("utf-8 path"), "--json"]);
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", bin.display()))
        .env("ORCHESTRATOR_AGENT", "claude");
    if heal {
        cmd.env("ORCHESTRATOR_HEAL_AGENT", "claude");
    }
    Run::from(cmd.output().expect("run orchestrator"))
}

#[test]
fn agent_usage_is_in_status_json_per_job() {
    let repo = Repo::new();
    let plan = json!({"name": "agent usage", "jobs": [
        {"producerId": "write", "task": "let the agent write",
         "work": "@agent Write agent.txt", "dependencies": []}
    ]});
    let run = run_with_agent(&repo, &plan, false);
    run.expect_code(0);
    let doc = run.json();
    let job = &doc["jobs"][0];
    assert_eq!(job["status"], "succeeded", "{doc}");
    let usage = &job["usage"];
    assert_eq!(usage["agent"], "claude", "{usage}");
    assert_eq!(usage["sessionId"], "sess-0001", "{usage}");
    assert_eq!(usage["outputTokens"], 56, "{usage}");
    assert!(
        usage["inputTokens"].as_u64().is_some_and(|n| n >= 1234),
        "{usage}"
    );
    assert_eq!(usage["turns"], 2, "{usage}");
    let target = doc["targetBranch"].as_str().expect("target");
    assert_eq!(
        repo.show(target, "agent.txt").trim(),
        "written by the agent"
    );

    // `status --json` later shows the same usage.
    let id = doc["planId"].as_str().expect("planId");
    let status = repo.run(&["status", id, "--json"]);
    status.expect_code(0);
    assert_eq!(status.json()["jobs"][0]["usage"], *usage);
    // The agent's own files stay out of the commit.
    assert!(repo
        .files_at(target)
        .iter()
        .all(|f| !f.starts_with(".orchestrator")));
}

#[test]
fn the_heal_agent_fixes_a_failing_shell_job_in_a_new_attempt() {
    let repo = Repo::new();
    let plan = json!({"name": "healed", "jobs": [
        {"producerId": "needs-fix", "task": "needs a fix",
         "work": "test -f fixed.txt", "dependencies": []}
    ]});
    // Without a heal agent the job fails.
    let run = run_with_agent(&repo, &plan, false);
    run.expect_code(1);

    let repo = Repo::new();
    let run = run_with_agent(&repo, &plan, true);
    run.expect_code(0);
    let doc = run.json();
    let job = &doc["jobs"][0];
    assert_eq!(job["status"], "succeeded", "{doc}");
    assert_eq!(
        job["attempts"], 2,
        "the failure, then the heal attempt: {job}"
    );
    let target = doc["targetBranch"].as_str().expect("target");
    assert_eq!(repo.show(target, "fixed.txt").trim(), "fixed");
}
