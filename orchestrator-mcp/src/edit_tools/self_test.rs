//! The self-test tool: a small deterministic plan that exercises the engine end to end (a
//! fan-out, a fan-in, and a job that fails on purpose until the server retries it).

use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::{NodeStatus, OrchestratorEvent, PlanId, RetryRequest};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use serde_json::json;

use super::apply::edit_failure;
use crate::args::Args;
use crate::edit_args::IntegrationTestArgs;
use crate::server::{retry_and_continue, run, Failure, OrchestratorMcp, ToolResult};

#[tool_router(router = self_test_router, vis = "pub(super)")]
impl OrchestratorMcp {
    #[tool(
        name = "run_copilot_integration_test",
        description = "Create and run a small deterministic self-test plan that exercises the \
            engine end to end: a root job, a fan-out of two jobs, a fan-in job that needs both, \
            and a job that fails on purpose (its dependent is blocked) and is then retried by \
            the server with corrected work, after which the plan succeeds. Its result lands on \
            a branch `orchestrator/self-test-<id>`, never the current one. Poll \
            get_copilot_plan_status with the returned planId."
    )]
    async fn run_copilot_integration_test(
        &self,
        Parameters(args): Parameters<Args<IntegrationTestArgs>>,
    ) -> ToolResult {
        run(&args, async |a| {
            let (spec, dir) = self.self_test_plan(a.start_paused)?;
            let id = self
                .orchestrator
                .create_plan(spec, dir)
                .await
                .map_err(|e| edit_failure(e, &|_| "(self-test)".to_owned()))?;
            self.orchestrator.start(&id).await?;
            self.retry_when_failed(
                id.clone(),
                "flaky".into(),
                "mkdir -p selftest && echo fixed > selftest/flaky.txt",
            );
            let (mut doc, text) = self.edited(&id, "self-test plan started").await?;
            doc["expected"] = json!(
                "setup succeeds; left and right run in parallel; join needs both; flaky \
                 fails and blocks after-flaky; the server retries flaky with new work; \
                 the plan ends succeeded"
            );
            Ok((doc, text))
        })
        .await
    }
}

impl OrchestratorMcp {
    /// The self-test plan and the folder it runs in: worktrees of the server's repository
    /// when it is a git repository, else a fresh temporary folder.
    fn self_test_plan(
        &self,
        start_paused: bool,
    ) -> Result<(PlanSpec, std::path::PathBuf), Failure> {
        let tag: String = PlanId::random().as_str().chars().take(8).collect();
        let in_git = self.repo.join(".git").exists();
        let job = |id: &str, task: &str, cmd: &str, deps: &[&str]| {
            let mut j =
                JobSpec::new(id, task, WorkSpec::shell(cmd)).depends_on(deps.iter().copied());
            j.extra.make_mut().auto_heal = Some(false);
            j
        };
        let write = |file: &str| format!("mkdir -p selftest && echo {file} > selftest/{file}.txt");
        let mut spec = PlanSpec::new(format!("self-test {tag}"))
            .job(job("setup", "Self-test: root job", &write("setup"), &[]))
            .job(job("left", "Self-test: fan-out left", &write("left"), &["setup"]))
            .job(job("right", "Self-test: fan-out right", &write("right"), &["setup"]))
            .job(job(
                "join",
                "Self-test: fan-in",
                "test -f selftest/left.txt && test -f selftest/right.txt && cat selftest/left.txt selftest/right.txt > selftest/join.txt",
                &["left", "right"],
            ))
            .job(job(
                "flaky",
                "Self-test: fails until retried",
                "echo 'this job fails on purpose; the self-test retries it' >&2; exit 1",
                &["setup"],
            ))
            .job(job("after-flaky", "Self-test: blocked, then unblocked", &write("after"), &["flaky"]));
        spec.start_paused = start_paused;
        if in_git {
            spec = spec.target_branch(format!("orchestrator/self-test-{tag}"));
            Ok((spec, self.repo.clone()))
        } else {
            let dir = std::env::temp_dir().join(format!("orchestrator-self-test-{tag}"));
            std::fs::create_dir_all(&dir)
                .map_err(|e| Failure::other("io", format!("create {}: {e}", dir.display())))?;
            Ok((spec.isolation(Isolation::None), dir))
        }
    }

    /// In the background: once `job` has failed, retry it with `work` (event-driven: checked
    /// now and at each failure in the plan, for as long as the plan lives).
    fn retry_when_failed(&self, id: PlanId, job: String, work: &str) {
        let o = self.orchestrator.clone();
        let work = WorkSpec::shell(work);
        let mut events = o.subscribe();
        tokio::spawn(async move {
            loop {
                let Ok(record) = o.status(&id).await else {
                    return;
                };
                let Some(n) = record.spec.jobs.iter().position(|j| j.producer_id == job) else {
                    return;
                };
                match record.state.nodes[n].status {
                    NodeStatus::Failed => {
                        let mut request = RetryRequest::jobs([job.clone()]);
                        request.work = Some(work);
                        let _ = retry_and_continue(&o, &id, request).await;
                        return;
                    }
                    NodeStatus::Succeeded | NodeStatus::Canceled => return,
                    _ => {}
                }
                // Wait for the next failure in this plan (or a gap in the events).
                loop {
                    match events.recv().await {
                        Ok(OrchestratorEvent::NodeTransition { plan, to, .. })
                            if plan == id && to == NodeStatus::Failed =>
                        {
                            break
                        }
                        Ok(_) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    }
                }
            }
        });
    }
}
