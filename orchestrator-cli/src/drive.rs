//! Running a plan to its end in this process (`run`, `resume`, `retry`): live progress,
//! requests from other processes, and a clean pause on Ctrl-C or SIGTERM.

use std::future::Future;
use std::time::Duration;

use orchestrator_core::state::{PlanRecord, WaitingFor};
use orchestrator_core::{Orchestrator, PlanId, PlanStatus};

use crate::cli::{OutputArgs, WaitArgs};
use crate::control::{Inbox, Reply, POLL};
use crate::error::{CliError, CliResult, Exit};
use crate::notify::{End, Notifier};
use crate::progress::{Mode, Progress, Start};
use crate::report;
use crate::workspace::Workspace;

/// How the wait for the plan ended.
enum Stop {
    Ended(PlanStatus),
    Interrupted,
}

/// Starts plan `id`, which `o` holds for this process, with `kick` (start, resume), shows
/// progress until it ends or pauses, releases it, prints the result and returns the exit code.
/// `since` is when this process started to take the plan over (ms): older requests are stale.
/// With `--notify`, runs its command for each wait that starts and once at the end.
pub async fn run_to_end<F>(
    ws: &Workspace,
    o: &Orchestrator,
    id: &PlanId,
    since: u64,
    output: &OutputArgs,
    wait: &WaitArgs,
    kick: F,
) -> CliResult<Exit>
where
    F: Future<Output = orchestrator_core::Result<()>>,
{
    let notifier = Notifier::spawn(wait.notify.as_deref(), ws.root(), id, o.subscribe());
    let result = drive(ws, o, id, since, output, wait.until_waiting, kick).await;
    if let Some(notifier) = notifier {
        let end = result
            .as_ref()
            .ok()
            .map(|(_, record)| (End::of(record.status()), record));
        notifier.finish(end).await;
    }
    result.map(|(exit, _)| exit)
}

/// [`run_to_end`] but the notifications: also returns the plan as it was left.
async fn drive<F>(
    ws: &Workspace,
    o: &Orchestrator,
    id: &PlanId,
    since: u64,
    output: &OutputArgs,
    until_waiting: bool,
    kick: F,
) -> CliResult<(Exit, PlanRecord)>
where
    F: Future<Output = orchestrator_core::Result<()>>,
{
    // Before anything starts: a SIGINT/SIGTERM from now on pauses cleanly instead of killing
    // the process with its jobs still running.
    let signals = Signals::new()?;
    let events = o.subscribe();
    let before = o.status(id).await?;
    let progress = Progress::spawn(
        Mode::for_output(output),
        events,
        Start {
            plan: id.clone(),
            labels: orchestrator_core::view::labels_of(&before),
            statuses: before.state.nodes.iter().map(|n| n.status).collect(),
            verbose: output.verbose,
        },
    );
    if let Err(e) = kick.await {
        progress.finish().await;
        let _ = o.close(id).await;
        return Err(e.into());
    }
    let stop = watch(
        o,
        id,
        Inbox::new(ws.store.root(), id, since),
        &progress,
        signals,
        until_waiting,
    )
    .await;
    progress.finish().await;
    // A plan left waiting stays as it is (not paused): `approve` and `resume` take it on.
    let released = if matches!(stop, Ok(Stop::Ended(PlanStatus::Waiting))) {
        o.release(id).await
    } else {
        o.close(id).await
    };
    if let Err(e) = released {
        eprintln!("warning: releasing plan {id}: {e}");
    }
    let stop = stop?;
    let record = match ws.load(id).await {
        Ok(r) => r,
        Err(_) => before,
    };
    let status = record.status();
    if output.json {
        outln!("{}", report::plan_json(&record));
    } else {
        out!("{}", report::plan_text(&record));
    }
    let repo_arg = repo_arg(ws);
    match stop {
        Stop::Interrupted => eprintln!(
            "interrupted: plan {id} is paused, its state saved.\n\
             continue it with: orchestrator resume {id}{repo_arg}"
        ),
        Stop::Ended(PlanStatus::Paused) => {
            eprintln!("plan {id} is paused.\ncontinue it with: orchestrator resume {id}{repo_arg}")
        }
        Stop::Ended(PlanStatus::Waiting) => {
            let mut person = false;
            let waiting: Vec<String> = record
                .spec
                .jobs
                .iter()
                .zip(&record.state.nodes)
                .filter_map(|(job, node)| {
                    let w = node.extra.waiting.as_ref()?;
                    person |= w.waiting_for != WaitingFor::Timer;
                    Some(match w.until {
                        Some(until) => format!(
                            "{} ({} until {})",
                            job.producer_id,
                            w.waiting_for,
                            report::utc_time(until)
                        ),
                        None => format!("{} ({})", job.producer_id, w.waiting_for),
                    })
                })
                .collect();
            let act = if person {
                format!(
                    "approve with: orchestrator approve {id} JOB{repo_arg} \
                     (or reject --reason TEXT), then: "
                )
            } else {
                "timers keep their deadlines; to go on: ".to_owned()
            };
            eprintln!(
                "plan {id} is waiting: {}.\n{act}orchestrator resume {id}{repo_arg}",
                waiting.join(", ")
            );
            return Ok((Exit::Waiting, record));
        }
        Stop::Ended(_) => {
            if let Some(hint) = report::hint(&record, &repo_arg) {
                if output.json {
                    eprintln!("{hint}");
                } else {
                    outln!("{hint}");
                }
            }
        }
    }
    Ok((report::exit_for(status), record))
}

