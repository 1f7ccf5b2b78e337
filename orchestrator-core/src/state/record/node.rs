//! The per-node execution state: [`NodeState`], its [`Attempt`]s and their [`PhaseRecord`]s,
//! and the pending auto-[`Heal`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::extra::{Empty, Extra};
use crate::ids::{Millis, NodeId};
use crate::plan::WorkSpec;
use crate::state::{FailureReason, NodeStatus, Phase, PhaseStatus};

/// Execution state of one node.
///
/// Everything but its id, status and attempts is in [`NodeExtra`], behind one pointer: a plan
/// of a million nodes holds two million of these (the engine's and the store's), and a node
/// that ran no git (isolation none) and never waited sets none of it. The JSON is flat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeState {
    /// The node's id, stable across reshapes and retries.
    pub id: NodeId,
    /// The node's current status (SPEC §3).
    pub status: NodeStatus,
    /// Attempts, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// Its commits, worktree, error, session, wait and tool state.
    #[serde(flatten)]
    pub extra: Extra<NodeExtra>,
}

/// The fields of a [`NodeState`] most nodes leave unset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeExtra {
    /// The node's resulting commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The commit its worktree was created at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// Its worktree, while it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<PathBuf>,
    /// Phase the next attempt starts from (set by retry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_from: Option<Phase>,
    /// The error message of the last failed attempt, cleared when an attempt starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Agent session to resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The auto-heal the next attempt starts with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal: Option<Box<Heal>>,
    /// Process groups (their leaders' pids) the running attempt has started: what a crash of
    /// the owner can leave running. Cleared when the attempt ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<u32>,
    /// What the node waits for while its status is `waiting` (SPEC §12). Boxed: most nodes
    /// that hold extra fields (a commit, an error) never wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Box<Waiting>>,
    /// A person approved the job (`approval: before`): it is not held again until a retry.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
    /// The job's timer (timer work) fired: it runs now, and waits again only after a retry.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timer_fired: bool,
    /// The agent's durable tool state (its cron, why its last wait ended). Boxed: most nodes
    /// have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Box<ToolState>>,
}

impl Empty for NodeExtra {
    fn empty() -> &'static Self {
        static EMPTY: NodeExtra = NodeExtra {
            commit: None,
            base_commit: None,
            worktree: None,
            resume_from: None,
            error: None,
            session_id: None,
            heal: None,
            processes: Vec::new(),
            waiting: None,
            approved: false,
            timer_fired: false,
            tools: None,
        };
        &EMPTY
    }
}

/// The one durable condition a waiting node waits on (SPEC §12).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    /// What it waits for.
    #[serde(rename = "for")]
    pub waiting_for: WaitingFor,
    /// Since when, in milliseconds since the Unix epoch.
    pub since: Millis,
    /// A timer's deadline, in milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Millis>,
    /// A question (for `input`), what a person is asked to approve, or (for an agent's timer)
    /// the message its session resumes with when the timer fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The answers an agent's question offers (`ask_user`'s `choices`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    /// Whether an answer outside `choices` is accepted (`ask_user`'s `allowFreeform`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_freeform: Option<bool>,
    /// The sub-agents (producerIds) an agent's `wait_for_agents` waits for (`children`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
}

impl Waiting {
    /// A wait for `waiting_for` since `since`, with nothing else set.
    ///
    /// ```
    /// use orchestrator_core::state::{Waiting, WaitingFor};
    /// let w = Waiting::new(WaitingFor::Input, 5);
    /// assert_eq!((w.until, w.prompt), (None, None));
    /// ```
    pub fn new(waiting_for: WaitingFor, since: Millis) -> Self {
        Waiting {
            waiting_for,
            since,
            until: None,
            prompt: None,
            choices: Vec::new(),
            allow_freeform: None,
            agents: Vec::new(),
        }
    }
}

/// An agent job's durable tool state (SPEC §15): its cron, the message its session resumes
/// with after a wait ended, and its sub-agent bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolState {
    /// The agent's cron: after each turn the job waits for its next firing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<crate::tools::Cron>,
    /// Why the last wait ended (the timer fired, the person's answer): the next run of the
    /// job's work resumes its session with this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake: Option<String>,
    /// Messages for the agent (`message_agent` from its parent) not delivered yet: they go
    /// with its next wake-up, or when its turn ends (it goes on with them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inbox: Vec<String>,
    /// Its sub-agents deleted by `delete_agent` (producerIds): not listed, not merged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<String>,
    /// The commit the worktree was saved as when the agent last parked (its sub-agents
    /// branch from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// Where the parked agent's session is dehydrated to (its blob key in the engine's
    /// session archive), while its worktree is removed; hydrated when it wakes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dehydrated: Option<String>,
}

