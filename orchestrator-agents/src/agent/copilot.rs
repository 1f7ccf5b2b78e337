//! [`CopilotCli`]: GitHub Copilot CLI.

use std::path::PathBuf;

use orchestrator_core::plan::Env;
use orchestrator_core::runner::{LogStream, WorkFailure};
use serde_json::Value;

use super::cli::{cli_builder, CliSettings};
use super::usage::{find_count, find_number, find_text, text};
use super::{json_event, unsupported, AgentCommand, AgentRequest, AgentRunner, Transcript};

/// Copilot CLI, run headless:
///
/// ```text
/// copilot -p <prompt> --allow-all-tools --no-ask-user --no-auto-update --output-format json
///         --add-dir <worktree> [--add-dir D]... [--allow-url U]... [--model M] [--effort E]
///         [--resume ID] --log-dir <run>/logs
/// ```
///
/// Environment: `COPILOT_HOME=<state>/copilot`; `XDG_CACHE_HOME` is the per-worktree cache
/// unless [`CopilotCli::shared_cache`] names one shared by all runs (Copilot unpacks about
/// 235 MB there on first start). A [`ModelEndpoint`](super::ModelEndpoint) sets
/// `COPILOT_PROVIDER_BASE_URL`, `COPILOT_PROVIDER_TYPE` (its [`ProviderKind`](super::ProviderKind)),
/// `COPILOT_PROVIDER_API_KEY`, `COPILOT_OFFLINE=true` and, when a model is chosen,
/// `COPILOT_MODEL`.
///
/// Output (`--output-format json`, one JSON object a line): the session id is taken from any
/// `sessionId`/`session_id`; the final `result` event ends the run (`exitCode` other than 0 is
/// a failure) and carries premium requests and `linesAdded`/`linesRemoved` (searched for
/// anywhere in it). Token counts are not printed: after exit they are summed from the usage
/// events of `$COPILOT_HOME/session-state/<sessionId>/events.jsonl`.
///
/// `maxTurns` has no Copilot option (noted in the log). No tier models by default.
///
/// ```
/// use orchestrator_agents::agent::{AgentRequest, AgentRunner, CopilotCli};
/// let mut r = AgentRequest::new("/wt", "Do it");
/// r.effort = Some(orchestrator_core::plan::Effort::High);
/// let args = CopilotCli::new().command(&r).unwrap().args_lossy();
/// assert!(args.windows(2).any(|w| w == ["--effort", "high"]));
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
    /// Copilot as `copilot` on the child's `PATH`.
    pub fn new() -> Self {
        CopilotCli::default()
    }

    /// Uses `dir` as `XDG_CACHE_HOME` for every run, so Copilot unpacks itself once.
    pub fn shared_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.shared_cache = Some(dir.into());
        self
    }
}

cli_builder!(CopilotCli);

impl AgentRunner for CopilotCli {
    fn command(&self, r: &AgentRequest) -> Result<AgentCommand, WorkFailure> {
        let home = r.state_dir.join("copilot");
        let logs = r.run_dir.join("logs");
        let model = self.cli.model(r);
        let mut cmd = AgentCommand::new(&self.cli.program)
            .arg("-p")
            .arg(&r.prompt)
            .args(["--allow-all-tools", "--no-ask-user", "--no-auto-update"])
            .args(["--output-format", "json"])
            .flag("--add-dir", &r.dir);
        for folder in &r.allowed_folders {
            cmd = cmd.flag("--add-dir", folder);
        }
        for url in &r.allowed_urls {
            cmd = cmd.flag("--allow-url", url);
        }
        cmd = cmd
            .flag_opt("--model", model.as_deref())
            .flag_opt("--effort", r.effort_str())
            .flag_opt("--resume", r.resume.as_deref())
            .flag("--log-dir", &logs);
        if r.max_turns.is_some() {
            cmd = cmd.note(unsupported("Copilot CLI", "maxTurns"));
        }
        cmd = cmd.dir(&home).dir(&logs).env_path("COPILOT_HOME", &home);
        if let Some(cache) = &self.shared_cache {
            cmd = cmd.dir(cache).env_path("XDG_CACHE_HOME", cache);
        }
        if let Some(endpoint) = &self.cli.endpoint {
            cmd = cmd
                .env("COPILOT_PROVIDER_BASE_URL", &endpoint.base_url)
                .env("COPILOT_PROVIDER_TYPE", endpoint.provider.as_str())
                .env("COPILOT_OFFLINE", "true");
            if let Some(key) = &endpoint.api_key {
                cmd = cmd.env("COPILOT_PROVIDER_API_KEY", key);
            }
            if let Some(model) = model {
                cmd = cmd.env("COPILOT_MODEL", model);
            }
        }
        Ok(cmd)
    }

