//! [`CodexCli`]: OpenAI's Codex CLI (`codex exec`).

use orchestrator_core::plan::Env;
use orchestrator_core::runner::{LogStream, WorkFailure};
use serde_json::Value;

use super::cli::{cli_builder, CliSettings};
use super::permission::{command_prefix, is_literal, policy_note};
use super::pressure::find_file;
use super::usage::{add, count, find_text, text};
use super::{
    event_type, stdout_event, unsupported, AgentCommand, AgentRequest, AgentRunner,
    PermissionPolicy, ToolKind, Transcript,
};

/// Name of the provider a [`ModelEndpoint`](super::ModelEndpoint) becomes in `config.toml`.
const PROVIDER_ID: &str = "orchestrator";
/// Variable that carries the endpoint's API key to Codex (`env_key`).
const KEY_VAR: &str = "ORCHESTRATOR_CODEX_API_KEY";

/// Codex, run headless (stdin is closed):
///
/// ```text
/// codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
///            [--model M] [-c model_reasoning_effort=E] [--add-dir D]... <prompt>
/// codex exec <same options> resume <ID> <prompt>
/// ```
///
/// Permissions ([`AgentRequest::permissions`]), instead of
/// `--dangerously-bypass-approvals-and-sandbox`: `read-only` runs `--sandbox read-only -c
/// approval_policy="never"` (patches are rejected; shell commands still run, but cannot
/// write: Codex reads files with its shell, so they are not refused, and the log says so);
/// `no-shell` keeps the bypass and adds `--disable shell_tool` (Codex then has no way to read
/// files; noted). `ask` and rules run `--sandbox workspace-write` when every write is allowed,
/// else `--sandbox read-only` (the sandbox cannot tell paths apart), with
/// `approval_policy="never"`; deny rules of shell commands become `prefix_rule(…,
/// decision = "forbidden")` lines of `$CODEX_HOME/rules/orchestrator.rules` (Codex refuses
/// such commands, in compound command lines too, even under the bypass); when no shell
/// command is allowed, `--disable shell_tool`. Codex cannot deny the shell commands no rule
/// allows (they run in the sandbox), nor has it read, URL or MCP rules: the log names what is
/// not enforced. The rules file is written before every run, empty but for a comment
/// unless there are shell deny rules.
///
/// `CODEX_HOME=<state>/codex` holds a `config.toml` written before each run
/// (`[analytics] enabled = false`, `[features] plugins = false`). A
/// [`ModelEndpoint`](super::ModelEndpoint) (its base URL ends in `/v1`) adds
/// `model_provider = "orchestrator"`, a `[model_providers.orchestrator]` table (`base_url`,
/// `wire_api = "responses"`, `request_max_retries = 0` and `stream_max_retries = 0` — the work
/// runner retries itself — and `env_key = "ORCHESTRATOR_CODEX_API_KEY"` carrying its key) and a
/// top-level `model`: the spec's, else the endpoint's, else [`CodexCli::ENDPOINT_MODEL`]. Codex
/// only offers its file-editing tool (`apply_patch`) to models it knows, so a custom endpoint
/// must be asked for a known model slug.
///
/// MCP servers: the agents' tool server is `-c mcp_servers.orchestrator.*` settings (its token
/// in `ORCHESTRATOR_TOOLS_TOKEN`, named by `bearer_token_env_var`); the plugins' servers are
/// `[mcp_servers.<name>]` tables of `config.toml` (`command`/`args`/`env`, or `url` and
/// `http_headers`), never command-line arguments. Codex has no SSE transport: such a server
/// is left out, noted. A plugin agent's `tools` have no Codex counterpart (noted).
///
/// Output (`--json`): `thread.started` gives the session (thread) id; each `turn.completed`
/// adds its `usage` (`input_tokens` include `cached_input_tokens`) and a turn, and ends the
/// run; `turn.failed` and `error` events carry error messages (a 5xx becomes "We're currently
/// experiencing high demand", which [`classify`](super::classify) counts as transient).
/// Context ([`Transcript::context_tokens`], for [`ContextPressure`](super::ContextPressure)):
/// read after exit from the session's rollout file `$CODEX_HOME/sessions/…/rollout-…-<id>.jsonl`,
/// its `token_count` events since this run's `task_started`: `last_token_usage.input_tokens`
/// per model call, and `model_context_window` as the window.
///
/// Reply ([`Transcript::reply`]): the `text` of the last `item.completed` whose item is an
/// `agent_message` (`item_type` `assistant_message` in the format's first releases); each arrives
/// whole, and reasoning, commands and file changes are other item types.
///
/// `maxTurns` has no Codex option (noted in the log); `allowedUrls` is not enforced.
///
/// ```
/// use orchestrator_agents::agent::{AgentRequest, AgentRunner, CodexCli};
/// let mut r = AgentRequest::new("/wt", "Do it");
/// r.resume = Some("t-1".into());
/// let args = CodexCli::new().command(&r).unwrap().args_lossy();
/// assert_eq!(args[0], "exec");
/// assert!(args.ends_with(&["resume".into(), "t-1".into(), "Do it".into()]));
/// ```
#[derive(Debug, Clone)]
pub struct CodexCli {
    cli: CliSettings,
}

