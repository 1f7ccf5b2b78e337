//! Changes of the plan's definition: a journaled edit applied again, and replaced specs.

use std::collections::HashMap;
use std::sync::Arc;

use crate::ids::{NodeId, NodeIndex};
use crate::plan::{PlanEdit, WorkSpec};
use crate::state::NodeStatus;

use super::ApplyError;
use crate::state::record::{NodeState, PlanRecord};

impl PlanRecord {
    /// Applies the edits of a `Reshaped` change again: nodes keep their state by producerId,
    /// new jobs take `new_ids` in order, and `statuses` are set as the edit derived them.
    /// Everything is checked before anything changes.
    pub(super) fn reshape(
        &mut self,
        edits: &[PlanEdit],
        started: bool,
        new_ids: &[NodeId],
        statuses: &[(NodeIndex, NodeStatus)],
    ) -> Result<(), ApplyError> {
        let count = self.state.nodes.len();
        let status_by_producer: HashMap<&str, NodeStatus> = self
            .spec
            .jobs
            .iter()
            .zip(&self.state.nodes)
            .map(|(j, n)| (j.producer_id.as_str(), n.status))
            .collect();
        let spec = crate::plan::apply_edits(
            &self.spec,
            edits,
            |p| status_by_producer.get(p).copied(),
            started,
        )
        .map_err(ApplyError::Edit)?;
        let from = crate::plan::layout(&self.spec, &spec);
        // Checked before anything changes: a change either applies or does nothing.
        if let Some(&Some(o)) = from.iter().find(|f| f.is_some_and(|o| o >= count)) {
            return Err(ApplyError::NoSuchNode { node: o, count });
        }
        let fresh = from.iter().filter(|f| f.is_none()).count();
        if fresh != new_ids.len() {
            return Err(ApplyError::NewIds {
                jobs: fresh,
                ids: new_ids.len(),
            });
        }
        let mut old: Vec<Option<NodeState>> = std::mem::take(&mut self.state.nodes)
            .into_iter()
            .map(Some)
            .collect();
        let mut ids = new_ids.iter();
        let mut nodes: Vec<NodeState> = from
            .iter()
            .map(|f| {
                f.and_then(|o| old[o].take())
                    .or_else(|| ids.next().map(|id| NodeState::new(id.clone())))
                    .unwrap_or_else(|| NodeState::new(NodeId::random()))
            })
            .collect();
        for &(n, status) in statuses {
            if let Some(node) = nodes.get_mut(n) {
                node.status = status;
            }
        }
        self.state.nodes = nodes;
        self.state.ended_at = None;
        self.spec = Arc::new(spec);
        Ok(())
    }

    /// Replaces a user job's work, prechecks or postchecks (those given).
    pub(super) fn replace_specs(
        &mut self,
        node: NodeIndex,
        work: Option<&WorkSpec>,
        prechecks: Option<&WorkSpec>,
        postchecks: Option<&WorkSpec>,
    ) -> Result<(), ApplyError> {
        let count = self.state.nodes.len();
        if node >= self.spec.jobs.len() {
            return Err(ApplyError::NoSuchNode { node, count });
        }
        let job = Arc::make_mut(&mut self.spec)
            .jobs
            .get_mut(node)
            .ok_or(ApplyError::NoSuchNode { node, count })?;
        job.replace_specs(work, prechecks, postchecks);
        Ok(())
    }
}
