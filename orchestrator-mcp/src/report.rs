//! The JSON documents and short texts the tools answer with.

use std::fmt::Write;

use orchestrator_core::state::{NodeState, PlanRecord};
use serde_json::{json, Value};

/// Label of the injected final node.
pub const SNAPSHOT_LABEL: &str = "snapshot-validation";

/// The producerId of node `n` (or `snapshot-validation`).
pub fn label(record: &PlanRecord, n: usize) -> String {
    record
        .spec
        .jobs
        .get(n)
        .map_or_else(|| SNAPSHOT_LABEL.to_owned(), |j| j.producer_id.clone())
}

/// A job reference as the engine reads it: `snapshot-validation` names the injected node
/// unless a job of the plan is called so.
pub fn job_ref(record: &PlanRecord, job: &str) -> String {
    let taken = record
        .spec
        .jobs
        .iter()
        .any(|j| j.producer_id == job || j.name.as_deref() == Some(job));
    if job == SNAPSHOT_LABEL && !taken {
        orchestrator_core::plan::SNAPSHOT_PRODUCER_ID.to_owned()
    } else {
        job.to_owned()
    }
}

fn node_json(node: &NodeState) -> Value {
    let last = node.last_attempt();
    json!({
        "jobId": node.id,
        "nodeId": node.id,
        "status": node.status.as_str(),
        "attempts": node.attempts.len(),
        "commit": node.commit,
        "error": node.error,
        "failedPhase": last.and_then(|a| a.failed_phase),
        "failureReason": last.and_then(|a| a.failure_reason),
        "worktree": node.worktree,
    })
}

fn job_json(record: &PlanRecord, n: usize) -> Value {
    let node = &record.state.nodes[n];
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
        }
        None => {
            doc["producerId"] = json!(SNAPSHOT_LABEL);
            doc["name"] = json!(SNAPSHOT_LABEL);
        }
    }
    doc
}

/// A plan's status document: `planId, name, status, targetBranch, jobs[], counts ...`.
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
        "baseCommit": s.base_commit,
        "snapshotBranch": s.snapshot_branch,
        "isolation": record.spec.isolation,
        "createdAt": s.created_at,
        "startedAt": s.started_at,
        "endedAt": s.ended_at,
        "jobs": jobs,
        "snapshotValidation": snapshot,
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

/// One job in detail: spec, state and attempts.
pub fn job_detail(record: &PlanRecord, n: usize) -> Value {
    let mut doc = job_json(record, n);
    doc["planId"] = json!(record.state.id);
    if let Some(job) = record.spec.jobs.get(n) {
        doc["spec"] = serde_json::to_value(job).unwrap_or(Value::Null);
    }
    doc["attemptHistory"] =
        serde_json::to_value(&record.state.nodes[n].attempts).unwrap_or(Value::Null);
    doc
}

/// A plan's status in a few lines.
pub fn plan_text(record: &PlanRecord) -> String {
    let s = &record.state;
    let c = s.counts();
    let mut out = format!(
        "plan {} ({}): {}\n{} jobs: {} succeeded, {} failed, {} blocked, {} canceled, {} running, {} waiting\n",
        record.spec.name,
        s.id,
        record.status(),
        s.nodes.len(),
        c.succeeded,
        c.failed,
        c.blocked,
        c.canceled,
        c.active,
        c.pending + c.ready
    );
    for (n, node) in s.nodes.iter().enumerate() {
        if n >= 50 {
            let _ = writeln!(out, "  ... {} more", s.nodes.len() - n);
            break;
        }
        let error = node
            .error
            .as_deref()
            .and_then(|e| e.lines().next())
            .map(|e| format!("  {e}"))
            .unwrap_or_default();
        let _ = writeln!(out, "  {}  {}{error}", label(record, n), node.status);
    }
    out
}
