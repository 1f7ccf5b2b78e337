//! The agents' own tools (SPEC §15) with the real Claude Code and Copilot CLI through the
//! engine: the scripted model calls `wait` on our MCP server, the job
//! parks in `waiting(timer)` holding no process, and at the deadline the CLI's session resumes
//! with the timer's message and finishes the job on the target branch; `list_available_models`
//! answers from the repository's `.model_providers.json`; a parent spawns a sub-agent (a bad
//! contract and an unknown agent id are refused as tool errors, the turn going on), waits for
//! it and resumes with its output and its file.
//!
//! A test whose CLI is missing says so on stderr and passes. (Codex 0.171 connects to the
//! server but does not offer its tools to the model as functions, and Gemini CLI 0.61 does not
//! list them: not covered yet.)
#![cfg(unix)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::clis::runner_for;
use common::installed;
use orchestrator_agents::agent::AgentWorkRunner;
use orchestrator_agents::tools::ToolServer;
use orchestrator_core::events::OrchestratorEvent;
use orchestrator_core::plan::{AgentSpec, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::state::WaitingFor;
use orchestrator_core::{Orchestrator, PlanStatus};
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::{git, TempRepo};
use orchestrator_testkit::{ModelServer, Script, Turn};
use serde_json::json;

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Our tool `name` as each CLI names the MCP tools it offers the model.
fn our_tool(cli: &str, name: &str) -> String {
    match cli {
        "copilot" => format!("orchestrator-{name}"),
        _ => format!("mcp__orchestrator__{name}"),
    }
}

/// An engine on git2 running `cli` (at `program`, pointed at `server`) with our tool server.
fn engine(cli: &str, program: &std::path::Path, server: &ModelServer) -> Orchestrator {
    let tools = ToolServer::start().expect("tool server");
    let agents = AgentWorkRunner::empty()
        .register_arc(cli, runner_for(cli, program, server))
        .default_agent(cli);
    Orchestrator::builder()
        .git(Git2Operations::new())
        .runner("agent", agents)
        .agent_tools(Arc::new(tools))
        .build()
        .expect("orchestrator")
}

/// A providers file whose one provider needs no key.
const PROVIDERS: &str = r#"{"providers": [{"id": "local", "type": "ollama",
    "baseUrl": "http://localhost:11434", "models": ["qwen3-coder"]}]}"#;

