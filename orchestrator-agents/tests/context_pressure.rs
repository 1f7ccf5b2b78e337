//! Context pressure (SPEC §12, seed 000's `completed_split`) through the real Claude Code CLI
//! against `orchestrator-testkit`'s scripted model server: a job whose model calls report a
//! context past the threshold is resumed with the checkpoint prompt, writes the split
//! manifest with Claude Code's own `Write` tool, and the engine (on real git) runs the
//! manifest's items as sub-jobs whose commits reach the target branch. A run under the
//! threshold, and a job that may not split, are asked for nothing. Then each of the four CLIs
//! (Claude Code, Codex, Copilot CLI, Gemini CLI): its per-call usage crosses a threshold set
//! through `ORCHESTRATOR_CONTEXT_THRESHOLD`, and its resumed session writes the manifest.
//!
//! The CLIs are found in `$AGENT_CLIS_BIN` or `<workspace>/.agent-clis/bin` (installed by
//! `scripts/install-agent-clis.sh`); a test whose CLI is missing says so on stderr and passes.
//! Everything is offline: the CLIs only talk to the server on 127.0.0.1.
#![cfg(unix)]

mod common;

use common::clis::runner_for;

use std::path::Path;
use std::time::Duration;

use common::{installed, node};
use orchestrator_agents::agent::{
    AgentWorkRunner, ContextPressure, RetryPolicy, CHECKPOINT_PREFIX, THRESHOLD_VAR,
};
use orchestrator_core::composite::{SplitManifest, MANIFEST_FILE};
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

const AGENT_TIMEOUT_MS: u64 = 90_000;
const PLAN_TIMEOUT: Duration = Duration::from_secs(240);
/// What the first turn's calls report: past 0.8 of a Claude model's 200k window, and below
/// the point where Claude Code compacts on its own (about 167k).
const FULL_CONTEXT: u64 = 165_000;

/// The `agent` work runner with `cli` (at `program`) talking to `server`, default context
/// pressure.
fn agents(cli: &str, program: &Path, server: &ModelServer) -> AgentWorkRunner {
    let runner = runner_for(cli, program, server);
    AgentWorkRunner::empty()
        .register_arc(cli, runner)
        .default_agent(cli)
        .retry(RetryPolicy::new(2, Duration::from_millis(500)))
        .context_pressure(ContextPressure::new())
}

/// Claude Code on Claude Sonnet 4.5, whose window Claude Code reports as 200k (its default
/// model's is 1M).
fn agent_spec(instructions: &str) -> AgentSpec {
    AgentSpec {
        agent: Some("claude".into()),
        model: Some("claude-sonnet-4-5".into()),
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
    let Some(program) = installed("claude") else {
        return;
    };
    let server = ModelServer::start(script()).await.expect("model server");
    let repo = TempRepo::new();
    let o = Orchestrator::builder()
        .git(Git2Operations::new())
        .runner("agent", agents("claude", &program, &server))
        .build()
        .expect("orchestrator");
    let mut events = o.subscribe();
    let target = "feature/split";
    let plan = PlanSpec::new("context pressure")
        .target_branch(target)
        .job(JobSpec::new(
            "big",
            "Build the whole feature",
            WorkSpec::Agent(Box::new(agent_spec(
                "Create part-one.txt to part-four.txt, containing `one` to `four`.",
            ))),
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
    assert_eq!(four.extra.parent.as_deref(), Some("big"));
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
        let commit = node(&record, producer)
            .extra
            .commit
            .clone()
            .expect("a commit");
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
    let program = installed("claude")?;
    let server = ModelServer::start(script).await.expect("model server");
    let runner = agents("claude", &program, &server);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ctx = common::ctx(dir.path());
    ctx.producer_id = job.into();
    ctx.may_split = may_split;
    let spec = WorkSpec::Agent(Box::new(agent_spec(instructions)));
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

/// `cli`'s run reports 100k prompt tokens a call, past a threshold of 0.08 set through
/// [`THRESHOLD_VAR`] in the spec's env (below every CLI's own compaction): the runner resumes
/// its session with the checkpoint prompt, and the CLI writes the manifest with its own tool.
async fn asked_for_a_checkpoint(cli: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let server = ModelServer::start(
        Script::new()
            .write_file("part-one.txt", "one\n")
            .input_tokens(100_000)
            .final_text("Wrote part one.")
            .on_prompt(
                Turn::when(CHECKPOINT_PREFIX)
                    .write_file(MANIFEST_FILE, manifest())
                    .final_text("Checkpoint written."),
            ),
    )
    .await
    .expect("model server");
    let runner = agents(cli, &program, &server);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ctx = common::ctx(dir.path());
    ctx.may_split = true;
    let mut spec = AgentSpec {
        agent: Some(cli.into()),
        instructions: Some("Create part-one.txt to part-four.txt.".into()),
        timeout: Some(AGENT_TIMEOUT_MS),
        ..AgentSpec::default()
    };
    spec.env.insert(THRESHOLD_VAR.into(), "0.08".into());
    let out = runner.run(&WorkSpec::Agent(Box::new(spec)), &ctx).await;
    let log = ctx.log.take();
    let out = out.unwrap_or_else(|e| panic!("{cli}: {e}\n{log}"));
    assert!(
        log.contains("the agent's context reached 100000 of"),
        "{cli}: {log}"
    );
    assert!(log.contains("(threshold 8%)"), "{cli}: {log}");
    assert!(checkpoint_requests(&server) > 0, "{cli}");
    let manifest = std::fs::read_to_string(dir.path().join(MANIFEST_FILE))
        .unwrap_or_else(|e| panic!("{cli}: no manifest ({e})\n{log}"));
    let items = SplitManifest::parse(&manifest).map(|m| m.items.len());
    assert_eq!(items, Ok(3), "{cli}: {manifest}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("part-one.txt"))
            .ok()
            .as_deref(),
        Some("one\n"),
        "{cli}: the work before the checkpoint stays in the files"
    );
    assert_eq!(out.output.as_deref(), Some("Checkpoint written."), "{cli}");
    assert!(out.session_id.is_some(), "{cli}");
}

#[tokio::test]
async fn claude_code_is_asked_for_a_checkpoint() {
    asked_for_a_checkpoint("claude").await;
}

#[tokio::test]
async fn codex_is_asked_for_a_checkpoint() {
    asked_for_a_checkpoint("codex").await;
}

#[tokio::test]
async fn copilot_is_asked_for_a_checkpoint() {
    asked_for_a_checkpoint("copilot").await;
}

#[tokio::test]
async fn gemini_is_asked_for_a_checkpoint() {
    asked_for_a_checkpoint("gemini").await;
}
