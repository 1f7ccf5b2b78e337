//! What an [`AgentRunner`](super::AgentRunner) is asked to run ([`AgentRequest`]) and what it
//! answers ([`AgentCommand`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use orchestrator_core::plan::{Effort, ModelTier};

use crate::env::ChildEnv;

/// One agent run, as the [`AgentWorkRunner`](super::AgentWorkRunner) prepared it from an
/// `agent` work spec and the job's context.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AgentRequest {
    /// Name the agent was selected by (`claude`, `codex`, ... or a host-registered name).
    pub agent: String,
    /// The job's worktree: the CLI runs here.
    pub dir: PathBuf,
    /// The file holding the instructions (inside `run_dir`).
    pub instructions_file: PathBuf,
    /// The short prompt handed to the CLI: it points at `instructions_file`.
    pub prompt: String,
    /// This run's own directory (`<worktree>/.orchestrator/agent/<phase>-<attempt>`): logs,
    /// temporary files.
    pub run_dir: PathBuf,
    /// The agent's state directory for this worktree
    /// (`<worktree>/.orchestrator/agent/sessions/<agent>`): its config home and sessions,
    /// kept across phases and attempts so sessions can be resumed.
    pub state_dir: PathBuf,
    /// The child's `HOME` (`<state_dir>/home`), never the user's own.
    pub home_dir: PathBuf,
    /// The explicit `model` of the spec.
    pub model: Option<String>,
    /// The spec's `modelTier`.
    pub model_tier: Option<ModelTier>,
    /// The spec's `effort`.
    pub effort: Option<Effort>,
    /// The spec's `maxTurns`.
    pub max_turns: Option<u32>,
    /// The spec's `allowedFolders`, as absolute paths.
    pub allowed_folders: Vec<PathBuf>,
    /// The spec's `allowedUrls`.
    pub allowed_urls: Vec<String>,
    /// Session to resume, if any.
    pub resume: Option<String>,
    /// Which tool requests the agent may make; each CLI enforces it through its own flags.
    pub permissions: super::PermissionPolicy,
    /// The host answers the tool requests the policy does not decide by itself, while the CLI
    /// works ([`PermissionRequest`](super::PermissionRequest)s read from its output, answers
    /// written to its stdin). Set only for runners that can ([`AgentRunner::asks_host`](super::AgentRunner::asks_host)).
    pub ask_host: bool,
    /// The CLI takes the prompt on stdin and stays reachable while it works, so that
    /// steering messages reach it live ([`AgentRunner::live_lines`](super::AgentRunner::live_lines)).
    /// Set only for runners that can ([`AgentRunner::live_input`](super::AgentRunner::live_input)).
    pub live: bool,
    /// Command-line settings pointing the CLI at the provider of a `provider:model` (Codex's
    /// `-c model_provider=...`); the environment part is in [`AgentRequest::env`].
    pub provider_args: Vec<String>,
    /// The agents' own tools for this run (SPEC §15): each CLI registers the endpoint through
    /// its own MCP configuration.
    pub tools: Option<orchestrator_core::tools::ToolEndpoint>,
    /// The MCP servers of the loaded plugins (SPEC §15), their `${VAR}`s expanded from
    /// [`AgentRequest::env`]: each CLI registers them next to the agents' own tool server, in
    /// its own MCP configuration (also when the run has no [`AgentRequest::tools`]).
    pub mcp_servers: Vec<crate::plugins::McpServer>,
    /// The tools a plugin agent lists (its front matter's `tools`; empty: no list). Claude
    /// Code gets them as `--allowedTools` and its built-in ones (plus `Read`, which it needs
    /// for its instructions file) as `--tools`, the built-in tools it may use; Copilot CLI as
    /// `--allow-tool` each (with `--allow-all-tools`, the default, nothing is restricted); Codex
    /// and Gemini CLI have no such list (noted in the log).
    pub allowed_tools: Vec<String>,
    /// The child's environment so far: the host's, the agent's extra env, the plan/job env,
    /// the spec env, and the per-run directories (`HOME`, `XDG_*`, `TMPDIR`).
    pub env: ChildEnv,
}

