//! Node and attempt changes: status transitions, attempts, phases, worktrees, processes and
//! metrics.

use std::path::PathBuf;

use crate::ids::{Millis, NodeIndex};
use crate::state::{FailureReason, NodeStatus, Phase, PhaseStatus};

use super::{node_mut, running_attempt, ApplyError};
use crate::extra::Extra;
use crate::state::record::{Attempt, AttemptExtra, AttemptStatus, PhaseRecord, PlanState};

impl PlanState {
    /// A node transition, checked against the table of SPEC §3.
    pub(super) fn transition(
        &mut self,
        node: NodeIndex,
        status: NodeStatus,
    ) -> Result<(), ApplyError> {
        let n = node_mut(self, node)?;
        if !n.status.can_transition_to(status) {
            return Err(ApplyError::InvalidTransition {
                node,
                id: n.id.clone(),
                from: n.status,
                to: status,
            });
        }
        n.status = status;
        if status != NodeStatus::Waiting {
            n.extra.set(|x| &mut x.waiting, None);
        }
        if status == NodeStatus::Pending {
            self.ended_at = None;
        }
        Ok(())
    }

    /// Node `node` failed while it waited (rejected, force-failed): a failed attempt that ran
    /// no phase records why (the node's transition to `failed` comes with it).
    pub(super) fn fail_waiting(
        &mut self,
        node: NodeIndex,
        reason: crate::state::FailureReason,
        message: &str,
        at: Millis,
    ) -> Result<(), ApplyError> {
        let n = node_mut(self, node)?;
        let error = message.to_owned();
        n.extra.set(|x| &mut x.waiting, None);
        // An `approval: after` job waits with its attempt open: that attempt fails.
        if let Some(open) = n
            .attempts
            .last_mut()
            .filter(|a| a.status == AttemptStatus::Running)
        {
            open.status = AttemptStatus::Failed;
            open.ended_at = Some(at);
            let failed = open.extra.make_mut();
            failed.error = Some(error.clone());
            failed.failure_reason = Some(reason);
            n.extra.make_mut().error = Some(error);
            return Ok(());
        }
        n.attempts.push(Attempt {
            number: n.attempts.len() as u32 + 1,
            status: AttemptStatus::Failed,
            started_at: at,
            ended_at: Some(at),
            resumed_from: None,
            phases: Vec::new(),
            extra: Extra::new(AttemptExtra {
                error: Some(error.clone()),
                failure_reason: Some(reason),
                ..AttemptExtra::default()
            }),
        });
        n.extra.make_mut().error = Some(error);
        n.extra.set(|x| &mut x.waiting, None);
        Ok(())
    }

    /// A new attempt, numbered after the node's last one, starting with the scheduled heal.
    pub(super) fn start_attempt(
        &mut self,
        node: NodeIndex,
        at: Millis,
        resume_from: Option<Phase>,
    ) -> Result<(), ApplyError> {
        let n = node_mut(self, node)?;
        let number = n.attempts.len() as u32 + 1;
        // Most nodes run once: room for exactly one attempt (a default push would
        // reserve four), which keeps 100k-node plans several times smaller.
        n.attempts.reserve_exact(1);
        n.attempts.push(Attempt {
            number,
            status: AttemptStatus::Running,
            started_at: at,
            ended_at: None,
            resumed_from: resume_from,
            phases: Vec::with_capacity(1),
            extra: Extra::new(AttemptExtra {
                heal: n.extra.get_mut().and_then(|x| x.heal.take()),
                ..AttemptExtra::default()
            }),
        });
        n.extra.set(|x| &mut x.resume_from, None);
        n.extra.set(|x| &mut x.processes, Vec::new());
        n.extra.set(|x| &mut x.error, None);
        Ok(())
    }

    /// A phase of the running attempt began.
    pub(super) fn start_phase(
        &mut self,
        node: NodeIndex,
        phase: Phase,
        at: Millis,
    ) -> Result<(), ApplyError> {
        let a = running_attempt(node_mut(self, node)?, node, "phase_started")?;
        a.phases.push(PhaseRecord {
            phase,
            status: PhaseStatus::Running,
            started_at: at,
            ended_at: None,
            error: None,
        });
        Ok(())
    }