async fn a_long_wait_parks_and_resumes(cli: &str) {
    let Some(program) = installed(cli) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let script = Script::new()
        .on_prompt(
            Turn::when("TOOLS-WAIT")
                .tool(our_tool(cli, "list_available_models"), json!({}))
                .tool(
                    our_tool(cli, "wait"),
                    json!({"seconds": 3, "reason": "CI is running"}),
                )
                .final_text("Waiting for CI."),
        )
        .on_prompt(
            Turn::when("timer you set")
                .write_file("after-wait.txt", "CI passed\n")
                .final_text("Wrote after-wait.txt."),
        );
    let server = ModelServer::start(script).await.expect("model server");
    let o = engine(cli, &program, &server);
    let repo = TempRepo::with_files(&[("README.md", "hi\n"), (".model_providers.json", PROVIDERS)]);
    let spec = AgentSpec {
        agent: Some(cli.into()),
        instructions: Some("TOOLS-WAIT: wait for CI, then write after-wait.txt".into()),
        timeout: Some(120_000),
        ..AgentSpec::default()
    };
    let mut plan = PlanSpec::new("tools")
        .target_branch("agents/tools")
        .job(JobSpec::new(
            "agent",
            "TOOLS-WAIT: wait for CI",
            WorkSpec::Agent(Box::new(spec)),
        ));
    plan.wait_threshold = Some(1);
    let mut events = o.subscribe();
    let id = o.create_plan(plan, &repo.dir).await.expect("create");
    o.start(&id).await.expect("start");
    let status = tokio::time::timeout(Duration::from_secs(240), o.wait(&id))
        .await
        .expect("in time")
        .expect("wait");
    let mut waited = false;
    while let Ok(event) = events.try_recv() {
        if let OrchestratorEvent::AttentionNeeded { waiting, .. } = event {
            waited |= waiting.waiting_for == WaitingFor::Timer;
        }
    }
    let record = o.status(&id).await.expect("status");
    if status != PlanStatus::Succeeded {
        let log = o
            .repository()
            .read_log(
                &id,
                &record.state.nodes[0].id,
                orchestrator_core::repository::LogQuery::new(),
            )
            .await
            .unwrap_or_default();
        panic!("{cli}: {status}\n{log}");
    }
    assert!(waited, "{cli}: the job waited on its timer");
    assert!(
        server.requests().iter().any(|r| r.to_json()["body"]
            .to_string()
            .contains("timer you set with wait(3 s) fired")),
        "{cli}: the resumed conversation has the timer's message"
    );
    assert!(
        server.requests().iter().any(|r| r.to_json()["body"]
            .to_string()
            .contains("local:qwen3-coder")),
        "{cli}: list_available_models answered with the usable provider's model"
    );
    assert_eq!(
        git(&repo.dir, &["show", "agents/tools:after-wait.txt"]).trim(),
        "CI passed",
        "{cli}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_waits_through_our_tool() {
    a_long_wait_parks_and_resumes("claude").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_waits_through_our_tool() {
    a_long_wait_parks_and_resumes("copilot").await;
}

/// A parent spawns a child through our tools (a malformed contract is refused first, and the
/// turn goes on), the child's call naming an unknown sub-agent is refused, the parent waits
/// for the child and resumes with its output and its file; all of it lands on the target.
async fn a_sub_agent_works_for_its_parent(cli: &str) {
    let Some(program) = installed(cli) else {
        return;
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let script = Script::new()
        .on_prompt(
            Turn::when("sub-agents you waited for")
                .write_file("lead.txt", "child reported\n")
                .final_text("The child is done."),
        )
        .on_prompt(
            Turn::when("`agent-1` is started")
                .tool(our_tool(cli, "wait_for_agents"), json!({}))
                .final_text("Waiting."),
        )
        .on_prompt(
            Turn::when("SUB-CHILD")
                .tool(
                    our_tool(cli, "message_agent"),
                    json!({"agent_id": "agent-9", "message": "hi"}),
                )
                .write_file("child.txt", "from the child\n")
                .final_text("Child wrote child.txt."),
        )
        // Last: a child sees the recent commits, the parent's checkpoint among them.
        .on_prompt(
            Turn::when("SUB-LEAD")
                .tool(
                    our_tool(cli, "spawn_agent"),
                    json!({"task": "SUB-CHILD: write child.txt", "contract": {"facts": []}}),
                )
                .tool(
                    our_tool(cli, "spawn_agent"),
                    json!({"task": "SUB-CHILD: write child.txt"}),
                )
                .final_text("Spawned."),
        );
    let server = ModelServer::start(script).await.expect("model server");
    let o = engine(cli, &program, &server);
    let repo = TempRepo::new();
    let spec = AgentSpec {
        agent: Some(cli.into()),
        instructions: Some("SUB-LEAD: have a sub-agent write child.txt".into()),
        timeout: Some(120_000),
        ..AgentSpec::default()
    };
    let plan = PlanSpec::new("sub-agents")
        .target_branch("agents/sub")
        .job(JobSpec::new(
            "lead",
            "SUB-LEAD: delegate",
            WorkSpec::Agent(Box::new(spec)),
        ));
    let id = o.create_plan(plan, &repo.dir).await.expect("create");
    o.start(&id).await.expect("start");
    let status = tokio::time::timeout(Duration::from_secs(240), o.wait(&id))
        .await
        .expect("in time")
        .expect("wait");
    assert_eq!(status, PlanStatus::Succeeded, "{cli}");
    let bodies: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.to_json()["body"].to_string())
        .collect();
    let saw = |text: &str| bodies.iter().any(|b| b.contains(text));
    assert!(
        saw("error: contract: unknown field `facts`"),
        "{cli}: bad contract refused"
    );
    assert!(
        saw("error: agent_id: `agent-9` is unknown"),
        "{cli}: unknown agent refused"
    );
    assert!(
        saw("Child wrote child.txt."),
        "{cli}: the parent got the child's output"
    );
    let record = o.status(&id).await.expect("status");
    let ids: Vec<&str> = record
        .spec
        .jobs
        .iter()
        .map(|j| j.producer_id.as_str())
        .collect();
    assert_eq!(ids, ["lead", "lead/agent-1"], "{cli}");
    let files = git(&repo.dir, &["ls-tree", "--name-only", "agents/sub"]);
    assert!(
        files.lines().any(|f| f == "child.txt") && files.lines().any(|f| f == "lead.txt"),
        "{cli}: {files}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_runs_a_sub_agent_through_our_tools() {
    a_sub_agent_works_for_its_parent("claude").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_runs_a_sub_agent_through_our_tools() {
    a_sub_agent_works_for_its_parent("copilot").await;
}
