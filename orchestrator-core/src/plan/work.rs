//! What a job or a check runs (SPEC §2 `work`): shell, process, agent and timer work, and the
//! hand-written reading of their plan-file forms.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::Env;

/// What a job (or a check) runs. In a plan file: a string shorthand or an object with `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[non_exhaustive]
pub enum WorkSpec {
    /// A command run by a shell.
    Shell(ShellSpec),
    /// An executable with arguments, no shell involved.
    Process(ProcessSpec),
    /// An AI agent CLI.
    Agent(AgentSpec),
    /// A wait until a wall-clock deadline, holding nothing (jobs only, not checks).
    Timer(TimerSpec),
}

impl WorkSpec {
    /// Shell work running `command` with the default shell.
    pub fn shell(command: impl Into<String>) -> Self {
        WorkSpec::Shell(ShellSpec {
            command: command.into(),
            ..ShellSpec::default()
        })
    }

    /// Process work: `executable args...`.
    pub fn process<I, S>(executable: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        WorkSpec::Process(ProcessSpec {
            executable: executable.into(),
            args: args.into_iter().map(Into::into).collect(),
            ..ProcessSpec::default()
        })
    }

    /// Agent work with these instructions.
    pub fn agent(instructions: impl Into<String>) -> Self {
        WorkSpec::Agent(AgentSpec {
            instructions: Some(instructions.into()),
            ..AgentSpec::default()
        })
    }

    /// Timer work: the job waits `seconds` from the moment it would start.
    ///
    /// ```
    /// use orchestrator_core::plan::WorkSpec;
    /// assert_eq!(WorkSpec::timer(90.0).kind(), "timer");
    /// ```
    pub fn timer(seconds: f64) -> Self {
        WorkSpec::Timer(TimerSpec {
            seconds: Some(seconds),
            until: None,
        })
    }

    /// The runner kind that executes this spec: `shell`, `process` or `agent`; `timer` for a
    /// wait the engine itself keeps.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkSpec::Shell(_) => "shell",
            WorkSpec::Process(_) => "process",
            WorkSpec::Agent(_) => "agent",
            WorkSpec::Timer(_) => "timer",
        }
    }

    /// Parses the string shorthand: `"@agent <text>"` is agent work, anything else a shell command.
    pub fn from_shorthand(s: &str) -> Self {
        match s.strip_prefix("@agent") {
            Some(rest) if rest.is_empty() || rest.starts_with(char::is_whitespace) => {
                WorkSpec::agent(rest.trim())
            }
            _ => WorkSpec::shell(s),
        }
    }

    /// The `onFailure` settings of this spec.
    pub fn on_failure(&self) -> Option<&OnFailure> {
        match self {
            WorkSpec::Shell(s) => s.on_failure.as_ref(),
            WorkSpec::Process(p) => p.on_failure.as_ref(),
            WorkSpec::Agent(a) => a.on_failure.as_ref(),
            WorkSpec::Timer(_) => None,
        }
    }

    /// The spec's own environment.
    pub fn env(&self) -> &Env {
        match self {
            WorkSpec::Shell(s) => &s.env,
            WorkSpec::Process(p) => &p.env,
            WorkSpec::Agent(a) => &a.env,
            WorkSpec::Timer(_) => &NO_ENV,
        }
    }

    /// Timeout in milliseconds, if any.
    pub fn timeout_ms(&self) -> Option<u64> {
        match self {
            WorkSpec::Shell(s) => s.timeout,
            WorkSpec::Process(p) => p.timeout,
            WorkSpec::Agent(a) => a.timeout,
            WorkSpec::Timer(_) => None,
        }
    }

    /// Working directory relative to the worktree, if any.
    pub fn cwd(&self) -> Option<&str> {
        match self {
            WorkSpec::Shell(s) => s.cwd.as_deref(),
            WorkSpec::Process(p) => p.cwd.as_deref(),
            WorkSpec::Agent(_) | WorkSpec::Timer(_) => None,
        }
    }
}

/// The environment of work that has none.
static NO_ENV: Env = Env::new();

