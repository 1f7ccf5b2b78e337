//! [`PlanView`]: a plan as hosts show it — its record, its graph (built when first needed),
//! job references resolved to nodes, node labels, the snapshot-validation node told apart, and
//! the renderings (status JSON of SPEC §5, Mermaid, DOT, a Mermaid gantt timeline).
//!
//! The CLI and the MCP server only parse arguments and format what a view answers, so a job
//! reference, a label or a rendering means the same in both.

mod timeline;

use std::ops::Deref;
use std::sync::OnceLock;

use serde_json::Value;

use crate::engine::SNAPSHOT_LABEL;
use crate::error::{Error, Result};
use crate::ids::{NodeIndex, PlanId};
use crate::plan::{JobSpec, PlanGraph, ValidationErrors, SNAPSHOT_PRODUCER_ID};
use crate::repository::PlanListing;
use crate::state::{NodeState, PlanRecord};

pub use timeline::{gantt, timeline, TimelineEntry};

/// Shortest node-id prefix accepted as a job reference: the `<id8>` of worktree folder names
/// (`.worktrees/<id8>`), so that a shorter string that happens to start an id is not taken
/// for one.
pub const MIN_NODE_ID_PREFIX: usize = 8;

/// A plan's record with the lookups and renderings hosts need.
///
/// It dereferences to its [`PlanRecord`]: a view *is* the record, plus answers computed from
/// it, so code reading `view.spec` or `view.state` needs no accessor.
///
/// ```
/// use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
/// use orchestrator_core::state::PlanRecord;
/// use orchestrator_core::view::PlanView;
/// let spec = PlanSpec::new("p")
///     .job(JobSpec::new("build", "compile", WorkSpec::shell("true")))
///     .job(JobSpec::new("test", "run tests", WorkSpec::shell("true")).depends_on(["build"]));
/// let nodes = PlanGraph::build(&spec).unwrap().node_count();
/// let view = PlanView::new(PlanRecord::new("id".into(), spec, ".".into(), nodes, 0));
/// assert_eq!(view.resolve("test").unwrap(), 1);
/// assert_eq!(view.resolve("snapshot-validation").unwrap(), 2);
/// assert!(view.is_snapshot(2));
/// assert_eq!(view.label(2), "snapshot-validation");
/// assert!(view.resolve("nope").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct PlanView {
    record: PlanRecord,
    /// Built on first use: status documents and job lookups never need it, and building the
    /// graph of a 100k-job plan costs more than they do.
    graph: OnceLock<std::result::Result<PlanGraph, ValidationErrors>>,
}

impl Deref for PlanView {
    type Target = PlanRecord;

    fn deref(&self) -> &PlanRecord {
        &self.record
    }
}

impl From<PlanRecord> for PlanView {
    fn from(record: PlanRecord) -> Self {
        PlanView::new(record)
    }
}

impl PlanView {
    /// A view of `record`.
    pub fn new(record: PlanRecord) -> Self {
        PlanView {
            record,
            graph: OnceLock::new(),
        }
    }

    /// A view of `record` whose graph is already known (saves building it again).
    pub fn with_graph(record: PlanRecord, graph: PlanGraph) -> Self {
        PlanView {
            record,
            graph: OnceLock::from(Ok(graph)),
        }
    }

    /// The plan's id.
    pub fn id(&self) -> &PlanId {
        &self.record.state.id
    }

    /// The record.
    pub fn record(&self) -> &PlanRecord {
        &self.record
    }

    /// The record, giving up the view.
    pub fn into_record(self) -> PlanRecord {
        self.record
    }

    /// The plan's dependency graph, rebuilt from its stored definition on first use.
    ///
    /// # Errors
    /// [`Error::DamagedGraph`] when the stored definition no longer forms a valid graph.
    pub fn graph(&self) -> Result<&PlanGraph> {
        self.graph
            .get_or_init(|| PlanGraph::build(&self.record.spec))
            .as_ref()
            .map_err(|source| Error::DamagedGraph {
                plan: self.id().clone(),
                source: source.clone(),
            })
    }

    /// Resolves a job reference to its node (see [`resolve`] for the accepted forms).
    ///
    /// # Errors
    /// [`Error::JobNotFound`] when it names no node, [`Error::AmbiguousJob`] when it names
    /// several.
    pub fn resolve(&self, reference: &str) -> Result<NodeIndex> {
        let graph = self.graph.get().and_then(|g| g.as_ref().ok());
        resolve(&self.record, graph, reference)
    }

    /// The user job of node `n`, `None` for the snapshot-validation node (or no node).
    pub fn job(&self, n: NodeIndex) -> Option<&JobSpec> {
        self.record.spec.jobs.get(n)
    }

    /// The state of node `n`.
    pub fn node(&self, n: NodeIndex) -> Option<&NodeState> {
        self.record.state.nodes.get(n)
    }

    /// Number of nodes (user jobs and the snapshot-validation node, if any).
    pub fn node_count(&self) -> usize {
        self.record.state.nodes.len()
    }

