//! The persisted state of a plan and the journal records ([`StateChange`]) that move it.
//!
//! The engine never mutates a [`PlanRecord`] directly: it produces `StateChange`s, appends them to
//! the [`crate::PlanRepository`] and applies them with [`PlanRecord::apply`]. A store therefore
//! persists O(size of the change) per transition, and replaying the same records on load yields
//! exactly the state the engine had.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{Millis, NodeId, NodeIndex, PlanId};
use crate::plan::{Isolation, PlanSpec, WorkSpec};
use crate::state::{FailureReason, NodeStatus, Phase, PhaseStatus, PlanStatus};

/// Current schema version of [`PlanRecord`] and [`StateChange`]; stores persist it.
pub const SCHEMA_VERSION: u32 = 1;

/// A plan: its definition and its execution state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanRecord {
    /// The plan's definition (jobs' specs as they are now, after any replacement). Shared, so
    /// that snapshots and running nodes do not copy a 100k-job definition.
    pub spec: Arc<PlanSpec>,
    /// Execution state.
    pub state: PlanState,
}

/// Execution state of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanState {
    /// Plan id.
    pub id: PlanId,
    /// Directory the plan works on: the repository (worktree isolation) or the working
    /// directory (`isolation: "none"`).
    pub repo: PathBuf,
    /// Creation time.
    pub created_at: Millis,
    /// First start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Millis>,
    /// When the plan last reached a terminal status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Millis>,
    /// Being assembled (MCP scaffolding); not runnable.
    #[serde(default)]
    pub scaffolding: bool,
    /// Paused: start nothing new.
    #[serde(default)]
    pub paused: bool,
    /// Canceled.
    #[serde(default)]
    pub canceled: bool,
    /// Archived.
    #[serde(default)]
    pub archived: bool,
    /// Commit the plan started from (pinned at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// Branch receiving the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_branch: Option<String>,
    /// Snapshot branch the leaves merge into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_branch: Option<String>,
    /// One entry per node, indexed by [`NodeIndex`].
    pub nodes: Vec<NodeState>,
}

/// Execution state of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeState {
    /// Node id.
    pub id: NodeId,
    /// Current status.
    pub status: NodeStatus,
    /// Attempts, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
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
    /// Last error.
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
            commit: None,
            base_commit: None,
            worktree: None,
            resume_from: None,
            error: None,
            session_id: None,
            heal: None,
            processes: Vec::new(),
        }
    }

    /// The latest attempt.
    pub fn last_attempt(&self) -> Option<&Attempt> {
        self.attempts.last()
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// 1-based attempt number.
    pub number: u32,
    /// Status.
    pub status: AttemptStatus,
    /// Start time.
    pub started_at: Millis,
    /// End time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Millis>,
    /// Phase it started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<Phase>,
    /// Phases run (or skipped) in this attempt, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseRecord>,
    /// Error message of a failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<FailureReason>,
    /// Phase that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_phase: Option<Phase>,
    /// Runner-reported metrics (agent usage, ...), free-form JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<serde_json::Value>,
    /// The auto-heal this attempt started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal: Option<Box<Heal>>,
}

