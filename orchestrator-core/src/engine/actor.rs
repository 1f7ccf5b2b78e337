//! The plan actor: the single owner of a plan's state machine.
//!
//! Each turn it handles every message waiting (commands, node progress, node completions),
//! schedules ready nodes within capacity, hands the turn's changes to the journal writer as one
//! batch, publishes events, and only then spawns the newly scheduled nodes. The nodes do not
//! wait for the append: the store always holds a prefix of what happened, and a node whose
//! start a crash lost runs again.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::capacity::{Capacity, Slot};
use crate::engine::context::EngineCtx;
use crate::engine::messages::{
    ArchiveReport, HostRequest, Message, NodeProgress, Reply, RetryRequest,
};
use crate::engine::pipeline::NodeRun;
use crate::engine::queue::ReadyQueue;
use crate::engine::writer::{AfterDurable, JournalWriter};
use crate::error::{Error, Result};
use crate::events::OrchestratorEvent;
use crate::git::GitError;
use crate::ids::{now_millis, NodeIndex, PlanId};
use crate::plan::{Isolation, PlanGraph, PlanSpec};
use crate::repository::Lease;
use crate::state::{
    ApplyError, FailureReason, NodeStatus, OutboxEntry, Phase, PlanMachine, PlanRecord, PlanStatus,
    StateChange,
};
use crate::view::resolve as resolve_job;

mod agents;
mod composite;
mod done;
mod lifecycle;
mod reshape;
mod waiting;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Cancel,
    Pause,
    ForceFail,
}

#[derive(Debug)]
struct Running {
    cancel: CancellationToken,
    stop: Option<StopReason>,
}

pub(crate) struct PlanActor {
    ctx: Arc<EngineCtx>,
    id: PlanId,
    machine: PlanMachine,
    spec: Arc<PlanSpec>,
    /// The plan's folder, shared with its runs (one allocation per plan, not per job).
    repo: Arc<std::path::Path>,
    tx: mpsc::UnboundedSender<Message>,
    rx: mpsc::UnboundedReceiver<Message>,
    queue: ReadyQueue,
    running: Vec<Option<Running>>,
    active: usize,
    max_parallel: usize,
    /// A capacity slot the wait below delivered, used (or given back) by the next dispatch.
    slot: Option<Slot>,
    /// The wait for a capacity slot, when a ready node found none free: polled beside the
    /// commands, so the actor's turns go on, and kept across turns so it keeps its place in a
    /// semaphore's queue and a slot-file backoff is not restarted.
    waiting_slot: Option<SlotWait>,
    /// Runs launched this turn, spawned once the turn's changes went to the writer. Boxed
    /// where they are made: a run is large, and a box moves as a pointer into this list, out of
    /// it and into its task (measured: unboxed, each job paid several copies of its run).
    #[allow(clippy::vec_box)]
    to_spawn: Vec<Box<NodeRun>>,
    writer: JournalWriter,
    /// Status last handed to the writer.
    sent_status: PlanStatus,
    chain_pending: bool,
    /// Set by the first start/resume of this actor: an opened plan waits to be told to run.
    activated: bool,
    /// The changes of a start stored with the plan's creation, whose events the first turn
    /// publishes (they are not appended: the store has them).
    started: Vec<OutboxEntry>,
    closing: Option<Reply<()>>,
    /// Replies to host requests, sent at the end of the turn.
    after_turn: Vec<AfterDurable>,
    /// Worktree removals in flight; awaited before the plan is recorded as ended.
    cleanups: tokio::task::JoinSet<()>,
    /// Removals were spawned since nodes were last started (see the end of `turn`).
    cleanups_new: bool,
    /// Time of the current turn: one clock read per turn, not per transition.
    clock: u64,
    /// Node re-indexings of reshapes that moved running nodes, oldest first: `remaps[g][n]` is
    /// where node `n` of generation `g` went. The current generation is `remaps.len()`.
    remaps: Vec<Vec<Option<NodeIndex>>>,
    /// What the plan's attempts reported so far, kept as metrics arrive (for its budget).
    usage: crate::usage::Usage,
    /// Deadlines of the timer jobs waiting.
    timers: waiting::Timers,
    /// Some job may be held before it starts ([`waiting::plan_holds`]).
    holds: bool,
    /// Composite jobs whose sub-jobs may all have ended: their controller is asked this turn.
    composites: Vec<NodeIndex>,
    /// Composite jobs their controller found done, with the output it gave and the sub-jobs
    /// to merge: they are queued to merge their sub-jobs' commits and go on.
    composite_done: std::collections::HashMap<NodeIndex, composite::Finish>,
}

