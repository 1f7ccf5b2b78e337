//! [`CopilotCli`]: GitHub Copilot CLI.

use std::path::{Path, PathBuf};

use orchestrator_core::plan::Env;
use orchestrator_core::runner::{LogStream, WorkFailure};
use serde_json::{json, Value};

use super::cli::{cli_builder, CliSettings};
use super::permission::{command_prefix, is_literal, policy_note};
use super::usage::{add, count, find_text, text};
use super::ProviderKind;
use super::{
    event_type, json_event, stdout_event, unsupported, AgentCommand, AgentRequest, AgentRunner,
    PermissionPolicy, PermissionRule, ToolKind, Transcript,
};

/// Copilot CLI, run headless:
///
/// ```text
/// copilot -p <prompt> --allow-all-tools --no-ask-user --no-auto-update --output-format json
///         --add-dir <worktree> [--add-dir D]... [--allow-url U]... [--model M]
///         [--reasoning-effort E] [--resume ID] --log-dir <run>/logs
/// ```
///
/// Permissions ([`AgentRequest::permissions`]): `read-only` and `no-shell` keep
/// `--allow-all-tools` and add `--deny-tool write` / `--deny-tool shell` (Copilot's deny rules
/// win over it; the agent sees "Permission to run this tool was denied"). `ask` and rules drop
/// `--allow-all-tools`, so in `-p` mode whatever no rule allows is denied, and pass
/// `--allow-tool`/`--deny-tool` patterns: `write` / `write(<absolute path>)` for writes (literal
/// paths only), `shell` / `shell(git:*)` for commands (`git *` globs; a literal command only
/// as a deny rule), `url` / `url(<literal url>)`, `server(tool)` / `server` for MCP tools.
/// Copilot has no permission rule for reads: it reads without asking (the log says so).
///
/// MCP servers: the agents' tool server and the plugins' servers go in `<run>/mcp.json`,
/// passed as `--additional-mcp-config @<file>` (stdio servers as `local`, every tool enabled).
/// A plugin agent's tools are passed as `--allow-tool T` each (under `--allow-all-tools` they
/// restrict nothing).
///
/// Environment: `COPILOT_HOME=<state>/copilot`; `XDG_CACHE_HOME` is the per-worktree cache
/// unless [`CopilotCli::shared_cache`] names one shared by all runs (Copilot unpacks about
/// 235 MB there on first start). A [`ModelEndpoint`](super::ModelEndpoint) sets
/// `COPILOT_PROVIDER_BASE_URL` (for [`ProviderKind::OpenAi`](super::ProviderKind) the URL ends
/// in `/v1`; Copilot then uses Chat Completions), `COPILOT_PROVIDER_TYPE` (its
/// [`ProviderKind`](super::ProviderKind)), `COPILOT_PROVIDER_API_KEY`, `COPILOT_OFFLINE=true`
/// and `COPILOT_MODEL`. Copilot refuses a custom provider without an explicit model, so with an
/// endpoint the model is the spec's, else the endpoint's, else
/// [`CopilotCli::OPENAI_ENDPOINT_MODEL`] or [`CopilotCli::ANTHROPIC_ENDPOINT_MODEL`].
///
/// Output (`--output-format json`, one JSON object a line, most of them progress noise such
/// as `session.background_tasks_changed`): `session.error` carries an error message and its
/// HTTP `statusCode`; the final `result` event ends the run (`exitCode` other than 0 is a
/// failure) and holds the only session id (`sessionId`) and `usage`: `premiumRequests`,
/// `sessionDurationMs` and `codeChanges` (`linesAdded`, `linesRemoved`). Token counts are not
/// printed: after exit they are summed from the `session.usage_record` events of
/// `$COPILOT_HOME/session-state/<sessionId>/events.jsonl` written since this run started or
/// resumed the session (one per API call; `inputTokens` are all prompt tokens,
/// `cacheReadTokens` the cached part), and turns are its `assistant.turn_end` events. The
/// result's numbers are cumulative over a resumed session, so for a resumed run lines changed
/// and premium requests are the difference between the `accountingSnapshot`s of this run's
/// `session.shutdown` and the previous one, and the duration is measured instead.
///
/// Context ([`Transcript::context_tokens`], for [`ContextPressure`](super::ContextPressure)):
/// the `inputTokens` of each `session.usage_record` of this run, read after exit — so a
/// checkpoint can only be asked for once the run ended.
///
/// Reply ([`Transcript::reply`]): the `content` of the last `assistant.message` with text
/// (not a subagent's, which names its `parentToolCallId`). A model call's answer split into
/// several messages (`chunkIndex` of `chunkCount`, at reasoning boundaries) shares one
/// `apiCallId`; those pieces are joined. Each message arrives whole after its
/// `assistant.message_delta` chunks, so the deltas are not read.
///
/// `maxTurns` has no Copilot option (noted in the log). No tier models by default.
///
/// ```
/// use orchestrator_agents::agent::{AgentRequest, AgentRunner, CopilotCli};
/// let mut r = AgentRequest::new("/wt", "Do it");
/// r.effort = Some(orchestrator_core::plan::Effort::High);
/// let args = CopilotCli::new().command(&r).unwrap().args_lossy();
/// assert!(args.windows(2).any(|w| w == ["--reasoning-effort", "high"]));
/// ```
#[derive(Debug, Clone)]
pub struct CopilotCli {
    cli: CliSettings,
    shared_cache: Option<PathBuf>,
}

