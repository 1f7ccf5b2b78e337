//! [`ClaudeCode`]: Anthropic's Claude Code CLI.

use orchestrator_core::plan::Env;
use orchestrator_core::runner::{LogStream, WorkFailure};
use serde_json::Value;

use super::cli::{cli_builder, CliSettings};
use super::permission::{is_literal, policy_note_for};
use super::usage::{count, text};
use super::{
    event_type, stdout_event, unsupported, AgentCommand, AgentRequest, AgentRunner, Permission,
    PermissionPolicy, PermissionRequest, PermissionRule, ToolKind, Transcript,
};

/// Claude Code, run headless:
///
/// ```text
/// claude -p <prompt> --output-format stream-json --verbose --dangerously-skip-permissions
///        [--model M] [--effort E] [--max-turns N] [--resume ID] [--add-dir D]...
/// ```
///
/// Permissions ([`AgentRequest::permissions`]): `read-only` and `no-shell` keep
/// `--dangerously-skip-permissions` and add `--disallowedTools` with the file-editing tools
/// (`Edit`, `Write`, `MultiEdit`, `NotebookEdit`, `EnterWorktree`) and the command-running
/// ones (`Bash`, `Monitor`, `PowerShell`), which Claude Code then removes from the model's
/// tools. `ask` and rules run in `--permission-mode dontAsk` (whatever no rule allows is
/// denied) with `--allowedTools`/`--disallowedTools` patterns: `Read(glob)`, `Edit(glob)` (all
/// file edits), `Bash(glob)`, `WebFetch`/`WebSearch`, `mcp__server[__tool]`. Claude Code never
/// asks about reads inside its working directories, so those are only denied by a deny rule
/// (the log says so).
///
/// MCP servers: the agents' tool server ([`AgentRequest::tools`]) and the plugins' servers
/// ([`AgentRequest::mcp_servers`]) go in `<run>/mcp.json`, passed as `--mcp-config=<file>`. A
/// plugin agent's tools ([`AgentRequest::allowed_tools`]) are passed as `--allowedTools T...`
/// and their built-in names, with `Read`, as `--tools=...` (the built-in tools the model gets).
///
/// Environment: `CLAUDE_CONFIG_DIR=<state>/claude`, `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`,
/// `DISABLE_AUTOUPDATER=1`, `CLAUDE_CODE_MAX_RETRIES=0` (the work runner retries itself, with
/// its own backoff) and, when running as root, `IS_SANDBOX=1` (Claude Code refuses
/// `--dangerously-skip-permissions` as root otherwise). A [`ModelEndpoint`](super::ModelEndpoint)
/// sets `ANTHROPIC_BASE_URL` and `ANTHROPIC_API_KEY`.
///
/// Output (`stream-json`): `system`/`init` gives the session id and model; the final `result`
/// event gives `is_error`, `num_turns`, `duration_ms`, `total_cost_usd` and `usage`
/// (`inputTokens` = `input_tokens` + `cache_creation_input_tokens` + `cache_read_input_tokens`,
/// `cachedTokens` = `cache_read_input_tokens`); the cost is this run's, from
/// `model_usage_since_last_result` (`total_cost_usd` adds up a resumed session's earlier runs
/// too), else `total_cost_usd`. A failed API call ends with an `is_error`
/// result whose `result` is `API Error: <status> <message>` and whose `api_error_status` is
/// the HTTP status (exit code 1); the status decides whether the work runner retries.
///
/// Context ([`Transcript::context_tokens`], for [`ContextPressure`](super::ContextPressure)):
/// each main-agent `assistant` event carries its model call's `message.usage`; the context
/// size is its `input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens`
/// (subagents' events and the synthetic message of a failed call are left out). The window:
/// the result's `modelUsage.<model>.contextWindow`.
///
/// Reply ([`Transcript::reply`]): the successful `result` event's `result` text; until it
/// comes (a run cut short has none), the text blocks of the main agent's last `assistant`
/// event (not a subagent's, whose events carry a `parent_tool_use_id`, nor the synthetic
/// message of a failed API call). An error result's `result` is its error, not a reply.
///
/// Tiers: `fast` = `haiku`, `standard` = `sonnet`, `premium` = `opus` (Claude Code's aliases).
///
/// ```
/// use orchestrator_agents::agent::{AgentRequest, AgentRunner, ClaudeCode};
/// let mut r = AgentRequest::new("/wt", "Do it");
/// r.model = Some("sonnet".into());
/// r.resume = Some("abc".into());
/// let cmd = ClaudeCode::new().command(&r).unwrap();
/// assert_eq!(&cmd.args_lossy()[..2], ["-p", "Do it"]);
/// assert!(cmd.args_lossy().ends_with(&["--model".into(), "sonnet".into(), "--resume".into(), "abc".into()]));
/// ```
#[derive(Debug, Clone)]
pub struct ClaudeCode {
    cli: CliSettings,
}

