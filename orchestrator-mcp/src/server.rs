//! [`OrchestratorMcp`]: the MCP server of one repository, its tool names and its lifecycle
//! (serving stdio, resuming interrupted plans). The tools, each a thin layer over
//! [`Orchestrator`], live in the submodules by what they act on: whole plans
//! ([`plan_tools`]), one job ([`job_tools`]) and what a job did ([`job_history`]); the plan
//! editing tools are in [`crate::edit_tools`]. The helpers they share: how a tool answers
//! ([`answer`]), resolving plan and job arguments ([`lookup`]), status answers ([`status`])
//! and retries ([`retry`]).

mod answer;
mod job_history;
mod job_tools;
mod lookup;
mod plan_tools;
mod retry;
mod status;

use std::path::PathBuf;

use orchestrator_core::{Orchestrator, PlanId, PlanStatus};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool_handler, ServerHandler, ServiceExt};

pub(crate) use answer::{answer, run, Failure, ToolResult};
pub(crate) use retry::retry_and_continue;

/// Jobs one `create_copilot_plan` call accepts (the reference's limit).
pub const MAX_JOBS_PER_CALL: usize = 500;

/// The names of the tools this server offers, in the order they are listed.
pub const TOOL_NAMES: [&str; 31] = [
    "create_copilot_plan",
    "scaffold_copilot_plan",
    "add_copilot_plan_job",
    "add_copilot_plan_jobs",
    "finalize_copilot_plan",
    "get_copilot_plan_status",
    "list_copilot_plans",
    "get_copilot_job_logs",
    "get_copilot_job_attempts",
    "cancel_copilot_plan",
    "pause_copilot_plan",
    "resume_copilot_plan",
    "delete_copilot_plan",
    "archive_copilot_plan",
    "recover_copilot_plan",
    "retry_copilot_plan",
    "reshape_copilot_plan",
    "update_copilot_plan",
    "get_copilot_plan_graph",
    "clone_copilot_plan",
    "get_copilot_job",
    "list_copilot_jobs",
    "retry_copilot_job",
    "force_fail_copilot_job",
    "get_copilot_job_failure_context",
    "update_copilot_plan_job",
    "bulk_update_copilot_plan_jobs",
    "run_copilot_integration_test",
    "approve_copilot_job",
    "reject_copilot_job",
    "answer_copilot_job",
];

/// The MCP server of one repository: the reference system's copilot tools over an
/// [`Orchestrator`]. Plans created here keep running inside the host process; stored plans
/// (from earlier sessions) are taken over when a tool needs to drive them.
///
/// ```no_run
/// # async fn f(o: orchestrator_core::Orchestrator) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// orchestrator_mcp::OrchestratorMcp::new(o, "/path/to/repo").serve_stdio().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OrchestratorMcp {
    pub(crate) orchestrator: Orchestrator,
    pub(crate) repo: PathBuf,
    tool_router: ToolRouter<Self>,
}

impl OrchestratorMcp {
    /// A server driving plans with `orchestrator` for the repository (or folder) `repo`.
    pub fn new(orchestrator: Orchestrator, repo: impl Into<PathBuf>) -> Self {
        OrchestratorMcp {
            orchestrator,
            repo: repo.into(),
            tool_router: Self::plan_router()
                + Self::job_router()
                + Self::history_router()
                + Self::edit_router(),
        }
    }

    /// The orchestrator.
    pub fn orchestrator(&self) -> &Orchestrator {
        &self.orchestrator
    }

    /// Serves on stdin/stdout until the client goes away, then releases every plan it drives
    /// (running jobs are stopped and resume from their phase when the plan is next started, for
    /// example by [`OrchestratorMcp::resume_interrupted`] in the next server).
    pub async fn serve_stdio(self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let orchestrator = self.orchestrator.clone();
        // Our line transport, not rmcp's: it answers the lines rmcp's would drop.
        let (stdin, stdout) = rmcp::transport::stdio();
        let service = self
            .serve(crate::stdio::LineTransport::new(stdin, stdout))
            .await?;
        let ended = service.waiting().await;
        for id in orchestrator.plan_ids() {
            let _ = orchestrator.release(&id).await;
        }
        ended?;
        Ok(())
    }

    /// Takes over and starts again every stored plan that was running when its last owner
    /// stopped (a restarted server continues its plans). Paused, scaffolded and ended plans
    /// are left alone, and so are plans another process is running. Returns the plans resumed.
    pub async fn resume_interrupted(&self) -> Vec<PlanId> {
        let Ok(listing) = self.orchestrator.repository().list().await else {
            return Vec::new();
        };
        let mut resumed = Vec::new();
        // The stored summary tells the plans that cannot have been interrupted (ended, paused,
        // scaffolded): only the others are read.
        let candidates = listing.plans.into_iter().filter(|s| {
            !s.status.is_terminal()
                && !matches!(s.status, PlanStatus::Paused | PlanStatus::Scaffolding)
        });
        for summary in candidates {
            let id = summary.plan_id;
            let Ok(record) = self.orchestrator.repository().load(&id).await else {
                continue;
            };
            let s = &record.state;
            let interrupted = s.started_at.is_some()
                && !s.paused
                && !s.scaffolding
                && !s.canceled
                && !s.archived
                && !record.status().is_terminal();
            if !interrupted {
                continue;
            }
            if self.orchestrator.open_plan(&id).await.is_ok()
                && self.orchestrator.start(&id).await.is_ok()
            {
                resumed.push(id);
            }
        }
        resumed
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for OrchestratorMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "orchestrator-mcp",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Runs plans of coding jobs (a DAG) in git worktrees of this repository. \
                 create_copilot_plan starts a plan and returns its planId; poll \
                 get_copilot_plan_status until it ends; on failure read get_copilot_job_logs \
                 and fix with retry_copilot_job (optionally with newWork).",
            )
    }
}
