//! The journal record: [`StateChange`], one change to a [`PlanRecord`](super::PlanRecord).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ids::{Millis, NodeId, NodeIndex};
use crate::plan::WorkSpec;
use crate::state::{FailureReason, NodeStatus, Phase, PhaseStatus};

use super::{AttemptStatus, Heal};

/// One journal record: a single change to a [`PlanRecord`](crate::state::PlanRecord).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StateChange {
    /// The plan started running; git facts are pinned here.
    PlanStarted {
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
        /// Pinned base commit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_commit: Option<String>,
        /// The branch the plan's result goes to, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_branch: Option<String>,
        /// The snapshot branch the plan's leaves merge into, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snapshot_branch: Option<String>,
    },
    /// Paused.
    Paused {
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// Resumed.
    Resumed {
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// Canceled.
    Canceled {
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// Archived.
    Archived {
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// Recovery of a failed or canceled plan: every failed, blocked or canceled node is pending
    /// again (attempt history kept) and the plan is paused, waiting for a resume.
    Recovered {
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// Scaffolding finished: the plan is runnable.
    Finalized {
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// The plan reached a terminal status.
    Ended {
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// A node transition (checked against the table of SPEC §3).
    Node {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// The status the node moves to.
        status: NodeStatus,
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// A new attempt began.
    AttemptStarted {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
        /// Phase it starts from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_from: Option<Phase>,
    },
    /// A phase began.
    PhaseStarted {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// Which phase of the pipeline.
        phase: Phase,
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// A phase ended (or was skipped).
    PhaseEnded {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// Which phase of the pipeline.
        phase: Phase,
        /// How the phase ended (or that it was skipped).
        status: PhaseStatus,
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
        /// The error message, if it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The current attempt ended.
    AttemptEnded {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// How the attempt ended.
        status: AttemptStatus,
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
        /// The error message, if it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<FailureReason>,
        /// Phase that failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed_phase: Option<Phase>,
    },
    /// The engine's common start of a node, in one record: `scheduled`, then `running`, then
    /// a new attempt (as [`StateChange::Node`], [`StateChange::Node`] and
    /// [`StateChange::AttemptStarted`] would record it). A no-op job journals four changes
    /// where it journaled eight; observers still see both transitions.
    Launched {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
        /// Phase the attempt starts from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_from: Option<Phase>,
    },
    /// A phase that began and ended while its start was not yet reported, in one record (as
    /// [`StateChange::PhaseStarted`] then [`StateChange::PhaseEnded`] would record it).
    PhaseRan {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// Which phase of the pipeline.
        phase: Phase,
        /// How the phase ended.
        status: PhaseStatus,
        /// When it began, in milliseconds since the Unix epoch.
        started_at: Millis,
        /// When it ended.
        at: Millis,
        /// The error message, if it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The running attempt succeeded and the node with it, in one record (as
    /// [`StateChange::AttemptEnded`] with `succeeded` then [`StateChange::Node`] to
    /// `succeeded` would record it).
    Succeeded {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// The node's worktree was created (or removed: `path: None`).
    Worktree {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// The worktree's directory; `None` once it is removed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<PathBuf>,
        /// Commit it was created at.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_commit: Option<String>,
    },
    /// The node's result commit.
    Commit {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// The commit's id (a full hex object id).
        commit: String,
    },
    /// Agent session id to resume later.
    Session {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// The agent CLI's session id, to resume the conversation.
        session_id: String,
    },
    /// Metrics reported by a runner for the current attempt.
    Metrics {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// Free-form metrics.
        metrics: serde_json::Value,
    },
    /// The node started waiting (its status becomes `waiting` with the same batch).
    WaitStarted {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// What it waits for.
        waiting: crate::state::Waiting,
    },
    /// A person approved a job waiting for approval.
    Approved {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
    },
    /// The deadline of a job waiting on its timer passed (its node becomes `ready`).
    TimerFired {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
    },
    /// An agent's cron was set (`cron`/`cron_at`) or canceled (`None`).
    Cron {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// The cron from now on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cron: Option<crate::tools::Cron>,
    },
    /// The wait of a parked agent ended (its timer fired, a person answered): its node becomes
    /// `ready` with the same batch, and its session resumes with `message`.
    Woke {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// What the session resumes with.
        message: String,
    },
    /// A message for a job's agent (`message_agent`), kept until its next wake-up.
    Message {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// The message.
        message: String,
    },
    /// A job's agent deleted its sub-agent `child` (`delete_agent`).
    AgentDeleted {
        /// The parent node, by its index in the plan's graph.
        node: NodeIndex,
        /// The child's producerId.
        child: String,
    },
    /// A parked agent's worktree was saved as `commit` (its checkpoint).
    Checkpoint {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// The checkpoint commit.
        commit: String,
    },
    /// A parked agent's session was dehydrated to blob `blob` and its worktree removed, or
    /// (`None`) hydrated again into its new worktree.
    Dehydrated {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// The blob key while it is dehydrated.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blob: Option<String>,
    },
    /// A waiting node failed without running: rejected by a person (reason `rejected`) or
    /// force-failed. Recorded as a failed attempt (the node's transition comes with it).
    WaitFailed {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// Why.
        reason: FailureReason,
        /// The message (`rejected: <the person's reason>`).
        message: String,
        /// When, in milliseconds since the Unix epoch.
        at: Millis,
    },
    /// The output of the current attempt's work (an agent's final reply, a job's stdout).
    Output {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// The output, at most [`crate::runner::MAX_OUTPUT_BYTES`].
        text: String,
    },
    /// Retry requested: the next attempt resumes from `resume_from`.
    RetryRequested {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// Phase to resume from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_from: Option<Phase>,
        /// A host's retry: new work, so the job's holds (an `approval`, a timer) apply again.
        /// The engine's own retries (after a pause, a crash, for an auto-heal) keep them: an
        /// approved job is not held a second time because its process died.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        anew: bool,
    },
    /// The plan's jobs or options were edited (scaffolding, reshape). Replayed by applying
    /// the edits again ([`crate::plan::apply_edits`]): nodes keep their state by producerId
    /// ([`crate::plan::layout`]), new jobs get `new_ids` in order, and `statuses` are the
    /// statuses the edit re-derived. The journal holds the size of the edit, not of the plan.
    Reshaped {
        /// When it happened, in milliseconds since the Unix epoch.
        at: Millis,
        /// The edits, in order.
        edits: Vec<crate::plan::PlanEdit>,
        /// Whether the plan had started (branch options were pinned).
        #[serde(default)]
        started: bool,
        /// Ids of the new nodes, in node order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        new_ids: Vec<NodeId>,
        /// Nodes (new indices) whose status differs from their status before, or that are new.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        statuses: Vec<(NodeIndex, NodeStatus)>,
    },
    /// A runner started (`running`) or saw the end of a process group of the node's attempt.
    Process {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// Process group id (the leader's pid).
        pgid: u32,
        /// Started (true) or ended (false).
        running: bool,
    },
    /// The node's next attempt starts with an auto-heal.
    HealScheduled {
        /// The node, by its index in the plan's graph.
        node: NodeIndex,
        /// What to heal.
        heal: Box<Heal>,
    },
    /// A node's specs were replaced (retry with new work, MCP updates).
    SpecsReplaced {
        /// Node (a user job; the snapshot node's spec is the plan's `verifyRi`).
        node: NodeIndex,
        /// New work. (Boxed, like the other specs, to keep every change small to move.)
        #[serde(default, skip_serializing_if = "Option::is_none")]
        work: Option<Box<WorkSpec>>,
        /// The new prechecks, if they are replaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prechecks: Option<Box<WorkSpec>>,
        /// The new postchecks, if they are replaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        postchecks: Option<Box<WorkSpec>>,
    },
}

impl StateChange {
    /// The one-step changes a change that records several steps at once stands for, in order
    /// ([`StateChange::Launched`], [`StateChange::PhaseRan`], [`StateChange::Succeeded`]);
    /// `None` for every other change. Applying the steps gives the same record as applying
    /// the change.
    ///
    /// ```
    /// use orchestrator_core::state::{NodeStatus, StateChange};
    /// let steps = StateChange::Succeeded { node: 3, at: 7 }.steps().unwrap();
    /// assert_eq!(steps.len(), 2);
    /// assert_eq!(steps[1], StateChange::Node { node: 3, status: NodeStatus::Succeeded, at: 7 });
    /// ```
    pub fn steps(&self) -> Option<Vec<StateChange>> {
        let node_to = |node, status, at| StateChange::Node { node, status, at };
        Some(match self {
            StateChange::Launched {
                node,
                at,
                resume_from,
            } => vec![
                node_to(*node, NodeStatus::Scheduled, *at),
                node_to(*node, NodeStatus::Running, *at),
                StateChange::AttemptStarted {
                    node: *node,
                    at: *at,
                    resume_from: *resume_from,
                },
            ],
            StateChange::PhaseRan {
                node,
                phase,
                status,
                started_at,
                at,
                error,
            } => vec![
                StateChange::PhaseStarted {
                    node: *node,
                    phase: *phase,
                    at: *started_at,
                },
                StateChange::PhaseEnded {
                    node: *node,
                    phase: *phase,
                    status: *status,
                    at: *at,
                    error: error.clone(),
                },
            ],
            StateChange::Succeeded { node, at } => vec![
                StateChange::AttemptEnded {
                    node: *node,
                    status: AttemptStatus::Succeeded,
                    at: *at,
                    error: None,
                    reason: None,
                    failed_phase: None,
                },
                node_to(*node, NodeStatus::Succeeded, *at),
            ],
            _ => return None,
        })
    }

    /// The node a node-level change is about (to re-index in-flight progress after a reshape).
    pub fn node_mut(&mut self) -> Option<&mut NodeIndex> {
        match self {
            StateChange::Node { node, .. }
            | StateChange::AttemptStarted { node, .. }
            | StateChange::PhaseStarted { node, .. }
            | StateChange::PhaseEnded { node, .. }
            | StateChange::AttemptEnded { node, .. }
            | StateChange::Launched { node, .. }
            | StateChange::PhaseRan { node, .. }
            | StateChange::Succeeded { node, .. }
            | StateChange::Worktree { node, .. }
            | StateChange::Commit { node, .. }
            | StateChange::Session { node, .. }
            | StateChange::Metrics { node, .. }
            | StateChange::Output { node, .. }
            | StateChange::WaitStarted { node, .. }
            | StateChange::Approved { node }
            | StateChange::TimerFired { node }
            | StateChange::Cron { node, .. }
            | StateChange::Woke { node, .. }
            | StateChange::Message { node, .. }
            | StateChange::AgentDeleted { node, .. }
            | StateChange::Checkpoint { node, .. }
            | StateChange::Dehydrated { node, .. }
            | StateChange::WaitFailed { node, .. }
            | StateChange::RetryRequested { node, .. }
            | StateChange::HealScheduled { node, .. }
            | StateChange::Process { node, .. }
            | StateChange::SpecsReplaced { node, .. } => Some(node),
            StateChange::PlanStarted { .. }
            | StateChange::Paused { .. }
            | StateChange::Resumed { .. }
            | StateChange::Canceled { .. }
            | StateChange::Archived { .. }
            | StateChange::Recovered { .. }
            | StateChange::Finalized { .. }
            | StateChange::Ended { .. }
            | StateChange::Reshaped { .. } => None,
        }
    }
}