    /// The nodes of user jobs, in plan order (the snapshot-validation node left out).
    pub fn job_nodes(&self) -> std::ops::Range<NodeIndex> {
        0..self.record.spec.jobs.len().min(self.node_count())
    }

    /// The snapshot-validation node, when the plan has one (worktree isolation).
    pub fn snapshot(&self) -> Option<NodeIndex> {
        snapshot_of(&self.record)
    }

    /// Whether node `n` is the snapshot-validation node.
    pub fn is_snapshot(&self, n: NodeIndex) -> bool {
        self.snapshot() == Some(n)
    }

    /// The label of node `n` in listings and references: its producerId, or
    /// `snapshot-validation`.
    pub fn label(&self, n: NodeIndex) -> &str {
        label_of(&self.record, n)
    }

    /// The label of every node, by index.
    pub fn labels(&self) -> Vec<String> {
        labels_of(&self.record)
    }

    /// The display name of node `n`: the job's name (its producerId when it has none), or
    /// `snapshot-validation`.
    pub fn display_name(&self, n: NodeIndex) -> &str {
        crate::engine::node_label(&self.record, n)
    }

    /// The status document of SPEC §5 ([`crate::report::plan_json`]) with the plan's
    /// `timeline` (every phase of every attempt, see [`timeline`]).
    pub fn to_json(&self) -> Value {
        status_json(&self.record)
    }

    /// One job's document ([`crate::report::job_json`]).
    pub fn job_json(&self, n: NodeIndex) -> Value {
        crate::report::job_json(&self.record, n)
    }

    /// The plan rendered in `format`.
    ///
    /// # Errors
    /// [`Error::DamagedGraph`] for the graph formats when the stored graph is damaged.
    ///
    /// ```
    /// use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
    /// use orchestrator_core::state::PlanRecord;
    /// use orchestrator_core::view::{GraphFormat, PlanView};
    /// let spec = PlanSpec::new("p").isolation(Isolation::None)
    ///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")));
    /// let view = PlanView::new(PlanRecord::new("id".into(), spec, ".".into(), 1, 0));
    /// assert!(view.render(GraphFormat::Dot).unwrap().starts_with("digraph"));
    /// assert!(view.render(GraphFormat::Gantt).unwrap().starts_with("gantt"));
    /// ```
    pub fn render(&self, format: GraphFormat) -> Result<String> {
        Ok(match format {
            GraphFormat::Mermaid => crate::render::mermaid(&self.record, self.graph()?),
            GraphFormat::Dot => crate::render::dot(&self.record, self.graph()?),
            GraphFormat::Gantt => gantt(&self.record, crate::ids::now_millis()),
        })
    }
}

/// The renderings of [`PlanView::render`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum GraphFormat {
    /// Mermaid flowchart of the jobs and their dependencies.
    #[default]
    Mermaid,
    /// Graphviz DOT of the same.
    Dot,
    /// Mermaid gantt chart of the phases run, one bar per phase of each attempt.
    Gantt,
}

impl GraphFormat {
    /// Every format, in the order help texts list them.
    pub const ALL: [GraphFormat; 3] = [GraphFormat::Mermaid, GraphFormat::Dot, GraphFormat::Gantt];

