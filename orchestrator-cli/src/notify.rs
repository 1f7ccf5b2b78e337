//! `--notify CMD` of `run`, `retry` and `resume` (SPEC §12): tells someone when a job starts
//! waiting (every `AttentionNeeded` event of the plan), when the plan reached its budget
//! (`BudgetReached`: it was paused) and when the command stops following the
//! plan (it ended, waits for a person with `--until-waiting`, or paused), by running CMD through
//! `sh -c` in the repository with one JSON line on stdin.
//!
//! The commands run one at a time, in order, in a task of their own fed by a subscription of
//! its own: a slow or failing CMD never holds the engine up. Each gets [`LIMIT`] before it is
//! stopped, and the CLI waits for the queued ones before it exits.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use orchestrator_core::state::PlanRecord;
use orchestrator_core::{OrchestratorEvent, PlanId, PlanStatus};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;

/// How long one notification may run before it is stopped.
const LIMIT: Duration = Duration::from_secs(10);

/// Why the command stopped following the plan, for the last notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The plan ended (succeeded, failed, canceled, blocked): `plan_ended`.
    Ended,
    /// It waits for a person and `--until-waiting` was given: `plan_waiting`.
    Waiting,
    /// It paused (Ctrl-C, `pause`): `plan_paused`.
    Paused,
}

impl End {
    /// How the plan's status `status`, when the command returns, is told.
    pub fn of(status: PlanStatus) -> End {
        if status.is_terminal() {
            End::Ended
        } else if status == PlanStatus::Waiting {
            End::Waiting
        } else {
            End::Paused
        }
    }

    fn event(self) -> &'static str {
        match self {
            End::Ended => "plan_ended",
            End::Waiting => "plan_waiting",
            End::Paused => "plan_paused",
        }
    }
}

/// The notifications of one plan: a listener picking its `AttentionNeeded` events and a runner
/// running CMD for each queued document in turn.
pub struct Notifier {
    queue: mpsc::UnboundedSender<Value>,
    stop: oneshot::Sender<()>,
    listener: JoinHandle<()>,
    runner: JoinHandle<()>,
}

impl Notifier {
    /// Starts notifying about plan `plan` with `command`, run in `dir`, from `events` on. `None`
    /// without a command.
    pub fn spawn(
        command: Option<&str>,
        dir: &Path,
        plan: &PlanId,
        events: broadcast::Receiver<OrchestratorEvent>,
    ) -> Option<Notifier> {
        let command = command?.to_owned();
        let (queue, queued) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel();
        let listener = tokio::spawn(listen(plan.clone(), events, queue.clone(), stopped));
        let runner = tokio::spawn(run_queue(command, dir.to_path_buf(), queued));
        Some(Notifier {
            queue,
            stop,
            listener,
            runner,
        })
    }

    /// Queues the last notification (`end`, with the plan as stored now) after every event seen
    /// so far, and waits for the queued notifications to run (each at most [`LIMIT`]). `end` is
    /// `None` when the command fails without a plan status to tell.
    pub async fn finish(self, end: Option<(End, &PlanRecord)>) {
        let Notifier {
            queue,
            stop,
            listener,
            runner,
        } = self;
        let _ = stop.send(());
        // The listener drains the events already sent before it returns, so the attention
        // documents of the run come before the end.
        let _ = listener.await;
        if let Some((end, record)) = end {
            let _ = queue.send(end_doc(end, record));
        }
        drop(queue);
        let _ = runner.await;
    }
}

/// The document of an `AttentionNeeded` event of `plan`, `None` for any other event.
fn attention_doc(plan: &PlanId, event: &OrchestratorEvent) -> Option<Value> {
    // A budget reached pauses the plan for a person too (SPEC §12).
    if let OrchestratorEvent::BudgetReached {
        plan: of,
        usage,
        budget,
    } = event
    {
        return (of == plan).then(|| {
            json!({
                "event": "budget_reached",
                "planId": plan,
                "usage": usage,
                "budget": budget,
            })
        });
    }
    let OrchestratorEvent::AttentionNeeded {
        plan: of,
        node_id,
        producer_id,
        waiting,
        ..
    } = event
    else {
        return None;
    };
    if of != plan {
        return None;
    }
    let mut doc = json!({
        "event": "attention_needed",
        "planId": plan,
        "jobId": node_id,
        "producerId": producer_id,
        "waitingFor": waiting.waiting_for,
        "since": waiting.since,
    });
    if let Some(until) = waiting.until {
        doc["until"] = json!(until);
    }
    if let Some(prompt) = &waiting.prompt {
        doc["prompt"] = json!(prompt);
    }
    Some(doc)
}

