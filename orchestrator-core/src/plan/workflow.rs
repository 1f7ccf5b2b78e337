//! The plan format of composite work run by a controller (SPEC §13): a multi-agent `team`
//! and a contract-checked role `pipeline`. These are data only; what they do is the business
//! of their controllers (the `orchestrator-workflows` crate), registered by work type.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Effort;

/// How a team works (SPEC §13).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TeamMode {
    /// Every worker gets the prompt, in parallel.
    Broadcast,
    /// Workers one after another, each seeing the earlier replies and commits.
    Sequential,
    /// One pass: plan, dispatch, collect, synthesize.
    Orchestrator,
    /// The orchestrator's pass, iterated until the goal is met (the default).
    #[default]
    Reflect,
}

impl TeamMode {
    /// Its name in the plan format.
    pub fn as_str(self) -> &'static str {
        match self {
            TeamMode::Broadcast => "broadcast",
            TeamMode::Sequential => "sequential",
            TeamMode::Orchestrator => "orchestrator",
            TeamMode::Reflect => "reflect",
        }
    }
}

/// Which workers' commits a broadcast team merges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TeamSelect {
    /// Every worker's.
    #[default]
    All,
    /// Only the evaluator's pick (best-of-N).
    Best,
}

/// One worker of a team.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct WorkerSpec {
    /// Its name: a producerId segment (`a-z`, digits, `-`; 3–64 characters).
    pub name: String,
    /// Its agent CLI (the team's `agent` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Its model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// Its specialty: leads its prompt and is shown to the orchestrator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
}

impl WorkerSpec {
    /// A worker with this name and nothing else set.
    pub fn new(name: impl Into<String>) -> Self {
        WorkerSpec {
            name: name.into(),
            ..WorkerSpec::default()
        }
    }
}

/// The team's orchestrator or evaluator.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct TeamAgent {
    /// Its agent CLI (the team's `agent` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Its model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// The evaluator's score that means the goal is met (default 0.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
}

/// `{"type":"team", ...}` (SPEC §13): a multi-agent team whose every worker, plan, synthesis
/// and evaluation is a sub-job.
///
/// ```
/// use orchestrator_core::plan::{parse_plan, PlanFormat, TeamMode, WorkSpec};
/// let plan = parse_plan(
///     r#"{"name":"p","jobs":[{"producerId":"docs","task":"write docs","dependencies":[],
///         "work":{"type":"team","prompt":"Document the API","mode":"broadcast",
///                 "workers":[{"name":"alice"},{"name":"bob","model":"sonnet"}]}}]}"#,
///     PlanFormat::Json,
///     "plan.json",
/// ).unwrap();
/// let WorkSpec::Team(team) = &plan.jobs[0].work else { panic!() };
/// assert_eq!(team.mode(), TeamMode::Broadcast);
/// assert_eq!(team.workers[1].model.as_deref(), Some("sonnet"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct TeamSpec {
    /// The request the team works on.
    pub prompt: String,
    /// How it works (default `reflect`, or the preset's); see [`TeamSpec::mode`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<TeamMode>,
    /// Its workers (filled from `squad` or `preset` when those are given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerSpec>,
    /// The agent CLI of every member that names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model of every member that names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The orchestrator's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestrator: Option<TeamAgent>,
    /// An independent evaluator; without one the orchestrator evaluates itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<TeamAgent>,
    /// Most iterations of a `reflect` team (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// Which workers' commits a `broadcast` team merges (default `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<TeamSelect>,
    /// A `.squad/` or `.ai-team/` folder of the repository to load the team from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub squad: Option<String>,
    /// A preset (built-in, user or repository) to load the team from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Context given to the orchestrator when it plans (Squad's `routing.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<String>,
    /// Shared knowledge prepended to every worker's prompt (Squad's `decisions.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions: Option<String>,
}

impl TeamSpec {
    /// How the team works: its `mode`, else `reflect`.
    pub fn mode(&self) -> TeamMode {
        self.mode.unwrap_or_default()
    }
}

/// The default evaluator threshold.
pub const DEFAULT_THRESHOLD: f64 = 0.9;
/// The default most iterations of a reflect team.
pub const DEFAULT_MAX_ITERATIONS: u32 = 5;
/// The default most debugger rounds of a pipeline.
pub const DEFAULT_MAX_DEBUG_ATTEMPTS: u32 = 2;

/// How much of the role pipeline a task goes through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Complexity {
    /// coder → review.
    Simple,
    /// architect → coder → review (the default).
    #[default]
    Medium,
    /// architect → designer (with `ui`) → coder → review.
    Complex,
}

/// Whether a person approves each stage of a pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum StageApproval {
    /// Stages follow one another.
    #[default]
    None,
    /// Each stage after the first waits for a person's approval.
    Between,
}

/// One role's agent settings in a pipeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct RoleSpec {
    /// Its agent CLI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Its model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
}

/// The roles of a pipeline, in the order they may run.
pub const PIPELINE_ROLES: [&str; 6] = [
    "architect",
    "planner",
    "designer",
    "coder",
    "review",
    "debugger",
];

/// `{"type":"pipeline", ...}` (SPEC §13): a task routed by complexity through roles whose
/// every reply must end with a signed contract.
///
/// ```
/// use orchestrator_core::plan::{parse_plan, Complexity, PlanFormat, WorkSpec};
/// let plan = parse_plan(
///     r#"{"name":"p","jobs":[{"producerId":"login","task":"login page","dependencies":[],
///         "work":{"type":"pipeline","task":"Add a login page","complexity":"simple",
///                 "roles":{"coder":{"model":"sonnet"}}}}]}"#,
///     PlanFormat::Json,
///     "plan.json",
/// ).unwrap();
/// let WorkSpec::Pipeline(p) = &plan.jobs[0].work else { panic!() };
/// assert_eq!(p.complexity, Some(Complexity::Simple));
/// assert_eq!(p.roles["coder"].model.as_deref(), Some("sonnet"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct PipelineSpec {
    /// The task (required unless `bootstrap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The objective a `bootstrap` pipeline plans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    /// Plan the objective (architect → planner) into `pipeline` sub-jobs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bootstrap: bool,
    /// How much of the pipeline runs (default `medium`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complexity: Option<Complexity>,
    /// The task has UI scope: a `complex` pipeline runs the designer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ui: bool,
    /// Settings per role (`architect`, `planner`, `designer`, `coder`, `review`, `debugger`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub roles: BTreeMap<String, RoleSpec>,
    /// The agent CLI of every role that names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The model of every role that names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Most debugger → coder → review rounds (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_debug_attempts: Option<u32>,
    /// `between`: each stage waits for a person's approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<StageApproval>,
}
