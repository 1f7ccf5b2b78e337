//! The JSON documents and short texts the tools answer with.

use std::fmt::Write;

use orchestrator_core::state::PlanRecord;
use orchestrator_core::view::{label_of, PlanView};
use serde_json::{json, Value};

pub use orchestrator_core::report::plan_json;

/// One job in detail: spec, state and attempts.
pub fn job_detail(view: &PlanView, n: usize) -> Value {
    let mut doc = view.job_json(n);
    doc["planId"] = json!(view.id());
    if let Some(job) = view.job(n) {
        doc["spec"] = serde_json::to_value(job).unwrap_or(Value::Null);
    }
    doc["attemptHistory"] = view
        .node(n)
        .and_then(|node| serde_json::to_value(&node.attempts).ok())
        .unwrap_or(Value::Null);
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
            .extra
            .error
            .as_deref()
            .and_then(|e| e.lines().next())
            .map(|e| format!("  {e}"))
            .unwrap_or_default();
        let _ = writeln!(out, "  {}  {}{error}", label_of(record, n), node.status);
    }
    out
}
