//! A reflect team (SPEC §13) of real Claude Code agents against the testkit's scripted model
//! server — no network, no API key: two workers write a file each, the orchestrator
//! synthesizes, an evaluator scores the first iteration 0.4 and the second 0.95, and every
//! worker's files land on `feature/team`. Each step is printed as the engine reports it.
//!
//! ```text
//! bash scripts/install-agent-clis.sh          # once: the real CLIs into .agent-clis/
//! cargo run --example team_reflect
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use orchestrator::agents::agent::{AgentWorkRunner, ClaudeCode, ModelEndpoint, ProviderKind};
use orchestrator::core::plan::{JobSpec, PlanSpec, WorkSpec};
use orchestrator::core::{NodeStatus, Orchestrator, OrchestratorEvent, PlanStatus};
use orchestrator::git::Git2Operations;
use orchestrator_testkit::fixtures::TempRepo;
use orchestrator_testkit::{ModelServer, Script, Turn};

/// The model's turns, chosen by the job each member is told it is.
fn script() -> Script {
    let job = |id: &str| Turn::when(format!("job `{id}`:"));
    let worker = |round: u32, name: &str, file: &str| {
        job(&format!("team/{round}/{name}"))
            .write_file(file, format!("{name} wrote {file}\n"))
            .final_text(format!("{name} wrote {file}."))
    };
    Script::new()
        .final_text("Nothing scripted for this prompt.")
        .on_prompt(
            job("team/1/plan")
                .final_text("@worker:alice create alice.txt\n@worker:bob create bob.txt\n"),
        )
        .on_prompt(worker(1, "alice", "alice.txt"))
        .on_prompt(worker(1, "bob", "bob.txt"))
        .on_prompt(job("team/1/synthesis").final_text("First drafts of both files exist."))
        .on_prompt(job("team/1/evaluate").final_text("Score: 0.4\nRationale: drafts only."))
        .on_prompt(
            job("team/2/plan")
                .final_text("@worker:alice create alice2.txt\n@worker:bob create bob2.txt\n"),
        )
        .on_prompt(worker(2, "alice", "alice2.txt"))
        .on_prompt(worker(2, "bob", "bob2.txt"))
        .on_prompt(job("team/2/synthesis").final_text("Both workers revised their files."))
        .on_prompt(job("team/2/evaluate").final_text("Score: 0.95\nRationale: complete."))
}

fn claude() -> Option<PathBuf> {
    let bin = std::env::var_os("AGENT_CLIS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".agent-clis/bin"));
    let program = bin.join("claude");
    program.is_file().then_some(program)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(program) = claude() else {
        eprintln!("Claude Code is not installed: run `bash scripts/install-agent-clis.sh` first");
        return Ok(());
    };
    let bin = program.parent().map(Path::to_path_buf).unwrap_or_default();
    let server = ModelServer::start(script()).await?;
    let repo = TempRepo::new();

    let claude = ClaudeCode::new()
        .program(program.display().to_string())
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .endpoint(ModelEndpoint::new(server.url(), ProviderKind::Anthropic).api_key("testkit-key"));
    let agents = AgentWorkRunner::empty()
        .register_arc("claude", Arc::new(claude))
        .default_agent("claude");
    let orchestrator = orchestrator::workflows::register(Orchestrator::builder())
        .git(Git2Operations::new())
        .runner("agent", agents)
        .build()?;

    let work: WorkSpec = serde_json::from_value(serde_json::json!({
        "type": "team",
        "prompt": "Give each worker a greeting file of its own.",
        "workers": [{"name": "alice"}, {"name": "bob"}],
        "evaluator": {"threshold": 0.9}
    }))?;
    let plan = PlanSpec::new("reflect team")
        .target_branch("feature/team")
        .job(JobSpec::new("team", "a reflect team", work));

    let mut events = Box::pin(orchestrator.events());
    let id = orchestrator.run(plan, &repo.dir).await?;
    let names = orchestrator.clone();
    let printer = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let OrchestratorEvent::NodeTransition { plan, node, to, .. } = event else {
                continue;
            };
            if !matches!(
                to,
                NodeStatus::Running
                    | NodeStatus::Succeeded
                    | NodeStatus::Failed
                    | NodeStatus::CompletedSplit
            ) {
                continue;
            }
            let name = match names.status(&plan).await {
                Ok(record) => record
                    .spec
                    .jobs
                    .get(node)
                    .map_or_else(|| "snapshot".to_owned(), |j| j.producer_id.clone()),
                Err(_) => continue,
            };
            println!("{name:<18} {to}");
        }
    });
    let status = orchestrator.wait(&id).await?;
    printer.abort();
    let record = orchestrator.status(&id).await?;
    println!("\nplan {status}");
    if let Some(output) = record.state.nodes[0].output() {
        println!("team output:\n{output}");
    }
    println!(
        "\non feature/team: {}",
        repo.files_at("feature/team").join(", ")
    );
    if status != PlanStatus::Succeeded {
        return Err("the team did not meet its goal".into());
    }
    Ok(())
}