/// One phase of one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseRecord {
    /// Which phase.
    pub phase: Phase,
    /// Its status.
    pub status: PhaseStatus,
    /// Start time.
    pub started_at: Millis,
    /// End time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Millis>,
    /// Error message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One journal record: a single change to a [`PlanRecord`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StateChange {
    /// The plan started running; git facts are pinned here.
    PlanStarted {
        /// Time.
        at: Millis,
        /// Pinned base commit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_commit: Option<String>,
        /// Target branch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_branch: Option<String>,
        /// Snapshot branch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snapshot_branch: Option<String>,
    },
    /// Paused.
    Paused {
        /// Time.
        at: Millis,
    },
    /// Resumed.
    Resumed {
        /// Time.
        at: Millis,
    },
    /// Canceled.
    Canceled {
        /// Time.
        at: Millis,
    },
    /// Archived.
    Archived {
        /// Time.
        at: Millis,
    },
    /// Recovery of a failed or canceled plan: every failed, blocked or canceled node is pending
    /// again (attempt history kept) and the plan is paused, waiting for a resume.
    Recovered {
        /// Time.
        at: Millis,
    },
    /// Scaffolding finished: the plan is runnable.
    Finalized {
        /// Time.
        at: Millis,
    },
    /// The plan reached a terminal status.
    Ended {
        /// Time.
        at: Millis,
    },
    /// A node transition (checked against the table of SPEC §3).
    Node {
        /// Node.
        node: NodeIndex,
        /// New status.
        status: NodeStatus,
        /// Time.
        at: Millis,
    },
    /// A new attempt began.
    AttemptStarted {
        /// Node.
        node: NodeIndex,
        /// Time.
        at: Millis,
        /// Phase it starts from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_from: Option<Phase>,
    },
    /// A phase began.
    PhaseStarted {
        /// Node.
        node: NodeIndex,
        /// Phase.
        phase: Phase,
        /// Time.
        at: Millis,
    },
    /// A phase ended (or was skipped).
    PhaseEnded {
        /// Node.
        node: NodeIndex,
        /// Phase.
        phase: Phase,
        /// Outcome.
        status: PhaseStatus,
        /// Time.
        at: Millis,
        /// Error message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The current attempt ended.
    AttemptEnded {
        /// Node.
        node: NodeIndex,
        /// Outcome.
        status: AttemptStatus,
        /// Time.
        at: Millis,
        /// Error message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<FailureReason>,
        /// Phase that failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed_phase: Option<Phase>,
    },
    /// The node's worktree was created (or removed: `path: None`).
    Worktree {
        /// Node.
        node: NodeIndex,
        /// Worktree path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<PathBuf>,
        /// Commit it was created at.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_commit: Option<String>,
    },
    /// The node's result commit.
    Commit {
        /// Node.
        node: NodeIndex,
        /// Commit id.
        commit: String,
    },
    /// Agent session id to resume later.
    Session {
        /// Node.
        node: NodeIndex,
        /// Session id.
        session_id: String,
    },
    /// Metrics reported by a runner for the current attempt.
    Metrics {
        /// Node.
        node: NodeIndex,
        /// Free-form metrics.
        metrics: serde_json::Value,
    },
    /// Retry requested: the next attempt resumes from `resume_from`.
    RetryRequested {
        /// Node.
        node: NodeIndex,
        /// Phase to resume from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_from: Option<Phase>,
    },
    /// The plan's jobs or options were edited (scaffolding, reshape). Replayed by applying
    /// the edits again ([`crate::plan::apply_edits`]): nodes keep their state by producerId
    /// ([`crate::plan::layout`]), new jobs get `new_ids` in order, and `statuses` are the
    /// statuses the edit re-derived. The journal holds the size of the edit, not of the plan.
    Reshaped {
        /// Time.
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
        /// Node.
        node: NodeIndex,
        /// Process group id (the leader's pid).
        pgid: u32,
        /// Started (true) or ended (false).
        running: bool,
    },
    /// The node's next attempt starts with an auto-heal.
    HealScheduled {
        /// Node.
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
        /// New prechecks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prechecks: Option<Box<WorkSpec>>,
        /// New postchecks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        postchecks: Option<Box<WorkSpec>>,
    },
}

