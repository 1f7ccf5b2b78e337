//! [`GeminiCli`]: Google's Gemini CLI.

use orchestrator_core::plan::Env;
use orchestrator_core::runner::{LogStream, WorkFailure};
use serde_json::{json, Value};

mod policy;

use policy::policy_toml;
#[cfg(test)]
use policy::{command_pattern, glob_regex, path_pattern, safe_pattern, toml_string};

use super::cli::{cli_builder, CliSettings};
use super::pressure::find_file;
use super::usage::{count, find_text, text};
use super::{
    classify, event_type, stdout_event, unsupported, AgentCommand, AgentRequest, AgentRunner,
    FailureClass, Transcript,
};

/// Exit code of Gemini CLI when the API answered 4xx.
const EXIT_CLIENT_ERROR: i32 = 144;
/// Exit code of Gemini CLI when the API answered 5xx.
const EXIT_SERVER_ERROR: i32 = 244;

/// Gemini CLI, run headless:
///
/// ```text
/// gemini -p <prompt> --output-format stream-json --yolo --skip-trust [-m M] [--resume ID]
///        [--include-directories D]...
/// ```
///
/// `HOME` is the per-worktree agent home; `$HOME/.gemini/settings.json` is written before each
/// run: API-key authentication (`security.auth.selectedType = "gemini-api-key"`, the key comes
/// from `GEMINI_API_KEY` in the environment), usage statistics off, `general.maxAttempts = 1`
/// (Gemini CLI otherwise retries a 5xx or 429 for minutes with its own backoff; the work
/// runner retries itself, resuming the session) and `model.maxSessionTurns` from the spec's
/// `maxTurns`. A [`ModelEndpoint`](super::ModelEndpoint)
/// sets `GOOGLE_GEMINI_BASE_URL` and `GEMINI_API_KEY`. The settings' `mcpServers` hold the
/// agents' tool server (`httpUrl`, its `Authorization` header) and the plugins' servers
/// (`command`/`args`/`env`, `httpUrl` for streamable HTTP or `url` for SSE, `headers`), all
/// `trust`ed. A plugin agent's `tools` are Claude Code's names, not Gemini CLI's: not passed
/// on (noted).
///
/// Permissions ([`AgentRequest::permissions`]) other than `allow-all` add `--policy
/// <run>/permissions.toml`, a file of Gemini CLI's policy engine (user tier, so its rules win
/// over `--yolo`'s allow-all): `read-only` denies `write_file`, `replace` and
/// `run_shell_command`, `no-shell` denies `run_shell_command` — tools denied without
/// conditions are removed from the model's tools. `ask` and rules: each deny rule (priority
/// 300, with its reason as `denyMessage`), each allow rule (200), an allow rule for
/// `read_file` of the run's instructions file (200), and a catch-all deny (100) of every other
/// tool. Kinds map to tools (read: `read_file`, `read_many_files`, `list_directory`, `glob`,
/// `grep_search`; write: `write_file`, `replace`; shell: `run_shell_command`; url: `web_fetch`,
/// `google_web_search`; mcp: `mcpName`), globs to `argsPattern` regular expressions on the
/// `file_path` or `command` argument: an allow glob matches a path relative to the worktree
/// (or absolute inside it) without `..`, a deny glob the end of any path; Gemini CLI checks
/// each part of a compound command too. Gemini CLI silently drops a pattern it suspects of
/// nested quantifiers, so none has a quantified group. A URL glob has no argument to match
/// (widened or left out, noted); a read glob matches `read_file` only (a deny one also denies
/// `read_many_files` and `grep_search`, noted).
///
/// Output (`stream-json`): `init` gives the session id and model; the final `result` event
/// ends the run (`status` other than `success` is a failure, its `error.message` the reason)
/// and its `stats` give `input_tokens`, `output_tokens`, `cached` and `duration_ms`. Exit code 244 (the API answered
/// 5xx) is transient, 144 (4xx) only when it was a rate limit (429).
///
/// Context ([`Transcript::context_tokens`], for [`ContextPressure`](super::ContextPressure)):
/// read after exit from the session's chat record
/// `$HOME/.gemini/tmp/<project>/chats/session-<time>-<id[..8]>.jsonl`: the `tokens.input`
/// (cached ones included) of each `gemini` message since this run's prompt (the last `user`
/// message with text). Gemini CLI reports no window; the table's is used.
///
/// Reply ([`Transcript::reply`]): the model's text arrives as assistant `message` events with
/// `delta: true`, one chunk each; the chunks in a row make one message, and any other event
/// (a `tool_use`, its `tool_result`, an `error`) ends it; the reply is the last such message,
/// its chunks joined. The `result` event carries no text (in `--output-format json` its
/// `response` does; it is taken when present).
///
/// `effort` has no Gemini option (noted in the log); `allowedUrls` is not enforced.
/// Tiers: `fast` = `gemini-2.5-flash`, `standard` and `premium` = `gemini-2.5-pro`.
///
/// ```
/// use orchestrator_agents::agent::{AgentRequest, AgentRunner, GeminiCli};
/// let mut r = AgentRequest::new("/wt", "Do it");
/// r.model = Some("gemini-2.5-flash".into());
/// let args = GeminiCli::new().command(&r).unwrap().args_lossy();
/// assert!(args.windows(2).any(|w| w == ["-m", "gemini-2.5-flash"]));
/// ```
#[derive(Debug, Clone)]
pub struct GeminiCli {
    cli: CliSettings,
}

