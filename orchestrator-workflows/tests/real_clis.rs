//! Teams and pipelines (SPEC §13) through the real engine with a real agent CLI as every
//! member, against `orchestrator-testkit`'s scripted model server: a reflect team of two
//! workers and an evaluator meets its goal in its second iteration, once with each CLI —
//! Claude Code, Codex, Copilot CLI and Gemini CLI (Copilot unpacks itself once into the
//! shared cache `clis::runner_for` gives it); with Claude Code only, a medium pipeline's
//! contract-checked replies land the coder's change, and a coder that signs with another
//! role's signature fails its stage (reason `contract`) and the pipeline, landing nothing; a
//! simple pipeline's `needs_work` review runs a debugger, a second coder and a second review
//! that ships. Every member runs in its own worktree; what lands on the target branch is
//! checked with the `git` CLI.
//!
//! The model's turns are chosen by text in each member's prompt, never by order (a team's
//! workers run at the same time): the agent runner leaves the controller's prompt
//! (`src/team/prompts.rs`, `src/pipeline/prompts.rs`) in an instructions file and names the
//! job in the CLI's prompt, so the turns match the job ids.
//!
//! The same holds for every CLI: each one's file and shell tools carry out the scripted
//! `write_file` and `shell` steps, and each one's latest user prompt is the runner's, so the
//! job-id turns match.
//!
//! The CLIs are found in `$AGENT_CLIS_BIN` or `<workspace>/.agent-clis/bin` (installed by
//! `scripts/install-agent-clis.sh`); when a test's CLI is missing it says so on stderr and
//! passes. Everything is offline: the CLIs only talk to the server on 127.0.0.1.
#![cfg(unix)]

