//! The plan's graph as text: Mermaid (for Markdown viewers) and Graphviz DOT.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use crate::engine::node_label;
use crate::plan::{group_statuses, GroupStatus, PlanGraph};
use crate::state::{NodeStatus, PlanRecord};

/// Mermaid flowchart of a plan, nodes labelled with their name and status, grouped into
/// nested subgraphs by their `group` path (`backend/api` is `api` inside `backend`), each
/// labelled with its name and derived status (pending, running, succeeded, failed, partial).
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
    let tree = GroupTree::of(record, graph);
    let mut ids = 0;
    let mut classes = Vec::new();
    tree.write(&mut out, 1, &mut |out, event, indent| match event {
        TreeEvent::Open(group) => {
            let id = format!("g{ids}");
            ids += 1;
            let _ = writeln!(
                out,
                "{indent}subgraph {id}[\"{}<br/>{}\"]",
                escape(group.name),
                group.status
            );
            classes.push((id, group.status));
        }
        TreeEvent::Node(n) => {
            let status = status_of(record, n);
            let _ = writeln!(
                out,
                "{indent}n{n}[\"{}<br/>{status}\"]:::{status}",
                escape(node_label(record, n))
            );
        }
        TreeEvent::Close => {
            let _ = writeln!(out, "{indent}end");
        }
    });
    for n in 0..graph.node_count() {
        for d in graph.dependents(n) {
            let _ = writeln!(out, "  n{n} --> n{d}");
        }
    }
    for (status, color) in COLORS {
        let _ = writeln!(out, "  classDef {status} fill:{color}");
    }
    if !classes.is_empty() {
        for (status, color) in GROUP_COLORS {
            let _ = writeln!(
                out,
                "  classDef group_{status} stroke:{color},stroke-width:2px"
            );
        }
        for (id, status) in classes {
            let _ = writeln!(out, "  class {id} group_{status}");
        }
    }
    out
}

/// Graphviz DOT of a plan (`dot -Tsvg`), nodes coloured by status, nested clusters by `group`
/// path, each labelled and bordered by its derived status.
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
    let tree = GroupTree::of(record, graph);
    let mut clusters = 0;
    tree.write(&mut out, 1, &mut |out, event, indent| match event {
        TreeEvent::Open(group) => {
            dot_cluster(out, indent, clusters, &group);
            clusters += 1;
        }
        TreeEvent::Node(n) => dot_node(out, indent, record, n),
        TreeEvent::Close => {
            let _ = writeln!(out, "{indent}}}");
        }
    });
    dot_edges(&mut out, graph);
    out.push_str("}\n");
    out
}

/// Opens DOT cluster number `id` for `group`: its label, bordered by its status colour.
fn dot_cluster(out: &mut String, indent: &str, id: usize, group: &GroupLabel<'_>) {
    let color = GROUP_COLORS
        .iter()
        .find(|(s, _)| *s == group.status.as_str())
        .map_or("#9e9e9e", |c| c.1);
    let _ = writeln!(
        out,
        "{indent}subgraph cluster_{id} {{\n{indent}  label=\"{}\\n{}\";\n\
         {indent}  color=\"{color}\";",
        escape(group.name),
        group.status
    );
}

/// Writes node `n` as a DOT box labelled with its name and status, filled by the status colour.
fn dot_node(out: &mut String, indent: &str, record: &PlanRecord, n: usize) {
    let status = status_of(record, n);
    let color = COLORS
        .iter()
        .find(|(s, _)| *s == status.as_str())
        .map_or("#ffffff", |c| c.1);
    let _ = writeln!(
        out,
        "{indent}n{n} [label=\"{}\\n{status}\", fillcolor=\"{color}\"];",
        escape(node_label(record, n))
    );
}

/// Writes an edge from every node to each of its dependents.
fn dot_edges(out: &mut String, graph: &PlanGraph) {
    for n in 0..graph.node_count() {
        for d in graph.dependents(n) {
            let _ = writeln!(out, "  n{n} -> n{d};");
        }
    }
}

fn status_of(record: &PlanRecord, n: usize) -> NodeStatus {
    record
        .state
        .nodes
        .get(n)
        .map_or(NodeStatus::Pending, |s| s.status)
}

/// The nodes nested by their `group` paths (`backend/api` is `api` inside `backend`), each
/// group with its derived status; nodes without a group at the top. Children sorted by name.
#[derive(Default)]
struct GroupTree<'a> {
    nodes: Vec<usize>,
    children: BTreeMap<&'a str, GroupTree<'a>>,
    /// The group's path (empty at the top), for its status.
    path: &'a str,
    /// The group's derived status (`None` at the top).
    status: Option<GroupStatus>,
}

/// A group as a rendering opens it.
struct GroupLabel<'a> {
    /// The last segment of the path.
    name: &'a str,
    status: GroupStatus,
}

/// What a rendering writes, in order: groups open and close around their nodes.
enum TreeEvent<'a> {
    Open(GroupLabel<'a>),
    Node(usize),
    Close,
}

