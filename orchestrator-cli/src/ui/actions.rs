//! The dashboard's actions: `POST /api/plans/<plan>/<action>` with a JSON body
//! (`{"job"}`, `{"job","reason"}`, `{"job","answer"}` or `{}`). They are the commands of the
//! same names: approve, reject, answer, pause and cancel run [`steer::act`] (here, or by asking
//! the process that runs the plan); resume and retry start `orchestrator resume|retry` as a
//! process of its own, which runs the plan to its end whether or not the dashboard stays. The
//! answer is `{"ok":true,"status"}` or the command's own error as `{"error","exit"}` (400 for
//! what the command calls invalid input, 409 when the plan cannot do it now, 500 otherwise).

use std::io::{Read, Seek};
use std::time::Duration;

use hyper::{Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::{json_response, Body, Ui};
use crate::commands::steer;
use crate::control::Action;
use crate::error::{CliError, CliResult, Exit};

/// How long a started `resume` or `retry` has to refuse before it counts as started.
const START_GRACE: Duration = Duration::from_millis(1500);

/// An action's arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    job: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    answer: Option<String>,
}

/// Runs `action` on plan `plan` and answers as JSON.
pub async fn post(ui: &Ui, plan: &str, action: &str, body: &[u8]) -> Response<Body> {
    match run(ui, plan, action, body).await {
        Ok(message) => json_response(StatusCode::OK, &message),
        Err(e) => {
            let status = match e.exit {
                Exit::Invalid => StatusCode::BAD_REQUEST,
                Exit::PlanNotSucceeded => StatusCode::CONFLICT,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            json_response(status, &json!({"error": e.message, "exit": e.exit.code()}))
        }
    }
}

async fn run(ui: &Ui, plan: &str, action: &str, body: &[u8]) -> CliResult<serde_json::Value> {
    let args: Args = if body.iter().all(u8::is_ascii_whitespace) {
        Args::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| CliError::invalid(format!("the {action} request's body: {e}")))?
    };
    let id = ui.ws.resolve_plan(plan).await?;
    let job = || {
        args.job
            .clone()
            .filter(|j| !j.is_empty())
            .ok_or_else(|| CliError::invalid(format!("{action} needs a job (\"job\")")))
    };
    let action = match action {
        "pause" => Action::Pause,
        "cancel" => Action::Cancel,
        "approve" => Action::Approve { job: job()? },
        "reject" => Action::Reject {
            job: job()?,
            reason: args
                .reason
                .clone()
                .filter(|r| !r.trim().is_empty())
                .ok_or_else(|| CliError::invalid("reject needs a reason (\"reason\")"))?,
        },
        "answer" => Action::Answer {
            job: job()?,
            answer: args
                .answer
                .clone()
                .ok_or_else(|| CliError::invalid("answer needs an answer (\"answer\")"))?,
        },
        "resume" | "retry" => {
            let mut command = vec![action.to_owned(), id.to_string()];
            if action == "retry" {
                command.extend(args.job.clone());
            }
            let pid = start(ui, &command).await?;
            return Ok(
                json!({"ok": true, "message": format!("orchestrator {action} runs the plan (process {pid})")}),
            );
        }
        other => {
            return Err(CliError::invalid(format!(
            "unknown action `{other}`: use approve, reject, answer, pause, resume, cancel or retry"
        )))
        }
    };
    let record = steer::act(&ui.ws, &id, &action, false).await?;
    Ok(json!({"ok": true, "status": record.status().as_str()}))
}

/// Starts `orchestrator <args> --repo <root> --quiet` in its own process group (a Ctrl-C of
/// the dashboard does not stop the plan it runs); an early refusal is this call's error, with
/// the command's message and exit code.
async fn start(ui: &Ui, args: &[String]) -> CliResult<u32> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::other(format!("cannot find the orchestrator binary: {e}")))?;
    let mut stderr = tempfile::tempfile().map_err(|e| {
        CliError::other(format!("cannot make a file for the command's errors: {e}"))
    })?;
    let child_err = stderr
        .try_clone()
        .map_err(|e| CliError::other(format!("cannot share the error file: {e}")))?;
    let mut command = tokio::process::Command::new(exe);
    command
        .args(args)
        .arg("--repo")
        .arg(ui.ws.root())
        .arg("--quiet")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(child_err);
    if let Some(url) = &ui.ws.database {
        command.arg("--database").arg(url);
    }
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| CliError::other(format!("cannot start orchestrator {}: {e}", args[0])))?;
    let pid = child.id().unwrap_or_default();
    match tokio::time::timeout(START_GRACE, child.wait()).await {
        Err(_) => {
            // Still running: it is reaped when it ends.
            tokio::spawn(async move { child.wait().await });
            Ok(pid)
        }
        Ok(Err(e)) => Err(CliError::other(format!("orchestrator {}: {e}", args[0]))),
        Ok(Ok(status)) => {
            let mut message = String::new();
            let _ = stderr.rewind();
            let _ = stderr.read_to_string(&mut message);
            let message = message.trim().to_owned();
            match status.code() {
                Some(0) => Ok(pid),
                Some(2) => Err(CliError::invalid(message)),
                Some(1) => Err(CliError {
                    exit: Exit::PlanNotSucceeded,
                    message,
                }),
                _ => Err(CliError::other(if message.is_empty() {
                    format!("orchestrator {} ended with {status}", args[0])
                } else {
                    message
                })),
            }
        }
    }
}
