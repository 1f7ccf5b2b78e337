//! [`Orchestrator`]: the handle hosts use to create and drive plans.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::engine::actor::PlanActor;
use crate::engine::context::{EngineCtx, PlanHandle};
use crate::engine::messages::{ArchiveReport, HostRequest, Message, RetryRequest};
use crate::error::{ConfigProblem, Error, Result, StateProblem};
use crate::events::OrchestratorEvent;
use crate::ids::{now_millis, PlanId};
use crate::plan::{validate, PlanEdit, PlanGraph, PlanSpec, ValidationContext};
use crate::repository::{Lease, PlanRepository};
use crate::state::{OutboxEntry, PlanMachine, PlanRecord, PlanStatus};

/// How a plan is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Creation {
    /// Stored, not started ([`Orchestrator::create_plan`]).
    Stored,
    /// Stored as scaffolding ([`Orchestrator::scaffold_plan`]).
    Scaffolding,
    /// Stored to be started at once ([`Orchestrator::run`]): started as it is stored where
    /// [`starts_as_stored`] allows.
    Run,
}

/// Plans of this many jobs or more are staged in the store while they are validated (see
/// [`Orchestrator::create_staged`]): their creation's writing is worth overlapping (a
/// 10,000-job plan's snapshot is 880 KB, whose flush took 1.3-2.4 ms on the disks this is
/// built on), at the cost of an append to start them and of a write for nothing when the
/// plan is invalid. A smaller plan is validated, then stored started where it can be.
const STAGED_JOBS: usize = 1_000;

/// Whether a plan's first start changes nothing but its state, so that it can be stored
/// started: a plan with worktrees pins its base and target branches first (git), and a plan
/// chained to another waits for that one.
fn starts_as_stored(spec: &PlanSpec) -> bool {
    spec.isolation != crate::plan::Isolation::Worktree && spec.resume_after_plan.is_none()
}

/// Runs plans. Cheap to clone; every clone drives the same plans.
///
/// See [`OrchestratorBuilder`](crate::OrchestratorBuilder) for a complete example.
#[derive(Debug, Clone)]
pub struct Orchestrator {
    ctx: Arc<EngineCtx>,
}

impl Orchestrator {
    pub(crate) fn from_ctx(ctx: EngineCtx) -> Self {
        Orchestrator { ctx: Arc::new(ctx) }
    }

    /// The plan store.
    pub fn repository(&self) -> &Arc<dyn PlanRepository> {
        &self.ctx.repository
    }

