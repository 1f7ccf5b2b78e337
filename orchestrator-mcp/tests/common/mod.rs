//! Helpers of the MCP tool tests: a temporary git repository, an in-process server with a
//! connected rmcp client, and calls that check the answer's shape.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use orchestrator_agents::{ProcessRunner, ShellRunner};
use orchestrator_core::Orchestrator;
use orchestrator_git::Git2Operations;
use orchestrator_mcp::OrchestratorMcp;
use orchestrator_storage::FsPlanRepository;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

/// A temporary repository on `main` with one commit, made with the `git` CLI.
pub struct Repo {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
}

impl Repo {
    pub fn new() -> Repo {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("repo");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::create_dir_all(&home).expect("mkdir");
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(&dir)
                .env("HOME", &home)
                .env("XDG_CONFIG_HOME", home.join(".config"))
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_AUTHOR_NAME", "Test User")
                .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
                .env("GIT_COMMITTER_NAME", "Test User")
                .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
                .env_remove("GIT_DIR")
                .env_remove("GIT_WORK_TREE")
                .output()
                .expect("git runs");
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&["init", "-q", "-b", "main"]);
        // The engine commits through libgit2, which reads the identity from the repository.
        git(&["config", "user.name", "Test User"]);
        git(&["config", "user.email", "test@example.invalid"]);
        std::fs::write(dir.join("README.md"), "hello\n").expect("write");
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "initial"]);
        Repo { _tmp: tmp, dir }
    }
}

pub type Client = RunningService<RoleClient, ()>;

/// A server on `repo` in this process and a client connected to it.
pub async fn connect(repo: &Path) -> Client {
    let orchestrator = Orchestrator::builder()
        .repository(FsPlanRepository::new(repo.join(".orchestrator")))
        .git(Git2Operations::new())
        .runner("shell", ShellRunner::new())
        .runner("process", ProcessRunner::new())
        .build()
        .expect("orchestrator");
    let server = OrchestratorMcp::new(orchestrator, repo);
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("client connects")
}

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
