//! Arguments of the tools that build and change plans: scaffolding, reshape, updates, clone.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::args::ArgError;

/// Marker for tools whose schema is written by hand (see [`crate::schema`]).
#[derive(Debug)]
pub struct ScaffoldInput;

/// Marker for `add_copilot_plan_job`.
#[derive(Debug)]
pub struct AddJobInput;

macro_rules! hand_written_schema {
    ($ty:ident, $name:literal, $schema:path) => {
        impl JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $schema()
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                serde::de::IgnoredAny::deserialize(d)?;
                Ok($ty)
            }
        }
    };
}

hand_written_schema!(
    ScaffoldInput,
    "CopilotPlanScaffold",
    crate::schema::scaffold_schema
);
hand_written_schema!(AddJobInput, "CopilotPlanJob", crate::schema::add_job_schema);

/// Jobs to add to a plan.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddJobsArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// Jobs, each with the fields of a job in create_copilot_plan (producerId, task, work,
    /// dependencies, ...). Dependencies may name jobs already in the plan or earlier in this
    /// list. At most 500 per call.
    #[schemars(with = "Vec<Value>")]
    pub jobs: Vec<Value>,
}

/// Finalizing a scaffolded plan.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FinalizeArgs {
    /// The scaffolded plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// Keep it paused instead of starting it (default: the plan's own `startPaused`).
    #[serde(default, alias = "start_paused")]
    pub start_paused: Option<bool>,
}

/// Reshaping a plan.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReshapeArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// Operations applied in order; all or none take effect.
    #[serde(alias = "ops")]
    pub operations: Vec<ReshapeOp>,
}

/// One reshape operation.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReshapeOp {
    /// `add_node` (or `add_job`): add `spec`. `remove_node` (or `remove_job`): remove the job
    /// named by `jobId`/`producerId`; jobs depending on it inherit its dependencies.
    /// `update_deps`: set that job's `dependencies`. `add_before`: insert `spec` before the job
    /// `existingJobId` (it takes over that job's dependencies, and that job then waits for it).
    /// `add_after`: insert `spec` after `existingJobId` (jobs that depended on it depend on the
    /// new job instead). Running, succeeded or canceled jobs cannot be removed or rewired.
    #[serde(rename = "type", alias = "op", alias = "operation")]
    pub op: String,
    /// The new job (add_node, add_before, add_after): the fields of a job in
    /// create_copilot_plan.
    #[serde(default, alias = "job", alias = "jobSpec", alias = "job_spec")]
    #[schemars(with = "Option<Value>")]
    pub spec: Option<Value>,
    /// The job to remove or rewire (remove_node, update_deps): jobId, producerId or name.
    #[serde(default, alias = "job_id", alias = "nodeId", alias = "node_id")]
    pub job_id: Option<String>,
    /// Same as `jobId`, by producerId.
    #[serde(default, alias = "producer_id")]
    pub producer_id: Option<String>,
    /// New dependencies (update_deps), as producerIds (or jobIds).
    #[serde(default)]
    pub dependencies: Option<Vec<String>>,
    /// The existing job the new one goes before or after (add_before, add_after).
    #[serde(
        default,
        alias = "existing_job_id",
        alias = "existingNodeId",
        alias = "existing_node_id",
        alias = "before",
        alias = "after",
        alias = "target",
        alias = "anchor"
    )]
    pub existing_job_id: Option<String>,
}

/// Plan options to change. Fields left out stay as they are.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
// The fields give the schema and a first type check; the tool reads the changes from the raw
// arguments through the core's own update types.
#[allow(dead_code)]
pub struct UpdatePlanArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// New name.
    #[serde(default)]
    pub name: Option<String>,
    /// Jobs of this plan running at once; 0 = no plan limit. Takes effect at once.
    #[serde(default, alias = "max_parallel")]
    pub max_parallel: Option<u32>,
    /// Plan environment (replaces it) for jobs that start from now on.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Validation on the final snapshot (a work spec).
    #[serde(default, alias = "verify_ri")]
    #[schemars(with = "Option<Value>")]
    pub verify_ri: Option<Value>,
    /// Remove worktrees of succeeded jobs once consumed.
    #[serde(default, alias = "clean_up_successful_work")]
    pub clean_up_successful_work: Option<bool>,
    /// Folders symlinked into each new worktree.
    #[serde(default, alias = "additional_symlink_dirs")]
    pub additional_symlink_dirs: Option<Vec<String>>,
    /// Setup work specs for each new worktree.
    #[serde(default, alias = "worktree_init")]
    #[schemars(with = "Option<Vec<Value>>")]
    pub worktree_init: Option<Vec<Value>>,
    /// Base branch (only before the plan first starts).
    #[serde(default, alias = "base_branch")]
    pub base_branch: Option<String>,
    /// Target branch (only before the plan first starts).
    #[serde(default, alias = "target_branch")]
    pub target_branch: Option<String>,
}

