//! The job pipeline of SPEC §3, run by one task per node attempt:
//! merge-fi, setup, prechecks, work, commit, postchecks, merge-ri — and the snapshot-validation
//! node's variant of it. With `isolation: "none"` only prechecks, work and postchecks run, in
//! the plan's directory.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::capacity::Slot;
use crate::engine::context::EngineCtx;
use crate::engine::messages::{Message, NodeFailure, NodeProgress};
use crate::git::{GitOperations, MergeStyle};
use crate::ids::{now_millis, NodeId, NodeIndex, PlanId};
use crate::plan::{Env, Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
use crate::repository::{AttemptSpecs, LogKey};
use crate::runner::{
    HealRequest, Healer, LogSink, LogStream, WorkContext, WorkFailure, WorkRunner,
};
use crate::state::{FailureReason, Heal, Phase, PhaseStatus, PlanMachine, StateChange};

type PhaseResult<T = ()> = Result<T, NodeFailure>;

/// One attempt of one node, with everything it needs captured at launch.
pub(crate) struct NodeRun {
    ctx: Arc<EngineCtx>,
    plan: PlanId,
    pub(crate) node: NodeIndex,
    /// Layout generation of the plan when the node was launched (see the actor's reshape).
    gen: usize,
    pub(crate) node_id: NodeId,
    attempt: u32,
    resume_from: Phase,
    spec: Arc<PlanSpec>,
    graph: Arc<PlanGraph>,
    repo: PathBuf,
    base_commit: Option<String>,
    target_branch: Option<String>,
    snapshot_branch: Option<String>,
    /// Commits of the dependencies, in the job's order.
    dep_commits: Vec<String>,
    worktree: Option<PathBuf>,
    prev_commit: Option<String>,
    session_id: Option<String>,
    /// The auto-heal this attempt starts with, until it has run.
    heal: std::sync::Mutex<Option<Box<Heal>>>,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<Message>,
    /// Changes not yet sent to the actor: sent before anything slow starts, and with `Done`.
    pending: std::sync::Mutex<Vec<StateChange>>,
    /// The job's capacity slot, freed when the run ends.
    _slot: Slot,
}

impl NodeRun {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        ctx: Arc<EngineCtx>,
        machine: &PlanMachine,
        spec: Arc<PlanSpec>,
        node: NodeIndex,
        gen: usize,
        attempt: u32,
        resume_from: Option<Phase>,
        cancel: CancellationToken,
        tx: mpsc::UnboundedSender<Message>,
        slot: Slot,
    ) -> Self {
        let record = machine.record();
        let state = &record.state;
        let graph = machine.graph().clone();
        let ns = &state.nodes[node];
        let dep_commits = if spec.isolation == Isolation::Worktree {
            graph
                .ordered_dependencies(&spec, node)
                .into_iter()
                .filter(|&d| !graph.is_snapshot(d))
                .filter_map(|d| state.nodes[d].commit.clone())
                .collect()
        } else {
            Vec::new()
        };
        NodeRun {
            plan: state.id.clone(),
            node_id: ns.id.clone(),
            attempt,
            resume_from: resume_from.unwrap_or(Phase::MergeFi),
            repo: state.repo.clone(),
            base_commit: state.base_commit.clone(),
            target_branch: state.target_branch.clone(),
            snapshot_branch: state.snapshot_branch.clone(),
            dep_commits,
            worktree: ns.worktree.clone(),
            prev_commit: ns.commit.clone(),
            session_id: ns.session_id.clone(),
            heal: std::sync::Mutex::new(ns.last_attempt().and_then(|a| a.heal.clone())),
            ctx,
            spec,
            graph,
            node,
            gen,
            cancel,
            tx,
            pending: std::sync::Mutex::new(Vec::new()),
            _slot: slot,
        }
    }

    /// Runs the attempt and reports its end to the actor.
    pub(crate) async fn execute(self) {
        // Boxed: the task then holds a pointer, not the largest of three state machines, which
        // tokio would copy on spawn and on completion.
        let result = if self.graph.is_snapshot(self.node) {
            Box::pin(self.run_snapshot()).await
        } else if self.spec.isolation == Isolation::Worktree {
            Box::pin(self.run_job()).await
        } else {
            Box::pin(self.run_in_place()).await
        };
        let changes = std::mem::take(&mut *self.buffer());
        let _ = self.tx.send(Message::Node(NodeProgress::Done {
            gen: self.gen,
            node: self.node,
            changes,
            result,
        }));
    }

    fn job(&self) -> Option<&JobSpec> {
        self.spec.jobs.get(self.node)
    }

    fn buffer(&self) -> std::sync::MutexGuard<'_, Vec<StateChange>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a change for the actor; it goes out with the next [`NodeRun::flush`] or `Done`.
    fn send(&self, change: StateChange) {
        self.buffer().push(change);
    }

    /// Sends the queued changes now (before a phase's slow part, so observers see it start).
    fn flush(&self) {
        let changes = std::mem::take(&mut *self.buffer());
        if !changes.is_empty() {
            let _ = self.tx.send(Message::Node(NodeProgress::Changes {
                gen: self.gen,
                changes,
            }));
        }
    }

    /// Whether phase `p` runs in this attempt (earlier phases completed in an earlier one).
    fn runs(&self, p: Phase) -> bool {
        p >= self.resume_from
    }

    fn git(&self) -> PhaseResult<&Arc<dyn GitOperations>> {
        self.ctx.git.as_ref().ok_or_else(|| {
            NodeFailure::new(
                Phase::MergeFi,
                FailureReason::StartupError,
                "worktree isolation needs a git layer (OrchestratorBuilder::git)",
            )
        })
    }

    /// Records the specs this attempt runs with. A first attempt without worktrees runs the
    /// plan's own definition, which the store already holds, so a plain task runner does not pay
    /// a write per job for it.
    async fn save_specs(&self) {
        if self.attempt == 1 && self.spec.isolation == Isolation::None {
            return;
        }
        let Some(job) = self.job() else { return };
        let specs = AttemptSpecs {
            work: Some(job.work.clone()),
            prechecks: job.prechecks.clone(),
            postchecks: job.postchecks.clone(),
        };
        if let Err(e) = self
            .ctx
            .repository
            .save_attempt_specs(&self.plan, &self.node_id, self.attempt, &specs)
            .await
        {
            tracing::warn!(error = %e, "could not store the attempt's specs");
        }
    }

    /// Runs one phase: records its start and end, collects its log.
    async fn phase<T, F, Fut>(&self, phase: Phase, f: F) -> PhaseResult<T>
    where
        F: FnOnce(LogSink) -> Fut,
        Fut: Future<Output = PhaseResult<T>>,
    {
        if self.cancel.is_cancelled() {
            return Err(NodeFailure::new(phase, FailureReason::Canceled, "canceled"));
        }
        self.send(StateChange::PhaseStarted {
            node: self.node,
            phase,
            at: now_millis(),
        });
        // Process groups are reported to the actor at once (not with the buffered progress),
        // so the store knows them before the work gets far. Only starts: the attempt's end
        // clears them, which saves a message and a journal record per process.
        let (tx, gen, node) = (self.tx.clone(), self.gen, self.node);
        let log = LogSink::with_process_hook(
            self.plan.clone(),
            self.node,
            phase,
            self.attempt,
            self.ctx.events.clone(),
            Arc::new(move |pgid, running| {
                if running {
                    let _ = tx.send(Message::Node(NodeProgress::Changes {
                        gen,
                        changes: vec![StateChange::Process {
                            node,
                            pgid,
                            running,
                        }],
                    }));
                }
            }),
        )
        // Output goes to the store in chunks as it comes, not held until the phase ends.
        .stored_in(
            self.ctx.repository.clone(),
            LogKey {
                plan: self.plan.clone(),
                node: self.node_id.clone(),
                phase,
                attempt: self.attempt,
            },
        );
        // Secrets of the host and of the plan's, job's and specs' env never reach the log,
        // the log events or the failure message.
        let log = log.redacting(self.ctx.job_redactor(&self.spec, self.job()));
        // A phase that finishes on its first poll reports its start together with its end;
        // one that has to wait reports its start now, so observers (and crash recovery) know
        // which phase is running.
        let work = f(log.clone());
        tokio::pin!(work);
        let result = match futures::poll!(&mut work) {
            std::task::Poll::Ready(result) => result,
            std::task::Poll::Pending => {
                self.flush();
                work.await
            }
        };
        // Failure messages quote the output and are kept in the journal, shown by `status`
        // and sent in events: redacted like the log.
        let result = result.map_err(|mut e| {
            e.message = log.redact(&e.message).into_owned();
            if let Some(heal) = e.heal.as_mut() {
                heal.failure = log.redact(&heal.failure).into_owned();
            }
            e
        });
        if let Err(e) = &result {
            log.line(LogStream::System, &format!("{phase} failed: {}", e.message));
        }
        log.flush().await;
        let (status, error) = match &result {
            Ok(_) => (PhaseStatus::Succeeded, None),
            Err(f) if f.reason == FailureReason::Canceled => {
                (PhaseStatus::Canceled, Some(f.message.clone()))
            }
            Err(f) => (PhaseStatus::Failed, Some(f.message.clone())),
        };
        self.send(StateChange::PhaseEnded {
            node: self.node,
            phase,
            status,
            at: now_millis(),
            error,
        });
        result
    }

    fn env(&self) -> Env {
        let mut env = self.spec.env.clone();
        if let Some(job) = self.job() {
            env.extend(job.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        env
    }

    fn runner_for(&self, spec: &WorkSpec, phase: Phase) -> PhaseResult<Arc<dyn WorkRunner>> {
        let runners = &self.ctx.runners;
        let found = match spec {
            WorkSpec::Agent(a) => {
                let name = a
                    .agent
                    .as_deref()
                    .unwrap_or(&self.ctx.options.default_agent);
                runners
                    .get(&format!("agent:{name}"))
                    .or_else(|| runners.get("agent"))
            }
            other => runners.get(other.kind()),
        };
        found.cloned().ok_or_else(|| {
            NodeFailure::new(
                phase,
                FailureReason::StartupError,
                format!(
                    "no runner is registered for `{}` work; register one with OrchestratorBuilder::runner(\"{}\", ...)",
                    spec.kind(),
                    spec.kind()
                ),
            )
        })
    }

    /// Runs a work spec through its runner in `dir`.
    async fn run_spec(
        &self,
        phase: Phase,
        spec: &WorkSpec,
        dir: &Path,
        log: LogSink,
    ) -> PhaseResult {
        let runner = self.runner_for(spec, phase)?;
        let job = self.job();
        let ctx = WorkContext {
            plan_id: self.plan.clone(),
            node: self.node,
            node_id: self.node_id.clone(),
            producer_id: job
                .map_or(crate::plan::SNAPSHOT_PRODUCER_ID, |j| &j.producer_id)
                .to_owned(),
            task: job.map_or("Snapshot validation", |j| &j.task).to_owned(),
            phase,
            attempt: self.attempt,
            dir: dir.to_owned(),
            env: self.env(),
            cancel: self.cancel.clone(),
            log,
            session_id: self.session_id.clone(),
            continues_unfinished: phase == Phase::Work && self.continues_agent_session(),
        };
        self.heal_first(phase, spec, &ctx).await?;
        let result = runner.run(spec, &ctx).await;
        match result {
            Ok(out) => {
                if let Some(session_id) = out.session_id {
                    self.send(StateChange::Session {
                        node: self.node,
                        session_id,
                    });
                }
                if let Some(metrics) = out.metrics {
                    self.send(StateChange::Metrics {
                        node: self.node,
                        metrics,
                    });
                }
                Ok(())
            }
            Err(f) => {
                if let Some(session_id) = f.session_id {
                    self.send(StateChange::Session {
                        node: self.node,
                        session_id,
                    });
                }
                let heal = (f.reason == FailureReason::PhaseFailed
                    && self.healer_for(spec, phase).is_some())
                .then(|| {
                    Box::new(Heal {
                        round: 0,
                        phase,
                        spec: spec.clone(),
                        failure: f.message.clone(),
                        exit_code: f.exit_code,
                    })
                });
                let mut message = f.message;
                if let Some(extra) = spec.on_failure().and_then(|o| o.message.as_deref()) {
                    message = format!("{message} ({extra})");
                }
                let mut failure = NodeFailure::new(phase, f.reason, message);
                failure.heal = heal;
                Err(failure)
            }
        }
    }

    /// Runs the attempt's pending auto-heal before the spec it is about. A heal that fails
    /// fails the phase (and is not healed again).
    async fn heal_first(&self, phase: Phase, spec: &WorkSpec, ctx: &WorkContext) -> PhaseResult {
        let heal = {
            let mut pending = self.heal.lock().unwrap_or_else(|e| e.into_inner());
            match pending.as_ref() {
                Some(h) if h.phase == phase && h.spec == *spec => pending.take(),
                _ => None,
            }
        };
        let (Some(heal), Some(healer)) = (heal, self.ctx.healer.as_ref()) else {
            return Ok(());
        };
        ctx.log.line(
            LogStream::System,
            &format!(
                "auto-heal {} of {}: asking the healer to fix: {}",
                heal.round, self.ctx.options.auto_heal_budget, heal.failure
            ),
        );
        let mut failure = WorkFailure::new(heal.failure.clone());
        failure.exit_code = heal.exit_code;
        let request = HealRequest::new(spec.clone(), failure, heal.round);
        let healed = healer.heal(&request, ctx).await.map_err(|e| {
            NodeFailure::new(
                phase,
                e.reason,
                format!(
                    "auto-heal {} failed: {e}; the phase had failed with: {}",
                    heal.round, heal.failure
                ),
            )
        })?;
        // The healer's usage belongs to this attempt; its session is not the job's to resume.
        if let Some(metrics) = healed.metrics {
            self.send(StateChange::Metrics {
                node: self.node,
                metrics,
            });
        }
        ctx.log
            .line(LogStream::System, "auto-heal done; running the phase again");
        Ok(())
    }

    /// The healer, when this failure may be healed: shell or process work, a plain failure (not
    /// a timeout or cancel), and neither the job nor the spec opting out.
    fn healer_for(&self, spec: &WorkSpec, phase: Phase) -> Option<&Arc<dyn Healer>> {
        let healer = self.ctx.healer.as_ref()?;
        let kind_ok = matches!(spec, WorkSpec::Shell(_) | WorkSpec::Process(_));
        let job_ok = self.job().is_none_or(|j| j.auto_heal != Some(false));
        let spec_ok = spec.on_failure().and_then(|o| o.no_auto_heal) != Some(true);
        let phase_ok = matches!(
            phase,
            Phase::Setup | Phase::Prechecks | Phase::Work | Phase::Postchecks
        );
        (kind_ok && job_ok && spec_ok && phase_ok && !self.cancel.is_cancelled()).then_some(healer)
    }

    /// Prechecks and work, from phase `from` on.
    async fn checks_and_work(&self, dir: &Path, from: Phase) -> PhaseResult {
        let Some(job) = self.job() else { return Ok(()) };
        if let Some(pre) = job.prechecks.as_ref().filter(|_| from <= Phase::Prechecks) {
            self.phase(Phase::Prechecks, |log| {
                self.run_spec(Phase::Prechecks, pre, dir, log)
            })
            .await?;
        }
        if from <= Phase::Work {
            self.phase(Phase::Work, |log| {
                self.run_spec(Phase::Work, &job.work, dir, log)
            })
            .await?;
        }
        Ok(())
    }

    // ----- isolation: none -------------------------------------------------------------------

    async fn run_in_place(&self) -> PhaseResult {
        self.save_specs().await;
        let dir = self.repo.clone();
        self.checks_and_work(&dir, self.resume_from).await?;
        if let Some(post) = self.job().and_then(|j| j.postchecks.as_ref()) {
            self.phase(Phase::Postchecks, |log| {
                self.run_spec(Phase::Postchecks, post, &dir, log)
            })
            .await?;
        }
        Ok(())
    }

    // ----- isolation: worktree, user jobs ----------------------------------------------------

    fn worktree_root(&self) -> PathBuf {
        self.ctx.options.plan_worktree_root(&self.spec, &self.repo)
    }

    async fn run_job(&self) -> PhaseResult {
        self.save_specs().await;
        let git = self.git()?.clone();
        let Some(job) = self.job() else { return Ok(()) };
        let wt = self.worktree.clone().unwrap_or_else(|| {
            self.worktree_root()
                .join(super::job_worktree_name(&self.node_id))
        });

        // merge-fi always runs: it is idempotent, and skipping it once lost work in the reference.
        let start = self
            .phase(Phase::MergeFi, |log| self.merge_fi(&git, &wt, log))
            .await?;
        // When merge-fi laid the files out anew, every phase before the commit runs again on
        // them: what setup and prechecks left is gone with the reset (see `WorktreeStart`).
        let from = if start != WorktreeStart::Kept && self.resume_from <= Phase::Work {
            Phase::Setup
        } else {
            self.resume_from
        };
        if from <= Phase::Setup {
            self.phase(Phase::Setup, |log| self.setup(&wt, log)).await?;
        }
        self.checks_and_work(&wt, from).await?;
        let commit = if self.runs(Phase::Commit) {
            self.phase(Phase::Commit, |log| self.commit(&git, job, &wt, log))
                .await?
        } else {
            match self.prev_commit.clone() {
                Some(c) => c,
                None => git
                    .head(&wt)
                    .await
                    .map_err(|e| NodeFailure::git(Phase::Commit, e))?,
            }
        };
        if let Some(post) = job
            .postchecks
            .as_ref()
            .filter(|_| self.runs(Phase::Postchecks))
        {
            self.phase(Phase::Postchecks, |log| {
                self.run_spec(Phase::Postchecks, post, &wt, log)
            })
            .await?;
        }
        if self.graph.is_user_leaf(self.node) {
            self.phase(Phase::MergeRi, |log| self.merge_ri(&git, job, &commit, log))
                .await?;
        }
        Ok(())
    }

    /// Whether this attempt continues the agent session of an earlier, unfinished run of its
    /// work phase: then the worktree is kept as that run left it, so that the files and the
    /// conversation go on together (the agent is told it was interrupted). Everything else that
    /// runs again starts from where its phase began.
    fn continues_agent_session(&self) -> bool {
        let agent_work = self.job().and_then(|j| match &j.work {
            WorkSpec::Agent(a) => Some(a),
            _ => None,
        });
        self.resume_from == Phase::Work
            && self.session_id.is_some()
            && agent_work.is_some_and(|a| a.resume_session != Some(false))
    }

    async fn merge_fi(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        log: LogSink,
    ) -> PhaseResult<WorktreeStart> {
        let p = Phase::MergeFi;
        let start = match (self.resume_from > Phase::Commit, &self.prev_commit) {
            // Resuming after the commit: the worktree must hold the job's own commit.
            (true, Some(c)) => c.clone(),
            _ => match self.dep_commits.first() {
                Some(c) => c.clone(),
                None => match self.job().and_then(|j| j.base_branch.as_deref()) {
                    Some(rev) => git
                        .resolve(&self.repo, rev)
                        .await
                        .map_err(|e| NodeFailure::git(p, e))?,
                    None => self.base_commit.clone().ok_or_else(|| {
                        NodeFailure::new(
                            p,
                            FailureReason::StartupError,
                            "the plan has no base commit; was it started?",
                        )
                    })?,
                },
            },
        };
        let keep = self.continues_agent_session();
        let laid_out = self.lay_out_worktree(git, wt, &start, keep, &log).await?;
        let others: Vec<String> = self.dep_commits.iter().skip(1).cloned().collect();
        if !others.is_empty() {
            let resolver = self.ctx.resolver.as_deref();
            let message = format!("{} forward integration", self.ctx.options.commit_prefix);
            let head = git
                .merge_into_worktree(wt, &others, &message, resolver)
                .await
                .map_err(|e| NodeFailure::git(p, e))?;
            log.line(
                LogStream::System,
                &format!("merged {} dependencies, head {head}", others.len()),
            );
        }
        Ok(laid_out)
    }

    /// Brings the node's worktree to `start` for the phases of this attempt (see
    /// [`WorktreeStart`]): created there if there is none; else, after a stopped or failed
    /// run, reset to it — or, with `keep` (an agent resuming its session), kept as it is.
    ///
    /// The worktree's path is the node's own, so a folder already there is an earlier run's
    /// even when a crash lost its record. A recorded one a job broke (its `.git` removed or
    /// pointed elsewhere) is replaced rather than refused.
    async fn lay_out_worktree(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        start: &str,
        keep: bool,
        log: &LogSink,
    ) -> PhaseResult<WorktreeStart> {
        let p = Phase::MergeFi;
        let recorded = self.worktree.is_some();
        if recorded
            && git
                .remove_broken_worktree(&self.repo, wt)
                .await
                .map_err(|e| NodeFailure::git(p, e))?
        {
            log.line(
                LogStream::System,
                &format!(
                    "{} was no longer a git worktree (its .git was removed or changed); replacing it",
                    wt.display()
                ),
            );
        }
        let existed = wt.exists();
        git.create_worktree(&self.repo, wt, start)
            .await
            .map_err(|e| NodeFailure::git(p, e))?;
        let laid_out = if !existed {
            log.line(
                LogStream::System,
                &format!("worktree {} at {start}", wt.display()),
            );
            WorktreeStart::Created
        } else {
            // A branch an earlier run switched to goes before a reset detaches HEAD.
            self.release_job_branch(git, wt, log, p).await?;
            if keep {
                log.line(
                    LogStream::System,
                    "keeping the worktree as the interrupted run left it: the agent resumes its session",
                );
                WorktreeStart::Kept
            } else {
                // Not on the files a half-done run left (appending twice, or building on its
                // own uncommitted output).
                git.reset_worktree(wt, start)
                    .await
                    .map_err(|e| NodeFailure::git(p, e))?;
                log.line(
                    LogStream::System,
                    &format!("reset the worktree to {start}: the phases run again from there"),
                );
                WorktreeStart::Reset
            }
        };
        if !recorded {
            self.send(StateChange::Worktree {
                node: self.node,
                path: Some(wt.to_owned()),
                base_commit: Some(start.to_owned()),
            });
        }
        Ok(laid_out)
    }

    /// Detaches the worktree from a branch the job switched it to, deleting the branch if the
    /// job made it (it would be left in the user's repository), and says so in the log.
    async fn release_job_branch(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        log: &LogSink,
        phase: Phase,
    ) -> PhaseResult {
        let released = git
            .release_job_branch(&self.repo, wt)
            .await
            .map_err(|e| NodeFailure::git(phase, e))?;
        if let Some(branch) = released {
            let what = if branch.deleted {
                "deleted it (its commits are in the job's)"
            } else {
                "it existed before the job and is left where the job put it"
            };
            log.line(
                LogStream::System,
                &format!(
                    "the job switched its worktree to branch `{}`; detached the worktree and {what}",
                    branch.name
                ),
            );
        }
        Ok(())
    }

    async fn setup(&self, wt: &Path, log: LogSink) -> PhaseResult {
        let p = Phase::Setup;
        // The links are shared folders (node_modules ...), never part of a job's commit: they
        // are excluded like our own folders, here rather than at the plan's start because
        // `additionalSymlinkDirs` may change while the plan runs.
        if let (false, Some(git)) = (
            self.spec.additional_symlink_dirs.is_empty(),
            self.ctx.git.as_ref(),
        ) {
            let links: Vec<String> = self
                .spec
                .additional_symlink_dirs
                .iter()
                .map(|d| format!("/{}", d.trim_matches('/')))
                .collect();
            let patterns: Vec<&str> = links.iter().map(String::as_str).collect();
            git.exclude(&self.repo, &patterns)
                .await
                .map_err(|e| NodeFailure::git(p, e))?;
        }
        for dir in &self.spec.additional_symlink_dirs {
            let src = self.repo.join(dir);
            let dst = wt.join(dir);
            if !src.exists() || dst.symlink_metadata().is_ok() {
                continue;
            }
            if let Some(parent) = dst.parent() {
                tokio::fs::create_dir_all(parent).await.map_err(|e| {
                    NodeFailure::new(
                        p,
                        FailureReason::PhaseFailed,
                        format!("creating {}: {e}", parent.display()),
                    )
                })?;
            }
            symlink_dir(&src, &dst).map_err(|e| {
                NodeFailure::new(
                    p,
                    FailureReason::PhaseFailed,
                    format!("linking {} -> {}: {e}", dst.display(), src.display()),
                )
            })?;
            log.line(LogStream::System, &format!("linked {dir}"));
        }
        for spec in &self.spec.worktree_init {
            self.run_spec(p, spec, wt, log.clone()).await?;
        }
        Ok(())
    }

    async fn commit(
        &self,
        git: &Arc<dyn GitOperations>,
        job: &JobSpec,
        wt: &Path,
        log: LogSink,
    ) -> PhaseResult<String> {
        let p = Phase::Commit;
        self.release_job_branch(git, wt, &log, p).await?;
        let message = format!("{} {}", self.ctx.options.commit_prefix, job.task);
        let commit = match git
            .commit_all(wt, &message)
            .await
            .map_err(|e| NodeFailure::git(p, e))?
        {
            Some(c) => c,
            None if job.expects_no_changes => {
                git.head(wt).await.map_err(|e| NodeFailure::git(p, e))?
            }
            None => {
                // Work committed by the job itself (an agent that commits) counts as changes.
                let head = git.head(wt).await.map_err(|e| NodeFailure::git(p, e))?;
                let base = self.dep_commits.first().or(self.base_commit.as_ref());
                if base.is_some_and(|b| *b != head) {
                    head
                } else {
                    return Err(NodeFailure::new(
                        p,
                        FailureReason::NoChanges,
                        "the work changed no files; set `expectsNoChanges: true` if that is intended",
                    ));
                }
            }
        };
        log.line(LogStream::System, &format!("commit {commit}"));
        self.send(StateChange::Commit {
            node: self.node,
            commit: commit.clone(),
        });
        Ok(commit)
    }

    async fn merge_ri(
        &self,
        git: &Arc<dyn GitOperations>,
        job: &JobSpec,
        commit: &str,
        log: LogSink,
    ) -> PhaseResult {
        let p = Phase::MergeRi;
        let branch = self.snapshot_branch.as_deref().ok_or_else(|| {
            NodeFailure::new(
                p,
                FailureReason::StartupError,
                "the plan has no snapshot branch",
            )
        })?;
        let message = format!(
            "{} merge {} into snapshot",
            self.ctx.options.commit_prefix, job.producer_id
        );
        let tip = git
            .merge_into_branch(
                &self.repo,
                branch,
                commit,
                &message,
                MergeStyle::MergeCommit,
            )
            .await
            .map_err(|e| NodeFailure::git(p, e))?;
        log.line(LogStream::System, &format!("{branch} now at {tip}"));
        Ok(())
    }

    // ----- the snapshot-validation node ------------------------------------------------------

    async fn run_snapshot(&self) -> PhaseResult {
        let git = self.git()?.clone();
        let (Some(snapshot), Some(target)) =
            (self.snapshot_branch.clone(), self.target_branch.clone())
        else {
            return Err(NodeFailure::new(
                Phase::MergeFi,
                FailureReason::StartupError,
                "the plan has no snapshot or target branch",
            ));
        };
        let wt = self.worktree.clone().unwrap_or_else(|| {
            self.worktree_root()
                .join(super::snapshot_worktree_name(&self.plan))
        });
        let start = self
            .phase(Phase::MergeFi, |log| {
                self.snapshot_fi(&git, &snapshot, &target, &wt, log)
            })
            .await?;
        // As for jobs (see `WorktreeStart`): after a reset, setup and verifyRi run again.
        let from = if start == WorktreeStart::Reset && self.resume_from <= Phase::Work {
            Phase::Setup
        } else {
            self.resume_from
        };
        if from <= Phase::Setup
            && (!self.spec.worktree_init.is_empty()
                || !self.spec.additional_symlink_dirs.is_empty())
        {
            self.phase(Phase::Setup, |log| self.setup(&wt, log)).await?;
        }
        if let Some(verify) = self.spec.verify_ri.as_ref().filter(|_| from <= Phase::Work) {
            self.phase(Phase::Work, |log| {
                self.run_spec(Phase::Work, verify, &wt, log)
            })
            .await?;
        }
        let commit = match (self.runs(Phase::Commit), &self.prev_commit) {
            // Resuming the final merge: the validated commit was recorded.
            (false, Some(commit)) => commit.clone(),
            _ => {
                let commit = self
                    .phase(Phase::Commit, |log| self.snapshot_commit(&git, &wt, log))
                    .await?;
                self.send(StateChange::Commit {
                    node: self.node,
                    commit: commit.clone(),
                });
                commit
            }
        };
        self.phase(Phase::MergeRi, |log| {
            self.snapshot_merge(&git, &target, &commit, log)
        })
        .await?;
        Ok(())
    }

    /// Commits what setup and `verifyRi` changed (if anything) on the snapshot worktree's
    /// HEAD. The snapshot branch is not moved: it stays where the validation began, so a
    /// validation that runs again (after a crash) starts from there, and the commit reaches
    /// the target through the final merge.
    async fn snapshot_commit(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        log: LogSink,
    ) -> PhaseResult<String> {
        let p = Phase::Commit;
        let before = git.head(wt).await.map_err(|e| NodeFailure::git(p, e))?;
        let msg = format!("{} snapshot validation", self.ctx.options.commit_prefix);
        match git
            .commit_all(wt, &msg)
            .await
            .map_err(|e| NodeFailure::git(p, e))?
        {
            Some(c) => {
                log.line(
                    LogStream::System,
                    &format!("verification changes committed: {c}"),
                );
                Ok(c)
            }
            None => Ok(before),
        }
    }

    /// The final merge: the validated snapshot onto the target branch.
    async fn snapshot_merge(
        &self,
        git: &Arc<dyn GitOperations>,
        target: &str,
        commit: &str,
        log: LogSink,
    ) -> PhaseResult {
        let msg = format!(
            "{} merge plan {} into {target}",
            self.ctx.options.commit_prefix, self.spec.name
        );
        let tip = git
            .merge_into_branch(&self.repo, target, commit, &msg, MergeStyle::FastForward)
            .await
            .map_err(|e| NodeFailure::git(Phase::MergeRi, e))?;
        log.line(LogStream::System, &format!("{target} now at {tip}"));
        Ok(())
    }

    /// Brings the snapshot worktree up: at the snapshot branch, with the target's new commits
    /// merged in when the target moved since the plan started.
    async fn snapshot_fi(
        &self,
        git: &Arc<dyn GitOperations>,
        snapshot: &str,
        target: &str,
        wt: &Path,
        log: LogSink,
    ) -> PhaseResult<WorktreeStart> {
        let p = Phase::MergeFi;
        let tip = git
            .branch_tip(&self.repo, snapshot)
            .await
            .map_err(|e| NodeFailure::git(p, e))?
            .ok_or_else(|| {
                NodeFailure::new(
                    p,
                    FailureReason::PhaseFailed,
                    format!("snapshot branch `{snapshot}` is missing"),
                )
            })?;
        // Validation that runs again starts from the snapshot as it was, not on what a
        // stopped run of setup or verifyRi left.
        let laid_out = self.lay_out_worktree(git, wt, &tip, false, &log).await?;
        let target_tip = git
            .branch_tip(&self.repo, target)
            .await
            .map_err(|e| NodeFailure::git(p, e))?
            .ok_or_else(|| {
                NodeFailure::new(
                    p,
                    FailureReason::PhaseFailed,
                    format!("target branch `{target}` is missing"),
                )
            })?;
        let head = git.head(wt).await.map_err(|e| NodeFailure::git(p, e))?;
        if !git
            .is_ancestor(&self.repo, &target_tip, &head)
            .await
            .map_err(|e| NodeFailure::git(p, e))?
        {
            log.line(
                LogStream::System,
                &format!("{target} moved to {target_tip}; bringing the snapshot up to date"),
            );
            let merged = git
                .merge_into_worktree(
                    wt,
                    std::slice::from_ref(&target_tip),
                    &format!(
                        "{} update snapshot from target",
                        self.ctx.options.commit_prefix
                    ),
                    self.ctx.resolver.as_deref(),
                )
                .await
                .map_err(|e| NodeFailure::git(p, e))?;
            git.update_branch(&self.repo, snapshot, &merged, Some(&tip))
                .await
                .map_err(|e| NodeFailure::git(p, e))?;
        }
        Ok(laid_out)
    }
}

/// How merge-fi left a job's worktree for the phases after it.
///
/// The rule for a phase that runs again (after Ctrl-C, a crash, a pause or a failure): it runs
/// on the worktree as it was when the phase began. Phases before the commit begin at the
/// merge-fi result, so the worktree is reset to the first dependency's commit (or the base),
/// the other dependencies are merged again and setup, prechecks and work run again (what the
/// earlier ones left is not committed anywhere, so it is made again); phases after the commit
/// begin at the job's commit, so the worktree is reset to that. A reset removes untracked files and
/// keeps ignored ones (installed dependencies, linked folders). The one exception is an agent's
/// work phase that resumes its session: the conversation remembers the edits, so the files are
/// kept and the agent is told its previous run was interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WorktreeStart {
    /// A new worktree.
    Created,
    /// An existing worktree reset to where the phases begin.
    Reset,
    /// An existing worktree kept as it was (an agent resuming its session).
    Kept,
}

#[cfg(unix)]
fn symlink_dir(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(src, dst)
}

#[cfg(windows)]
fn symlink_dir(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_dir(src, dst)
}
