//! Permission policies (SPEC §14) enforced by the real agent CLIs — Claude Code, Copilot CLI,
//! Codex, Gemini CLI — against `orchestrator-testkit`'s scripted model server: the model asks
//! for a write or a command the policy does not allow, and the file must not appear. Each CLI
//! refuses in its own way, and the tests pin down which:
//!
//! - **removed**: the CLI takes the tool out of the model's tool list, so the model cannot
//!   even ask (the scripted model then answers that no offered tool fits);
//! - **refused**: the model calls the tool and the CLI sends back a tool result saying no
//!   (the recorded request after the call carries it).
//!
//! | test                   | Claude Code | Copilot CLI | Codex | Gemini CLI |
//! |------------------------|-------------|-------------|-------|------------|
//! | read-only, a write     | removed     | refused     | refused (read-only sandbox) | removed |
//! | no-shell, a command    | removed     | refused     | removed | removed  |
//! | rules: an allowed write, a denied write, an allowed command, a denied `rm` | run, refused, run, refused | run, refused, run, refused | refused, refused, refused (read-only sandbox: the policy's path rule), refused (`prefix_rule`) | run, refused, run, refused |
//!
//! | rules, no rule for a write | run `allowed.txt`, refused `denied.txt` ("don't ask mode") | run, refused ("no interactive user response") | refused, refused (read-only sandbox) | run, refused (the catch-all rule) |
//!
//! Controls: the rules test's allowed steps run (the same harness does write and run
//! commands), and Codex, whose rules run allows nothing, has an `allow-all` run that writes.
//!
//! The runs go through [`AgentWorkRunner`] with a wrapper runner that sets
//! [`AgentRequest::permissions`] (the work spec has no permissions field). The CLIs are found
//! in `$AGENT_CLIS_BIN` or `<workspace>/.agent-clis/bin`; a test whose CLI is missing says so on
//! stderr and passes. Everything is offline: the CLIs only talk to the server on 127.0.0.1.
#![cfg(unix)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::clis::runner_for;
use common::installed;
use orchestrator_agents::agent::{
    AgentCommand, AgentRequest, AgentRunner, AgentWorkRunner, FailureClass, PermissionPolicy,
    RetryPolicy, Transcript,
};
use orchestrator_core::plan::{AgentSpec, Env, WorkSpec};
use orchestrator_core::runner::{LogStream, WorkFailure};
use orchestrator_core::WorkRunner;
use orchestrator_testkit::tools::{SHELL_TOOLS, WRITE_TOOLS};
use orchestrator_testkit::{wire, Conversation, ModelServer, RecordedRequest, Script};
use serde_json::Value;

/// The real CLIs are heavy (Node.js, a few hundred MB of memory each): one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Longest one agent run may take.
const AGENT_TIMEOUT_MS: u64 = 90_000;

/// A runner that runs `inner` with `policy` as the request's permissions.
#[derive(Debug)]
struct WithPolicy {
    inner: Arc<dyn AgentRunner>,
    policy: PermissionPolicy,
}

impl AgentRunner for WithPolicy {
    fn command(&self, request: &AgentRequest) -> Result<AgentCommand, WorkFailure> {
        let mut request = request.clone();
        request.permissions = self.policy.clone();
        self.inner.command(&request)
    }

    fn parse_line(&self, stream: LogStream, line: &str, transcript: &mut Transcript) {
        self.inner.parse_line(stream, line, transcript);
    }

    fn extra_env(&self) -> Env {
        self.inner.extra_env()
    }

    fn after_exit(&self, request: &AgentRequest, transcript: &mut Transcript) {
        self.inner.after_exit(request, transcript);
    }

    fn session_lost(&self, transcript: &Transcript) -> bool {
        self.inner.session_lost(transcript)
    }

    fn classify(&self, exit_code: Option<i32>, transcript: &Transcript) -> FailureClass {
        self.inner.classify(exit_code, transcript)
    }
}