/// ` --repo <root>` when the repository is not the current directory, for hints.
pub fn repo_arg(ws: &Workspace) -> String {
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|d| std::fs::canonicalize(d).ok());
    if cwd.as_deref() == Some(ws.root()) {
        String::new()
    } else {
        format!(
            " --repo {}",
            report::shell_quote(&ws.root().display().to_string())
        )
    }
}

/// Waits until the plan ends or pauses, serving requests and signals meanwhile.
async fn watch(
    o: &Orchestrator,
    id: &PlanId,
    inbox: Inbox,
    progress: &Progress,
    mut signals: Signals,
    until_waiting: bool,
) -> CliResult<Stop> {
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut interrupted = false;
    let wait = async {
        if until_waiting {
            o.wait_or_waiting(id).await
        } else {
            o.wait(id).await
        }
    };
    tokio::pin!(wait);
    loop {
        tokio::select! {
            status = &mut wait => {
                let status = status?;
                return Ok(if interrupted && !status.is_terminal() {
                    Stop::Interrupted
                } else {
                    Stop::Ended(status)
                });
            }
            () = signals.next() => {
                if interrupted {
                    eprintln!(
                        "interrupted again: exiting now. The plan's state is saved; \
                         `orchestrator resume {id}` continues it."
                    );
                    std::process::exit(Exit::PlanNotSucceeded.code());
                }
                interrupted = true;
                progress.say("interrupted: pausing the plan and stopping its running jobs \
                                (interrupt again to exit at once)");
                if let Err(e) = o.pause(id, true).await {
                    return Err(CliError::from(e).context("pausing the plan"));
                }
            }
            _ = tick.tick() => {
                for request in inbox.take() {
                    let reply = match request.action.apply(o, id).await {
                        Ok(()) => {
                            progress.say(&format!(
                                "{} requested by process {}",
                                request.action.as_str(),
                                request.pid
                            ));
                            Reply { ok: true, message: format!("{} applied", request.action.as_str()), kind: None }
                        }
                        Err(e) => Reply { ok: false, message: e.to_string(), kind: Some(e.kind().to_owned()) },
                    };
                    inbox.reply(&request, &reply);
                }
            }
        }
    }
}

/// SIGINT and SIGTERM.
struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> CliResult<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let install = |kind| {
                signal(kind).map_err(|e| CliError::other(format!("cannot handle signals: {e}")))
            };
            Ok(Signals {
                int: install(SignalKind::interrupt())?,
                term: install(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {})
        }
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => {}
                _ = self.term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Whether the process an owner description (`process 123`) names has exited.
fn owner_gone(owner: &str) -> bool {
    let pid = owner
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u32>().ok());
    match pid {
        Some(pid) if cfg!(target_os = "linux") => {
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
        }
        _ => false,
    }
}

/// Opens a stored plan for running or changing it here. When another process holds it, waits a
/// little if that process is on its way out (the plan is paused or ended), else fails naming it.
/// Returns when the successful attempt began (ms): requests older than that were not for us.
pub async fn open_owned(ws: &Workspace, o: &Orchestrator, id: &PlanId) -> CliResult<u64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let attempt = orchestrator_core::ids::now_millis();
        match o.open_plan(id).await {
            Ok(()) => return Ok(attempt),
            Err(e) => {
                let Some(owner) = crate::workspace::locked_by(&e) else {
                    return Err(e.into());
                };
                let status = ws.load(id).await?.status();
                // A killed owner's lock is released by the kernel once every handle on it is
                // closed; a job being spawned at the moment of the kill holds one until it starts.
                let leaving =
                    status.is_terminal() || status == PlanStatus::Paused || owner_gone(&owner);
                if leaving && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                return Err(CliError::other(format!(
                    "plan {id} is being run by {owner} (status {status}); pause or cancel it \
                     first (`orchestrator pause {id}`), or wait until it ends"
                )));
            }
        }
    }
}