impl StateChange {
    /// The node a node-level change is about (to re-index in-flight progress after a reshape).
    pub fn node_mut(&mut self) -> Option<&mut NodeIndex> {
        match self {
            StateChange::Node { node, .. }
            | StateChange::AttemptStarted { node, .. }
            | StateChange::PhaseStarted { node, .. }
            | StateChange::PhaseEnded { node, .. }
            | StateChange::AttemptEnded { node, .. }
            | StateChange::Worktree { node, .. }
            | StateChange::Commit { node, .. }
            | StateChange::Session { node, .. }
            | StateChange::Metrics { node, .. }
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

/// Why a [`StateChange`] could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The node index does not exist.
    #[error("node index {node} does not exist (plan has {count} nodes)")]
    NoSuchNode {
        /// Index.
        node: NodeIndex,
        /// Number of nodes.
        count: usize,
    },
    /// The transition is not in the table of SPEC §3.
    #[error("invalid transition of node {node} ({id}) from {from} to {to}")]
    InvalidTransition {
        /// Index.
        node: NodeIndex,
        /// Node id.
        id: NodeId,
        /// Current status.
        from: NodeStatus,
        /// Requested status.
        to: NodeStatus,
    },
    /// A journaled edit could not be applied again.
    #[error("the plan edit cannot be applied: {0}")]
    Edit(String),
    /// An attempt-level change arrived while no attempt runs.
    #[error("node {node} has no running attempt for {op}")]
    NoAttempt {
        /// Index.
        node: NodeIndex,
        /// What was attempted.
        op: &'static str,
    },
}

impl PlanRecord {
    /// A fresh record: every node pending, ids random.
    ///
    /// `node_count` is the number of graph nodes (jobs plus the snapshot node, if any; see
    /// [`crate::plan::PlanGraph::node_count`]).
    pub fn new(id: PlanId, spec: PlanSpec, repo: PathBuf, node_count: usize, at: Millis) -> Self {
        let nodes = (0..node_count)
            .map(|_| NodeState::new(NodeId::random()))
            .collect();
        PlanRecord {
            state: PlanState {
                id,
                repo,
                created_at: at,
                started_at: None,
                ended_at: None,
                scaffolding: false,
                paused: spec.start_paused,
                canceled: false,
                archived: false,
                base_commit: None,
                target_branch: None,
                snapshot_branch: None,
                nodes,
            },
            spec: Arc::new(spec),
        }
    }

    /// Applies one change. Invalid changes are rejected and leave the record untouched.
    pub fn apply(&mut self, change: &StateChange) -> Result<(), ApplyError> {
        let count = self.state.nodes.len();
        match change {
            StateChange::PlanStarted {
                at,
                base_commit,
                target_branch,
                snapshot_branch,
            } => {
                let s = &mut self.state;
                s.started_at.get_or_insert(*at);
                s.ended_at = None;
                if base_commit.is_some() {
                    s.base_commit.clone_from(base_commit);
                }
                if target_branch.is_some() {
                    s.target_branch.clone_from(target_branch);
                }
                if snapshot_branch.is_some() {
                    s.snapshot_branch.clone_from(snapshot_branch);
                }
            }
            StateChange::Paused { .. } => self.state.paused = true,
            StateChange::Resumed { .. } => {
                self.state.paused = false;
                self.state.ended_at = None;
            }
            StateChange::Canceled { .. } => self.state.canceled = true,
            StateChange::Archived { .. } => self.state.archived = true,
            StateChange::Finalized { .. } => self.state.scaffolding = false,
            StateChange::Reshaped {
                edits,
                started,
                new_ids,
                statuses,
                ..
            } => {
                let status_by_producer: std::collections::HashMap<&str, NodeStatus> = self
                    .spec
                    .jobs
                    .iter()
                    .zip(&self.state.nodes)
                    .map(|(j, n)| (j.producer_id.as_str(), n.status))
                    .collect();
                let spec = crate::plan::apply_edits(
                    &self.spec,
                    edits,
                    |p| status_by_producer.get(p).copied(),
                    *started,
                )
                .map_err(|e| ApplyError::Edit(e.to_string()))?;
                let from = crate::plan::layout(&self.spec, &spec);
                // Checked before anything changes: a change either applies or does nothing.
                if let Some(&Some(o)) = from.iter().find(|f| f.is_some_and(|o| o >= count)) {
                    return Err(ApplyError::NoSuchNode { node: o, count });
                }
                let fresh = from.iter().filter(|f| f.is_none()).count();
                if fresh != new_ids.len() {
                    return Err(ApplyError::Edit(format!(
                        "{fresh} new jobs but {} new node ids",
                        new_ids.len()
                    )));
                }
                let mut old: Vec<Option<NodeState>> = std::mem::take(&mut self.state.nodes)
                    .into_iter()
                    .map(Some)
                    .collect();
                let mut ids = new_ids.iter();
                let mut nodes: Vec<NodeState> = from
                    .iter()
                    .map(|f| {
                        f.and_then(|o| old[o].take())
                            .or_else(|| ids.next().map(|id| NodeState::new(id.clone())))
                            .unwrap_or_else(|| NodeState::new(NodeId::random()))
                    })
                    .collect();
                for &(n, status) in statuses {
                    if let Some(node) = nodes.get_mut(n) {
                        node.status = status;
                    }
                }
                self.state.nodes = nodes;
                self.state.ended_at = None;
                self.spec = Arc::new(spec);
            }
            StateChange::Recovered { .. } => {
                let s = &mut self.state;
                s.canceled = false;
                s.paused = true;
                s.ended_at = None;
                for n in &mut s.nodes {
                    if matches!(
                        n.status,
                        NodeStatus::Failed | NodeStatus::Blocked | NodeStatus::Canceled
                    ) {
                        n.status = NodeStatus::Pending;
                        n.resume_from = None;
                    }
                }
            }
            StateChange::Ended { at } => self.state.ended_at = Some(*at),
            StateChange::Node { node, status, .. } => {
                let n = node_mut(&mut self.state, *node)?;
                if !n.status.can_transition_to(*status) {
                    return Err(ApplyError::InvalidTransition {
                        node: *node,
                        id: n.id.clone(),
                        from: n.status,
                        to: *status,
                    });
                }
                n.status = *status;
                if *status == NodeStatus::Pending {
                    self.state.ended_at = None;
                }
            }
            StateChange::AttemptStarted {
                node,
                at,
                resume_from,
            } => {
                let n = node_mut(&mut self.state, *node)?;
                let number = n.attempts.len() as u32 + 1;
                // Most nodes run once: room for exactly one attempt (a default push would
                // reserve four), which keeps 100k-node plans several times smaller.
                n.attempts.reserve_exact(1);
                n.attempts.push(Attempt {
                    number,
                    status: AttemptStatus::Running,
                    started_at: *at,
                    ended_at: None,
                    resumed_from: *resume_from,
                    phases: Vec::with_capacity(1),
                    error: None,
                    failure_reason: None,
                    failed_phase: None,
                    metrics: None,
                    heal: n.heal.take(),
                });
                n.resume_from = None;
                n.processes.clear();
                n.error = None;
            }
            StateChange::PhaseStarted { node, phase, at } => {
                let a = running_attempt(node_mut(&mut self.state, *node)?, *node, "phase_started")?;
                a.phases.push(PhaseRecord {
                    phase: *phase,
                    status: PhaseStatus::Running,
                    started_at: *at,
                    ended_at: None,
                    error: None,
                });
            }
            StateChange::PhaseEnded {
                node,
                phase,
                status,
                at,
                error,
            } => {
                let a = running_attempt(node_mut(&mut self.state, *node)?, *node, "phase_ended")?;
                match a.phases.last_mut() {
                    Some(p) if p.phase == *phase && p.status == PhaseStatus::Running => {
                        p.status = *status;
                        p.ended_at = Some(*at);
                        p.error.clone_from(error);
                    }
                    _ => a.phases.push(PhaseRecord {
                        phase: *phase,
                        status: *status,
                        started_at: *at,
                        ended_at: Some(*at),
                        error: error.clone(),
                    }),
                }
            }
            StateChange::AttemptEnded {
                node,
                status,
                at,
                error,
                reason,
                failed_phase,
            } => {
                let n = node_mut(&mut self.state, *node)?;
                running_attempt(n, *node, "attempt_ended")?;
                n.error.clone_from(error);
                // Whatever the attempt started has been stopped with it.
                n.processes.clear();
                let a = running_attempt(n, *node, "attempt_ended")?;
                a.status = *status;
                a.ended_at = Some(*at);
                a.error.clone_from(error);
                a.failure_reason = *reason;
                a.failed_phase = *failed_phase;
                for p in a
                    .phases
                    .iter_mut()
                    .filter(|p| p.status == PhaseStatus::Running)
                {
                    p.status = PhaseStatus::Canceled;
                    p.ended_at = Some(*at);
                }
            }
            StateChange::Worktree {
                node,
                path,
                base_commit,
            } => {
                let n = node_mut(&mut self.state, *node)?;
                n.worktree.clone_from(path);
                if base_commit.is_some() {
                    n.base_commit.clone_from(base_commit);
                }
            }
            StateChange::Commit { node, commit } => {
                node_mut(&mut self.state, *node)?.commit = Some(commit.clone());
            }
            StateChange::Session { node, session_id } => {
                node_mut(&mut self.state, *node)?.session_id = Some(session_id.clone());
            }
            StateChange::Metrics { node, metrics } => {
                let a = running_attempt(node_mut(&mut self.state, *node)?, *node, "metrics")?;
                a.metrics = Some(match a.metrics.take() {
                    Some(old) => accumulate(old, metrics),
                    None => metrics.clone(),
                });
            }
            StateChange::Process {
                node,
                pgid,
                running,
            } => {
                let n = node_mut(&mut self.state, *node)?;
                n.processes.retain(|p| p != pgid);
                if *running {
                    n.processes.push(*pgid);
                }
            }
            StateChange::HealScheduled { node, heal } => {
                node_mut(&mut self.state, *node)?.heal = Some(heal.clone());
            }
            StateChange::RetryRequested { node, resume_from } => {
                node_mut(&mut self.state, *node)?.resume_from = *resume_from;
            }
            StateChange::SpecsReplaced {
                node,
                work,
                prechecks,
                postchecks,
            } => {
                if *node >= self.spec.jobs.len() {
                    return Err(ApplyError::NoSuchNode { node: *node, count });
                }
                let job = Arc::make_mut(&mut self.spec)
                    .jobs
                    .get_mut(*node)
                    .ok_or(ApplyError::NoSuchNode { node: *node, count })?;
                if let Some(w) = work {
                    job.work = (**w).clone();
                }
                if let Some(p) = prechecks {
                    job.prechecks = Some((**p).clone());
                }
                if let Some(p) = postchecks {
                    job.postchecks = Some((**p).clone());
                }
            }
        }
        Ok(())
    }

    /// The plan's status, derived from its nodes and flags (SPEC §3).
    pub fn status(&self) -> PlanStatus {
        self.state.status()
    }

    /// Whether the plan runs jobs in worktrees.
    pub fn isolation(&self) -> Isolation {
        self.spec.isolation
    }
}

/// Metrics reported twice in one attempt (an auto-heal's agent, then the phase's agent): for
/// two objects, numbers add up and other values take the later report; else the later wins.
fn accumulate(old: serde_json::Value, new: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match (old, new) {
        (Value::Object(mut sum), Value::Object(add)) => {
            for (key, value) in add {
                let merged = match (sum.get(key), value) {
                    (Some(Value::Number(a)), Value::Number(b)) => match (a.as_u64(), b.as_u64()) {
                        (Some(a), Some(b)) => Value::from(a.saturating_add(b)),
                        _ => Value::from(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
                    },
                    _ => value.clone(),
                };
                sum.insert(key.clone(), merged);
            }
            Value::Object(sum)
        }
        (_, new) => new.clone(),
    }
}

fn node_mut(state: &mut PlanState, node: NodeIndex) -> Result<&mut NodeState, ApplyError> {
    let count = state.nodes.len();
    state
        .nodes
        .get_mut(node)
        .ok_or(ApplyError::NoSuchNode { node, count })
}

fn running_attempt<'a>(
    n: &'a mut NodeState,
    node: NodeIndex,
    op: &'static str,
) -> Result<&'a mut Attempt, ApplyError> {
    n.attempts
        .last_mut()
        .filter(|a| a.status == AttemptStatus::Running)
        .ok_or(ApplyError::NoAttempt { node, op })
}

/// Counts of nodes per status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StatusCounts {
    /// pending
    pub pending: usize,
    /// ready
    pub ready: usize,
    /// scheduled, running or completed_split
    pub active: usize,
    /// succeeded
    pub succeeded: usize,
    /// failed
    pub failed: usize,
    /// blocked
    pub blocked: usize,
    /// canceled
    pub canceled: usize,
}