/// One finished run.
struct Run {
    /// The worktree (a temporary directory).
    dir: tempfile::TempDir,
    /// The phase log.
    log: String,
    /// The agent's reply, when the run succeeded.
    reply: Option<String>,
    /// The model requests that offered tools (the conversation), in order.
    calls: Vec<(RecordedRequest, Conversation)>,
}

impl Run {
    fn exists(&self, file: &str) -> bool {
        self.dir.path().join(file).exists()
    }

    /// What the CLI answered to the model's step `k`: the last tool result of the first
    /// request holding `k + 1` results; `None` when the model never got to call a tool for it.
    fn result_of(&self, k: usize) -> Option<String> {
        self.calls
            .iter()
            .find(|(_, c)| c.results_since_prompt == k + 1)
            .and_then(|(r, _)| tool_results(&r.body).pop())
    }

    /// Whether some request offered one of `tools`.
    fn offered(&self, tools: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = self
            .calls
            .iter()
            .flat_map(|(_, c)| c.tool_names().into_iter().map(str::to_owned))
            .filter(|name| tools.contains(&name.as_str()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The run, for failure messages.
    fn describe(&self) -> String {
        let calls: Vec<String> = self
            .calls
            .iter()
            .map(|(r, c)| {
                format!(
                    "{} -> {} (results {}; tools {}; last result {:?})",
                    r.path,
                    r.answer,
                    c.results_since_prompt,
                    c.tool_names().join(","),
                    tool_results(&r.body).pop()
                )
            })
            .collect();
        format!(
            "reply: {:?}\nlog:\n{}\nmodel calls:\n{}",
            self.reply,
            self.log,
            calls.join("\n")
        )
    }
}

/// Runs `cli` once with `policy` on `script` in a fresh directory holding `keep.txt`.
async fn run(cli: &str, program: &Path, script: Script, policy: PermissionPolicy) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    run_in(dir, cli, program, script, policy).await
}

/// Runs `cli` once with `policy` on `script` in `dir`, after writing `keep.txt` there.
async fn run_in(
    dir: tempfile::TempDir,
    cli: &str,
    program: &Path,
    script: Script,
    policy: PermissionPolicy,
) -> Run {
    let started = Instant::now();
    let server = ModelServer::start(script.final_text("Finished."))
        .await
        .expect("model server");
    let runner = WithPolicy {
        inner: runner_for(cli, program, &server),
        policy: policy.clone(),
    };
    let agents = AgentWorkRunner::empty()
        .register(cli, runner)
        .default_agent(cli)
        .retry(RetryPolicy::new(1, Duration::from_millis(500)));
    std::fs::write(dir.path().join("keep.txt"), "keep\n").expect("keep.txt");
    let spec = WorkSpec::Agent(Box::new(AgentSpec {
        agent: Some(cli.into()),
        instructions: Some("Do what the scripted model does.".into()),
        timeout: Some(AGENT_TIMEOUT_MS),
        ..AgentSpec::default()
    }));
    let ctx = common::ctx(dir.path());
    let result = agents.run(&spec, &ctx).await;
    let log = ctx.log.take();
    let calls = server
        .requests()
        .into_iter()
        .filter_map(|r| {
            let c = conversation_of(&r)?;
            (!c.tools.is_empty()).then_some((r, c))
        })
        .collect();
    let run = Run {
        dir,
        log,
        reply: result.as_ref().ok().and_then(|o| o.output.clone()),
        calls,
    };
    eprintln!(
        "{cli} with `{policy}` in {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        run.describe()
            .lines()
            .filter(|l| l.contains(" -> "))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    if let Err(e) = &result {
        panic!("{cli}: the run failed: {e}\n{}", run.describe());
    }
    run
}

/// The conversation of a model request, in its wire format; `None` for other requests.
fn conversation_of(r: &RecordedRequest) -> Option<Conversation> {
    if r.method != "POST" {
        return None;
    }
    let len = r.body.to_string().len();
    let path = r.path.trim_end_matches('/');
    if path.ends_with("/messages") {
        Some(wire::anthropic::conversation(&r.body, len))
    } else if path.ends_with("/responses") {
        Some(wire::responses::conversation(&r.body, len))
    } else if path.ends_with("/chat/completions") {
        Some(wire::chat::conversation(&r.body, len))
    } else {
        let (model, action) = path.rsplit_once("/models/")?.1.split_once(':')?;
        (action != "countTokens")
            .then(|| wire::gemini::conversation(&r.body, len, model, action.starts_with("stream")))
    }
}

/// The tool results a model request carries, in order, as text (Anthropic `tool_result`
/// blocks, Responses `*_call_output` items, Chat Completions `tool` messages, Gemini
/// `functionResponse` parts).
fn tool_results(body: &Value) -> Vec<String> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    };
    let list = |key: &str| body.get(key).and_then(Value::as_array).cloned();
    let mut out = Vec::new();
    for message in list("messages").unwrap_or_default() {
        if message.get("role").and_then(Value::as_str) == Some("tool") {
            out.push(text(message.get("content").unwrap_or(&Value::Null)));
        }
        for block in message
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                out.push(text(block.get("content").unwrap_or(&Value::Null)));
            }
        }
    }
    for item in list("input").unwrap_or_default() {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind.ends_with("call_output") {
            out.push(text(item.get("output").unwrap_or(&Value::Null)));
        }
    }
    for content in list("contents").unwrap_or_default() {
        for part in content
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(response) = part.get("functionResponse") {
                out.push(text(response.get("response").unwrap_or(&Value::Null)));
            }
        }
    }
    out
}

