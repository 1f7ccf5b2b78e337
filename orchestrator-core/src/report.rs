//! The JSON documents hosts show for plans and jobs: the CLI's `--json` output (SPEC §5) and
//! the MCP tools' results (SPEC §6) are built here, so both speak the same shape.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::engine::SNAPSHOT_LABEL;
use crate::state::{NodeState, NodeStatus, PlanRecord};

/// A plan's status document: `{"planId","name","status","targetBranch","jobs":[...]}` with the
/// jobs in plan order (see [`job_json`]), the snapshot-validation node apart in
/// `snapshotValidation`, and more facts (`counts`, branches, times).
///
/// ```
/// use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
/// use orchestrator_core::state::PlanRecord;
/// let spec = PlanSpec::new("p").isolation(Isolation::None)
///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")));
/// let graph = PlanGraph::build(&spec).unwrap();
/// let record = PlanRecord::new("id".into(), spec, ".".into(), graph.node_count(), 0);
/// let doc = orchestrator_core::report::plan_json(&record);
/// assert_eq!(doc["jobs"][0]["producerId"], "aaa");
/// assert_eq!(doc["status"], "pending");
/// ```
pub fn plan_json(record: &PlanRecord) -> Value {
    let s = &record.state;
    let jobs: Vec<Value> = (0..record.spec.jobs.len().min(s.nodes.len()))
        .map(|n| job_json(record, n))
        .collect();
    let snapshot =
        (s.nodes.len() > record.spec.jobs.len()).then(|| job_json(record, record.spec.jobs.len()));
    let c = s.counts();
    json!({
        "planId": s.id,
        "name": record.spec.name,
        "status": record.status().as_str(),
        "targetBranch": s.target_branch,
        "jobs": jobs,
        "snapshotValidation": snapshot,
        "snapshotBranch": s.snapshot_branch,
        "baseCommit": s.base_commit,
        "repo": s.repo,
        "isolation": record.spec.isolation,
        "options": options_json(&record.spec),
        "createdAt": s.created_at,
        "startedAt": s.started_at,
        "endedAt": s.ended_at,
        "counts": {
            "pending": c.pending + c.ready,
            "running": c.active,
            "succeeded": c.succeeded,
            "failed": c.failed,
            "blocked": c.blocked,
            "canceled": c.canceled,
        },
    })
}

/// The plan's options as given (the plan format's plan-level fields other than name and jobs).
fn options_json(spec: &crate::plan::PlanSpec) -> Value {
    json!({
        "baseBranch": spec.base_branch,
        "targetBranch": spec.target_branch,
        "maxParallel": spec.max_parallel,
        "cleanUpSuccessfulWork": spec.cleans_up(),
        "additionalSymlinkDirs": spec.additional_symlink_dirs,
        "startPaused": spec.start_paused,
        "verifyRi": spec.verify_ri,
        "envKeys": spec.env.keys().collect::<Vec<_>>(),
        "resumeAfterPlan": spec.resume_after_plan,
        "worktreeInit": spec.worktree_init,
    })
}

/// One job of a plan: `{"producerId","name","status","attempts","commit","error"}` plus its
/// node id, task, dependencies, group, failed phase and reason, worktree, and `blockedBy`.
pub fn job_json(record: &PlanRecord, n: usize) -> Value {
    let Some(node) = record.state.nodes.get(n) else {
        return Value::Null;
    };
    let mut doc = node_json(node);
    match record.spec.jobs.get(n) {
        Some(job) => {
            doc["producerId"] = json!(job.producer_id);
            doc["name"] = json!(job.display_name());
            doc["task"] = json!(job.task);
            doc["dependencies"] = json!(job.dependencies);
            if let Some(group) = &job.group {
                doc["group"] = json!(group);
            }
            let blockers = blocked_by(record, n);
            if !blockers.is_empty() {
                doc["blockedBy"] = json!(blockers);
            }
        }
        None => {
            doc["producerId"] = json!(SNAPSHOT_LABEL);
            doc["name"] = json!(SNAPSHOT_LABEL);
        }
    }
    doc
}

fn node_json(node: &NodeState) -> Value {
    let last = node.last_attempt();
    let usage: Vec<&Value> = node
        .attempts
        .iter()
        .filter_map(|a| a.metrics.as_ref())
        .collect();
    let mut doc = json!({
        "jobId": node.id,
        "nodeId": node.id,
        "status": node.status.as_str(),
        "attempts": node.attempts.len(),
        "commit": node.commit,
        "error": node.error,
        "failedPhase": last.and_then(|a| a.failed_phase),
        "failureReason": last.and_then(|a| a.failure_reason),
        "worktree": node.worktree,
    });
    // Runner metrics (agent usage: tokens, cost, turns, session): the last attempt's, and each
    // attempt's in order.
    if let Some(latest) = usage.last() {
        doc["usage"] = (*latest).clone();
        doc["usageByAttempt"] = json!(node
            .attempts
            .iter()
            .map(|a| a.metrics.clone().unwrap_or(Value::Null))
            .collect::<Vec<_>>());
    }
    doc
}

/// The failed (or canceled) jobs a blocked job waits on: its nearest such ancestors, sorted.
pub fn blocked_by(record: &PlanRecord, n: usize) -> Vec<String> {
    let nodes = &record.state.nodes;
    if n >= record.spec.jobs.len() || nodes.get(n).map(|s| s.status) != Some(NodeStatus::Blocked) {
        return Vec::new();
    }
    let by_id: HashMap<&str, usize> = record
        .spec
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.producer_id.as_str(), i))
        .collect();
    let mut seen = vec![false; record.spec.jobs.len()];
    let mut stack = vec![n];
    let mut out = Vec::new();
    while let Some(i) = stack.pop() {
        for dep in &record.spec.jobs[i].dependencies {
            let Some(&d) = by_id.get(dep.as_str()) else {
                continue;
            };
            if std::mem::replace(&mut seen[d], true) {
                continue;
            }
            match nodes[d].status {
                NodeStatus::Failed | NodeStatus::Canceled => out.push(dep.clone()),
                NodeStatus::Blocked => stack.push(d),
                _ => {}
            }
        }
    }
    out.sort();
    out
}
