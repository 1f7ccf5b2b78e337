//! Helpers of the embedded-server test: a temporary git repository and an in-process server
//! with a connected rmcp client.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use orchestrator_agents::{ProcessRunner, ShellRunner};
use orchestrator_core::Orchestrator;
use orchestrator_git::Git2Operations;
use orchestrator_mcp::OrchestratorMcp;
use orchestrator_storage::FsPlanRepository;
use rmcp::ServiceExt;

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