/// How a CLI kept the model from doing a step.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    /// The tool was taken out of the model's tools: the model could not call it.
    Removed,
    /// The model called the tool and got this text (a part of it) back.
    Refused(&'static str),
}

/// Asserts that step `k` of `run` was kept from running as `how` says.
fn assert_refused(cli: &str, run: &Run, k: usize, how: Refusal, tools: &[&str]) {
    match how {
        Refusal::Removed => {
            assert_eq!(
                run.result_of(k),
                None,
                "{cli}: step {k} had a tool to call\n{}",
                run.describe()
            );
            assert_eq!(
                run.offered(tools),
                Vec::<String>::new(),
                "{cli}: the tools are not offered\n{}",
                run.describe()
            );
            let reply = run.reply.as_deref().unwrap_or_default();
            assert!(
                reply.starts_with(&format!("testkit: no offered tool fits step {k}")),
                "{cli}: the model had no tool for step {k}\n{}",
                run.describe()
            );
        }
        Refusal::Refused(says) => {
            let result = run.result_of(k).unwrap_or_else(|| {
                panic!("{cli}: no tool result for step {k}\n{}", run.describe())
            });
            assert!(
                result.contains(says),
                "{cli}: step {k}'s result should say `{says}`: {result}\n{}",
                run.describe()
            );
        }
    }
}

/// Read-only: the model asks to write `denied.txt`; the file never appears.
async fn read_only_refuses_a_write(cli: &str, how: Refusal) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let script = Script::new().write_file("denied.txt", "x\n");
    let run = run(cli, &program, script, PermissionPolicy::ReadOnly).await;
    assert!(
        !run.exists("denied.txt"),
        "{cli}: wrote\n{}",
        run.describe()
    );
    // With the file tools gone the testkit falls back to a shell heredoc: neither is offered.
    let tools = [WRITE_TOOLS, SHELL_TOOLS].concat();
    assert_refused(cli, &run, 0, how, &tools);
}

/// No-shell: the model asks to run `echo hi > shell.txt`; the file never appears.
async fn no_shell_refuses_a_command(cli: &str, how: Refusal) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let script = Script::new().shell("echo hi > shell.txt");
    let run = run(cli, &program, script, PermissionPolicy::NoShell).await;
    assert!(!run.exists("shell.txt"), "{cli}: ran\n{}", run.describe());
    assert_refused(cli, &run, 0, how, SHELL_TOOLS);
}

/// The rules of [`rules_allow_and_deny`].
const RULES: &str =
    r#"{"allow": ["read", "write", "shell"], "deny": ["write:denied.txt", "shell:rm *"]}"#;