impl Default for ClaudeCode {
    fn default() -> Self {
        ClaudeCode {
            cli: CliSettings::new("claude", [Some("haiku"), Some("sonnet"), Some("opus")]),
        }
    }
}

impl ClaudeCode {
    /// Claude Code as `claude` on the child's `PATH`.
    pub fn new() -> Self {
        ClaudeCode::default()
    }
}

cli_builder!(ClaudeCode);

impl AgentRunner for ClaudeCode {
    fn command(&self, r: &AgentRequest) -> Result<AgentCommand, WorkFailure> {
        let config = r.state_dir.join("claude");
        let mut notes = Vec::new();
        let permissions = permission_args(&r.permissions, r.ask_host, &mut notes);
        let mut cmd = AgentCommand::new(&self.cli.program).arg("-p");
        if r.ask_host || r.live {
            // The prompt, steering and the answers to its permission requests go in on stdin.
            cmd = cmd
                .args(["--input-format", "stream-json"])
                .args(["--permission-prompt-tool", "stdio"])
                .input(user_message(&r.prompt));
        } else {
            cmd = cmd.arg(&r.prompt);
        }
        let mut cmd = cmd
            .args(["--output-format", "stream-json", "--verbose"])
            .args(permissions)
            .flag_opt("--model", self.cli.model(r))
            .flag_opt("--effort", r.effort_str())
            .flag_opt("--max-turns", r.max_turns.map(|n| n.to_string()))
            .flag_opt("--resume", r.resume.as_deref())
            .flag_each("--add-dir", &r.allowed_folders);
        let servers = super::mcp::all_servers(r, super::mcp::Format::Claude);
        if !servers.is_empty() {
            // `--mcp-config` takes several values: `=` keeps it from taking the next argument.
            let file = r.run_dir.join("mcp.json");
            let config = serde_json::json!({ "mcpServers": servers });
            let mut arg = std::ffi::OsString::from("--mcp-config=");
            arg.push(&file);
            cmd = cmd
                .dir(&r.run_dir)
                .file(file, format!("{config:#}\n"))
                .arg(arg);
        }
        if r.tools.is_some() {
            // Our few tools are offered with their schemas, not behind a tool search.
            cmd = cmd.env("ENABLE_TOOL_SEARCH", "false");
            if r.permissions.rule_set().is_some() {
                // Our own tools pass whatever the policy says of the others.
                cmd = cmd.args(["--allowedTools", "mcp__orchestrator"]);
            }
        }
        if !r.allowed_tools.is_empty() {
            cmd = cmd
                .arg("--allowedTools")
                .args(&r.allowed_tools)
                .arg(format!(
                    "--tools={}",
                    built_in_tools(&r.allowed_tools).join(",")
                ));
        }
        if !r.allowed_urls.is_empty() {
            cmd = cmd.note(unsupported(
                "Claude Code",
                "allowedUrls (every tool is approved)",
            ));
        }
        for note in notes {
            cmd = cmd.note(note);
        }
        cmd = cmd
            .dir(&config)
            .env_path("CLAUDE_CONFIG_DIR", &config)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_MAX_RETRIES", "0");
        if running_as_root() {
            cmd = cmd.env("IS_SANDBOX", "1");
        }
        Ok(self
            .cli
            .endpoint_env(cmd, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"))
    }

    fn asks_host(&self) -> bool {
        true
    }

    fn live_input(&self) -> bool {
        true
    }

    fn live_lines(&self, text: &str) -> Option<Vec<String>> {
        let interrupt = serde_json::json!({
            "type": "control_request",
            "request_id": format!("steer-{}", crate::session::steer::stamp()),
            "request": {"subtype": "interrupt"},
        });
        Some(vec![interrupt.to_string(), user_message(text)])
    }

    fn permission_reply(
        &self,
        request: &PermissionRequest,
        decision: &Permission,
    ) -> Option<String> {
        let response = match decision {
            Permission::Allow => {
                serde_json::json!({"behavior": "allow", "updatedInput": request.input})
            }
            Permission::Deny { reason } => {
                serde_json::json!({"behavior": "deny", "message": reason})
            }
            _ => return None,
        };
        let reply = serde_json::json!({
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request.id, "response": response},
        });
        Some(reply.to_string())
    }

    fn parse_line(&self, stream: LogStream, line: &str, t: &mut Transcript) {
        let Some(event) = stdout_event(stream, line) else {
            return;
        };
        t.session(text(&event, "session_id"));
        match event_type(&event) {
            Some("system") if t.usage.model.is_none() => {
                t.usage.model = text(&event, "model");
            }
            Some("assistant") => {
                // A failed API call becomes a synthetic assistant message: `"error"` holds a
                // category (often just "unknown"), the text holds "API Error: <status> ...".
                if let Some(error) = text(&event, "error") {
                    t.error(message_text(&event).unwrap_or(error));
                } else if is_main_agent(&event) {
                    for block in content_blocks(&event, "tool_use") {
                        let name = text(block, "name").unwrap_or_default();
                        t.tool_call(name, block.get("input").cloned().unwrap_or(Value::Null));
                    }
                    // The reply until the result event says it (a run may end without one).
                    if let Some(reply) = message_text(&event) {
                        t.set_reply(reply);
                    }
                    if let Some(tokens) = context_size(&event) {
                        t.context(tokens);
                    }
                }
            }
            Some("control_request") => {
                if let Some(request) = permission_request(&event) {
                    t.permission_request(request);
                }
            }
            Some("user") if is_main_agent(&event) => {
                for block in content_blocks(&event, "tool_result") {
                    let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
                    let output = match block.get("content") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => {
                            super::usage::find_text(other, &["text"]).unwrap_or_default()
                        }
                        None => String::new(),
                    };
                    t.tool_result(None, output, is_error);
                }
            }
            Some("result") => {
                let is_error = event.get("is_error").and_then(Value::as_bool) == Some(true)
                    || text(&event, "subtype").is_some_and(|s| s != "success");
                if let Some(status) = event.get("api_error_status").and_then(Value::as_u64) {
                    t.error(format!("API error status {status}"));
                }
                let u = &mut t.usage;
                u.turns = count(&event, "num_turns").and_then(|n| u32::try_from(n).ok());
                u.duration_ms = count(&event, "duration_ms");
                // `total_cost_usd` (like `modelUsage`) adds up the whole session, earlier runs
                // of a resumed one included; `model_usage_since_last_result` is this run's.
                u.cost_usd = run_cost(&event)
                    .or_else(|| event.get("total_cost_usd").and_then(Value::as_f64));
                if let Some(usage) = event.get("usage") {
                    let fresh = count(usage, "input_tokens").unwrap_or(0);
                    let created = count(usage, "cache_creation_input_tokens").unwrap_or(0);
                    let read = count(usage, "cache_read_input_tokens");
                    u.input_tokens = Some(fresh + created + read.unwrap_or(0));
                    u.cached_tokens = read;
                    u.output_tokens = count(usage, "output_tokens");
                }
                t.context_window = context_window(&event, t.usage.model.as_deref());
                let result = text(&event, "result").filter(|r| !r.is_empty());
                if !is_error {
                    if let Some(reply) = &result {
                        t.set_reply(reply.as_str());
                    }
                }
                let error = is_error.then(|| {
                    result
                        .or_else(|| text(&event, "subtype"))
                        .unwrap_or_else(|| "the result reports an error".into())
                });
                t.finish(error);
            }
            _ => {}
        }
    }

