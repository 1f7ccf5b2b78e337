//! The approval tools of `orchestrator mcp` (SPEC §6, §12): `approve_copilot_job`,
//! `reject_copilot_job` and `answer_copilot_job`, through rmcp's client over stdio; a job
//! created with `"approval": "before"` waits, shows `waitingFor`, and the tools' errors name
//! what the job waits for.

mod common;
mod mcp_client;

use common::Repo;
use mcp_client::{call, ok, structured, text, wait_for};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_and_reject_waiting_jobs() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "gated", "jobs": [
            {"producerId": "ship", "task": "Ship it", "work": "echo s > ship.txt",
             "dependencies": [], "approval": "before"},
            {"producerId": "drop", "task": "Drop it", "work": "echo d > drop.txt",
             "dependencies": [], "approval": "before"},
            {"producerId": "after", "task": "After", "work": "echo a > after.txt",
             "dependencies": ["drop"]},
        ]}),
    )
    .await;
    let plan = ok(&r)["planId"].as_str().expect("planId").to_owned();
    let doc = wait_for(&client, &plan, &["waiting"]).await;
    let jobs = doc["jobs"].as_array().expect("jobs");
    assert!(
        jobs.iter()
            .filter(|j| j["producerId"] != "after")
            .all(|j| j["waitingFor"] == "approval"),
        "{doc:#}"
    );

    // Not waiting for that: an error naming what the job waits for.
    let r = call(
        &client,
        "answer_copilot_job",
        json!({"planId": plan, "producerId": "ship", "answer": "yes"}),
    )
    .await;
    let error = structured(&r);
    assert_eq!(error["error"], "not_waiting", "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("job `ship` waits for approval")),
        "{}",
        text(&r)
    );

    let r = call(
        &client,
        "reject_copilot_job",
        json!({"planId": plan, "producerId": "drop", "reason": "not needed"}),
    )
    .await;
    ok(&r);
    let r = call(
        &client,
        "approve_copilot_job",
        json!({"planId": plan, "producerId": "ship"}),
    )
    .await;
    ok(&r);
    let doc = wait_for(&client, &plan, &["failed", "succeeded"]).await;
    assert_eq!(doc["status"], "failed", "{doc:#}");
    let job = |id: &str| {
        doc["jobs"]
            .as_array()
            .and_then(|jobs| jobs.iter().find(|j| j["producerId"] == id))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(job("ship")["status"], "succeeded");
    assert_eq!(job("drop")["failureReason"], "rejected");
    assert_eq!(job("drop")["error"], "rejected: not needed");
    assert_eq!(job("after")["status"], "blocked");
    let _ = client.cancel().await;
}