/// What a waiting node waits for (the job JSON's `waitingFor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WaitingFor {
    /// A person's approval (`approval: before`), or rejection.
    Approval,
    /// A wall-clock deadline.
    Timer,
    /// A person's answer to a question.
    Input,
    /// Its sub-jobs.
    Children,
}

impl WaitingFor {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitingFor::Approval => "approval",
            WaitingFor::Timer => "timer",
            WaitingFor::Input => "input",
            WaitingFor::Children => "children",
        }
    }
}

impl std::fmt::Display for WaitingFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An auto-heal (SPEC §3): an attempt that first lets the healer (an agent) fix what made a
/// shell or process phase fail, then runs that phase again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Heal {
    /// 1 for the first heal of this phase in a row, then 2, ... up to the budget.
    pub round: u32,
    /// The phase that failed.
    pub phase: Phase,
    /// The spec that failed.
    pub spec: WorkSpec,
    /// How it failed (message with the last lines of output).
    pub failure: String,
    /// Its exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

impl NodeState {
    /// A fresh pending node.
    pub fn new(id: NodeId) -> Self {
        NodeState {
            id,
            status: NodeStatus::Pending,
            attempts: Vec::new(),
            extra: Extra::default(),
        }
    }

    /// The latest attempt.
    pub fn last_attempt(&self) -> Option<&Attempt> {
        self.attempts.last()
    }

    /// The output of the node's work as it stands (SPEC §12): that of the latest attempt that
    /// ran the `work` phase (an attempt resumed past it keeps the earlier one's); `None` when
    /// that attempt reported none.
    pub fn output(&self) -> Option<&str> {
        self.attempts
            .iter()
            .rev()
            .find(|a| a.extra.output.is_some() || a.phases.iter().any(|p| p.phase == Phase::Work))
            .and_then(|a| a.extra.output.as_deref())
    }
}

/// Status of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AttemptStatus {
    /// Still running.
    Running,
    /// Succeeded.
    Succeeded,
    /// Failed.
    Failed,
    /// Canceled.
    Canceled,
}

/// One execution of a node's pipeline.
///
/// How it failed, its output and metrics are in [`AttemptExtra`], behind one pointer. The JSON
/// is flat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// 1-based attempt number.
    pub number: u32,
    /// Whether the attempt runs, or how it ended.
    pub status: AttemptStatus,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at: Millis,
    /// When it ended, in milliseconds since the Unix epoch; `None` while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Millis>,
    /// Phase it started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<Phase>,
    /// Phases run (or skipped) in this attempt, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseRecord>,
    /// How it failed, what it produced, its metrics and heal.
    #[serde(flatten)]
    pub extra: Extra<AttemptExtra>,
}

/// The fields of an [`Attempt`] a no-op attempt leaves unset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptExtra {
    /// Error message of a failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<FailureReason>,
    /// Phase that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_phase: Option<Phase>,
    /// Runner-reported metrics (agent usage, ...), free-form JSON. Boxed: only agents report
    /// them, and an attempt with an output or an error holds the field too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Box<serde_json::Value>>,
    /// What the attempt's work produced (SPEC §12: an agent's final reply, a shell or process
    /// job's stdout), at most [`crate::runner::MAX_OUTPUT_BYTES`]; `None` before its work
    /// ended or when it reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The auto-heal this attempt started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal: Option<Box<Heal>>,
}

impl Empty for AttemptExtra {
    fn empty() -> &'static Self {
        static EMPTY: AttemptExtra = AttemptExtra {
            error: None,
            failure_reason: None,
            failed_phase: None,
            metrics: None,
            output: None,
            heal: None,
        };
        &EMPTY
    }
}

/// One phase of one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseRecord {
    /// Which phase of the pipeline this is.
    pub phase: Phase,
    /// Whether the phase runs, or how it ended (or that it was skipped).
    pub status: PhaseStatus,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at: Millis,
    /// When it ended, in milliseconds since the Unix epoch; `None` while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Millis>,
    /// The phase's error message, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
