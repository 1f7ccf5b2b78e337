//! `orchestrator mcp` driven by a real third-party client: the official Python MCP SDK
//! (PyPI `mcp`) running `tests/python/mcp_client.py`.
//!
//! The Python is `ORCHESTRATOR_TEST_PYTHON` if set (it must then have `mcp`), else
//! `<workspace>/.venv-ci/bin/python` (made by `scripts/install-test-deps.sh`), else `python3`.
//! Without a Python that can import `mcp` the test is skipped with a note on stderr.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Repo, BIN};
use orchestrator_testkit::fixtures::wait_child;
use serde_json::Value;

/// Whether `python` runs and can import `mcp`; returns the package's version.
fn mcp_version(python: &Path) -> Option<String> {
    let out = Command::new(python)
        .args([
            "-c",
            "import mcp, importlib.metadata as m; print(m.version('mcp'))",
        ])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The Python to run the client with, and its `mcp` version.
fn python_with_mcp() -> Option<(PathBuf, String)> {
    if let Some(explicit) = std::env::var_os("ORCHESTRATOR_TEST_PYTHON") {
        let python = PathBuf::from(explicit);
        let version = mcp_version(&python).unwrap_or_else(|| {
            panic!(
                "ORCHESTRATOR_TEST_PYTHON={} cannot import mcp (pip install mcp)",
                python.display()
            )
        });
        return Some((python, version));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let venv = if cfg!(windows) {
        workspace.join(".venv-ci/Scripts/python.exe")
    } else {
        workspace.join(".venv-ci/bin/python")
    };
    [venv, PathBuf::from("python3")]
        .into_iter()
        .find_map(|python| mcp_version(&python).map(|v| (python, v)))
}

#[test]
fn python_sdk_client_drives_the_server() {
    let Some((python, version)) = python_with_mcp() else {
        eprintln!("skipped: python package mcp not installed (pip install mcp)");
        return;
    };
    let repo = Repo::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_client.py");

    let mut cmd = Command::new(&python);
    cmd.arg(&script).arg(BIN).arg(&repo.dir);
    // The same hermetic environment (HOME, git identity, no GIT_DIR) as the orchestrator
    // commands of the other tests; the client passes it on to the server it spawns.
    for (key, value) in repo.command(&[]).get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    cmd.env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());

    let start = Instant::now();
    let child = cmd.spawn().expect("spawn python");
    let run = wait_child(child, Duration::from_secs(120));
    let elapsed = start.elapsed();
    assert_eq!(
        run.code,
        0,
        "{} (mcp {version}) failed\nstdout:\n{}\nstderr:\n{}",
        python.display(),
        run.stdout,
        run.stderr
    );
    eprintln!(
        "python mcp {version} client passed in {elapsed:.1?}:\n{}",
        run.stdout.trim_end()
    );

    // The client's last line names the plans and the files their jobs wrote; check them in git.
    let summary: Value = run
        .stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON summary line in:\n{}", run.stdout));
    let plans = summary["plans"].as_array().expect("plans");
    assert_eq!(plans.len(), 2, "{summary:#}");
    for plan in plans {
        let id = plan["planId"].as_str().expect("planId");
        assert_eq!(repo.status(Some(id))["status"], "succeeded", "{id}");
        let target = plan["targetBranch"].as_str().expect("targetBranch");
        for (file, text) in plan["files"].as_object().expect("files") {
            assert_eq!(
                repo.show(target, file),
                text.as_str().expect("text"),
                "{file} on {target}"
            );
        }
    }
}
