//! Jobs that wait (SPEC §12): a ready `approval: before` job held for a person, a timer job
//! held until its deadline, and the host's approve, reject and answer. A waiting node holds
//! no slot, process or worktree; its wait is in the journal, so a restart finds it waiting
//! still, with the same deadline.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use super::*;
use crate::ids::Millis;
use crate::plan::WorkSpec;
use crate::state::{Waiting, WaitingFor};
use crate::tools::Park;

/// The longest the actor sleeps before reading the wall clock again: timers are wall-clock
/// deadlines, and a monotonic sleep drifts from the wall clock across a suspend or a clock
/// change.
const MAX_TIMER_SLEEP: Duration = Duration::from_secs(30);

/// The deadlines of the plan's waiting timer jobs, earliest first. An entry is checked
/// against its node when it comes due, so a node retried, canceled or failed meanwhile
/// leaves a stale entry that is skipped rather than searched for and removed.
#[derive(Debug, Default)]
pub(super) struct Timers {
    due: BinaryHeap<Reverse<(Millis, NodeIndex)>>,
}

/// Whether some job of `spec` may be held before it starts (approval or timer): only then is
/// each newly ready node looked at for a hold before it is queued.
pub(super) fn plan_holds(spec: &crate::plan::PlanSpec) -> bool {
    spec.jobs.iter().any(|j| {
        j.extra.approval == Some(crate::plan::Approval::Before)
            || matches!(j.work, WorkSpec::Timer(_))
    })
}

impl Timers {
    /// The timers of every node of `record` that waits on one (on open and after a reshape).
    pub(super) fn of(record: &PlanRecord) -> Timers {
        let due = record
            .state
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.status == NodeStatus::Waiting)
            .filter_map(|(n, node)| {
                let w = node.extra.waiting.as_ref()?;
                let until = w.until.filter(|_| w.waiting_for == WaitingFor::Timer)?;
                Some(Reverse((until, n)))
            })
            .collect();
        Timers { due }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.due.is_empty()
    }

    /// Sleeps until the earliest deadline (or [`MAX_TIMER_SLEEP`], then the caller looks
    /// again); never returns when there is none.
    pub(super) async fn next(&self) {
        match self.due.peek() {
            Some(Reverse((until, _))) => {
                let left = until.saturating_sub(now_millis());
                tokio::time::sleep(Duration::from_millis(left).min(MAX_TIMER_SLEEP)).await
            }
            None => std::future::pending().await,
        }
    }

    /// Takes the entries due at `now`.
    fn take_due(&mut self, now: Millis) -> Vec<NodeIndex> {
        let mut due = Vec::new();
        while let Some(&Reverse((until, n))) = self.due.peek() {
            if until > now {
                break;
            }
            self.due.pop();
            due.push(n);
        }
        due
    }
}

impl PlanActor {
    /// Holds ready node `n` instead of starting it when it must wait first: for a person's
    /// approval, then for its timer.
    pub(super) fn held(&mut self, n: NodeIndex) -> bool {
        self.held_for_approval(n) || self.held_for_timer(n)
    }

    /// Holds ready timer job `n` (whose timer has not fired since its last retry) until its
    /// deadline: `seconds` from now, or its `until` instant. The deadline is journaled with
    /// the wait, so a restart keeps it.
    fn held_for_timer(&mut self, n: NodeIndex) -> bool {
        let Some(WorkSpec::Timer(timer)) = self.spec.jobs.get(n).map(|j| &j.work) else {
            return false;
        };
        if self.machine.record().state.nodes[n].extra.timer_fired {
            return false;
        }
        // Validation refused a spec without a deadline; should one get here, it fires at once.
        let until = timer.deadline(self.clock).unwrap_or(self.clock);
        if let Err(e) = self.wait_until(n, until) {
            tracing::error!(node = n, error = %e, "could not start the job's timer");
            return false;
        }
        true
    }

    /// Ready node `n` waits (`waiting(timer)`) until `until`, the deadline journaled with the
    /// wait; then it becomes ready again and runs.
    pub(super) fn wait_until(
        &mut self,
        n: NodeIndex,
        until: Millis,
    ) -> std::result::Result<(), ApplyError> {
        let waiting = Waiting {
            until: Some(until),
            ..Waiting::new(WaitingFor::Timer, self.clock)
        };
        self.machine.wait(n, waiting, self.clock)?;
        self.timers.due.push(Reverse((until, n)));
        Ok(())
    }