/// The last document: how the command left the plan.
fn end_doc(end: End, record: &PlanRecord) -> Value {
    json!({
        "event": end.event(),
        "planId": record.state.id,
        "name": record.spec.name,
        "status": record.status(),
    })
}

/// Queues the plan's attention documents until told to stop, then the ones already sent.
async fn listen(
    plan: PlanId,
    mut events: broadcast::Receiver<OrchestratorEvent>,
    queue: mpsc::UnboundedSender<Value>,
    mut stopped: oneshot::Receiver<()>,
) {
    let take = |event: &OrchestratorEvent| {
        if let Some(doc) = attention_doc(&plan, event) {
            let _ = queue.send(doc);
        }
    };
    loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Ok(event) => take(&event),
                Err(broadcast::error::RecvError::Lagged(n)) => lagged(n),
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = &mut stopped => break,
        }
    }
    loop {
        match events.try_recv() {
            Ok(event) => take(&event),
            Err(broadcast::error::TryRecvError::Lagged(n)) => lagged(n),
            Err(_) => return,
        }
    }
}

fn lagged(n: u64) {
    eprintln!("warning: --notify: {n} events were missed; a notification may be missing");
}

/// Runs `command` for each queued document, one after the other, until the queue closes.
async fn run_queue(command: String, dir: PathBuf, mut queued: mpsc::UnboundedReceiver<Value>) {
    while let Some(doc) = queued.recv().await {
        let what = doc["event"].as_str().unwrap_or("notification").to_owned();
        if let Err(problem) = notify(&command, &dir, &doc).await {
            eprintln!("warning: --notify command `{command}` ({what}) {problem}");
        }
    }
}

/// Runs `command` once with `doc` on stdin; what went wrong, worded to follow the command.
async fn notify(command: &str, dir: &Path, doc: &Value) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::piped())
        // stdout carries the command's own result (`--json`): the notifier's output goes to
        // stderr with the progress.
        .stdout(std::io::stderr())
        .kill_on_drop(true);
    // A group of its own: a Ctrl-C at the terminal pauses the plan without killing the
    // notification that says so, and a stopped command takes what it started along.
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| format!("could not start: {e}"))?;
    let group = child.id();
    let mut line = doc.to_string();
    line.push('\n');
    let stdin = child.stdin.take();
    let talk = async {
        if let Some(mut stdin) = stdin {
            // A command that does not read its input is fine: ignore a closed pipe.
            let _ = stdin.write_all(line.as_bytes()).await;
        }
        child.wait().await
    };
    let outcome = tokio::time::timeout(LIMIT, talk).await;
    match outcome {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(match status.code() {
            Some(code) => format!("failed with exit code {code}"),
            None => format!("failed: {status}"),
        }),
        Ok(Err(e)) => Err(format!("failed: {e}")),
        Err(_) => {
            stop_group(group).await;
            let _ = child.start_kill();
            let _ = child.wait().await;
            Err(format!(
                "did not finish within {} s and was stopped",
                LIMIT.as_secs()
            ))
        }
    }
}

/// Kills the process group `group` a notification leads (SIGKILL), grandchildren included.
async fn stop_group(group: Option<u32>) {
    #[cfg(unix)]
    if let Some(pgid) = group.filter(|&id| id > 1) {
        let _ = tokio::process::Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{pgid}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
    #[cfg(not(unix))]
    let _ = group;
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::usage::{Budget, Usage};

    #[test]
    fn a_reached_budget_is_told_with_the_usage() {
        let plan = PlanId::from("p1");
        let event = OrchestratorEvent::BudgetReached {
            plan: plan.clone(),
            usage: Usage {
                cost_usd: 1.5,
                ..Usage::default()
            },
            budget: Budget {
                cost_usd: Some(1.0),
                tokens: None,
            },
        };
        let doc = attention_doc(&plan, &event).expect("a document");
        assert_eq!(doc["event"], "budget_reached");
        assert_eq!(doc["usage"]["costUsd"], 1.5);
        assert_eq!(doc["budget"]["costUsd"], 1.0);
        assert_eq!(attention_doc(&PlanId::from("other"), &event), None);
    }
}
