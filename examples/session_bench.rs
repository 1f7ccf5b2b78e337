//! What a session turn costs beyond the agent CLI's own run (SPEC §14): the turn's records,
//! its steering inbox, the event plumbing, the checkpoint commit and ref, and the copy of the
//! CLI's state — on a repository of `--files` files (900 by default), median of `--turns`
//! turns (10), against the same CLI run alone (the anchor), interleaved in one run.
//!
//! ```text
//! cargo run --release --example session_bench -- [--files 900] [--turns 10]
//! ```
//! The CLI is a shell script that changes one file and prints a result line, so its own run
//! is one process start; each turn therefore checkpoints one changed file in a worktree of
//! `--files` files. Prints one line of `key=value`: the medians of the CLI alone and of a
//! whole turn (ms), the overhead (their difference, ms) and the ratio.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use orchestrator::agents::agent::{AgentWorkRunner, GenericAgent};
use orchestrator::agents::session::{NewSession, Sessions};
use orchestrator::git::Git2Operations;

const CLI: &str = r#"#!/bin/sh
echo "$1" > changed.txt
printf '{"session_id":"bench"}\n{"type":"result","result":"done"}\n'
"#;

fn flag(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) -> Result<(), Box<dyn std::error::Error>> {
    let status = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
        ])
        .args(args)
        .current_dir(dir)
        .status()?;
    if !status.success() {
        return Err(format!("git {args:?} failed").into());
    }
    Ok(())
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let files = flag(&args, "--files", 900);
    let turns = flag(&args, "--turns", 10);

    let tmp = tempfile::tempdir()?;
    let repo = tmp.path().join("repo");
    for i in 0..files {
        let dir = repo.join(format!("src/m{}", i % 30));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("// file {i}\n{}\n", "x".repeat(400)),
        )?;
    }
    git(&repo, &["init", "-q", "-b", "main"])?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "files"])?;
    let program = tmp.path().join("bench-cli");
    std::fs::write(&program, CLI)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))?;
    }

    let agent = GenericAgent::new(program.display().to_string()).arg("{prompt}");
    let sessions = Sessions::builder(&repo)
        .git(Git2Operations::new())
        .agents(
            AgentWorkRunner::empty()
                .register("bench", agent)
                .default_agent("bench"),
        )
        .build()?;
    let session = sessions.create(NewSession::new()).await?;

    let (mut alone, mut turn) = (Vec::new(), Vec::new());
    // One warm-up of each, then interleaved samples.
    for i in 0..=turns {
        let started = Instant::now();
        let status = tokio::process::Command::new(&program)
            .arg(format!("alone {i}"))
            .current_dir(&session.dir)
            .stdout(std::process::Stdio::piped())
            .output()
            .await?;
        let took = started.elapsed();
        if !status.status.success() {
            return Err("the CLI failed".into());
        }
        let started = Instant::now();
        sessions.send(&session.id, &format!("turn {i}")).await?;
        let turn_took = started.elapsed();
        if i > 0 {
            alone.push(took);
            turn.push(turn_took);
        }
    }
    let (a, t) = (median(alone), median(turn));
    println!(
        "files={files} turns={turns} cli_alone_ms={a:.2} turn_ms={t:.2} overhead_ms={:.2} ratio={:.2}",
        t - a,
        if a > 0.0 { t / a } else { 0.0 }
    );
    Ok(())
}
