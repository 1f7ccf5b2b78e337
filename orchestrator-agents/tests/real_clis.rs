//! The real agent CLIs — Copilot CLI, Claude Code, Codex, Gemini CLI — driven through the
//! whole worktree pipeline against `orchestrator-testkit`'s scripted model server: each CLI
//! edits files with its own tools, a chained job sees the first job's edit, the result lands
//! on the target branch (checked with the `git` CLI) and the usage is stored on the attempts.
//! Also: a failed run's session resumed by the job's retry, and auto-heal by a real CLI.
//!
//! The CLIs are found in `$AGENT_CLIS_BIN` or `<workspace>/.agent-clis/bin` (installed by
//! `scripts/install-agent-clis.sh`); a test whose CLI is missing says so on stderr and passes.
//! Everything is offline: the CLIs only talk to the server on 127.0.0.1.
#![cfg(unix)]

mod common;

use std::time::{Duration, Instant};

use common::clis::{cli_path, runner_for, KEY};
use common::{installed, node};
use orchestrator_agents::agent::{
    AgentHealer, AgentRunner, AgentWorkRunner, ClaudeCode, RetryPolicy,
};
use orchestrator_agents::ShellRunner;
use orchestrator_core::plan::{AgentSpec, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::repository::LogQuery;
use orchestrator_core::state::{NodeState, PlanRecord};
use orchestrator_core::{
    NodeStatus, Orchestrator, Phase, PlanId, PlanStatus, RetryRequest, WorkRunner,
};
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::TempRepo;
use orchestrator_testkit::{ModelServer, Script, Turn};
use serde_json::Value;

/// The real CLIs are heavy (Node.js, a few hundred MB of memory each): one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Longest a job's agent may run (the spec's `timeout`, covering retries).
const AGENT_TIMEOUT_MS: u64 = 90_000;
/// Longest a whole plan may take.
const PLAN_TIMEOUT: Duration = Duration::from_secs(180);

/// The `agent` work runner with `cli` registered, retrying transient failures quickly.
fn agents(cli: &str, runner: std::sync::Arc<dyn AgentRunner>) -> AgentWorkRunner {
    AgentWorkRunner::empty()
        .register_arc(cli, runner)
        .default_agent(cli)
        .retry(RetryPolicy::new(2, Duration::from_millis(500)))
}

fn agent_job(id: &str, task: &str, cli: &str, instructions: &str) -> JobSpec {
    let spec = AgentSpec {
        agent: Some(cli.into()),
        instructions: Some(instructions.into()),
        timeout: Some(AGENT_TIMEOUT_MS),
        ..AgentSpec::default()
    };
    JobSpec::new(id, task, WorkSpec::Agent(Box::new(spec)))
}

fn orchestrator(agents: AgentWorkRunner) -> Orchestrator {
    Orchestrator::builder()
        .git(Git2Operations::new())
        .runner("shell", ShellRunner::new())
        .runner("agent", agents)
        .build()
        .expect("orchestrator")
}

/// Waits for the plan, failing the test after [`PLAN_TIMEOUT`].
async fn wait(o: &Orchestrator, id: &PlanId) -> PlanStatus {
    tokio::time::timeout(PLAN_TIMEOUT, o.wait(id))
        .await
        .expect("the plan finishes in time")
        .expect("wait")
}

/// The work log of `producer`'s attempt `attempt`.
async fn work_log(
    o: &Orchestrator,
    id: &PlanId,
    record: &PlanRecord,
    producer: &str,
    attempt: u32,
) -> String {
    o.repository()
        .read_log(
            id,
            &node(record, producer).id,
            LogQuery::new().phase(Phase::Work).attempt(attempt),
        )
        .await
        .expect("log")
}

/// Every job's log, for failure messages.
async fn all_logs(o: &Orchestrator, id: &PlanId, record: &PlanRecord) -> String {
    let mut text = String::new();
    for (i, job) in record.spec.jobs.iter().enumerate() {
        let log = o
            .repository()
            .read_log(id, &record.state.nodes[i].id, LogQuery::new())
            .await
            .unwrap_or_default();
        text.push_str(&format!("==== {} ====\n{log}\n", job.producer_id));
    }
    text
}

/// Asserts the attempt's metrics hold a session id and token counts from `cli`.
fn assert_usage(cli: &str, n: &NodeState) -> Value {
    let metrics = n
        .last_attempt()
        .and_then(|a| a.extra.metrics.clone())
        .expect("the attempt stored metrics");
    assert_eq!(metrics["agent"], cli, "{metrics}");
    let session = metrics["sessionId"].as_str().unwrap_or_default();
    assert!(!session.is_empty(), "session id stored: {metrics}");
    assert_eq!(n.extra.session_id.as_deref(), Some(session), "{metrics}");
    for key in ["inputTokens", "outputTokens"] {
        assert!(
            metrics[key].as_u64().unwrap_or(0) > 0,
            "{key} > 0: {metrics}"
        );
    }
    *metrics
}

/// Two chained agent jobs of `cli` in worktrees: the first creates `notes.txt` with the CLI's
/// own file tool, the second (on top of the first's commit) copies what it sees into
/// `seen.txt` and appends to `notes.txt` with the CLI's shell tool.
async fn two_chained_jobs(cli: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let started = Instant::now();
    let server = ModelServer::start(
        Script::new()
            .write_file("notes.txt", "hello\n")
            .final_text("Created notes.txt.")
            .on_prompt(
                Turn::when("Append to the notes")
                    .shell("cat notes.txt > seen.txt && echo second >> notes.txt")
                    .final_text("Appended to notes.txt."),
            ),
    )
    .await
    .expect("model server");
    let repo = TempRepo::new();
    let o = orchestrator(agents(cli, runner_for(cli, &program, &server)));
    let target = format!("agents/{cli}");
    let plan = PlanSpec::new(format!("real {cli}"))
        .target_branch(&target)
        .job(agent_job(
            "create",
            "Create the notes",
            cli,
            "Create notes.txt containing the line `hello`.",
        ))
        .job(
            agent_job(
                "append",
                "Append to the notes",
                cli,
                "Copy notes.txt to seen.txt, then append the line `second` to notes.txt.",
            )
            .depends_on(["create"]),
        );
    let id = o.run(plan, &repo.dir).await.expect("run");
    let status = wait(&o, &id).await;
    let record = o.status(&id).await.expect("status");
    if status != PlanStatus::Succeeded {
        let requests: Vec<String> = server
            .requests()
            .iter()
            .map(|r| format!("{} {} {} -> {}", r.method, r.path, r.status, r.answer))
            .collect();
        panic!(
            "{cli}: plan {status}\n{}\nrequests:\n{}",
            all_logs(&o, &id, &record).await,
            requests.join("\n")
        );
    }

    // The edits landed on the target branch, and the second job saw the first's file.
    assert_eq!(repo.show(&target, "notes.txt"), "hello\nsecond\n");
    assert_eq!(repo.show(&target, "seen.txt"), "hello\n");
    let mut files = repo.files_at(&target);
    files.sort();
    assert_eq!(
        files,
        ["README.md", "notes.txt", "seen.txt"],
        "{cli} left no other files"
    );
    assert_eq!(repo.show("main", "README.md"), "hello\n");
    assert!(
        repo.git(&["ls-tree", "main"]).lines().count() == 1,
        "main is untouched"
    );

    // Each job committed its own edit; the second's commit sits on the first's.
    let (create, append) = (node(&record, "create"), node(&record, "append"));
    assert_eq!(create.status, NodeStatus::Succeeded);
    assert_eq!(append.status, NodeStatus::Succeeded);
    let first = create.extra.commit.clone().expect("first commit");
    let second = append.extra.commit.clone().expect("second commit");
    assert_eq!(repo.show(&first, "notes.txt"), "hello\n");
    assert!(
        repo.git_output(&["show", &format!("{first}:seen.txt")])
            .status
            .code()
            != Some(0)
    );
    assert_eq!(repo.show(&second, "notes.txt"), "hello\nsecond\n");
    assert!(
        repo.git_output(&["merge-base", "--is-ancestor", &first, &second])
            .status
            .success(),
        "the second job's commit contains the first's"
    );

    // Usage stored on both attempts; two jobs, two sessions.
    let m1 = assert_usage(cli, create);
    let m2 = assert_usage(cli, append);
    assert_ne!(m1["sessionId"], m2["sessionId"]);
    eprintln!(
        "{cli}: two chained jobs in {:.1} s; usage {m1} / {m2}",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn claude_code_edits_through_the_worktree_pipeline() {
    two_chained_jobs("claude").await;
}

#[tokio::test]
async fn codex_edits_through_the_worktree_pipeline() {
    two_chained_jobs("codex").await;
}

#[tokio::test]
async fn copilot_edits_through_the_worktree_pipeline() {
    two_chained_jobs("copilot").await;
}

#[tokio::test]
async fn gemini_edits_through_the_worktree_pipeline() {
    two_chained_jobs("gemini").await;
}

/// Runs `cli` twice in one directory, the second time resuming the first run's session (as a
/// later phase or a retry would): the CLI continues the same session and sees the file it
/// wrote before.
async fn resumes_its_session(cli: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let started = Instant::now();
    let server = ModelServer::start(
        Script::new()
            .write_file("notes.txt", "hello\n")
            .on_prompt(Turn::when("Append to the notes").shell("echo second >> notes.txt")),
    )
    .await
    .expect("model server");
    let runner = agents(cli, runner_for(cli, &program, &server));
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = WorkSpec::Agent(Box::new(AgentSpec {
        agent: Some(cli.into()),
        instructions: Some("Create notes.txt, then append to it when asked.".into()),
        timeout: Some(AGENT_TIMEOUT_MS),
        ..AgentSpec::default()
    }));
    let mut ctx = common::ctx(dir.path());
    ctx.task = "Create the notes".into();
    let first = runner.run(&spec, &ctx).await;
    let log = ctx.log.take();
    let first = first.unwrap_or_else(|e| panic!("{cli}: {e}\n{log}"));
    let session = first.session_id.clone().expect("a session id");

    ctx.attempt = 2;
    ctx.task = "Append to the notes".into();
    ctx.session_id = Some(session.clone());
    let second = runner.run(&spec, &ctx).await;
    let log = ctx.log.take();
    let second = second.unwrap_or_else(|e| panic!("{cli}: {e}\n{log}"));
    assert!(log.contains(&session), "{log}");
    assert_eq!(
        second.session_id.as_deref(),
        Some(session.as_str()),
        "{log}"
    );
    let metrics = second.metrics.clone().unwrap_or_default();
    assert!(
        metrics["inputTokens"].as_u64().unwrap_or(0) > 0,
        "{metrics}"
    );
    // Costs are per run, not the session's running total (which Claude Code also prints).
    let first_metrics = first.metrics.clone().unwrap_or_default();
    if let (Some(a), Some(b)) = (
        first_metrics["costUsd"].as_f64(),
        metrics["costUsd"].as_f64(),
    ) {
        assert!(b < a * 1.5, "second run {b} USD after {a} USD: {metrics}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).expect("notes"),
        "hello\nsecond\n"
    );
    eprintln!(
        "{cli}: resumed its session in {:.1} s; second run {metrics}",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn claude_code_resumes_its_session() {
    resumes_its_session("claude").await;
}

#[tokio::test]
async fn codex_resumes_its_session() {
    resumes_its_session("codex").await;
}

#[tokio::test]
async fn copilot_resumes_its_session() {
    resumes_its_session("copilot").await;
}

#[tokio::test]
async fn gemini_resumes_its_session() {
    resumes_its_session("gemini").await;
}

/// The model API answers 500: the CLI gives up at once (its own retries are turned off), the
/// failure is classified transient and the work runner retries it, resuming the session.
async fn a_server_error_is_retried_by_the_runner(cli: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let started = Instant::now();
    let server = ModelServer::start(Script::new().fail_with_status(500))
        .await
        .expect("model server");
    let runner = agents(cli, runner_for(cli, &program, &server));
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = WorkSpec::Agent(Box::new(AgentSpec {
        agent: Some(cli.into()),
        instructions: Some("Create notes.txt.".into()),
        timeout: Some(AGENT_TIMEOUT_MS),
        ..AgentSpec::default()
    }));
    let ctx = common::ctx(dir.path());
    let failure = runner.run(&spec, &ctx).await.expect_err("the API fails");
    let log = ctx.log.take();
    assert!(log.contains("transient failure (try 1 of 2)"), "{log}");
    assert!(failure.session_id.is_some(), "{failure:?}");
    let retry = log
        .lines()
        .filter(|l| l.starts_with("starting agent"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        retry.contains("resume "),
        "the retry resumes the session: {log}"
    );
    if cli == "gemini" {
        // Gemini CLI does not save a session whose first model call failed: the runner
        // notices and starts a new one.
        assert!(log.contains("cannot resume session"), "{log}");
    }
    let failed_calls = server.requests().iter().filter(|r| r.status == 500).count();
    assert_eq!(
        failed_calls, 2,
        "one model call per try, no retries inside the CLI\n{log}"
    );
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}\n{log}");
    eprintln!(
        "{cli}: a 500 failed fast and was retried once in {:.1} s ({failed_calls} model calls)",
        elapsed.as_secs_f64()
    );
}

#[tokio::test]
async fn claude_code_server_errors_are_retried_by_the_runner() {
    a_server_error_is_retried_by_the_runner("claude").await;
}

#[tokio::test]
async fn codex_server_errors_are_retried_by_the_runner() {
    a_server_error_is_retried_by_the_runner("codex").await;
}

#[tokio::test]
async fn gemini_server_errors_are_retried_by_the_runner() {
    a_server_error_is_retried_by_the_runner("gemini").await;
}

/// Claude Code's first run fails (the model API answers 400: permanent, not retried by the
/// runner) after it started a session; retrying the job resumes that session, in the same
/// worktree, and finishes the work.
#[tokio::test]
async fn a_retried_job_resumes_the_failed_runs_claude_session() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed("claude") else {
        return;
    };
    let started = Instant::now();
    let failing = ModelServer::start(Script::new().fail_with_status(400))
        .await
        .expect("failing server");
    let good = ModelServer::start(
        Script::new()
            .write_file("notes.txt", "hello\n")
            .final_text("Created notes.txt."),
    )
    .await
    .expect("server");
    // No endpoint on the runner: the spec's env picks the server, so a retry can switch it.
    let claude = ClaudeCode::new()
        .program(program.display().to_string())
        .env("PATH", cli_path())
        .env("ANTHROPIC_API_KEY", KEY);
    let o = orchestrator(agents("claude", std::sync::Arc::new(claude)));
    let work = |url: String| {
        let mut spec = AgentSpec {
            agent: Some("claude".into()),
            instructions: Some("Create notes.txt containing the line `hello`.".into()),
            timeout: Some(AGENT_TIMEOUT_MS),
            ..AgentSpec::default()
        };
        spec.env.insert("ANTHROPIC_BASE_URL".into(), url);
        WorkSpec::Agent(Box::new(spec))
    };
    let repo = TempRepo::new();
    let plan = PlanSpec::new("resume claude")
        .target_branch("agents/resume")
        .job(JobSpec::new(
            "notes",
            "Create the notes",
            work(failing.url()),
        ));
    let id = o.run(plan, &repo.dir).await.expect("run");
    assert_eq!(wait(&o, &id).await, PlanStatus::Failed);
    let record = o.status(&id).await.expect("status");
    let failed = node(&record, "notes");
    assert_eq!(failed.status, NodeStatus::Failed);
    let error = failed.extra.error.clone().unwrap_or_default();
    assert!(error.contains("API Error: 400"), "{error}");
    let session = failed
        .extra
        .session_id
        .clone()
        .expect("the failed run's session id is kept for the retry");
    let log = work_log(&o, &id, &record, "notes", 1).await;
    assert!(!log.contains("--resume"), "{log}");

    o.retry(
        &id,
        RetryRequest::jobs(["notes"]).with_work(work(good.url())),
    )
    .await
    .expect("retry");
    let status = wait(&o, &id).await;
    let record = o.status(&id).await.expect("status");
    assert_eq!(
        status,
        PlanStatus::Succeeded,
        "{}",
        all_logs(&o, &id, &record).await
    );
    let retried = node(&record, "notes");
    assert_eq!(retried.attempts.len(), 2);
    let log = work_log(&o, &id, &record, "notes", 2).await;
    assert!(log.contains(&format!("--resume {session}")), "{log}");
    let metrics = assert_usage("claude", retried);
    assert_eq!(metrics["sessionId"], session.as_str(), "the same session");
    assert_eq!(repo.show("agents/resume", "notes.txt"), "hello\n");
    assert!(failing
        .requests_to("/v1/messages")
        .iter()
        .all(|r| r.status == 400));
    eprintln!(
        "claude: failed run resumed by the retry in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// A shell job fails; the healer runs Claude Code, whose scripted model writes the missing
/// file; the command passes on its second run and the fix is committed.
#[tokio::test]
async fn claude_code_heals_a_failing_shell_job() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed("claude") else {
        return;
    };
    let started = Instant::now();
    let server = ModelServer::start(
        Script::new()
            .write_file("fixed.txt", "fixed\n")
            .final_text("Created fixed.txt."),
    )
    .await
    .expect("server");
    let healer =
        AgentHealer::new(agents("claude", runner_for("claude", &program, &server))).agent("claude");
    let o = Orchestrator::builder()
        .git(Git2Operations::new())
        .runner("shell", ShellRunner::new())
        .healer(healer)
        .build()
        .expect("orchestrator");
    let repo = TempRepo::new();
    let plan = PlanSpec::new("heal with claude")
        .target_branch("agents/heal")
        .job(JobSpec::new(
            "needs-fix",
            "Needs a fix",
            WorkSpec::shell("echo 'fixed.txt is missing' >&2; test -f fixed.txt"),
        ));
    let id = o.run(plan, &repo.dir).await.expect("run");
    let status = wait(&o, &id).await;
    let record = o.status(&id).await.expect("status");
    assert_eq!(
        status,
        PlanStatus::Succeeded,
        "{}",
        all_logs(&o, &id, &record).await
    );
    assert_eq!(repo.show("agents/heal", "fixed.txt"), "fixed\n");
    // Each heal is a new attempt: the healer runs first, then the failed phase again.
    let healed = node(&record, "needs-fix");
    assert_eq!(healed.attempts.len(), 2, "{:#?}", healed.attempts);
    let log = work_log(&o, &id, &record, "needs-fix", 2).await;
    assert!(log.contains("starting agent `claude`"), "{log}");
    assert!(log.contains("auto-heal done"), "{log}");
    let prompts = server
        .requests_to("/v1/messages")
        .iter()
        .filter(|r| r.answer == "tool:Write")
        .count();
    assert_eq!(prompts, 1, "one heal, one file written");
    eprintln!(
        "claude: healed a failing shell job in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