impl StatusCounts {
    /// Counts the statuses.
    pub fn of<'a>(statuses: impl IntoIterator<Item = &'a NodeStatus>) -> Self {
        let mut c = StatusCounts::default();
        for s in statuses {
            match s {
                NodeStatus::Pending => c.pending += 1,
                NodeStatus::Ready => c.ready += 1,
                NodeStatus::Scheduled | NodeStatus::Running | NodeStatus::CompletedSplit => {
                    c.active += 1
                }
                NodeStatus::Succeeded => c.succeeded += 1,
                NodeStatus::Failed => c.failed += 1,
                NodeStatus::Blocked => c.blocked += 1,
                NodeStatus::Canceled => c.canceled += 1,
            }
        }
        c
    }

    /// Derives the plan status from these counts and the plan's flags.
    pub fn plan_status(&self, state: &PlanState) -> PlanStatus {
        if state.archived {
            return PlanStatus::Archived;
        }
        if state.scaffolding {
            return PlanStatus::Scaffolding;
        }
        let unfinished = self.pending + self.ready + self.active;
        if unfinished == 0 {
            return if self.canceled > 0 {
                PlanStatus::Canceled
            } else if self.failed + self.blocked > 0 {
                PlanStatus::Failed
            } else {
                PlanStatus::Succeeded
            };
        }
        if state.canceled {
            return PlanStatus::Canceled;
        }
        if state.paused {
            return if self.active > 0 {
                PlanStatus::Pausing
            } else {
                PlanStatus::Paused
            };
        }
        if state.started_at.is_none() {
            return PlanStatus::Pending;
        }
        PlanStatus::Running
    }
}

impl PlanState {
    /// Node status counts.
    pub fn counts(&self) -> StatusCounts {
        StatusCounts::of(self.nodes.iter().map(|n| &n.status))
    }

    /// The plan's status, derived from its nodes and flags.
    pub fn status(&self) -> PlanStatus {
        self.counts().plan_status(self)
    }
}

#[cfg(test)]
mod tests {
    use super::accumulate;
    use serde_json::json;

    #[test]
    fn metrics_of_one_attempt_add_up() {
        let heal = json!({"agent": "claude", "inputTokens": 100, "costUsd": 0.5, "turns": 2});
        let work = json!({"agent": "codex", "inputTokens": 50, "costUsd": 0.25, "sessionId": "s"});
        assert_eq!(
            accumulate(heal, &work),
            json!({"agent": "codex", "inputTokens": 150, "costUsd": 0.75, "turns": 2, "sessionId": "s"})
        );
        assert_eq!(accumulate(json!(1), &json!({"a": 1})), json!({"a": 1}));
    }
}
