//! The agents' own durable tools (SPEC §15), as the engine sees them: an [`AgentTools`] server
//! (one per engine) gives each run of a job's agent an endpoint with a token for that job only,
//! and when the run ends says what the agent asked of the engine — to wait ([`Park`]) or to
//! keep a cron ([`CronChange`]). A wait parks the node in `waiting` (timer or input) holding no
//! process; when it ends, the node's agent session is resumed with a message saying why
//! ([`ToolState::wake`](crate::state::ToolState::wake)).
//!
//! The server itself (MCP on loopback HTTP) lives in `orchestrator-agents`; hosts register it
//! with [`crate::OrchestratorBuilder::agent_tools`].

mod agents;
mod archive;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ids::{Millis, NodeId, PlanId};
use crate::schedule::{Schedule, ScheduleError};

pub use agents::{child_name, AgentCall, Contract, SubAgent, SubAgentSpec, MAX_AGENT_DEPTH};
pub use archive::{session_key, SessionArchive, AGENT_STATE_DIR, DEFAULT_DEHYDRATE_AFTER};

/// How long a `wait` may sleep inside the turn before it parks the node instead (SPEC §15's
/// `waitThreshold`, default 30 s; plan field `waitThreshold`).
pub const DEFAULT_WAIT_THRESHOLD: Duration = Duration::from_secs(30);

/// The job one run of an agent acts for: what the tool server scopes its token to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolJob {
    /// The plan.
    pub plan_id: PlanId,
    /// The job's node id.
    pub node_id: NodeId,
    /// The job's producerId.
    pub producer_id: String,
    /// Attempt number.
    pub attempt: u32,
    /// A `wait` up to this long sleeps in the turn; a longer one parks the node.
    pub wait_threshold: Duration,
    /// The job's cron as it stands when the run starts (a `cron` call replaces it).
    pub cron: Option<Cron>,
    /// The directory the agent works in (its worktree): where `list_available_models` finds
    /// the repository's `.model_providers.json`.
    pub dir: std::path::PathBuf,
    /// How deep the job is nested below a plan job (0 for a plan job): a job at
    /// [`MAX_AGENT_DEPTH`] may not spawn sub-agents.
    pub depth: usize,
    /// The job's sub-agents as the run starts (`agent-<k>` names, deleted ones left out):
    /// the ids the other sub-agent tools accept.
    pub agents: Vec<String>,
}

impl ToolJob {
    /// The tool job of `producer_id` (node `node_id` of `plan_id`), attempt 1, with the
    /// default wait threshold and no cron.
    ///
    /// ```
    /// use orchestrator_core::tools::ToolJob;
    /// let job = ToolJob::new("p1".into(), "n1".into(), "build");
    /// assert_eq!(job.wait_threshold.as_secs(), 30);
    /// ```
    pub fn new(plan_id: PlanId, node_id: NodeId, producer_id: impl Into<String>) -> Self {
        ToolJob {
            plan_id,
            node_id,
            producer_id: producer_id.into(),
            attempt: 1,
            wait_threshold: DEFAULT_WAIT_THRESHOLD,
            cron: None,
            dir: std::path::PathBuf::new(),
            depth: 0,
            agents: Vec::new(),
        }
    }
}

/// Where one run's agent reaches its tools: the URL of the MCP server and the token only this
/// run of this job may use (sent as `Authorization: Bearer <token>`).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolEndpoint {
    /// The MCP endpoint (streamable HTTP on loopback), naming the job.
    pub url: String,
    /// The bearer token.
    pub token: String,
}

impl ToolEndpoint {
    /// An endpoint.
    ///
    /// ```
    /// let e = orchestrator_core::tools::ToolEndpoint::new("http://127.0.0.1:1/mcp", "secret");
    /// assert!(!format!("{e:?}").contains("secret"));
    /// ```
    pub fn new(url: impl Into<String>, token: impl Into<String>) -> Self {
        ToolEndpoint {
            url: url.into(),
            token: token.into(),
        }
    }
}

