//! The server embedded in a host process (over an in-process duplex transport): the host's own
//! orchestrator serves the tools. The tools themselves are tested against the built binary in
//! `orchestrator-cli/tests/mcp_*.rs`.

mod common;
#[path = "../../orchestrator-cli/tests/mcp_client/mod.rs"]
mod mcp_client;

use common::connect;
use mcp_client::{call, ok, wait_for};
use orchestrator_mcp::TOOL_NAMES;
use orchestrator_testkit::fixtures::TempRepo;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_server_lists_the_tools_and_runs_a_plan() {
    let repo = TempRepo::new();
    let client = connect(&repo.dir).await;
    let tools = client.list_all_tools().await.expect("tools");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let mut expected: Vec<String> = TOOL_NAMES.iter().map(|s| (*s).to_owned()).collect();
    expected.sort();
    assert_eq!(names, expected);
    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "embedded", "jobs": [
            {"producerId": "one", "task": "one", "work": "echo 1 > one.txt", "dependencies": []}
        ]}),
    )
    .await;
    let plan = ok(&r)["planId"].as_str().expect("planId").to_owned();
    let done = wait_for(&client, &plan, &["succeeded", "failed"]).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let _ = client.cancel().await;
}