/// `{"type":"timer","seconds":N}` or `{"type":"timer","until":"<RFC 3339>"}` (SPEC §12).
///
/// The job waits (status `waiting`, `waitingFor: timer`) holding no process, thread, slot or
/// worktree, then runs like any job with nothing to do: its commit is its dependencies'
/// merged one. The deadline is stored when the wait starts, so a crash or restart neither
/// restarts nor skips it, and an overdue timer fires at once.
///
/// ```
/// use orchestrator_core::plan::{parse_plan, PlanFormat, TimerSpec, WorkSpec};
/// let plan = parse_plan(
///     r#"{"name":"p","jobs":[{"producerId":"cool-down","task":"wait","dependencies":[],
///         "work":{"type":"timer","seconds":30}}]}"#,
///     PlanFormat::Json,
///     "plan.json",
/// ).unwrap();
/// let WorkSpec::Timer(timer) = &plan.jobs[0].work else { panic!() };
/// assert_eq!(timer.deadline(1_000), Ok(31_000));
/// assert_eq!(TimerSpec::until("1970-01-01T00:00:02Z").deadline(0), Ok(2_000));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimerSpec {
    /// Seconds to wait from the moment the job would start (fractions allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The instant to wait for, in RFC 3339 with an offset (`2026-12-24T18:00:00+01:00`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

/// The longest timer: ten years, in seconds (beyond that a typo is likelier than a plan).
pub(crate) const MAX_TIMER_SECONDS: f64 = 10.0 * 366.0 * 24.0 * 3600.0;

impl TimerSpec {
    /// A timer until `instant` (RFC 3339).
    pub fn until(instant: impl Into<String>) -> Self {
        TimerSpec {
            seconds: None,
            until: Some(instant.into()),
        }
    }

    /// The deadline, in milliseconds since the Unix epoch, of a wait that starts at `start`;
    /// or what is wrong with the spec (validation reports the same words, with the field).
    pub fn deadline(&self, start: crate::ids::Millis) -> Result<crate::ids::Millis, String> {
        match (self.seconds, &self.until) {
            (Some(s), None) => {
                if !(0.0..=MAX_TIMER_SECONDS).contains(&s) {
                    return Err(format!(
                        "must be between 0 and {MAX_TIMER_SECONDS} (ten years), in seconds"
                    ));
                }
                Ok(start.saturating_add((s * 1000.0).round() as u64))
            }
            (None, Some(text)) => {
                let at: jiff::Timestamp = text.parse().map_err(|e| {
                    format!(
                        "is not an RFC 3339 instant with an offset \
                         (like 2026-12-24T18:00:00+01:00 or ...Z): {e}"
                    )
                })?;
                // Before the epoch is simply overdue.
                Ok(u64::try_from(at.as_millisecond()).unwrap_or(0))
            }
            (Some(_), Some(_)) => Err("give `seconds` or `until`, not both".to_owned()),
            (None, None) => Err("timer work needs `seconds` or `until`".to_owned()),
        }
    }
}

/// `{"type":"shell", ...}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShellSpec {
    /// The command line.
    pub command: String,
    /// Which shell (default: `sh` on Unix, `cmd` on Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<ShellKind>,
    /// Extra environment.
    #[serde(default, skip_serializing_if = "Env::is_empty")]
    pub env: Env,
    /// Working directory relative to the worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Timeout in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// What to do when it fails.
    #[serde(default, alias = "on_failure", skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
}

/// The shells a [`ShellSpec`] may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ShellKind {
    /// POSIX `sh -c`.
    Sh,
    /// `bash -c`.
    Bash,
    /// PowerShell Core `pwsh -Command`.
    Pwsh,
    /// Windows PowerShell.
    Powershell,
    /// `cmd /C`.
    Cmd,
}

/// `{"type":"process", ...}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessSpec {
    /// Program to run (looked up on `PATH`).
    pub executable: String,
    /// Arguments, passed as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment.
    #[serde(default, skip_serializing_if = "Env::is_empty")]
    pub env: Env,
    /// Working directory relative to the worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Timeout in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// What to do when it fails.
    #[serde(default, alias = "on_failure", skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
}