impl AgentRequest {
    /// A request to run `prompt` in `dir`, with its directories under
    /// `<dir>/.orchestrator/agent/` and nothing else set (hosts and tests; the work runner
    /// fills every field).
    ///
    /// ```
    /// let r = orchestrator_agents::agent::AgentRequest::new("/work/tree", "Fix the build");
    /// assert_eq!(r.run_dir, std::path::Path::new("/work/tree/.orchestrator/agent/run"));
    /// ```
    pub fn new(dir: impl Into<PathBuf>, prompt: impl Into<String>) -> Self {
        let dir = dir.into();
        let base = dir.join(".orchestrator").join("agent");
        AgentRequest {
            agent: "agent".into(),
            instructions_file: base.join("run").join("instructions.md"),
            prompt: prompt.into(),
            run_dir: base.join("run"),
            state_dir: base.join("sessions").join("agent"),
            home_dir: base.join("sessions").join("agent").join("home"),
            dir,
            model: None,
            model_tier: None,
            effort: None,
            max_turns: None,
            allowed_folders: Vec::new(),
            allowed_urls: Vec::new(),
            resume: None,
            permissions: super::PermissionPolicy::AllowAll,
            ask_host: false,
            live: false,
            tools: None,
            mcp_servers: Vec::new(),
            allowed_tools: Vec::new(),
            provider_args: Vec::new(),
            env: ChildEnv::empty(),
        }
    }

    /// The effort as the CLIs spell it: `low`, `medium`, `high`, `xhigh`.
    pub fn effort_str(&self) -> Option<&'static str> {
        self.effort.map(effort_str)
    }
}

/// `low`, `medium`, `high`, `xhigh`.
pub(crate) fn effort_str(effort: Effort) -> &'static str {
    match effort {
        Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High => "high",
        _ => "xhigh",
    }
}

/// How to start one agent CLI: program, arguments, the environment on top of the request's,
/// config files to write first, and notes for the log (e.g. a spec field the CLI cannot honor).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentCommand {
    /// Program: a bare name is looked up on the child's `PATH`.
    pub program: OsString,
    /// Arguments, passed as they are (never through a shell).
    pub args: Vec<OsString>,
    /// Variables set on top of [`AgentRequest::env`].
    pub env: Vec<(String, String)>,
    /// Directories to create before starting.
    pub dirs: Vec<PathBuf>,
    /// Files to write before starting (config files), path and content.
    pub files: Vec<(PathBuf, String)>,
    /// Notes written to the phase log before starting.
    pub notes: Vec<String>,
    /// Lines written to the CLI's stdin once it started (then stdin stays open for answers
    /// until the CLI reports its result). Empty: stdin is `/dev/null`, unless the request
    /// [asks the host](AgentRequest::ask_host).
    pub input: Vec<String>,
}

impl AgentCommand {
    /// `program` with nothing else.
    pub fn new(program: impl Into<OsString>) -> Self {
        AgentCommand {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            dirs: Vec::new(),
            files: Vec::new(),
            notes: Vec::new(),
            input: Vec::new(),
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds a flag and its value.
    pub fn flag(self, flag: &str, value: impl Into<OsString>) -> Self {
        self.arg(flag).arg(value)
    }

    /// Adds a flag and its value when there is a value.
    pub fn flag_opt<V: Into<OsString>>(self, flag: &str, value: Option<V>) -> Self {
        match value {
            Some(v) => self.flag(flag, v),
            None => self,
        }
    }

    /// Adds the flag and one value, for each of `values` (`--add-dir A --add-dir B`).
    pub fn flag_each<I, V>(self, flag: &str, values: I) -> Self
    where
        I: IntoIterator<Item = V>,
        V: Into<OsString>,
    {
        values.into_iter().fold(self, |cmd, v| cmd.flag(flag, v))
    }

    /// Sets a variable.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sets a variable to a path.
    pub fn env_path(self, name: impl Into<String>, path: &Path) -> Self {
        let value = path.to_string_lossy().into_owned();
        self.env(name, value)
    }

    /// Creates a directory before starting.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dirs.push(dir.into());
        self
    }

    /// Writes a file before starting.
    pub fn file(mut self, path: impl Into<PathBuf>, content: impl Into<String>) -> Self {
        self.files.push((path.into(), content.into()));
        self
    }

    /// Writes `line` to the CLI's stdin once it started.
    pub fn input(mut self, line: impl Into<String>) -> Self {
        self.input.push(line.into());
        self
    }

    /// Adds a note for the log.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    /// The arguments as text (tests, display).
    pub fn args_lossy(&self) -> Vec<String> {
        self.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }
}
