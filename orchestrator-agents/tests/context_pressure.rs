//! Context pressure (SPEC §12, seed 000's `completed_split`) through the real Claude Code CLI
//! against `orchestrator-testkit`'s scripted model server: a job whose model calls report a
//! context past the threshold is resumed with the checkpoint prompt, writes the split
//! manifest with Claude Code's own `Write` tool, and the engine (on real git) runs the
//! manifest's items as sub-jobs whose commits reach the target branch. A run under the
//! threshold, and a job that may not split, are asked for nothing.
//!
//! Claude Code is found in `$AGENT_CLIS_BIN` or `<workspace>/.agent-clis/bin` (installed by
//! `scripts/install-agent-clis.sh`); when it is missing the tests say so on stderr and pass.
//! Everything is offline: the CLI only talks to the server on 127.0.0.1.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::node;
use orchestrator_agents::agent::{
    AgentWorkRunner, ClaudeCode, ContextPressure, ModelEndpoint, ProviderKind, RetryPolicy,
    CHECKPOINT_PREFIX,
};
use orchestrator_core::composite::MANIFEST_FILE;
use orchestrator_core::plan::{AgentSpec, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::repository::LogQuery;
use orchestrator_core::{
    NodeStatus, Orchestrator, OrchestratorEvent, Phase, PlanStatus, WorkRunner,
};
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::TempRepo;
use orchestrator_testkit::{ModelServer, Script, Turn};
use serde_json::json;

/// The real CLIs are heavy: one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const KEY: &str = "testkit-key";
const AGENT_TIMEOUT_MS: u64 = 90_000;
const PLAN_TIMEOUT: Duration = Duration::from_secs(240);
/// What the first turn's calls report: past 0.8 of a Claude model's 200k window, and below
/// the point where Claude Code compacts on its own (about 167k).
const FULL_CONTEXT: u64 = 165_000;

fn bin_dir() -> PathBuf {
    std::env::var_os("AGENT_CLIS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(".agent-clis")
                .join("bin")
        })
}

/// Claude Code's executable, or `None` (after saying so) when it is not installed.
fn claude() -> Option<PathBuf> {
    let program = bin_dir().join("claude");
    if program.is_file() {
        Some(program)
    } else {
        eprintln!("skipped: claude not installed (run scripts/install-agent-clis.sh)");
        None
    }
}

/// The `agent` work runner with Claude Code talking to `server`, default context pressure.
fn agents(program: &Path, server: &ModelServer) -> AgentWorkRunner {
    let host = std::env::var("PATH").unwrap_or_default();
    let claude = ClaudeCode::new()
        .program(program.display().to_string())
        .env("PATH", format!("{}:{host}", bin_dir().display()))
        .endpoint(ModelEndpoint::new(server.url(), ProviderKind::Anthropic).api_key(KEY));
    AgentWorkRunner::empty()
        .register_arc("claude", Arc::new(claude))
        .default_agent("claude")
        .retry(RetryPolicy::new(2, Duration::from_millis(500)))
        .context_pressure(ContextPressure::new())
}

fn agent_spec(instructions: &str) -> AgentSpec {
    AgentSpec {
        agent: Some("claude".into()),
        instructions: Some(instructions.into()),
        timeout: Some(AGENT_TIMEOUT_MS),
        ..AgentSpec::default()
    }
}

/// The manifest the checkpoint turn writes: two parts, and a third that needs both.
fn manifest() -> String {
    json!({"items": [
        {"name": "part-two", "task": "Write part two",
         "instructions": "Create part-two.txt containing the line `two`.", "dependsOn": []},
        {"name": "part-three", "task": "Write part three",
         "instructions": "Create part-three.txt containing the line `three`."},
        {"name": "part-four", "task": "Write part four",
         "instructions": "Create part-four.txt containing the line `four`.",
         "dependsOn": ["part-two", "part-three"]},
    ]})
    .to_string()
}

