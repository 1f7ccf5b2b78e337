//! Jobs that wait (SPEC §12): a ready `approval: before` job held for a person, and the
//! host's approve, reject and answer. A waiting node holds no slot, process or worktree; its
//! wait is in the journal, so a restart finds it waiting still.

use super::*;
use crate::state::{Waiting, WaitingFor};

impl PlanActor {
    /// Holds ready node `n` for a person's approval (`approval: before`, not approved since
    /// its last retry) instead of starting it: it waits without a slot, a process or a
    /// worktree, and says so in an `AttentionNeeded` event.
    pub(super) fn held_for_approval(&mut self, n: NodeIndex) -> bool {
        let needs = self
            .spec
            .jobs
            .get(n)
            .is_some_and(|j| j.approval == Some(crate::plan::Approval::Before))
            && !self.machine.record().state.nodes[n].approved;
        if !needs {
            return false;
        }
        let waiting = Waiting {
            waiting_for: WaitingFor::Approval,
            since: self.clock,
            until: None,
            prompt: self.spec.jobs.get(n).map(|j| j.task.clone()),
        };
        if let Err(e) = self.machine.wait(n, waiting, self.clock) {
            tracing::error!(node = n, error = %e, "could not hold the job for approval");
        }
        true
    }

    pub(super) fn approve(&mut self, job: &str) -> Result<()> {
        let n = self.waiting_for(job, WaitingFor::Approval, "approved")?;
        self.machine
            .approve(n, self.clock)
            .map_err(|e| self.transition_error(e))
    }

    pub(super) fn reject(&mut self, job: &str, reason: String) -> Result<()> {
        let n = self.waiting_for(job, WaitingFor::Approval, "rejected")?;
        let reason = if reason.trim().is_empty() {
            "no reason given".to_owned()
        } else {
            reason
        };
        self.machine
            .reject(n, reason, self.clock)
            .map_err(|e| self.transition_error(e))
    }

    /// The answer to a job's question (`input`, asked by an agent's `ask_user`: SPEC §15).
    /// No job asks one yet, so this names what the job waits for instead.
    pub(super) fn answer(&mut self, job: &str, _answer: String) -> Result<()> {
        self.waiting_for(job, WaitingFor::Input, "answered")?;
        Err(self.invalid(crate::error::StateProblem::NoAnswerTaker {
            job: job.to_owned(),
        }))
    }

    /// Force-fails a waiting job (`force_fail` on a job that holds no process).
    pub(super) fn force_fail_waiting(&mut self, n: NodeIndex) -> Result<()> {
        self.machine
            .force_fail_waiting(n, self.clock)
            .map_err(|e| self.transition_error(e))
    }

    /// The node `job` names, if it waits for `wanted`; else [`Error::NotWaiting`] naming the
    /// job and what it waits for, or its status.
    fn waiting_for(&self, job: &str, wanted: WaitingFor, verb: &'static str) -> Result<NodeIndex> {
        let record = self.machine.record();
        let n = resolve_job(record, Some(self.machine.graph()), job)?;
        let node = &record.state.nodes[n];
        let waits = node.waiting.as_ref().map(|w| w.waiting_for);
        if node.status == NodeStatus::Waiting && waits == Some(wanted) {
            return Ok(n);
        }
        // Named by its producerId, however the caller referred to it (a node id, from MCP).
        let name = self
            .spec
            .jobs
            .get(n)
            .map_or(job, |j| j.producer_id.as_str());
        Err(Error::NotWaiting {
            plan: self.id.clone(),
            job: name.to_owned(),
            status: node.status,
            waiting_for: waits,
            wanted,
            verb,
        })
    }
}
