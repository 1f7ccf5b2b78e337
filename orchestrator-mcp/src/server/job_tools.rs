//! The tools on one job or the list of a plan's jobs: get, list, retry and force-fail.

use orchestrator_core::RetryRequest;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::{json, Value};

use super::{run, Failure, OrchestratorMcp, ToolResult};
use crate::args::{ArgError, Args, DecisionArgs, JobArgs, ListJobsArgs, RetryJobArgs};
use crate::report;

#[tool_router(router = job_router, vis = "pub(super)")]
impl OrchestratorMcp {
    #[tool(
        name = "get_copilot_job",
        description = "One job in detail: its spec (task, work, dependencies, group), status, \
            commit, worktree, error and every attempt with its phases and timings. Name it by \
            jobId or producerId."
    )]
    async fn get_copilot_job(&self, Parameters(args): Parameters<Args<JobArgs>>) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            let node = job.node();
            let text = format!(
                "job {} ({}): {}, {} attempt(s){}",
                job.label,
                node.id,
                node.status,
                node.attempts.len(),
                node.extra
                    .error
                    .as_deref()
                    .map(|e| format!(", error: {e}"))
                    .unwrap_or_default()
            );
            Ok((report::job_detail(&job.record, job.n), text))
        })
        .await
    }

    #[tool(
        name = "list_copilot_jobs",
        description = "A plan's jobs with jobId, producerId, name, status, attempts, commit and \
            error; optionally only those with a status (pending, ready, scheduled, running, \
            succeeded, failed, blocked, canceled, completed_split) or in a group."
    )]
    async fn list_copilot_jobs(
        &self,
        Parameters(args): Parameters<Args<ListJobsArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            if let Some(s) = &a.status {
                let all = orchestrator_core::NodeStatus::ALL.map(|s| s.as_str());
                if !all.contains(&s.as_str()) {
                    return Err(ArgError::new(
                        "status",
                        Some(json!(s)),
                        "unknown job status",
                        format!("one of {}", all.join(", ")),
                    )
                    .into());
                }
            }
            let id = self.plan_id(&a.plan_id).await?;
            let record = self.record(&id).await?;
            let all = match report::plan_json(&record)["jobs"].take() {
                Value::Array(jobs) => jobs,
                _ => Vec::new(),
            };
            // A group matches itself and the groups below it.
            let group = a
                .group
                .as_deref()
                .map(|g| (g, format!("{}/", g.trim_end_matches('/'))));
            let in_group = |j: &Value| match &group {
                Some((g, below)) => j["group"]
                    .as_str()
                    .is_some_and(|jg| jg == *g || jg.starts_with(below.as_str())),
                None => true,
            };
            let jobs: Vec<Value> = all
                .into_iter()
                .filter(|j| a.status.as_deref().is_none_or(|s| j["status"] == s))
                .filter(in_group)
                .collect();
            let text = jobs
                .iter()
                .map(|j| {
                    format!(
                        "{}  {}  {}",
                        j["producerId"].as_str().unwrap_or(""),
                        j["status"].as_str().unwrap_or(""),
                        j["nodeId"].as_str().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            Ok((
                json!({"planId": id, "count": jobs.len(), "jobs": jobs}),
                if text.is_empty() {
                    "no jobs match".to_owned()
                } else {
                    text
                },
            ))
        })
        .await
    }

    #[tool(
        name = "retry_copilot_job",
        description = "Retry one failed job (by jobId or producerId). It resumes from the failed \
            phase; newWork/newPrechecks/newPostchecks replace its specs (e.g. a corrected \
            command or clearer agent instructions), clearWorktree starts over. The plan then \
            runs on in the background."
    )]
    async fn retry_copilot_job(
        &self,
        Parameters(args): Parameters<Args<RetryJobArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            let request = Self::with_new_specs(
                RetryRequest::jobs([job.node().id.to_string()]),
                a.new_work,
                a.new_prechecks,
                a.new_postchecks,
                a.clear_worktree,
            )?;
            self.retry(&job.id, request).await?;
            self.status_after(&job.id, &format!("retrying job {}", job.label))
                .await
        })
        .await
    }

    #[tool(
        name = "force_fail_copilot_job",
        description = "Fail a running (stuck) job now, killing its process tree. It can then be \
            retried with retry_copilot_job."
    )]
    async fn force_fail_copilot_job(
        &self,
        Parameters(args): Parameters<Args<JobArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let job = self
                .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
                .await?;
            self.own(&job.id).await?;
            self.orchestrator
                .force_fail(&job.id, job.node().id.as_str())
                .await?;
            self.status_after(&job.id, &format!("job {} force-failed", job.label))
                .await
        })
        .await
    }

    #[tool(
        name = "approve_copilot_job",
        description = "Approve a job waiting for approval (its plan field \"approval\": \"before\"): \
            it becomes ready and starts when the plan runs. A job that does not wait for approval \
            is an error naming what it waits for."
    )]
    async fn approve_copilot_job(
        &self,
        Parameters(args): Parameters<Args<DecisionArgs>>,
    ) -> ToolResult {
        run(&args, async |a| self.decide(&a, Decision::Approve).await).await
    }

    #[tool(
        name = "reject_copilot_job",
        description = "Reject a job waiting for approval, with a reason: it fails with reason \
            \"rejected\" and the jobs that depend on it are blocked (retry_copilot_job holds it \
            for approval again)."
    )]
    async fn reject_copilot_job(
        &self,
        Parameters(args): Parameters<Args<DecisionArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let reason = a.reason.clone().unwrap_or_default();
            self.decide(&a, Decision::Reject(&reason)).await
        })
        .await
    }

    #[tool(
        name = "answer_copilot_job",
        description = "Answer a job waiting for input (a question its agent asked) with `answer`. \
            A job that does not wait for input is an error naming what it waits for."
    )]
    async fn answer_copilot_job(
        &self,
        Parameters(args): Parameters<Args<DecisionArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let answer = a.answer.clone().unwrap_or_default();
            self.decide(&a, Decision::Answer(&answer)).await
        })
        .await
    }
}

/// What a person decides about a waiting job.
enum Decision<'a> {
    Approve,
    Reject(&'a str),
    Answer(&'a str),
}

impl OrchestratorMcp {
    /// The approve/reject/answer tools: the job found and owned, the decision applied, the
    /// plan's status answered.
    async fn decide(
        &self,
        a: &DecisionArgs,
        decision: Decision<'_>,
    ) -> Result<(Value, String), Failure> {
        let job = self
            .job_at(&a.plan_id, a.job_id.as_deref(), a.producer_id.as_deref())
            .await?;
        self.own(&job.id).await?;
        let node = job.node().id.as_str();
        let o = &self.orchestrator;
        let done = match decision {
            Decision::Approve => o.approve(&job.id, node).await.map(|()| "approved"),
            Decision::Reject(reason) => o.reject(&job.id, node, reason).await.map(|()| "rejected"),
            Decision::Answer(answer) => o.answer(&job.id, node, answer).await.map(|()| "answered"),
        }?;
        self.status_after(&job.id, &format!("job {} {done}", job.label))
            .await
    }
}
