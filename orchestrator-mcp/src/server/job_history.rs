//! The tools on what a job did: its logs per phase, its attempts, and the context of its
//! failure.

use std::fmt::Write;

use orchestrator_core::repository::LogQuery;
use orchestrator_core::Phase;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::{json, Value};

use super::{run, Failure, OrchestratorMcp, ToolResult};
use crate::args::{ArgError, Args, JobArgs, LogsArgs};

impl OrchestratorMcp {
    async fn logs(&self, args: LogsArgs) -> Result<(Value, String), Failure> {
        let phase = match &args.phase {
            Some(p) => Some(Phase::parse(p).ok_or_else(|| {
                ArgError::new(
                    "phase",
                    Some(json!(p)),
                    "unknown phase",
                    format!("one of {}", Phase::ALL.map(Phase::as_str).join(", ")),
                )
            })?),
            None => None,
        };
        let job = self
            .job_at(
                &args.plan_id,
                args.job_id.as_deref(),
                args.producer_id.as_deref(),
            )
            .await?;
        let (id, label, node) = (&job.id, &job.label, job.node());
        if let Some(a) = args.attempt {
            if a == 0 || a as usize > node.attempts.len() {
                return Err(ArgError::new(
                    "attempt",
                    Some(json!(a)),
                    "no such attempt",
                    format!("1 to {} (the job's attempts)", node.attempts.len()),
                )
                .into());
            }
        }
        let mut query = LogQuery::new();
        if let Some(a) = args.attempt {
            query = query.attempt(a);
        }
        if let Some(t) = args.tail {
            query = query.tail(t);
        }
        let phases: Vec<Phase> = phase.map_or_else(|| Phase::ALL.to_vec(), |p| vec![p]);
        let mut text = String::new();
        let mut by_phase = serde_json::Map::new();
        for p in phases {
            let log = self
                .orchestrator
                .repository()
                .read_log(id, &node.id, query.phase(p))
                .await?;
            if log.is_empty() {
                continue;
            }
            if phase.is_none() {
                text.push_str(&format!("== {p} ==\n"));
            }
            text.push_str(&log);
            if !log.ends_with('\n') {
                text.push('\n');
            }
            by_phase.insert(p.as_str().to_owned(), json!(log));
        }
        if text.is_empty() {
            text = format!(
                "no logs for job `{label}` (status {}, {} attempt(s))",
                node.status,
                node.attempts.len()
            );
        }
        Ok((
            json!({
                "planId": id,
                "jobId": node.id,
                "producerId": label,
                "status": node.status.as_str(),
                "phases": by_phase,
                "logs": text,
            }),
            text,
        ))
    }
}

#[tool_router(router = history_router, vis = "pub(super)")]
impl OrchestratorMcp {
    #[tool(
        name = "get_copilot_job_logs",
        description = "A job's logs, per phase (merge-fi, setup, prechecks, work, commit, postchecks, \
            merge-ri). Name the job by jobId or producerId; narrow with phase, attempt and tail \
            (last N lines). Read these to see why a job failed."
    )]
    async fn get_copilot_job_logs(
        &self,
        Parameters(args): Parameters<Args<LogsArgs>>,
    ) -> ToolResult {
        run(&args, async |a| self.logs(a).await).await
    }

    #[tool(
        name = "get_copilot_job_attempts",
        description = "Every attempt of a job (by jobId or producerId): number, status, start \
            and end times, the phase it resumed from, each phase's status and timing, the failed \
            phase, the failure reason and error. Read logs of an attempt with \
            get_copilot_job_logs and `attempt`."
    )]
    async fn get_copilot_job_attempts(
        &self,
        Parameters(args): Parameters<Args<JobArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            let (label, node) = (&job.label, job.node());
            let attempts = serde_json::to_value(&node.attempts).unwrap_or(Value::Null);
            let mut text = format!("job {label}: {} attempt(s)\n", node.attempts.len());
            for at in &node.attempts {
                let error = at.extra.error.as_deref().and_then(|e| e.lines().next());
                let _ = writeln!(
                    text,
                    "  #{} {:?}{}",
                    at.number,
                    at.status,
                    error.map(|e| format!(": {e}")).unwrap_or_default()
                );
            }
            Ok((
                json!({
                    "planId": job.id,
                    "jobId": node.id,
                    "producerId": label,
                    "status": node.status.as_str(),
                    "count": node.attempts.len(),
                    "attempts": attempts,
                }),
                text,
            ))
        })
        .await
    }

    #[tool(
        name = "get_copilot_job_failure_context",
        description = "Why a job failed, in one call: its error, failed phase, failure reason, \
            the last 100 lines of the failed phase's log, and its work spec. Use it before \
            retry_copilot_job (with newWork to fix the job)."
    )]
    async fn get_copilot_job_failure_context(
        &self,
        Parameters(args): Parameters<Args<JobArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            let (id, label, node) = (&job.id, &job.label, job.node());
            let last = node.last_attempt();
            let phase = last.and_then(|at| at.extra.failed_phase);
            let log = match (phase, last) {
                (Some(p), Some(at)) => {
                    self.orchestrator
                        .repository()
                        .read_log(
                            id,
                            &node.id,
                            LogQuery::new().phase(p).attempt(at.number).tail(100),
                        )
                        .await?
                }
                _ => String::new(),
            };
            let work = job
                .record
                .job(job.n)
                .and_then(|j| serde_json::to_value(&j.work).ok());
            let text = match &node.extra.error {
                Some(e) => format!(
                    "job {label} is {} (phase {}): {e}\n{log}",
                    node.status,
                    phase.map_or("-", Phase::as_str)
                ),
                None => format!("job {label} is {}; no failure recorded", node.status),
            };
            Ok((
                json!({
                    "planId": id,
                    "jobId": node.id,
                    "producerId": label,
                    "status": node.status.as_str(),
                    "error": node.extra.error,
                    "failedPhase": phase,
                    "failureReason": last.and_then(|at| at.extra.failure_reason),
                    "attempts": node.attempts.len(),
                    "log": log,
                    "work": work,
                }),
                text,
            ))
        })
        .await
    }
}
