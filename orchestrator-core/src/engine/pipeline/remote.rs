//! Remote execution (SPEC §16, see [`crate::remote`]): the coordinator's side of a job whose
//! phases an [`Executor`] runs elsewhere, and the worker's side that runs an order's phases
//! with this same pipeline.

use tokio::sync::mpsc;

use super::*;
use crate::remote::{Executor, JobOrder, JobOutcome, JobRefs, JobReport};
use crate::repository::StoreError;

/// How many attempts in a row may be lost with their worker before the job fails for good:
/// a job that kills every worker it lands on must not go round forever.
const MAX_LOST_ATTEMPTS: usize = 3;

impl NodeRun {
    /// The executor this attempt's phases go to, when the host set one and the job is one a
    /// worker can run on its own (see [`crate::remote`]).
    pub(super) fn executor(&self) -> Option<Arc<dyn Executor>> {
        let executor = self.ctx.executor.as_ref().filter(|_| !self.on_worker)?;
        let job = self.job()?;
        let runs_work = !job.work.is_job_only() && !self.composite && !self.may_split;
        let fresh = self.wake.is_none() && self.checkpoint.is_none() && self.dehydrated.is_none();
        (runs_work && fresh && self.resume_from <= Phase::Commit).then(|| executor.clone())
    }

    /// The coordinator's side of a remote job: merge-fi in memory, the base pushed, the phases
    /// run by the executor, their changes taken in, the result fetched and merge-ri as usual.
    pub(super) async fn run_remote(&self, executor: Arc<dyn Executor>) -> PhaseResult<RunEnd> {
        self.save_specs().await;
        let git = self.git()?.clone();
        let Some(job) = self.job() else {
            return Ok(RunEnd::Finished);
        };
        let remote = executor.remote().to_owned();
        let refs = JobRefs::new(&self.plan, &self.node_id, self.attempt);
        let (base, base_ref) = self
            .phase(Phase::MergeFi, |log| {
                self.push_base(&git, &remote, &refs.base, log)
            })
            .await?;
        let mut refs = refs;
        refs.base = base_ref;
        let order = JobOrder {
            plan: self.plan.clone(),
            node: self.node_id.clone(),
            attempt: self.attempt,
            base,
            resume_from: self.resume_from.max(Phase::Setup),
            remote: remote.clone(),
            refs: refs.clone(),
        };
        // Observers see merge-fi end before the worker's phases come in. A store that keeps
        // failing while the worker runs the job fails it at its work phase.
        self.flush();
        let report = executor
            .execute(order, self.cancel.clone())
            .await
            .map_err(|e| {
                NodeFailure::new(
                    Phase::Work,
                    FailureReason::PhaseFailed,
                    format!("remote execution: {e}"),
                )
            })?;
        let last_phase = self.take_in(report.changes);
        let commit = match report.outcome {
            JobOutcome::Committed { commit } => commit,
            JobOutcome::Failed {
                phase,
                reason,
                message,
            } => {
                return Err(NodeFailure {
                    message,
                    reason,
                    phase,
                    heal: None,
                })
            }
            JobOutcome::Lost { message } => {
                let reason = if self.lost_streak + 1 >= MAX_LOST_ATTEMPTS {
                    FailureReason::PhaseFailed
                } else {
                    FailureReason::Crashed
                };
                return Err(NodeFailure {
                    message: format!("{message} (on a remote worker)"),
                    reason,
                    phase: last_phase.or(Some(Phase::Setup)),
                    heal: None,
                });
            }
        };
        let fetched = git
            .fetch(&self.repo, &remote, &refs.result)
            .await
            .map_err(|e| NodeFailure::git(Phase::Commit, e))?;
        if fetched != commit {
            return Err(NodeFailure::new(
                Phase::Commit,
                FailureReason::PhaseFailed,
                format!(
                    "the remote's {} is {fetched}, not the worker's result {commit}: another writer replaced it",
                    refs.result
                ),
            ));
        }
        self.remember_on_remote(&commit, &refs.result);
        if let held @ RunEnd::Held(_) = self.after_the_phases() {
            return Ok(held);
        }
        if self.graph.is_user_leaf(self.node) {
            self.phase(Phase::MergeRi, |log| self.merge_ri(&git, job, &commit, log))
                .await?;
        }
        Ok(RunEnd::Finished)
    }

