//! Helpers of the embedded-server test: an in-process server with a connected rmcp client.
//! The temporary repository is the shared `orchestrator_testkit::fixtures::TempRepo`.
#![allow(dead_code)]

use std::path::Path;

use orchestrator_agents::{ProcessRunner, ShellRunner};
use orchestrator_core::Orchestrator;
use orchestrator_git::Git2Operations;
use orchestrator_mcp::OrchestratorMcp;
use orchestrator_storage::FsPlanRepository;
use rmcp::ServiceExt;

pub use crate::mcp_client::Client;

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
