//! The persisted state of a plan and the journal records ([`StateChange`]) that move it.
//!
//! The engine never mutates a [`PlanRecord`] directly: it produces `StateChange`s, appends them to
//! the [`crate::PlanRepository`] and applies them with [`PlanRecord::apply`]. A store therefore
//! persists O(size of the change) per transition, and replaying the same records on load yields
//! exactly the state the engine had.
//!
//! The record types are here and in `node`; the journal record in `change`; how a change
//! applies in `apply`; status counts in `counts`.

mod apply;
mod change;
mod counts;
mod node;

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{DerivedIds, Millis, NodeId, PlanId};
use crate::plan::{Isolation, PlanSpec};
use crate::state::PlanStatus;

pub use apply::ApplyError;
pub use change::StateChange;
pub use counts::StatusCounts;
pub use node::{
    Attempt, AttemptExtra, AttemptStatus, Heal, NodeExtra, NodeState, PhaseRecord, ToolState,
    Waiting, WaitingFor,
};

/// Current schema version of [`PlanRecord`] and [`StateChange`]; stores persist it.
pub const SCHEMA_VERSION: u32 = 1;

/// A plan: its definition and its execution state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanRecord {
    /// The plan's definition (jobs' specs as they are now, after any replacement). Shared, so
    /// that snapshots and running nodes do not copy a 100k-job definition.
    pub spec: Arc<PlanSpec>,
    /// The plan's execution state: flags, pinned git facts and every node's state.
    pub state: PlanState,
}

/// Execution state of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanState {
    /// The plan's id, unique in its repository.
    pub id: PlanId,
    /// Directory the plan works on: the repository (worktree isolation) or the working
    /// directory (`isolation: "none"`).
    pub repo: PathBuf,
    /// When the plan was created, in milliseconds since the Unix epoch.
    pub created_at: Millis,
    /// When the plan first started, in milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Millis>,
    /// When the plan last reached a terminal status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Millis>,
    /// Being assembled (MCP scaffolding); not runnable.
    #[serde(default)]
    pub scaffolding: bool,
    /// Paused: start nothing new.
    #[serde(default)]
    pub paused: bool,
    /// Canceled: nothing new starts, and the plan is `canceled` while nodes are unfinished.
    #[serde(default)]
    pub canceled: bool,
    /// Archived: the plan is `archived` whatever the status of its nodes.
    #[serde(default)]
    pub archived: bool,
    /// Commit the plan started from (pinned at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// Branch receiving the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_branch: Option<String>,
    /// Snapshot branch the leaves merge into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_branch: Option<String>,
    /// One entry per node, indexed by [`NodeIndex`](crate::ids::NodeIndex).
    pub nodes: Vec<NodeState>,
}

/// The states of `count` nodes of a new plan `plan`: pending, their ids derived from the
/// plan's (see [`DerivedIds`]), or random if it has none.
pub(crate) fn fresh_nodes(plan: &PlanId, count: usize) -> Vec<NodeState> {
    match DerivedIds::of(plan) {
        Some(ids) => (0..count).map(|i| NodeState::new(ids.id(i))).collect(),
        None => (0..count)
            .map(|_| NodeState::new(NodeId::random()))
            .collect(),
    }
}

impl PlanRecord {
    /// A fresh record: every node pending, ids derived from the plan's (see
    /// [`DerivedIds`]).
    ///
    /// `node_count` is the number of graph nodes (jobs plus the snapshot node, if any; see
    /// [`crate::plan::PlanGraph::node_count`]).
    pub fn new(id: PlanId, spec: PlanSpec, repo: PathBuf, node_count: usize, at: Millis) -> Self {
        let nodes = fresh_nodes(&id, node_count);
        Self::with_nodes(id, spec, repo, nodes, at)
    }

    /// [`PlanRecord::new`] with its `nodes` made already (see [`fresh_nodes`]).
    pub(crate) fn with_nodes(
        id: PlanId,
        spec: PlanSpec,
        repo: PathBuf,
        nodes: Vec<NodeState>,
        at: Millis,
    ) -> Self {
        Self::of_shared(id, Arc::new(spec), repo, nodes, at)
    }

    /// [`PlanRecord::with_nodes`] of a spec shared with its caller.
    pub(crate) fn of_shared(
        id: PlanId,
        spec: Arc<PlanSpec>,
        repo: PathBuf,
        nodes: Vec<NodeState>,
        at: Millis,
    ) -> Self {
        PlanRecord {
            state: PlanState {
                id,
                repo,
                created_at: at,
                started_at: None,
                ended_at: None,
                scaffolding: false,
                paused: spec.start_paused,
                canceled: false,
                archived: false,
                base_commit: None,
                target_branch: None,
                snapshot_branch: None,
                nodes,
            },
            spec,
        }
    }

    /// The plan's status, derived from its nodes and flags (SPEC §3).
    pub fn status(&self) -> PlanStatus {
        self.counts().plan_status(&self.state)
    }

    /// Node status counts, with the sub-agents that ended without success settled (see
    /// [`StatusCounts::settled_failed`]).
    pub fn counts(&self) -> StatusCounts {
        let mut c = self.state.counts();
        for (job, node) in self.spec.jobs.iter().zip(&self.state.nodes) {
            c.settle(node.status, job.extra.sub_agent.is_some(), 1);
        }
        c
    }

    /// Whether the plan runs jobs in worktrees.
    pub fn isolation(&self) -> Isolation {
        self.spec.isolation
    }
}

impl PlanState {
    /// Node status counts.
    pub fn counts(&self) -> StatusCounts {
        StatusCounts::of(self.nodes.iter().map(|n| &n.status))
    }

    /// The plan's status, derived from its nodes and flags.
    pub fn status(&self) -> PlanStatus {
        self.counts().plan_status(self)
    }
}