#[path = "../../orchestrator-agents/tests/common/clis.rs"]
#[allow(dead_code)]
mod clis;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use orchestrator_agents::agent::AgentWorkRunner;
use orchestrator_core::plan::{JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::repository::LogQuery;
use orchestrator_core::state::{FailureReason, NodeState, PlanRecord};
use orchestrator_core::{NodeStatus, Orchestrator, PlanId, PlanStatus};
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::TempRepo;
use orchestrator_testkit::tools::{SHELL_TOOLS, WRITE_TOOLS};
use orchestrator_testkit::{ModelServer, Script, Turn};

/// The real CLIs are heavy: one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PLAN_TIMEOUT: Duration = Duration::from_secs(120);
const TARGET: &str = "feature/team";

/// Where the real agent CLIs are installed (`scripts/install-agent-clis.sh`; `AGENT_CLIS_BIN`
/// overrides). The shared `clis` helpers find it here.
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

/// The CLI's executable, or `None` (after saying so) when it is not installed.
fn installed(cli: &str) -> Option<PathBuf> {
    let program = bin_dir().join(cli);
    if program.is_file() {
        Some(program)
    } else {
        eprintln!("skipped: {cli} not installed (run scripts/install-agent-clis.sh)");
        None
    }
}

/// The engine with the workflows registered and `cli` (at `program`, talking to `server`)
/// as its `agent` runner.
fn engine(cli: &str, program: &Path, server: &ModelServer) -> Orchestrator {
    let agents = AgentWorkRunner::empty()
        .register_arc(cli, clis::runner_for(cli, program, server))
        .default_agent(cli);
    orchestrator_workflows::register(Orchestrator::builder())
        .git(Git2Operations::new())
        .runner("agent", agents)
        .build()
        .expect("orchestrator")
}

/// What a real-CLI test runs on: the lock that keeps the CLIs one at a time, the scripted
/// model server, a repository, and the engine with `cli` as every agent.
struct Cli {
    _one: tokio::sync::MutexGuard<'static, ()>,
    server: ModelServer,
    repo: TempRepo,
    o: Orchestrator,
}

/// Starts a real-CLI test of `cli` on `script`; `None` (after saying so) when the CLI is not
/// installed.
async fn start(cli: &str, script: Script) -> Option<Cli> {
    let one = ONE_AT_A_TIME.lock().await;
    let program = installed(cli)?;
    let server = ModelServer::start(script).await.expect("model server");
    let o = engine(cli, &program, &server);
    Some(Cli {
        _one: one,
        server,
        repo: TempRepo::new(),
        o,
    })
}

fn plan(work: serde_json::Value) -> PlanSpec {
    let work: WorkSpec = serde_json::from_value(work).expect("work");
    PlanSpec::new("team")
        .target_branch(TARGET)
        .job(JobSpec::new("team", "the team", work))
}

/// Runs `plan` to its end, or for at most [`PLAN_TIMEOUT`]: how it ended (`Err` when it did
/// not in time), its id and its record.
async fn finish(
    o: &Orchestrator,
    plan: PlanSpec,
    repo: &TempRepo,
) -> (Option<PlanStatus>, PlanId, PlanRecord) {
    let id = o.run(plan, &repo.dir).await.expect("run");
    let status = tokio::time::timeout(PLAN_TIMEOUT, o.wait(&id)).await;
    let record = o.status(&id).await.expect("status");
    let status = match status {
        Ok(Ok(status)) => Some(status),
        _ => None,
    };
    (status, id, record)
}

/// Runs `plan` to its end; a plan that does not succeed in time panics with every job's log
/// and the model server's requests.
async fn succeed(
    o: &Orchestrator,
    plan: PlanSpec,
    repo: &TempRepo,
    server: &ModelServer,
) -> PlanRecord {
    let (status, id, record) = finish(o, plan, repo).await;
    if status != Some(PlanStatus::Succeeded) {
        panic!(
            "plan {status:?}\n{}\nrequests:\n{}",
            logs(o, &id, &record).await,
            requests(server)
        );
    }
    record
}

async fn logs(o: &Orchestrator, id: &PlanId, record: &PlanRecord) -> String {
    let mut logs = String::new();
    for (i, job) in record.spec.jobs.iter().enumerate() {
        let n = &record.state.nodes[i];
        let log = o
            .repository()
            .read_log(id, &n.id, LogQuery::new())
            .await
            .unwrap_or_default();
        let error = n.last_attempt().and_then(|a| a.extra.error.clone());
        logs.push_str(&format!(
            "==== {} ({}, {error:?}) ====\n{log}\n",
            job.producer_id, n.status
        ));
    }
    logs
}

fn requests(server: &ModelServer) -> String {
    server
        .requests()
        .iter()
        .map(|r| format!("{} {} {} -> {}", r.method, r.path, r.status, r.answer))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ids(record: &PlanRecord) -> Vec<&str> {
    record
        .spec
        .jobs
        .iter()
        .map(|j| j.producer_id.as_str())
        .collect()
}

/// The state of the job `id`.
fn node<'a>(record: &'a PlanRecord, id: &str) -> &'a NodeState {
    let i = record
        .spec
        .jobs
        .iter()
        .position(|j| j.producer_id == id)
        .unwrap_or_else(|| panic!("no job {id} in {:?}", ids(record)));
    &record.state.nodes[i]
}

/// The team job's JSON output.
fn team_output(record: &PlanRecord) -> serde_json::Value {
    let text = record.state.nodes[0].output().expect("the team's output");
    serde_json::from_str(text).expect("JSON output")
}

fn assert_on_target(repo: &TempRepo, files: &[(&str, &str)]) {
    let on_target = repo.files_at(TARGET);
    for (file, text) in files {
        assert!(
            on_target.iter().any(|f| f == file),
            "{file} in {on_target:?}"
        );
        assert_eq!(repo.show(TARGET, file), *text, "{file}");
    }
    assert_eq!(
        repo.git(&["ls-tree", "--name-only", "main"]).trim(),
        "README.md",
        "main is untouched"
    );
}

/// The turn for the member job `id`: the runner's prompt names the job (`They are job
/// `<id>`: <task>`) and leaves the controller's prompt in a file, so turns are chosen by job
/// id, which also keeps the parallel workers apart.
fn job(id: &str) -> Turn {
    Turn::when(format!("job `{id}`:"))
}

/// What a member runs to read the controller's prompt the runner left for it.
const READ_INSTRUCTIONS: &str = "cat .orchestrator/agent/work-1/instructions.md";

/// Whether a request to the model carried `text` (e.g. in a tool result).
fn asked_with(server: &ModelServer, text: &str) -> bool {
    server
        .requests()
        .iter()
        .any(|r| r.body.to_string().contains(text))
}

