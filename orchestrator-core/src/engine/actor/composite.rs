//! Composite jobs (SPEC §12, [`crate::composite`]): a job whose run left a split manifest, or
//! composite work (a team or a pipeline) whose commit is made, becomes `completed_split` and
//! gets its sub-jobs in the same journal batch; when they have all ended its controller is
//! asked again, and the job goes on (merging their commits into its own), gets more sub-jobs,
//! or fails.

use super::*;
use crate::composite::{controller_kind, spawn_problem, ChildFacts, CompositeFacts, Decision};
use crate::plan::{JobSpec, PlanEdit};

/// A composite job its controller found done: the output it gave, and which sub-jobs'
/// commits to merge (`None`: every one that succeeded).
#[derive(Debug)]
pub(super) struct Finish {
    pub(super) output: Option<String>,
    pub(super) only: Option<Vec<String>>,
}

impl PlanActor {
    /// Running node `n`'s run committed and left `manifest`: asks the `split` controller and
    /// applies its answer (sub-jobs, or failure with the reason; never half of it).
    pub(super) fn split(
        &mut self,
        n: NodeIndex,
        manifest: &str,
    ) -> std::result::Result<(), ApplyError> {
        self.first_decision(n, Some(manifest))
    }

    /// Running node `n` is composite work whose commit is made: asks its controller for the
    /// first sub-jobs and applies the answer.
    pub(super) fn compose(&mut self, n: NodeIndex) -> std::result::Result<(), ApplyError> {
        self.first_decision(n, None)
    }

    fn first_decision(
        &mut self,
        n: NodeIndex,
        request: Option<&str>,
    ) -> std::result::Result<(), ApplyError> {
        let kind = self.spec.jobs.get(n).map_or("split", controller_kind);
        match self.decide(n, request) {
            Some(Decision::Spawn(jobs)) => match self.sub_job_edit(n, jobs) {
                Ok(edit) => {
                    self.machine.complete_split(n, self.clock)?;
                    self.add_sub_jobs(edit)?;
                    self.record_progress(n)
                }
                Err(reason) => self.fail_split(n, reason),
            },
            Some(Decision::Failed { reason }) => self.fail_split(n, reason),
            Some(_) => self.fail_split(n, format!("the {kind} controller made no sub-jobs")),
            None => self.fail_split(n, no_controller(kind)),
        }
    }

    /// Records the composite job's progress as its output, when its controller shows one.
    fn record_progress(&mut self, n: NodeIndex) -> std::result::Result<(), ApplyError> {
        let Some(text) = self.shown_progress(n) else {
            return Ok(());
        };
        if self.machine.record().state.nodes[n].output() == Some(text.as_str()) {
            return Ok(());
        }
        self.machine
            .record_change(StateChange::Output { node: n, text })
    }

