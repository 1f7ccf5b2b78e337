//! [`CodexCli`]: OpenAI's Codex CLI (`codex exec`).

use orchestrator_core::plan::Env;
use orchestrator_core::runner::{LogStream, WorkFailure};
use serde_json::Value;

use super::cli::{cli_builder, CliSettings};
use super::pressure::find_file;
use super::usage::{add, count, find_text, text};
use super::{
    event_type, stdout_event, unsupported, AgentCommand, AgentRequest, AgentRunner, Transcript,
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

/// A TOML basic string (JSON string escapes are valid TOML escapes).
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

impl AgentRunner for CodexCli {
    fn command(&self, r: &AgentRequest) -> Result<AgentCommand, WorkFailure> {
        let home = r.state_dir.join("codex");
        let model = self.cli.model(r);
        let mut cmd = AgentCommand::new(&self.cli.program)
            .args(["exec", "--json", "--skip-git-repo-check"])
            .arg("--dangerously-bypass-approvals-and-sandbox")
            .flag_opt("--model", model.as_deref())
            .flag_opt(
                "-c",
                r.effort_str()
                    .map(|effort| format!("model_reasoning_effort={effort}")),
            )
            .flag_each("--add-dir", &r.allowed_folders);
        if let Some(session) = &r.resume {
            cmd = cmd.arg("resume").arg(session);
        }
        cmd = cmd.arg(&r.prompt);
        if r.max_turns.is_some() {
            cmd = cmd.note(unsupported("Codex", "maxTurns"));
        }
        if !r.allowed_urls.is_empty() {
            cmd = cmd.note(unsupported(
                "Codex",
                "allowedUrls (the sandbox is bypassed)",
            ));
        }
        cmd = cmd
            .dir(&home)
            .file(home.join("config.toml"), self.config_toml(model.as_deref()))
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
            Some("item.completed") => {
                let item = event.get("item").unwrap_or(&Value::Null);
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