    /// The format's name: `mermaid`, `dot` or `gantt`.
    pub fn as_str(self) -> &'static str {
        match self {
            GraphFormat::Mermaid => "mermaid",
            GraphFormat::Dot => "dot",
            GraphFormat::Gantt => "gantt",
        }
    }

    /// The format named `name` ([`GraphFormat::as_str`]).
    ///
    /// ```
    /// use orchestrator_core::view::GraphFormat;
    /// assert_eq!(GraphFormat::parse("gantt"), Some(GraphFormat::Gantt));
    /// assert_eq!(GraphFormat::parse("svg"), None);
    /// ```
    pub fn parse(name: &str) -> Option<GraphFormat> {
        GraphFormat::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

/// The snapshot-validation node of `record`, when it has one: the node after the user jobs
/// (SPEC §3: it is injected last, with worktree isolation).
pub fn snapshot_of(record: &PlanRecord) -> Option<NodeIndex> {
    let n = record.spec.jobs.len();
    (n < record.state.nodes.len()).then_some(n)
}

/// The label of node `n` of `record`: its producerId, or `snapshot-validation`.
pub fn label_of(record: &PlanRecord, n: NodeIndex) -> &str {
    record
        .spec
        .jobs
        .get(n)
        .map_or(SNAPSHOT_LABEL, |j| j.producer_id.as_str())
}

/// The status document of `record` ([`PlanView::to_json`]): SPEC §5's shape from
/// [`crate::report::plan_json`], plus `timeline`.
pub fn status_json(record: &PlanRecord) -> Value {
    let mut doc = crate::report::plan_json(record);
    doc["timeline"] = serde_json::to_value(timeline(record)).unwrap_or(Value::Null);
    doc
}

/// The label ([`label_of`]) of every node of `record`, by index.
pub fn labels_of(record: &PlanRecord) -> Vec<String> {
    (0..record.state.nodes.len())
        .map(|n| label_of(record, n).to_owned())
        .collect()
}

/// Resolves a job reference of `record` to its node. Tried in this order:
///
/// 1. a producerId (qualified ones with `/` included, matched whole);
/// 2. `snapshot-validation` (or its internal producerId) for the snapshot-validation node;
/// 3. a node id;
/// 4. a job's display name, when exactly one job has it;
/// 5. a prefix of a node id of at least [`MIN_NODE_ID_PREFIX`] characters (the `<id8>` of
///    worktree folder names), when exactly one node's id starts with it.
///
/// `graph`, when given, answers step 1 from its index instead of a scan.
///
/// # Errors
/// [`Error::JobNotFound`] when nothing matches; [`Error::AmbiguousJob`] when step 4 or 5
/// matches several nodes.
pub fn resolve(
    record: &PlanRecord,
    graph: Option<&PlanGraph>,
    reference: &str,
) -> Result<NodeIndex> {
    let jobs = &record.spec.jobs;
    let by_producer = match graph {
        Some(g) => g.index_of(reference),
        // The first job with it, as the graph's index keeps.
        None => jobs.iter().position(|j| j.producer_id == reference),
    };
    if let Some(n) = by_producer {
        return Ok(n);
    }
    if reference == SNAPSHOT_PRODUCER_ID || reference == SNAPSHOT_LABEL {
        if let Some(n) = snapshot_of(record) {
            return Ok(n);
        }
    }
    let nodes = &record.state.nodes;
    if let Some(n) = nodes.iter().position(|n| n.id.as_str() == reference) {
        return Ok(n);
    }
    let ambiguous = |by_name: bool, found: &[NodeIndex]| Error::AmbiguousJob {
        plan: record.state.id.clone(),
        reference: reference.to_owned(),
        by_name,
        matches: found
            .iter()
            .map(|&n| label_of(record, n).to_owned())
            .collect(),
    };
    let by_name: Vec<NodeIndex> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.name.as_deref() == Some(reference))
        .map(|(i, _)| i)
        .collect();
    match by_name.as_slice() {
        [n] => return Ok(*n),
        [] => {}
        many => return Err(ambiguous(true, many)),
    }
    if reference.len() >= MIN_NODE_ID_PREFIX {
        let by_prefix: Vec<NodeIndex> = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.id.as_str().starts_with(reference))
            .map(|(i, _)| i)
            .collect();
        match by_prefix.as_slice() {
            [n] => return Ok(*n),
            [] => {}
            many => return Err(ambiguous(false, many)),
        }
    }
    Err(Error::JobNotFound {
        plan: record.state.id.clone(),
        reference: reference.to_owned(),
    })
}

/// Finds a stored plan by its id or a unique prefix of it, among `listing`'s plans (damaged
/// ones included, so that they can still be named to be deleted or inspected).
///
/// # Errors
/// [`Error::PlanNotFound`] when no id is or starts with `reference` (or it is empty);
/// [`Error::AmbiguousPlan`] when several start with it.
///
/// ```
/// use orchestrator_core::plan::{Isolation, PlanSpec};
/// use orchestrator_core::repository::{PlanListing, PlanSummary};
/// use orchestrator_core::state::PlanRecord;
/// use orchestrator_core::Error;
/// let summary = |id: &str| {
///     let spec = PlanSpec::new("p").isolation(Isolation::None);
///     PlanSummary::of(&PlanRecord::new(id.into(), spec, ".".into(), 0, 0))
/// };
/// let mut listing = PlanListing::default();
/// listing.plans = vec![summary("ab12"), summary("ab34")];
/// assert_eq!(orchestrator_core::view::find_plan(&listing, "ab3").unwrap().as_str(), "ab34");
/// assert!(matches!(orchestrator_core::view::find_plan(&listing, "ab"), Err(Error::AmbiguousPlan { .. })));
/// assert!(matches!(orchestrator_core::view::find_plan(&listing, "zz"), Err(Error::PlanNotFound(_))));
/// ```
pub fn find_plan(listing: &PlanListing, reference: &str) -> Result<PlanId> {
    let ids = listing
        .plans
        .iter()
        .map(|p| &p.plan_id)
        .chain(listing.damaged.iter().map(|(id, _)| id));
    let mut found: Vec<PlanId> = Vec::new();
    for id in ids {
        if id.as_str() == reference {
            return Ok(id.clone());
        }
        if !reference.is_empty() && id.as_str().starts_with(reference) && !found.contains(id) {
            found.push(id.clone());
        }
    }
    match found.len() {
        1 => Ok(found.swap_remove(0)),
        0 => Err(Error::PlanNotFound(PlanId::from(reference))),
        _ => Err(Error::AmbiguousPlan {
            reference: reference.to_owned(),
            matches: found,
        }),
    }
}

#[cfg(test)]
mod tests;