impl fmt::Debug for ToolEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token is a credential: never in logs or debug output.
        f.debug_struct("ToolEndpoint")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// An agent's cron (`cron` or `cron_at`) and why it was set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cron {
    /// When it fires.
    pub schedule: Schedule,
    /// The agent's reason, repeated to it at each firing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// How many times it has been armed since it was set (the firing a wake-up is).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fired: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Cron {
    /// The next firing after `after`.
    pub fn next_after(&self, after: Millis) -> Result<Millis, ScheduleError> {
        self.schedule.next_after(after)
    }

    /// A cron set with `reason`, not fired yet.
    ///
    /// ```
    /// use orchestrator_core::{schedule::Schedule, tools::Cron};
    /// let cron = Cron::new(Schedule::every(60).unwrap(), "poll the deploy");
    /// assert_eq!(cron.fired, 0);
    /// ```
    pub fn new(schedule: Schedule, reason: impl Into<String>) -> Self {
        Cron {
            schedule,
            reason: reason.into(),
            fired: 0,
        }
    }

    /// Arms the cron after a turn ended with it active: the park until its next firing after
    /// `now`, counted in [`Cron::fired`].
    pub fn arm(&mut self, now: Millis) -> Result<Park, ScheduleError> {
        let until = self.next_after(now)?;
        self.fired += 1;
        let n = self.fired;
        let why = because(&self.reason);
        Ok(Park::Timer {
            until,
            wake: format!(
                "Your cron fired (firing {n}){why}. Do this round's work, then end your turn; the cron wakes \
                 you again at its next firing until you cancel it with cron(action: \"cancel\")."
            ),
        })
    }
}

/// ` (reason: ...)` for a wake-up message, or nothing when the agent gave no reason.
fn because(reason: &str) -> String {
    match reason.trim() {
        "" => String::new(),
        r => format!(" (reason: {r})"),
    }
}

/// A run's change to its job's cron.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CronChange {
    /// `cron`/`cron_at`: from now on, after each turn the job waits for the next firing.
    Set(Cron),
    /// `cron(action: "cancel")` / `cron_at(action: "cancel")`: the next turn's end finishes
    /// the job.
    Cancel,
}

/// How an agent's turn ended to wait: the engine parks the node (`waiting`), its attempt open
/// and its worktree kept, and resumes the agent's session when the wait ends.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Park {
    /// `waiting(timer)` until `until` (a long `wait`, or a cron's next firing); then the
    /// session resumes with `wake`.
    Timer {
        /// The deadline, in milliseconds since the Unix epoch.
        until: Millis,
        /// The message the session resumes with: which timer fired and why.
        wake: String,
    },
    /// `waiting(input)`: `ask_user`; the person's answer resumes the session.
    Input {
        /// The question.
        question: String,
        /// The answers offered (may be empty).
        choices: Vec<String>,
        /// Whether an answer outside `choices` is accepted.
        allow_freeform: bool,
    },
    /// A sub-agent tool call (see [`AgentCall`]): the engine does it and resumes the session
    /// with the result — at once, or for `wait_for_agents` once the children ended
    /// (`waiting(children)`).
    Agents(AgentCall),
}

impl Park {
    /// The timer park of `wait(seconds, reason)` started at `now`.
    ///
    /// ```
    /// use orchestrator_core::tools::Park;
    /// let Park::Timer { until, wake } = Park::wait(1_000, 120, "CI takes a while") else { unreachable!() };
    /// assert_eq!(until, 121_000);
    /// assert!(wake.contains("120 s") && wake.contains("CI takes a while"));
    /// ```
    pub fn wait(now: Millis, seconds: u64, reason: &str) -> Park {
        let why = because(reason);
        Park::Timer {
            until: now.saturating_add(seconds.saturating_mul(1000)),
            wake: format!(
                "The timer you set with wait({seconds} s) fired{why}. Continue your work."
            ),
        }
    }

    /// The message the session resumes with once a person answered `question` with `answer`.
    ///
    /// ```
    /// let m = orchestrator_core::tools::Park::answered("Which port?", "8080");
    /// assert!(m.contains("Which port?") && m.ends_with("8080"));
    /// ```
    pub fn answered(question: &str, answer: &str) -> String {
        format!(
            "A person answered your question \"{}\": {answer}",
            question.trim()
        )
    }
}

/// What one run's agent asked of the engine through its tools, told when the run ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolOutcome {
    /// The turn ended to wait.
    pub park: Option<Park>,
    /// The job's cron changed.
    pub cron: Option<CronChange>,
}

/// The agents' tool server (SPEC §15): one per engine. The engine opens an endpoint for each
/// run of an agent's `work` phase and closes it when the run ends; a token is valid between
/// the two only, for its own job only.
pub trait AgentTools: Send + Sync + fmt::Debug + 'static {
    /// Opens the tools for one run of `job`'s agent: the endpoint its CLI is given.
    fn open(&self, job: ToolJob) -> Result<ToolEndpoint, String>;

    /// Closes the run's endpoint (its token is refused from now on) and tells what its agent
    /// asked for.
    fn close(&self, endpoint: &ToolEndpoint) -> ToolOutcome;
}
