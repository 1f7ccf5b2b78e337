//! Composite jobs (SPEC §12, [`crate::composite`]): a job whose run left a split manifest
//! becomes `completed_split` and gets its sub-jobs in the same journal batch; when they have
//! all ended its controller is asked again, and the job goes on (merging their commits into
//! its own), gets more sub-jobs, or fails.

use super::*;
use crate::composite::{spawn_problem, ChildFacts, CompositeFacts, Decision};
use crate::plan::{JobSpec, PlanEdit};

impl PlanActor {
    /// Running node `n`'s run committed and left `manifest`: asks the `split` controller and
    /// applies its answer (sub-jobs, or failure with the reason; never half of it).
    pub(super) fn split(
        &mut self,
        n: NodeIndex,
        manifest: &str,
    ) -> std::result::Result<(), ApplyError> {
        match self.decide(n, Some(manifest)) {
            Some(Decision::Spawn(jobs)) => match self.sub_job_edit(n, jobs) {
                Ok(edit) => {
                    self.machine.complete_split(n, self.clock)?;
                    self.add_sub_jobs(edit)
                }
                Err(reason) => self.fail_split(n, reason),
            },
            Some(Decision::Failed { reason }) => self.fail_split(n, reason),
            Some(_) => self.fail_split(n, "the split controller made no sub-jobs".to_owned()),
            None => self.fail_split(n, "no controller is registered for `split`".to_owned()),
        }
    }

    /// Fails running node `n`, which tried to split, keeping its commit.
    fn fail_split(&mut self, n: NodeIndex, reason: String) -> std::result::Result<(), ApplyError> {
        self.machine.fail(
            n,
            self.clock,
            reason,
            FailureReason::CompositeFailed,
            Some(Phase::Work),
        )
    }

    /// Notes that the composite parent of node `n` (if it has one) may be able to go on.
    pub(super) fn child_ended(&mut self, n: NodeIndex) {
        let parent = self
            .spec
            .jobs
            .get(n)
            .and_then(|j| j.parent.as_deref())
            .and_then(|p| self.machine.graph().index_of(p));
        if let Some(p) = parent {
            self.composites.push(p);
        }
    }

    /// Asks the controller of each noted composite job whose sub-jobs have all ended what
    /// comes next, and does it: go on (it is queued to run the merge of their commits), more
    /// sub-jobs, or failure.
    pub(super) fn check_composites(&mut self) {
        let noted = std::mem::take(&mut self.composites);
        for p in noted {
            let record = self.machine.record();
            if record.state.nodes[p].status != NodeStatus::CompletedSplit
                || self.running[p].is_some()
            {
                continue;
            }
            let children_ended = self
                .children(p)
                .iter()
                .all(|&d| record.state.nodes[d].status.is_terminal());
            if !children_ended {
                continue;
            }
            let outcome = match self.decide(p, None) {
                Some(Decision::Done { output }) => {
                    self.composite_outputs.insert(p, output);
                    let graph = self.machine.graph().clone();
                    self.queue.push(&graph, p);
                    Ok(())
                }
                Some(Decision::Spawn(jobs)) => match self.sub_job_edit(p, jobs) {
                    Ok(edit) => self.add_sub_jobs(edit),
                    Err(reason) => self.machine.fail_composite(p, reason, self.clock),
                },
                Some(Decision::Failed { reason }) => {
                    self.machine.fail_composite(p, reason, self.clock)
                }
                None => self.machine.fail_composite(
                    p,
                    "no controller is registered for `split`".to_owned(),
                    self.clock,
                ),
            };
            if let Err(e) = outcome {
                tracing::error!(node = p, error = %e, "could not go on with a composite job");
            }
        }
    }

    /// The sub-jobs of node `p`, in the plan's order: those of its dependencies whose
    /// `parent` it is.
    fn children(&self, p: NodeIndex) -> Vec<NodeIndex> {
        let Some(parent) = self.spec.jobs.get(p).map(|j| j.producer_id.as_str()) else {
            return Vec::new();
        };
        let mut children: Vec<NodeIndex> = self
            .machine
            .graph()
            .dependencies(p)
            .filter(|&d| self.spec.jobs.get(d).and_then(|j| j.parent.as_deref()) == Some(parent))
            .collect();
        children.sort_unstable();
        children
    }

    /// The controller's answer for composite node `n` (`request`: what its run asked for).
    fn decide(&self, n: NodeIndex, request: Option<&str>) -> Option<Decision> {
        let controller = self.ctx.controllers.get("split")?;
        let record = self.machine.record();
        let job = self.spec.jobs.get(n)?;
        let children = self
            .children(n)
            .into_iter()
            .map(|i| {
                let node = &record.state.nodes[i];
                ChildFacts {
                    producer_id: &self.spec.jobs[i].producer_id,
                    status: node.status,
                    output: node.output(),
                    commit: node.commit.as_deref(),
                }
            })
            .collect();
        let facts = CompositeFacts {
            plan: &self.spec,
            job,
            depth: crate::composite::depth_of(&self.spec, job),
            commit: record.state.nodes[n].commit.as_deref(),
            request,
            children,
        };
        let decision = controller.decide(&facts);
        if let Decision::Spawn(jobs) = &decision {
            if let Some(reason) = spawn_problem(&facts, jobs) {
                return Some(Decision::Failed { reason });
            }
        }
        Some(decision)
    }

    /// The edit adding `jobs` under node `n`, checked like any edit (names, cycles): the
    /// reason it cannot be applied otherwise.
    fn sub_job_edit(
        &self,
        n: NodeIndex,
        jobs: Vec<JobSpec>,
    ) -> std::result::Result<SubJobEdit, String> {
        let parent = self
            .spec
            .jobs
            .get(n)
            .map(|j| j.producer_id.clone())
            .unwrap_or_default();
        let edit = PlanEdit::AddSubJobs { parent, jobs };
        let was_started = self.machine.record().state.started_at.is_some();
        let (spec, graph) = self
            .edited_spec(std::slice::from_ref(&edit), was_started)
            .map_err(|e| format!("its sub-jobs cannot be added: {e}"))?;
        Ok(SubJobEdit { edit, spec, graph })
    }
}

/// A checked [`PlanEdit::AddSubJobs`] with the plan it makes.
pub(super) struct SubJobEdit {
    pub(super) edit: PlanEdit,
    pub(super) spec: crate::plan::PlanSpec,
    pub(super) graph: PlanGraph,
}
