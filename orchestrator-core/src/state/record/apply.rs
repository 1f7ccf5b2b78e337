//! [`PlanRecord::apply`]: how each [`StateChange`] moves a record, and [`ApplyError`] when it
//! cannot. Plan-level flags are set here; node and attempt changes are in `attempt`, changes
//! of the plan's definition in `reshape`.

mod attempt;
mod reshape;

use crate::ids::{Millis, NodeId, NodeIndex};
use crate::state::NodeStatus;

use super::{Attempt, AttemptStatus, NodeState, PlanRecord, PlanState, StateChange};

/// Why a [`StateChange`] could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The node index does not exist.
    #[error("node index {node} does not exist (plan has {count} nodes)")]
    NoSuchNode {
        /// The node's index in the plan's graph.
        node: NodeIndex,
        /// How many nodes the plan has.
        count: usize,
    },
    /// The transition is not in the table of SPEC §3.
    #[error("invalid transition of node {node} ({id}) from {from} to {to}")]
    InvalidTransition {
        /// The node's index in the plan's graph.
        node: NodeIndex,
        /// The node's id.
        id: NodeId,
        /// The node's current status.
        from: NodeStatus,
        /// The status the change asked for.
        to: NodeStatus,
    },
    /// A journaled edit could not be applied again.
    #[error("the plan edit cannot be applied: {0}")]
    Edit(#[source] crate::plan::EditError),
    /// A journaled reshape adds a different number of jobs than it has new node ids for.
    #[error("the plan edit cannot be applied: {jobs} new jobs but {ids} new node ids")]
    NewIds {
        /// Jobs the edit adds.
        jobs: usize,
        /// Node ids recorded for them.
        ids: usize,
    },
    /// An attempt-level change arrived while no attempt runs.
    #[error("node {node} has no running attempt for {op}")]
    NoAttempt {
        /// The node's index in the plan's graph.
        node: NodeIndex,
        /// What was attempted.
        op: &'static str,
    },
}

