//! Agent CLIs as work runners.
//!
//! - [`AgentRunner`]: one agent CLI — how to start it for an [`AgentRequest`]
//!   ([`AgentCommand`]), how to read its output into a [`Transcript`] (usage, session id,
//!   final result, errors, the agent's final reply) and how to classify a failure
//!   ([`FailureClass`]). Built in:
//!   [`CopilotCli`], [`ClaudeCode`], [`CodexCli`], [`GeminiCli`]; [`GenericAgent`] runs a
//!   host-configured command template.
//! - [`AgentWorkRunner`]: the `agent` [`WorkRunner`](orchestrator_core::runner::WorkRunner):
//!   picks the runner named by the spec's `agent`, prepares the per-run directories inside
//!   the worktree, runs the CLI under the [`Supervisor`](crate::Supervisor) with redaction,
//!   a hang guard and retries, and returns the session id and [`AgentUsage`].
//! - [`AgentHealer`]: auto-heal through an agent.
//! - [`ContextPressure`]: when an agent's context is full enough to ask it for a checkpoint
//!   and a split manifest (SPEC §12).
//!
//! # Where things go
//!
//! Everything lives under `<worktree>/.orchestrator/agent/` (kept out of commits by the
//! engine's `.git/info/exclude` entry `/.orchestrator/`):
//!
//! | path                                   | holds                                               |
//! |----------------------------------------|-----------------------------------------------------|
//! | `<phase>-<attempt>[-n]/instructions.md`| the instructions of one run (`-n` for a heal in the same phase) |
//! | `<phase>-<attempt>[-n]/tmp/`           | `TMPDIR`, `TMP`, `TEMP`                             |
//! | `<phase>-<attempt>[-n]/logs/`          | the CLI's own logs, where it has a flag for them    |
//! | `sessions/<agent>/home/`               | `HOME` and `XDG_{CONFIG,DATA,STATE,CACHE}_HOME`     |
//! | `sessions/<agent>/<cli>/`              | `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `COPILOT_HOME`   |
//!
//! The agent's home is per worktree, not per run, because the CLIs keep their sessions there:
//! a later phase or a retry in the same worktree can only resume a session it can find. The
//! user's own configuration is never read or written; credentials must come from the
//! environment (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`/`CODEX_API_KEY`, `GEMINI_API_KEY`,
//! `COPILOT_GITHUB_TOKEN`/`GH_TOKEN`, ...) or a [`ModelEndpoint`].
//!
//! # The prompt
//!
//! The instructions are written to `instructions.md` and the prompt handed to the CLI is one
//! short paragraph pointing at that file (with the job's task as a title). Every built-in CLI
//! has a file-read tool that runs without approval, so the text is never duplicated in argv,
//! process listings stay short, and instructions of any length work the same way.
//!
//! # Spec fields per CLI
//!
//! | spec field       | Copilot (`copilot`)    | Claude Code (`claude`) | Codex (`codex exec`)            | Gemini (`gemini`)              |
//! |------------------|------------------------|------------------------|---------------------------------|--------------------------------|
//! | `model`          | `--model M`            | `--model M`            | `--model M`                     | `-m M`                         |
//! | `modelTier`      | tier model if set (none by default) | `haiku`/`sonnet`/`opus` | tier model if set (none by default) | `gemini-2.5-flash`/`gemini-2.5-pro`/`gemini-2.5-pro` |
//! | `effort`         | `--reasoning-effort E` | `--effort E`           | `-c model_reasoning_effort=E`   | not supported (noted in the log) |
//! | `maxTurns`       | not supported (noted)  | `--max-turns N`        | not supported (noted)           | `model.maxSessionTurns` in settings.json |
//! | `allowedFolders` | `--add-dir D` each     | `--add-dir D` each     | `--add-dir D` each              | `--include-directories D` each |
//! | `allowedUrls`    | `--allow-url U` each   | not enforced (noted)   | not enforced (noted)            | not enforced (noted)           |
//! | resume           | `--resume ID`          | `--resume ID`          | `exec … resume ID <prompt>`     | `--resume ID`                  |
//! | approval         | `--allow-all-tools --no-ask-user` | `--dangerously-skip-permissions` | `--dangerously-bypass-approvals-and-sandbox` | `--yolo --skip-trust` |
//!
//! "Not enforced" means the CLI runs every tool without asking, so URLs are not restricted;
//! "noted" means a system line in the phase log says the field was not passed on.

mod claude;
pub(crate) mod cli;
mod codex;
mod copilot;
mod gemini;
mod generic;
mod heal;
mod mcp;
mod permission;
pub(crate) mod prepare;
mod pressure;
mod redact;
mod request;
mod retry;
pub(crate) mod runner;
mod transcript;
mod usage;

use std::fmt::Debug;
use std::path::Path;

use orchestrator_core::plan::Env;
use orchestrator_core::runner::{LogStream, WorkFailure};

