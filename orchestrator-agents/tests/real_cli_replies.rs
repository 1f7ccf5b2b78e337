//! The final reply of the real agent CLIs — Copilot CLI, Claude Code, Codex, Gemini CLI — as
//! their parsers read it: each CLI is run by the `agent` work runner against
//! `orchestrator-testkit`'s scripted model server, every output line it printed is captured
//! from the phase log's events (stream and text, exactly as the runner's parser saw them) and
//! fed to the CLI's parser again; the [`Transcript::reply`] must be the script's final text,
//! and so must the job's output the work runner returns (`WorkOutput.output`, SPEC §12). With
//! the results of the jobs it depends on (`WorkContext.inputs`), the instructions the runner
//! writes end with their section.
//!
//! The CLIs are found in `$AGENT_CLIS_BIN` or `<workspace>/.agent-clis/bin` (installed by
//! `scripts/install-agent-clis.sh`); a test whose CLI is missing says so on stderr and passes.
//! Everything is offline: the CLIs only talk to the server on 127.0.0.1.
#![cfg(unix)]

mod common;

use common::clis::runner_for;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orchestrator_agents::agent::{AgentRunner, AgentWorkRunner, RetryPolicy, Transcript};
use orchestrator_core::events::EventBus;
use orchestrator_core::inputs::{Inputs, JobInput, SECTION_HEADING};
use orchestrator_core::plan::{AgentSpec, WorkSpec};
use orchestrator_core::runner::{LogSink, LogStream};
use orchestrator_core::{OrchestratorEvent, Phase, PlanId, WorkContext, WorkRunner};
use orchestrator_testkit::{ModelServer, Script};

use common::installed;

/// The real CLIs are heavy (Node.js, a few hundred MB of memory each): one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Longest a run may take.
const AGENT_TIMEOUT_MS: u64 = 90_000;

/// What one real run printed, line by line with its stream, and how it ended.
struct Run {
    /// The directory it ran in (removed when the run is dropped).
    dir: tempfile::TempDir,
    /// Its stdout and stderr lines, redacted as the runner's parser saw them.
    lines: Vec<(LogStream, String)>,
    /// Whether the work runner reported success.
    ok: bool,
    /// The job's output it returned (`WorkOutput.output`), when it succeeded.
    output: Option<String>,
    /// The phase log, for failure messages.
    log: String,
}

/// Runs `cli` once in a fresh directory through the `agent` work runner (no retries).
async fn run_once(cli: &str, runner: Arc<dyn AgentRunner>) -> Run {
    run_once_with(cli, runner, None).await
}

/// [`run_once`], the job handed `inputs` (the results of the jobs it depends on).
async fn run_once_with(
    cli: &str,
    runner: Arc<dyn AgentRunner>,
    inputs: Option<Arc<Inputs>>,
) -> Run {
    let agents = AgentWorkRunner::empty()
        .register_arc(cli, runner)
        .default_agent(cli)
        .retry(RetryPolicy::new(1, Duration::from_millis(100)));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let bus = EventBus::with_callbacks(
        16,
        vec![Arc::new({
            let lines = lines.clone();
            move |event: &OrchestratorEvent| {
                if let OrchestratorEvent::Log { stream, line, .. } = event {
                    if matches!(stream, LogStream::Stdout | LogStream::Stderr) {
                        let mut lines = lines.lock().unwrap_or_else(|e| e.into_inner());
                        lines.push((*stream, line.clone()));
                    }
                }
            }
        })],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ctx = WorkContext::detached(dir.path());
    ctx.task = "Create the notes".into();
    ctx.log = LogSink::new(PlanId::from("replies"), 0, Phase::Work, 1, bus);
    ctx.inputs = inputs;
    let spec = WorkSpec::Agent(Box::new(AgentSpec {
        agent: Some(cli.into()),
        instructions: Some("Create notes.txt containing the line `hello`.".into()),
        timeout: Some(AGENT_TIMEOUT_MS),
        ..AgentSpec::default()
    }));
    let result = agents.run(&spec, &ctx).await;
    let log = ctx.log.take();
    let lines = std::mem::take(&mut *lines.lock().unwrap_or_else(|e| e.into_inner()));
    Run {
        dir,
        lines,
        ok: result.is_ok(),
        output: result.ok().and_then(|o| o.output),
        log,
    }
}

/// The transcript `runner`'s parser reads from `run`'s lines.
fn parse(runner: &dyn AgentRunner, run: &Run) -> Transcript {
    let mut t = Transcript::default();
    for (stream, line) in &run.lines {
        runner.parse_line(*stream, line, &mut t);
    }
    t
}

/// The final text the scripted model answers with once the file is written: two paragraphs
/// and a code span, so a reply cut at a line or re-joined wrongly shows.
const FINAL_TEXT: &str = "Created notes.txt.\n\nIt holds one line: `hello`.";

/// `cli` writes a file with its own tool and answers [`FINAL_TEXT`]: its parser's reply is
/// that text, whole.
async fn replies_with_the_final_text(cli: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let server = ModelServer::start(
        Script::new()
            .write_file("notes.txt", "hello\n")
            .final_text(FINAL_TEXT),
    )
    .await
    .expect("model server");
    let runner = runner_for(cli, &program, &server);
    let run = run_once(cli, runner.clone()).await;
    assert!(run.ok, "{cli}: the run failed\n{}", run.log);
    assert_eq!(
        std::fs::read_to_string(run.dir.path().join("notes.txt")).unwrap_or_default(),
        "hello\n",
        "{cli} wrote the file with its tool\n{}",
        run.log
    );
    let t = parse(runner.as_ref(), &run);
    assert!(t.finished, "{cli}: no final result\n{}", run.log);
    assert_eq!(t.reply.as_deref(), Some(FINAL_TEXT), "{cli}\n{}", run.log);
    assert_eq!(
        run.output.as_deref(),
        Some(FINAL_TEXT),
        "{cli}: the job's output is the final reply\n{}",
        run.log
    );
    eprintln!("{cli}: replied {:?}", t.reply.unwrap_or_default());
}

/// Every model call of `cli` fails with HTTP 400: the run fails and the error it reports is
/// not taken for a reply.
async fn a_failed_run_has_no_reply(cli: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let server = ModelServer::start(Script::new().fail_with_status(400))
        .await
        .expect("model server");
    let runner = runner_for(cli, &program, &server);
    let run = run_once(cli, runner.clone()).await;
    assert!(!run.ok, "{cli}: the run should fail\n{}", run.log);
    assert_eq!(run.output, None, "{cli}");
    let t = parse(runner.as_ref(), &run);
    assert_eq!(t.reply, None, "{cli}\n{}", run.log);
    assert!(
        t.said().next().is_some(),
        "{cli} reported an error\n{}",
        run.log
    );
}

/// The `instructions.md` files the runner wrote under `dir`, with their text.
fn instructions_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let base = dir.join(".orchestrator").join("agent");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&base).into_iter().flatten().flatten() {
        let file = entry.path().join("instructions.md");
        if let Ok(text) = std::fs::read_to_string(&file) {
            files.push((file, text));
        }
    }
    files
}

