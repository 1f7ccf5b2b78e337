//! Reading a job from the plan format: flat, with its aliases and defaults, and unknown fields
//! refused by name; the fields most jobs leave unset then go behind [`JobSpec::extra`].

use serde::Deserialize;

use super::{Approval, Env, JobExtra, JobSpec, SplitPolicy};
use crate::extra::Extra;
use crate::plan::WorkSpec;

/// A job as the plan format writes it: flat, every field inline.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawJob {
    /// Stable id other jobs depend on: `^[a-z0-9-]{3,64}$`, unique in the plan.
    #[serde(alias = "producer_id")]
    producer_id: String,
    /// Short description; also the commit message (`[Plan] <task>`).
    task: String,
    /// What the job does.
    work: WorkSpec,
    /// producerIds this job depends on (may be empty).
    dependencies: Vec<String>,
    /// Display name (default: the producerId).
    #[serde(default)]
    name: Option<String>,
    /// Checks run before the work (boxed: most jobs have none, and a plan holds every job).
    #[serde(default)]
    prechecks: Option<Box<WorkSpec>>,
    /// Checks run after the commit (boxed, as `prechecks`).
    #[serde(default)]
    postchecks: Option<Box<WorkSpec>>,
    /// Extra instructions for agent work.
    #[serde(default)]
    instructions: Option<String>,
    /// Base revision for a root job (overrides the plan's).
    #[serde(default, alias = "base_branch")]
    base_branch: Option<String>,
    /// The job is expected to change nothing: an empty commit phase is a success.
    #[serde(default, alias = "expects_no_changes")]
    expects_no_changes: bool,
    /// Let an agent heal failed shell/process phases (default `true`).
    #[serde(default, alias = "auto_heal")]
    auto_heal: Option<bool>,
    /// Visual grouping path such as `backend/api`; no effect on order.
    #[serde(default)]
    group: Option<String>,
    /// Environment for this job.
    #[serde(default)]
    env: Env,
    /// Hold the job for a person's approval (SPEC §12): `before` it starts.
    #[serde(default)]
    approval: Option<Approval>,
    /// Whether the job may split into sub-jobs (SPEC §12): by default agent work may (when
    /// its context fills), shell and process work only with `allow`.
    #[serde(default)]
    split: Option<SplitPolicy>,
    /// The composite job this one is a sub-job of (its producerId is `<parent>/<name>`). Set
    /// by the engine when the composite job expands; a plan file does not set it.
    #[serde(default)]
    parent: Option<String>,
    /// Set on a sub-agent, a child job an agent spawned (SPEC §15), with the contract its
    /// outcome is checked against. Set by the engine; a plan file does not set it.
    #[serde(default, alias = "sub_agent")]
    sub_agent: Option<Box<crate::tools::SubAgentSpec>>,
}

impl From<RawJob> for JobSpec {
    fn from(raw: RawJob) -> Self {
        JobSpec {
            producer_id: raw.producer_id,
            task: raw.task,
            work: raw.work,
            dependencies: raw.dependencies,
            name: raw.name,
            extra: Extra::new(JobExtra {
                prechecks: raw.prechecks,
                postchecks: raw.postchecks,
                instructions: raw.instructions,
                base_branch: raw.base_branch,
                expects_no_changes: raw.expects_no_changes,
                auto_heal: raw.auto_heal,
                group: raw.group,
                env: raw.env,
                approval: raw.approval,
                split: raw.split,
                parent: raw.parent,
                sub_agent: raw.sub_agent,
            }),
        }
    }
}