impl Default for CodexCli {
    fn default() -> Self {
        CodexCli {
            cli: CliSettings::new("codex", [None, None, None]),
        }
    }
}

impl CodexCli {
    /// The model asked of a custom endpoint when neither the spec nor the endpoint names one.
    pub const ENDPOINT_MODEL: &'static str = "gpt-5.5";

    /// Codex as `codex` on the child's `PATH`.
    pub fn new() -> Self {
        CodexCli::default()
    }

    /// The `config.toml` for a run whose spec (or tier) chose `model`.
    fn config_toml(&self, model: Option<&str>) -> String {
        let mut toml = String::new();
        if let Some(endpoint) = &self.cli.endpoint {
            let model = model.unwrap_or(Self::ENDPOINT_MODEL);
            toml.push_str(&format!("model = {}\n", toml_string(model)));
            toml.push_str(&format!("model_provider = \"{PROVIDER_ID}\"\n\n"));
            toml.push_str(&format!("[model_providers.{PROVIDER_ID}]\n"));
            toml.push_str(&format!("name = \"{PROVIDER_ID}\"\n"));
            toml.push_str(&format!("base_url = {}\n", toml_string(&endpoint.base_url)));
            toml.push_str("wire_api = \"responses\"\n");
            toml.push_str("request_max_retries = 0\nstream_max_retries = 0\n");
            if endpoint.api_key.is_some() {
                toml.push_str(&format!("env_key = \"{KEY_VAR}\"\n"));
            }
            toml.push('\n');
        }
        toml.push_str("[analytics]\nenabled = false\n\n[features]\nplugins = false\n");
        toml
    }
}

cli_builder!(CodexCli);

/// The execpolicy file of the session's shell deny rules, in `$CODEX_HOME/rules/`.
const RULES_FILE: &str = "orchestrator.rules";
/// How the notes name this CLI.
const CLI: &str = "Codex";
/// The log note when the shell tool is disabled.
const NO_SHELL_NOTE: &str = "Codex reads files with its shell tool only: with the shell disabled by the permission policy it cannot read files, its instructions included";

/// How a run enforces a permission policy (see [`CodexCli`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Permissions {
    /// Sandbox and approval flags.
    args: Vec<String>,
    /// The content of [`RULES_FILE`].
    rules: String,
    /// Notes for the log.
    notes: Vec<String>,
}

