//! The agents' own durable tools (SPEC §15) end to end: the built `orchestrator` binary runs
//! the real Claude Code CLI against the testkit's scripted model server, whose turns call our
//! MCP tools (`mcp__orchestrator__wait`, `mcp__orchestrator__ask_user`, ...).
//!
//! - `wait`: the job parks in `waiting(timer)` with no agent process left, the CLI host is
//!   killed with `kill -9` during the wait, `resume` wakes the job at the original deadline,
//!   the model sees the timer's message in the resumed conversation and the job's files land;
//! - `ask_user`: `run --until-waiting` exits 4 with the question in the job JSON, `answer`
//!   from another process, and the answer reaches the model in the next request;
//! - `cron`: three firings, then the agent cancels it, then the job succeeds;
//! - `spawn_agent` ×2 + `wait_for_agents`: two children edit their own files in their own
//!   worktrees, the parent resumes with their outputs and both files, all of it lands;
//! - dehydration: a wait longer than `dehydrateAfter` archives the session to the blob store
//!   and removes the worktree; `resume` from another process hydrates it and the conversation
//!   goes on; a damaged blob fails the job with a clear error and stays, and once mended a
//!   retry finishes the job.
//!
//! A test whose CLI is missing says so and passes (`scripts/install-agent-clis.sh`).
#![cfg(unix)]

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::Repo;
use orchestrator_testkit::fixtures::{job_doc, wait_child};
use orchestrator_testkit::{ModelServer, Script, Turn};
use serde_json::{json, Value};

/// The real CLIs are heavy: one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Where `scripts/install-agent-clis.sh` puts the CLIs.
fn clis_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.agent-clis/bin")
}

fn claude() -> Option<PathBuf> {
    let program = clis_bin().join("claude");
    if program.is_file() {
        Some(program)
    } else {
        eprintln!("skipped: claude not installed (run scripts/install-agent-clis.sh)");
        None
    }
}

/// `orchestrator ARGS` on `repo` with Claude Code on the PATH, pointed at `server`.
fn with_claude(repo: &Repo, server: &ModelServer, args: &[&str]) -> Command {
    let mut cmd = repo.command_with_agents(&clis_bin(), args);
    cmd.env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ORCHESTRATOR_AGENT", "claude");
    cmd
}

fn plan(repo: &Repo, task: &str, target: &str) -> PathBuf {
    let plan = json!({
        "name": "agent tools",
        "targetBranch": target,
        "waitThreshold": 1,
        "jobs": [{
            "producerId": "agent",
            "task": task,
            "dependencies": [],
            "work": {"type": "agent", "agent": "claude", "instructions": task,
                     "model": "claude-sonnet-4-5"}
        }]
    });
    let file = repo.dir.join("plan.json");
    std::fs::write(&file, plan.to_string()).expect("write plan");
    file
}