    fn parse_line(&self, stream: LogStream, line: &str, t: &mut Transcript) {
        if stream != LogStream::Stdout {
            return;
        }
        let Some(event) = json_event(line) else {
            return;
        };
        t.session(find_text(&event, &["sessionId", "session_id"]));
        let kind = text(&event, "type").unwrap_or_default();
        if kind == "result" {
            let u = &mut t.usage;
            u.premium_requests = find_number(&event, &["premiumRequests", "premium_requests"]);
            u.lines_added = find_count(&event, &["linesAdded", "lines_added"]);
            u.lines_removed = find_count(&event, &["linesRemoved", "lines_removed"]);
            u.duration_ms = find_count(&event, &["sessionDurationMs", "durationMs", "duration_ms"]);
            let exit = event.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
            let error = (exit != 0).then(|| {
                find_text(&event, &["error", "message"])
                    .unwrap_or_else(|| format!("the result reports exit code {exit}"))
            });
            t.finish(error);
        } else if kind.contains("error") {
            if let Some(message) = find_text(&event, &["message", "error"]) {
                t.error(message);
            }
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

/// Sums the token usage recorded in a Copilot `events.jsonl`: events whose type mentions
/// `usage`, with `inputTokens`/`outputTokens`/`cacheReadTokens` (or snake_case) anywhere in
/// them; turns are the `*turn_end` events.
fn add_session_usage(events: &str, t: &mut Transcript) {
    let (mut input, mut output, mut cached, mut turns) = (None, None, None, None);
    for event in events.lines().filter_map(json_event) {
        let kind = text(&event, "type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        if kind.contains("usage") {
            add(
                &mut input,
                find_count(&event, &["inputTokens", "input_tokens"]),
            );
            add(
                &mut output,
                find_count(&event, &["outputTokens", "output_tokens"]),
            );
            add(
                &mut cached,
                find_count(
                    &event,
                    &[
                        "cacheReadTokens",
                        "cache_read_tokens",
                        "cachedTokens",
                        "cached_tokens",
                    ],
                ),
            );
            if t.usage.model.is_none() {
                t.usage.model = find_text(&event, &["model"]);
            }
        } else if kind.ends_with("turn_end") || kind.ends_with("turn.end") {
            add(&mut turns, Some(1));
        }
    }
    let u = &mut t.usage;
    u.input_tokens = input.or(u.input_tokens);
    u.output_tokens = output.or(u.output_tokens);
    u.cached_tokens = cached.or(u.cached_tokens);
    u.turns = turns.and_then(|n| u32::try_from(n).ok()).or(u.turns);
}

fn add(into: &mut Option<u64>, more: Option<u64>) {
    if let Some(more) = more {
        *into = Some(into.unwrap_or(0) + more);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_result_and_session_usage() {
        let mut t = Transcript::default();
        let c = CopilotCli::new();
        c.parse_line(
            LogStream::Stdout,
            r#"{"type":"assistant.message","data":{"content":"hi"}}"#,
            &mut t,
        );
        c.parse_line(
            LogStream::Stdout,
            r#"{"type":"result","timestamp":"x","sessionId":"cp-1","exitCode":0,"usage":{"premiumRequests":1,"sessionDurationMs":900,"codeChanges":{"linesAdded":5,"linesRemoved":2,"filesModified":["a"]}}}"#,
            &mut t,
        );
        assert!(t.finished && t.result_error.is_none());
        assert_eq!(t.usage.session_id.as_deref(), Some("cp-1"));
        assert_eq!(
            (t.usage.lines_added, t.usage.lines_removed),
            (Some(5), Some(2))
        );
        assert_eq!(t.usage.premium_requests, Some(1.0));
        assert_eq!(t.usage.duration_ms, Some(900));
        add_session_usage(
            "{\"type\":\"assistant.usage\",\"data\":{\"model\":\"gpt-5\",\"inputTokens\":10,\"outputTokens\":3,\"cacheReadTokens\":4}}\n\
             {\"type\":\"assistant.turn_end\"}\n\
             {\"type\":\"assistant.usage\",\"data\":{\"inputTokens\":5,\"outputTokens\":1}}\n\
             garbage\n",
            &mut t,
        );
        let u = &t.usage;
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cached_tokens, u.turns),
            (Some(15), Some(4), Some(4), Some(1))
        );
        assert_eq!(u.model.as_deref(), Some("gpt-5"));
    }

    #[test]
    fn failed_result() {
        let mut t = Transcript::default();
        CopilotCli::new().parse_line(
            LogStream::Stdout,
            r#"{"type":"result","sessionId":"s","exitCode":1}"#,
            &mut t,
        );
        assert_eq!(
            t.result_error.as_deref(),
            Some("the result reports exit code 1")
        );
    }
}