impl Permissions {
    fn of(policy: &PermissionPolicy) -> Permissions {
        let mut p = Permissions {
            args: Vec::new(),
            rules: "# Written by the orchestrator before each run: the shell commands the session's permission policy denies.\n".to_owned(),
            notes: Vec::new(),
        };
        let never = ["-c".to_owned(), r#"approval_policy="never""#.to_owned()];
        let disable_shell = ["--disable".to_owned(), "shell_tool".to_owned()];
        let bypass = "--dangerously-bypass-approvals-and-sandbox".to_owned();
        let Some(set) = policy.rule_set() else {
            p.args.push(bypass);
            return p;
        };
        let mut gaps = Vec::new();
        match policy {
            PermissionPolicy::ReadOnly => {
                p.args
                    .extend(["--sandbox".to_owned(), "read-only".to_owned()]);
                p.args.extend(never);
                gaps.push("shell commands are not refused but run in a read-only sandbox without network access (they can read files, not write them: Codex reads files with its shell)".to_owned());
            }
            PermissionPolicy::NoShell => {
                p.args.push(bypass);
                p.args.extend(disable_shell);
                p.notes.push(NO_SHELL_NOTE.to_owned());
            }
            _ => {
                // Writes: the sandbox allows all of them in the worktree, or none.
                let writable = set.allows_all(ToolKind::Write);
                let mode = if writable {
                    "workspace-write"
                } else {
                    "read-only"
                };
                p.args.extend(["--sandbox".to_owned(), mode.to_owned()]);
                p.args.extend(never);
                if !writable && set.denies_all(ToolKind::Write).is_none() {
                    let rules: Vec<String> = set
                        .allowed(ToolKind::Write)
                        .chain(set.denied(ToolKind::Write).map(|(r, _)| r))
                        .map(|r| format!("`{r}`"))
                        .collect();
                    gaps.push(format!("the write rules {} (Codex's sandbox cannot tell paths apart, so every write is denied)", rules.join(", ")));
                }
                // Shell commands: forbidden prefixes, or no shell at all.
                let mut shell = set.denies_all(ToolKind::Shell).is_none();
                let mut forbidden = Vec::new();
                for (rule, reason) in set.denied(ToolKind::Shell) {
                    let Some(glob) = rule.glob.as_deref() else {
                        continue;
                    };
                    let (words, exact) = match command_prefix(glob) {
                        Some(words) => (words.to_owned(), true),
                        None => (literal_words(glob), false),
                    };
                    if words.is_empty() {
                        gaps.push(format!("the deny rule `{rule}` is widened to every shell command (Codex's rules match command prefixes)"));
                        shell = false;
                    } else {
                        if !exact {
                            gaps.push(format!("the deny rule `{rule}` is widened to every command starting with `{words}` (Codex's rules match command prefixes)"));
                        }
                        forbidden.push((words, reason.to_owned()));
                    }
                }
                if shell {
                    for (words, reason) in forbidden {
                        let pattern: Vec<String> =
                            words.split_whitespace().map(starlark_string).collect();
                        p.rules.push_str(&format!(
                            "prefix_rule(pattern = [{}], decision = \"forbidden\", justification = {})\n",
                            pattern.join(", "),
                            starlark_string(&reason)
                        ));
                    }
                    if set.falls_back(ToolKind::Shell) {
                        gaps.push("shell commands that no rule allows are not denied (Codex cannot deny commands by default; they run in the sandbox)".to_owned());
                    }
                    if !set.allows_all(ToolKind::Read) {
                        gaps.push("read rules (Codex reads files with its shell, which has no read rules)".to_owned());
                    }
                } else {
                    p.args.extend(disable_shell);
                    p.notes.push(NO_SHELL_NOTE.to_owned());
                }
                if set.allowed(ToolKind::Url).next().is_some() {
                    gaps.push(
                        "URL allow rules (the sandbox keeps shell commands off the network)"
                            .to_owned(),
                    );
                }
                if set.mentions(ToolKind::Mcp) {
                    gaps.push("MCP rules (no MCP servers are configured for Codex)".to_owned());
                }
            }
        }
        p.notes.extend(policy_note(CLI, policy, &gaps));
        p
    }
}

/// The words of a shell glob before its first wildcard (`git push*` → `git`).
fn literal_words(glob: &str) -> String {
    glob.split_whitespace()
        .take_while(|w| is_literal(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A Starlark string literal (JSON string escapes are valid Starlark escapes).
fn starlark_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

use super::mcp::toml_string;

impl AgentRunner for CodexCli {
    fn command(&self, r: &AgentRequest) -> Result<AgentCommand, WorkFailure> {
        let home = r.state_dir.join("codex");
        let model = self.cli.model(r);
        let permissions = Permissions::of(&r.permissions);
        let mut cmd = AgentCommand::new(&self.cli.program)
            .args(["exec", "--json", "--skip-git-repo-check"])
            .args(&permissions.args)
            .args(&r.provider_args)
            .flag_opt("--model", model.as_deref())
            .flag_opt(
                "-c",
                r.effort_str()
                    .map(|effort| format!("model_reasoning_effort={effort}")),
            )
            .flag_each("--add-dir", &r.allowed_folders);
        if let Some(tools) = &r.tools {
            // The config names the variable holding the token, never the token itself.
            let server = format!("mcp_servers.{}", super::mcp::SERVER_NAME);
            cmd = cmd
                .flag("-c", format!("{server}.url={}", toml_string(&tools.url)))
                .flag(
                    "-c",
                    format!(
                        "{server}.bearer_token_env_var={}",
                        toml_string(super::mcp::TOKEN_VAR)
                    ),
                )
                .flag("-c", format!("{server}.required=true"))
                .env(super::mcp::TOKEN_VAR, tools.token.clone());
        }
        if let Some(session) = &r.resume {
            cmd = cmd.arg("resume").arg(session);
        }
        cmd = cmd.arg(&r.prompt);
        if r.max_turns.is_some() {
            cmd = cmd.note(unsupported("Codex", "maxTurns"));
        }
        for note in permissions.notes {
            cmd = cmd.note(note);
        }
        if !r.allowed_urls.is_empty() {
            cmd = cmd.note(unsupported(
                "Codex",
                "allowedUrls (the sandbox is bypassed)",
            ));
        }
        let (servers, server_notes) = super::mcp::codex_tables(&r.mcp_servers);
        for note in server_notes {
            cmd = cmd.note(note);
        }
        if !r.allowed_tools.is_empty() {
            cmd = cmd.note(unsupported(
                "Codex",
                "a plugin agent's tools (no allow list of tools; the sandbox is bypassed)",
            ));
        }
        cmd = cmd
            .dir(&home)
            .file(
                home.join("config.toml"),
                self.config_toml(model.as_deref()) + &servers,
            )
            .file(home.join("rules").join(RULES_FILE), permissions.rules)
            .env_path("CODEX_HOME", &home);
        if let Some(key) = self.cli.endpoint.as_ref().and_then(|e| e.api_key.as_ref()) {
            cmd = cmd.env(KEY_VAR, key);
        }
        Ok(cmd)
    }

    fn parse_line(&self, stream: LogStream, line: &str, t: &mut Transcript) {
        let Some(event) = stdout_event(stream, line) else {
            return;
        };
        match event_type(&event) {
            Some("thread.started") => t.session(text(&event, "thread_id")),
            Some("turn.completed") => {
                let u = &mut t.usage;
                if let Some(usage) = event.get("usage") {
                    add(&mut u.input_tokens, count(usage, "input_tokens"));
                    add(&mut u.cached_tokens, count(usage, "cached_input_tokens"));
                    add(&mut u.output_tokens, count(usage, "output_tokens"));
                }
                add(&mut u.turns, Some(1));
                t.finish(None);
            }
            Some("turn.failed") => {
                let message =
                    find_text(&event, &["message"]).unwrap_or_else(|| "the turn failed".into());
                t.error(message.clone());
                t.finish(Some(message));
            }
            Some("error") => {
                if let Some(message) = find_text(&event, &["message"]) {
                    t.error(message);
                }
            }
            Some("item.started") => {
                let item = event.get("item").unwrap_or(&Value::Null);
                if let Some(tool) = tool_item(item) {
                    t.tool_call(tool, item.clone());
                }
            }
            Some("item.completed") => {
                let item = event.get("item").unwrap_or(&Value::Null);
                if let Some(tool) = tool_item(item) {
                    let failed = text(item, "status").is_some_and(|s| s != "completed");
                    let output = text(item, "aggregated_output").unwrap_or_default();
                    t.tool_result(Some(tool.to_owned()), output, failed);
                }
                // The first releases of this format (autumn 2025) tagged items `item_type` and
                // named messages `assistant_message`.
                let kind = event_type(item).or_else(|| item.get("item_type")?.as_str());
                match kind {
                    Some("error") => {
                        if let Some(message) = text(item, "message") {
                            t.error(message);
                        }
                    }
                    Some("agent_message" | "assistant_message") => {
                        if let Some(reply) = text(item, "text") {
                            t.set_reply(reply);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn extra_env(&self) -> Env {
        self.cli.env.clone()
    }

    fn after_exit(&self, r: &AgentRequest, t: &mut Transcript) {
        let Some(thread) = t.usage.session_id.clone() else {
            return;
        };
        let suffix = format!("-{thread}.jsonl");
        let sessions = r.state_dir.join("codex").join("sessions");
        let rollout = find_file(&sessions, 3, &|name| {
            name.starts_with("rollout-") && name.ends_with(&suffix)
        });
        if let Some(text) = rollout.and_then(|f| std::fs::read_to_string(f).ok()) {
            add_rollout_context(&text, t);
        }
    }
}

/// Reads this run's part of a Codex rollout file (from its last `task_started` on) into `t`:
/// the context of each model call from the `token_count` events' `last_token_usage`
/// (`input_tokens` include the cached ones) and the window from `model_context_window`.
fn add_rollout_context(rollout: &str, t: &mut Transcript) {
    let events: Vec<Value> = rollout.lines().filter_map(super::json_event).collect();
    let payload_type = |e: &Value| e.get("payload").and_then(event_type).map(str::to_owned);
    let start = events
        .iter()
        .rposition(|e| payload_type(e).as_deref() == Some("task_started"))
        .unwrap_or(0);
    for event in &events[start..] {
        if payload_type(event).as_deref() != Some("token_count") {
            continue;
        }
        let Some(info) = event.pointer("/payload/info") else {
            continue;
        };
        if let Some(tokens) = info
            .get("last_token_usage")
            .and_then(|u| count(u, "input_tokens"))
        {
            t.context(tokens);
        }
        if let Some(window) = count(info, "model_context_window") {
            t.context_window = Some(window);
        }
    }
}

/// The kind of a Codex item that is a tool call (a command, a file change, an MCP tool, a web
/// search), `None` for messages, reasoning and errors.
fn tool_item(item: &Value) -> Option<&str> {
    event_type(item).filter(|kind| {
        matches!(
            *kind,
            "command_execution" | "file_change" | "mcp_tool_call" | "web_search"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{transcript_of, ModelEndpoint, ProviderKind};

    #[test]
    fn the_context_of_this_runs_calls_from_the_rollout() {
        let count = |last: u64, total: u64| {
            format!(
                r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{total}}},"last_token_usage":{{"input_tokens":{last},"cached_input_tokens":10}},"model_context_window":258400}}}}}}"#
            )
        };
        let rollout = [
            r#"{"type":"session_meta","payload":{"id":"t-1"}}"#.to_owned(),
            r#"{"type":"event_msg","payload":{"type":"task_started"}}"#.into(),
            count(190_000, 190_000),
            r#"{"type":"event_msg","payload":{"type":"task_complete"}}"#.into(),
            r#"{"type":"event_msg","payload":{"type":"task_started"}}"#.into(),
            count(50_000, 240_000),
            count(60_000, 300_000),
            r#"{"type":"event_msg","payload":{"type":"token_count","info":null}}"#.into(),
            "garbage".into(),
        ]
        .join("\n");
        let mut t = Transcript::default();
        add_rollout_context(&rollout, &mut t);
        assert_eq!(
            (t.context_tokens, t.peak_context_tokens, t.context_window),
            (Some(60_000), Some(60_000), Some(258_400)),
            "this run's calls only, not the summed totals"
        );
    }

    #[test]
    fn parses_threads_turns_and_errors() {
        let t = transcript_of(
            &CodexCli::new(),
            &[
                r#"{"type":"thread.started","thread_id":"th-9"}"#,
                r#"{"type":"turn.started"}"#,
                r#"{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"ok"}}"#,
                r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":9}}"#,
            ],
        );
        assert!(t.finished && t.result_error.is_none());
        assert_eq!(t.reply.as_deref(), Some("ok"));
        let u = &t.usage;
        assert_eq!(u.session_id.as_deref(), Some("th-9"));
        assert_eq!(
            (u.input_tokens, u.cached_tokens, u.output_tokens, u.turns),
            (Some(100), Some(40), Some(9), Some(1))
        );

        let t = transcript_of(
            &CodexCli::new(),
            &[
                r#"{"type":"turn.failed","error":{"message":"stream error: 429 Too Many Requests"}}"#,
            ],
        );
        assert_eq!(
            t.result_error.as_deref(),
            Some("stream error: 429 Too Many Requests")
        );
    }

    /// A run as `codex exec --json` prints it: a preface, reasoning, a file change, the final
    /// message.
    #[test]
    fn the_reply_is_the_last_agent_message() {
        let t = transcript_of(
            &CodexCli::new(),
            &[
                r#"{"type":"thread.started","thread_id":"01a23160-5a77-7b60-9a54-c4934485edbe"}"#,
                r#"{"type":"turn.started"}"#,
                r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"I'll add the file."}}"#,
                r#"{"type":"item.completed","item":{"id":"item_1","type":"reasoning","text":"**Writing notes**"}}"#,
                r#"{"type":"item.started","item":{"id":"item_2","type":"file_change","changes":[{"path":"/wt/notes.txt","kind":"add"}],"status":"in_progress"}}"#,
                r#"{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/wt/notes.txt","kind":"add"}],"status":"completed"}}"#,
                r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Created notes.txt.\n\nIt holds one line: `hello`."}}"#,
                r#"{"type":"turn.completed","usage":{"input_tokens":19240,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":27,"reasoning_output_tokens":0}}"#,
            ],
        );
        assert!(t.finished);
        assert_eq!(
            t.reply.as_deref(),
            Some("Created notes.txt.\n\nIt holds one line: `hello`.")
        );

        // The format's first releases: `item_type`, `assistant_message`.
        let t = transcript_of(
            &CodexCli::new(),
            &[
                r#"{"type":"item.completed","item":{"id":"item_0","item_type":"reasoning","text":"**Planning**"}}"#,
                r#"{"type":"item.completed","item":{"id":"item_1","item_type":"assistant_message","text":"Done."}}"#,
            ],
        );
        assert_eq!(t.reply.as_deref(), Some("Done."));
    }

    #[test]
    fn a_failed_turn_keeps_the_messages_before_it() {
        let t = transcript_of(
            &CodexCli::new(),
            &[
                r#"{"type":"thread.started","thread_id":"th-1"}"#,
                r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Looking at the tests first."}}"#,
                r#"{"type":"error","message":"stream disconnected before completion"}"#,
                r#"{"type":"item.completed","item":{"id":"item_1","type":"error","message":"reconnecting"}}"#,
                r#"{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}"#,
            ],
        );
        assert!(t.result_error.is_some());
        assert_eq!(t.reply.as_deref(), Some("Looking at the tests first."));
        let t = transcript_of(
            &CodexCli::new(),
            &[
                r#"{"type":"turn.failed","error":{"message":"We're currently experiencing high demand"}}"#,
            ],
        );
        assert_eq!(t.reply, None);
    }

    /// The command for `policy`: its arguments between `exec --json --skip-git-repo-check`
    /// and the prompt, its rules file and its notes.
    fn with_policy(policy: &str) -> (Vec<String>, String, Vec<String>) {
        let mut r = AgentRequest::new("/wt", "Do it");
        r.permissions = policy.parse().unwrap_or_else(|e| panic!("{e}"));
        let cmd = CodexCli::new()
            .command(&r)
            .unwrap_or_else(|e| panic!("{e}"));
        let args = cmd.args_lossy();
        let rules = cmd
            .files
            .iter()
            .find(|(path, _)| path.ends_with("codex/rules/orchestrator.rules"))
            .map(|(_, text)| text.clone())
            .unwrap_or_default();
        (args[3..args.len() - 1].to_vec(), rules, cmd.notes)
    }

    const HEADER: &str = "# Written by the orchestrator before each run: the shell commands the session's permission policy denies.\n";

    #[test]
    fn allow_all_bypasses_the_sandbox_and_clears_the_rules() {
        let (args, rules, notes) = with_policy("allow-all");
        assert_eq!(args, ["--dangerously-bypass-approvals-and-sandbox"]);
        assert_eq!(rules, HEADER, "an earlier run's rules are overwritten");
        assert!(notes.is_empty());
    }

    #[test]
    fn read_only_is_the_read_only_sandbox() {
        let (args, rules, notes) = with_policy("read-only");
        assert_eq!(
            args,
            ["--sandbox", "read-only", "-c", r#"approval_policy="never""#]
        );
        assert_eq!(rules, HEADER);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("shell commands are not refused but run in a read-only sandbox"),
            "{notes:?}"
        );
    }

    #[test]
    fn no_shell_disables_the_shell_tool() {
        let (args, _, notes) = with_policy("no-shell");
        assert_eq!(
            args,
            [
                "--dangerously-bypass-approvals-and-sandbox",
                "--disable",
                "shell_tool"
            ]
        );
        assert_eq!(notes, [NO_SHELL_NOTE]);
    }

    #[test]
    fn rules_choose_the_sandbox_and_forbid_command_prefixes() {
        let (args, rules, notes) = with_policy(
            r#"{"allow": ["read", "write", "shell:git *", "shell:cargo *"], "deny": ["shell:rm *", "shell:git push*", "shell:git reset --hard"]}"#,
        );
        assert_eq!(
            args,
            [
                "--sandbox",
                "workspace-write",
                "-c",
                r#"approval_policy="never""#
            ]
        );
        assert_eq!(
            rules,
            format!(
                "{HEADER}{}{}{}",
                "prefix_rule(pattern = [\"rm\"], decision = \"forbidden\", justification = \"the session's permission rules deny `shell:rm *`\")\n",
                "prefix_rule(pattern = [\"git\"], decision = \"forbidden\", justification = \"the session's permission rules deny `shell:git push*`\")\n",
                "prefix_rule(pattern = [\"git\", \"reset\", \"--hard\"], decision = \"forbidden\", justification = \"the session's permission rules deny `shell:git reset --hard`\")\n",
            )
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        let note = &notes[0];
        for gap in [
            "Codex cannot ask the host",
            "the deny rule `shell:git push*` is widened to every command starting with `git`",
            "the deny rule `shell:git reset --hard` is widened to every command starting with `git reset --hard`",
            "shell commands that no rule allows are not denied",
        ] {
            assert!(note.contains(gap), "{gap}: {note}");
        }
        assert!(!note.contains("read rules"), "{note}");

        // Writes by path cannot be told apart: every write is denied. No shell rule: no shell.
        let (args, rules, notes) =
            with_policy(r#"{"allow": ["write:src/**", "url"], "deny": ["mcp:x/y"]}"#);
        assert_eq!(
            args,
            [
                "--sandbox",
                "read-only",
                "-c",
                r#"approval_policy="never""#,
                "--disable",
                "shell_tool"
            ]
        );
        assert_eq!(rules, HEADER);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(notes[0], NO_SHELL_NOTE);
        for gap in [
            "the write rules `write:src/**` (Codex's sandbox cannot tell paths apart, so every write is denied)",
            "URL allow rules",
            "MCP rules",
        ] {
            assert!(notes[1].contains(gap), "{gap}: {notes:?}");
        }
    }

    #[test]
    fn ask_denies_writes_and_the_shell() {
        let (args, _, notes) = with_policy("ask");
        assert_eq!(
            args,
            [
                "--sandbox",
                "read-only",
                "-c",
                r#"approval_policy="never""#,
                "--disable",
                "shell_tool"
            ]
        );
        assert!(notes[1].contains("Codex cannot ask the host"), "{notes:?}");
    }

    #[test]
    fn config_with_an_endpoint() {
        let codex = CodexCli::new().endpoint(
            ModelEndpoint::new("http://127.0.0.1:9/v1", ProviderKind::OpenAi).api_key("k-123456"),
        );
        let toml = codex.config_toml(None);
        assert!(
            toml.starts_with("model = \"gpt-5.5\"\nmodel_provider = \"orchestrator\"\n"),
            "{toml}"
        );
        assert!(toml.contains("base_url = \"http://127.0.0.1:9/v1\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\nenv_key = \"ORCHESTRATOR_CODEX_API_KEY\"\n"), "{toml}");
        assert!(toml.ends_with("[analytics]\nenabled = false\n\n[features]\nplugins = false\n"));
        assert!(codex
            .config_toml(Some("gpt-5-codex"))
            .starts_with("model = \"gpt-5-codex\"\n"));
        let plain = CodexCli::new().config_toml(Some("gpt-5"));
        assert!(
            !plain.contains("model"),
            "no endpoint, no config model: {plain}"
        );
    }
}