/// `orchestrator ARGS --json -q` with Claude Code, which must end with the plan `status`: its
/// status document.
fn ended_as(repo: &Repo, server: &ModelServer, args: &[&str], status: &str) -> Value {
    let mut all = args.to_vec();
    all.extend(["--json", "-q"]);
    let run = with_claude(repo, server, &all).output().expect("run");
    let out: Value = serde_json::from_slice(&run.stdout).unwrap_or(Value::Null);
    assert_eq!(
        out["status"],
        status,
        "{out:#}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    out
}

/// Every model request body so far, as text.
fn bodies(server: &ModelServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .map(|r| r.to_json()["body"].to_string())
        .collect()
}

/// Polls `status --json` of the latest plan until `ok` (or panics after `limit`).
fn wait_status(repo: &Repo, limit: Duration, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    repo.wait_for_within(what, limit, ok)
}

fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Pids of live processes whose working directory is under `dir`.
fn processes_in(dir: &std::path::Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_wait_parks_survives_kill_9_and_resumes_at_its_deadline() {
    let Some(_) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    let script = Script::new()
        .on_prompt(
            Turn::when("TOOLS-WAIT")
                .tool(
                    "mcp__orchestrator__wait",
                    json!({"seconds": 6, "reason": "CI is running"}),
                )
                .final_text("Waiting for CI."),
        )
        .on_prompt(
            Turn::when("timer you set")
                .write_file("after-wait.txt", "CI passed\n")
                .final_text("Wrote after-wait.txt after the wait."),
        );
    let server = ModelServer::start(script).await.expect("model server");
    let repo = Repo::new();
    let file = plan(
        &repo,
        "TOOLS-WAIT: wait for CI, then write after-wait.txt",
        "feature/wait",
    );

    let started = Instant::now();
    let child = with_claude(
        &repo,
        &server,
        &["run", file.to_str().expect("utf-8"), "-q"],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("spawn run");
    let doc = wait_status(
        &repo,
        Duration::from_secs(90),
        "the job waits on its timer",
        |d| job_doc(d, "agent")["waitingFor"] == "timer",
    );
    let job = job_doc(&doc, "agent");
    let until = job["waiting"]["until"].as_u64().expect("a deadline");
    assert!(
        job["waiting"]["prompt"]
            .as_str()
            .is_some_and(|p| p.contains("CI is running")),
        "{job:#}"
    );
    let worktree = PathBuf::from(job["worktree"].as_str().expect("worktree kept"));
    assert!(worktree.is_dir(), "the worktree stays while the job waits");
    let left = processes_in(&worktree);
    assert!(
        left.is_empty(),
        "no agent process is left while waiting: {left:?}"
    );

    // kill -9 the CLI host during the wait, then resume from another process.
    let pid = child.id();
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill -9");
    let _ = wait_child(child, Duration::from_secs(10));
    let id = doc["planId"].as_str().expect("planId").to_owned();
    ended_as(&repo, &server, &["resume", &id], "succeeded");
    let ended = now_millis();
    assert!(
        ended >= until,
        "the job woke at its deadline, not before ({ended} < {until})"
    );
    assert!(started.elapsed() >= Duration::from_secs(6));
    assert!(
        bodies(&server).iter().any(
            |b| b.contains("timer you set with wait(6 s) fired") && b.contains("CI is running")
        ),
        "the resumed conversation carries the timer's message"
    );
    assert_eq!(
        repo.git(&["show", "feature/wait:after-wait.txt"]),
        "CI passed\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_user_waits_for_an_answer_from_another_process() {
    let Some(_) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    let script = Script::new()
        .on_prompt(
            Turn::when("TOOLS-ASK")
                .tool(
                    "mcp__orchestrator__ask_user",
                    json!({"question": "Which colour?", "choices": ["blue", "green"],
                           "allowFreeform": false}),
                )
                .final_text("Asked."),
        )
        .on_prompt(
            Turn::when("A person answered")
                .write_file("colour.txt", "blue\n")
                .final_text("Wrote colour.txt."),
        );
    let server = ModelServer::start(script).await.expect("model server");
    let repo = Repo::new();
    let file = plan(
        &repo,
        "TOOLS-ASK: ask which colour, then write it",
        "feature/ask",
    );
    let run = with_claude(
        &repo,
        &server,
        &[
            "run",
            file.to_str().expect("utf-8"),
            "--until-waiting",
            "--json",
            "-q",
        ],
    )
    .output()
    .expect("run");
    if run.status.code() != Some(4) {
        let logs = repo.run(&["logs", "--json"]);
        panic!(
            "{}\n{}\n{:?}",
            String::from_utf8_lossy(&run.stderr),
            logs.stdout,
            bodies(&server)
                .iter()
                .map(|b| b.chars().take(3000).collect::<String>())
                .collect::<Vec<_>>()
        );
    }
    let doc: Value = serde_json::from_slice(&run.stdout).expect("json");
    let job = job_doc(&doc, "agent");
    assert_eq!(job["waitingFor"], "input", "{job:#}");
    assert_eq!(job["waiting"]["prompt"], "Which colour?");
    assert_eq!(job["waiting"]["choices"], json!(["blue", "green"]));
    let id = doc["planId"].as_str().expect("planId").to_owned();

    let wrong = repo.run(&["answer", &id, "agent", "red"]);
    assert_eq!(
        wrong.code, 2,
        "an answer outside the choices: {}",
        wrong.stderr
    );
    assert!(wrong.stderr.contains("blue, green"), "{}", wrong.stderr);
    repo.run(&["answer", &id, "agent", "blue", "-q"])
        .expect_code(0);
    ended_as(&repo, &server, &["resume", &id], "succeeded");
    assert!(
        bodies(&server)
            .iter()
            .any(|b| b.contains("A person answered your question") && b.contains("blue")),
        "the answer reaches the model"
    );
    assert_eq!(repo.git(&["show", "feature/ask:colour.txt"]), "blue\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_fires_three_times_then_is_canceled_and_the_job_succeeds() {
    let Some(_) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    let script = Script::new()
        .on_prompt(
            Turn::when("TOOLS-CRON")
                .tool(
                    "mcp__orchestrator__cron",
                    json!({"seconds": 1, "reason": "poll the deploy"}),
                )
                .final_text("Cron set."),
        )
        .on_prompt(
            Turn::when("(firing 3)")
                .tool("mcp__orchestrator__cron", json!({"action": "cancel"}))
                .write_file("cron.txt", "three firings\n")
                .final_text("Deploy done; cron canceled."),
        )
        .on_prompt(Turn::when("Your cron fired").final_text("Not yet."));
    let server = ModelServer::start(script).await.expect("model server");
    let repo = Repo::new();
    let file = plan(
        &repo,
        "TOOLS-CRON: poll the deploy until it is done",
        "feature/cron",
    );
    let out = ended_as(
        &repo,
        &server,
        &["run", file.to_str().expect("utf-8")],
        "succeeded",
    );
    let firings: Vec<u32> = (1..=4)
        .filter(|n| {
            bodies(&server)
                .iter()
                .any(|b| b.contains(&format!("Your cron fired (firing {n})")))
        })
        .collect();
    assert_eq!(
        firings,
        vec![1, 2, 3],
        "three firings, none after the cancel"
    );
    assert_eq!(
        repo.git(&["show", "feature/cron:cron.txt"]),
        "three firings\n"
    );
    let job = job_doc(&out, "agent");
    assert!(job["waiting"].is_null(), "{job:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sub_agents_edit_their_own_files_and_everything_lands_on_the_target() {
    let Some(_) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    // The parent's wake-up turns first: a report of the children names their tasks too.
    let script = Script::new()
        .on_prompt(
            Turn::when("### `agent-2`")
                .write_file("lead.txt", "both children reported\n")
                .final_text("Both sub-agents are done; wrote lead.txt."),
        )
        .on_prompt(
            Turn::when("`agent-2` is started")
                .tool("mcp__orchestrator__wait_for_agents", json!({}))
                .final_text("Waiting for my sub-agents."),
        )
        .on_prompt(
            Turn::when("`agent-1` is started")
                .tool(
                    "mcp__orchestrator__spawn_agent",
                    json!({"task": "CHILD-B: write b.txt"}),
                )
                .final_text("Spawned the second sub-agent."),
        )
        .on_prompt(
            Turn::when("CHILD-A")
                .write_file("a.txt", "A\n")
                .final_text("Wrote it.\nfile: a.txt"),
        )
        .on_prompt(
            Turn::when("CHILD-B")
                .write_file("b.txt", "B\n")
                .final_text("Wrote b.txt."),
        )
        // Last: Claude Code shows a child the recent commits, the parent's checkpoint among
        // them, whose message is the parent's task.
        .on_prompt(
            Turn::when("TOOLS-SPAWN")
                .write_file("plan.txt", "split in two\n")
                .tool(
                    "mcp__orchestrator__spawn_agent",
                    json!({"task": "CHILD-A: write a.txt",
                           "contract": {"expectedFacts": ["file"]}}),
                )
                .final_text("Spawned the first sub-agent."),
        );
    let server = ModelServer::start(script).await.expect("model server");
    let repo = Repo::new();
    let file = plan(
        &repo,
        "TOOLS-SPAWN: split the work between two sub-agents",
        "feature/spawn",
    );
    let out = ended_as(
        &repo,
        &server,
        &["run", file.to_str().expect("utf-8")],
        "succeeded",
    );
    for child in ["agent/agent-1", "agent/agent-2"] {
        let job = job_doc(&out, child);
        assert_eq!(job["status"], "succeeded", "{job:#}");
    }
    let a = job_doc(&out, "agent/agent-1");
    assert_eq!(a["output"], "Wrote it.\nfile: a.txt", "{a:#}");
    // The parent's last turn saw both children's outputs, and their files in its worktree.
    let last = bodies(&server)
        .into_iter()
        .find(|b| b.contains("### `agent-2`"))
        .expect("the parent resumed with the report");
    let report = last.split("### `agent-1`").last().unwrap_or_default();
    assert!(
        report.contains("Wrote b.txt") && report.contains("file: a.txt"),
        "{report}"
    );
    let files = repo.git(&["ls-tree", "--name-only", "feature/spawn"]);
    for f in ["plan.txt", "a.txt", "b.txt", "lead.txt"] {
        assert!(files.lines().any(|l| l == f), "{f} on the target: {files}");
    }
}

/// The files under `dir`, recursively (relative paths).
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// The dehydration script: the first turn writes `before.txt` and waits 8 s.
fn dehydration_script() -> Script {
    Script::new()
        .on_prompt(
            Turn::when("timer you set")
                .write_file("after.txt", "after the build\n")
                .final_text("Back after the build."),
        )
        .on_prompt(
            Turn::when("TOOLS-DEHYDRATE")
                .write_file("before.txt", "before the build\n")
                .tool(
                    "mcp__orchestrator__wait",
                    json!({"seconds": 8, "reason": "the nightly build"}),
                )
                .final_text("Parked for the build."),
        )
}

/// Runs a plan (`dehydrateAfter: 2`) until its job parks, dehydrated: the plan's id and the
/// blob store's files.
fn run_until_dehydrated(repo: &Repo, server: &ModelServer) -> (String, Vec<String>) {
    let file = plan(
        repo,
        "TOOLS-DEHYDRATE: wait for the nightly build",
        "feature/dehydrate",
    );
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("plan")).expect("json");
    doc["dehydrateAfter"] = json!(2);
    std::fs::write(&file, doc.to_string()).expect("write plan");
    let run = with_claude(
        repo,
        server,
        &[
            "run",
            file.to_str().expect("utf-8"),
            "--until-waiting",
            "--json",
            "-q",
        ],
    )
    .output()
    .expect("run");
    assert_eq!(
        run.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let out: Value = serde_json::from_slice(&run.stdout).expect("status json");
    let job = job_doc(&out, "agent");
    assert_eq!(job["waitingFor"], "timer", "{job:#}");
    assert!(
        job["worktree"].is_null(),
        "the worktree is removed: {job:#}"
    );
    let left: Vec<String> = files_under(&repo.dir.join(".worktrees"))
        .into_iter()
        .filter(|f| !f.starts_with("_snapshot"))
        .collect();
    assert!(
        left.is_empty(),
        "no job worktree on disk while dehydrated: {left:?}"
    );
    let stored = files_under(&repo.dir.join(".orchestrator/blobs"));
    assert!(
        stored.iter().any(|f| f.contains("sessions/")),
        "the session is in the blob store: {stored:?}"
    );
    (out["planId"].as_str().expect("planId").to_owned(), stored)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_wait_dehydrates_the_session_and_the_wake_up_hydrates_it() {
    let Some(_) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    let server = ModelServer::start(dehydration_script())
        .await
        .expect("model server");
    let repo = Repo::new();
    let (id, _) = run_until_dehydrated(&repo, &server);

    // Another process resumes it: the worktree comes back at the checkpoint, the CLI state
    // from the blob, and the conversation goes on.
    ended_as(&repo, &server, &["resume", &id], "succeeded");
    assert!(
        bodies(&server)
            .iter()
            .any(|b| b.contains("timer you set with wait(8 s) fired")
                && b.contains("Parked for the build.")),
        "the resumed conversation holds the turn before the wait"
    );
    let files = repo.git(&["ls-tree", "--name-only", "feature/dehydrate"]);
    for f in ["before.txt", "after.txt"] {
        assert!(files.lines().any(|l| l == f), "{f} on the target: {files}");
    }
    let stored = files_under(&repo.dir.join(".orchestrator/blobs"));
    assert!(
        !stored.iter().any(|f| f.contains("sessions/")),
        "the blob is gone once hydrated: {stored:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_session_blob_fails_the_job_and_stays() {
    let Some(_) = claude() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    let server = ModelServer::start(dehydration_script())
        .await
        .expect("model server");
    let repo = Repo::new();
    let (id, stored) = run_until_dehydrated(&repo, &server);
    let blobs = repo.dir.join(".orchestrator/blobs");
    let data = stored
        .iter()
        .find(|f| f.starts_with("data/"))
        .map(|f| blobs.join(f))
        .expect("the tarball");
    let good = std::fs::read(&data).expect("the tarball");
    std::fs::write(&data, b"not a tarball any more").expect("damage it");

    let out = ended_as(&repo, &server, &["resume", &id], "failed");
    let job = job_doc(&out, "agent");
    let error = job["error"].as_str().unwrap_or_default();
    assert!(error.contains("cannot hydrate the session"), "{job:#}");
    assert!(
        data.is_file(),
        "the damaged blob stays for a person to look at"
    );

    // Once the blob is mended, a retry hydrates it (onto the checkpoint, kept for it) and the
    // job finishes.
    std::fs::write(&data, good).expect("mend it");
    let out = ended_as(&repo, &server, &["retry", &id], "succeeded");
    assert_eq!(job_doc(&out, "agent")["attempts"], 2, "{out:#}");
    let files = repo.git(&["ls-tree", "--name-only", "feature/dehydrate"]);
    assert!(
        files.lines().any(|l| l == "before.txt") && files.lines().any(|l| l == "after.txt"),
        "{files}"
    );
}