    /// Why finished node `n`, a sub-job, breaks its parent controller's output contract.
    pub(super) fn breaks_contract(&self, n: NodeIndex) -> Option<String> {
        let child = self.spec.jobs.get(n)?;
        // A sub-agent answers to the contract its parent's agent gave it (SPEC §15).
        if let Some(spawned) = child.extra.sub_agent.as_deref() {
            let output = self.machine.record().state.nodes[n].output();
            return spawned.contract.as_ref()?.check(output).err();
        }
        let parent = self
            .machine
            .graph()
            .index_of(child.extra.parent.as_deref()?)?;
        let parent = self.spec.jobs.get(parent)?;
        let controller = self.ctx.controllers.get(controller_kind(parent))?;
        let output = self.machine.record().state.nodes[n].output();
        controller.check(parent, child, output).err()
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
            .and_then(|j| j.extra.parent.as_deref())
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
            if self.check_agent_wait(p) {
                continue;
            }
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
                    self.finish(p, Finish { output, only: None });
                    Ok(())
                }
                Some(Decision::Keep { only, output }) => {
                    let only = Some(only);
                    self.finish(p, Finish { output, only });
                    Ok(())
                }
                Some(Decision::Spawn(jobs)) => match self.sub_job_edit(p, jobs) {
                    Ok(edit) => self
                        .add_sub_jobs(edit)
                        .and_then(|()| self.record_progress(p)),
                    Err(reason) => self.machine.fail_composite(p, reason, self.clock),
                },
                Some(Decision::Retry {
                    jobs,
                    after_seconds,
                }) => self
                    .retry_children(p, &jobs, after_seconds)
                    .and_then(|()| self.record_progress(p)),
                Some(Decision::Failed { reason }) => self
                    .machine
                    .fail_composite(p, reason, self.clock)
                    .and_then(|()| self.record_progress(p)),
                None => {
                    let kind = self.spec.jobs.get(p).map_or("split", controller_kind);
                    self.machine
                        .fail_composite(p, no_controller(kind), self.clock)
                }
            };
            if let Err(e) = outcome {
                tracing::error!(node = p, error = %e, "could not go on with a composite job");
            }
        }
    }

    /// Composite node `p` is done: it is queued to merge its sub-jobs' commits and go on.
    fn finish(&mut self, p: NodeIndex, finish: Finish) {
        self.composite_done.insert(p, finish);
        let graph = self.machine.graph().clone();
        self.queue.push(&graph, p);
    }

    /// Runs the failed sub-jobs `jobs` of composite node `p` again, after `after_seconds`
    /// (a timer wait); fails `p` when one of them is no failed sub-job of it.
    fn retry_children(
        &mut self,
        p: NodeIndex,
        jobs: &[String],
        after_seconds: f64,
    ) -> std::result::Result<(), ApplyError> {
        let children = self.children(p);
        let mut found = Vec::with_capacity(jobs.len());
        for id in jobs {
            let n = children
                .iter()
                .copied()
                .find(|&c| self.spec.jobs[c].producer_id == *id)
                .filter(|&c| self.machine.status_of(c) == NodeStatus::Failed);
            match n {
                Some(n) => found.push(n),
                None => {
                    let reason =
                        format!("its controller retried `{id}`, which is no failed sub-job of it");
                    return self.machine.fail_composite(p, reason, self.clock);
                }
            }
        }
        // At most a day: a back-off, not a schedule.
        let delay = (after_seconds.clamp(0.0, 86_400.0) * 1000.0).round() as u64;
        for n in found {
            self.machine.retry(n, None, self.clock)?;
            if delay > 0 {
                self.wait_until(n, self.clock.saturating_add(delay))?;
            }
        }
        Ok(())
    }

    /// The sub-jobs of node `p`, in the plan's order: those of its dependencies whose
    /// `parent` it is.
    pub(super) fn children(&self, p: NodeIndex) -> Vec<NodeIndex> {
        let Some(parent) = self.spec.jobs.get(p).map(|j| j.producer_id.as_str()) else {
            return Vec::new();
        };
        let mut children: Vec<NodeIndex> = self
            .machine
            .graph()
            .dependencies(p)
            .filter(|&d| {
                self.spec
                    .jobs
                    .get(d)
                    .and_then(|j| j.extra.parent.as_deref())
                    == Some(parent)
            })
            .collect();
        children.sort_unstable();
        children
    }

    /// The controller's answer for composite node `n` (`request`: what its run asked for).
    fn decide(&self, n: NodeIndex, request: Option<&str>) -> Option<Decision> {
        let job = self.spec.jobs.get(n)?;
        let controller = self.ctx.controllers.get(controller_kind(job))?;
        let facts = self.facts(n, request)?;
        let decision = controller.decide(&facts);
        if let Decision::Spawn(jobs) = &decision {
            if let Some(reason) = spawn_problem(&facts, jobs) {
                return Some(Decision::Failed { reason });
            }
        }
        Some(decision)
    }

    /// The progress composite node `n`'s controller shows, if any.
    fn shown_progress(&self, n: NodeIndex) -> Option<String> {
        let job = self.spec.jobs.get(n)?;
        let controller = self.ctx.controllers.get(controller_kind(job))?;
        controller.progress(&self.facts(n, None)?)
    }

    /// What composite node `n`'s controller decides from.
    fn facts<'a>(&'a self, n: NodeIndex, request: Option<&'a str>) -> Option<CompositeFacts<'a>> {
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
                    commit: node.extra.commit.as_deref(),
                    attempts: u32::try_from(node.attempts.len()).unwrap_or(u32::MAX),
                }
            })
            .collect();
        Some(CompositeFacts {
            plan: &self.spec,
            job,
            depth: crate::composite::depth_of(&self.spec, job),
            commit: record.state.nodes[n].extra.commit.as_deref(),
            request,
            children,
        })
    }

    /// The edit adding `jobs` under node `n`, checked like any edit (names, cycles): the
    /// reason it cannot be applied otherwise.
    pub(super) fn sub_job_edit(
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

/// The failure of a composite job whose controller is not registered.
fn no_controller(kind: &str) -> String {
    format!(
        "no controller is registered for `{kind}` work; register one with \
         OrchestratorBuilder::controller(\"{kind}\", ...) (teams and pipelines: \
         orchestrator_workflows::register)"
    )
}

/// A checked [`PlanEdit::AddSubJobs`] with the plan it makes.
pub(super) struct SubJobEdit {
    pub(super) edit: PlanEdit,
    pub(super) spec: crate::plan::PlanSpec,
    pub(super) graph: PlanGraph,
}