/// Whether Claude Code told the model it created a file named `file` (its Write tool's
/// result, `File created successfully at: <path> (…)`).
fn wrote(server: &ModelServer, file: &str) -> bool {
    const CREATED: &str = "File created successfully at: ";
    server.requests().iter().any(|r| {
        let body = r.body.to_string();
        body.match_indices(CREATED).any(|(at, _)| {
            let path = &body[at + CREATED.len()..];
            let end = path
                .find(|c: char| c == '"' || c == '\\' || c.is_whitespace())
                .unwrap_or(path.len());
            let path = &path[..end];
            path.ends_with(&format!("/{file}"))
        })
    })
}

/// The tools the model called, in order (the names the CLI offers them under).
fn tool_calls(server: &ModelServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter_map(|r| r.answer.strip_prefix("tool:").map(str::to_owned))
        .collect()
}

/// The reflect team's model: two plans, each worker writing a file of its own per
/// iteration, two different syntheses, and a first score under the threshold.
fn team_script() -> Script {
    let worker = |round: u32, name: &str, file: &str| {
        job(&format!("team/{round}/{name}"))
            .write_file(file, format!("{name} wrote {file}\n"))
            .final_text(format!("{name} wrote {file}."))
    };
    Script::new()
        .final_text("Nothing scripted for this prompt.")
        .on_prompt(
            job("team/1/plan")
                .final_text("Plan:\n@worker:alice create alice.txt\n@worker:bob create bob.txt\n"),
        )
        .on_prompt(worker(1, "alice", "alice.txt"))
        .on_prompt(worker(1, "bob", "bob.txt"))
        .on_prompt(
            job("team/1/synthesis").final_text("Synthesis ONE: both workers wrote a first draft."),
        )
        .on_prompt(
            job("team/1/evaluate")
                .final_text("Score: 0.4\nRationale: only the first drafts exist."),
        )
        .on_prompt(job("team/2/plan").shell(READ_INSTRUCTIONS).final_text(
            "Round two:\n@worker:alice create alice2.txt\n@worker:bob create bob2.txt\n",
        ))
        .on_prompt(worker(2, "alice", "alice2.txt"))
        .on_prompt(worker(2, "bob", "bob2.txt"))
        .on_prompt(
            job("team/2/synthesis").final_text("Synthesis TWO: both workers revised their files."),
        )
        .on_prompt(
            job("team/2/evaluate")
                .final_text("Score: 0.95\nRationale: every worker's second file is in place."),
        )
}