impl Default for CopilotCli {
    fn default() -> Self {
        CopilotCli {
            cli: CliSettings::new("copilot", [None, None, None]),
            shared_cache: None,
        }
    }
}

impl CopilotCli {
    /// The model asked of an OpenAI-compatible or Azure endpoint when none is named.
    pub const OPENAI_ENDPOINT_MODEL: &'static str = "gpt-5.5";
    /// The model asked of an Anthropic endpoint when none is named.
    pub const ANTHROPIC_ENDPOINT_MODEL: &'static str = "claude-sonnet-4.5";

    /// Copilot as `copilot` on the child's `PATH`.
    pub fn new() -> Self {
        CopilotCli::default()
    }

    /// Uses `dir` as `XDG_CACHE_HOME` for every run, so Copilot unpacks itself once.
    pub fn shared_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.shared_cache = Some(dir.into());
        self
    }

    /// The model for `r`: the spec's or tier's, else (with an endpoint) the endpoint's or the
    /// default for its provider.
    fn model(&self, r: &AgentRequest) -> Option<String> {
        self.cli.model(r).or_else(|| {
            let default = match self.cli.endpoint.as_ref()?.provider {
                ProviderKind::OpenAi | ProviderKind::Azure => Self::OPENAI_ENDPOINT_MODEL,
                ProviderKind::Anthropic => Self::ANTHROPIC_ENDPOINT_MODEL,
                _ => return None,
            };
            Some(default.to_owned())
        })
    }
}

cli_builder!(CopilotCli);

impl AgentRunner for CopilotCli {
    fn command(&self, r: &AgentRequest) -> Result<AgentCommand, WorkFailure> {
        let home = r.state_dir.join("copilot");
        let logs = r.run_dir.join("logs");
        let model = self.model(r);
        let mut notes = Vec::new();
        let mut cmd = AgentCommand::new(&self.cli.program)
            .arg("-p")
            .arg(&r.prompt)
            .args(permission_args(&r.permissions, &r.dir, &mut notes))
            .args(["--no-ask-user", "--no-auto-update"])
            .args(["--output-format", "json"])
            .flag("--add-dir", &r.dir)
            .flag_each("--add-dir", &r.allowed_folders)
            .flag_each("--allow-url", &r.allowed_urls)
            .flag_opt("--model", model.as_deref())
            .flag_opt("--reasoning-effort", r.effort_str())
            .flag_opt("--resume", r.resume.as_deref())
            .flag("--log-dir", &logs);
        if r.max_turns.is_some() {
            cmd = cmd.note(unsupported("Copilot CLI", "maxTurns"));
        }
        cmd = cmd.flag_each("--allow-tool", &r.allowed_tools);
        let servers = super::mcp::all_servers(r, super::mcp::Format::Copilot);
        if !servers.is_empty() {
            let file = r.run_dir.join("mcp.json");
            let config = json!({ "mcpServers": servers });
            let mut arg = std::ffi::OsString::from("@");
            arg.push(&file);
            cmd = cmd
                .dir(&r.run_dir)
                .file(file, format!("{config:#}\n"))
                .flag("--additional-mcp-config", arg);
        }
        for note in notes {
            cmd = cmd.note(note);
        }
        cmd = cmd.dir(&home).dir(&logs).env_path("COPILOT_HOME", &home);
        if let Some(cache) = &self.shared_cache {
            cmd = cmd.dir(cache).env_path("XDG_CACHE_HOME", cache);
        }
        cmd = self
            .cli
            .endpoint_env(cmd, "COPILOT_PROVIDER_BASE_URL", "COPILOT_PROVIDER_API_KEY");
        if let Some(endpoint) = &self.cli.endpoint {
            cmd = cmd
                .env("COPILOT_PROVIDER_TYPE", endpoint.provider.as_str())
                .env("COPILOT_OFFLINE", "true");
            if let Some(model) = model {
                cmd = cmd.env("COPILOT_MODEL", model);
            }
        }
        Ok(cmd)
    }

