//! `orchestrator mcp`: the built binary serving the MCP tools on stdio, driven by rmcp's client.

mod common;
mod mcp_client;

use std::time::{Duration, Instant};

use common::Repo;
use mcp_client::call;
use rmcp::model::CallToolResult;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

fn doc(r: &CallToolResult) -> Value {
    mcp_client::structured(r).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_tools_on_stdio() {
    let repo = Repo::new();
    let command = tokio::process::Command::from(repo.command(&["mcp"]));
    let transport = TokioChildProcess::new(command).expect("spawn orchestrator mcp");
    let client = ().serve(transport).await.expect("initialize");

    let tools = client.list_all_tools().await.expect("list tools");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let mut expected: Vec<String> = orchestrator_mcp::TOOL_NAMES
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    expected.sort();
    assert_eq!(names, expected, "exactly the reference's 28 tools");

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

/// Waits until process `pid` has exited.
async fn gone(pid: Option<u32>) {
    let Some(pid) = pid else { return };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "server {pid} did not exit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_resumes_the_plans_it_was_running() {
    let repo = Repo::new();
    let gate = repo.dir.parent().expect("temp dir").join("gate");
    let serve = || {
        let transport =
            TokioChildProcess::new(tokio::process::Command::from(repo.command(&["mcp"])))
                .expect("spawn orchestrator mcp");
        let pid = transport.id();
        (transport, pid)
    };
    let (transport, pid) = serve();
    let client = ().serve(transport).await.expect("initialize");
    let r = call(
        &client,
        "create_copilot_plan",
        json!({"name": "outlives its server", "jobs": [
            {"producerId": "slow", "task": "slow",
             "work": format!("while [ ! -f '{}' ]; do sleep 0.05; done; echo slow > slow.txt", gate.display()),
             "dependencies": []},
            {"producerId": "after", "task": "after", "work": "cat slow.txt > after.txt",
             "dependencies": ["slow"]}
        ]}),
    )
    .await;
    let plan = doc(&r)["planId"].as_str().expect("planId").to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = call(
            &client,
            "get_copilot_job",
            json!({"planId": plan, "producerId": "slow"}),
        )
        .await;
        if doc(&r)["status"] == "running" {
            break;
        }
        assert!(Instant::now() < deadline, "slow never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The client goes away while `slow` runs: the server stops it and exits.
    let _ = client.cancel().await;
    gone(pid).await;
    let stored = repo.status(Some(&plan));
    assert_ne!(stored["status"], "paused", "{stored}");

    std::fs::write(&gate, "go").expect("open the gate");
    let (transport, _pid) = serve();
    let client = ().serve(transport).await.expect("initialize again");
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = loop {
        let r = call(&client, "get_copilot_plan_status", json!({"planId": plan})).await;
        let d = doc(&r);
        if ["succeeded", "failed", "canceled", "paused"]
            .contains(&d["status"].as_str().unwrap_or(""))
        {
            break d;
        }
        assert!(Instant::now() < deadline, "plan still {}", d["status"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done["status"], "succeeded", "{done}");
    let slow = done["jobs"]
        .as_array()
        .and_then(|jobs| jobs.iter().find(|j| j["producerId"] == "slow"))
        .expect("slow")
        .clone();
    assert_eq!(slow["attempts"], 2, "stopped once, then resumed: {slow}");
    let _ = client.cancel().await;
}