/// `{"type":"agent", ...}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentSpec {
    /// Instructions (exclusive with `instructionsFile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Path of a file holding the instructions, relative to the repository.
    #[serde(
        default,
        alias = "instructions_file",
        skip_serializing_if = "Option::is_none"
    )]
    pub instructions_file: Option<String>,
    /// Agent to use: `copilot`, `claude`, `codex`, `gemini` or a host-registered name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Model name passed to the CLI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Model tier when no model is named.
    #[serde(default, alias = "model_tier", skip_serializing_if = "Option::is_none")]
    pub model_tier: Option<ModelTier>,
    /// Reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// Maximum agent turns.
    #[serde(default, alias = "max_turns", skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Resume the job's previous session on later phases and retries (default `true`).
    #[serde(
        default,
        alias = "resume_session",
        skip_serializing_if = "Option::is_none"
    )]
    pub resume_session: Option<bool>,
    /// Folders the agent may access besides the worktree.
    #[serde(
        default,
        alias = "allowed_folders",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub allowed_folders: Vec<String>,
    /// URLs or domain patterns the agent may fetch.
    #[serde(default, alias = "allowed_urls", skip_serializing_if = "Vec::is_empty")]
    pub allowed_urls: Vec<String>,
    /// Extra environment.
    #[serde(default, skip_serializing_if = "Env::is_empty")]
    pub env: Env,
    /// Timeout in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// What to do when it fails.
    #[serde(default, alias = "on_failure", skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
}

/// Model tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ModelTier {
    /// Cheapest, quickest.
    Fast,
    /// The default.
    Standard,
    /// Strongest.
    Premium,
}

/// Reasoning effort levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Effort {
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Extra high.
    Xhigh,
}

/// `onFailure` of a work spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OnFailure {
    /// Never auto-heal this phase.
    #[serde(
        default,
        alias = "no_auto_heal",
        skip_serializing_if = "Option::is_none"
    )]
    pub no_auto_heal: Option<bool>,
    /// Message shown with the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Phase a retry resumes from.
    #[serde(
        default,
        alias = "resume_from_phase",
        skip_serializing_if = "Option::is_none"
    )]
    pub resume_from_phase: Option<crate::state::Phase>,
}

/// Deserializes a work spec from a string shorthand or an object with `type`.
///
/// Written by hand rather than `#[serde(untagged)]` so that a bad object keeps its real error
/// ("unknown field `comand`") instead of "data did not match any variant".
fn deserialize_work<'de, D: Deserializer<'de>>(d: D) -> Result<WorkSpec, D::Error> {
    struct WorkVisitor;
    impl<'de> Visitor<'de> for WorkVisitor {
        type Value = WorkSpec;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a command string, \"@agent <instructions>\", or an object with \"type\": shell|process|agent|timer")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<WorkSpec, E> {
            Ok(WorkSpec::from_shorthand(v))
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<WorkSpec, A::Error> {
            TaggedWork::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| t.0)
        }
    }
    d.deserialize_any(WorkVisitor)
}

