//! `pause`, `cancel`, `recover` and `archive`.
//!
//! `pause` and `cancel` reach a plan that another `orchestrator` process is running through a
//! request file (see [`crate::control`]); when no process runs it they act on it directly.
//! `recover` and `archive` need the plan to themselves.

use std::time::Duration;

use orchestrator_core::state::PlanRecord;
use orchestrator_core::{Orchestrator, PlanId, PlanStatus};
use tokio::time::Instant;

use crate::cli::{AnswerArgs, JobArgs, PlanArgs, RejectArgs};
use crate::control::{Action, Sent};
use crate::drive::{open_owned, repo_arg};
use crate::error::{CliError, CliResult, Exit};
use crate::report;
use crate::workspace::{locked_by, Workspace};

/// How long the process running the plan has to answer a request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long `pause` waits for the running jobs to finish before it reports "pausing".
const PAUSE_SETTLE: Duration = Duration::from_secs(30);

/// `pause PLAN_ID`.
pub async fn pause(args: PlanArgs) -> CliResult<Exit> {
    steer(args, Action::Pause).await
}

/// `cancel PLAN_ID`.
pub async fn cancel(args: PlanArgs) -> CliResult<Exit> {
    steer(args, Action::Cancel).await
}

/// `approve PLAN_ID JOB`.
pub async fn approve(args: JobArgs) -> CliResult<Exit> {
    let action = Action::Approve {
        job: args.job.clone(),
    };
    steer(args.plan, action).await
}

/// `reject PLAN_ID JOB --reason TEXT`.
pub async fn reject(args: RejectArgs) -> CliResult<Exit> {
    let action = Action::Reject {
        job: args.job.job.clone(),
        reason: args.reason.clone(),
    };
    steer(args.job.plan, action).await
}

/// `answer PLAN_ID JOB TEXT`.
pub async fn answer(args: AnswerArgs) -> CliResult<Exit> {
    let action = Action::Answer {
        job: args.job.job.clone(),
        answer: args.answer.clone(),
    };
    steer(args.job.plan, action).await
}

async fn steer(args: PlanArgs, action: Action) -> CliResult<Exit> {
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_database(&args.database)
        .await?;
    let id = ws.resolve_plan(&args.plan).await?;
    let record = act(&ws, &id, &action, !args.output.quiet).await?;
    let status = record.status();
    if args.output.json {
        outln!("{}", report::plan_json(&record));
    } else {
        outln!("plan {id}: {status}");
        match status {
            PlanStatus::Pausing => {
                let running = record.state.counts().active;
                outln!("{running} running job(s) finish first; nothing new starts");
            }
            _ => {
                if let Some(hint) = report::hint(&record, &repo_arg(&ws)) {
                    outln!("{hint}");
                }
            }
        }
    }
    Ok(Exit::Ok)
}

/// Does `action` on plan `id`: here when no process runs the plan, else by asking the process
/// that runs it (and, for a pause, waiting a bounded time for its running jobs to finish).
/// Returns the plan as it is afterwards. With `tell`, says on stderr which process was asked.
/// The dashboard's actions come here too, so they answer with the commands' own errors.
pub async fn act(
    ws: &Workspace,
    id: &PlanId,
    action: &Action,
    tell: bool,
) -> CliResult<PlanRecord> {
    let o = ws.orchestrator(1)?;
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    let mut sent: Option<Sent> = None;
    let remote = loop {
        match o.open_plan(id).await {
            Ok(()) => {
                // Nobody runs it (any more): act here. A request sent meanwhile may have been
                // served by the previous owner just before it let go.
                if let Some(s) = sent.take() {
                    if let Some(reply) = s.reply() {
                        let _ = o.close(id).await;
                        if !reply.ok {
                            return Err(CliError::other(reply.message));
                        }
                        break true;
                    }
                    s.withdraw();
                }
                let result = action.apply(&o, id).await;
                // A job's approval or answer leaves the plan as it was (waiting, or runnable
                // for whoever resumes it); pause and cancel are stored as they close it.
                let _ = if action.is_about_a_job() {
                    o.release(id).await
                } else {
                    o.close(id).await
                };
                result?;
                break false;
            }
            Err(e) => {
                let Some(owner) = locked_by(&e) else {
                    return Err(e.into());
                };
                let request = match &sent {
                    Some(s) => s,
                    None => {
                        let s = Sent::send(ws.store.root(), id, action.clone()).map_err(|e| {
                            CliError::other(format!(
                                "cannot write the {} request: {e}",
                                action.as_str()
                            ))
                        })?;
                        if tell {
                            eprintln!(
                                "plan {id} is being run by {owner}; asking it to {}",
                                action.as_str()
                            );
                        }
                        sent.insert(s)
                    }
                };
                if let Some(reply) = request.reply() {
                    if !reply.ok {
                        return Err(reply.error(&owner));
                    }
                    break true;
                }
                if Instant::now() >= deadline {
                    if let Some(s) = sent.take() {
                        s.withdraw();
                    }
                    return Err(CliError::other(format!(
                        "plan {id} is held by {owner}, which did not answer the {} request within \
                         {} s (only the `orchestrator` CLI serves requests; stop it from the \
                         program that runs the plan)",
                        action.as_str(),
                        ANSWER_TIMEOUT.as_secs()
                    )));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let mut record = ws.load(id).await?;
    if remote && *action == Action::Pause {
        // Running jobs finish first; wait (bounded) until the plan has settled.
        let settle = Instant::now() + PAUSE_SETTLE;
        while record.status() == PlanStatus::Pausing && Instant::now() < settle {
            tokio::time::sleep(Duration::from_millis(100)).await;
            record = ws.load(id).await?;
        }
    }
    Ok(record)
}

/// Takes the plan `args` names over here, for a command that needs it to itself.
async fn own_plan(args: &PlanArgs) -> CliResult<(Workspace, PlanId, Orchestrator)> {
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_database(&args.database)
        .await?;
    let id = ws.resolve_plan(&args.plan).await?;
    let o = ws.orchestrator(1)?;
    open_owned(&ws, &o, &id).await?;
    Ok((ws, id, o))
}

/// `recover PLAN_ID`.
pub async fn recover(args: PlanArgs) -> CliResult<Exit> {
    let (ws, id, o) = own_plan(&args).await?;
    let result = o.recover(&id).await;
    let _ = o.close(&id).await;
    result?;
    let record = ws.load(&id).await?;
    if args.output.json {
        outln!("{}", report::plan_json(&record));
    } else {
        outln!("plan {id} recovered: {}", record.status());
        if let Some(t) = &record.state.target_branch {
            outln!("target branch `{t}` is in place; succeeded jobs keep their work");
        }
        outln!(
            "continue it with: orchestrator resume {id}{}",
            repo_arg(&ws)
        );
    }
    Ok(Exit::Ok)
}

/// `archive PLAN_ID`.
pub async fn archive(args: PlanArgs) -> CliResult<Exit> {
    let (ws, id, o) = own_plan(&args).await?;
    let result = o.archive(&id).await;
    let _ = o.close(&id).await;
    let archived = result?;
    let record = ws.load(&id).await?;
    if args.output.json {
        let mut doc = report::plan_json(&record);
        doc["archive"] = serde_json::to_value(&archived).unwrap_or_default();
        outln!("{doc}");
    } else {
        outln!("plan {id} archived; its state and logs are kept");
        for path in &archived.worktrees_removed {
            outln!("  removed worktree {}", path.display());
        }
        for branch in &archived.branches_deleted {
            outln!("  deleted branch {branch}");
        }
    }
    for warning in &archived.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(Exit::Ok)
}
