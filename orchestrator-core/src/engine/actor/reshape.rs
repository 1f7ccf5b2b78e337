//! Editing a plan the actor owns: scaffolding, reshaping a live plan, finalizing.
//!
//! A reshape rebuilds the graph and re-indexes the nodes. Jobs in flight keep running: their
//! progress messages carry the layout generation they were launched in, and the actor maps
//! their node indices forward through the re-indexings since (see [`PlanActor::translate`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use tracing::Instrument;

use crate::error::StateProblem;

use super::PlanActor;
use crate::engine::queue::ReadyQueue;
use crate::error::{Error, Result};
use crate::ids::NodeIndex;
use crate::plan::{
    apply_edits, layout, validate, PlanEdit, PlanGraph, PlanSpec, ValidationContext,
};
use crate::state::{NodeStatus, Phase, PlanStatus, StateChange};

/// Whether a node's work is under way or done, so its commit is (or will be) final.
fn started(status: NodeStatus) -> bool {
    matches!(
        status,
        NodeStatus::Scheduled
            | NodeStatus::Running
            | NodeStatus::CompletedSplit
            | NodeStatus::Succeeded
    )
}

impl PlanActor {
    /// Applies `edits` (see [`crate::plan::apply_edits`] for what each job status allows),
    /// validates the result like a new plan, and re-derives the status of every job that has
    /// not started.
    pub(super) fn edit(&mut self, edits: &[PlanEdit]) -> Result<()> {
        // Changes recorded earlier in this turn name nodes by their current indices: hand them
        // (and their events) over before the indices change.
        self.flush();
        self.check_editable()?;
        let old_graph = self.machine.graph().clone();
        let was_started = self.machine.record().state.started_at.is_some();
        let (spec, graph) = self.edited_spec(edits, was_started)?;
        let from = layout(&self.machine.record().spec, &spec);
        self.check_no_started_leaf(&old_graph, &graph, &spec, &from)?;
        let dropped = self.dropped_worktrees(&from);
        let moved = from
            .iter()
            .enumerate()
            .any(|(i, f)| f.is_some_and(|o| o != i && self.running[o].is_some()));
        let old_len = self.machine.record().state.nodes.len();

        self.machine
            .reshape(
                edits.to_vec(),
                was_started,
                Arc::new(graph),
                &from,
                self.clock,
            )
            .map_err(|e| self.transition_error(e))?;
        self.carry_running(&from, moved, old_len);
        self.spec = self.machine.record().spec.clone();
        self.max_parallel = super::max_parallel_of(&self.spec);
        self.rewind_changed_specs(edits)?;
        self.refill_queue();
        self.remove_worktrees(dropped);
        Ok(())
    }

    /// Applies a composite job's checked sub-jobs edit (see [`super::composite`]). Unlike
    /// [`PlanActor::edit`] it does not hand this turn's changes over first: sub-jobs are added
    /// after every job, so no job's index changes, and the completion that caused the edit
    /// goes to the journal in the same batch.
    pub(super) fn add_sub_jobs(
        &mut self,
        edit: super::composite::SubJobEdit,
    ) -> std::result::Result<(), crate::state::ApplyError> {
        let from = layout(&self.machine.record().spec, &edit.spec);
        let moved = from
            .iter()
            .enumerate()
            .any(|(i, f)| f.is_some_and(|o| o != i && self.running[o].is_some()));
        let old_len = self.machine.record().state.nodes.len();
        let was_started = self.machine.record().state.started_at.is_some();
        self.machine.reshape(
            vec![edit.edit],
            was_started,
            Arc::new(edit.graph),
            &from,
            self.clock,
        )?;
        self.carry_running(&from, moved, old_len);
        self.spec = self.machine.record().spec.clone();
        self.refill_queue();
        Ok(())
    }

    /// Refuses edits to a plan that is over, or already delivering its result.
    fn check_editable(&self) -> Result<()> {
        let record = self.machine.record();
        let state = &record.state;
        let status = record.status();
        if state.archived || state.canceled || status == PlanStatus::Succeeded {
            return Err(self.invalid(StateProblem::Unchangeable { status }));
        }
        if let Some(s) = self.machine.graph().snapshot() {
            if started(state.nodes[s].status) {
                return Err(self.invalid(StateProblem::Delivering));
            }
        }
        Ok(())
    }

