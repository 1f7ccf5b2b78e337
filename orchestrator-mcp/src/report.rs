//! The JSON documents and short texts the tools answer with.

use std::fmt::Write;

use orchestrator_core::state::PlanRecord;
use serde_json::{json, Value};

/// Label of the injected final node.
pub use orchestrator_core::engine::SNAPSHOT_LABEL;

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

pub use orchestrator_core::report::{job_json, plan_json};

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
