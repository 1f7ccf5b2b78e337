//! What a job or a check runs (SPEC §2 `work`): shell, process, agent and timer work, the
//! composite team and pipeline work of SPEC §13, and ([`read`]) the hand-written reading of
//! their plan-file forms.

mod read;

use serde::{Deserialize, Serialize};

use super::workflow::{PipelineSpec, TeamSpec};
use super::Env;
use crate::extra::{Empty, Extra};

/// What a job (or a check) runs. In a plan file: a string shorthand or an object with `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[non_exhaustive]
pub enum WorkSpec {
    /// A command run by a shell.
    Shell(ShellSpec),
    /// An executable with arguments, no shell involved. Boxed, as `Agent`.
    Process(Box<ProcessSpec>),
    /// An AI agent CLI. Boxed: the largest of the common specs should not size every job
    /// (and every check) of a plan; a shell job's spec is half its size.
    Agent(Box<AgentSpec>),
    /// A wait until a wall-clock deadline, holding nothing (jobs only, not checks).
    Timer(TimerSpec),
    /// A multi-agent team run as sub-jobs by the `team` controller (jobs only). Boxed, like
    /// `Pipeline`: the largest specs, and rare, should not size every job of a plan.
    Team(Box<TeamSpec>),
    /// A contract-checked role pipeline run as sub-jobs by the `pipeline` controller (jobs
    /// only).
    Pipeline(Box<PipelineSpec>),
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
        WorkSpec::Process(Box::new(ProcessSpec {
            executable: executable.into(),
            args: args.into_iter().map(Into::into).collect(),
            ..ProcessSpec::default()
        }))
    }

    /// Agent work with these instructions.
    pub fn agent(instructions: impl Into<String>) -> Self {
        WorkSpec::Agent(Box::new(AgentSpec {
            instructions: Some(instructions.into()),
            ..AgentSpec::default()
        }))
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
    /// wait the engine itself keeps; `team` or `pipeline` for composite work, whose
    /// controller is registered under that name.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkSpec::Shell(_) => "shell",
            WorkSpec::Process(_) => "process",
            WorkSpec::Agent(_) => "agent",
            WorkSpec::Timer(_) => "timer",
            WorkSpec::Team(_) => "team",
            WorkSpec::Pipeline(_) => "pipeline",
        }
    }

    /// Whether this is composite work (a team or a pipeline): the job runs nothing itself,
    /// its controller expands it into sub-jobs.
    pub fn is_composite(&self) -> bool {
        matches!(self, WorkSpec::Team(_) | WorkSpec::Pipeline(_))
    }

    /// Whether only a job's `work` may be this (a timer or composite work), not a check.
    pub fn is_job_only(&self) -> bool {
        matches!(self, WorkSpec::Timer(_)) || self.is_composite()
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
            WorkSpec::Shell(s) => s.extra.on_failure.as_deref(),
            WorkSpec::Process(p) => p.on_failure.as_deref(),
            WorkSpec::Agent(a) => a.on_failure.as_deref(),
            WorkSpec::Timer(_) | WorkSpec::Team(_) | WorkSpec::Pipeline(_) => None,
        }
    }

    /// The spec's own environment.
    pub fn env(&self) -> &Env {
        match self {
            WorkSpec::Shell(s) => &s.extra.env,
            WorkSpec::Process(p) => &p.env,
            WorkSpec::Agent(a) => &a.env,
            WorkSpec::Timer(_) | WorkSpec::Team(_) | WorkSpec::Pipeline(_) => &NO_ENV,
        }
    }

    /// Timeout in milliseconds, if any.
    pub fn timeout_ms(&self) -> Option<u64> {
        match self {
            WorkSpec::Shell(s) => s.extra.timeout,
            WorkSpec::Process(p) => p.timeout,
            WorkSpec::Agent(a) => a.timeout,
            WorkSpec::Timer(_) | WorkSpec::Team(_) | WorkSpec::Pipeline(_) => None,
        }
    }

    /// Working directory relative to the worktree, if any.
    pub fn cwd(&self) -> Option<&str> {
        match self {
            WorkSpec::Shell(s) => s.extra.cwd.as_deref(),
            WorkSpec::Process(p) => p.cwd.as_deref(),
            _ => None,
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
///
/// The fields most commands leave unset are in [`ShellExtra`], behind one pointer: every job of
/// a plan holds its work inline.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellSpec {
    /// The command line.
    pub command: String,
    /// Which shell, its environment, working directory, timeout and failure handling.
    #[serde(flatten)]
    pub extra: Extra<ShellExtra>,
}

/// The fields of a [`ShellSpec`] most commands leave unset.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellExtra {
    /// Which shell (default: `sh` on Unix, `cmd` on Windows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<ShellKind>,
    /// Extra environment.
    #[serde(skip_serializing_if = "Env::is_empty")]
    pub env: Env,
    /// Working directory relative to the worktree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Timeout in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// What to do when it fails.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<Box<OnFailure>>,
}

impl Empty for ShellExtra {
    fn empty() -> &'static Self {
        static EMPTY: ShellExtra = ShellExtra {
            shell: None,
            env: Env::new(),
            cwd: None,
            timeout: None,
            on_failure: None,
        };
        &EMPTY
    }
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
    /// What to do when it fails (boxed: rarely set, and every job's spec carries the field).
    #[serde(default, alias = "on_failure", skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<Box<OnFailure>>,
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
    /// What to do when it fails (boxed: rarely set, and every job's spec carries the field).
    #[serde(default, alias = "on_failure", skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<Box<OnFailure>>,
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
