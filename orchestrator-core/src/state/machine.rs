//! [`PlanMachine`]: the DAG state machine of SPEC §3 over a [`PlanRecord`].
//!
//! Every method turns an intent (schedule, succeed, fail, retry ...) into [`StateChange`]s,
//! applies them, and queues them in an outbox the engine drains to persist and publish. The
//! machine never lets an invalid transition through: it returns an error instead.

use std::sync::Arc;

use crate::ids::{Millis, NodeId, NodeIndex};
use crate::plan::PlanGraph;
use crate::state::{
    ApplyError, AttemptStatus, FailureReason, NodeStatus, Phase, PlanRecord, PlanStatus,
    StateChange, StatusCounts, Waiting,
};

/// A change with the node status it replaced (for `NodeTransition` events).
pub type OutboxEntry = (StateChange, Option<NodeStatus>);

/// The plan state machine: a record, its graph, and the bookkeeping that makes every
/// transition O(affected nodes).
#[derive(Debug, Clone)]
pub struct PlanMachine {
    record: PlanRecord,
    graph: Arc<PlanGraph>,
    /// Per node: dependencies not yet succeeded.
    waiting: Vec<u32>,
    counts: StatusCounts,
    /// Per node: whether it may have a result (an output or a commit) for its dependents'
    /// inputs. Kept here so that a launch reads a dependency's state only when it may: on a
    /// large plan that state is a cache miss per dependency.
    results: Vec<bool>,
    outbox: Vec<OutboxEntry>,
    newly_ready: Vec<NodeIndex>,
}

impl PlanMachine {
    /// Wraps a record (fresh or loaded) and its graph.
    pub fn new(record: PlanRecord, graph: Arc<PlanGraph>) -> Self {
        let mut m = PlanMachine {
            counts: record.counts(),
            record,
            graph,
            waiting: Vec::new(),
            results: Vec::new(),
            outbox: Vec::new(),
            newly_ready: Vec::new(),
        };
        m.rebuild_waiting();
        m.rebuild_results();
        m
    }

    fn rebuild_results(&mut self) {
        self.results = (self.record.state.nodes.iter())
            .map(|n| n.extra.commit.is_some() || n.output().is_some())
            .collect();
    }

    /// Whether node `n` may have an output or a commit; `false` means it surely has neither.
    pub fn may_have_result(&self, n: NodeIndex) -> bool {
        self.results.get(n).copied().unwrap_or(true)
    }

    fn rebuild_waiting(&mut self) {
        // Which nodes succeeded, read in one pass: each dependency's whole node state, read
        // where the graph points, was a cache miss (~25 ms for a 1M-node plan's 2M).
        let succeeded: Vec<bool> = (self.record.state.nodes.iter())
            .map(|node| node.status == NodeStatus::Succeeded)
            .collect();
        self.waiting = (0..succeeded.len())
            .map(|n| {
                self.graph
                    .dependencies(n)
                    .filter(|&d| !succeeded.get(d).copied().unwrap_or(false))
                    .count() as u32
            })
            .collect();
    }

    /// The record as it is now.
    pub fn record(&self) -> &PlanRecord {
        &self.record
    }

    /// The graph.
    pub fn graph(&self) -> &Arc<PlanGraph> {
        &self.graph
    }

    /// Status of node `n`.
    pub fn status_of(&self, n: NodeIndex) -> NodeStatus {
        self.record.state.nodes[n].status
    }

    /// Node status counts (kept incrementally).
    pub fn counts(&self) -> StatusCounts {
        self.counts
    }

    /// The derived plan status (O(1)).
    pub fn plan_status(&self) -> PlanStatus {
        self.counts.plan_status(&self.record.state)
    }