/// The model: the job's first turn writes part one while its calls report a full context;
/// the checkpoint turn writes the manifest; each item's turn writes its part. Turns are
/// chosen by the job's id in the runner's prompt (`They are job `<id>`: <task>`), not by its
/// task: Claude Code shows the recent commits (whose messages hold the tasks) to the model.
fn script() -> Script {
    let job = |id: &str| format!("job `{id}`:");
    Script::new()
        .final_text("Nothing scripted for this prompt.")
        .on_prompt(
            Turn::when(CHECKPOINT_PREFIX)
                .write_file(MANIFEST_FILE, manifest())
                .final_text("Checkpoint: part one is done; three parts remain in the manifest."),
        )
        .on_prompt(
            Turn::when(job("big"))
                .write_file("part-one.txt", "one\n")
                .input_tokens(FULL_CONTEXT)
                .final_text("Wrote part one."),
        )
        .on_prompt(
            Turn::when(job("small"))
                .write_file("small.txt", "small\n")
                .final_text("Wrote small.txt."),
        )
        .on_prompt(
            Turn::when(job("big/part-two"))
                .write_file("part-two.txt", "two\n")
                .final_text("Wrote part two."),
        )
        .on_prompt(
            Turn::when(job("big/part-three"))
                .write_file("part-three.txt", "three\n")
                .final_text("Wrote part three."),
        )
        .on_prompt(
            Turn::when(job("big/part-four"))
                .write_file("part-four.txt", "four\n")
                .final_text("Wrote part four."),
        )
}

/// How many model requests carried the checkpoint prompt.
fn checkpoint_requests(server: &ModelServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(CHECKPOINT_PREFIX))
        .count()
}

#[tokio::test]
async fn a_full_context_splits_the_job_into_sub_jobs_whose_commits_reach_the_target() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = claude() else {
        return;
    };
    let server = ModelServer::start(script()).await.expect("model server");
    let repo = TempRepo::new();
    let o = Orchestrator::builder()
        .git(Git2Operations::new())
        .runner("agent", agents(&program, &server))
        .build()
        .expect("orchestrator");
    let mut events = o.subscribe();
    let target = "feature/split";
    let plan = PlanSpec::new("context pressure")
        .target_branch(target)
        .job(JobSpec::new(
            "big",
            "Build the whole feature",
            WorkSpec::Agent(agent_spec(
                "Create part-one.txt to part-four.txt, containing `one` to `four`.",
            )),
        ));
    let id = o.run(plan, &repo.dir).await.expect("run");
    let status = tokio::time::timeout(PLAN_TIMEOUT, o.wait(&id)).await;
    let record = o.status(&id).await.expect("status");
    if !matches!(status, Ok(Ok(PlanStatus::Succeeded))) {
        let mut logs = String::new();
        for (i, job) in record.spec.jobs.iter().enumerate() {
            let n = &record.state.nodes[i];
            let log = o
                .repository()
                .read_log(&id, &n.id, LogQuery::new())
                .await
                .unwrap_or_default();
            logs.push_str(&format!(
                "==== {} ({}) ====\n{log}\n",
                job.producer_id, n.status
            ));
        }
        let requests: Vec<String> = server
            .requests()
            .iter()
            .map(|r| format!("{} {} {} -> {}", r.method, r.path, r.status, r.answer))
            .collect();
        panic!(
            "plan {status:?}\n{logs}\nrequests:\n{}",
            requests.join("\n")
        );
    }

    // The job was split: it went running -> completed_split, then succeeded.
    let mut big_went = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let OrchestratorEvent::NodeTransition { node: 0, to, .. } = event {
            big_went.push(to);
        }
    }
    assert!(
        big_went.contains(&NodeStatus::CompletedSplit),
        "big went {big_went:?}"
    );
    assert_eq!(
        big_went.last(),
        Some(&NodeStatus::Succeeded),
        "{big_went:?}"
    );
    assert!(
        checkpoint_requests(&server) > 0,
        "the checkpoint was asked for"
    );

    // The items ran as sub-jobs, with the manifest's dependencies.
    let ids: Vec<&str> = record
        .spec
        .jobs
        .iter()
        .map(|j| j.producer_id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["big", "big/part-two", "big/part-three", "big/part-four"]
    );
    let four = &record.spec.jobs[3];
    assert_eq!(four.parent.as_deref(), Some("big"));
    assert_eq!(four.dependencies, ["big/part-two", "big/part-three"]);
    for producer in ids {
        assert_eq!(
            node(&record, producer).status,
            NodeStatus::Succeeded,
            "{producer}"
        );
    }
    let log = o
        .repository()
        .read_log(
            &id,
            &node(&record, "big").id,
            LogQuery::new().phase(Phase::Work).attempt(1),
        )
        .await
        .expect("log");
    assert!(
        log.contains(&format!(
            "the agent's context reached {FULL_CONTEXT} of 200000 tokens"
        )),
        "{log}"
    );

    // Every part is on the target branch (the `git` CLI says so), the manifest is not.
    for (file, text) in [
        ("part-one.txt", "one\n"),
        ("part-two.txt", "two\n"),
        ("part-three.txt", "three\n"),
        ("part-four.txt", "four\n"),
    ] {
        assert_eq!(repo.show(target, file), text, "{file}");
    }
    let mut files = repo.files_at(target);
    files.sort();
    assert_eq!(
        files,
        [
            "README.md",
            "part-four.txt",
            "part-one.txt",
            "part-three.txt",
            "part-two.txt"
        ]
    );
    // The sub-jobs' commits are in the target's history.
    for producer in ["big/part-two", "big/part-three", "big/part-four"] {
        let commit = node(&record, producer).commit.clone().expect("a commit");
        assert!(
            repo.git_output(&["merge-base", "--is-ancestor", &commit, target])
                .status
                .success(),
            "{producer}'s commit {commit} is on {target}"
        );
    }
    assert_eq!(
        repo.git(&["ls-tree", "--name-only", "main"]).trim(),
        "README.md",
        "main is untouched"
    );
}

