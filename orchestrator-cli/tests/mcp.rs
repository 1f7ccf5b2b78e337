//! `orchestrator mcp`: the built binary serving the MCP tools on stdio, driven by rmcp's client.

mod common;

use std::time::{Duration, Instant};

use common::Repo;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .expect("the tool answers")
}

fn doc(r: &CallToolResult) -> Value {
    r.structured_content.clone().expect("structured content")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_tools_on_stdio() {
    let repo = Repo::new();
    let command = tokio::process::Command::from(repo.command(&["mcp"]));
    let transport = TokioChildProcess::new(command).expect("spawn orchestrator mcp");
    let client = ().serve(transport).await.expect("initialize");

    let tools = client.list_all_tools().await.expect("list tools");
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    for name in [
        "create_copilot_plan",
        "get_copilot_plan_status",
        "retry_copilot_job",
        "delete_copilot_plan",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }

    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "over stdio", "jobs": [
            {"producerId": "one", "task": "one", "work": "echo 1 > one.txt", "dependencies": []}
        ]}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{:?}", r.content);
    let plan = doc(&r)["planId"].as_str().expect("planId").to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let r = call(&client, "get_copilot_plan_status", json!({"planId": plan})).await;
        let status = doc(&r)["status"].as_str().unwrap_or_default().to_owned();
        if ["succeeded", "failed", "canceled"].contains(&status.as_str()) {
            break status;
        }
        assert!(Instant::now() < deadline, "plan still {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, "succeeded");

    let r = call(&client, "get_copilot_job", json!({"planId": plan})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(doc(&r)["field"], "jobId");
    let _ = client.cancel().await;

    // The plan was stored where the CLI reads it.
    let stored = repo.status(Some(&plan));
    assert_eq!(stored["status"], "succeeded");
}