    fn parse_line(&self, stream: LogStream, line: &str, t: &mut Transcript) {
        let Some(event) = stdout_event(stream, line) else {
            return;
        };
        match event_type(&event) {
            Some("result") => {
                t.session(text(&event, "sessionId"));
                let usage = event.get("usage").unwrap_or(&Value::Null);
                let changes = usage.get("codeChanges").unwrap_or(&Value::Null);
                let u = &mut t.usage;
                u.premium_requests = usage.get("premiumRequests").and_then(Value::as_f64);
                u.duration_ms = count(usage, "sessionDurationMs");
                u.lines_added = count(changes, "linesAdded");
                u.lines_removed = count(changes, "linesRemoved");
                let exit = event.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
                let error = (exit != 0).then(|| {
                    t.errors
                        .back()
                        .cloned()
                        .unwrap_or_else(|| format!("the result reports exit code {exit}"))
                });
                t.finish(error);
            }
            Some("tool.execution_start") => {
                let data = event.get("data").unwrap_or(&Value::Null);
                let tool = text(data, "toolName").unwrap_or_default();
                t.tool_call(tool, data.get("arguments").cloned().unwrap_or(Value::Null));
            }
            Some("tool.execution_complete") => {
                let data = event.get("data").unwrap_or(&Value::Null);
                let ok = data.get("success").and_then(Value::as_bool) != Some(false);
                let output = data
                    .pointer("/result/content")
                    .or_else(|| data.pointer("/error/message"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                t.tool_result(text(data, "toolName"), output, !ok);
            }
            Some("assistant.message") => {
                let data = event.get("data").unwrap_or(&Value::Null);
                if data.get("parentToolCallId").is_some_and(|p| !p.is_null()) {
                    return; // a subagent's message
                }
                let content = data.get("content").and_then(Value::as_str).unwrap_or("");
                // The pieces of one model call's answer (split at reasoning boundaries) share
                // its `apiCallId`; a message without one is whole.
                let call = data
                    .get("apiCallId")
                    .or_else(|| data.get("messageId"))
                    .and_then(Value::as_str);
                match call {
                    Some(call) => t.reply_part(Some(call), content),
                    None => t.set_reply(content),
                }
            }
            Some("session.error" | "error") => {
                let data = event.get("data").unwrap_or(&event);
                let Some(message) = text(data, "message").or_else(|| find_text(data, &["message"]))
                else {
                    return;
                };
                match count(data, "statusCode") {
                    Some(status) if !message.contains(&status.to_string()) => {
                        t.error(format!("{message} (HTTP status {status})"));
                    }
                    _ => t.error(message),
                }
            }
            _ => {}
        }
    }

    fn extra_env(&self) -> Env {
        self.cli.env.clone()
    }

    fn after_exit(&self, r: &AgentRequest, t: &mut Transcript) {
        let Some(session) = t.usage.session_id.clone() else {
            return;
        };
        let events = r
            .state_dir
            .join("copilot")
            .join("session-state")
            .join(&session)
            .join("events.jsonl");
        if let Ok(text) = std::fs::read_to_string(events) {
            add_session_usage(&text, t);
        }
    }
}

/// How the notes name this CLI.
const CLI: &str = "Copilot CLI";

/// The permission flags for `policy` in the worktree `dir` (see [`CopilotCli`]); what they
/// cannot enforce goes to `notes`.
fn permission_args(policy: &PermissionPolicy, dir: &Path, notes: &mut Vec<String>) -> Vec<String> {
    let all = "--allow-all-tools".to_owned();
    let Some(set) = policy.rule_set() else {
        return vec![all];
    };
    let flags = |flag: &str, patterns: Vec<String>| {
        patterns
            .into_iter()
            .flat_map(move |p| [flag.to_owned(), p])
            .collect::<Vec<_>>()
    };
    if matches!(
        policy,
        PermissionPolicy::ReadOnly | PermissionPolicy::NoShell
    ) {
        let denied = set
            .deny
            .iter()
            .flat_map(|(rule, _)| whole_kind(rule.kind).unwrap_or_default())
            .collect();
        return [vec![all], flags("--deny-tool", denied)].concat();
    }
    let mut t = set.translate(CLI, |rule, deny| patterns(rule, deny, dir), whole_kind);
    if set.falls_back(ToolKind::Read) {
        t.gaps.push(
            "reads that no rule allows are not denied (Copilot CLI has no permission rule for reads)"
                .to_owned(),
        );
    }
    notes.extend(policy_note(CLI, policy, &t.gaps));
    let deny = t.deny.into_iter().map(|(pattern, _)| pattern).collect();
    [flags("--allow-tool", t.allow), flags("--deny-tool", deny)].concat()
}

/// The patterns denying every request of `kind`: none for reads (Copilot cannot deny them);
/// MCP tools need none without `--allow-all-tools` once no rule allows them.
fn whole_kind(kind: ToolKind) -> Option<Vec<String>> {
    match kind {
        ToolKind::Write => Some(vec!["write".to_owned()]),
        ToolKind::Shell => Some(vec!["shell".to_owned()]),
        ToolKind::Url => Some(vec!["url".to_owned()]),
        ToolKind::Mcp => Some(Vec::new()),
        _ => None,
    }
}

/// Copilot's patterns matching exactly what `rule` (a deny rule when `deny`) matches, paths
/// taken relative to the worktree `dir`.
fn patterns(rule: &PermissionRule, deny: bool, dir: &Path) -> Option<Vec<String>> {
    let Some(glob) = rule.glob.as_deref() else {
        return match rule.kind {
            // Reads need no permission; "all MCP servers" has no pattern.
            ToolKind::Read => Some(Vec::new()),
            ToolKind::Mcp => None,
            kind => whole_kind(kind),
        };
    };
    match rule.kind {
        // Reads are allowed anyway.
        ToolKind::Read if !deny => Some(Vec::new()),
        // A relative `write(path)` would match that path in any directory.
        ToolKind::Write if is_literal(glob) => {
            let path = if glob.starts_with('/') {
                PathBuf::from(glob)
            } else {
                dir.join(glob)
            };
            Some(vec![format!("write({})", path.display())])
        }
        ToolKind::Shell => match command_prefix(glob) {
            Some(words) => Some(vec![format!("shell({words}:*)")]),
            // Copilot matches a literal command by its first words: at least this command.
            None if deny && is_literal(glob) => Some(vec![format!("shell({glob})")]),
            None => None,
        },
        ToolKind::Url if is_literal(glob) => Some(vec![format!("url({glob})")]),
        ToolKind::Mcp => {
            let (server, tool) = glob.split_once('/')?;
            if server.is_empty() || !is_literal(server) {
                return None;
            }
            match tool {
                "*" | "**" => Some(vec![server.to_owned()]),
                tool if !tool.is_empty() && is_literal(tool) && !tool.contains('/') => {
                    Some(vec![format!("{server}({tool})")])
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Reads this run's part of a Copilot `events.jsonl` (from the last `session.start` or
/// `session.resume` on) into `t`: tokens and model from `session.usage_record` events, turns
/// from `assistant.turn_end`; for a resumed session, the per-run lines changed and premium
/// requests from the `session.shutdown` snapshots, and no duration (the result's is
/// cumulative).
fn add_session_usage(events: &str, t: &mut Transcript) {
    let events: Vec<Value> = events.lines().filter_map(json_event).collect();
    let start = events
        .iter()
        .rposition(|e| matches!(event_type(e), Some("session.start" | "session.resume")))
        .unwrap_or(0);
    let resumed = events
        .get(start)
        .is_some_and(|e| event_type(e) == Some("session.resume"));
    let (before, this_run) = events.split_at(start);

    let (mut input, mut output, mut cached, mut turns) = (None, None, None, None);
    for event in this_run {
        match event_type(event) {
            Some("session.usage_record") => {
                let usage = event.pointer("/data/usage").unwrap_or(&Value::Null);
                let prompt = count(usage, "inputTokens");
                add(&mut input, prompt);
                if let Some(prompt) = prompt {
                    // One record per API call: its prompt is the context at that call.
                    t.context(prompt);
                }
                add(&mut output, count(usage, "outputTokens"));
                add(&mut cached, count(usage, "cacheReadTokens"));
                if t.usage.model.is_none() {
                    t.usage.model = text(usage, "model");
                }
            }
            Some("assistant.turn_end") => add(&mut turns, Some(1)),
            _ => {}
        }
    }
    let u = &mut t.usage;
    u.input_tokens = input.or(u.input_tokens);
    u.output_tokens = output.or(u.output_tokens);
    u.cached_tokens = cached.or(u.cached_tokens);
    u.turns = turns.and_then(|n| u32::try_from(n).ok()).or(u.turns);
    if resumed {
        let earlier = Snapshot::last_in(before).unwrap_or_default();
        let now = Snapshot::last_in(this_run);
        u.duration_ms = None;
        u.lines_added = now.map(|s| s.lines_added.saturating_sub(earlier.lines_added));
        u.lines_removed = now.map(|s| s.lines_removed.saturating_sub(earlier.lines_removed));
        u.premium_requests = now.map(|s| (s.premium - earlier.premium).max(0.0));
    }
}

/// The cumulative numbers of a `session.shutdown` event's `accountingSnapshot`.
#[derive(Debug, Clone, Copy, Default)]
struct Snapshot {
    lines_added: u64,
    lines_removed: u64,
    premium: f64,
}

impl Snapshot {
    /// The snapshot of the last `session.shutdown` in `events`.
    fn last_in(events: &[Value]) -> Option<Snapshot> {
        let shutdown = events
            .iter()
            .rfind(|e| event_type(e) == Some("session.shutdown"))?;
        let snapshot = shutdown.pointer("/data/accountingSnapshot")?;
        let changes = snapshot.get("codeChanges").unwrap_or(&Value::Null);
        Some(Snapshot {
            lines_added: count(changes, "linesAdded").unwrap_or(0),
            lines_removed: count(changes, "linesRemoved").unwrap_or(0),
            premium: snapshot
                .get("totalPremiumRequestCost")
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(input: u64, output: u64, cached: u64) -> String {
        format!(
            r#"{{"type":"session.usage_record","data":{{"usage":{{"model":"gpt-5.5","inputTokens":{input},"outputTokens":{output},"cacheReadTokens":{cached},"cacheWriteTokens":0,"reasoningTokens":0,"cost":0.0,"apiEndpoint":"/chat/completions"}}}}}}"#
        )
    }

    fn shutdown(added: u64, removed: u64, premium: f64) -> String {
        format!(
            r#"{{"type":"session.shutdown","data":{{"accountingSnapshot":{{"totalPremiumRequestCost":{premium},"totalUserRequests":1,"codeChanges":{{"linesAdded":{added},"linesRemoved":{removed},"filesModifiedCount":1}},"modelMetrics":{{"gpt-5.5":{{"usage":{{"inputTokens":999999,"outputTokens":999}}}}}}}}}}}}"#
        )
    }

    const RESULT: &str = r#"{"type":"result","timestamp":"2026-01-01T00:00:00Z","sessionId":"cp-1","exitCode":0,"usage":{"premiumRequests":1,"totalApiDurationMs":73,"sessionDurationMs":900,"codeChanges":{"linesAdded":5,"linesRemoved":2,"filesModified":["/wt/a"]}}}"#;

    fn parse(lines: &[&str]) -> Transcript {
        crate::agent::transcript_of(&CopilotCli::new(), lines)
    }

    #[test]
    fn parses_the_result_and_this_runs_session_usage() {
        let mut t = parse(&[
            r#"{"type":"session.background_tasks_changed","data":{},"ephemeral":true,"id":"x"}"#,
            r#"{"type":"assistant.message","data":{"content":"hi","toolRequests":[]}}"#,
            RESULT,
        ]);
        assert!(t.finished && t.result_error.is_none());
        assert_eq!(t.usage.session_id.as_deref(), Some("cp-1"));
        assert_eq!(
            (t.usage.lines_added, t.usage.lines_removed),
            (Some(5), Some(2))
        );
        assert_eq!(t.usage.premium_requests, Some(1.0));
        assert_eq!(t.usage.duration_ms, Some(900));
        let events = [
            r#"{"type":"session.start","data":{"sessionId":"cp-1"}}"#.to_owned(),
            record(10, 3, 4),
            r#"{"type":"assistant.turn_end","data":{"turnId":"0"}}"#.into(),
            record(5, 1, 0),
            r#"{"type":"assistant.turn_end","data":{"turnId":"1"}}"#.into(),
            shutdown(5, 2, 1.0),
            "garbage".into(),
        ]
        .join("\n");
        add_session_usage(&events, &mut t);
        let u = &t.usage;
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cached_tokens, u.turns),
            (Some(15), Some(4), Some(4), Some(2))
        );
        assert_eq!(u.model.as_deref(), Some("gpt-5.5"));
        assert_eq!((u.lines_added, u.duration_ms), (Some(5), Some(900)));
        assert_eq!(
            (t.context_tokens, t.peak_context_tokens),
            (Some(5), Some(10)),
            "the context of the latest call, and the largest"
        );
    }

    /// A run as Copilot CLI 1.0 prints it (fields trimmed): a tool call's message without
    /// text, then the final message after its streamed delta.
    #[test]
    fn the_reply_is_the_last_assistant_message() {
        let t = parse(&[
            r#"{"type":"user.message","data":{"content":"Read the file /wt/.orchestrator/agent/work-1/instructions.md","messageId":"u-1","turnId":"0"},"id":"e-1"}"#,
            r#"{"type":"assistant.turn_start","data":{"turnId":"0"},"id":"e-2"}"#,
            r#"{"type":"assistant.tool_call_delta","data":{"toolCallId":"call_1","toolName":"apply_patch","inputDelta":"*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"},"ephemeral":true,"id":"e-3"}"#,
            r#"{"type":"assistant.message","data":{"messageId":"m-1","model":"gpt-5.5","content":"","toolRequests":[{"toolCallId":"call_1","name":"apply_patch","type":"custom"}],"turnId":"0","apiCallId":"chatcmpl-1"},"id":"e-4"}"#,
            r#"{"type":"tool.execution_complete","data":{"toolCallId":"call_1","success":true,"result":{"content":"Added 1 file(s): /wt/notes.txt"}},"id":"e-5"}"#,
            r#"{"type":"assistant.turn_end","data":{"turnId":"0"},"id":"e-6"}"#,
            r#"{"type":"assistant.message_start","data":{"messageId":"m-2"},"ephemeral":true,"id":"e-7"}"#,
            r#"{"type":"assistant.message_delta","data":{"messageId":"m-2","deltaContent":"Created notes.txt.\n\n"},"ephemeral":true,"id":"e-8"}"#,
            r#"{"type":"assistant.message_delta","data":{"messageId":"m-2","deltaContent":"It holds one line: `hello`."},"ephemeral":true,"id":"e-9"}"#,
            r#"{"type":"assistant.message","data":{"messageId":"m-2","model":"gpt-5.5","content":"Created notes.txt.\n\nIt holds one line: `hello`.","toolRequests":[],"turnId":"1","apiCallId":"chatcmpl-2"},"id":"e-10"}"#,
            r#"{"type":"assistant.turn_end","data":{"turnId":"1"},"id":"e-11"}"#,
            RESULT,
        ]);
        assert!(t.finished && t.result_error.is_none());
        assert_eq!(
            t.reply.as_deref(),
            Some("Created notes.txt.\n\nIt holds one line: `hello`.")
        );
    }

    #[test]
    fn pieces_of_one_answer_are_joined_and_subagents_left_out() {
        let t = parse(&[
            r#"{"type":"assistant.message","data":{"messageId":"m-1","content":"An earlier answer.","apiCallId":"call-a"}}"#,
            r#"{"type":"assistant.message","data":{"messageId":"m-2","content":"The tests pass. ","chunkIndex":0,"chunkCount":2,"apiCallId":"call-b"}}"#,
            r#"{"type":"assistant.message","data":{"messageId":"m-3","content":"Nothing else changed.","chunkIndex":1,"chunkCount":2,"apiCallId":"call-b"}}"#,
            r#"{"type":"assistant.message","data":{"messageId":"m-4","content":"A subagent's summary.","apiCallId":"call-c","parentToolCallId":"call_task"}}"#,
            r#"{"type":"assistant.message","data":{"messageId":"m-5","content":"","toolRequests":[{"toolCallId":"t","name":"bash"}],"apiCallId":"call-d"}}"#,
            RESULT,
        ]);
        assert_eq!(
            t.reply.as_deref(),
            Some("The tests pass. Nothing else changed.")
        );
    }

    #[test]
    fn a_resumed_session_counts_only_this_run() {
        let mut t = parse(&[RESULT]);
        let events = [
            r#"{"type":"session.start","data":{"sessionId":"cp-1"}}"#.to_owned(),
            record(1000, 100, 0),
            r#"{"type":"assistant.turn_end","data":{}}"#.into(),
            shutdown(3, 1, 1.0),
            r#"{"type":"session.resume","data":{"eventCount":4}}"#.into(),
            record(20, 2, 8),
            r#"{"type":"assistant.turn_end","data":{}}"#.into(),
            shutdown(5, 2, 1.0),
        ]
        .join("\n");
        add_session_usage(&events, &mut t);
        let u = &t.usage;
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cached_tokens, u.turns),
            (Some(20), Some(2), Some(8), Some(1))
        );
        assert_eq!(
            (u.lines_added, u.lines_removed, u.premium_requests),
            (Some(2), Some(1), Some(0.0))
        );
        assert_eq!(u.duration_ms, None, "the result's duration is cumulative");
    }

    #[test]
    fn a_failed_result_reports_the_session_error() {
        let t = parse(&[
            r#"{"type":"session.error","data":{"errorType":"query","message":"Failed to get response from the AI model; retried 5 times Last error: 503 unavailable","statusCode":503}}"#,
            r#"{"type":"result","sessionId":"s","exitCode":1,"usage":{"premiumRequests":0,"codeChanges":{"linesAdded":0,"linesRemoved":0,"filesModified":[]}}}"#,
        ]);
        assert_eq!(
            t.result_error.as_deref(),
            Some("Failed to get response from the AI model; retried 5 times Last error: 503 unavailable")
        );
        assert_eq!(t.reply, None, "an error is no reply");
        let t = parse(&[
            r#"{"type":"assistant.message","data":{"messageId":"m-1","content":"Running the build.","toolRequests":[{"toolCallId":"t","name":"bash"}],"apiCallId":"call-a"}}"#,
            r#"{"type":"session.error","data":{"errorType":"query","message":"Failed to get response from the AI model; retried 5 times Last error: 503 unavailable","statusCode":503}}"#,
            r#"{"type":"result","sessionId":"s","exitCode":1}"#,
        ]);
        assert!(t.result_error.is_some());
        assert_eq!(t.reply.as_deref(), Some("Running the build."));
        let t = parse(&[
            r#"{"type":"session.error","data":{"message":"bad request","statusCode":400}}"#,
            r#"{"type":"result","sessionId":"s","exitCode":1}"#,
        ]);
        assert_eq!(
            t.result_error.as_deref(),
            Some("bad request (HTTP status 400)")
        );
        let t = parse(&[r#"{"type":"result","sessionId":"s","exitCode":1}"#]);
        assert_eq!(
            t.result_error.as_deref(),
            Some("the result reports exit code 1")
        );
    }

    /// The permission arguments of the command for `policy` (between `-p <prompt>` and
    /// `--no-ask-user`), and its notes.
    fn with_policy(policy: &str) -> (Vec<String>, Vec<String>) {
        let mut r = AgentRequest::new("/wt", "Do it");
        r.permissions = policy.parse().unwrap_or_else(|e| panic!("{e}"));
        let cmd = CopilotCli::new()
            .command(&r)
            .unwrap_or_else(|e| panic!("{e}"));
        let args = cmd.args_lossy();
        let end = args
            .iter()
            .position(|a| a == "--no-ask-user")
            .unwrap_or_default();
        (args[2..end].to_vec(), cmd.notes)
    }

    #[test]
    fn read_only_and_no_shell_deny_tools_over_allow_all() {
        assert_eq!(
            with_policy("allow-all"),
            (vec!["--allow-all-tools".into()], vec![])
        );
        let (args, notes) = with_policy("read-only");
        assert_eq!(
            args,
            [
                "--allow-all-tools",
                "--deny-tool",
                "write",
                "--deny-tool",
                "shell"
            ]
        );
        assert!(notes.is_empty(), "{notes:?}");
        let (args, notes) = with_policy("no-shell");
        assert_eq!(args, ["--allow-all-tools", "--deny-tool", "shell"]);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn rules_become_allowed_and_denied_tools() {
        let (args, notes) = with_policy(
            r#"{"allow": ["read", "write:notes.txt", "write:/tmp/x.log", "shell:git *", "url:https://docs.rs", "mcp:github/*", "mcp:jira/search"],
                "deny": ["shell:git push *", "shell:rm -rf /", "url:https://docs.rs/private"]}"#,
        );
        assert_eq!(
            args,
            [
                "--allow-tool",
                "write(/wt/notes.txt)",
                "--allow-tool",
                "write(/tmp/x.log)",
                "--allow-tool",
                "shell(git:*)",
                "--allow-tool",
                "url(https://docs.rs)",
                "--allow-tool",
                "github",
                "--allow-tool",
                "jira(search)",
                "--deny-tool",
                "shell(git push:*)",
                "--deny-tool",
                "shell(rm -rf /)",
                "--deny-tool",
                "url(https://docs.rs/private)"
            ]
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("Copilot CLI cannot ask the host about tool requests here; requests not allowed by a rule are denied"),
            "{notes:?}"
        );
        assert!(!notes[0].contains("Not enforced"), "{notes:?}");

        let (args, notes) = with_policy(
            r#"{"allow": ["write:notes.txt", "shell:make ?"], "deny": ["write:src/**", "read:.env"]}"#,
        );
        assert_eq!(
            args,
            ["--deny-tool", "write"],
            "widened; its allow rules dropped"
        );
        let note = &notes[0];
        for gap in [
            "the deny rule `write:src/**` is widened to every write request",
            "the deny rule `read:.env` (Copilot CLI cannot deny read requests)",
            "the allow rule `shell:make ?` is left out",
            "reads that no rule allows are not denied",
        ] {
            assert!(note.contains(gap), "{gap}: {note}");
        }
    }

    #[test]
    fn ask_allows_nothing() {
        let (args, notes) = with_policy("ask");
        assert!(args.is_empty(), "no --allow-all-tools: {args:?}");
        assert!(notes[0].contains("cannot ask the host"), "{notes:?}");
    }

    #[test]
    fn an_endpoint_needs_an_explicit_model() {
        use crate::agent::ModelEndpoint;
        let r = AgentRequest::new("/wt", "Do it");
        let args = |c: CopilotCli| c.command(&r).map(|c| (c.args_lossy(), c.env)).ok();
        let (argv, env) = args(CopilotCli::new().endpoint(ModelEndpoint::new(
            "http://127.0.0.1:9/v1",
            ProviderKind::OpenAi,
        )))
        .unwrap_or_default();
        assert!(
            argv.windows(2).any(|w| w == ["--model", "gpt-5.5"]),
            "{argv:?}"
        );
        assert!(env.contains(&("COPILOT_MODEL".into(), "gpt-5.5".into())));
        let (argv, _) = args(CopilotCli::new().endpoint(
            ModelEndpoint::new("http://127.0.0.1:9", ProviderKind::Anthropic).model("claude-x"),
        ))
        .unwrap_or_default();
        assert!(
            argv.windows(2).any(|w| w == ["--model", "claude-x"]),
            "{argv:?}"
        );
        let (argv, _) = args(CopilotCli::new()).unwrap_or_default();
        assert!(!argv.contains(&"--model".to_owned()), "{argv:?}");
    }
}