/// Runs job `job` once through the runner in a fresh directory with `may_split`, and
/// returns the server's checkpoint requests and whether a manifest was left.
async fn run_once(
    script: Script,
    instructions: &str,
    job: &str,
    may_split: bool,
) -> Option<(usize, bool)> {
    let program = claude()?;
    let server = ModelServer::start(script).await.expect("model server");
    let runner = agents(&program, &server);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ctx = common::ctx(dir.path());
    ctx.producer_id = job.into();
    ctx.may_split = may_split;
    let spec = WorkSpec::Agent(agent_spec(instructions));
    let out = runner.run(&spec, &ctx).await;
    let log = ctx.log.take();
    let out = out.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(out.session_id.is_some(), "{log}");
    Some((
        checkpoint_requests(&server),
        dir.path().join(MANIFEST_FILE).exists(),
    ))
}

#[tokio::test]
async fn a_context_under_the_threshold_asks_for_no_checkpoint() {
    let _one = ONE_AT_A_TIME.lock().await;
    let got = run_once(
        script(),
        "Create small.txt containing `small`.",
        "small",
        true,
    )
    .await;
    if let Some(got) = got {
        assert_eq!(got, (0, false));
    }
}

#[tokio::test]
async fn a_job_that_may_not_split_is_asked_for_no_checkpoint() {
    let _one = ONE_AT_A_TIME.lock().await;
    let got = run_once(
        script(),
        "Create part-one.txt containing `one`.",
        "big",
        false,
    )
    .await;
    if let Some(got) = got {
        assert_eq!(got, (0, false), "a full context, but the job may not split");
    }
}

#[tokio::test]
async fn a_full_context_asks_the_runner_for_a_checkpoint_when_the_job_may_split() {
    let _one = ONE_AT_A_TIME.lock().await;
    let got = run_once(
        script(),
        "Create part-one.txt containing `one`.",
        "big",
        true,
    )
    .await;
    if let Some(got) = got {
        assert!(got.1, "the checkpoint run wrote the manifest");
        assert!(got.0 > 0);
    }
}