impl Default for GeminiCli {
    fn default() -> Self {
        GeminiCli {
            cli: CliSettings::new(
                "gemini",
                [
                    Some("gemini-2.5-flash"),
                    Some("gemini-2.5-pro"),
                    Some("gemini-2.5-pro"),
                ],
            ),
        }
    }
}

impl GeminiCli {
    /// Gemini CLI as `gemini` on the child's `PATH`.
    pub fn new() -> Self {
        GeminiCli::default()
    }
}

cli_builder!(GeminiCli);

impl AgentRunner for GeminiCli {
    fn command(&self, r: &AgentRequest) -> Result<AgentCommand, WorkFailure> {
        let mut cmd = AgentCommand::new(&self.cli.program)
            .arg("-p")
            .arg(&r.prompt)
            .args(["--output-format", "stream-json", "--yolo", "--skip-trust"])
            .flag_opt("-m", self.cli.model(r))
            .flag_opt("--resume", r.resume.as_deref())
            .flag_each("--include-directories", &r.allowed_folders);
        if r.effort.is_some() {
            cmd = cmd.note(unsupported("Gemini CLI", "effort"));
        }
        if !r.allowed_urls.is_empty() {
            cmd = cmd.note(unsupported(
                "Gemini CLI",
                "allowedUrls (every tool is approved)",
            ));
        }
        let mut settings = json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "general": {"maxAttempts": 1},
        });
        if let Some(turns) = r.max_turns {
            settings["model"] = json!({ "maxSessionTurns": turns });
        }
        let servers = super::mcp::all_servers(r, super::mcp::Format::Gemini);
        if !servers.is_empty() {
            settings["mcpServers"] = serde_json::Value::Object(servers);
        }
        if !r.allowed_tools.is_empty() {
            cmd = cmd.note(unsupported(
                "Gemini CLI",
                "a plugin agent's tools (its tool names are its own; every tool is approved)",
            ));
        }
        let gemini_dir = r.home_dir.join(".gemini");
        cmd = cmd
            .dir(&gemini_dir)
            .file(gemini_dir.join("settings.json"), format!("{settings:#}\n"));
        let mut notes = Vec::new();
        if let Some(policy) = policy_toml(r, &mut notes) {
            let file = r.run_dir.join("permissions.toml");
            cmd = cmd
                .flag("--policy", &file)
                .dir(&r.run_dir)
                .file(file, policy);
        }
        for note in notes {
            cmd = cmd.note(note);
        }
        Ok(self
            .cli
            .endpoint_env(cmd, "GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY"))
    }

    fn parse_line(&self, stream: LogStream, line: &str, t: &mut Transcript) {
        let Some(event) = stdout_event(stream, line) else {
            return;
        };
        t.session(text(&event, "session_id"));
        let kind = event_type(&event);
        if kind == Some("message") && text(&event, "role").as_deref() == Some("assistant") {
            let content = text(&event, "content").unwrap_or_default();
            if event.get("delta").and_then(Value::as_bool) == Some(true) {
                t.reply_part(None, &content);
            } else {
                t.set_reply(content);
            }
            return;
        }
        // Anything else (a tool call, its result, an error) ends the message streamed so far.
        t.end_reply();
        match kind {
            Some("init") => t.usage.model = text(&event, "model"),
            Some("tool_use") => {
                let tool = text(&event, "tool_name").unwrap_or_default();
                t.tool_call(
                    tool,
                    event.get("parameters").cloned().unwrap_or(Value::Null),
                );
            }
            Some("tool_result") => {
                let ok = text(&event, "status").is_none_or(|s| s == "success");
                let output = text(&event, "output")
                    .or_else(|| find_text(&event, &["message"]))
                    .unwrap_or_default();
                t.tool_result(None, output, !ok);
            }
            Some("error") => {
                if let Some(message) = find_text(&event, &["message"]) {
                    t.error(message);
                }
            }
            Some("result") => {
                if let Some(stats) = event.get("stats") {
                    let u = &mut t.usage;
                    u.input_tokens = count(stats, "input_tokens");
                    u.output_tokens = count(stats, "output_tokens");
                    u.cached_tokens = count(stats, "cached");
                    u.duration_ms = count(stats, "duration_ms");
                }
                let ok = text(&event, "status").is_none_or(|s| s == "success");
                if ok {
                    // Only `--output-format json` prints the reply in the result; harmless here.
                    if let Some(reply) = text(&event, "response") {
                        t.set_reply(reply);
                    }
                }
                let error = (!ok).then(|| {
                    find_text(&event, &["message"])
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

    fn after_exit(&self, r: &AgentRequest, t: &mut Transcript) {
        let Some(short) = t.usage.session_id.as_deref().and_then(|s| s.get(..8)) else {
            return;
        };
        let suffix = format!("-{short}.jsonl");
        let projects = r.home_dir.join(".gemini").join("tmp");
        let record = find_file(&projects, 2, &|name| {
            name.starts_with("session-") && name.ends_with(&suffix)
        });
        if let Some(text) = record.and_then(|f| std::fs::read_to_string(f).ok()) {
            add_chat_context(&text, t);
        }
    }

    fn classify(&self, exit_code: Option<i32>, t: &Transcript) -> FailureClass {
        match exit_code {
            Some(EXIT_SERVER_ERROR) => FailureClass::Transient,
            Some(EXIT_CLIENT_ERROR) => {
                let rate_limited = t.said().any(|s| {
                    let s = s.to_ascii_lowercase();
                    s.contains("429") || s.contains("rate limit") || s.contains("quota")
                });
                if rate_limited {
                    FailureClass::Transient
                } else {
                    FailureClass::Permanent
                }
            }
            _ => classify(exit_code, t.said()),
        }
    }
}

/// How the notes name this CLI.
const CLI: &str = "Gemini CLI";
/// Reads this run's part of a Gemini CLI chat record (from the last user message with text
/// on) into `t`: the context of each model call from its `gemini` message's `tokens.input`.
fn add_chat_context(record: &str, t: &mut Transcript) {
    let messages: Vec<Value> = record.lines().filter_map(super::json_event).collect();
    let is_prompt = |m: &Value| {
        event_type(m) == Some("user")
            && m.get("content")
                .and_then(Value::as_array)
                .is_some_and(|parts| parts.iter().any(|p| p.get("text").is_some()))
    };
    let start = messages.iter().rposition(is_prompt).unwrap_or(0);
    for message in &messages[start..] {
        if event_type(message) == Some("gemini") {
            if let Some(tokens) = message.get("tokens").and_then(|u| count(u, "input")) {
                t.context(tokens);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::permission::NOT_ALLOWED;
    use crate::agent::transcript_of;
    use std::path::Path;

    #[test]
    fn the_context_of_this_runs_calls_from_the_chat_record() {
        let record = [
            r#"{"sessionId":"5d89f73f-ed47","kind":"main"}"#,
            r#"{"id":"u0","type":"user","content":[{"text":"first run"}]}"#,
            r#"{"id":"g0","type":"gemini","content":"","tokens":{"input":150000,"output":3}}"#,
            r#"{"$set":{"lastUpdated":"2026-12-01T15:21:26.338Z"}}"#,
            r#"{"id":"u1","type":"user","content":[{"text":"this run"}]}"#,
            r#"{"id":"g1","type":"gemini","content":"","tokens":{"input":50000,"cached":10,"output":13}}"#,
            r#"{"id":"u2","type":"user","content":[{"functionResponse":{"name":"write_file"}}]}"#,
            r#"{"id":"g2","type":"gemini","content":"ok","tokens":{"input":52000,"output":1}}"#,
        ]
        .join("\n");
        let mut t = Transcript::default();
        add_chat_context(&record, &mut t);
        assert_eq!(
            (t.context_tokens, t.peak_context_tokens),
            (Some(52_000), Some(52_000)),
            "this run's calls only"
        );
    }

    #[test]
    fn parses_init_and_result_stats() {
        let g = GeminiCli::new();
        let t = transcript_of(
            &g,
            &[
                r#"{"type":"init","timestamp":"x","session_id":"g-1","model":"gemini-2.5-pro"}"#,
                r#"{"type":"message","role":"assistant","content":"done","delta":true}"#,
                r#"{"type":"result","status":"success","stats":{"total_tokens":30,"input_tokens":20,"output_tokens":10,"cached":5,"duration_ms":77,"tool_calls":1}}"#,
            ],
        );
        assert!(t.finished && t.result_error.is_none());
        assert_eq!(t.reply.as_deref(), Some("done"));
        let u = &t.usage;
        assert_eq!(u.session_id.as_deref(), Some("g-1"));
        assert_eq!(
            (
                u.input_tokens,
                u.output_tokens,
                u.cached_tokens,
                u.duration_ms
            ),
            (Some(20), Some(10), Some(5), Some(77))
        );
    }

    #[test]
    fn an_error_result() {
        let g = GeminiCli::new();
        let t = transcript_of(
            &g,
            &[
                r#"{"type":"init","timestamp":"x","session_id":"g-2","model":"gemini-2.5-pro"}"#,
                r#"{"type":"message","timestamp":"x","role":"user","content":"write notes"}"#,
                r#"{"type":"result","timestamp":"x","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":500,\"message\":\"boom\"}}]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":0,"models":{}}}"#,
            ],
        );
        assert!(t.finished);
        assert_eq!(
            t.result_error.as_deref(),
            Some(r#"[API Error: {"error":{"code":500,"message":"boom"}}]"#)
        );
        assert_eq!(g.classify(Some(244), &t), FailureClass::Transient);
        assert_eq!(t.reply, None, "an error is no reply");
    }

    /// A run as Gemini CLI prints it: text before a tool call, the tool call and its result,
    /// the final message in delta chunks.
    #[test]
    fn the_reply_is_the_last_message_its_chunks_joined() {
        let t = transcript_of(
            &GeminiCli::new(),
            &[
                r#"{"type":"init","timestamp":"2026-12-01T11:32:14.875Z","session_id":"g-3","model":"gemini-2.5-pro"}"#,
                r#"{"type":"message","timestamp":"2026-12-01T11:32:14.879Z","role":"user","content":"Read the file /wt/.orchestrator/agent/work-1/instructions.md"}"#,
                r#"{"type":"message","timestamp":"x","role":"assistant","content":"I will write","delta":true}"#,
                r#"{"type":"message","timestamp":"x","role":"assistant","content":" the file.","delta":true}"#,
                r#"{"type":"tool_use","timestamp":"2026-12-01T11:32:15.145Z","tool_name":"write_file","tool_id":"write_file_1","parameters":{"content":"hello\n","file_path":"/wt/notes.txt"}}"#,
                r#"{"type":"tool_result","timestamp":"2026-12-01T11:32:15.341Z","tool_id":"write_file_1","status":"success"}"#,
                r#"{"type":"message","timestamp":"x","role":"assistant","content":"Created notes.txt.\n\n","delta":true}"#,
                r#"{"type":"message","timestamp":"x","role":"assistant","content":"","delta":true}"#,
                r#"{"type":"message","timestamp":"x","role":"assistant","content":"It holds one line: `hello`.","delta":true}"#,
                r#"{"type":"result","timestamp":"2026-12-01T11:32:15.424Z","status":"success","stats":{"total_tokens":24254,"input_tokens":24228,"output_tokens":26,"cached":0,"input":24228,"duration_ms":550,"tool_calls":1}}"#,
            ],
        );
        assert!(t.finished);
        assert_eq!(
            t.reply.as_deref(),
            Some("Created notes.txt.\n\nIt holds one line: `hello`.")
        );
    }

    #[test]
    fn a_failed_run_keeps_the_text_before_the_error() {
        let t = transcript_of(
            &GeminiCli::new(),
            &[
                r#"{"type":"message","timestamp":"x","role":"assistant","content":"Checking the ","delta":true}"#,
                r#"{"type":"message","timestamp":"x","role":"assistant","content":"tests.","delta":true}"#,
                r#"{"type":"tool_use","timestamp":"x","tool_name":"run_shell_command","tool_id":"sh_1","parameters":{"command":"make test"}}"#,
                r#"{"type":"tool_result","timestamp":"x","tool_id":"sh_1","status":"success"}"#,
                r#"{"type":"error","timestamp":"x","severity":"error","message":"Maximum session turns exceeded"}"#,
                r#"{"type":"result","timestamp":"x","status":"error","error":{"type":"FatalTurnLimitedError","message":"Reached max session turns for this session."},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":1}}"#,
            ],
        );
        assert!(t.result_error.is_some());
        assert_eq!(t.reply.as_deref(), Some("Checking the tests."));
    }

    /// The command for `policy`: its `--policy` file's content (if any) and its notes.
    fn with_policy(policy: &str) -> (Option<String>, Vec<String>) {
        let mut r = AgentRequest::new("/wt", "Do it");
        r.permissions = policy.parse().unwrap_or_else(|e| panic!("{e}"));
        let cmd = GeminiCli::new()
            .command(&r)
            .unwrap_or_else(|e| panic!("{e}"));
        let args = cmd.args_lossy();
        let file = "/wt/.orchestrator/agent/run/permissions.toml";
        let flagged = args.windows(2).any(|w| w == ["--policy", file]);
        let toml = cmd
            .files
            .iter()
            .find(|(path, _)| path == std::path::Path::new(file))
            .map(|(_, text)| text.clone());
        assert_eq!(flagged, toml.is_some(), "{args:?}");
        assert!(args.iter().any(|a| a == "--yolo"), "{args:?}");
        (toml, cmd.notes)
    }

    #[test]
    fn allow_all_has_no_policy_file() {
        assert_eq!(with_policy("allow-all"), (None, vec![]));
    }

    #[test]
    fn read_only_and_no_shell_deny_tools() {
        let (toml, notes) = with_policy("read-only");
        assert_eq!(
            toml.as_deref(),
            Some(concat!(
                "# Written by the orchestrator for this run: the session's permission policy `read-only`.\n",
                "\n[[rule]]\ntoolName = [\"write_file\", \"replace\"]\ndecision = \"deny\"\npriority = 300\n",
                "denyMessage = \"the session's permission policy is read-only: writes are not allowed\"\n",
                "\n[[rule]]\ntoolName = \"run_shell_command\"\ndecision = \"deny\"\npriority = 300\n",
                "denyMessage = \"the session's permission policy is read-only: shell commands are not allowed\"\n",
            ))
        );
        assert!(notes.is_empty(), "{notes:?}");
        let (toml, notes) = with_policy("no-shell");
        let toml = toml.unwrap_or_default();
        assert!(
            toml.contains("toolName = \"run_shell_command\"\ndecision = \"deny\""),
            "{toml}"
        );
        assert!(!toml.contains("write_file"), "{toml}");
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn rules_become_policy_rules() {
        let (toml, notes) = with_policy(
            r#"{"allow": ["read", "write:src/**", "shell:git *", "mcp:github/*", "url:https://docs.rs/**"], "deny": ["write:src/secret/*.pem", "shell:rm *"]}"#,
        );
        let toml = toml.unwrap_or_default();
        let rule = |tools: &str, extra: &str, decision: &str, priority: u32| {
            format!("[[rule]]\ntoolName = {tools}\n{extra}decision = \"{decision}\"\npriority = {priority}\n")
        };
        let args = |pattern: &str| format!("argsPattern = {}\n", toml_string(pattern));
        for expected in [
            rule(
                r#"["write_file", "replace"]"#,
                &args(r#"\x00"file_path":"(.*/|)src\/secret\/[^/]*\.pem"\x00"#),
                "deny",
                300,
            ),
            rule(
                r#""run_shell_command""#,
                &args(r#"\x00"command":"rm .*"\x00"#),
                "deny",
                300,
            ),
            rule(
                r#"["read_file", "read_many_files", "list_directory", "glob", "grep_search"]"#,
                "",
                "allow",
                200,
            ),
            rule(
                r#"["write_file", "replace"]"#,
                &args(r#"\x00"file_path":"(?![^"]*\.\.)(\/wt/|\./|)src\/[^"]*"\x00"#),
                "allow",
                200,
            ),
            rule(
                r#""run_shell_command""#,
                &args(r#"\x00"command":"git .*"\x00"#),
                "allow",
                200,
            ),
            rule(r#""*""#, "mcpName = \"github\"\n", "allow", 200),
            rule(
                r#""read_file""#,
                &args(
                    r#"\x00"file_path":"\/wt\/\.orchestrator\/agent\/run\/instructions\.md"\x00"#,
                ),
                "allow",
                200,
            ),
            rule(r#""*""#, "", "deny", 100),
        ] {
            assert!(toml.contains(&expected), "{expected}\nnot in\n{toml}");
        }
        assert!(
            toml.contains("denyMessage = \"the session's permission rules deny `shell:rm *`\""),
            "{toml}"
        );
        assert!(
            toml.contains(&format!("denyMessage = {}", toml_string(NOT_ALLOWED))),
            "{toml}"
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("Gemini CLI cannot ask the host"),
            "{notes:?}"
        );
        assert!(
            notes[0].contains("the allow rule `url:https://docs.rs/**` is left out"),
            "{notes:?}"
        );
    }

    #[test]
    fn read_globs_match_read_file_only() {
        let (toml, notes) =
            with_policy(r#"{"allow": ["read:src/**"], "deny": ["read:src/*.key"]}"#);
        let toml = toml.unwrap_or_default();
        assert!(
            toml.contains("toolName = [\"read_many_files\", \"grep_search\"]\ndecision = \"deny\""),
            "{toml}"
        );
        assert!(
            toml.contains("toolName = \"read_file\"\nargsPattern"),
            "{toml}"
        );
        for gap in [
            "the deny rule `read:src/*.key` also denies read_many_files and grep_search",
            "the allow rule `read:src/**` only allows read_file",
        ] {
            assert!(notes[0].contains(gap), "{gap}: {notes:?}");
        }
    }

    #[test]
    fn glob_regexes_escape_json_and_regex_characters() {
        assert_eq!(glob_regex("a.b", None, false), r"a\.b");
        assert_eq!(glob_regex(r#"say "hi""#, None, false), r#"say \\"hi\\""#);
        assert_eq!(glob_regex("x?", None, false), r#"x[^"\\]"#);
        assert_eq!(glob_regex("x?", None, true), r#"x.{1,6}"#);
        assert_eq!(glob_regex("**/a", Some('/'), false), r#"([^"]*/|)a"#);
        assert_eq!(glob_regex("*/a", Some('/'), true), r#"[^/]*\/a"#);
        assert_eq!(glob_regex("(x)*", None, false), r#"\(x\)[^"]*"#);
        assert_eq!(
            command_pattern("* --help", false),
            r#"\x00"command":"[^"]* --help"\x00"#,
            "only a final `*` may cross quotes"
        );
    }

    /// Gemini CLI's own check (`isSafeRegExp`): `/\([^)]*[*+?{].*\)[*+?{]/` must not match.
    fn gemini_accepts(pattern: &str) -> bool {
        let b = pattern.as_bytes();
        let quantifier = |c: u8| b"*+?{".contains(&c);
        let nested = (0..b.len()).filter(|&i| b[i] == b'(').any(|i| {
            let inner = b[i + 1..].iter().take_while(|&&c| c != b')');
            let Some(q) = inner.clone().position(|&c| quantifier(c)) else {
                return false;
            };
            (i + 1 + q + 1..b.len().saturating_sub(1)).any(|k| b[k] == b')' && quantifier(b[k + 1]))
        });
        pattern.len() <= 2048 && !nested
    }

    #[test]
    fn every_pattern_passes_gemini_clis_check() {
        let dir = Path::new("/work/a (copy)+/wt?");
        let globs = [
            "src/**",
            "**/*.rs",
            "a?c",
            "src/**/x/*.key",
            "/etc/**",
            "denied.txt",
            "(x)*",
            "a)+b",
            "git *",
            "* --help",
            "rm -?f *",
            "x{1}*",
        ];
        for glob in globs {
            for deny in [false, true] {
                for pattern in [path_pattern(glob, dir, deny), command_pattern(glob, deny)] {
                    assert!(safe_pattern(&pattern), "{pattern}");
                    assert!(gemini_accepts(&pattern), "{pattern}");
                }
            }
        }
        assert!(!gemini_accepts("(?:a)?") && !safe_pattern("(?:a)?"));
        assert!(!gemini_accepts("(a*)+") && !safe_pattern("(a*)+"));
        assert!(!safe_pattern(&"a".repeat(2049)));
    }

    #[test]
    fn exit_codes_classify() {
        let g = GeminiCli::new();
        let mut t = Transcript::default();
        assert_eq!(g.classify(Some(244), &t), FailureClass::Transient);
        assert_eq!(g.classify(Some(144), &t), FailureClass::Permanent);
        t.error("[API Error: 429 Resource exhausted]");
        assert_eq!(g.classify(Some(144), &t), FailureClass::Transient);
    }
}
