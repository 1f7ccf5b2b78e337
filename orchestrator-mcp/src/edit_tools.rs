//! The tools that build and change plans: scaffold, add jobs, finalize, reshape, update, bulk
//! update, clone, and the self-test plan. Each is a thin layer over
//! [`Orchestrator::scaffold_plan`](orchestrator_core::Orchestrator::scaffold_plan),
//! [`edit_plan`](orchestrator_core::Orchestrator::edit_plan) and
//! [`finalize_plan`](orchestrator_core::Orchestrator::finalize_plan).
//!
//! By role: [`build`] (scaffold, add jobs, finalize, clone), [`reshape`], [`update`] (the plan's
//! options and its jobs) and [`self_test`]; the helpers they share read job arguments
//! ([`job_args`]) and apply edits and answer ([`apply`]).

mod apply;
mod build;
mod job_args;
mod reshape;
mod self_test;
mod update;

use rmcp::handler::server::router::tool::ToolRouter;

use crate::server::OrchestratorMcp;

pub(crate) use apply::job_mapping;

/// What a job argument accepts, as the errors about one say.
const JOB_ALLOWED: &str = "a job object: producerId, task, work, dependencies (required), name, \
     prechecks, postchecks, instructions, baseBranch, expectsNoChanges, autoHeal, group, env, approval";

impl OrchestratorMcp {
    /// The router of every plan editing tool.
    pub(crate) fn edit_router() -> ToolRouter<Self> {
        Self::build_router()
            + Self::reshape_router()
            + Self::update_router()
            + Self::self_test_router()
    }
}
