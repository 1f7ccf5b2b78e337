//! Reading a job from the plan format: flat, with its aliases and defaults, and unknown fields
//! refused by name; the fields most jobs leave unset then go behind [`JobSpec::extra`].

use serde::Deserialize;

use super::{Approval, Env, JobExtra, JobSpec, SplitPolicy};
use crate::extra::Extra;
use crate::plan::WorkSpec;

/// A job as the plan format writes it: flat, every field inline. The fields are documented
/// where they end up, on [`JobSpec`] and [`JobExtra`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawJob {
    #[serde(alias = "producer_id")]
    producer_id: String,
    task: String,
    work: WorkSpec,
    dependencies: Vec<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    prechecks: Option<Box<WorkSpec>>,
    #[serde(default)]
    postchecks: Option<Box<WorkSpec>>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default, alias = "base_branch")]
    base_branch: Option<String>,
    #[serde(default, alias = "expects_no_changes")]
    expects_no_changes: bool,
    #[serde(default, alias = "auto_heal")]
    auto_heal: Option<bool>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    env: Env,
    #[serde(default)]
    approval: Option<Approval>,
    #[serde(default)]
    split: Option<SplitPolicy>,
    #[serde(default)]
    parent: Option<String>,
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
