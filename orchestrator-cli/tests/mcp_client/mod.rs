//! Calls through an rmcp client that check the answer's shape: every result carries
//! structured content and a readable text. Shared by the tests of the built `orchestrator mcp`
//! and the embedded server's test in orchestrator-mcp.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::RoleClient;
use serde_json::{json, Value};

pub type Client = RunningService<RoleClient, ()>;

pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .expect("the tool call gets an answer")
}

pub fn structured(r: &CallToolResult) -> &Value {
    r.structured_content
        .as_ref()
        .expect("every result carries structured content")
}

pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn ok(r: &CallToolResult) -> &Value {
    assert_ne!(r.is_error, Some(true), "tool failed: {}", text(r));
    assert!(!text(r).is_empty(), "a readable text comes with the result");
    structured(r)
}

pub fn failed(r: &CallToolResult) -> &Value {
    assert_eq!(r.is_error, Some(true), "expected an error: {}", text(r));
    structured(r)
}

/// Polls the plan's status until it is one of `wanted`.
pub async fn wait_for(client: &Client, plan: &str, wanted: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = call(client, "get_copilot_plan_status", json!({"planId": plan})).await;
        let doc = ok(&r).clone();
        let status = doc["status"].as_str().unwrap_or_default().to_owned();
        if wanted.contains(&status.as_str()) {
            return doc;
        }
        assert!(
            Instant::now() < deadline,
            "plan still {status} after 60s: {doc}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
