//! [`StatusCounts`]: nodes per status, and the plan status derived from them (SPEC §3).

use serde::{Deserialize, Serialize};

use crate::state::{NodeStatus, PlanStatus};

use super::PlanState;

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
    /// waiting (SPEC §12)
    #[serde(default)]
    pub waiting: usize,
    /// Of `active`, the composite jobs (`completed_split`): they go on only when their
    /// sub-jobs do, so they do not keep a plan whose other jobs all wait from `waiting`.
    #[serde(skip)]
    pub composite: usize,
    /// Of `failed` and `blocked`, the sub-agents (SPEC §15): their parent agent was told and
    /// decided what their end means (and is counted itself), so they do not fail the plan.
    #[serde(skip)]
    pub settled_failed: usize,
    /// Of `canceled`, the sub-agents: canceled by their parent, they do not cancel the plan.
    #[serde(skip)]
    pub settled_canceled: usize,
}

impl StatusCounts {
    /// Counts the statuses.
    pub fn of<'a>(statuses: impl IntoIterator<Item = &'a NodeStatus>) -> Self {
        let mut c = StatusCounts::default();
        for s in statuses {
            match s {
                NodeStatus::Pending => c.pending += 1,
                NodeStatus::Ready => c.ready += 1,
                NodeStatus::Scheduled | NodeStatus::Running => c.active += 1,
                NodeStatus::CompletedSplit => {
                    c.active += 1;
                    c.composite += 1;
                }
                NodeStatus::Succeeded => c.succeeded += 1,
                NodeStatus::Failed => c.failed += 1,
                NodeStatus::Blocked => c.blocked += 1,
                NodeStatus::Canceled => c.canceled += 1,
                NodeStatus::Waiting => c.waiting += 1,
            }
        }
        c
    }

    /// Counts sub-agent `sub` ending (or no longer ending, `delta` -1) in status `s` among
    /// the settled ones.
    pub(crate) fn settle(&mut self, s: NodeStatus, sub: bool, delta: isize) {
        if !sub {
            return;
        }
        let slot = match s {
            NodeStatus::Failed | NodeStatus::Blocked => &mut self.settled_failed,
            NodeStatus::Canceled => &mut self.settled_canceled,
            _ => return,
        };
        *slot = slot.wrapping_add_signed(delta);
    }

    /// Derives the plan status from these counts and the plan's flags.
    pub fn plan_status(&self, state: &PlanState) -> PlanStatus {
        if state.archived {
            return PlanStatus::Archived;
        }
        if state.scaffolding {
            return PlanStatus::Scaffolding;
        }
        let unfinished = self.pending + self.ready + self.active + self.waiting;
        if unfinished == 0 {
            return if self.canceled > self.settled_canceled {
                PlanStatus::Canceled
            } else if self.failed + self.blocked > self.settled_failed {
                PlanStatus::Failed
            } else {
                PlanStatus::Succeeded
            };
        }
        if state.canceled {
            return PlanStatus::Canceled;
        }
        if state.paused {
            return if self.active > self.composite {
                PlanStatus::Pausing
            } else {
                PlanStatus::Paused
            };
        }
        if state.started_at.is_none() {
            return PlanStatus::Pending;
        }
        // Nothing can go on by itself: what is left waits on a waiting job.
        if self.waiting > 0 && self.active == self.composite && self.ready == 0 {
            return PlanStatus::Waiting;
        }
        PlanStatus::Running
    }
}