    /// The spec with `edits` applied, and its graph once it validates like a new plan.
    pub(super) fn edited_spec(
        &self,
        edits: &[PlanEdit],
        was_started: bool,
    ) -> Result<(PlanSpec, PlanGraph)> {
        let record = self.machine.record();
        let state = &record.state;
        let index: HashMap<&str, NodeIndex> = record
            .spec
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.producer_id.as_str(), i))
            .collect();
        let spec = apply_edits(
            &record.spec,
            edits,
            |p| index.get(p).map(|&i| state.nodes[i].status),
            was_started,
        )
        .map_err(|source| Error::Edit {
            plan: self.id.clone(),
            source,
        })?;
        let graph = validate(
            &spec,
            ValidationContext {
                repo: Some(&state.repo),
                scaffolding: state.scaffolding,
            },
        )?;
        Ok((spec, graph))
    }

    /// A job that merges into the snapshot only as a leaf must not become one after its
    /// pipeline decided to skip that merge. `from` is the new layout's origin in the old one.
    fn check_no_started_leaf(
        &self,
        old_graph: &PlanGraph,
        graph: &PlanGraph,
        spec: &PlanSpec,
        from: &[Option<NodeIndex>],
    ) -> Result<()> {
        let state = &self.machine.record().state;
        for (i, f) in from.iter().enumerate() {
            let Some(o) = *f else { continue };
            if old_graph.snapshot().is_none() {
                break;
            }
            if !old_graph.is_snapshot(o)
                && started(state.nodes[o].status)
                && graph.is_user_leaf(i)
                && !old_graph.is_user_leaf(o)
            {
                return Err(self.invalid(StateProblem::WouldBecomeLeaf {
                    job: spec.jobs[i].producer_id.clone(),
                    status: state.nodes[o].status,
                }));
            }
        }
        Ok(())
    }

    /// The worktrees of the nodes the new layout `from` no longer has.
    fn dropped_worktrees(&self, from: &[Option<NodeIndex>]) -> Vec<PathBuf> {
        let state = &self.machine.record().state;
        let mut kept = vec![false; state.nodes.len()];
        for &o in from.iter().flatten() {
            kept[o] = true;
        }
        state
            .nodes
            .iter()
            .zip(&kept)
            .filter(|(_, &k)| !k)
            .filter_map(|(n, _)| n.extra.worktree.clone())
            .collect()
    }

    /// Moves the running tasks to their nodes' new indices; when one `moved`, records the
    /// re-indexing from the `old_len` nodes, so that its progress messages can be translated.
    fn carry_running(&mut self, from: &[Option<NodeIndex>], moved: bool, old_len: usize) {
        self.running = from
            .iter()
            .map(|f| f.and_then(|o| self.running[o].take()))
            .collect();
        if moved {
            let mut map = vec![None; old_len];
            for (i, &f) in from.iter().enumerate() {
                if let Some(o) = f {
                    map[o] = Some(i);
                }
            }
            self.remaps.push(map);
        }
    }

    /// Rebuilds the ready queue and the timers from the reshaped graph.
    fn refill_queue(&mut self) {
        self.timers = super::waiting::Timers::of(self.machine.record());
        self.holds = super::waiting::plan_holds(&self.spec);
        self.queue = ReadyQueue::default();
        let graph = self.machine.graph().clone();
        for n in self.machine.ready_nodes() {
            self.queue.push(&graph, n);
        }
        // Composite jobs decided done and not yet started on their merge.
        for &p in self.composite_done.keys() {
            if self.running[p].is_none() {
                self.queue.push(&graph, p);
            }
        }
    }

    /// A job whose work or checks changed resumes no later than the first changed phase: a
    /// failed job's next retry, and a job stopped mid-attempt (paused, crashed) when it runs.
    fn rewind_changed_specs(&mut self, edits: &[PlanEdit]) -> Result<()> {
        if !edits
            .iter()
            .any(|e| matches!(e, PlanEdit::UpdateJob { .. }))
        {
            return Ok(());
        }
        let spec = self.spec.clone();
        let index: HashMap<&str, NodeIndex> = spec
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.producer_id.as_str(), i))
            .collect();
        for edit in edits {
            let PlanEdit::UpdateJob { job, update } = edit else {
                continue;
            };
            let earliest = if update.prechecks.is_some() {
                Phase::Prechecks
            } else if update.work.is_some() || update.instructions.is_some() || update.env.is_some()
            {
                Phase::Work
            } else if update.postchecks.is_some() {
                Phase::Postchecks
            } else {
                continue;
            };
            let Some(&n) = index.get(job.as_str()) else {
                continue;
            };
            let node = &self.machine.record().state.nodes[n];
            let current = match node.status {
                NodeStatus::Failed => node
                    .extra
                    .resume_from
                    .or_else(|| self.machine.resume_phase_after_failure(n)),
                NodeStatus::Pending | NodeStatus::Ready | NodeStatus::Blocked => {
                    node.extra.resume_from
                }
                _ => None,
            };
            if current.is_some_and(|c| earliest < c) {
                self.machine
                    .record_change(StateChange::RetryRequested {
                        node: n,
                        resume_from: Some(earliest),
                        anew: false,
                    })
                    .map_err(|e| self.transition_error(e))?;
            }
        }
        Ok(())
    }

    /// Ends scaffolding: the plan must now be valid as a whole.
    pub(super) fn finalize(&mut self) -> Result<()> {
        let record = self.machine.record();
        if !record.state.scaffolding {
            return Err(self.invalid(StateProblem::NotScaffolding));
        }
        validate(
            &record.spec,
            ValidationContext {
                repo: Some(&record.state.repo),
                scaffolding: false,
            },
        )?;
        self.machine
            .record_change(StateChange::Finalized { at: self.clock })
            .map_err(|e| self.transition_error(e))
    }

    /// The index node `n` of layout generation `gen` has now.
    pub(super) fn translate(&self, gen: usize, n: NodeIndex) -> Option<NodeIndex> {
        self.remaps
            .get(gen..)?
            .iter()
            .try_fold(n, |n, map| map.get(n).copied().flatten())
    }

    /// Re-indexes a node task's progress from its generation to the current one.
    pub(super) fn translate_changes(&self, gen: usize, changes: &mut Vec<StateChange>) {
        if gen == self.remaps.len() {
            return;
        }
        changes.retain_mut(|c| match c.node_mut() {
            Some(n) => match self.translate(gen, *n) {
                Some(m) => {
                    *n = m;
                    true
                }
                None => false,
            },
            None => true,
        });
    }

    /// Removes worktrees of jobs that no longer exist, aside from the actor's turn.
    fn remove_worktrees(&mut self, paths: Vec<PathBuf>) {
        let Some(git) = self.ctx.git.clone() else {
            return;
        };
        let repo = self.machine.record().state.repo.clone();
        for path in paths {
            let (git, repo) = (git.clone(), repo.clone());
            self.cleanups.spawn(
                async move {
                    if let Err(e) = git.remove_worktree(&repo, &path).await {
                        tracing::warn!(path = %path.display(), error = %e, "could not remove worktree");
                    }
                }
                .in_current_span(),
            );
        }
    }
}