/// The object form only; [`WorkSpec`]'s own `Deserialize` accepts both forms.
///
/// Read as one flat struct straight from the map (no buffering, unlike
/// `#[serde(tag = "type")]`), so error paths reach into the spec (`jobs[0].work.onFailure`) and
/// YAML scalars such as `PORT: 8080` still read as strings; fields of another work type are then
/// refused by name.
struct TaggedWork(WorkSpec);

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum WorkType {
    Shell,
    Process,
    Agent,
    Timer,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawWork {
    #[serde(rename = "type")]
    kind: WorkType,
    command: Option<String>,
    shell: Option<ShellKind>,
    executable: Option<String>,
    args: Option<Vec<String>>,
    instructions: Option<String>,
    #[serde(alias = "instructions_file")]
    instructions_file: Option<String>,
    agent: Option<String>,
    model: Option<String>,
    #[serde(alias = "model_tier")]
    model_tier: Option<ModelTier>,
    effort: Option<Effort>,
    #[serde(alias = "max_turns")]
    max_turns: Option<u32>,
    #[serde(alias = "resume_session")]
    resume_session: Option<bool>,
    #[serde(alias = "allowed_folders")]
    allowed_folders: Option<Vec<String>>,
    #[serde(alias = "allowed_urls")]
    allowed_urls: Option<Vec<String>>,
    env: Option<Env>,
    cwd: Option<String>,
    timeout: Option<u64>,
    #[serde(alias = "on_failure")]
    on_failure: Option<OnFailure>,
    seconds: Option<f64>,
    until: Option<String>,
}

impl RawWork {
    /// Names of the fields set, among `names`.
    fn present(&self, names: &[&'static str]) -> Option<&'static str> {
        names.iter().copied().find(|n| match *n {
            "command" => self.command.is_some(),
            "shell" => self.shell.is_some(),
            "executable" => self.executable.is_some(),
            "args" => self.args.is_some(),
            "instructions" => self.instructions.is_some(),
            "instructionsFile" => self.instructions_file.is_some(),
            "agent" => self.agent.is_some(),
            "model" => self.model.is_some(),
            "modelTier" => self.model_tier.is_some(),
            "effort" => self.effort.is_some(),
            "maxTurns" => self.max_turns.is_some(),
            "resumeSession" => self.resume_session.is_some(),
            "allowedFolders" => self.allowed_folders.is_some(),
            "allowedUrls" => self.allowed_urls.is_some(),
            "cwd" => self.cwd.is_some(),
            "env" => self.env.is_some(),
            "timeout" => self.timeout.is_some(),
            "onFailure" => self.on_failure.is_some(),
            "seconds" => self.seconds.is_some(),
            "until" => self.until.is_some(),
            _ => false,
        })
    }

    fn into_spec<E: de::Error>(self) -> Result<WorkSpec, E> {
        const TIMER_ONLY: &[&str] = &["seconds", "until"];
        const AGENT_ONLY: &[&str] = &[
            "instructions",
            "instructionsFile",
            "agent",
            "model",
            "modelTier",
            "effort",
            "maxTurns",
            "resumeSession",
            "allowedFolders",
            "allowedUrls",
        ];
        let refuse = |kind: &str, allowed: &[&str], field: &str| {
            E::custom(format!(
                "field `{field}` does not belong to {kind} work (its fields: type, {}, env, timeout, onFailure)",
                allowed.join(", ")
            ))
        };
        match self.kind {
            WorkType::Shell => {
                let allowed = ["command", "shell", "cwd"];
                if let Some(f) = self
                    .present(AGENT_ONLY)
                    .or(self.present(&["executable", "args"]))
                    .or(self.present(TIMER_ONLY))
                {
                    return Err(refuse("shell", &allowed, f));
                }
                Ok(WorkSpec::Shell(ShellSpec {
                    command: self.command.ok_or_else(|| E::missing_field("command"))?,
                    shell: self.shell,
                    env: self.env.unwrap_or_default(),
                    cwd: self.cwd,
                    timeout: self.timeout,
                    on_failure: self.on_failure,
                }))
            }
            WorkType::Process => {
                let allowed = ["executable", "args", "cwd"];
                if let Some(f) = self
                    .present(AGENT_ONLY)
                    .or(self.present(&["command", "shell"]))
                    .or(self.present(TIMER_ONLY))
                {
                    return Err(refuse("process", &allowed, f));
                }
                Ok(WorkSpec::Process(ProcessSpec {
                    executable: self
                        .executable
                        .ok_or_else(|| E::missing_field("executable"))?,
                    args: self.args.unwrap_or_default(),
                    env: self.env.unwrap_or_default(),
                    cwd: self.cwd,
                    timeout: self.timeout,
                    on_failure: self.on_failure,
                }))
            }
            WorkType::Agent => {
                if let Some(f) = self
                    .present(&["command", "shell", "executable", "args", "cwd"])
                    .or(self.present(TIMER_ONLY))
                {
                    return Err(refuse("agent", AGENT_ONLY, f));
                }
                Ok(WorkSpec::Agent(AgentSpec {
                    instructions: self.instructions,
                    instructions_file: self.instructions_file,
                    agent: self.agent,
                    model: self.model,
                    model_tier: self.model_tier,
                    effort: self.effort,
                    max_turns: self.max_turns,
                    resume_session: self.resume_session,
                    allowed_folders: self.allowed_folders.unwrap_or_default(),
                    allowed_urls: self.allowed_urls.unwrap_or_default(),
                    env: self.env.unwrap_or_default(),
                    timeout: self.timeout,
                    on_failure: self.on_failure,
                }))
            }
            WorkType::Timer => {
                let others = [
                    "command",
                    "shell",
                    "executable",
                    "args",
                    "cwd",
                    "env",
                    "timeout",
                    "onFailure",
                ];
                if let Some(f) = self.present(AGENT_ONLY).or(self.present(&others)) {
                    return Err(E::custom(format!(
                        "field `{f}` does not belong to timer work (its fields: type, seconds, until)"
                    )));
                }
                Ok(WorkSpec::Timer(TimerSpec {
                    seconds: self.seconds,
                    until: self.until,
                }))
            }
        }
    }
}

impl<'de> Deserialize<'de> for TaggedWork {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawWork::deserialize(d)?.into_spec().map(TaggedWork)
    }
}

impl<'de> Deserialize<'de> for WorkSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_work(d)
    }
}
