//! The MCP tools of the built `orchestrator mcp`, through rmcp's client over stdio, on
//! temporary git repositories driven by shell jobs.

mod common;
mod mcp_client;

use common::Repo;
use mcp_client::{call, failed, ok, text, wait_for};
use std::time::{Duration, Instant};

use orchestrator_mcp::TOOL_NAMES;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_exactly_the_implemented_tools() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let tools = client.list_all_tools().await.expect("tools");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let mut expected: Vec<String> = TOOL_NAMES.iter().map(|s| (*s).to_owned()).collect();
    expected.sort();
    assert_eq!(names, expected);
    for t in &tools {
        let description = t.description.as_deref().unwrap_or_default();
        assert!(description.len() > 40, "{} is described", t.name);
        assert_eq!(
            t.input_schema.get("type"),
            Some(&json!("object")),
            "{}",
            t.name
        );
    }
    let create = tools
        .iter()
        .find(|t| t.name == "create_copilot_plan")
        .expect("create tool");
    let schema = Value::Object((*create.input_schema).clone());
    assert_eq!(schema["required"], json!(["name", "jobs"]));
    assert!(schema["properties"]["jobs"]["items"]["properties"]["producerId"].is_object());
    let status = tools
        .iter()
        .find(|t| t.name == "get_copilot_plan_status")
        .expect("status tool");
    assert_eq!(
        status.input_schema.get("required"),
        Some(&json!(["planId"]))
    );
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_a_plan_that_runs_to_success() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(
        &client,
        "create_copilot_plan",
        json!({
            "name": "two steps",
            "max_parallel": 2,
            "jobs": [
                {"producerId": "write-a", "task": "write a", "work": "echo a > a.txt",
                 "dependencies": []},
                {"producer_id": "write-b", "task": "write b",
                 "work": {"type": "shell", "command": "test -f a.txt && echo b > b.txt"},
                 "dependencies": ["write-a"], "group": "docs/b"}
            ]
        }),
    )
    .await;
    let created = ok(&r).clone();
    let plan = created["planId"].as_str().expect("planId").to_owned();
    let mapping = created["jobMapping"].as_object().expect("jobMapping");
    assert_eq!(mapping.len(), 2);
    assert!(mapping["write-a"].is_string() && mapping["write-b"].is_string());
    assert!(created["status"].is_string());

    let done = wait_for(&client, &plan, &["succeeded", "failed", "canceled"]).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let target = done["targetBranch"].as_str().expect("target branch");
    assert!(target.starts_with("orchestrator/"), "{target}");

    let r = call(&client, "list_copilot_plans", json!({})).await;
    let plans = ok(&r)["plans"].as_array().expect("plans").clone();
    assert!(plans.iter().any(|p| p["planId"] == plan.as_str()));

    let r = call(
        &client,
        "get_copilot_job",
        json!({"planId": plan, "producerId": "write-b"}),
    )
    .await;
    let job = ok(&r);
    assert_eq!(job["status"], "succeeded");
    assert_eq!(job["jobId"], mapping["write-b"]);
    assert_eq!(job["dependencies"], json!(["write-a"]));

    let r = call(
        &client,
        "list_copilot_jobs",
        json!({"planId": plan, "group": "docs"}),
    )
    .await;
    assert_eq!(ok(&r)["count"], 1);

    let r = call(
        &client,
        "get_copilot_job_logs",
        json!({"planId": plan, "jobId": mapping["write-a"], "phase": "work"}),
    )
    .await;
    assert_eq!(ok(&r)["producerId"], "write-a");

    let r = call(&client, "get_copilot_plan_graph", json!({"planId": plan})).await;
    assert!(ok(&r)["graph"]
        .as_str()
        .is_some_and(|g| g.contains("write-a")));
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_invalid_arguments_naming_the_field() {
    let repo = Repo::new();
    let client = repo.mcp().await;

    let r = call(&client, "get_copilot_plan_status", json!({})).await;
    assert_eq!(failed(&r)["field"], "planId");

    let r = call(
        &client,
        "get_copilot_plan_status",
        json!({"planId": "no-such-plan"}),
    )
    .await;
    let e = failed(&r);
    assert_eq!(e["field"], "planId");
    assert_eq!(e["value"], "no-such-plan");

    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "p", "jobs": [{"producerId": "aaa", "work": "true", "dependencies": []}]}),
    )
    .await;
    let e = failed(&r);
    assert!(
        e["field"].as_str().is_some_and(|f| f.contains("jobs[0]")),
        "{e}"
    );
    assert!(text(&r).contains("task"), "{}", text(&r));

    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "p", "maxParalel": 2,
               "jobs": [{"producerId": "aaa", "task": "t", "work": "true", "dependencies": []}]}),
    )
    .await;
    let e = failed(&r);
    assert_eq!(e["field"], "maxParalel", "{e}");
    assert_eq!(e["value"], 2);

    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "p", "jobs": [
            {"producerId": "BAD", "task": "t", "work": "true", "dependencies": ["nope"]}]}),
    )
    .await;
    let message = text(&r);
    failed(&r);
    assert!(
        message.contains("BAD") && message.contains("nope"),
        "{message}"
    );

    let r = call(
        &client,
        "pause_copilot_plan",
        json!({"planId": "x", "stopRunning": "yes"}),
    )
    .await;
    let e = failed(&r);
    assert_eq!(e["field"], "stopRunning");
    assert_eq!(e["value"], "yes");
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_failed_jobs_by_producer_id() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(
        &client,
        "create_copilot_plan",
        json!({
            "name": "needs a fix",
            "jobs": [
                {"producerId": "broken", "task": "broken step", "work": "exit 3",
                 "dependencies": []},
                {"producerId": "after", "task": "after", "work": "echo after > after.txt",
                 "dependencies": ["broken"]}
            ]
        }),
    )
    .await;
    let plan = ok(&r)["planId"].as_str().expect("planId").to_owned();
    let failed_doc = wait_for(&client, &plan, &["failed", "succeeded", "canceled"]).await;
    assert_eq!(failed_doc["status"], "failed", "{failed_doc}");
    let jobs = failed_doc["jobs"].as_array().expect("jobs");
    assert_eq!(jobs[0]["status"], "failed");
    assert_eq!(jobs[1]["status"], "blocked");

    let r = call(
        &client,
        "get_copilot_job_logs",
        json!({"planId": plan, "producerId": "broken", "phase": "bogus"}),
    )
    .await;
    let e = failed(&r);
    assert_eq!(e["field"], "phase");
    assert!(e["allowed"].as_str().is_some_and(|a| a.contains("work")));

    let r = call(
        &client,
        "retry_copilot_job",
        json!({"planId": plan, "producerId": "nosuch"}),
    )
    .await;
    assert_eq!(failed(&r)["field"], "producerId");

    let r = call(
        &client,
        "retry_copilot_job",
        json!({"planId": plan, "producerId": "broken", "newWork": {"type": "nonsense"}}),
    )
    .await;
    assert!(failed(&r)["field"]
        .as_str()
        .is_some_and(|f| f.starts_with("newWork")));

    let r = call(
        &client,
        "retry_copilot_plan",
        json!({"planId": plan, "producerIds": ["broken"], "newWork": "echo fixed > fixed.txt"}),
    )
    .await;
    assert_eq!(ok(&r)["retried"], 1);
    let done = wait_for(&client, &plan, &["succeeded", "failed", "canceled"]).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["jobs"][0]["attempts"], 2);
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_copilot_job_by_producer_id_with_new_work() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "one fix", "jobs": [
            {"producerId": "flaky", "task": "flaky", "work": "false", "dependencies": []}]}),
    )
    .await;
    let plan = ok(&r)["planId"].as_str().expect("planId").to_owned();
    let doc = wait_for(&client, &plan, &["failed", "succeeded"]).await;
    assert_eq!(doc["status"], "failed");
    let r = call(
        &client,
        "get_copilot_job_failure_context",
        json!({"planId": plan, "producerId": "flaky"}),
    )
    .await;
    let context = ok(&r);
    assert_eq!(context["failedPhase"], "work", "{context}");
    assert_eq!(context["work"]["command"], "false", "{context}");
    let r = call(
        &client,
        "retry_copilot_job",
        json!({"planId": plan, "producerId": "flaky",
               "newWork": {"type": "shell", "command": "echo ok > ok.txt"}}),
    )
    .await;
    ok(&r);
    let doc = wait_for(&client, &plan, &["failed", "succeeded"]).await;
    assert_eq!(doc["status"], "succeeded", "{doc}");
    let r = call(
        &client,
        "get_copilot_job_attempts",
        json!({"planId": plan, "producerId": "flaky"}),
    )
    .await;
    assert_eq!(ok(&r)["count"], 2);
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_paused_resume_archive_and_delete() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "later", "startPaused": true, "jobs": [
            {"producerId": "step", "task": "step", "work": "echo s > s.txt", "dependencies": []}]}),
    )
    .await;
    let created = ok(&r).clone();
    let plan = created["planId"].as_str().expect("planId").to_owned();
    assert_eq!(created["status"], "paused", "{created}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = call(&client, "get_copilot_plan_status", json!({"planId": plan})).await;
    let job = ok(&r)["jobs"][0]["status"].clone();
    assert!(
        job == "pending" || job == "ready",
        "nothing runs while paused: {job}"
    );

    let r = call(&client, "resume_copilot_plan", json!({"planId": plan})).await;
    ok(&r);
    let doc = wait_for(&client, &plan, &["succeeded", "failed"]).await;
    assert_eq!(doc["status"], "succeeded");

    let r = call(&client, "archive_copilot_plan", json!({"plan_id": plan})).await;
    assert_eq!(ok(&r)["status"], "archived");

    let r = call(&client, "delete_copilot_plan", json!({"planId": plan})).await;
    assert_eq!(ok(&r)["deleted"], true);
    let r = call(&client, "get_copilot_plan_status", json!({"planId": plan})).await;
    assert_eq!(failed(&r)["field"], "planId");
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_fail_recover_and_cancel() {
    let repo = Repo::new();
    let client = repo.mcp().await;
    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "stuck", "jobs": [
            {"producerId": "sleeper", "task": "sleeps", "work": "sleep 30", "dependencies": []}]}),
    )
    .await;
    let plan = ok(&r)["planId"].as_str().expect("planId").to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = call(&client, "get_copilot_plan_status", json!({"planId": plan})).await;
        if ok(&r)["jobs"][0]["status"] == "running" {
            break;
        }
        assert!(Instant::now() < deadline, "the job never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    let r = call(
        &client,
        "force_fail_copilot_job",
        json!({"planId": plan, "producerId": "sleeper"}),
    )
    .await;
    ok(&r);
    let doc = wait_for(&client, &plan, &["failed", "succeeded", "canceled"]).await;
    assert_eq!(doc["status"], "failed", "{doc}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the process was killed"
    );

    let r = call(&client, "recover_copilot_plan", json!({"planId": plan})).await;
    assert_eq!(ok(&r)["status"], "paused", "{}", text(&r));
    let r = call(&client, "cancel_copilot_plan", json!({"planId": plan})).await;
    assert_eq!(ok(&r)["status"], "canceled", "{}", text(&r));
    let r = call(&client, "list_copilot_plans", json!({"status": "canceled"})).await;
    assert_eq!(ok(&r)["count"], 1);
    let r = call(&client, "list_copilot_plans", json!({"status": "done"})).await;
    assert_eq!(failed(&r)["field"], "status");
    let _ = client.cancel().await;
}
