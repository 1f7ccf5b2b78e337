//! A node's run has ended: its completion recorded as success, a hold, a failure (with the
//! heal attempt it may earn) or an interruption that queues a new attempt.

use super::{PlanActor, StopReason};
use crate::engine::messages::{Hold, NodeFailure, RunEnd};
use crate::ids::NodeIndex;
use crate::state::{FailureReason, Phase, StateChange};

impl PlanActor {
    /// Records how node `n`'s run ended (by itself, or stopped by the user) and what follows:
    /// success, a hold, a failure with its heal, or a new attempt after an interruption.
    pub(super) fn on_done(
        &mut self,
        n: NodeIndex,
        result: std::result::Result<RunEnd, NodeFailure>,
    ) {
        let Some(running) = self.running[n].take() else {
            tracing::error!(node = n, "completion of a node that is not running");
            return;
        };
        self.active -= 1;
        let at = self.clock;
        let outcome = match (running.stop, result) {
            (Some(StopReason::Cancel), _) => self.machine.cancel_node(n, at),
            (Some(StopReason::ForceFail), Ok(RunEnd::Held(_))) => self.machine.fail(
                n,
                at,
                "force-failed by the user".into(),
                FailureReason::ForceFailed,
                None,
            ),
            (_, Ok(RunEnd::Held(Hold::Split(manifest)))) => self.split(n, &manifest),
            (_, Ok(RunEnd::Held(Hold::Compose))) => self.compose(n),
            (_, Ok(RunEnd::Held(Hold::Approval))) => self.hold_after(n),
            (_, Ok(RunEnd::Held(Hold::Park(park)))) => self.park(n, park),
            (_, Ok(RunEnd::Finished)) if self.has_mail(n) => self.deliver_mail(n),
            (_, Ok(RunEnd::Finished)) => match self.breaks_contract(n) {
                Some(reason) => {
                    self.machine
                        .fail(n, at, reason, FailureReason::Contract, Some(Phase::Work))
                }
                None => self.machine.succeed(n, at).map(|()| self.clean_up_after(n)),
            },
            (Some(StopReason::Pause), Err(f)) => self.interrupted(
                n,
                "stopped by pause; resumes from this phase".into(),
                FailureReason::Canceled,
                f.phase,
            ),
            // Lost with the remote worker running it (SPEC §16): a new attempt, as after a
            // crash of this process.
            (None, Err(f)) if f.reason == FailureReason::Crashed => {
                self.interrupted(n, f.message, f.reason, f.phase)
            }
            (Some(StopReason::ForceFail), Err(f)) => self.machine.fail(
                n,
                at,
                "force-failed by the user".into(),
                FailureReason::ForceFailed,
                f.phase,
            ),
            (None, Err(mut f)) => {
                let heal = f.heal.take().and_then(|h| self.next_heal(n, h));
                self.machine
                    .fail(n, at, f.message, f.reason, f.phase)
                    .and_then(|()| match heal {
                        Some(heal) => {
                            let resume = Some(heal.phase.retry_from());
                            self.machine
                                .record_change(StateChange::HealScheduled { node: n, heal })
                                .and_then(|()| self.machine.retry(n, resume, at))
                        }
                        None => Ok(()),
                    })
            }
        };
        if let Err(e) = outcome {
            tracing::error!(node = n, error = %e, "state machine rejected a node completion");
        }
        if self.machine.status_of(n).is_terminal() {
            self.child_ended(n);
        }
    }

    /// Ends node `n`'s attempt, stopped before its end (a pause, a lost worker), and queues
    /// the next one from the phase it stopped in; a heal stopped in that phase is done again.
    fn interrupted(
        &mut self,
        n: NodeIndex,
        message: String,
        reason: FailureReason,
        phase: Option<Phase>,
    ) -> std::result::Result<(), crate::state::ApplyError> {
        let at = self.clock;
        let resume = phase
            .map(Phase::retry_from)
            .filter(|p| *p != Phase::MergeFi);
        let heal = self.machine.record().state.nodes[n]
            .last_attempt()
            .and_then(|a| a.extra.heal.clone())
            .filter(|h| Some(h.phase) == phase);
        self.machine
            .fail(n, at, message, reason, phase)
            .and_then(|()| match heal {
                Some(heal) => self
                    .machine
                    .record_change(StateChange::HealScheduled { node: n, heal }),
                None => Ok(()),
            })
            .and_then(|()| self.machine.retry(n, resume, at))
    }

    /// The heal to start a new attempt with, numbered after the heals of the same phase just
    /// before it, or `None` once the budget is spent.
    fn next_heal(
        &self,
        n: NodeIndex,
        mut heal: Box<crate::state::Heal>,
    ) -> Option<Box<crate::state::Heal>> {
        // The heals in a row: from the attempt that just failed back over attempts that were
        // only interrupted (stopped by a pause or release, or crashed), which do not reset the
        // count.
        let mut previous = 0;
        for (i, a) in self.machine.record().state.nodes[n]
            .attempts
            .iter()
            .rev()
            .enumerate()
        {
            let interrupted = matches!(
                a.extra.failure_reason,
                Some(FailureReason::Canceled | FailureReason::Crashed)
            );
            // An earlier attempt that ended by itself (a user's retry came after it) ends the
            // run of heals.
            if i > 0 && !interrupted {
                break;
            }
            if let Some(h) = a.extra.heal.as_ref().filter(|h| h.phase == heal.phase) {
                previous = h.round;
                break;
            }
        }
        heal.round = previous + 1;
        (heal.round <= self.ctx.options.auto_heal_budget).then_some(heal)
    }
}