    /// Subscribes to every event of every plan.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<OrchestratorEvent> {
        self.ctx.events.subscribe()
    }

    /// Subscribes as a `Stream` (lagging subscribers skip the events they missed).
    pub fn events(&self) -> impl futures::Stream<Item = OrchestratorEvent> + Send + 'static {
        use futures::StreamExt;
        tokio_stream::wrappers::BroadcastStream::new(self.subscribe())
            .filter_map(|e| futures::future::ready(e.ok()))
    }

    /// Validates and stores a plan working on `dir` (the repository, or the working directory
    /// with `isolation: "none"`), takes ownership of it, and returns its id. It does not start.
    pub async fn create_plan(&self, spec: PlanSpec, dir: impl Into<PathBuf>) -> Result<PlanId> {
        let (id, _) = self.create(spec, dir.into(), Creation::Stored).await?;
        Ok(id)
    }

    /// Stores a plan that is still being assembled (MCP scaffolding): it may have no jobs yet,
    /// jobs are added with [`Orchestrator::edit_plan`], and it cannot start until
    /// [`Orchestrator::finalize_plan`]. Its status is `scaffolding`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use orchestrator_core::plan::{Isolation, JobSpec, PlanEdit, PlanSpec, WorkSpec};
    /// use orchestrator_core::{FnRunner, Orchestrator, PlanStatus, WorkOutput};
    ///
    /// let o = Orchestrator::builder()
    ///     .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
    ///     .build()
    ///     .unwrap();
    /// let dir = std::env::temp_dir();
    /// let id = o
    ///     .scaffold_plan(PlanSpec::new("step by step").isolation(Isolation::None), &dir)
    ///     .await
    ///     .unwrap();
    /// assert_eq!(o.plan_status(&id).unwrap(), PlanStatus::Scaffolding);
    /// let job = JobSpec::new("build", "Build", WorkSpec::shell("make"));
    /// o.edit_plan(&id, vec![PlanEdit::AddJob { job: Box::new(job) }]).await.unwrap();
    /// o.finalize_plan(&id).await.unwrap();
    /// o.start(&id).await.unwrap();
    /// assert_eq!(o.wait(&id).await.unwrap(), PlanStatus::Succeeded);
    /// # });
    /// ```
    pub async fn scaffold_plan(&self, spec: PlanSpec, dir: impl Into<PathBuf>) -> Result<PlanId> {
        let (id, _) = self.create(spec, dir.into(), Creation::Scaffolding).await?;
        Ok(id)
    }

    /// Validates and stores a plan, takes ownership of it and returns its id, and whether it
    /// was stored started (see [`Creation::Run`]).
    async fn create(
        &self,
        mut spec: PlanSpec,
        dir: PathBuf,
        creation: Creation,
    ) -> Result<(PlanId, bool)> {
        let scaffolding = creation == Creation::Scaffolding;
        // A host may build the nested-groups form itself; everything stored is flat (SPEC §2).
        spec.flatten_groups()?;
        self.prepare_composites(&mut spec, &dir)?;
        if spec.jobs.len() >= STAGED_JOBS {
            let id = self.create_staged(spec, dir, scaffolding).await?;
            return Ok((id, false));
        }
        let graph = self.check(&spec, &dir, scaffolding).await?;
        let id = PlanId::random();
        let now = now_millis();
        let started = creation == Creation::Run && starts_as_stored(&spec);
        let nodes = crate::state::fresh_nodes(&id, graph.node_count());
        let mut record = PlanRecord::with_nodes(id.clone(), spec, dir, nodes, now);
        record.state.scaffolding = scaffolding;
        let mut machine = PlanMachine::new(record, Arc::new(graph));
        // What the start changed is in the stored record; its events are published by the
        // actor, after the plan's creation is announced.
        let start = if started {
            machine
                .start(now, None, None, None)
                .map_err(|source| Error::Transition {
                    plan: id.clone(),
                    source,
                })?;
            Some(machine.drain_outbox().collect())
        } else {
            None
        };
        self.ctx.repository.create(machine.record()).await?;
        let lease = self.ctx.repository.acquire(&id).await?;
        self.spawn_actor(machine, lease, start, true);
        Ok((id, started))
    }

    /// Creates a plan of [`STAGED_JOBS`] jobs or more: its record (fresh nodes, not started)
    /// is made and staged in the store ([`PlanRepository::stage`]) while the plan is checked,
    /// then created, or discarded when the checks fail. A file store's writing and flushing of
    /// a large plan thus overlaps its validation instead of following it.
    async fn create_staged(
        &self,
        spec: PlanSpec,
        dir: PathBuf,
        scaffolding: bool,
    ) -> Result<PlanId> {
        let id = PlanId::random();
        let spec = Arc::new(spec);
        let repository = &self.ctx.repository;
        let staging = {
            let (repository, id, spec, dir) =
                (repository.clone(), id.clone(), spec.clone(), dir.clone());
            let count = PlanGraph::node_count_of(&spec);
            tokio::spawn(async move {
                let nodes = crate::state::fresh_nodes(&id, count);
                let mut record = PlanRecord::of_shared(id, spec, dir, nodes, now_millis());
                record.state.scaffolding = scaffolding;
                let staged = repository.stage(&record).await;
                (record, staged)
            })
        };
        // A task spawned from a task waits in its worker's own slot, which other workers do not
        // take, until the spawner yields: without this it would start only when the checks,
        // which do not yield, were over.
        tokio::task::yield_now().await;
        let checked = self.check(&spec, &dir, scaffolding).await;
        let (record, staged) = staging.await.map_err(|e| {
            Error::Store(crate::StoreError::Io {
                operation: "stage a new plan",
                path: PathBuf::new(),
                source: std::io::Error::other(e.to_string()),
            })
        })?;
        let graph = match (checked, staged) {
            (Ok(graph), Ok(staged)) => {
                repository.create_staged(&record, staged).await?;
                graph
            }
            (Err(e), Ok(staged)) => {
                repository.discard(staged).await;
                return Err(e);
            }
            // A plan that fails its checks says so, whatever the store answered.
            (Err(e), Err(_)) => return Err(e),
            (Ok(_), Err(e)) => return Err(e.into()),
        };
        let lease = repository.acquire(&id).await?;
        self.spawn_actor(PlanMachine::new(record, Arc::new(graph)), lease, None, true);
        Ok(id)
    }

    /// Checks a plan before it is stored: valid (its graph), runnable by this engine (a git
    /// layer for worktrees), its base revisions present; sweeps its worktree root's orphans.
    async fn check(
        &self,
        spec: &PlanSpec,
        dir: &std::path::Path,
        scaffolding: bool,
    ) -> Result<PlanGraph> {
        let context = ValidationContext {
            repo: Some(dir),
            scaffolding,
        };
        let graph = validate(spec, context)?;
        if spec.isolation == crate::plan::Isolation::Worktree && self.ctx.git.is_none() {
            return Err(Error::Config(ConfigProblem::NoGitLayer));
        }
        self.check_base_revisions(spec, dir).await?;
        if let (crate::plan::Isolation::Worktree, Some(git)) = (spec.isolation, &self.ctx.git) {
            let root = self.ctx.options.plan_worktree_root(spec, dir);
            git.allow_worktree_root(&root)?;
            super::repair::sweep_once(&self.ctx, dir, &root).await;
        }
        Ok(graph)
    }

    /// Lets the controller of each composite job complete its spec before the plan is
    /// validated and stored ([`crate::composite::Controller::prepare`]).
    fn prepare_composites(&self, spec: &mut PlanSpec, dir: &std::path::Path) -> Result<()> {
        let mut problems = Vec::new();
        for job in spec.jobs.iter_mut().filter(|j| j.work.is_composite()) {
            let kind = crate::composite::controller_kind(job);
            if let Some(controller) = self.ctx.controllers.get(kind) {
                if let Err(mut p) = controller.prepare(job, dir) {
                    problems.append(&mut p);
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(crate::plan::ValidationErrors(problems).into())
        }
    }

    /// Refuses, before anything is stored, a plan whose `baseBranch` (plan or job) names no
    /// revision of the repository: it could never start, and a stored plan that never started
    /// would only be left to clean up. Other git errors are left for the start to report.
    async fn check_base_revisions(&self, spec: &PlanSpec, dir: &std::path::Path) -> Result<()> {
        let Some(git) = self.ctx.git.as_ref() else {
            return Ok(());
        };
        if spec.isolation != crate::plan::Isolation::Worktree {
            return Ok(());
        }
        let plan_base = spec.base_branch.as_ref().map(|rev| (None, rev));
        let job_bases = spec
            .jobs
            .iter()
            .filter_map(|j| j.extra.base_branch.as_ref().map(|rev| (Some(j), rev)));
        // Each revision is resolved once, however many jobs name it.
        let mut missing: HashMap<&str, bool> = HashMap::new();
        let mut problems = Vec::new();
        for (job, rev) in plan_base.into_iter().chain(job_bases) {
            let absent = match missing.get(rev.as_str()) {
                Some(&absent) => absent,
                None => {
                    let absent = matches!(
                        git.resolve(dir, rev).await,
                        Err(crate::git::GitError::NotFound { .. })
                    );
                    missing.insert(rev, absent);
                    absent
                }
            };
            if absent {
                problems.push(crate::plan::ValidationError::new(
                    job,
                    "baseBranch",
                    rev.as_str(),
                    "no branch, tag or commit of the repository has this name",
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid(crate::plan::ValidationErrors(problems)))
        }
    }

    /// Creates a plan and starts it.
    ///
    /// A plan whose start needs nothing prepared (no worktrees to base, no plan to wait for)
    /// is stored already started: one write and flush of the store, not a creation and then
    /// the start's append (SPEC §5's durability holds: nothing runs before it is stored). A
    /// plan of 1,000 jobs or more is staged in the store while it is validated, then started
    /// (see [`PlanRepository::stage`]).
    pub async fn run(&self, spec: PlanSpec, dir: impl Into<PathBuf>) -> Result<PlanId> {
        let (id, started) = self.create(spec, dir.into(), Creation::Run).await?;
        if !started {
            self.start(&id).await?;
        }
        Ok(id)
    }

    /// Loads a stored plan (e.g. after a restart) and takes ownership of it. Jobs found running
    /// become a failed attempt with reason `crashed` and are re-queued. It does not start.
    pub async fn open_plan(&self, id: &PlanId) -> Result<()> {
        if self.ctx.handle(id).is_ok() {
            return Ok(());
        }
        // The lease first: the state read after it is the last owner's final word.
        let lease = self.ctx.repository.acquire(id).await?;
        let record = self.ctx.repository.load(id).await?;
        let graph = PlanGraph::build(&record.spec)?;
        if graph.node_count() != record.state.nodes.len() {
            return Err(Error::InvalidState {
                plan: id.clone(),
                problem: StateProblem::NodeCountMismatch {
                    stored: record.state.nodes.len(),
                    defined: graph.node_count(),
                },
            });
        }
        if let Some(git) = &self.ctx.git {
            git.allow_worktree_root(
                &self
                    .ctx
                    .options
                    .plan_worktree_root(&record.spec, &record.state.repo),
            )?;
        }
        super::repair::repair(&self.ctx, &record, &graph).await;
        self.spawn_actor(
            PlanMachine::new(record, Arc::new(graph)),
            lease,
            None,
            false,
        );
        Ok(())
    }

    /// Hands a plan to its actor. `start` holds the changes of a start already stored (see
    /// [`Orchestrator::run`]). A new plan (`created`) is announced once it can be asked about
    /// and before its actor publishes anything.
    fn spawn_actor(
        &self,
        machine: PlanMachine,
        lease: Lease,
        start: Option<Vec<OutboxEntry>>,
        created: bool,
    ) {
        let id = machine.record().state.id.clone();
        let spec = machine.record().spec.clone();
        let (tx, rx) = mpsc::unbounded_channel();
        let (actor, status) =
            PlanActor::new(self.ctx.clone(), machine, lease, start, tx.clone(), rx);
        self.ctx
            .plans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), PlanHandle { tx, status });
        if created {
            self.ctx
                .events
                .emit_with(|| OrchestratorEvent::PlanCreated {
                    plan: id.clone(),
                    name: spec.name.clone(),
                });
        }
        let span = tracing::info_span!("plan", plan = %id);
        tokio::spawn(actor.run().instrument(span));
    }

    async fn ask<T>(
        &self,
        id: &PlanId,
        make: impl FnOnce(oneshot::Sender<Result<T>>) -> HostRequest,
    ) -> Result<T> {
        let (reply, rx) = oneshot::channel();
        self.ctx
            .handle(id)?
            .tx
            .send(Message::Host(make(reply)))
            .map_err(|_| Error::Shutdown)?;
        rx.await.map_err(|_| Error::Shutdown)?
    }

    /// Changes a plan's jobs or options: while it is scaffolded, and while it runs or is paused
    /// or failed (a reshape). The edits apply in order and all or none take effect; the result
    /// is validated like a new plan. What each job status allows is in
    /// [`crate::plan::apply_edits`]. Jobs in flight keep running.
    pub async fn edit_plan(&self, id: &PlanId, edits: Vec<PlanEdit>) -> Result<()> {
        self.ask(id, |reply| HostRequest::Edit { edits, reply })
            .await
    }

    /// Ends the scaffolding of a plan: it must now be valid as a whole. It does not start.
    pub async fn finalize_plan(&self, id: &PlanId) -> Result<()> {
        self.ask(id, |reply| HostRequest::Finalize { reply }).await
    }

    /// Starts (or continues) a plan. With `resumeAfterPlan`, it starts once that plan succeeded.
    pub async fn start(&self, id: &PlanId) -> Result<()> {
        self.ask(id, |reply| HostRequest::Start { reply }).await
    }

    /// Pauses: nothing new starts; running jobs finish. With `stop_running`, running jobs are
    /// stopped and re-queued to resume from the phase they were in.
    pub async fn pause(&self, id: &PlanId, stop_running: bool) -> Result<()> {
        self.ask(id, |reply| HostRequest::Pause {
            stop_running,
            reply,
        })
        .await
    }

    /// Resumes a paused plan (starting it if it never started).
    pub async fn resume(&self, id: &PlanId) -> Result<()> {
        self.ask(id, |reply| HostRequest::Resume { reply }).await
    }

    /// Cancels a plan: running jobs are stopped, nothing else starts. Worktrees are kept.
    pub async fn cancel(&self, id: &PlanId) -> Result<()> {
        self.ask(id, |reply| HostRequest::Cancel { reply }).await
    }

    /// Retries failed jobs (see [`RetryRequest`]); returns how many were retried.
    pub async fn retry(&self, id: &PlanId, request: RetryRequest) -> Result<usize> {
        self.ask(id, |reply| HostRequest::Retry {
            request: Box::new(request),
            reply,
        })
        .await
    }

    /// Fails a running job now, killing its process tree.
    pub async fn force_fail(&self, id: &PlanId, job: &str) -> Result<()> {
        let job = job.to_owned();
        self.ask(id, |reply| HostRequest::ForceFail { job, reply })
            .await
    }

    /// Approves a job waiting for approval (`approval: before`, SPEC §12): it becomes ready
    /// and starts when the plan runs. A job that does not wait for approval:
    /// [`Error::NotWaiting`](crate::Error::NotWaiting).
    pub async fn approve(&self, id: &PlanId, job: &str) -> Result<()> {
        let job = job.to_owned();
        self.ask(id, |reply| HostRequest::Approve { job, reply })
            .await
    }

    /// Rejects a job waiting for approval: it fails with reason `rejected` and `reason`, and
    /// the jobs that depend on it are blocked (a `retry` holds it for approval again).
    pub async fn reject(&self, id: &PlanId, job: &str, reason: &str) -> Result<()> {
        let (job, reason) = (job.to_owned(), reason.to_owned());
        self.ask(id, |reply| HostRequest::Reject { job, reason, reply })
            .await
    }

    /// Answers a job waiting for input (a question an agent asked, SPEC §15).
    pub async fn answer(&self, id: &PlanId, job: &str, answer: &str) -> Result<()> {
        let (job, answer) = (job.to_owned(), answer.to_owned());
        self.ask(id, |reply| HostRequest::Answer { job, answer, reply })
            .await
    }

    /// Recovers a failed or canceled plan (SPEC §3): the target branch exists again, worktrees
    /// of succeeded jobs still to be consumed are recreated at their commits, failed, blocked and
    /// canceled jobs are pending again, and the plan is left paused for [`Orchestrator::resume`].
    pub async fn recover(&self, id: &PlanId) -> Result<()> {
        self.ask(id, |reply| HostRequest::Recover { reply }).await
    }

    /// Archives an ended plan: removes its worktrees, snapshot and target branches (never the
    /// default branch), keeps its state and logs, and marks it archived.
    pub async fn archive(&self, id: &PlanId) -> Result<ArchiveReport> {
        self.ask(id, |reply| HostRequest::Archive { reply }).await
    }

    /// Removes worktree folders under the worktree root of `repo` that no plan in the store
    /// wants any more (left by crashes): neither recorded as a node's worktree nor belonging to
    /// a node that has not ended. Returns what was removed. Nothing is removed while a stored
    /// plan cannot be read, since its worktrees could not be told apart. [`Orchestrator::open_plan`]
    /// and [`Orchestrator::create_plan`] run it once per worktree root, so every host gets it.
    pub async fn remove_orphan_worktrees(&self, repo: &std::path::Path) -> Result<Vec<PathBuf>> {
        let root = self.ctx.options.worktree_root_for(repo);
        super::repair::sweep(&self.ctx, repo, &root).await
    }

    /// Runs one order of a coordinator's job on this worker (SPEC §16, see
    /// [`crate::remote`]): the job's definition is read from this orchestrator's store (the
    /// coordinator's), its worktree is made in `repo` (the worker's clone of the remote, which
    /// must hold `order.base`) and its phases run with this orchestrator's runners and git
    /// layer, their logs going to the store. Returns what happened, for the coordinator; the
    /// result commit is left in `repo` for the caller to push to `order.refs.result`.
    pub async fn execute_order(
        &self,
        order: &crate::remote::JobOrder,
        repo: &std::path::Path,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<crate::remote::JobReport> {
        Ok(crate::engine::pipeline::execute_order(self.ctx.clone(), order, repo, cancel).await?)
    }

    /// A snapshot of the plan's record.
    pub async fn status(&self, id: &PlanId) -> Result<PlanRecord> {
        self.ask(id, |reply| HostRequest::Snapshot { reply }).await
    }

    /// The plan as hosts show it ([`crate::view::PlanView`]): live when this orchestrator
    /// drives it, else as stored (a plan another process runs, or one not opened here), so
    /// that read-only questions never need to take a plan over.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
    /// use orchestrator_core::view::GraphFormat;
    /// use orchestrator_core::{FnRunner, Orchestrator, WorkOutput};
    ///
    /// let o = Orchestrator::builder()
    ///     .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
    ///     .build()
    ///     .unwrap();
    /// let spec = PlanSpec::new("p").isolation(Isolation::None)
    ///     .job(JobSpec::new("build", "Build", WorkSpec::shell("make")));
    /// let id = o.create_plan(spec, std::env::temp_dir()).await.unwrap();
    /// o.start(&id).await.unwrap();
    /// o.wait(&id).await.unwrap();
    /// let view = o.view(&id).await.unwrap();
    /// let n = view.resolve("build").unwrap();
    /// assert_eq!(view.label(n), "build");
    /// assert_eq!(view.to_json()["timeline"][0]["producerId"], "build");
    /// assert!(view.render(GraphFormat::Gantt).unwrap().contains("section build"));
    /// # });
    /// ```
    pub async fn view(&self, id: &PlanId) -> Result<crate::view::PlanView> {
        if self.ctx.handle(id).is_ok() {
            if let Ok(record) = self.status(id).await {
                return Ok(record.into());
            }
        }
        Ok(self.ctx.repository.load(id).await?.into())
    }

    /// The plan's current derived status, without a round trip to its actor.
    pub fn plan_status(&self, id: &PlanId) -> Result<PlanStatus> {
        Ok(*self.ctx.handle(id)?.status.borrow())
    }

    /// Waits until the plan ends (succeeded, failed, canceled, archived) or is paused with
    /// nothing running, and returns that status.
    pub async fn wait(&self, id: &PlanId) -> Result<PlanStatus> {
        let mut rx = self.ctx.handle(id)?.status;
        let status = rx
            .wait_for(|s| s.is_terminal() || *s == PlanStatus::Paused)
            .await
            .map_err(|_| Error::Shutdown)?;
        Ok(*status)
    }

    /// Waits like [`Orchestrator::wait`], but also returns as soon as the plan is
    /// [`PlanStatus::Waiting`] (nothing runs, and a job waits for a person or a timer).
    pub async fn wait_or_waiting(&self, id: &PlanId) -> Result<PlanStatus> {
        let mut rx = self.ctx.handle(id)?.status;
        let status = rx
            .wait_for(|s| s.is_terminal() || matches!(*s, PlanStatus::Paused | PlanStatus::Waiting))
            .await
            .map_err(|_| Error::Shutdown)?;
        Ok(*status)
    }

    /// Ids of the plans this orchestrator drives.
    pub fn plan_ids(&self) -> Vec<PlanId> {
        self.ctx
            .plans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Stops driving a plan and releases it (its stored state stays). Running jobs are stopped
    /// as by a pause with `stop_running`.
    pub async fn close(&self, id: &PlanId) -> Result<()> {
        self.shut(id, true).await
    }

    /// Stops driving a plan and releases it like [`Orchestrator::close`], but without pausing
    /// it: running jobs are stopped (they resume from the phase they were in) and the stored
    /// plan stays runnable, so whoever opens it next can simply start it again (a server
    /// restarting picks up the plans it was running).
    pub async fn release(&self, id: &PlanId) -> Result<()> {
        self.shut(id, false).await
    }

    async fn shut(&self, id: &PlanId, pause: bool) -> Result<()> {
        let result = self
            .ask(id, |reply| HostRequest::Close { pause, reply })
            .await;
        self.ctx
            .plans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        result
    }
}