/// The fields of a job an update may change (every one optional).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
// The fields give the schema and a first type check; the tool reads the changes from the raw
// arguments through the core's own update types.
#[allow(dead_code)]
pub struct JobChanges {
    /// New task description.
    #[serde(default)]
    pub task: Option<String>,
    /// New display name (allowed in any state).
    #[serde(default)]
    pub name: Option<String>,
    /// New work: a shell command, `"@agent <instructions>"` or a work-spec object.
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub work: Option<Value>,
    /// New prechecks (same forms as `work`).
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub prechecks: Option<Value>,
    /// New postchecks (same forms as `work`).
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub postchecks: Option<Value>,
    /// New agent instructions.
    #[serde(default)]
    pub instructions: Option<String>,
    /// New dependencies (producerIds); only for jobs that have not started.
    #[serde(default)]
    pub dependencies: Option<Vec<String>>,
    /// New job environment (replaces it).
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// New `expectsNoChanges`.
    #[serde(default, alias = "expects_no_changes")]
    pub expects_no_changes: Option<bool>,
    /// New `autoHeal`.
    #[serde(default, alias = "auto_heal")]
    pub auto_heal: Option<bool>,
    /// New group (allowed in any state).
    #[serde(default)]
    pub group: Option<String>,
    /// New base branch of a root job.
    #[serde(default, alias = "base_branch")]
    pub base_branch: Option<String>,
}

/// Changing many jobs at once: either `updates` (one entry per job) or the same `changes`
/// for every job in `jobIds`/`producerIds`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BulkUpdateArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// One entry per job: its `jobId` or `producerId` plus the fields to change (or a
    /// `changes` object), e.g. `{"producerId": "api", "work": "npm test"}`.
    #[serde(default, alias = "jobs")]
    #[schemars(with = "Vec<JobEdit>")]
    pub updates: Vec<Value>,
    /// Jobs (node ids or producerIds) that all get `changes`.
    #[serde(default, alias = "job_ids")]
    pub job_ids: Vec<String>,
    /// Jobs by producerId that all get `changes`.
    #[serde(default, alias = "producer_ids")]
    pub producer_ids: Vec<String>,
    /// The changes for every job of `jobIds`/`producerIds`.
    #[serde(default, alias = "update")]
    #[schemars(with = "Option<JobChanges>")]
    pub changes: Option<Value>,
}

/// The job an update names: `jobId` (node id, producerId or name) or `producerId`. Read
/// leniently: the rest of the object holds the changes, which the core's update type checks.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobTarget {
    /// The job's node id, producerId or unique name.
    #[serde(default, alias = "job_id", alias = "nodeId", alias = "node_id")]
    pub job_id: Option<String>,
    /// The job's producerId.
    #[serde(default, alias = "producer_id")]
    pub producer_id: Option<String>,
}

/// The fields naming the plan, the job or a nested `changes` object; the others are changes.
pub const NOT_CHANGES: [&str; 11] = [
    "planId",
    "plan_id",
    "jobId",
    "job_id",
    "nodeId",
    "node_id",
    "producerId",
    "producer_id",
    "changes",
    "update",
    "updates",
];

/// Marker for the input of `update_copilot_plan_job` (a plan, a job, and [`JobChanges`]).
#[derive(Debug)]
pub struct UpdateJobInput;

/// Marker for one entry of a bulk update (a job and [`JobChanges`]).
#[derive(Debug)]
pub struct JobEdit;

/// A job reference plus the [`JobChanges`] fields, at the top level or in `changes`.
fn job_edit_schema(with_plan: bool) -> schemars::Schema {
    let changes = serde_json::to_value(schemars::schema_for!(JobChanges)).unwrap_or(Value::Null);
    let mut properties = changes["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if with_plan {
        properties.insert(
            "planId".into(),
            json!({"type": "string", "description": "The plan's id (or a unique prefix)."}),
        );
    }
    properties.insert(
        "jobId".into(),
        json!({"type": "string",
               "description": "The job's node id, producerId or unique name. Use this or `producerId`."}),
    );
    properties.insert(
        "producerId".into(),
        json!({"type": "string", "description": "The job's producerId. Use this or `jobId`."}),
    );
    let mut nested = changes.clone();
    if let Some(o) = nested.as_object_mut() {
        o.remove("$schema");
        o.insert(
            "description".into(),
            json!("The changes as one object (instead of top-level fields)."),
        );
    }
    properties.insert("changes".into(), nested);
    let required: Vec<&str> = if with_plan { vec!["planId"] } else { vec![] };
    schemars::Schema::try_from(json!({
        "type": "object",
        "description": "A job (jobId or producerId) and the fields to change; fields left out stay as they are.",
        "properties": properties,
        "required": required,
    }))
    .unwrap_or_default()
}

impl JsonSchema for UpdateJobInput {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "UpdateJob".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        job_edit_schema(true)
    }
}

impl<'de> Deserialize<'de> for UpdateJobInput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(UpdateJobInput)
    }
}

impl JsonSchema for JobEdit {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JobEdit".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        job_edit_schema(false)
    }
}

/// Cloning a plan.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloneArgs {
    /// The plan to copy (or a unique prefix of its id).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// Name of the copy (default: `<name> (copy)`).
    #[serde(default, alias = "new_name")]
    pub name: Option<String>,
    /// Create the copy paused.
    #[serde(default, alias = "start_paused")]
    pub start_paused: Option<bool>,
}

/// Running the self-test.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntegrationTestArgs {
    /// Create the plan paused (resume it with resume_copilot_plan).
    #[serde(default, alias = "start_paused")]
    pub start_paused: bool,
}

/// The fields of an argument object other than `skip`, as one JSON object.
pub fn top_level_changes(raw: &serde_json::Map<String, Value>, skip: &[&str]) -> Value {
    Value::Object(
        raw.iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// Parses `value` as `T`, naming the field under `base` on error.
pub fn parse_at<T: serde::de::DeserializeOwned>(
    base: &str,
    value: Value,
    allowed: &str,
) -> Result<T, ArgError> {
    crate::args::parse_value(base, value, Some(allowed))
}