    /// Parks running node `n`, whose agent ended its turn to wait (SPEC §15): it waits (timer
    /// or input) with its attempt open and its worktree kept, holding no slot or process; when
    /// the wait ends its session resumes (see [`PlanMachine::wake`]).
    pub(super) fn park(&mut self, n: NodeIndex, park: Park) -> std::result::Result<(), ApplyError> {
        let waiting = match park {
            Park::Agents(call) => return self.agent_call(n, call),
            Park::Timer { until, wake } => Waiting {
                until: Some(until),
                prompt: Some(wake),
                ..Waiting::new(WaitingFor::Timer, self.clock)
            },
            Park::Input {
                question,
                choices,
                allow_freeform,
            } => Waiting {
                prompt: Some(question),
                choices,
                allow_freeform: Some(allow_freeform),
                ..Waiting::new(WaitingFor::Input, self.clock)
            },
        };
        let until = waiting.until;
        self.machine.hold_after(n, waiting, self.clock)?;
        if let Some(until) = until {
            self.timers.due.push(Reverse((until, n)));
        }
        Ok(())
    }

    /// Fires the timers due now: each of their jobs becomes ready (and runs, as the plan
    /// allows); a parked agent's session resumes with the timer's message. An overdue timer,
    /// found on a restart, fires on the first turn.
    pub(super) fn fire_due_timers(&mut self) {
        for n in self.timers.take_due(self.clock) {
            let node = &self.machine.record().state.nodes[n];
            let due = node.status == NodeStatus::Waiting
                && node.extra.waiting.as_ref().is_some_and(|w| {
                    w.waiting_for == WaitingFor::Timer && w.until.is_some_and(|u| u <= self.clock)
                });
            if !due {
                continue;
            }
            let fired = match self.parked_wake(n) {
                Some(message) => self.wake(n, message),
                None => self.machine.fire_timer(n, self.clock),
            };
            if let Err(e) = fired {
                tracing::error!(node = n, error = %e, "could not fire the job's timer");
            }
        }
    }

    /// Holds ready node `n` for a person's approval (`approval: before`, not approved since
    /// its last retry) instead of starting it: it waits without a slot, a process or a
    /// worktree, and says so in an `AttentionNeeded` event.
    /// Holds running node `n`, an `approval: after` job whose phases passed, for a person:
    /// it waits, its attempt open, until approved (then merge-ri and success) or rejected.
    pub(super) fn hold_after(&mut self, n: NodeIndex) -> std::result::Result<(), ApplyError> {
        let node = &self.machine.record().state.nodes[n];
        let task = self.spec.jobs.get(n).map_or("", |j| j.task.as_str());
        let prompt = match &node.extra.commit {
            Some(commit) => format!("{task} (commit {commit})"),
            None => task.to_owned(),
        };
        let waiting = Waiting {
            prompt: Some(prompt),
            ..Waiting::new(WaitingFor::Approval, self.clock)
        };
        self.machine.hold_after(n, waiting, self.clock)
    }

    fn held_for_approval(&mut self, n: NodeIndex) -> bool {
        let needs = self
            .spec
            .jobs
            .get(n)
            .is_some_and(|j| j.extra.approval == Some(crate::plan::Approval::Before))
            && !self.machine.record().state.nodes[n].extra.approved;
        if !needs {
            return false;
        }
        let waiting = Waiting {
            prompt: self.spec.jobs.get(n).map(|j| j.task.clone()),
            ..Waiting::new(WaitingFor::Approval, self.clock)
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

    /// The answer to a job's question (`input`, asked by an agent's `ask_user`: SPEC §15): the
    /// job's session resumes with it. An answer outside the question's choices is refused
    /// unless the question allows free-form answers.
    pub(super) fn answer(&mut self, job: &str, answer: String) -> Result<()> {
        let n = self.waiting_for(job, WaitingFor::Input, "answered")?;
        let waiting = self.machine.record().state.nodes[n]
            .extra
            .waiting
            .as_deref();
        let question = waiting.and_then(|w| w.prompt.clone()).unwrap_or_default();
        let choices = waiting.map(|w| w.choices.clone()).unwrap_or_default();
        let free = choices.is_empty() || waiting.is_none_or(|w| w.allow_freeform != Some(false));
        let answer = answer.trim().to_owned();
        let why = if answer.is_empty() {
            Some("the answer is empty".to_owned())
        } else if !free && !choices.contains(&answer) {
            Some(format!(
                "`{answer}` is not one of its choices: {}",
                choices.join(", ")
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(self.invalid(crate::error::StateProblem::BadAnswer {
                job: job.to_owned(),
                why,
            }));
        }
        let message = Park::answered(&question, &answer);
        self.wake(n, message).map_err(|e| self.transition_error(e))
    }

    /// The message parked node `n`'s session resumes with when its timer fires: only a node
    /// whose agent parked (its attempt open) has one; a timer job's does not.
    fn parked_wake(&self, n: NodeIndex) -> Option<String> {
        if !self.machine.has_open_attempt(n) {
            return None;
        }
        let waiting = self.machine.record().state.nodes[n]
            .extra
            .waiting
            .as_deref()?;
        Some(
            waiting
                .prompt
                .clone()
                .unwrap_or_else(|| "Your timer fired.".to_owned()),
        )
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
        let waits = node.extra.waiting.as_ref().map(|w| w.waiting_for);
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
