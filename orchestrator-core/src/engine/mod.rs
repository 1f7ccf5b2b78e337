//! The engine: [`Orchestrator`] (built by [`OrchestratorBuilder`]) runs plans.
//!
//! One actor task per plan owns its [`crate::state::PlanMachine`]; node tasks run the phase
//! pipeline and report back over a channel. A finished node releases its dependents in the same
//! actor turn (no polling), every turn's changes are appended to the store in one batch before
//! any newly scheduled node starts, and capacity is a plan's `maxParallel` plus a semaphore
//! shared by every plan of the process.

mod actor;
mod builder;
mod orchestrator;
mod pipeline;
mod queue;
mod writer;

pub use builder::{OrchestratorBuilder, OrchestratorOptions};
pub use orchestrator::{ArchiveReport, Orchestrator, RetryRequest};

use crate::ids::NodeIndex;
use crate::plan::{PlanGraph, SNAPSHOT_PRODUCER_ID};
use crate::state::PlanRecord;

/// How the snapshot-validation node is shown (and may be named in job references).
pub const SNAPSHOT_LABEL: &str = "snapshot-validation";

/// Resolves a job reference — a producerId, a node id, or a unique display name — to a node.
pub fn resolve_job(record: &PlanRecord, graph: &PlanGraph, job: &str) -> Result<NodeIndex, String> {
    if let Some(n) = graph.index_of(job) {
        return Ok(n);
    }
    if job == SNAPSHOT_PRODUCER_ID || job == SNAPSHOT_LABEL {
        if let Some(n) = graph.snapshot() {
            return Ok(n);
        }
    }
    if let Some(n) = record.state.nodes.iter().position(|n| n.id.as_str() == job) {
        return Ok(n);
    }
    let by_name: Vec<NodeIndex> = record
        .spec
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.name.as_deref() == Some(job))
        .map(|(i, _)| i)
        .collect();
    match by_name.as_slice() {
        [n] => Ok(*n),
        [] => Err(format!(
            "no job `{job}`: name a producerId, a node id or a unique job name"
        )),
        _ => Err(format!(
            "job name `{job}` is used by {} jobs; name it by producerId instead",
            by_name.len()
        )),
    }
}

/// `My Plan: v2!` -> `my-plan-v2`: a safe branch component (never empty, never a leading `-`).
pub(crate) fn sanitize_branch_part(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed: String = out.trim_matches('-').chars().take(60).collect();
    let trimmed = trimmed.trim_end_matches('-').to_owned();
    if trimmed.is_empty() {
        "plan".into()
    } else {
        trimmed
    }
}

/// The target branch a plan gets when it names none and the current branch is the default
/// one: `orchestrator/<sanitized name>`.
pub fn generated_target_branch(plan_name: &str) -> String {
    format!("orchestrator/{}", sanitize_branch_part(plan_name))
}

/// The plan's snapshot branch (SPEC §4): `orchestrator/snapshot/<planId>`.
pub fn snapshot_branch_name(plan: &crate::ids::PlanId) -> String {
    format!("orchestrator/snapshot/{plan}")
}

/// The branches under `orchestrator/` a plan writes or may have started to write: its
/// snapshot branch and its target (as recorded, as named, or as it would be generated). Crash
/// repairs look for stale ref locks of exactly these.
pub fn own_branches(record: &PlanRecord) -> Vec<String> {
    let state = &record.state;
    let mut branches = vec![
        state
            .snapshot_branch
            .clone()
            .unwrap_or_else(|| snapshot_branch_name(&state.id)),
        generated_target_branch(&record.spec.name),
    ];
    branches.extend(state.target_branch.clone());
    branches.extend(record.spec.target_branch.clone());
    branches.retain(|b| b.starts_with("orchestrator/"));
    branches.sort();
    branches.dedup();
    branches
}

/// Folder name of a job's worktree under the worktree root (SPEC §4: `<id8>`).
pub fn job_worktree_name(node: &crate::ids::NodeId) -> &str {
    node.short()
}

/// Folder name of a plan's snapshot worktree under the worktree root (SPEC §4).
pub fn snapshot_worktree_name(plan: &crate::ids::PlanId) -> String {
    format!("_snapshot-{}", plan.short())
}

/// Display label of a node: the job's display name, or `snapshot-validation`.
pub fn node_label(record: &PlanRecord, n: NodeIndex) -> &str {
    record
        .spec
        .jobs
        .get(n)
        .map(|j| j.display_name())
        .unwrap_or(SNAPSHOT_LABEL)
}
