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
use crate::engine::messages::{Hold, Message, NodeFailure, NodeProgress, ProcessReports, RunEnd};
use crate::git::{GitOperations, MergeStyle};
use crate::ids::{now_millis, NodeId, NodeIndex, PlanId};
use crate::inputs::{Inputs, JobInput, INPUTS_VAR};
use crate::plan::{Env, Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
use crate::repository::{AttemptSpecs, LogKey};
use crate::runner::{
    output_tail, HealRequest, Healer, LogSink, LogStream, WorkContext, WorkFailure, WorkRunner,
};
use crate::state::{FailureReason, Heal, Phase, PhaseStatus, PlanMachine, StateChange};

mod agents;
mod dehydrate;
mod job;
mod remote;
mod snapshot;

pub(crate) use remote::execute_order;

use agents::is_sub_agent_of;

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
    /// The plan's folder (the repository, or the working directory of `isolation: none`),
    /// shared by the plan's runs.
    repo: Arc<Path>,
    base_commit: Option<String>,
    target_branch: Option<String>,
    snapshot_branch: Option<String>,
    /// Commits of the dependencies, in the job's order.
    dep_commits: Vec<String>,
    worktree: Option<PathBuf>,
    prev_commit: Option<String>,
    /// `approval: after`, not approved yet: the run stops once its phases passed.
    hold_after: bool,
    /// A split manifest its work leaves turns the job into a composite one (SPEC §12).
    may_split: bool,
    /// A composite job whose sub-jobs all succeeded: the run merges their commits into its
    /// own and goes on from the commit (see [`crate::composite`]).
    composite: bool,
    session_id: Option<String>,
    /// Why the job's last wait ended: its agent's session resumes with this (SPEC §15).
    wake: Option<String>,
    /// The commit a woken (or dehydrated) agent's worktree was saved as when it parked: the
    /// run goes on from there.
    checkpoint: Option<String>,
    /// Where a woken agent's session was dehydrated to: restored before it resumes.
    dehydrated: Option<String>,
    /// The job's cron (SPEC §15), as its agent's tool calls leave it.
    cron: std::sync::Mutex<Option<crate::tools::Cron>>,
    /// The wait the agent's turn ended with, once its work phase ran.
    park: std::sync::Mutex<Option<crate::tools::Park>>,
    /// The job's sub-agents (SPEC §15).
    sub_agents: agents::SubAgents,
    /// The auto-heal this attempt starts with, until it has run.
    heal: std::sync::Mutex<Option<Box<Heal>>>,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<Message>,
    /// Changes not yet sent to the actor: sent before anything slow starts, and with `Done`.
    pending: std::sync::Mutex<Vec<StateChange>>,
    /// The results of the dependencies (SPEC §12), when one of them has an output or a
    /// commit; their file is written under the work folder before the first runner starts.
    inputs: Option<Inputs>,
    /// `inputs` with its file written, shared by the attempt's runners.
    inputs_written: std::sync::Mutex<Option<Arc<Inputs>>>,
    /// Runs on a remote worker for its coordinator (SPEC §16): everything up to the commit,
    /// never merge-ri.
    on_worker: bool,
    /// How many of the node's attempts just before this one were lost with their worker.
    lost_streak: usize,
    /// The job's capacity slot, freed when the run ends.
    _slot: Slot,
}