pub use claude::ClaudeCode;
pub use cli::{ModelEndpoint, ProviderKind};
pub use codex::CodexCli;
pub use copilot::CopilotCli;
pub use gemini::GeminiCli;
pub use generic::GenericAgent;
pub use heal::AgentHealer;
pub use permission::{Permission, PermissionPolicy, PermissionRequest, PermissionRule, ToolKind};
pub use pressure::{
    checkpoint_prompt, ContextPressure, Pressure, CHECKPOINT_PREFIX, THRESHOLD_VAR,
};
pub use redact::{looks_secret, Redactor, REDACTED};
pub use request::{AgentCommand, AgentRequest};
pub use retry::{classify, session_lost, FailureClass, RetryPolicy};
pub use runner::AgentWorkRunner;
pub use transcript::{ToolActivity, Transcript};
pub use usage::AgentUsage;

/// One agent CLI: how to start it, how to read its output, how to judge a failure.
///
/// Implementations hold configuration only; the [`AgentWorkRunner`] does the running
/// (directories, environment, supervision, redaction, retries, hang guard). Register a host's
/// own CLI with [`AgentWorkRunner::register`]; for a CLI that only needs a command line,
/// [`GenericAgent`] is enough.
pub trait AgentRunner: Send + Sync + Debug + 'static {
    /// The command that runs `request`. An error is reported as a startup failure (not
    /// retried).
    fn command(&self, request: &AgentRequest) -> Result<AgentCommand, WorkFailure>;

    /// Reads one output line (already redacted) into `transcript`: usage, session id, the
    /// final result ([`Transcript::finish`]), error messages and the agent's last assistant
    /// text ([`Transcript::reply`], through [`Transcript::set_reply`],
    /// [`Transcript::reply_part`] or [`Transcript::reply_line`]). Called for every line, in
    /// order per stream; lines that are not JSON are also kept by the caller for
    /// classification.
    fn parse_line(&self, stream: LogStream, line: &str, transcript: &mut Transcript);

    /// Extra environment for the CLI, over the host's and under the plan/job/spec `env`.
    fn extra_env(&self) -> Env {
        Env::new()
    }

    /// Reads what the CLI left on disk after it exited (e.g. Copilot's token usage).
    fn after_exit(&self, _request: &AgentRequest, _transcript: &mut Transcript) {}

    /// Whether this CLI can put tool requests to the host while it works, so that a session's
    /// `ask` policy reaches the host ([`AgentRequest::ask_host`]). Default: no (the policy's
    /// asks are then denied).
    fn asks_host(&self) -> bool {
        false
    }

    /// Whether this CLI takes its prompt on stdin and reads more while it works
    /// ([`AgentRequest::live`]): then steering reaches it without stopping it
    /// ([`AgentRunner::live_lines`]). Default: no.
    fn live_input(&self) -> bool {
        false
    }

    /// The stdin lines that hand `text` to the CLI while it works (for Claude Code: interrupt
    /// the current step, then a user message), for a CLI with [live input](AgentRunner::live_input).
    fn live_lines(&self, _text: &str) -> Option<Vec<String>> {
        None
    }

    /// The stdin line answering `request` with `decision` (`Allow` or `Deny`), for a CLI
    /// that [asks the host](AgentRunner::asks_host).
    fn permission_reply(
        &self,
        _request: &PermissionRequest,
        _decision: &Permission,
    ) -> Option<String> {
        None
    }

    /// Makes a copy of this CLI's state folder usable from another working directory: a
    /// forked session's conversation was copied from the worktree `from` to `to`, and CLIs
    /// that file their sessions by working directory must find it there. Default: nothing
    /// (CLIs that find a session by its id alone).
    fn relocate_state(&self, _state_dir: &Path, _from: &Path, _to: &Path) {}

    /// Whether a failed run failed because the session it was asked to resume does not exist
    /// (the work runner then starts a new one). Default: [`session_lost`] on what it said.
    fn session_lost(&self, transcript: &Transcript) -> bool {
        session_lost(transcript.said())
    }

    /// Whether a failed run is worth retrying. Default: [`classify`] on what it said.
    fn classify(&self, exit_code: Option<i32>, transcript: &Transcript) -> FailureClass {
        classify(exit_code, transcript.said())
    }
}

/// The JSON object on `line`, if it holds one.
pub(crate) fn json_event(line: &str) -> Option<serde_json::Value> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .filter(serde_json::Value::is_object)
}

/// Whether `line` holds a JSON object, as [`json_event`] reads it, without building its tree
/// (run for every output line; a valid JSON text starting with `{` is an object).
pub(crate) fn is_json_event(line: &str) -> bool {
    let line = line.trim();
    line.starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(line).is_ok()
}

/// The `type` of a JSON event.
pub(crate) fn event_type(event: &serde_json::Value) -> Option<&str> {
    event.get("type").and_then(serde_json::Value::as_str)
}

/// The JSON event on a stdout `line`, where every built-in CLI prints its events.
pub(crate) fn stdout_event(stream: LogStream, line: &str) -> Option<serde_json::Value> {
    if stream != LogStream::Stdout {
        return None;
    }
    json_event(line)
}

/// A log note: the spec asked for `what`, which `cli` cannot honor.
pub(crate) fn unsupported(cli: &str, what: &str) -> String {
    format!("{cli} has no option for {what}; it is not passed on")
}

/// What `runner` reads from stdout `lines` (unit tests of the parsers).
#[cfg(test)]
pub(crate) fn transcript_of(runner: &dyn AgentRunner, lines: &[&str]) -> Transcript {
    let mut t = Transcript::default();
    for line in lines {
        runner.parse_line(LogStream::Stdout, line, &mut t);
    }
    t
}