/// Rules: allowed and denied writes and commands in one run. `refusals[k]` is how step `k`
/// (write `allowed.txt`, write `denied.txt`, `touch shell.txt`, `rm -f keep.txt`) is refused,
/// `None` when it runs.
async fn rules_allow_and_deny(cli: &str, refusals: [Option<&'static str>; 4]) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let script = Script::new()
        .write_file("allowed.txt", "allowed\n")
        .write_file("denied.txt", "denied\n")
        .shell("touch shell.txt")
        .shell("rm -f keep.txt");
    let policy: PermissionPolicy = RULES.parse().expect("rules");
    let run = run(cli, &program, script, policy).await;
    assert!(
        run.log
            .contains("cannot ask the host about tool requests here"),
        "{cli}: the log says what `ask` becomes\n{}",
        run.describe()
    );
    let files = ["allowed.txt", "denied.txt", "shell.txt"];
    for (k, refusal) in refusals.iter().enumerate() {
        match refusal {
            Some(says) => assert_refused(cli, &run, k, Refusal::Refused(says), &[]),
            None => assert!(
                run.result_of(k).is_some(),
                "{cli}: step {k} ran\n{}",
                run.describe()
            ),
        }
        if let Some(file) = files.get(k) {
            assert_eq!(
                run.exists(file),
                refusal.is_none(),
                "{cli}: {file}\n{}",
                run.describe()
            );
        }
    }
    assert!(
        run.exists("keep.txt"),
        "{cli}: `rm` ran\n{}",
        run.describe()
    );
}

/// Rules whose allow rules do not cover a request: what would be asked is denied. Step 0
/// writes `allowed.txt` (allowed by a rule), step 1 `denied.txt` (no rule: asked, so denied);
/// `refusals` as in [`rules_allow_and_deny`].
async fn what_no_rule_allows_is_denied(cli: &str, refusals: [Option<&'static str>; 2]) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed(cli) else {
        return;
    };
    let script = Script::new()
        .write_file("allowed.txt", "allowed\n")
        .write_file("denied.txt", "denied\n");
    let policy: PermissionPolicy = r#"{"allow": ["read", "write:allowed.txt"]}"#
        .parse()
        .expect("rules");
    let run = run(cli, &program, script, policy).await;
    for (k, (refusal, file)) in refusals
        .iter()
        .zip(["allowed.txt", "denied.txt"])
        .enumerate()
    {
        if let Some(says) = refusal {
            assert_refused(cli, &run, k, Refusal::Refused(says), &[]);
        }
        assert_eq!(
            run.exists(file),
            refusal.is_none(),
            "{cli}: {file}\n{}",
            run.describe()
        );
    }
}

#[tokio::test]
async fn claude_code_denies_what_no_rule_allows() {
    what_no_rule_allows_is_denied("claude", [None, Some("don't ask mode")]).await;
}

#[tokio::test]
async fn copilot_denies_what_no_rule_allows() {
    what_no_rule_allows_is_denied(
        "copilot",
        [
            None,
            Some("Permission denied because no interactive user response was available"),
        ],
    )
    .await;
}

#[tokio::test]
async fn codex_denies_what_no_rule_allows() {
    what_no_rule_allows_is_denied(
        "codex",
        [
            Some("writing is blocked by read-only sandbox"),
            Some("writing is blocked by read-only sandbox"),
        ],
    )
    .await;
}

#[tokio::test]
async fn gemini_denies_what_no_rule_allows() {
    what_no_rule_allows_is_denied(
        "gemini",
        [
            None,
            Some(
                "no permission rule of the session allows this, and the host cannot be asked here",
            ),
        ],
    )
    .await;
}

/// `ask` denies Gemini CLI every tool but `read_file` of its own instructions.
#[tokio::test]
async fn gemini_ask_reads_only_its_instructions() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed("gemini") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let instructions = dir
        .path()
        .join(".orchestrator/agent/work-1/instructions.md");
    let read = |path: &Path| serde_json::json!({ "file_path": path.display().to_string() });
    let script = Script::new()
        .tool("read_file", read(&instructions))
        .tool("read_file", read(&dir.path().join("keep.txt")));
    let run = run_in(dir, "gemini", &program, script, PermissionPolicy::Ask).await;
    let first = run.result_of(0).unwrap_or_default();
    assert!(
        first.contains("Do what the scripted model does."),
        "the instructions were read: {first}\n{}",
        run.describe()
    );
    assert_refused(
        "gemini",
        &run,
        1,
        Refusal::Refused("the host cannot be asked here"),
        &[],
    );
    assert_eq!(
        run.offered(&["read_file", "write_file", "run_shell_command"]),
        ["read_file"],
        "{}",
        run.describe()
    );
}