/// Claude Code run with the results of a job it depends on: the instructions the runner wrote
/// are the job's own followed by their section, the prompt the model got points at that
/// file, and the run still replies with the final text.
#[tokio::test]
async fn claude_code_instructions_carry_the_inputs_section() {
    let cli = "claude";
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let server = ModelServer::start(
        Script::new()
            .write_file("notes.txt", "hello\n")
            .final_text(FINAL_TEXT),
    )
    .await
    .expect("model server");
    let runner = runner_for(cli, &program, &server);
    let inputs_dir = tempfile::tempdir().expect("tempdir");
    let inputs_file = inputs_dir.path().join("node.json");
    let inputs = Inputs {
        jobs: vec![JobInput {
            producer_id: "count".into(),
            output: Some("42 files".into()),
            commit: Some("abc123".into()),
        }],
        file: Some(inputs_file.clone()),
    };
    let run = run_once_with(cli, runner, Some(Arc::new(inputs))).await;
    assert!(run.ok, "{cli}: the run failed\n{}", run.log);
    assert_eq!(
        run.output.as_deref(),
        Some(FINAL_TEXT),
        "{cli}\n{}",
        run.log
    );

    let files = instructions_files(run.dir.path());
    assert_eq!(files.len(), 1, "one instructions file: {files:?}");
    let (file, text) = &files[0];
    assert!(
        text.starts_with("Create notes.txt containing the line `hello`."),
        "the job's own instructions come first:\n{text}"
    );
    let heading = text
        .find(SECTION_HEADING)
        .unwrap_or_else(|| panic!("no inputs section:\n{text}"));
    assert!(
        text.contains(&format!("{SECTION_HEADING}\n")),
        "heading line:\n{text}"
    );
    let section = &text[heading..];
    assert!(
        section.contains("### `count` (commit abc123)"),
        "the dependency and its commit:\n{text}"
    );
    assert!(section.contains("42 files"), "its output:\n{text}");
    assert!(
        section.contains(&inputs_file.display().to_string()),
        "the inputs file is named:\n{text}"
    );

    // The model was asked to read that file.
    let file = file.display().to_string();
    let asked = server.requests().iter().any(|r| {
        !r.answer.is_empty()
            && serde_json::to_string(&r.body).is_ok_and(|body| body.contains(&file))
    });
    assert!(
        asked,
        "no model request mentions {file}: {:?}",
        server
            .requests()
            .iter()
            .map(|r| format!("{} {} -> {}", r.method, r.path, r.answer))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn claude_code_replies_with_the_final_text() {
    replies_with_the_final_text("claude").await;
}

#[tokio::test]
async fn codex_replies_with_the_final_text() {
    replies_with_the_final_text("codex").await;
}

#[tokio::test]
async fn copilot_replies_with_the_final_text() {
    replies_with_the_final_text("copilot").await;
}

#[tokio::test]
async fn gemini_replies_with_the_final_text() {
    replies_with_the_final_text("gemini").await;
}

#[tokio::test]
async fn claude_code_failed_run_has_no_reply() {
    a_failed_run_has_no_reply("claude").await;
}

#[tokio::test]
async fn codex_failed_run_has_no_reply() {
    a_failed_run_has_no_reply("codex").await;
}

#[tokio::test]
async fn copilot_failed_run_has_no_reply() {
    a_failed_run_has_no_reply("copilot").await;
}

#[tokio::test]
async fn gemini_failed_run_has_no_reply() {
    a_failed_run_has_no_reply("gemini").await;
}