    /// A phase of the running attempt ended: closes it if it is the one running, else records
    /// it as begun and ended at once (a skipped phase).
    pub(super) fn end_phase(
        &mut self,
        node: NodeIndex,
        phase: Phase,
        status: PhaseStatus,
        at: Millis,
        error: &Option<String>,
    ) -> Result<(), ApplyError> {
        let a = running_attempt(node_mut(self, node)?, node, "phase_ended")?;
        match a.phases.last_mut() {
            Some(p) if p.phase == phase && p.status == PhaseStatus::Running => {
                p.status = status;
                p.ended_at = Some(at);
                p.error.clone_from(error);
            }
            _ => a.phases.push(PhaseRecord {
                phase,
                status,
                started_at: at,
                ended_at: Some(at),
                error: error.clone(),
            }),
        }
        Ok(())
    }

    /// The running attempt ended: phases still running are canceled with it.
    pub(super) fn end_attempt(
        &mut self,
        node: NodeIndex,
        status: AttemptStatus,
        at: Millis,
        error: &Option<String>,
        reason: Option<FailureReason>,
        failed_phase: Option<Phase>,
    ) -> Result<(), ApplyError> {
        let n = node_mut(self, node)?;
        running_attempt(n, node, "attempt_ended")?;
        n.extra.set(|x| &mut x.error, error.clone());
        // Whatever the attempt started has been stopped with it, and a wake-up message and a
        // checkpoint were for its session.
        n.extra.set(|x| &mut x.processes, Vec::new());
        if let Some(tools) = n.extra.get_mut().and_then(|x| x.tools.as_mut()) {
            tools.wake = None;
            // A dehydrated session's files are in its checkpoint: kept for a retry to hydrate.
            if tools.dehydrated.is_none() {
                tools.checkpoint = None;
            }
        }
        let a = running_attempt(n, node, "attempt_ended")?;
        a.status = status;
        a.ended_at = Some(at);
        a.extra.set(|x| &mut x.error, error.clone());
        a.extra.set(|x| &mut x.failure_reason, reason);
        a.extra.set(|x| &mut x.failed_phase, failed_phase);
        for p in a
            .phases
            .iter_mut()
            .filter(|p| p.status == PhaseStatus::Running)
        {
            p.status = PhaseStatus::Canceled;
            p.ended_at = Some(at);
        }
        Ok(())
    }

    /// The node's worktree was created (with the commit it was created at) or removed.
    pub(super) fn set_worktree(
        &mut self,
        node: NodeIndex,
        path: &Option<PathBuf>,
        base_commit: &Option<String>,
    ) -> Result<(), ApplyError> {
        let n = node_mut(self, node)?;
        n.extra.set(|x| &mut x.worktree, path.clone());
        if base_commit.is_some() {
            n.extra.make_mut().base_commit.clone_from(base_commit);
        }
        Ok(())
    }

    /// A process group of the running attempt started (`running`) or ended.
    pub(super) fn track_process(
        &mut self,
        node: NodeIndex,
        pgid: u32,
        running: bool,
    ) -> Result<(), ApplyError> {
        let n = node_mut(self, node)?;
        if let Some(x) = n.extra.get_mut() {
            x.processes.retain(|p| *p != pgid);
        }
        if running {
            n.extra.make_mut().processes.push(pgid);
        }
        Ok(())
    }

    /// The output of the running attempt's work.
    pub(super) fn set_output(&mut self, node: NodeIndex, text: &str) -> Result<(), ApplyError> {
        let n = node_mut(self, node)?;
        // A composite job shows its controller's progress while its sub-jobs run and after
        // its controller failed it: on its last attempt, which has ended.
        let composite = n.status == NodeStatus::CompletedSplit
            || n.attempts
                .last()
                .is_some_and(|a| a.extra.failure_reason == Some(FailureReason::CompositeFailed));
        let a = match n.attempts.last_mut() {
            Some(a) if composite => a,
            _ => running_attempt(n, node, "output")?,
        };
        a.extra.make_mut().output = Some(text.to_owned());
        Ok(())
    }

    /// Metrics a runner reported for the running attempt, added to any it reported before.
    pub(super) fn add_metrics(
        &mut self,
        node: NodeIndex,
        metrics: &serde_json::Value,
    ) -> Result<(), ApplyError> {
        let a = running_attempt(node_mut(self, node)?, node, "metrics")?;
        let extra = a.extra.make_mut();
        extra.metrics = Some(Box::new(match extra.metrics.take() {
            Some(old) => accumulate(*old, metrics),
            None => metrics.clone(),
        }));
        Ok(())
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
