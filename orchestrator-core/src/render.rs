//! The plan's graph as text: Mermaid (for Markdown viewers) and Graphviz DOT.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::engine::node_label;
use crate::plan::PlanGraph;
use crate::state::{NodeStatus, PlanRecord};

/// Mermaid flowchart of a plan, nodes labelled with their name and status, grouped into
/// subgraphs by `group`.
///
/// ```
/// use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
/// use orchestrator_core::state::PlanRecord;
/// let spec = PlanSpec::new("p").isolation(Isolation::None)
///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")))
///     .job(JobSpec::new("bbb", "b", WorkSpec::shell("true")).depends_on(["aaa"]));
/// let graph = PlanGraph::build(&spec).unwrap();
/// let record = PlanRecord::new("id".into(), spec, ".".into(), graph.node_count(), 0);
/// let text = orchestrator_core::render::mermaid(&record, &graph);
/// assert!(text.contains("n0 --> n1"));
/// ```
pub fn mermaid(record: &PlanRecord, graph: &PlanGraph) -> String {
    let mut out = String::from("flowchart TD\n");
    let groups = groups(record, graph);
    for (group, nodes) in &groups {
        if !group.is_empty() {
            let _ = writeln!(
                out,
                "  subgraph {}[\"{}\"]",
                sanitize_id(group),
                escape(group)
            );
        }
        for &n in nodes {
            let status = status_of(record, n);
            let _ = writeln!(
                out,
                "  n{n}[\"{}<br/>{status}\"]:::{status}",
                escape(node_label(record, n))
            );
        }
        if !group.is_empty() {
            out.push_str("  end\n");
        }
    }
    for n in 0..graph.node_count() {
        for d in graph.dependents(n) {
            let _ = writeln!(out, "  n{n} --> n{d}");
        }
    }
    for (status, color) in COLORS {
        let _ = writeln!(out, "  classDef {status} fill:{color}");
    }
    out
}

/// Graphviz DOT of a plan (`dot -Tsvg`), nodes coloured by status, clusters by `group`.
///
/// ```
/// use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
/// use orchestrator_core::state::PlanRecord;
/// let spec = PlanSpec::new("p").isolation(Isolation::None)
///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")));
/// let graph = PlanGraph::build(&spec).unwrap();
/// let record = PlanRecord::new("id".into(), spec, ".".into(), graph.node_count(), 0);
/// assert!(orchestrator_core::render::dot(&record, &graph).starts_with("digraph plan {"));
/// ```
pub fn dot(record: &PlanRecord, graph: &PlanGraph) -> String {
    let mut out = String::from(
        "digraph plan {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\"];\n",
    );
    let groups = groups(record, graph);
    for (i, (group, nodes)) in groups.iter().enumerate() {
        if !group.is_empty() {
            let _ = writeln!(
                out,
                "  subgraph cluster_{i} {{\n    label=\"{}\";",
                escape(group)
            );
        }
        for &n in nodes {
            let status = status_of(record, n);
            let color = COLORS
                .iter()
                .find(|(s, _)| *s == status.as_str())
                .map_or("#ffffff", |c| c.1);
            let _ = writeln!(
                out,
                "  n{n} [label=\"{}\\n{status}\", fillcolor=\"{color}\"];",
                escape(node_label(record, n))
            );
        }
        if !group.is_empty() {
            out.push_str("  }\n");
        }
    }
    for n in 0..graph.node_count() {
        for d in graph.dependents(n) {
            let _ = writeln!(out, "  n{n} -> n{d};");
        }
    }
    out.push_str("}\n");
    out
}

fn status_of(record: &PlanRecord, n: usize) -> NodeStatus {
    record
        .state
        .nodes
        .get(n)
        .map_or(NodeStatus::Pending, |s| s.status)
}

/// Nodes by `group` (`""` for ungrouped), groups sorted by name.
fn groups<'a>(record: &'a PlanRecord, graph: &PlanGraph) -> BTreeMap<&'a str, Vec<usize>> {
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for n in 0..graph.node_count() {
        let group = record.spec.jobs.get(n).and_then(|j| j.group.as_deref());
        groups.entry(group.unwrap_or("")).or_default().push(n);
    }
    groups
}

const COLORS: [(&str, &str); 9] = [
    ("pending", "#eeeeee"),
    ("ready", "#e3f2fd"),
    ("scheduled", "#bbdefb"),
    ("running", "#90caf9"),
    ("succeeded", "#c8e6c9"),
    ("failed", "#ffcdd2"),
    ("blocked", "#ffe0b2"),
    ("canceled", "#e0e0e0"),
    ("completed_split", "#d1c4e9"),
];

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "'")
        .replace(['\n', '\r'], " ")
}

fn sanitize_id(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