#[tokio::test]
async fn claude_code_read_only_removes_the_file_tools() {
    read_only_refuses_a_write("claude", Refusal::Removed).await;
}

#[tokio::test]
async fn copilot_read_only_refuses_a_write() {
    read_only_refuses_a_write(
        "copilot",
        Refusal::Refused("denied due to the following rules: `write`"),
    )
    .await;
}

#[tokio::test]
async fn codex_read_only_refuses_a_write() {
    read_only_refuses_a_write(
        "codex",
        Refusal::Refused("writing is blocked by read-only sandbox"),
    )
    .await;
}

#[tokio::test]
async fn gemini_read_only_removes_the_file_tools() {
    read_only_refuses_a_write("gemini", Refusal::Removed).await;
}

#[tokio::test]
async fn claude_code_no_shell_removes_bash() {
    no_shell_refuses_a_command("claude", Refusal::Removed).await;
}

#[tokio::test]
async fn copilot_no_shell_refuses_a_command() {
    no_shell_refuses_a_command(
        "copilot",
        Refusal::Refused("denied due to the following rules: `shell`"),
    )
    .await;
}

#[tokio::test]
async fn codex_no_shell_removes_the_shell_tool() {
    no_shell_refuses_a_command("codex", Refusal::Removed).await;
}

#[tokio::test]
async fn gemini_no_shell_removes_the_shell_tool() {
    no_shell_refuses_a_command("gemini", Refusal::Removed).await;
}

#[tokio::test]
async fn claude_code_rules_allow_and_deny() {
    rules_allow_and_deny(
        "claude",
        [
            None,
            Some("denied by your permission settings"),
            None,
            Some("Permission to use Bash with command rm -f keep.txt has been denied"),
        ],
    )
    .await;
}

#[tokio::test]
async fn copilot_rules_allow_and_deny() {
    rules_allow_and_deny(
        "copilot",
        [
            None,
            Some("denied.txt)`"),
            None,
            Some("denied due to the following rules: `shell(rm:*)`"),
        ],
    )
    .await;
}

/// Codex's sandbox cannot tell paths apart: with a deny rule on one path, every write is
/// refused (the log says so); `rm` is refused by its `prefix_rule`.
#[tokio::test]
async fn codex_rules_refuse_writes_by_path_wholesale() {
    rules_allow_and_deny(
        "codex",
        [
            Some("writing is blocked by read-only sandbox"),
            Some("writing is blocked by read-only sandbox"),
            Some("Read-only file system"),
            Some("the session's permission rules deny `shell:rm *`"),
        ],
    )
    .await;
}

#[tokio::test]
async fn gemini_rules_allow_and_deny() {
    rules_allow_and_deny(
        "gemini",
        [
            None,
            Some("the session's permission rules deny `write:denied.txt`"),
            None,
            Some("the session's permission rules deny `shell:rm *`"),
        ],
    )
    .await;
}

/// The control for Codex, whose rules run allows nothing: the same harness with `allow-all`
/// writes the file and runs the command.
#[tokio::test]
async fn codex_allow_all_writes_and_runs_commands() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(program) = installed("codex") else {
        return;
    };
    let script = Script::new()
        .write_file("denied.txt", "x\n")
        .shell("echo hi > shell.txt");
    let run = run("codex", &program, script, PermissionPolicy::AllowAll).await;
    assert!(run.exists("denied.txt"), "{}", run.describe());
    assert!(run.exists("shell.txt"), "{}", run.describe());
    assert!(
        run.log
            .contains("--dangerously-bypass-approvals-and-sandbox"),
        "{}",
        run.log
    );
}