    /// merge-fi of a remote job: its dependencies merged in memory (no worktree here), the
    /// result pushed where the worker fetches it — unless the remote has it already (a
    /// dependency's result, the plan's base pushed for another job). Returns the base and the
    /// ref holding it on the remote.
    async fn push_base(
        &self,
        git: &Arc<dyn GitOperations>,
        remote: &str,
        reference: &str,
        log: LogSink,
    ) -> PhaseResult<(String, String)> {
        let p = Phase::MergeFi;
        let base = match self.dep_commits.len() {
            0 => self.own_base(git).await?,
            1 => self.dep_commits[0].clone(),
            _ => {
                let message = format!("{} forward integration", self.ctx.options.commit_prefix);
                git.merge_commits(&self.repo, &self.dep_commits, &message)
                    .await
                    .map_err(|e| NodeFailure::git(p, e))?
            }
        };
        let known = self
            .ctx
            .on_remote
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&base)
            .cloned();
        if let Some(there) = known {
            log.line(
                LogStream::System,
                &format!("base {base} is on {remote} as {there}"),
            );
            return Ok((base, there));
        }
        git.push(&self.repo, remote, &base, reference)
            .await
            .map_err(|e| NodeFailure::git(p, e))?;
        self.remember_on_remote(&base, reference);
        log.line(
            LogStream::System,
            &format!("base {base} pushed to {remote} as {reference}"),
        );
        Ok((base, reference.to_owned()))
    }

    fn remember_on_remote(&self, commit: &str, reference: &str) {
        self.ctx
            .on_remote
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(commit.to_owned(), reference.to_owned());
    }

    /// Takes in the progress a worker reported, as this node's: only what a job's own phases
    /// make (phases, commit, session, usage, output); the worker's worktree and processes are
    /// its own, and so is its laying out of the worktree (this attempt's merge-fi is the
    /// coordinator's; the worker's log lines of it are in the same log). Returns the last
    /// phase that started.
    fn take_in(&self, changes: Vec<StateChange>) -> Option<Phase> {
        let mut last = None;
        for mut change in changes {
            let own = match &change {
                StateChange::PhaseStarted { phase, .. }
                | StateChange::PhaseEnded { phase, .. }
                | StateChange::PhaseRan { phase, .. } => *phase != Phase::MergeFi,
                _ => matches!(
                    change,
                    StateChange::Commit { .. }
                        | StateChange::Session { .. }
                        | StateChange::Metrics { .. }
                        | StateChange::Output { .. }
                ),
            };
            if !own {
                continue;
            }
            if let StateChange::PhaseStarted { phase, .. } | StateChange::PhaseRan { phase, .. } =
                &change
            {
                last = Some(*phase);
            }
            if let Some(node) = change.node_mut() {
                *node = self.node;
            }
            self.send(change);
        }
        last
    }
}

/// The worker's side: runs `order`'s phases in `repo` (the worker's clone of the remote, which
/// holds the base commit) with the pipeline of a local job, and reports them. The job's
/// worktree is removed afterwards; its result commit stays in `repo` for the worker to push.
pub(crate) async fn execute_order(
    ctx: Arc<EngineCtx>,
    order: &JobOrder,
    repo: &Path,
    cancel: CancellationToken,
) -> std::result::Result<JobReport, StoreError> {
    let record = ctx.repository.load(&order.plan).await?;
    let graph = match PlanGraph::build(&record.spec) {
        Ok(g) => Arc::new(g),
        Err(e) => return Ok(refused(format!("the stored plan does not build: {e}"))),
    };
    let spec = record.spec.clone();
    let Some(node) = record.state.nodes.iter().position(|n| n.id == order.node) else {
        return Ok(refused(format!(
            "plan {} has no job {}",
            order.plan, order.node
        )));
    };
    // The worker's clone keeps the engine's folders (the inputs file, agents' state) out of
    // the job's commit, as the coordinator's repository does.
    if let Some(git) = &ctx.git {
        if let Err(e) =
            crate::engine::exclude_own_folders(git.as_ref(), &ctx.options, &spec, repo).await
        {
            return Ok(refused(format!(
                "cannot set up the clone {}: {e}",
                repo.display()
            )));
        }
    }
    let machine = PlanMachine::new(record, graph);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut run = NodeRun::new(
        ctx.clone(),
        &machine,
        Arc::from(repo),
        spec,
        node,
        0,
        order.attempt,
        Some(order.resume_from),
        cancel,
        tx,
        Slot::new(()),
        None,
    );
    // The job's worktree is the clone's own, wherever the plan keeps worktrees on the
    // coordinator's machine (its `worktreeRoot` may be a path only that machine has).
    let worktree = repo
        .join(".worktrees")
        .join(crate::engine::job_worktree_name(&order.node));
    run.on_worker = true;
    run.dep_commits = vec![order.base.clone()];
    run.worktree = Some(worktree.clone());
    run.prev_commit = None;
    run.session_id = None;
    run.hold_after = false;
    Box::new(run).execute().await;
    let mut changes = Vec::new();
    let mut end = None;
    while let Some(message) = rx.recv().await {
        match message {
            Message::Node(NodeProgress::Changes { changes: c, .. }) => changes.extend(c),
            Message::Node(NodeProgress::Done {
                changes: c, result, ..
            }) => {
                changes.extend(c);
                end = Some(result);
            }
            _ => {}
        }
    }
    if let Some(git) = &ctx.git {
        if let Err(e) = git.remove_worktree(repo, &worktree).await {
            tracing::warn!(error = %e, worktree = %worktree.display(), "could not remove a job's worktree");
        }
    }
    let commit = changes.iter().rev().find_map(|c| match c {
        StateChange::Commit { commit, .. } => Some(commit.clone()),
        _ => None,
    });
    let outcome = match (end, commit) {
        (Some(Ok(RunEnd::Finished)), Some(commit)) => JobOutcome::Committed { commit },
        (Some(Ok(RunEnd::Finished)), None) => JobOutcome::Failed {
            phase: Some(Phase::Commit),
            reason: FailureReason::StartupError,
            message: "the job's phases passed without a commit".into(),
        },
        (Some(Ok(RunEnd::Held(hold))), _) => JobOutcome::Failed {
            phase: Some(Phase::Work),
            reason: FailureReason::StartupError,
            message: format!("the job stopped to wait ({hold:?}), which a remote worker cannot"),
        },
        (Some(Err(f)), _) => JobOutcome::Failed {
            phase: f.phase,
            reason: f.reason,
            message: f.message,
        },
        (None, _) => JobOutcome::Failed {
            phase: None,
            reason: FailureReason::StartupError,
            message: "the job's run ended without a result".into(),
        },
    };
    Ok(JobReport { changes, outcome })
}

/// A report refusing an order that does not match the stored plan.
fn refused(message: String) -> JobReport {
    JobReport::new(JobOutcome::Failed {
        phase: None,
        reason: FailureReason::StartupError,
        message,
    })
}