    fn extra_env(&self) -> Env {
        self.cli.env.clone()
    }
}

/// The built-in tools of a plugin agent's `tools` (`Bash(git *)` is `Bash`; `mcp__...` are
/// MCP tools, not built in), plus `Read`, which every run needs for its instructions file.
fn built_in_tools(tools: &[String]) -> Vec<String> {
    let mut names = vec!["Read".to_owned()];
    for tool in tools {
        let name = tool.split('(').next().unwrap_or(tool).trim();
        if !name.is_empty() && !name.starts_with("mcp__") && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// Claude Code's tools that change files (`EnterWorktree` creates a git worktree and branch).
const EDIT_TOOLS: [&str; 5] = [
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "EnterWorktree",
];
/// Claude Code's tools that run commands.
const SHELL_TOOLS: [&str; 3] = ["Bash", "Monitor", "PowerShell"];
/// How the notes name this CLI.
const CLI: &str = "Claude Code";

/// The permission flags for `policy` (see [`ClaudeCode`]); what they cannot enforce goes to
/// `notes`.
fn permission_args(
    policy: &PermissionPolicy,
    ask_host: bool,
    notes: &mut Vec<String>,
) -> Vec<String> {
    let skip = "--dangerously-skip-permissions".to_owned();
    let Some(set) = policy.rule_set() else {
        return vec![skip];
    };
    if matches!(
        policy,
        PermissionPolicy::ReadOnly | PermissionPolicy::NoShell
    ) {
        // Only whole kinds are denied: everything else still runs unasked.
        let mut args = vec![skip, "--disallowedTools".to_owned()];
        for (rule, _) in &set.deny {
            args.extend(whole_kind(rule.kind).unwrap_or_default());
        }
        return args;
    }
    let mut t = set.translate(CLI, patterns, whole_kind);
    if set.falls_back(ToolKind::Read) {
        t.gaps.push(
            "reads inside the working directories that no rule allows are not denied (Claude Code never asks about them)"
                .to_owned(),
        );
    }
    notes.extend(policy_note_for(CLI, policy, &t.gaps, ask_host));
    // What no rule decides is refused (`dontAsk`), or asked of the host when it answers.
    let mode = if ask_host { "default" } else { "dontAsk" };
    let mut args = vec!["--permission-mode".to_owned(), mode.to_owned()];
    if !t.allow.is_empty() {
        args.push("--allowedTools".to_owned());
        args.extend(t.allow);
    }
    if !t.deny.is_empty() {
        args.push("--disallowedTools".to_owned());
        args.extend(t.deny.into_iter().map(|(pattern, _)| pattern));
    }
    args
}

/// The patterns denying every request of `kind`; MCP tools have none, but `dontAsk` denies
/// them once no rule allows them.
fn whole_kind(kind: ToolKind) -> Option<Vec<String>> {
    let names: &[&str] = match kind {
        ToolKind::Read => &["Read"],
        ToolKind::Write => &EDIT_TOOLS,
        ToolKind::Shell => &SHELL_TOOLS,
        ToolKind::Url => &["WebFetch", "WebSearch"],
        _ => &[],
    };
    Some(names.iter().map(|&n| n.to_owned()).collect())
}

/// Claude Code's patterns matching exactly what `rule` matches.
fn patterns(rule: &PermissionRule, _deny: bool) -> Option<Vec<String>> {
    let Some(glob) = rule.glob.as_deref() else {
        return match rule.kind {
            // Allowing the shell allows `Bash`, not the background `Monitor`.
            ToolKind::Shell => Some(vec!["Bash".to_owned()]),
            ToolKind::Mcp => None,
            kind => whole_kind(kind),
        };
    };
    // Claude Code's paths: `//abs` is absolute, `path` relative to the working directory.
    let path = |tool: &str| {
        let prefix = if glob.starts_with('/') { "/" } else { "" };
        vec![format!("{tool}({prefix}{glob})")]
    };
    match rule.kind {
        ToolKind::Read => Some(path("Read")),
        ToolKind::Write => Some(path("Edit")),
        // `*` is any text in Claude Code's Bash patterns too; it has no `?`.
        ToolKind::Shell if !glob.contains('?') => {
            Some(vec![format!("Bash({})", glob.replace("**", "*"))])
        }
        ToolKind::Mcp => {
            let (server, tool) = glob.split_once('/')?;
            if !is_literal(server) || server.is_empty() {
                return None;
            }
            match tool {
                "*" | "**" => Some(vec![format!("mcp__{server}")]),
                tool if is_literal(tool) && !tool.is_empty() && !tool.contains('/') => {
                    Some(vec![format!("mcp__{server}__{tool}")])
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The cost of this run: the `costUSD` of each model in the result's
/// `model_usage_since_last_result`, summed.
fn run_cost(result: &Value) -> Option<f64> {
    let models = result.get("model_usage_since_last_result")?.as_object()?;
    let costs: Vec<f64> = models
        .values()
        .filter_map(|m| m.get("costUSD").and_then(Value::as_f64))
        .collect();
    (!costs.is_empty()).then(|| costs.iter().sum())
}

/// The context size of the model call an assistant event belongs to: its message's
/// `input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens` (each event of
/// one message repeats the message's usage).
fn context_size(event: &Value) -> Option<u64> {
    let usage = event.get("message")?.get("usage")?;
    let parts = [
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ]
    .map(|key| count(usage, key));
    parts
        .iter()
        .any(Option::is_some)
        .then(|| parts.iter().flatten().sum())
}

/// The context window the result's `modelUsage` gives for `model` (else for its only model).
fn context_window(result: &Value, model: Option<&str>) -> Option<u64> {
    let models = result.get("modelUsage")?.as_object()?;
    let entry = match model.and_then(|m| models.get(m)) {
        Some(entry) => entry,
        None if models.len() == 1 => models.values().next()?,
        None => return None,
    };
    count(entry, "contextWindow")
}

/// Whether an event is the main agent's, not a subagent's (whose events name the `Task`
/// tool call they run under in `parent_tool_use_id`).
fn is_main_agent(event: &Value) -> bool {
    event.get("parent_tool_use_id").is_none_or(Value::is_null)
}

/// The text blocks of an assistant event's message, joined.
fn message_text(event: &Value) -> Option<String> {
    let blocks = event.get("message")?.get("content")?.as_array()?;
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

#[cfg(unix)]
fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[cfg(not(unix))]
fn running_as_root() -> bool {
    false
}

/// The content blocks of `kind` (`tool_use`, `tool_result`) of a message event.
fn content_blocks<'a>(event: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    event
        .pointer("/message/content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |block| event_type(block) == Some(kind))
}

/// A user message for Claude Code's `--input-format stream-json`.
fn user_message(text: &str) -> String {
    serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
    })
    .to_string()
}

/// The permission request of a `control_request` event (`--permission-prompt-tool stdio`).
fn permission_request(event: &Value) -> Option<PermissionRequest> {
    let request = event.get("request")?;
    if text(request, "subtype").as_deref() != Some("can_use_tool") {
        return None;
    }
    let id = text(event, "request_id")?;
    let tool = text(request, "tool_name").unwrap_or_default();
    let input = request.get("input").cloned().unwrap_or(Value::Null);
    let field = |names: &[&str]| {
        names
            .iter()
            .find_map(|name| text(&input, name))
            .unwrap_or_default()
    };
    let (kind, target) = if EDIT_TOOLS.contains(&tool.as_str()) {
        (
            Some(ToolKind::Write),
            field(&["file_path", "notebook_path"]),
        )
    } else if SHELL_TOOLS.contains(&tool.as_str()) {
        (Some(ToolKind::Shell), field(&["command"]))
    } else if matches!(tool.as_str(), "Read" | "Glob" | "Grep" | "LS") {
        (
            Some(ToolKind::Read),
            field(&["file_path", "path", "pattern"]),
        )
    } else if matches!(tool.as_str(), "WebFetch" | "WebSearch") {
        (Some(ToolKind::Url), field(&["url", "query"]))
    } else if let Some(name) = tool.strip_prefix("mcp__") {
        (Some(ToolKind::Mcp), name.replacen("__", "/", 1))
    } else {
        (None, String::new())
    };
    let mut r = PermissionRequest::new(id, tool, input);
    r.kind = kind;
    r.target = target;
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> Transcript {
        crate::agent::transcript_of(&ClaudeCode::new(), lines)
    }

    #[test]
    fn parses_init_and_result() {
        let t = parse(&[
            r#"{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5","tools":["Bash"]}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash"}]},"session_id":"s-1"}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":1234,"num_turns":3,"result":"done","session_id":"s-1","total_cost_usd":0.0123,"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":7}}"#,
        ]);
        assert!(t.finished && t.result_error.is_none());
        let u = &t.usage;
        assert_eq!(u.session_id.as_deref(), Some("s-1"));
        assert_eq!(u.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(
            (u.input_tokens, u.cached_tokens, u.output_tokens),
            (Some(60), Some(30), Some(7))
        );
        assert_eq!(
            (u.turns, u.duration_ms, u.cost_usd),
            (Some(3), Some(1234), Some(0.0123))
        );
    }

    #[test]
    fn a_resumed_sessions_cost_is_this_runs() {
        let t = parse(&[
            r#"{"total_cost_usd":0.202756,"is_error":false,"num_turns":2,"subtype":"success","result":"ok","type":"result","session_id":"s-1","usage":{"input_tokens":25441,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":11},"modelUsage":{"claude-opus-5-5":{"inputTokens":50559,"outputTokens":26,"costUSD":0.202756}},"model_usage_since_last_result":{"claude-opus-5-5":{"inputTokens":25441,"outputTokens":11,"costUSD":0.101984}}}"#,
        ]);
        let u = &t.usage;
        assert_eq!((u.input_tokens, u.output_tokens), (Some(25441), Some(11)));
        assert_eq!(u.cost_usd, Some(0.101984));
        assert_eq!(t.context_window, None, "no contextWindow reported");
        let t = parse(&[
            r#"{"type":"system","subtype":"init","session_id":"s","model":"claude-opus-5-5"}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"session_id":"s","modelUsage":{"claude-haiku-4-5":{"contextWindow":200000},"claude-opus-5-5":{"inputTokens":100000,"contextWindow":1000000,"maxOutputTokens":128000}}}"#,
        ]);
        assert_eq!(t.context_window, Some(1_000_000), "the main model's");
    }

    #[test]
    fn the_context_is_the_latest_main_agent_calls_prompt() {
        let t = parse(&[
            r#"{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":5,"cache_creation_input_tokens":1000,"cache_read_input_tokens":90000,"output_tokens":20}},"parent_tool_use_id":null,"session_id":"s"}"#,
            r#"{"type":"assistant","message":{"id":"msg_9","content":[{"type":"text","text":"sub"}],"usage":{"input_tokens":150000,"output_tokens":1}},"parent_tool_use_id":"call_task","session_id":"s"}"#,
            r#"{"type":"assistant","message":{"id":"msg_2","content":[{"type":"text","text":"b"}],"usage":{"input_tokens":3,"cache_read_input_tokens":40000,"output_tokens":9}},"parent_tool_use_id":null,"session_id":"s"}"#,
            r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 500"}],"usage":{"input_tokens":0}},"error":"unknown","session_id":"s"}"#,
        ]);
        assert_eq!(t.context_tokens, Some(40003), "the latest main-agent call");
        assert_eq!(
            t.peak_context_tokens,
            Some(91005),
            "the subagent's call is not ours"
        );
        let t = parse(&[
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"x"}]},"session_id":"s"}"#,
        ]);
        assert_eq!(t.context_tokens, None, "no usage, no context size");
    }

    #[test]
    fn api_errors() {
        let t = parse(&[
            r#"{"type":"system","subtype":"init","session_id":"s-2","model":"claude-opus-5-5"}"#,
            r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 500 boom"}]},"error":"unknown","session_id":"s-2"}"#,
            r#"{"duration_api_ms":0,"session_id":"s-2","total_cost_usd":0,"is_error":true,"num_turns":1,"subtype":"success","api_error_status":500,"api_error_type":"api_error","result":"API Error: 500 boom","type":"result","duration_ms":434}"#,
        ]);
        assert_eq!(t.result_error.as_deref(), Some("API Error: 500 boom"));
        assert_eq!(
            t.errors.iter().collect::<Vec<_>>(),
            ["API Error: 500 boom", "API error status 500"]
        );
        assert_eq!(t.usage.session_id.as_deref(), Some("s-2"));
        assert_eq!(t.reply, None, "an API error is no reply");
        assert_eq!(
            ClaudeCode::new().classify(Some(1), &t),
            crate::agent::FailureClass::Transient
        );
    }

    /// A run as Claude Code 2.1 prints it (fields trimmed): a preface, a tool call, the
    /// final message, the result.
    #[test]
    fn the_reply_is_the_results_text() {
        let t = parse(&[
            r#"{"type":"system","subtype":"init","cwd":"/wt","session_id":"s-3","model":"claude-opus-5-5"}"#,
            r#"{"type":"assistant","message":{"content":[{"text":"I'll create the file.","type":"text"}],"id":"msg_1","model":"claude-opus-5-5","role":"assistant","type":"message"},"parent_tool_use_id":null,"session_id":"s-3"}"#,
            r#"{"type":"assistant","message":{"content":[{"id":"call_1","input":{"file_path":"/wt/notes.txt","content":"hello\n"},"name":"Write","type":"tool_use"}],"id":"msg_1","role":"assistant","type":"message"},"parent_tool_use_id":null,"session_id":"s-3"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"call_1","type":"tool_result","content":"File created successfully at: /wt/notes.txt"}]},"parent_tool_use_id":null,"session_id":"s-3"}"#,
            r#"{"type":"assistant","message":{"content":[{"text":"Created notes.txt.\n\nIt holds one line: `hello`.","type":"text"}],"id":"msg_2","role":"assistant","type":"message"},"parent_tool_use_id":null,"session_id":"s-3"}"#,
            r#"{"duration_api_ms":85,"stop_reason":"end_turn","session_id":"s-3","total_cost_usd":0.1,"is_error":false,"num_turns":2,"subtype":"success","api_error_status":null,"result":"Created notes.txt.\n\nIt holds one line: `hello`.","type":"result","duration_ms":450}"#,
        ]);
        assert!(t.finished && t.result_error.is_none());
        assert_eq!(
            t.reply.as_deref(),
            Some("Created notes.txt.\n\nIt holds one line: `hello`.")
        );
    }

    #[test]
    fn without_a_result_the_reply_is_the_main_agents_last_text() {
        let t = parse(&[
            r#"{"type":"assistant","message":{"content":[{"text":"First.","type":"text"}],"id":"msg_1","role":"assistant"},"parent_tool_use_id":null,"session_id":"s-4"}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"hmm"},{"text":"Part one.","type":"text"},{"text":"Part two.","type":"text"}],"id":"msg_2","role":"assistant"},"parent_tool_use_id":null,"session_id":"s-4"}"#,
            r#"{"type":"assistant","message":{"content":[{"id":"call_2","name":"Bash","input":{"command":"ls"},"type":"tool_use"}],"id":"msg_2","role":"assistant"},"parent_tool_use_id":null,"session_id":"s-4"}"#,
            r#"{"type":"assistant","message":{"content":[{"text":"A subagent's answer.","type":"text"}],"id":"msg_3","role":"assistant"},"parent_tool_use_id":"call_task","session_id":"s-4"}"#,
        ]);
        assert!(!t.finished);
        assert_eq!(t.reply.as_deref(), Some("Part one.\nPart two."));
    }

    #[test]
    fn an_error_run_keeps_what_the_agent_said_before_it() {
        let t = parse(&[
            r#"{"type":"assistant","message":{"content":[{"text":"Writing the notes now.","type":"text"}],"id":"msg_1","role":"assistant"},"parent_tool_use_id":null,"session_id":"s-5"}"#,
            r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 529 overloaded"}]},"error":"unknown","session_id":"s-5"}"#,
            r#"{"session_id":"s-5","is_error":true,"num_turns":2,"subtype":"success","api_error_status":529,"result":"API Error: 529 overloaded","type":"result"}"#,
        ]);
        assert_eq!(t.result_error.as_deref(), Some("API Error: 529 overloaded"));
        assert_eq!(t.reply.as_deref(), Some("Writing the notes now."));
        let t = parse(&[
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s"}"#,
        ]);
        assert_eq!(t.reply, None);
    }

    /// The command for `policy`: its arguments after `-p <prompt> --output-format stream-json
    /// --verbose`, and its notes.
    fn with_policy(policy: &str) -> (Vec<String>, Vec<String>) {
        let mut r = AgentRequest::new("/wt", "Do it");
        r.permissions = policy.parse().unwrap_or_else(|e| panic!("{e}"));
        let cmd = ClaudeCode::new()
            .command(&r)
            .unwrap_or_else(|e| panic!("{e}"));
        (cmd.args_lossy()[5..].to_vec(), cmd.notes)
    }

    #[test]
    fn allow_all_skips_the_permission_checks() {
        let (args, notes) = with_policy("allow-all");
        assert_eq!(args, ["--dangerously-skip-permissions"]);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn read_only_and_no_shell_remove_tools() {
        let (args, notes) = with_policy("read-only");
        assert_eq!(
            args,
            [
                "--dangerously-skip-permissions",
                "--disallowedTools",
                "Edit",
                "Write",
                "MultiEdit",
                "NotebookEdit",
                "EnterWorktree",
                "Bash",
                "Monitor",
                "PowerShell"
            ]
        );
        assert!(notes.is_empty(), "{notes:?}");
        let (args, notes) = with_policy("no-shell");
        assert_eq!(
            args,
            [
                "--dangerously-skip-permissions",
                "--disallowedTools",
                "Bash",
                "Monitor",
                "PowerShell"
            ]
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn rules_become_allowed_and_disallowed_tools() {
        let (args, notes) = with_policy(
            r#"{"allow": ["read", "write:src/**", "shell:git *", "shell:cargo ?est", "mcp:github/get_issue", "mcp:jira/*", "url:https://docs.rs/**"],
                "deny": ["shell:rm *", "write:/etc/**", "url"]}"#,
        );
        assert_eq!(
            args,
            [
                "--permission-mode",
                "dontAsk",
                "--allowedTools",
                "Read",
                "Edit(src/**)",
                "Bash(git *)",
                "mcp__github__get_issue",
                "mcp__jira",
                "--disallowedTools",
                "Bash(rm *)",
                "Edit(//etc/**)",
                "WebFetch",
                "WebSearch"
            ]
        );
        assert_eq!(notes.len(), 1, "one note: {notes:?}");
        let note = &notes[0];
        assert!(
            note.contains("Claude Code cannot ask the host about tool requests here; requests not allowed by a rule are denied"),
            "{note}"
        );
        assert!(
            note.contains("the allow rule `shell:cargo ?est` is left out"),
            "{note}"
        );
        assert!(!note.contains("reads"), "every read is allowed: {note}");
        assert!(
            !note.contains("docs.rs"),
            "url is denied as a whole: {note}"
        );

        // A deny rule Claude Code has no pattern for is widened to its kind.
        let (args, notes) = with_policy(r#"{"allow": ["shell"], "deny": ["shell:rm -?f *"]}"#);
        assert_eq!(
            args,
            [
                "--permission-mode",
                "dontAsk",
                "--disallowedTools",
                "Bash",
                "Monitor",
                "PowerShell"
            ]
        );
        assert!(
            notes[0].contains("the deny rule `shell:rm -?f *` is widened to every shell request"),
            "{notes:?}"
        );
        assert!(
            notes[0].contains("reads inside the working directories"),
            "{notes:?}"
        );
    }

    #[test]
    fn ask_denies_what_it_cannot_ask_about() {
        let (args, notes) = with_policy("ask");
        assert_eq!(args, ["--permission-mode", "dontAsk"]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("permission policy `ask`: Claude Code cannot ask the host"),
            "{notes:?}"
        );
        assert!(
            notes[0].contains(
                "reads inside the working directories that no rule allows are not denied"
            ),
            "{notes:?}"
        );
    }

    #[test]
    fn error_results_and_noise() {
        let t = parse(&[
            "not json",
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s"}"#,
        ]);
        assert_eq!(t.result_error.as_deref(), Some("error_max_turns"));
    }
}
