//! The plan: format (SPEC §2), parsing, validation and graph.

mod collect;
mod edit;
pub(crate) mod graph;
mod groups;
mod parse;
mod spec;
mod validate;
mod work;
mod workflow;

pub use edit::{apply_edits, layout, EditError, JobUpdate, PlanEdit, PlanUpdate};
pub use graph::{PlanGraph, Priority, SNAPSHOT_PRODUCER_ID};
pub use groups::{group_statuses, GroupStatus};
pub use parse::{load_plan_file, parse_plan, parse_plan_with, PlanFormat};
pub use spec::{Approval, Env, GroupSpec, Isolation, JobExtra, JobSpec, PlanSpec, SplitPolicy};
pub use validate::producer_id_problem;
pub use validate::{validate, ValidationContext, ValidationError, ValidationErrors};
pub use work::{
    AgentSpec, Effort, ModelTier, OnFailure, ProcessSpec, ShellExtra, ShellKind, ShellSpec,
    TimerSpec, WorkSpec,
};
pub use workflow::{
    Complexity, PipelineSpec, RoleSpec, StageApproval, TeamAgent, TeamMode, TeamSelect, TeamSpec,
    WorkerSpec, DEFAULT_MAX_DEBUG_ATTEMPTS, DEFAULT_MAX_ITERATIONS, DEFAULT_THRESHOLD,
    PIPELINE_ROLES,
};