impl<'a> GroupTree<'a> {
    fn of(record: &'a PlanRecord, graph: &PlanGraph) -> Self {
        let group_of = |n: usize| {
            record
                .spec
                .jobs
                .get(n)
                .and_then(|j| j.extra.group.as_deref())
                .filter(|g| !g.is_empty())
        };
        let mut top = GroupTree::default();
        for n in 0..graph.node_count() {
            let Some(group) = group_of(n) else {
                top.nodes.push(n);
                continue;
            };
            let mut at = &mut top;
            let mut end = 0;
            for segment in group.split('/') {
                end += segment.len();
                at = at.children.entry(segment).or_default();
                at.path = &group[..end];
                end += 1;
            }
            at.nodes.push(n);
        }
        let statuses: HashMap<String, GroupStatus> =
            group_statuses((0..graph.node_count()).map(|n| (group_of(n), status_of(record, n))))
                .into_iter()
                .collect();
        top.set_statuses(&statuses);
        top
    }

    fn set_statuses(&mut self, statuses: &HashMap<String, GroupStatus>) {
        self.status = statuses.get(self.path).copied();
        for child in self.children.values_mut() {
            child.set_statuses(statuses);
        }
    }

    /// Calls `emit` for this level's nodes and then each child group, depth first, with the
    /// indentation of the level.
    fn write(
        &self,
        out: &mut String,
        depth: usize,
        emit: &mut dyn FnMut(&mut String, TreeEvent<'_>, &str),
    ) {
        let indent = "  ".repeat(depth);
        for &n in &self.nodes {
            emit(out, TreeEvent::Node(n), &indent);
        }
        for (name, child) in &self.children {
            let label = GroupLabel {
                name,
                status: child.status.unwrap_or(GroupStatus::Pending),
            };
            emit(out, TreeEvent::Open(label), &indent);
            child.write(out, depth + 1, emit);
            emit(out, TreeEvent::Close, &indent);
        }
    }
}

/// Border colours of group boxes by their derived status.
const GROUP_COLORS: [(&str, &str); 5] = [
    ("pending", "#9e9e9e"),
    ("running", "#1e88e5"),
    ("succeeded", "#43a047"),
    ("failed", "#e53935"),
    ("partial", "#fb8c00"),
];

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{GroupSpec, Isolation, JobSpec, PlanSpec, WorkSpec};

    /// A plan with an ungrouped job (or one in the flat group `top_group`) and two groups in
    /// `phase1`, one job of which succeeded and one failed.
    fn record(top_group: Option<&str>) -> (PlanRecord, PlanGraph) {
        let job = |id: &str| JobSpec::new(id, id, WorkSpec::shell("true"));
        let mut top = job("top");
        top.extra.make_mut().group = top_group.map(str::to_owned);
        let mut spec = PlanSpec::new("p")
            .isolation(Isolation::None)
            .job(top)
            .group(
                GroupSpec::new("phase1")
                    .group(GroupSpec::new("collection").job(job("count")))
                    .group(GroupSpec::new("analysis").job(job("count"))),
            );
        spec.flatten_groups().expect("valid plan");
        let graph = PlanGraph::build(&spec).expect("valid plan");
        let mut record = PlanRecord::new("id".into(), spec, ".".into(), graph.node_count(), 0);
        record.state.nodes[1].status = NodeStatus::Succeeded;
        record.state.nodes[2].status = NodeStatus::Failed;
        (record, graph)
    }

    #[test]
    fn mermaid_nests_subgraphs_with_group_statuses() {
        let (record, graph) = record(None);
        let text = mermaid(&record, &graph);
        let lines: Vec<&str> = text.lines().collect();
        let at = |needle: &str| {
            lines
                .iter()
                .position(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("{needle} not in\n{text}"))
        };
        let phase1 = at("subgraph g0[\"phase1<br/>partial\"]");
        let analysis = at("subgraph g1[\"analysis<br/>failed\"]");
        let collection = at("subgraph g2[\"collection<br/>succeeded\"]");
        assert!(lines[phase1].starts_with("  subgraph"), "{text}");
        assert!(lines[analysis].starts_with("    subgraph"), "{text}");
        assert!(phase1 < analysis && analysis < collection, "{text}");
        assert!(lines[at("n2[")].starts_with("      n2["), "{text}");
        assert!(text.contains("class g0 group_partial"), "{text}");
        // The ungrouped job sits at the top, before any group.
        assert!(at("n0[") < phase1, "{text}");
    }

    #[test]
    fn dot_nests_clusters_and_flat_group_paths_nest_the_same_way() {
        // A flat `group` path written by hand nests like the flattened ones.
        let (record, graph) = record(Some("phase1"));
        let text = dot(&record, &graph);
        assert!(
            text.contains("  subgraph cluster_0 {\n    label=\"phase1\\nrunning\";"),
            "{text}"
        );
        assert!(
            text.contains("    subgraph cluster_1 {\n      label=\"analysis\\nfailed\";"),
            "{text}"
        );
        assert!(text.contains("    n0 [label="), "{text}");
        assert_eq!(text.matches("subgraph").count(), 3, "{text}");
    }
}