impl NodeRun {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        ctx: Arc<EngineCtx>,
        machine: &PlanMachine,
        repo: Arc<Path>,
        spec: Arc<PlanSpec>,
        node: NodeIndex,
        gen: usize,
        attempt: u32,
        resume_from: Option<Phase>,
        cancel: CancellationToken,
        tx: mpsc::UnboundedSender<Message>,
        slot: Slot,
        merge_only: Option<&[String]>,
    ) -> Self {
        let record = machine.record();
        let state = &record.state;
        let graph = machine.graph().clone();
        let ns = &state.nodes[node];
        let job = spec.jobs.get(node);
        let parent = job.map(|j| j.producer_id.as_str());
        // A composite job merges only its sub-jobs that succeeded (and, after a best-of-N
        // pick, only the picked ones); its other dependencies are in its own commit already.
        // A sub-agent's commit is merged into its parent's worktree when the parent's session
        // resumes (see `SubAgents`), not by merge-fi.
        let merged = |d: NodeIndex| match spec.jobs.get(d) {
            Some(child)
                if child.extra.sub_agent.is_some() && child.extra.parent.as_deref() == parent =>
            {
                false
            }
            Some(child) if parent.is_some() && child.extra.parent.as_deref() == parent => {
                state.nodes[d].status == crate::state::NodeStatus::Succeeded
                    && merge_only.is_none_or(|only| only.contains(&child.producer_id))
            }
            _ => true,
        };
        // The dependencies in the job's order, once: commits, inputs and sub-agents come
        // from them. A job in place whose dependencies surely left no result and that has no
        // sub-agents needs none of them (a plan of many small commands saves the list).
        let needs_deps = spec.isolation == Isolation::Worktree
            || graph.dependencies(node).any(|d| machine.may_have_result(d))
            || job.is_some_and(|j| matches!(j.work, WorkSpec::Agent(_)));
        let mut deps = if needs_deps {
            graph.ordered_dependencies(node)
        } else {
            Vec::new()
        };
        deps.retain(|&d| !graph.is_snapshot(d));
        let dep_commits = if spec.isolation == Isolation::Worktree {
            deps.iter()
                .filter(|&&d| merged(d))
                .filter_map(|&d| state.nodes[d].extra.commit.clone())
                .collect()
        } else {
            Vec::new()
        };
        let inputs = deps
            .iter()
            .any(|&d| machine.may_have_result(d))
            .then(|| dependency_inputs(&spec, state, &deps))
            .flatten();
        let composite = job.is_some_and(|j| {
            graph.has_sub_jobs(node)
                && graph.dependencies(node).any(|d| {
                    spec.jobs.get(d).and_then(|s| s.extra.parent.as_deref())
                        == Some(j.producer_id.as_str())
                        && !is_sub_agent_of(&spec, d, &j.producer_id)
                })
        });
        let sub_agents = agents::SubAgents::of(&spec, state, node, &deps);
        let may_split = job.is_some_and(|j| crate::composite::may_split(&spec, j));
        NodeRun {
            inputs,
            inputs_written: std::sync::Mutex::new(None),
            plan: state.id.clone(),
            node_id: ns.id.clone(),
            attempt,
            // A composite job's own work is done: it goes on from its commit at the earliest.
            resume_from: match resume_from.unwrap_or(Phase::MergeFi) {
                p if composite => p.max(Phase::Commit),
                p => p,
            },
            repo,
            base_commit: state.base_commit.clone(),
            target_branch: state.target_branch.clone(),
            snapshot_branch: state.snapshot_branch.clone(),
            dep_commits,
            worktree: ns.extra.worktree.clone(),
            prev_commit: ns.extra.commit.clone(),
            hold_after: !ns.extra.approved
                && job.is_some_and(|j| j.extra.approval == Some(crate::plan::Approval::After)),
            may_split,
            composite,
            session_id: ns.extra.session_id.clone(),
            wake: ns.extra.tools.as_ref().and_then(|t| t.wake.clone()),
            checkpoint: ns
                .extra
                .tools
                .as_ref()
                .filter(|t| t.wake.is_some() || t.dehydrated.is_some())
                .and_then(|t| t.checkpoint.clone()),
            dehydrated: ns.extra.tools.as_ref().and_then(|t| t.dehydrated.clone()),
            cron: std::sync::Mutex::new(ns.extra.tools.as_ref().and_then(|t| t.cron.clone())),
            park: std::sync::Mutex::new(None),
            sub_agents,
            heal: std::sync::Mutex::new(ns.last_attempt().and_then(|a| a.extra.heal.clone())),
            ctx,
            spec,
            graph,
            node,
            gen,
            cancel,
            tx,
            // A phase start and end, and its output or session: one allocation.
            pending: std::sync::Mutex::new(Vec::with_capacity(4)),
            on_worker: false,
            lost_streak: ns
                .attempts
                .iter()
                .rev()
                .skip(1)
                .take_while(|a| a.extra.failure_reason == Some(FailureReason::Crashed))
                .count(),
            _slot: slot,
        }
    }

    /// Runs the attempt and reports its end to the actor.
    pub(crate) async fn execute(self: Box<Self>) {
        // Boxed: the task then holds a pointer, not the largest of three state machines, which
        // tokio would copy on spawn and on completion.
        let result = if self.graph.is_snapshot(self.node) {
            Box::pin(self.run_snapshot())
                .await
                .map(|()| RunEnd::Finished)
        } else if self.spec.isolation == Isolation::Worktree {
            match self.executor() {
                Some(executor) => Box::pin(self.run_remote(executor)).await,
                None => Box::pin(self.run_job()).await,
            }
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

    /// The dependencies' results for this attempt's runners, their file written under `dir`
    /// the first time a runner needs it.
    fn inputs_in(&self, dir: &Path, phase: Phase) -> PhaseResult<Option<Arc<Inputs>>> {
        let Some(inputs) = &self.inputs else {
            return Ok(None);
        };
        let mut written = self
            .inputs_written
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(done) = &*written {
            return Ok(Some(done.clone()));
        }
        let mut inputs = inputs.clone();
        inputs.write(dir, self.node_id.as_str()).map_err(|e| {
            NodeFailure::new(
                phase,
                FailureReason::StartupError,
                format!(
                    "cannot write the job's inputs file under {}: {e}",
                    dir.join(".orchestrator").join("inputs").display()
                ),
            )
        })?;
        let done = Arc::new(inputs);
        *written = Some(done.clone());
        Ok(Some(done))
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
            prechecks: job.extra.prechecks.as_deref().cloned(),
            postchecks: job.extra.postchecks.as_deref().cloned(),
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
        let reports = ProcessReports {
            tx: self.tx.clone(),
            gen: self.gen,
            node: self.node,
        };
        // Output goes to the store in chunks as it comes, not held until the phase ends.
        // Secrets of the host and of the plan's, job's and specs' env never reach the log,
        // the log events or the failure message.
        let log = LogSink::for_phase(
            LogKey {
                plan: self.plan.clone(),
                node: self.node_id.clone(),
                phase,
                attempt: self.attempt,
            },
            self.node,
            self.ctx.events.clone(),
            reports,
            self.ctx.repository.clone(),
            self.ctx.job_redactor(&self.spec, self.job()),
        );
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
        let at = now_millis();
        let mut buffer = self.buffer();
        // A start not reported yet (the phase ended on its first poll and nothing came in
        // between) goes with the end as one change.
        let unreported = match buffer.last() {
            Some(&StateChange::PhaseStarted {
                node,
                phase: started,
                at,
            }) if node == self.node && started == phase => Some(at),
            _ => None,
        };
        let change = match unreported {
            Some(started_at) => {
                buffer.pop();
                StateChange::PhaseRan {
                    node: self.node,
                    phase,
                    status,
                    started_at,
                    at,
                    error,
                }
            }
            None => StateChange::PhaseEnded {
                node: self.node,
                phase,
                status,
                at,
                error,
            },
        };
        buffer.push(change);
        drop(buffer);
        result
    }

    fn env(&self) -> Env {
        let mut env = self.spec.env.clone();
        if let Some(job) = self.job() {
            env.extend(job.extra.env.iter().map(|(k, v)| (k.clone(), v.clone())));
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
        if spec.is_job_only() {
            // The engine kept the wait (the node waited on its timer before it started), or
            // the work is composite: its controller runs it as sub-jobs.
            return Ok(());
        }
        let runner = self.runner_for(spec, phase)?;
        let job = self.job();
        let inputs = self.inputs_in(dir, phase)?;
        let mut env = self.env();
        if let Some(file) = inputs.as_ref().and_then(|i| i.file.as_ref()) {
            env.insert(INPUTS_VAR.to_owned(), file.to_string_lossy().into_owned());
        }
        let mut ctx = WorkContext {
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
            env,
            cancel: self.cancel.clone(),
            log,
            session_id: self.session_id.clone(),
            continues_unfinished: phase == Phase::Work && self.continues_agent_session(),
            inputs,
            may_split: phase == Phase::Work && self.may_split,
            tools: None,
            wake: self
                .sub_agents
                .wake_message(self.wake.as_deref())
                .filter(|_| phase == Phase::Work),
        };
        self.heal_first(phase, spec, &ctx).await?;
        let result = self
            .run_with_tools(phase, spec, runner.as_ref(), &mut ctx)
            .await?;
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
                // The work's output is the job's result (checks and setup have none); it is
                // journaled and shown, so redacted like the log.
                if let (Phase::Work, Some(text)) = (phase, out.output) {
                    self.send(StateChange::Output {
                        node: self.node,
                        text: ctx.log.redact(output_tail(&text)).into_owned(),
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
        let job_ok = self.job().is_none_or(|j| j.extra.auto_heal != Some(false));
        let spec_ok = spec.on_failure().and_then(|o| o.no_auto_heal) != Some(true);
        let phase_ok = matches!(
            phase,
            Phase::Setup | Phase::Prechecks | Phase::Work | Phase::Postchecks
        );
        (kind_ok && job_ok && spec_ok && phase_ok && !self.cancel.is_cancelled()).then_some(healer)
    }

    /// Runs `spec` through `runner`; an agent's work gets its own tools (SPEC §15) when the
    /// engine serves them, and what the agent asked of them is taken when the run ends: a
    /// cron change (journaled) and the wait its turn ended with ([`NodeRun::take_park`]).
    async fn run_with_tools(
        &self,
        phase: Phase,
        spec: &WorkSpec,
        runner: &dyn WorkRunner,
        ctx: &mut WorkContext,
    ) -> PhaseResult<crate::runner::WorkResult> {
        let server = self
            .ctx
            .tools
            .as_ref()
            .filter(|_| phase == Phase::Work && matches!(spec, WorkSpec::Agent(_)));
        let Some(server) = server else {
            return Ok(runner.run(spec, ctx).await);
        };
        let mut job = crate::tools::ToolJob::new(
            self.plan.clone(),
            self.node_id.clone(),
            ctx.producer_id.clone(),
        );
        job.attempt = self.attempt;
        job.dir = ctx.dir.clone();
        job.cron = self.cron.lock().unwrap_or_else(|e| e.into_inner()).clone();
        job.depth = self.sub_agents.depth;
        job.agents = self.sub_agents.names.clone();
        if let Some(seconds) = self.spec.wait_threshold {
            job.wait_threshold = std::time::Duration::from_secs(seconds);
        }
        let endpoint = server.open(job).map_err(|e| {
            NodeFailure::new(
                phase,
                FailureReason::StartupError,
                format!("cannot open the agent's tools: {e}"),
            )
        })?;
        ctx.tools = Some(endpoint.clone());
        let result = runner.run(spec, ctx).await;
        let outcome = server.close(&endpoint);
        let mut cron = self.cron.lock().unwrap_or_else(|e| e.into_inner());
        let mut changed = outcome.cron.is_some();
        if let Some(change) = outcome.cron {
            *cron = match change {
                crate::tools::CronChange::Set(c) => Some(c),
                _ => None,
            };
        }
        // A wait the agent asked for, else its sub-agents still at work (a job is not done
        // before they are), else its cron's next firing: the turn ended to wait.
        let park = match (&result, outcome.park, cron.as_mut()) {
            (Err(_), _, _) => None,
            (Ok(_), Some(park), _) => Some(park),
            (Ok(_), None, _) if self.sub_agents.unfinished => {
                Some(crate::tools::Park::Agents(crate::tools::AgentCall::Wait {
                    agents: Vec::new(),
                }))
            }
            (Ok(_), None, Some(c)) => {
                changed = true;
                Some(c.arm(now_millis()).map_err(|e| {
                    NodeFailure::new(phase, FailureReason::PhaseFailed, format!("cron: {e}"))
                })?)
            }
            (Ok(_), None, None) => None,
        };
        if changed {
            self.send(StateChange::Cron {
                node: self.node,
                cron: cron.clone(),
            });
        }
        *self.park.lock().unwrap_or_else(|e| e.into_inner()) = park;
        Ok(result)
    }

    /// The wait the agent's turn ended with: the run stops here and the node parks.
    fn take_park(&self) -> Option<crate::tools::Park> {
        self.park.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Prechecks and work, from phase `from` on.
    async fn checks_and_work(&self, dir: &Path, from: Phase) -> PhaseResult {
        let Some(job) = self.job() else { return Ok(()) };
        if let Some(pre) = job
            .extra
            .prechecks
            .as_ref()
            .filter(|_| from <= Phase::Prechecks)
        {
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

    async fn run_in_place(&self) -> PhaseResult<RunEnd> {
        self.save_specs().await;
        let dir = self.repo.clone();
        self.checks_and_work(&dir, self.resume_from).await?;
        if let Some(park) = self.take_park() {
            return Ok(RunEnd::Held(Hold::Park(park)));
        }
        if let Some(manifest) = self.take_split_manifest(&dir, self.resume_from)? {
            return Ok(RunEnd::Held(Hold::Split(manifest)));
        }
        if self.composes() {
            return Ok(RunEnd::Held(Hold::Compose));
        }
        if let Some(post) = self
            .job()
            .and_then(|j| j.extra.postchecks.as_ref())
            .filter(|_| self.runs(Phase::Postchecks))
        {
            self.phase(Phase::Postchecks, |log| {
                self.run_spec(Phase::Postchecks, post, &dir, log)
            })
            .await?;
        }
        Ok(self.after_the_phases())
    }

    /// Whether this run is the start of composite work (a team or a pipeline): its commit
    /// made, the controller is asked for its first sub-jobs.
    pub(super) fn composes(&self) -> bool {
        !self.composite && self.job().is_some_and(|j| j.work.is_composite())
    }

    /// How a run whose phases passed goes on: an `approval: after` job (SPEC §12) not yet
    /// approved is held, its commit moving on (merge-ri, dependents) only once a person
    /// approves it; any other run goes to its end.
    pub(super) fn after_the_phases(&self) -> RunEnd {
        if self.hold_after {
            RunEnd::Held(Hold::Approval)
        } else {
            RunEnd::Finished
        }
    }

    /// The split manifest the work left in `dir` (SPEC §12), taken out of the folder so that
    /// it is not committed; `None` when the job may not split, its work did not run in this
    /// attempt, or it left none.
    pub(super) fn take_split_manifest(
        &self,
        dir: &Path,
        from: Phase,
    ) -> PhaseResult<Option<String>> {
        if !self.may_split || from > Phase::Work {
            return Ok(None);
        }
        let path = dir.join(crate::composite::MANIFEST_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(NodeFailure::new(
                    Phase::Work,
                    FailureReason::PhaseFailed,
                    format!("cannot read the split manifest {}: {e}", path.display()),
                ))
            }
        };
        std::fs::remove_file(&path).map_err(|e| {
            NodeFailure::new(
                Phase::Work,
                FailureReason::PhaseFailed,
                format!("cannot remove the split manifest {}: {e}", path.display()),
            )
        })?;
        Ok(Some(text))
    }
}

/// The results of the dependencies `deps` (in the job's order); `None` when none of them has
/// an output or a commit (most `isolation: none` plans: nothing is written then).
fn dependency_inputs(
    spec: &PlanSpec,
    state: &crate::state::PlanState,
    deps: &[NodeIndex],
) -> Option<Inputs> {
    let has_result = |d: NodeIndex| {
        let dep = &state.nodes[d];
        dep.extra.commit.is_some() || dep.output().is_some()
    };
    if !deps.iter().any(|&d| has_result(d)) {
        return None;
    }
    let jobs = deps
        .iter()
        .filter_map(|&d| {
            let job = spec.jobs.get(d)?;
            let dep = &state.nodes[d];
            Some(JobInput {
                producer_id: job.producer_id.clone(),
                output: dep.output().map(str::to_owned),
                commit: dep.extra.commit.clone(),
            })
        })
        .collect();
    Some(Inputs { jobs, file: None })
}