/// A reflect team with `cli` as every member: two workers and an evaluator meet the goal in
/// the second iteration, and every worker's files land on the target branch.
async fn reflect_team(cli: &str) {
    let Some(Cli {
        _one,
        server,
        repo,
        o,
    }) = start(cli, team_script()).await
    else {
        return;
    };
    let started = Instant::now();
    let mut plan = plan(serde_json::json!({
        "type": "team",
        "prompt": "Give each worker a greeting file of its own.",
        "agent": cli,
        "workers": [{"name": "alice"}, {"name": "bob"}],
        "evaluator": {"threshold": 0.9}
    }));
    if cli == "gemini" {
        // Gemini CLI otherwise starts a second Node.js process of itself (for a larger heap)
        // on every run: 1.5 s of each of its ten runs, most of them one after another.
        plan.env
            .insert("GEMINI_CLI_NO_RELAUNCH".into(), "true".into());
    }
    let record = succeed(&o, plan, &repo, &server).await;
    let mut jobs = ids(&record);
    jobs[2..4].sort_unstable();
    jobs[7..9].sort_unstable();
    assert_eq!(
        jobs,
        [
            "team",
            "team/1/plan",
            "team/1/alice",
            "team/1/bob",
            "team/1/synthesis",
            "team/1/evaluate",
            "team/2/plan",
            "team/2/alice",
            "team/2/bob",
            "team/2/synthesis",
            "team/2/evaluate",
        ],
        "{cli}"
    );
    let out = team_output(&record);
    assert_eq!(out["exitReason"], "goal_met", "{cli}: {out}");
    assert_eq!(out["iterations"], 2, "{cli}: {out}");
    assert_eq!(
        out["scores"],
        serde_json::json!([0.4, 0.95]),
        "{cli}: {out}"
    );
    // The re-plan read the controller's prompt: the last score and synthesis.
    assert!(
        asked_with(
            &server,
            "This is iteration 2. The last iteration's result was judged 0.40"
        ) && asked_with(&server, "Synthesis ONE: both workers wrote a first draft."),
        "{cli}: the re-plan's prompt\n{}",
        requests(&server)
    );
    assert_on_target(
        &repo,
        &[
            ("alice.txt", "alice wrote alice.txt\n"),
            ("bob.txt", "bob wrote bob.txt\n"),
            ("alice2.txt", "alice wrote alice2.txt\n"),
            ("bob2.txt", "bob wrote bob2.txt\n"),
        ],
    );
    // Each worker wrote its file with the CLI's own file tool (not a shell heredoc), and the
    // re-plan read its instructions with the CLI's shell tool.
    let calls = tool_calls(&server);
    let count = |names: &[&str]| calls.iter().filter(|c| names.contains(&c.as_str())).count();
    assert_eq!(
        (count(WRITE_TOOLS), count(SHELL_TOOLS), calls.len()),
        (4, 1, 5),
        "{cli}: {calls:?}"
    );
    eprintln!(
        "{cli}: a reflect team in two iterations in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn a_reflect_team_of_real_claude_agents_meets_its_goal_in_two_iterations() {
    reflect_team("claude").await;
}

#[tokio::test]
async fn a_reflect_team_of_real_codex_agents_meets_its_goal_in_two_iterations() {
    reflect_team("codex").await;
}

#[tokio::test]
async fn a_reflect_team_of_real_copilot_agents_meets_its_goal_in_two_iterations() {
    reflect_team("copilot").await;
}

#[tokio::test]
async fn a_reflect_team_of_real_gemini_agents_meets_its_goal_in_two_iterations() {
    reflect_team("gemini").await;
}

fn contract(role: &str, signature: &str, extra: &str) -> String {
    format!(
        "{role} did its part.\n\n### Orchestrator Contract\n- Status: success\n- Evidence: done\n\
         - Next Steps: next\n{extra}- Agent Signature: {signature}\n"
    )
}

/// The pipeline's model: each stage's reply ends with its role's contract block.
fn pipeline_script() -> Script {
    Script::new()
        .final_text("Nothing scripted for this prompt.")
        .on_prompt(job("team/architect").final_text(contract("architect", "CEDAR_COMPASS", "")))
        .on_prompt(
            job("team/coder")
                .write_file("greet.txt", "hello\n")
                .final_text(contract("coder", "NOVA_CORE", "")),
        )
        .on_prompt(
            job("team/review")
                .shell(READ_INSTRUCTIONS)
                .final_text(contract(
                    "review",
                    "SILVER_KITE",
                    "- Verdict: ship\n- Failures: none\n",
                )),
        )
}

#[tokio::test]
async fn a_medium_pipeline_of_real_claude_agents_lands_the_coders_change() {
    let Some(Cli {
        _one,
        server,
        repo,
        o,
    }) = start("claude", pipeline_script()).await
    else {
        return;
    };
    let plan = plan(serde_json::json!({
        "type": "pipeline",
        "task": "Add a greeting in greet.txt",
        "complexity": "medium",
        "agent": "claude"
    }));
    let record = succeed(&o, plan, &repo, &server).await;
    assert_eq!(
        ids(&record),
        ["team", "team/architect", "team/coder", "team/review"]
    );
    let out = team_output(&record);
    assert_eq!(out["verdict"], "ship", "{out}");
    // The review read its prompt: its role, its signature, the coder's reply.
    for text in [
        "You are the review of",
        "Agent Signature: SILVER_KITE",
        "NOVA_CORE",
    ] {
        assert!(asked_with(&server, text), "{text}\n{}", requests(&server));
    }
    assert_on_target(&repo, &[("greet.txt", "hello\n")]);
}

/// A medium pipeline whose coder changes a file but signs with the review's signature.
fn wrong_signature_script() -> Script {
    Script::new()
        .final_text("Nothing scripted for this prompt.")
        .on_prompt(job("team/architect").final_text(contract("architect", "CEDAR_COMPASS", "")))
        .on_prompt(
            job("team/coder")
                .write_file("greet.txt", "hello\n")
                .final_text(contract("coder", "SILVER_KITE", "")),
        )
        .on_prompt(job("team/review").final_text(contract(
            "review",
            "SILVER_KITE",
            "- Verdict: ship\n- Failures: none\n",
        )))
}

#[tokio::test]
async fn a_real_claude_coder_with_a_wrong_signature_fails_its_stage_with_reason_contract() {
    let Some(Cli {
        _one,
        server,
        repo,
        o,
    }) = start("claude", wrong_signature_script()).await
    else {
        return;
    };
    let plan = plan(serde_json::json!({
        "type": "pipeline",
        "task": "Add a greeting in greet.txt",
        "complexity": "medium",
        "agent": "claude"
    }));
    let (status, id, record) = finish(&o, plan, &repo).await;
    let context = || async {
        format!(
            "{}\nrequests:\n{}",
            logs(&o, &id, &record).await,
            requests(&server)
        )
    };
    if status != Some(PlanStatus::Failed) {
        panic!("plan {status:?}\n{}", context().await);
    }
    let coder = node(&record, "team/coder");
    assert_eq!(coder.status, NodeStatus::Failed, "{}", context().await);
    let attempt = coder.last_attempt().expect("the coder's attempt");
    assert_eq!(attempt.extra.failure_reason, Some(FailureReason::Contract));
    let message = attempt.extra.error.clone().unwrap_or_default();
    assert!(
        message.contains("wrong signature `SILVER_KITE`"),
        "{message}"
    );
    assert_eq!(
        node(&record, "team/architect").status,
        NodeStatus::Succeeded
    );
    assert_eq!(node(&record, "team").status, NodeStatus::Failed);
    assert_eq!(
        ids(&record),
        ["team", "team/architect", "team/coder"],
        "no review ran"
    );
    // The CLI did write the file (the model's tool call ran in the coder's worktree) ...
    assert!(
        wrote(&server, "greet.txt"),
        "the coder's tool call\n{}",
        requests(&server)
    );
    // ... but a stage that breaks its contract lands nothing: the target branch (made at the
    // plan's start from its base) is still at the base, without the coder's file.
    assert_eq!(
        repo.git(&["rev-parse", TARGET]),
        repo.git(&["rev-parse", "main"]),
        "the target branch is at the base"
    );
    assert_eq!(repo.files_at(TARGET), ["README.md"]);
    assert_eq!(repo.try_show(TARGET, "greet.txt"), None);
}

/// A simple pipeline whose first review finds a typo: a debugger, a second coder that fixes
/// it, and a second review that ships.
fn needs_work_script() -> Script {
    Script::new()
        .final_text("Nothing scripted for this prompt.")
        .on_prompt(
            job("team/coder")
                .write_file("greet.txt", "helo\n")
                .final_text(contract("coder", "NOVA_CORE", "")),
        )
        .on_prompt(job("team/review").final_text(contract(
            "review",
            "SILVER_KITE",
            "- Verdict: needs_work\n- Failures: typo\n",
        )))
        .on_prompt(
            job("team/debugger-1")
                .shell(READ_INSTRUCTIONS)
                .final_text(contract(
                    "debugger",
                    "EMBER_TRACE",
                    "- Attempt: 1\n- Attempts Remaining: 1\n",
                )),
        )
        .on_prompt(
            job("team/coder-2")
                .write_file("greet.txt", "hello\n")
                .final_text(contract("coder", "NOVA_CORE", "")),
        )
        .on_prompt(job("team/review-2").final_text(contract(
            "review",
            "SILVER_KITE",
            "- Verdict: ship\n- Failures: none\n",
        )))
}

#[tokio::test]
async fn a_real_claude_needs_work_review_runs_debugger_coder_review_and_ships() {
    let Some(Cli {
        _one,
        server,
        repo,
        o,
    }) = start("claude", needs_work_script()).await
    else {
        return;
    };
    let plan = plan(serde_json::json!({
        "type": "pipeline",
        "task": "Add a greeting in greet.txt",
        "complexity": "simple",
        "agent": "claude"
    }));
    let record = succeed(&o, plan, &repo, &server).await;
    assert_eq!(
        ids(&record),
        [
            "team",
            "team/coder",
            "team/review",
            "team/debugger-1",
            "team/coder-2",
            "team/review-2"
        ]
    );
    let out = team_output(&record);
    assert_eq!(out["verdict"], "ship", "{out}");
    assert_eq!(out["debugAttempts"], 1, "{out}");
    // The debugger read its prompt: its role and attempt, its signature, the review's
    // failures.
    for text in ["Agent Signature: EMBER_TRACE", "- Failures: typo"] {
        assert!(asked_with(&server, text), "{text}\n{}", requests(&server));
    }
    assert_on_target(&repo, &[("greet.txt", "hello\n")]);
}