/// A wait for a capacity slot; dropping it gives up the wait ([`Capacity::acquire`] is
/// cancel-safe). The mutex is never locked (only `get_mut`): it makes the actor `Sync`, as
/// its `run` future must be `Send` while holding `&self` across awaits, without a task.
type SlotWait = std::sync::Mutex<BoxFuture<'static, Slot>>;

/// Waits for a slot of `capacity`. A failure (a slot folder that became unusable) is logged
/// and tried again after a pause, since the ready nodes can do nothing but wait for a slot.
fn wait_for_slot(capacity: Arc<dyn Capacity>) -> SlotWait {
    let wait = async move {
        loop {
            match capacity.acquire().await {
                Ok(slot) => return slot,
                Err(e) => {
                    tracing::error!(error = %e, "cannot take a capacity slot; again in a second");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    };
    std::sync::Mutex::new(Box::pin(wait))
}

/// The slot `waiting` delivers; never, when nothing waits (that `select!` branch is disabled
/// then).
async fn next_slot(waiting: &mut Option<SlotWait>) -> Slot {
    match waiting {
        Some(wait) => {
            wait.get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .await
        }
        None => std::future::pending().await,
    }
}

/// The actor's parallelism limit from `maxParallel` (absent or 0: only the global capacity).
fn max_parallel_of(spec: &PlanSpec) -> usize {
    match spec.max_parallel {
        None | Some(0) => usize::MAX,
        Some(n) => n as usize,
    }
}

impl PlanActor {
    /// The actor of a plan created or opened in `machine`. `start` holds the changes of a
    /// start stored with the plan's creation ([`crate::Orchestrator::run`]): the plan is
    /// active at once, and their events, and the status change from `pending`, are published
    /// in its first turn, as a start's would be.
    pub(crate) fn new(
        ctx: Arc<EngineCtx>,
        mut machine: PlanMachine,
        lease: Lease,
        start: Option<Vec<OutboxEntry>>,
        tx: mpsc::UnboundedSender<Message>,
        rx: mpsc::UnboundedReceiver<Message>,
    ) -> (PlanActor, watch::Receiver<PlanStatus>) {
        let record = machine.record();
        let id = record.state.id.clone();
        let spec = record.spec.clone();
        let repo = Arc::from(record.state.repo.as_path());
        let holds = waiting::plan_holds(&spec);
        let max_parallel = max_parallel_of(&spec);
        let n = record.state.nodes.len();
        // Jobs found running belong to a process that is gone: a failed attempt, re-queued.
        if let Err(e) = machine.recover_crashed(now_millis()) {
            tracing::error!(error = %e, "could not recover crashed jobs");
        }
        let status = machine.plan_status();
        let usage = crate::usage::Usage::of_plan(machine.record());
        let (status_tx, status_rx) = watch::channel(status);
        // A plan stored started was `pending` until then, for the writer's status event.
        let published = if start.is_some() {
            PlanStatus::Pending
        } else {
            status
        };
        let writer = JournalWriter::spawn(ctx.clone(), id.clone(), lease, status_tx, published);
        let mut actor = PlanActor {
            ctx,
            id,
            machine,
            spec,
            repo,
            tx,
            rx,
            queue: ReadyQueue::default(),
            running: (0..n).map(|_| None).collect(),
            active: 0,
            max_parallel,
            slot: None,
            waiting_slot: None,
            to_spawn: Vec::new(),
            writer,
            sent_status: published,
            chain_pending: false,
            activated: start.is_some(),
            started: start.unwrap_or_default(),
            closing: None,
            after_turn: Vec::new(),
            cleanups: tokio::task::JoinSet::new(),
            cleanups_new: false,
            clock: now_millis(),
            remaps: Vec::new(),
            usage,
            timers: waiting::Timers::default(),
            holds,
            composites: Vec::new(),
            composite_done: Default::default(),
        };
        // Split jobs and parent agents waiting for sub-agents that ended before a restart go on.
        actor.composites = (0..n)
            .filter(|&i| {
                let node = &actor.machine.record().state.nodes[i];
                node.status == NodeStatus::CompletedSplit
                    || node
                        .extra
                        .waiting
                        .as_ref()
                        .is_some_and(|w| w.waiting_for == crate::state::WaitingFor::Children)
            })
            .collect();
        actor.timers = waiting::Timers::of(actor.machine.record());
        let graph = actor.machine.graph().clone();
        for node in actor.machine.ready_nodes() {
            actor.queue.push(&graph, node);
        }
        actor.machine.drain_ready().for_each(drop);
        (actor, status_rx)
    }

    pub(crate) async fn run(mut self) {
        let started = std::mem::take(&mut self.started);
        if self.ctx.events.is_observed() {
            for (change, from) in &started {
                self.publish(change, *from);
            }
        }
        drop(started); // not held for the plan's life
        self.turn().await;
        loop {
            tokio::select! {
                msg = self.rx.recv() => match msg {
                    Some(msg) => {
                        self.clock = now_millis();
                        self.handle(msg).await
                    }
                    None => break,
                },
                slot = next_slot(&mut self.waiting_slot), if self.waiting_slot.is_some() => {
                    self.waiting_slot = None;
                    self.slot = Some(slot);
                }
                // The turn below fires whatever is due.
                () = self.timers.next(), if !self.timers.is_empty() => {}
            }
            // Batch whatever else is waiting into this turn (one store append).
            self.clock = now_millis();
            for _ in 0..4096 {
                match self.rx.try_recv() {
                    Ok(msg) => self.handle(msg).await,
                    Err(_) => break,
                }
            }
            self.turn().await;
            if self.closing.is_some() && self.active == 0 {
                break;
            }
        }
        // Everything handed to the writer is durable and the lease released before `close`
        // returns, so another owner can take the plan over at once.
        self.writer.finish().await;
        if let Some(reply) = self.closing.take() {
            let _ = reply.send(Ok(()));
        }
    }

    fn transition_error(&self, e: ApplyError) -> Error {
        Error::Transition {
            plan: self.id.clone(),
            source: e,
        }
    }

    fn invalid(&self, problem: crate::error::StateProblem) -> Error {
        Error::InvalidState {
            plan: self.id.clone(),
            problem,
        }
    }

    async fn handle(&mut self, msg: Message) {
        match msg {
            Message::Host(request) => self.handle_host(request).await,
            Message::Node(progress) => self.handle_node(progress),
            Message::ChainSatisfied => {
                self.chain_pending = false;
                if let Err(e) = self.begin().await {
                    tracing::error!(error = %e, "chained plan could not start");
                }
            }
        }
    }

    async fn handle_host(&mut self, request: HostRequest) {
        match request {
            HostRequest::Start { reply } => {
                let r = self.start().await;
                self.reply_after_turn(reply, r);
            }
            HostRequest::Pause {
                stop_running,
                reply,
            } => {
                let r = self.pause(stop_running);
                self.reply_after_turn(reply, r);
            }
            HostRequest::Resume { reply } => {
                let r = self.resume().await;
                self.reply_after_turn(reply, r);
            }
            HostRequest::Cancel { reply } => {
                let r = self.cancel();
                self.reply_after_turn(reply, r);
            }
            HostRequest::Retry { request, reply } => {
                let r = self.retry(request).await;
                self.reply_after_turn(reply, r);
            }
            HostRequest::ForceFail { job, reply } => {
                let r = self.force_fail(&job);
                self.reply_after_turn(reply, r);
            }
            HostRequest::Approve { job, reply } => {
                let r = self.approve(&job);
                self.reply_after_turn(reply, r);
            }
            HostRequest::Reject { job, reason, reply } => {
                let r = self.reject(&job, reason);
                self.reply_after_turn(reply, r);
            }
            HostRequest::Answer { job, answer, reply } => {
                let r = self.answer(&job, answer);
                self.reply_after_turn(reply, r);
            }
            HostRequest::Recover { reply } => {
                let r = self.recover().await;
                self.reply_after_turn(reply, r);
            }
            HostRequest::Archive { reply } => {
                let r = self.archive().await;
                self.reply_after_turn(reply, r);
            }
            HostRequest::Snapshot { reply } => {
                let _ = reply.send(Ok(self.machine.record().clone()));
            }
            HostRequest::Close { pause, reply } => {
                if pause && (self.active > 0 || !self.machine.plan_status().is_terminal()) {
                    let _ = self.pause(true);
                } else {
                    self.stop_all(StopReason::Pause);
                }
                self.closing = Some(reply);
            }
            HostRequest::Edit { edits, reply } => {
                let r = self.edit(&edits);
                self.reply_after_turn(reply, r);
            }
            HostRequest::Finalize { reply } => {
                let r = self.finalize();
                self.reply_after_turn(reply, r);
            }
        }
    }

    fn handle_node(&mut self, progress: NodeProgress) {
        match progress {
            NodeProgress::Changes { gen, mut changes } => {
                self.translate_changes(gen, &mut changes);
                self.progress(changes);
            }
            NodeProgress::Done {
                gen,
                node,
                mut changes,
                result,
            } => {
                let before = self.usage;
                self.translate_changes(gen, &mut changes);
                self.progress(changes);
                match self.translate(gen, node) {
                    Some(node) => self.on_done(node, result),
                    None => tracing::error!(node, "completion of a node that no longer exists"),
                }
                self.check_budget(before);
            }
        }
    }

    /// Answers a command once this turn's changes are persisted and the status published, so
    /// a caller that goes on to `wait` sees the effect of its command.
    fn reply_after_turn<T: Send + Sync + 'static>(&mut self, reply: Reply<T>, result: Result<T>) {
        self.after_turn.push(Box::new(move || {
            let _ = reply.send(result);
        }));
    }

    // ----- node completion -----------------------------------------------------------------

    /// Pauses the plan when the attempt that just ended took its usage from below its budget
    /// to it (SPEC §12): nothing running is stopped; a person resumes it (or raises the
    /// budget) and it is not paused again for the same limit.
    fn check_budget(&mut self, before: crate::usage::Usage) {
        let Some(budget) = self.spec.budget else {
            return;
        };
        if budget.reached_by(&before) || !budget.reached_by(&self.usage) {
            return;
        }
        if let Err(e) = self.machine.pause(self.clock) {
            tracing::error!(error = %e, "could not pause the plan at its budget");
            return;
        }
        let (plan, usage) = (self.id.clone(), self.usage);
        self.ctx
            .events
            .emit_with(|| OrchestratorEvent::BudgetReached {
                plan,
                usage,
                budget,
            });
    }

    /// With `cleanUpSuccessfulWork`, removes worktrees whose commits every consumer has taken,
    /// and once the snapshot node succeeded, its worktree and branch. Runs after the success is
    /// recorded, so a crash in between leaves only an orphan, never a lost branch the re-run
    /// needs.
    fn clean_up_after(&mut self, n: NodeIndex) {
        if !self.spec.cleans_up() || self.spec.isolation != Isolation::Worktree {
            return;
        }
        let Some(git) = self.ctx.git.clone() else {
            return;
        };
        let graph = self.machine.graph().clone();
        if graph.is_snapshot(n) {
            let state = &self.machine.record().state;
            let (repo, branch) = (state.repo.clone(), state.snapshot_branch.clone());
            let path = state.nodes[n].extra.worktree.clone();
            if path.is_some() {
                let _ = self.forget_worktree(n);
            }
            self.cleanups_new = true;
            self.cleanups.spawn(
                async move {
                    if let Some(path) = path {
                        if let Err(e) = git.remove_worktree(&repo, &path).await {
                            tracing::warn!(error = %e, "could not remove the snapshot worktree");
                        }
                    }
                    if let Some(branch) = branch {
                        if let Err(e) = git.delete_branch(&repo, &branch).await {
                            tracing::warn!(error = %e, "could not delete the snapshot branch");
                        }
                    }
                }
                .in_current_span(),
            );
            return;
        }
        let record = self.machine.record();
        let consumed = |d: NodeIndex| {
            graph.dependents(d).all(|x| {
                graph.is_snapshot(x) || record.state.nodes[x].status == NodeStatus::Succeeded
            })
        };
        let mut done: Vec<(NodeIndex, PathBuf)> = Vec::new();
        for d in graph.dependencies(n).chain(std::iter::once(n)) {
            if graph.is_snapshot(d) {
                continue;
            }
            if let Some(path) = &record.state.nodes[d].extra.worktree {
                if record.state.nodes[d].status == NodeStatus::Succeeded && consumed(d) {
                    done.push((d, path.clone()));
                }
            }
        }
        let repo = record.state.repo.clone();
        for (d, path) in done {
            let (git, repo) = (git.clone(), repo.clone());
            // Mark it gone now so it is not removed twice; the removal itself runs aside.
            let _ = self.forget_worktree(d);
            self.cleanups_new = true;
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

    // ----- scheduling and persistence ------------------------------------------------------

    async fn turn(&mut self) {
        if !self.timers.is_empty() {
            self.fire_due_timers();
        }
        if !self.composites.is_empty() {
            self.check_composites();
        }
        let graph = self.machine.graph().clone();
        // A job that must wait first (approval, timer) is held as soon as it is ready, not
        // when a slot frees: its wait does not queue behind running jobs.
        if self.holds && self.can_dispatch() {
            let ready: Vec<NodeIndex> = self.machine.drain_ready().collect();
            for n in ready {
                if !self.held(n) {
                    self.queue.push(&graph, n);
                }
            }
        }
        for n in self.machine.drain_ready() {
            self.queue.push(&graph, n);
        }
        while self.cleanups.try_join_next().is_some() {}
        self.dispatch();
        if self.active == 0 && self.machine.plan_status().is_terminal() {
            while self.cleanups.join_next().await.is_some() {}
            if let Err(e) = self.machine.end_if_terminal(self.clock) {
                tracing::error!(error = %e, "could not record the end of the plan");
            }
        }
        self.flush();
        // Removals spawned this turn begin before the nodes it starts: a removal announces
        // at once that its worktree is coming to the pool, and a new job's worktree waits
        // for that rather than check out afresh. Spawned last, a node's task would run first
        // (the runtime runs the newest task next).
        if std::mem::take(&mut self.cleanups_new) && !self.to_spawn.is_empty() {
            tokio::task::yield_now().await;
        }
        // Nodes start without waiting for the append: the journal stays a prefix of what
        // happened, and a node whose start is lost in a crash simply runs again.
        for run in self.to_spawn.drain(..) {
            let span = tracing::info_span!("node", node = run.node, node_id = %run.node_id);
            tokio::spawn(run.execute().instrument(span));
        }
    }

    fn can_dispatch(&self) -> bool {
        let s = &self.machine.record().state;
        self.activated
            && s.started_at.is_some()
            && !s.paused
            && !s.canceled
            && !s.archived
            && !self.chain_pending
            && self.closing.is_none()
            && !self.writer.is_failing()
    }

    fn dispatch(&mut self) {
        // A slot delivered by the wait is used now or dropped at the end: held idle it would
        // keep other plans (and, with machine slots, other processes) from running a job.
        let mut spare = self.slot.take();
        if !self.can_dispatch() {
            return;
        }
        while self.active < self.max_parallel {
            let Some(n) = self.queue.pop(self.machine.graph()) else {
                break;
            };
            match self.machine.status_of(n) {
                NodeStatus::Ready => {}
                NodeStatus::CompletedSplit
                    if self.running[n].is_none() && self.composite_done.contains_key(&n) => {}
                _ => continue,
            }
            if self.holds && self.held(n) {
                continue;
            }
            let slot = match spare.take() {
                Some(slot) => slot,
                None => match self.ctx.capacity.try_acquire() {
                    Ok(Some(slot)) => slot,
                    full_or_failed => {
                        if let Err(e) = full_or_failed {
                            tracing::warn!(error = %e, "cannot take a capacity slot; waiting");
                        }
                        let graph = self.machine.graph().clone();
                        self.queue.push(&graph, n);
                        if self.waiting_slot.is_none() {
                            self.waiting_slot = Some(wait_for_slot(self.ctx.capacity.clone()));
                        }
                        break;
                    }
                },
            };
            if let Err(e) = self.launch(n, slot) {
                tracing::error!(node = n, error = %e, "could not start node");
            }
        }
    }

    fn launch(&mut self, n: NodeIndex, slot: Slot) -> Result<(), ApplyError> {
        let at = self.clock;
        let mut merge_only = None;
        let (attempt, resume_from) = if self.machine.status_of(n) == NodeStatus::CompletedSplit {
            let started = self.machine.continue_composite(n, at)?;
            if let Some(finish) = self.composite_done.remove(&n) {
                if let Some(text) = finish.output {
                    self.machine
                        .record_change(StateChange::Output { node: n, text })?;
                }
                merge_only = finish.only;
            }
            started
        } else {
            if self.machine.has_open_attempt(n) {
                self.machine.schedule(n, at)?;
                self.machine.continue_attempt(n, at)?
            } else {
                self.machine.launch(n, at)?
            }
        };
        let cancel = CancellationToken::new();
        let run = Box::new(NodeRun::new(
            self.ctx.clone(),
            &self.machine,
            self.repo.clone(),
            self.spec.clone(),
            n,
            self.remaps.len(),
            attempt,
            resume_from,
            cancel.clone(),
            self.tx.clone(),
            slot,
            merge_only.as_deref(),
        ));
        self.running[n] = Some(Running { cancel, stop: None });
        self.active += 1;
        self.to_spawn.push(run);
        Ok(())
    }

    /// Hands this turn's changes, status and replies to the journal writer, publishing the
    /// changes' events now (live progress does not wait for the disk).
    fn flush(&mut self) {
        let status = self.machine.plan_status();
        if !self.machine.has_outbox() && self.after_turn.is_empty() && status == self.sent_status {
            return;
        }
        self.sent_status = status;
        let after = std::mem::take(&mut self.after_turn);
        if self.ctx.events.is_observed() && self.machine.has_outbox() {
            let entries: Vec<_> = self.machine.drain_outbox().collect();
            for (change, from) in &entries {
                self.publish(change, *from);
            }
            self.writer
                .send(entries.into_iter().map(|(change, _)| change), status, after);
        } else {
            let changes = self.machine.drain_outbox().map(|(change, _)| change);
            self.writer.send(changes, status, after);
        }
    }

    fn publish(&self, change: &StateChange, from: Option<NodeStatus>) {
        // A change of several steps publishes what each step would (a transition's `from`
        // is the status the step before left).
        if let Some(steps) = change.steps() {
            let mut from = from;
            for step in &steps {
                self.publish(step, from);
                if let StateChange::Node { status, .. } = step {
                    from = Some(*status);
                }
            }
            return;
        }
        let record = self.machine.record();
        let attempt_of = |n: NodeIndex| record.state.nodes[n].attempts.len() as u32;
        let plan = || self.id.clone();
        let event = match change {
            StateChange::Node { node, status, .. } => OrchestratorEvent::NodeTransition {
                plan: plan(),
                node: *node,
                node_id: record.state.nodes[*node].id.clone(),
                from: from.unwrap_or(NodeStatus::Pending),
                to: *status,
            },
            StateChange::PhaseStarted { node, phase, .. } => OrchestratorEvent::PhaseStarted {
                plan: plan(),
                node: *node,
                phase: *phase,
                attempt: attempt_of(*node),
            },
            StateChange::PhaseEnded {
                node,
                phase,
                status,
                error,
                ..
            } => OrchestratorEvent::PhaseEnded {
                plan: plan(),
                node: *node,
                phase: *phase,
                attempt: attempt_of(*node),
                status: *status,
                error: error.clone(),
            },
            StateChange::Metrics { node, metrics } => OrchestratorEvent::Metrics {
                plan: plan(),
                node: *node,
                metrics: metrics.clone(),
            },
            StateChange::Reshaped { .. } => OrchestratorEvent::PlanReshaped {
                plan: plan(),
                nodes: record.state.nodes.len(),
            },
            StateChange::WaitStarted { node, waiting } => OrchestratorEvent::AttentionNeeded {
                plan: plan(),
                node: *node,
                node_id: record.state.nodes[*node].id.clone(),
                producer_id: self
                    .spec
                    .jobs
                    .get(*node)
                    .map_or(crate::plan::SNAPSHOT_PRODUCER_ID, |j| &j.producer_id)
                    .to_owned(),
                waiting: waiting.clone(),
            },
            _ => return,
        };
        self.ctx.events.emit_with(|| event);
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::sanitize_branch_part;

    #[test]
    fn branch_names_are_sanitized() {
        assert_eq!(sanitize_branch_part("My Plan: v2!"), "my-plan-v2");
        assert_eq!(sanitize_branch_part("--x--"), "x");
        assert_eq!(sanitize_branch_part("日本"), "plan");
    }
}
