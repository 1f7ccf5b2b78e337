//! What a finished try of an agent CLI means: success, or the failure with its class (retry
//! or not), the session to resume, and what the try reported (usage, reply, context).

use orchestrator_core::runner::{WorkContext, WorkFailure};
use orchestrator_core::state::FailureReason;

use super::Tried;
use crate::agent::{AgentRequest, AgentRunner, FailureClass, Transcript};
use crate::error::Error;
use crate::supervise::{Ending, Outcome};

/// The try's result from the process's `outcome` and transcript `t` (completed by the runner's
/// `after_exit`), and whether it failed because its session to resume is lost.
pub(super) fn conclude(
    runner: &dyn AgentRunner,
    request: &AgentRequest,
    ctx: &WorkContext,
    outcome: &Outcome,
    mut t: Transcript,
    hung: bool,
) -> Tried {
    runner.after_exit(request, &mut t);
    if t.usage.duration_ms.is_none() {
        t.usage.duration_ms = u64::try_from(outcome.elapsed.as_millis()).ok();
    }
    let result = judge(runner, outcome, &t, hung, ctx, &request.agent);
    let lost_session = result.is_err() && request.resume.is_some() && runner.session_lost(&t);
    Tried {
        result,
        usage: t.usage,
        reply: t.reply,
        steered: Vec::new(),
        steered_live: Vec::new(),
        lost_session,
        peak_context: t.peak_context_tokens,
        context_window: t.context_window,
    }
}

/// Success, or the failure and its class, from how the process ended and what it said.
fn judge(
    runner: &dyn AgentRunner,
    outcome: &Outcome,
    t: &Transcript,
    hung: bool,
    ctx: &WorkContext,
    agent: &str,
) -> Result<(), (WorkFailure, FailureClass)> {
    let canceled_by_user = outcome.ending == Ending::Canceled && ctx.cancel.is_cancelled();
    if canceled_by_user {
        return Err((WorkFailure::canceled(), FailureClass::Permanent));
    }
    let completed = outcome.success() || (hung && t.finished);
    if completed && t.result_error.is_none() {
        return Ok(());
    }
    let label = format!("agent {agent}");
    let mut failure = outcome
        .failure(&label)
        .filter(|_| !completed)
        .unwrap_or_else(|| WorkFailure::new(format!("`{label}` reported a failure")));
    if let Some(error) = &t.result_error {
        failure
            .message
            .push_str(&format!("\nthe agent reported: {error}"));
    } else if let Some(error) = t.errors.back() {
        failure.message.push_str(&format!("\nlast error: {error}"));
    }
    let class = match outcome.ending {
        Ending::TimedOut(_) | Ending::Canceled => FailureClass::Permanent,
        Ending::Exited(code) => runner.classify(Some(code), t),
        _ => runner.classify(None, t),
    };
    Err((failure, class))
}

pub(super) fn start_failure(e: Error, agent: &str) -> WorkFailure {
    match e {
        Error::ProgramNotFound { program } => WorkFailure::new(format!(
            "agent `{agent}`: program `{program}` was not found on PATH; install the CLI or \
             configure its program path"
        ))
        .reason(FailureReason::StartupError),
        other => other.into(),
    }
}

pub(super) fn with_session(mut failure: WorkFailure, session: Option<String>) -> WorkFailure {
    if failure.session_id.is_none() {
        failure.session_id = session;
    }
    failure
}
