//! Schema parity: every field of the plan format (SPEC §2) is accepted by `create_copilot_plan`
//! in camelCase and in the snake_case spellings the reference documents (and rejects), and the
//! options the reference drops on create (maxParallel, verifyRi, worktreeInit,
//! cleanUpSuccessfulWork, additionalSymlinkDirs) take effect.

mod common;
mod mcp_client;

use common::Repo;
use mcp_client::{call, failed, ok, wait_for};
use orchestrator_testkit::fixtures::git;
use serde_json::{json, Value};

async fn job_log(client: &mcp_client::Client, plan: &str, job: &str) -> String {
    let r = call(
        client,
        "get_copilot_job_logs",
        json!({"planId": plan, "jobId": job}),
    )
    .await;
    let doc = ok(&r);
    doc.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_plan_field_in_camel_case_is_accepted_and_honored() {
    let repo = Repo::new();
    std::fs::create_dir_all(repo.dir.join("shared-cache")).expect("mkdir");
    let init_log = repo.dir.parent().expect("tmp").join("init.log");
    let client = repo.mcp().await;
    let plan = json!({
        "name": "parity camel",
        "baseBranch": "main",
        "targetBranch": "feature/parity",
        "maxParallel": 1,
        "cleanUpSuccessfulWork": false,
        "additionalSymlinkDirs": ["shared-cache"],
        "startPaused": false,
        "verifyRi": {"type": "shell", "command": "test -f all.txt && echo verified-snapshot"},
        "env": {"PLAN_VAR": "p"},
        "worktreeInit": [format!("echo ran >> '{}'", init_log.display())],
        "isolation": "worktree",
        "jobs": [
            {
                "producerId": "first",
                "name": "First job",
                "task": "write first",
                "work": {
                    "type": "shell",
                    "command": "echo $PLAN_VAR$JOB_VAR$SPEC_VAR > first.txt",
                    "shell": "bash",
                    "env": {"SPEC_VAR": "s"},
                    "cwd": ".",
                    "timeout": 60000,
                    "onFailure": {"noAutoHeal": true, "message": "see the docs", "resumeFromPhase": "work"}
                },
                "dependencies": [],
                "prechecks": {"type": "process", "executable": "test", "args": ["-L", "shared-cache"]},
                "postchecks": "test -f first.txt",
                "instructions": "only for agents",
                "baseBranch": "main",
                "expectsNoChanges": false,
                "autoHeal": false,
                "group": "parity/a",
                "env": {"JOB_VAR": "j"}
            },
            {
                "producerId": "second",
                "task": "combine",
                "work": "cat first.txt > all.txt",
                "dependencies": ["first"]
            }
        ]
    });
    let r = call(&client, "create_copilot_plan", plan).await;
    let created = ok(&r).clone();
    let id = created["planId"].as_str().expect("planId").to_owned();
    let done = wait_for(&client, &id, &["succeeded", "failed"]).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["targetBranch"], "feature/parity");
    let options = &done["options"];
    assert_eq!(options["maxParallel"], 1);
    assert_eq!(options["cleanUpSuccessfulWork"], false);
    assert_eq!(options["additionalSymlinkDirs"], json!(["shared-cache"]));

    // Plan, job and spec env layered; the result on the named target branch.
    assert_eq!(git(&repo.dir, &["show", "feature/parity:all.txt"]), "pjs");
    // verifyRi ran on the snapshot.
    let snapshot_log = job_log(&client, &id, "snapshot-validation").await;
    assert!(snapshot_log.contains("verified-snapshot"), "{snapshot_log}");
    // worktreeInit ran in every new worktree (two jobs and the snapshot).
    let init = std::fs::read_to_string(&init_log).expect("worktreeInit ran");
    assert!(init.lines().count() >= 2, "{init}");
    // cleanUpSuccessfulWork: false keeps the jobs' worktrees.
    let worktrees = git(&repo.dir, &["worktree", "list"]);
    assert!(worktrees.lines().count() >= 3, "{worktrees}");
    // The symlinked folder is not committed.
    assert!(!git(
        &repo.dir,
        &["ls-tree", "-r", "--name-only", "feature/parity"]
    )
    .contains("shared-cache"));
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snake_case_spellings_and_every_work_form_are_accepted() {
    let repo = Repo::new();
    std::fs::create_dir_all(repo.dir.join("docs")).expect("mkdir");
    std::fs::write(repo.dir.join("docs/task.md"), "do it").expect("write");
    let client = repo.mcp().await;
    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "first of a chain", "start_paused": true, "jobs": [
            {"producer_id": "solo", "task": "t", "work": "true", "dependencies": [],
             "expects_no_changes": true}
        ]}),
    )
    .await;
    let first = ok(&r)["planId"].as_str().expect("planId").to_owned();
    let plan = json!({
        "name": "parity snake",
        "base_branch": "main",
        "target_branch": "feature/snake",
        "max_parallel": 2,
        "clean_up_successful_work": true,
        "additional_symlink_dirs": ["docs"],
        "start_paused": true,
        "verify_ri": "true",
        "resume_after_plan": first,
        "worktree_init": [{"type": "process", "executable": "true"}],
        "env": {"A": "1"},
        "jobs": [
            {"producer_id": "agent-inline", "task": "agent", "dependencies": [],
             "work": {"type": "agent", "instructions": "Add a test", "agent": "claude",
                      "model": "claude-sonnet-4.5", "model_tier": "premium", "effort": "xhigh",
                      "max_turns": 5, "resume_session": false, "allowed_folders": ["docs"],
                      "allowed_urls": ["https://docs.rs", "*.example.com"], "env": {"B": "2"},
                      "timeout": 600000, "on_failure": {"no_auto_heal": true,
                      "resume_from_phase": "prechecks"}},
             "auto_heal": false, "expects_no_changes": true, "base_branch": "main"},
            {"producerId": "agent-file", "task": "agent from file", "dependencies": ["agent-inline"],
             "work": {"type": "agent", "instructionsFile": "docs/task.md", "modelTier": "fast",
                      "effort": "low", "maxTurns": 2, "resumeSession": true,
                      "allowedFolders": ["docs"], "allowedUrls": ["http://localhost:8080"]}},
            {"producerId": "shorthand", "task": "agent shorthand", "dependencies": ["agent-file"],
             "work": "@agent Summarize the change", "prechecks": "true",
             "postchecks": {"type": "process", "executable": "true", "args": [], "cwd": "docs",
                            "env": {}, "timeout": 1000}}
        ]
    });
    let r = call(&client, "create_copilot_plan", plan).await;
    let created = ok(&r).clone();
    assert_eq!(created["jobMapping"].as_object().map(|m| m.len()), Some(3));
    let id = created["planId"].as_str().expect("planId");
    let r = call(&client, "get_copilot_plan_status", json!({"plan_id": id})).await;
    let doc = ok(&r).clone();
    assert_eq!(doc["status"], "paused");
    assert_eq!(doc["options"]["maxParallel"], 2);
    assert_eq!(doc["options"]["resumeAfterPlan"], first.as_str());
    assert_eq!(doc["options"]["additionalSymlinkDirs"], json!(["docs"]));
    let r = call(
        &client,
        "get_copilot_job",
        json!({"plan_id": id, "producer_id": "agent-inline"}),
    )
    .await;
    let spec: Value = ok(&r)["spec"]["work"].clone();
    assert_eq!(spec["effort"], "xhigh");
    assert_eq!(spec["maxTurns"], 5);
    assert_eq!(spec["resumeSession"], false);
    assert_eq!(spec["onFailure"]["resumeFromPhase"], "prechecks");

    // Validation names the field: a bad effort, a path climbing out, both instruction forms.
    for (work, field_part) in [
        (
            json!({"type": "agent", "instructions": "x", "effort": "extreme"}),
            "effort",
        ),
        (
            json!({"type": "agent", "instructionsFile": "../secret.md"}),
            "instructionsFile",
        ),
        (
            json!({"type": "agent", "instructions": "x", "instructionsFile": "docs/task.md"}),
            "instructions",
        ),
        (
            json!({"type": "shell", "command": "true", "cwd": "../.."}),
            "cwd",
        ),
        (
            json!({"type": "agent", "instructions": "x", "allowedUrls": ["ftp://x"]}),
            "allowedUrls",
        ),
    ] {
        let r = call(
            &client,
            "create_copilot_plan",
            json!({"name": "bad", "jobs": [
                {"producerId": "bad-job", "task": "t", "work": work, "dependencies": []}
            ]}),
        )
        .await;
        let e = failed(&r);
        let text = e.to_string();
        assert!(text.contains(field_part), "{field_part} named in {text}");
    }
    let _ = client.cancel().await;
}