impl PlanRecord {
    /// Applies one change. Invalid changes are rejected and leave the record untouched.
    pub fn apply(&mut self, change: &StateChange) -> Result<(), ApplyError> {
        match change {
            StateChange::PlanStarted {
                at,
                base_commit,
                target_branch,
                snapshot_branch,
            } => self
                .state
                .start(*at, base_commit, target_branch, snapshot_branch),
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
            } => self.reshape(edits, *started, new_ids, statuses)?,
            StateChange::Recovered { .. } => self.state.recover(),
            StateChange::Ended { at } => self.state.ended_at = Some(*at),
            StateChange::Node { node, status, .. } => self.state.transition(*node, *status)?,
            StateChange::AttemptStarted {
                node,
                at,
                resume_from,
            } => self.state.start_attempt(*node, *at, *resume_from)?,
            StateChange::PhaseStarted { node, phase, at } => {
                self.state.start_phase(*node, *phase, *at)?
            }
            StateChange::PhaseEnded {
                node,
                phase,
                status,
                at,
                error,
            } => self.state.end_phase(*node, *phase, *status, *at, error)?,
            StateChange::AttemptEnded {
                node,
                status,
                at,
                error,
                reason,
                failed_phase,
            } => self
                .state
                .end_attempt(*node, *status, *at, error, *reason, *failed_phase)?,
            StateChange::Launched {
                node,
                at,
                resume_from,
            } => {
                self.state.transition(*node, NodeStatus::Scheduled)?;
                self.state.transition(*node, NodeStatus::Running)?;
                self.state.start_attempt(*node, *at, *resume_from)?
            }
            StateChange::PhaseRan {
                node,
                phase,
                status,
                started_at,
                at,
                error,
            } => {
                self.state.start_phase(*node, *phase, *started_at)?;
                self.state.end_phase(*node, *phase, *status, *at, error)?
            }
            StateChange::Succeeded { node, at } => {
                self.state
                    .end_attempt(*node, AttemptStatus::Succeeded, *at, &None, None, None)?;
                self.state.transition(*node, NodeStatus::Succeeded)?
            }
            StateChange::Worktree {
                node,
                path,
                base_commit,
            } => self.state.set_worktree(*node, path, base_commit)?,
            StateChange::Commit { node, commit } => {
                // `approval: after` approves a commit: a new one needs a new approval.
                let after = self
                    .spec
                    .jobs
                    .get(*node)
                    .is_some_and(|j| j.extra.approval == Some(crate::plan::Approval::After));
                let n = node_mut(&mut self.state, *node)?;
                n.extra.make_mut().commit = Some(commit.clone());
                if after {
                    n.extra.set(|x| &mut x.approved, false);
                }
            }
            StateChange::Session { node, session_id } => {
                node_mut(&mut self.state, *node)?
                    .extra
                    .make_mut()
                    .session_id = Some(session_id.clone());
            }
            StateChange::Metrics { node, metrics } => self.state.add_metrics(*node, metrics)?,
            StateChange::Output { node, text } => self.state.set_output(*node, text)?,
            StateChange::Process {
                node,
                pgid,
                running,
            } => self.state.track_process(*node, *pgid, *running)?,
            StateChange::HealScheduled { node, heal } => {
                node_mut(&mut self.state, *node)?.extra.make_mut().heal = Some(heal.clone());
            }
            StateChange::RetryRequested {
                node,
                resume_from,
                anew,
            } => {
                let n = node_mut(&mut self.state, *node)?;
                n.extra.set(|x| &mut x.resume_from, *resume_from);
                if *anew {
                    n.extra.set(|x| &mut x.approved, false);
                    n.extra.set(|x| &mut x.timer_fired, false);
                }
            }
            StateChange::WaitStarted { node, waiting } => {
                let n = node_mut(&mut self.state, *node)?;
                n.extra.make_mut().waiting = Some(Box::new(waiting.clone()));
                // A new wait: the message of the one before has been delivered.
                if let Some(tools) = n.extra.get_mut().and_then(|x| x.tools.as_mut()) {
                    tools.wake = None;
                }
            }
            StateChange::Cron { node, cron } => {
                let n = node_mut(&mut self.state, *node)?;
                n.extra
                    .make_mut()
                    .tools
                    .get_or_insert_with(Box::default)
                    .cron = cron.clone();
            }
            StateChange::Woke { node, message } => {
                let n = node_mut(&mut self.state, *node)?;
                n.extra.set(|x| &mut x.waiting, None);
                let tools = n.extra.make_mut().tools.get_or_insert_with(Box::default);
                tools.wake = Some(message.clone());
                // The wake-up message carries what the inbox held.
                tools.inbox.clear();
            }
            StateChange::Message { node, message } => {
                let n = node_mut(&mut self.state, *node)?;
                let tools = n.extra.make_mut().tools.get_or_insert_with(Box::default);
                tools.inbox.push(message.clone());
            }
            StateChange::AgentDeleted { node, child } => {
                let n = node_mut(&mut self.state, *node)?;
                let tools = n.extra.make_mut().tools.get_or_insert_with(Box::default);
                if !tools.deleted.contains(child) {
                    tools.deleted.push(child.clone());
                }
            }
            StateChange::Dehydrated { node, blob } => {
                let n = node_mut(&mut self.state, *node)?;
                n.extra
                    .make_mut()
                    .tools
                    .get_or_insert_with(Box::default)
                    .dehydrated = blob.clone();
                if blob.is_some() {
                    n.extra.set(|x| &mut x.worktree, None);
                }
            }
            StateChange::Checkpoint { node, commit } => {
                let n = node_mut(&mut self.state, *node)?;
                n.extra
                    .make_mut()
                    .tools
                    .get_or_insert_with(Box::default)
                    .checkpoint = Some(commit.clone());
            }
            StateChange::Approved { node } => {
                let n = node_mut(&mut self.state, *node)?;
                n.extra.make_mut().approved = true;
                n.extra.set(|x| &mut x.waiting, None);
            }
            StateChange::TimerFired { node } => {
                let n = node_mut(&mut self.state, *node)?;
                n.extra.make_mut().timer_fired = true;
                n.extra.set(|x| &mut x.waiting, None);
            }
            StateChange::WaitFailed {
                node,
                reason,
                message,
                at,
            } => self.state.fail_waiting(*node, *reason, message, *at)?,
            StateChange::SpecsReplaced {
                node,
                work,
                prechecks,
                postchecks,
            } => self.replace_specs(
                *node,
                work.as_deref(),
                prechecks.as_deref(),
                postchecks.as_deref(),
            )?,
        }
        Ok(())
    }
}

impl PlanState {
    /// The plan started (again): the first start time is kept, git facts given are pinned.
    fn start(
        &mut self,
        at: Millis,
        base_commit: &Option<String>,
        target_branch: &Option<String>,
        snapshot_branch: &Option<String>,
    ) {
        self.started_at.get_or_insert(at);
        self.ended_at = None;
        if base_commit.is_some() {
            self.base_commit.clone_from(base_commit);
        }
        if target_branch.is_some() {
            self.target_branch.clone_from(target_branch);
        }
        if snapshot_branch.is_some() {
            self.snapshot_branch.clone_from(snapshot_branch);
        }
    }

    /// Recovery of a failed or canceled plan: failed, blocked and canceled nodes are pending
    /// again and the plan is paused.
    fn recover(&mut self) {
        self.canceled = false;
        self.paused = true;
        self.ended_at = None;
        for n in &mut self.nodes {
            if matches!(
                n.status,
                NodeStatus::Failed | NodeStatus::Blocked | NodeStatus::Canceled
            ) {
                n.status = NodeStatus::Pending;
                n.extra.set(|x| &mut x.resume_from, None);
            }
        }
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