    /// Takes the changes made since the last call, with the node status each one replaced.
    pub fn drain_outbox(&mut self) -> std::vec::Drain<'_, OutboxEntry> {
        self.outbox.drain(..)
    }

    /// Whether changes are waiting to be drained.
    pub fn has_outbox(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Takes the nodes that became ready since the last call.
    pub fn drain_ready(&mut self) -> std::vec::Drain<'_, NodeIndex> {
        self.newly_ready.drain(..)
    }

    /// Applies and queues one change that is not a node transition.
    pub fn record_change(&mut self, change: StateChange) -> Result<(), ApplyError> {
        self.record.apply(&change)?;
        if let StateChange::Output { node, .. } | StateChange::Commit { node, .. } = &change {
            if let Some(r) = self.results.get_mut(*node) {
                *r = true;
            }
        }
        self.outbox.push((change, None));
        Ok(())
    }

    fn transition(&mut self, n: NodeIndex, to: NodeStatus, at: Millis) -> Result<(), ApplyError> {
        let change = StateChange::Node {
            node: n,
            status: to,
            at,
        };
        self.moved(n, to, change)
    }

    /// Applies and queues `change`, which moves node `n` from its status to `to` (through
    /// statuses that count alike, for the changes that record several steps at once).
    fn moved(
        &mut self,
        n: NodeIndex,
        to: NodeStatus,
        change: StateChange,
    ) -> Result<(), ApplyError> {
        let from = self.status_of(n);
        self.record.apply(&change)?;
        self.count(from, -1);
        self.count(to, 1);
        let sub = self.graph.is_sub_agent(n);
        self.counts.settle(from, sub, -1);
        self.counts.settle(to, sub, 1);
        self.outbox.push((change, Some(from)));
        if to == NodeStatus::Ready {
            self.newly_ready.push(n);
        }
        Ok(())
    }

    fn count(&mut self, s: NodeStatus, delta: isize) {
        let c = &mut self.counts;
        let slot = match s {
            NodeStatus::Pending => &mut c.pending,
            NodeStatus::Ready => &mut c.ready,
            NodeStatus::Scheduled | NodeStatus::Running | NodeStatus::CompletedSplit => {
                &mut c.active
            }
            NodeStatus::Succeeded => &mut c.succeeded,
            NodeStatus::Failed => &mut c.failed,
            NodeStatus::Blocked => &mut c.blocked,
            NodeStatus::Canceled => &mut c.canceled,
            NodeStatus::Waiting => &mut c.waiting,
        };
        *slot = slot.wrapping_add_signed(delta);
        if s == NodeStatus::CompletedSplit {
            c.composite = c.composite.wrapping_add_signed(delta);
        }
    }

    /// Starts the plan: pins its git facts (first start only) and makes every pending node whose
    /// dependencies all succeeded ready.
    pub fn start(
        &mut self,
        at: Millis,
        base_commit: Option<String>,
        target_branch: Option<String>,
        snapshot_branch: Option<String>,
    ) -> Result<(), ApplyError> {
        self.record_change(StateChange::PlanStarted {
            at,
            base_commit,
            target_branch,
            snapshot_branch,
        })?;
        self.promote_all(at)
    }

    fn promote_all(&mut self, at: Millis) -> Result<(), ApplyError> {
        for n in 0..self.record.state.nodes.len() {
            self.promote(n, at)?;
        }
        Ok(())
    }

    fn promote(&mut self, n: NodeIndex, at: Millis) -> Result<(), ApplyError> {
        if self.waiting[n] == 0 && self.status_of(n) == NodeStatus::Pending {
            self.transition(n, NodeStatus::Ready, at)?;
        }
        Ok(())
    }

    /// `ready -> scheduled`: picked by the scheduler.
    pub fn schedule(&mut self, n: NodeIndex, at: Millis) -> Result<(), ApplyError> {
        self.transition(n, NodeStatus::Scheduled, at)
    }

    /// `scheduled -> running` and a new attempt (resuming from the retry's phase, if any).
    /// Returns the attempt number and the phase it starts from.
    pub fn begin_attempt(
        &mut self,
        n: NodeIndex,
        at: Millis,
    ) -> Result<(u32, Option<Phase>), ApplyError> {
        self.transition(n, NodeStatus::Running, at)?;
        let resume_from = self.record.state.nodes[n].extra.resume_from;
        self.start_attempt(n, at, resume_from)
    }

    /// `ready -> scheduled -> running` and a new attempt, as [`PlanMachine::schedule`] then
    /// [`PlanMachine::begin_attempt`] would, in one change ([`StateChange::Launched`]).
    /// Returns the attempt number and the phase it starts from.
    pub fn launch(&mut self, n: NodeIndex, at: Millis) -> Result<(u32, Option<Phase>), ApplyError> {
        let resume_from = self.record.state.nodes[n].extra.resume_from;
        let change = StateChange::Launched {
            node: n,
            at,
            resume_from,
        };
        self.moved(n, NodeStatus::Running, change)?;
        Ok((
            self.record.state.nodes[n].attempts.len() as u32,
            resume_from,
        ))
    }

    /// Records a new attempt of node `n` resuming from `resume_from`; returns its number and
    /// that phase.
    fn start_attempt(
        &mut self,
        n: NodeIndex,
        at: Millis,
        resume_from: Option<Phase>,
    ) -> Result<(u32, Option<Phase>), ApplyError> {
        self.record_change(StateChange::AttemptStarted {
            node: n,
            at,
            resume_from,
        })?;
        Ok((
            self.record.state.nodes[n].attempts.len() as u32,
            resume_from,
        ))
    }

    /// `running -> succeeded`; dependents whose dependencies all succeeded become ready.
    pub fn succeed(&mut self, n: NodeIndex, at: Millis) -> Result<(), ApplyError> {
        if self.has_open_attempt(n) {
            // The attempt's end and the node's, in one change.
            self.moved(
                n,
                NodeStatus::Succeeded,
                StateChange::Succeeded { node: n, at },
            )?;
        } else {
            self.transition(n, NodeStatus::Succeeded, at)?;
        }
        // By place in the row rather than through a clone of the graph's `Arc`: that was an
        // atomic increment and decrement of a count the threads running jobs touch too, a
        // sixth of this function's time on a 1M-node plan.
        for k in 0.. {
            let Some(d) = self.graph.dependent(n, k) else {
                break;
            };
            self.waiting[d] = self.waiting[d].saturating_sub(1);
            self.promote(d, at)?;
        }
        Ok(())
    }

    /// `running|scheduled -> failed`; every descendant not yet terminal becomes blocked.
    pub fn fail(
        &mut self,
        n: NodeIndex,
        at: Millis,
        error: String,
        reason: FailureReason,
        phase: Option<Phase>,
    ) -> Result<(), ApplyError> {
        self.end_attempt(
            n,
            AttemptStatus::Failed,
            at,
            Some(error),
            Some(reason),
            phase,
        )?;
        self.transition(n, NodeStatus::Failed, at)?;
        self.block_descendants(n, at)
    }

    fn block_descendants(&mut self, n: NodeIndex, at: Millis) -> Result<(), ApplyError> {
        let graph = self.graph.clone();
        let mut stack: Vec<NodeIndex> = graph.dependents(n).collect();
        while let Some(d) = stack.pop() {
            match self.status_of(d) {
                // A parent agent woken up but not started yet goes on without the sub-agent
                // that failed (it is told so); it is no pending dependent.
                NodeStatus::Ready if self.has_open_attempt(d) => {}
                NodeStatus::Pending | NodeStatus::Ready => {
                    self.transition(d, NodeStatus::Blocked, at)?;
                    stack.extend(graph.dependents(d));
                }
                // Already blocked: its descendants were blocked with it.
                _ => {}
            }
        }
        Ok(())
    }

    /// `running -> canceled` (or `scheduled -> canceled`), ending the attempt as canceled.
    pub fn cancel_node(&mut self, n: NodeIndex, at: Millis) -> Result<(), ApplyError> {
        self.end_attempt(
            n,
            AttemptStatus::Canceled,
            at,
            Some("canceled".into()),
            Some(FailureReason::Canceled),
            None,
        )?;
        self.transition(n, NodeStatus::Canceled, at)
    }

    fn end_attempt(
        &mut self,
        n: NodeIndex,
        status: AttemptStatus,
        at: Millis,
        error: Option<String>,
        reason: Option<FailureReason>,
        failed_phase: Option<Phase>,
    ) -> Result<(), ApplyError> {
        if self.has_open_attempt(n) {
            self.record_change(StateChange::AttemptEnded {
                node: n,
                status,
                at,
                error,
                reason,
                failed_phase,
            })?;
        }
        Ok(())
    }

    /// `ready -> waiting`: node `n` is held on `waiting` (SPEC §12) instead of starting.
    pub fn wait(&mut self, n: NodeIndex, waiting: Waiting, at: Millis) -> Result<(), ApplyError> {
        self.transition(n, NodeStatus::Waiting, at)?;
        self.record_change(StateChange::WaitStarted { node: n, waiting })
    }

    /// `running -> waiting` for an `approval: after` job whose phases passed, or an agent job
    /// that parked (SPEC §15): its attempt stays open (it goes on after the approval or the
    /// wake-up, see [`PlanMachine::continue_attempt`]), its commit moves nowhere until then,
    /// and it holds no slot or process meanwhile.
    pub fn hold_after(
        &mut self,
        n: NodeIndex,
        waiting: Waiting,
        at: Millis,
    ) -> Result<(), ApplyError> {
        self.transition(n, NodeStatus::Waiting, at)?;
        self.record_change(StateChange::WaitStarted { node: n, waiting })
    }

    /// Whether node `n` has an attempt still open (an `approval: after` job held, then
    /// approved): its next run continues it instead of starting a new one.
    pub fn has_open_attempt(&self, n: NodeIndex) -> bool {
        self.record.state.nodes[n]
            .last_attempt()
            .is_some_and(|a| a.status == AttemptStatus::Running)
    }

    /// `scheduled -> running`, continuing node `n`'s open attempt: after the commit (merge-ri,
    /// then success) for an approved job, at its work for a parked agent woken up (its
    /// session resumes with the wake-up message). Returns the attempt's number and the phase
    /// it goes on from.
    pub fn continue_attempt(
        &mut self,
        n: NodeIndex,
        at: Millis,
    ) -> Result<(u32, Option<Phase>), ApplyError> {
        self.transition(n, NodeStatus::Running, at)?;
        let node = &self.record.state.nodes[n];
        let number = node.attempts.len() as u32;
        let woken = node.extra.tools.as_ref().is_some_and(|t| t.wake.is_some());
        Ok((
            number,
            Some(if woken { Phase::Work } else { Phase::MergeRi }),
        ))
    }

    /// `waiting -> ready` for a parked agent whose wait ended (its timer fired, a person
    /// answered): its open attempt goes on at its work, the session resumed with `message`.
    pub fn wake(&mut self, n: NodeIndex, message: String, at: Millis) -> Result<(), ApplyError> {
        self.record_change(StateChange::Woke { node: n, message })?;
        self.transition(n, NodeStatus::Ready, at)
    }

    /// `running -> completed_split`: the job's run made its commit and a split; its attempt
    /// ends (succeeded: what it did is committed) and its sub-jobs, added by the same batch,
    /// do the rest.
    pub fn complete_split(&mut self, n: NodeIndex, at: Millis) -> Result<(), ApplyError> {
        self.end_attempt(n, AttemptStatus::Succeeded, at, None, None, None)?;
        self.transition(n, NodeStatus::CompletedSplit, at)
    }

    /// A new attempt of split node `n`, whose sub-jobs all succeeded: it merges their commits
    /// into its own and goes on from the commit; its status stays `completed_split` until it
    /// ends (`succeeded` or `failed`).
    pub fn continue_composite(
        &mut self,
        n: NodeIndex,
        at: Millis,
    ) -> Result<(u32, Option<Phase>), ApplyError> {
        self.start_attempt(n, at, Some(Phase::Commit))
    }

    /// `completed_split -> failed` with reason `composite_failed` and `message` (a sub-job
    /// failed, or the controller's decision could not be applied); its descendants are
    /// blocked.
    pub fn fail_composite(
        &mut self,
        n: NodeIndex,
        message: String,
        at: Millis,
    ) -> Result<(), ApplyError> {
        self.fail_waiting(n, FailureReason::CompositeFailed, message, at)
    }

    /// `waiting -> ready` for a job a person approved; it is not held again until a retry.
    pub fn approve(&mut self, n: NodeIndex, at: Millis) -> Result<(), ApplyError> {
        self.record_change(StateChange::Approved { node: n })?;
        self.transition(n, NodeStatus::Ready, at)
    }

    /// `waiting -> ready` for a job whose timer fired; it runs now (with nothing to do) and
    /// waits again only after a retry.
    pub fn fire_timer(&mut self, n: NodeIndex, at: Millis) -> Result<(), ApplyError> {
        self.record_change(StateChange::TimerFired { node: n })?;
        self.transition(n, NodeStatus::Ready, at)
    }

    /// `waiting -> failed` with reason `rejected` and the person's reason; every descendant
    /// not yet terminal becomes blocked.
    pub fn reject(&mut self, n: NodeIndex, reason: String, at: Millis) -> Result<(), ApplyError> {
        self.fail_waiting(
            n,
            FailureReason::Rejected,
            format!("rejected: {reason}"),
            at,
        )
    }

    /// `waiting -> failed` with reason `force_failed` (`force_fail` of a waiting job).
    pub fn force_fail_waiting(&mut self, n: NodeIndex, at: Millis) -> Result<(), ApplyError> {
        let what = self.record.state.nodes[n]
            .extra
            .waiting
            .as_ref()
            .map_or("its condition".to_owned(), |w| w.waiting_for.to_string());
        let message = format!("force-failed while waiting for {what}");
        self.fail_waiting(n, FailureReason::ForceFailed, message, at)
    }

    fn fail_waiting(
        &mut self,
        n: NodeIndex,
        reason: FailureReason,
        message: String,
        at: Millis,
    ) -> Result<(), ApplyError> {
        self.record_change(StateChange::WaitFailed {
            node: n,
            reason,
            message,
            at,
        })?;
        self.transition(n, NodeStatus::Failed, at)?;
        self.block_descendants(n, at)
    }

    /// Cancels the plan: every pending, ready or waiting node becomes canceled. Active nodes are left to
    /// the engine, which stops them and then calls [`PlanMachine::cancel_node`].
    pub fn cancel(&mut self, at: Millis) -> Result<(), ApplyError> {
        self.record_change(StateChange::Canceled { at })?;
        for n in 0..self.record.state.nodes.len() {
            let status = self.status_of(n);
            if status == NodeStatus::Waiting {
                // An `approval: after` job waits with its attempt open.
                self.end_attempt(n, AttemptStatus::Canceled, at, None, None, None)?;
            }
            if matches!(
                status,
                NodeStatus::Pending | NodeStatus::Ready | NodeStatus::Waiting
            ) {
                self.transition(n, NodeStatus::Canceled, at)?;
            }
        }
        Ok(())
    }

    /// Retries a failed node for the engine (after a pause, a crash, for an auto-heal): the
    /// next attempt resumes from `resume_from`, and an approval given or a timer fired still
    /// holds. See [`PlanMachine::retry_anew`] for a host's retry.
    pub fn retry(
        &mut self,
        n: NodeIndex,
        resume_from: Option<Phase>,
        at: Millis,
    ) -> Result<(), ApplyError> {
        self.retry_with(n, resume_from, false, at)
    }

    /// Retries a failed node for a host: new work, so an `approval` job waits for a person
    /// again and a timer job waits again. Otherwise as [`PlanMachine::retry`]: descendants
    /// blocked only through it become pending again; the node is ready at once if its
    /// dependencies all succeeded.
    pub fn retry_anew(
        &mut self,
        n: NodeIndex,
        resume_from: Option<Phase>,
        at: Millis,
    ) -> Result<(), ApplyError> {
        self.retry_with(n, resume_from, true, at)
    }

    fn retry_with(
        &mut self,
        n: NodeIndex,
        resume_from: Option<Phase>,
        anew: bool,
        at: Millis,
    ) -> Result<(), ApplyError> {
        let status = self.status_of(n);
        if status != NodeStatus::Failed {
            return Err(ApplyError::InvalidTransition {
                node: n,
                id: self.record.state.nodes[n].id.clone(),
                from: status,
                to: NodeStatus::Pending,
            });
        }
        self.record_change(StateChange::RetryRequested {
            node: n,
            resume_from,
            anew,
        })?;
        self.transition(n, NodeStatus::Pending, at)?;
        let graph = self.graph.clone();
        let mut descendants = graph.descendants(n);
        descendants.sort_unstable_by_key(|&d| graph.topological_position(d));
        for d in descendants {
            let unblocked = self.status_of(d) == NodeStatus::Blocked
                && graph.dependencies(d).all(|p| {
                    !matches!(self.status_of(p), NodeStatus::Failed | NodeStatus::Blocked)
                });
            if unblocked {
                self.transition(d, NodeStatus::Pending, at)?;
            }
        }
        self.promote(n, at)
    }

    /// Marks nodes found `scheduled` or `running` in a loaded record (their process is gone) as
    /// failed with reason `crashed`, and re-queues them. Returns the nodes re-queued.
    pub fn recover_crashed(&mut self, at: Millis) -> Result<Vec<NodeIndex>, ApplyError> {
        let crashed: Vec<NodeIndex> = (0..self.record.state.nodes.len())
            .filter(|&n| self.status_of(n).is_active())
            .collect();
        for &n in &crashed {
            if self.status_of(n) == NodeStatus::CompletedSplit {
                // Its sub-jobs are in the journal and go on; only a merge of theirs that the
                // crash stopped ends, to be done again.
                self.end_attempt(
                    n,
                    AttemptStatus::Failed,
                    at,
                    Some("the process running this job stopped (crash or kill)".into()),
                    Some(FailureReason::Crashed),
                    None,
                )?;
                continue;
            } else {
                let last = self.record.state.nodes[n].last_attempt();
                let phase = last.and_then(|a| a.phases.last()).map(|p| p.phase);
                // A heal the crash interrupted in its phase is done again (same round).
                let heal = last
                    .and_then(|a| a.extra.heal.clone())
                    .filter(|h| phase.is_none_or(|p| p == h.phase));
                self.fail(
                    n,
                    at,
                    "the process running this job stopped (crash or kill)".into(),
                    FailureReason::Crashed,
                    phase,
                )?;
                if let Some(heal) = heal {
                    self.record_change(StateChange::HealScheduled { node: n, heal })?;
                }
            }
            let resume = self.resume_phase_after_failure(n);
            self.retry(n, resume, at)?;
        }
        Ok(crashed)
    }

    /// Where a retry of node `n`'s last failure resumes (SPEC §3: from the failed phase, a
    /// failed commit from work; `onFailure.resumeFromPhase` wins when set by the engine).
    pub fn resume_phase_after_failure(&self, n: NodeIndex) -> Option<Phase> {
        self.record.state.nodes[n]
            .last_attempt()
            .and_then(|a| a.extra.failed_phase)
            .map(Phase::retry_from)
    }

    /// Recovers a failed or canceled plan: failed, blocked and canceled nodes become pending
    /// (then ready where their dependencies succeeded) and the plan is left paused.
    pub fn recover(&mut self, at: Millis) -> Result<(), ApplyError> {
        self.record_change(StateChange::Recovered { at })?;
        self.counts = self.record.counts();
        self.rebuild_waiting();
        self.promote_all(at)
    }

    /// Pauses: nothing new starts.
    pub fn pause(&mut self, at: Millis) -> Result<(), ApplyError> {
        if !self.record.state.paused {
            self.record_change(StateChange::Paused { at })?;
        }
        Ok(())
    }

    /// Resumes a paused plan.
    pub fn resume(&mut self, at: Millis) -> Result<(), ApplyError> {
        if self.record.state.paused {
            self.record_change(StateChange::Resumed { at })?;
        }
        Ok(())
    }

    /// Records the end of the plan once its status is terminal (once).
    pub fn end_if_terminal(&mut self, at: Millis) -> Result<bool, ApplyError> {
        let terminal = self.plan_status().is_terminal();
        if terminal && self.record.state.ended_at.is_none() {
            self.record_change(StateChange::Ended { at })?;
        }
        Ok(terminal)
    }

    /// Applies `edits` (already checked: see [`crate::plan::apply_edits`]) whose result has the
    /// graph `graph`; `from[i]` is the index node `i` of the new graph had before (`None`: a
    /// new node; see [`crate::plan::layout`]). `started`: whether the plan had started.
    ///
    /// Nodes that started or ended keep their status; every other node's status is derived
    /// anew from its dependencies: blocked if one failed, was blocked or canceled; ready if all
    /// succeeded and the plan runs; else pending.
    pub fn reshape(
        &mut self,
        edits: Vec<crate::plan::PlanEdit>,
        started: bool,
        graph: Arc<PlanGraph>,
        from: &[Option<NodeIndex>],
        at: Millis,
    ) -> Result<(), ApplyError> {
        let state = &self.record.state;
        let runs = state.started_at.is_some() && !state.scaffolding;
        let mut status: Vec<NodeStatus> = from
            .iter()
            .map(|f| f.map_or(NodeStatus::Pending, |o| state.nodes[o].status))
            .collect();
        for &n in graph.topological_order() {
            if !matches!(
                status[n],
                NodeStatus::Pending | NodeStatus::Ready | NodeStatus::Blocked
            ) {
                continue;
            }
            let mut all_succeeded = true;
            let mut blocked = false;
            for d in graph.dependencies(n) {
                match status[d] {
                    NodeStatus::Succeeded => {}
                    NodeStatus::Failed | NodeStatus::Blocked | NodeStatus::Canceled => {
                        blocked = true;
                    }
                    _ => all_succeeded = false,
                }
            }
            status[n] = if blocked {
                NodeStatus::Blocked
            } else if all_succeeded && runs {
                NodeStatus::Ready
            } else {
                NodeStatus::Pending
            };
        }
        let statuses = from
            .iter()
            .zip(&status)
            .enumerate()
            .filter(|(_, (f, s))| f.is_none_or(|o| state.nodes[o].status != **s))
            .map(|(n, (_, &s))| (n, s))
            .collect();
        let new_ids = from
            .iter()
            .filter(|f| f.is_none())
            .map(|_| NodeId::random())
            .collect();
        self.record_change(StateChange::Reshaped {
            at,
            edits,
            started,
            new_ids,
            statuses,
        })?;
        self.graph = graph;
        self.counts = self.record.counts();
        self.rebuild_waiting();
        self.rebuild_results();
        self.newly_ready.clear();
        Ok(())
    }

    /// Nodes currently ready (for re-queueing after a load).
    pub fn ready_nodes(&self) -> Vec<NodeIndex> {
        (0..self.record.state.nodes.len())
            .filter(|&n| self.status_of(n) == NodeStatus::Ready)
            .collect()
    }
}

#[cfg(test)]
mod tests;
