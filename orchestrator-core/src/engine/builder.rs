//! [`OrchestratorBuilder`]: how hosts put an [`Orchestrator`] together.

use crate::composite::Controller;
use std::collections::HashMap;
use std::sync::Arc;

use crate::capacity::{Both, Capacity, ProcessSlots};
use crate::engine::context::EngineCtx;
use crate::engine::options::OrchestratorOptions;
use crate::engine::orchestrator::Orchestrator;
use crate::error::{ConfigProblem, Error, Result};
use crate::events::{EventBus, EventCallback, OrchestratorEvent};
use crate::git::{ConflictResolver, GitOperations};
use crate::redact::Redactor;
use crate::repository::{InMemoryPlanRepository, PlanRepository};
use crate::runner::{Healer, Leftover, Reaper, WorkRunner};

/// Composes an [`Orchestrator`] from its plug-ins.
///
/// ```
/// use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
/// use orchestrator_core::{FnRunner, InMemoryPlanRepository, Orchestrator, PlanStatus, WorkOutput};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let orchestrator = Orchestrator::builder()
///     .repository(InMemoryPlanRepository::new())
///     .runner("shell", FnRunner::sync(|_spec, _ctx| Ok(WorkOutput::default())))
///     .build()
///     .unwrap();
///
/// let plan = PlanSpec::new("diamond")
///     .isolation(Isolation::None)
///     .job(JobSpec::new("fetch", "Fetch", WorkSpec::shell("true")))
///     .job(JobSpec::new("left", "Left", WorkSpec::shell("true")).depends_on(["fetch"]))
///     .job(JobSpec::new("right", "Right", WorkSpec::shell("true")).depends_on(["fetch"]))
///     .job(JobSpec::new("join", "Join", WorkSpec::shell("true")).depends_on(["left", "right"]));
///
/// let id = orchestrator.run(plan, std::env::temp_dir()).await.unwrap();
/// assert_eq!(orchestrator.wait(&id).await.unwrap(), PlanStatus::Succeeded);
/// # });
/// ```
#[derive(Default)]
#[must_use]
pub struct OrchestratorBuilder {
    repository: Option<Arc<dyn PlanRepository>>,
    git: Option<Arc<dyn GitOperations>>,
    runners: crate::engine::context::Runners,
    controllers: HashMap<String, Arc<dyn Controller>>,
    resolver: Option<Arc<dyn ConflictResolver>>,
    healer: Option<Arc<dyn Healer>>,
    tools: Option<Arc<dyn crate::tools::AgentTools>>,
    sessions: Option<Arc<dyn crate::tools::SessionArchive>>,
    reaper: Option<Reaper>,
    executor: Option<Arc<dyn crate::remote::Executor>>,
    capacity: Option<Arc<dyn Capacity>>,
    options: OrchestratorOptions,
    callbacks: Vec<EventCallback>,
}

impl std::fmt::Debug for OrchestratorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrchestratorBuilder")
            .field("repository", &self.repository)
            .field("git", &self.git)
            .field("runners", &self.runners.keys().collect::<Vec<_>>())
            .field("capacity", &self.capacity)
            .field("options", &self.options)
            .finish()
    }
}

impl OrchestratorBuilder {
    /// The plan store (default: a fresh [`InMemoryPlanRepository`]).
    pub fn repository(self, repository: impl PlanRepository) -> Self {
        self.repository_arc(Arc::new(repository))
    }

    /// The plan store, shared.
    pub fn repository_arc(mut self, repository: Arc<dyn PlanRepository>) -> Self {
        self.repository = Some(repository);
        self
    }

    /// The git layer; required for plans with worktree isolation.
    pub fn git(self, git: impl GitOperations) -> Self {
        self.git_arc(Arc::new(git))
    }

    /// The git layer, shared.
    pub fn git_arc(mut self, git: Arc<dyn GitOperations>) -> Self {
        self.git = Some(git);
        self
    }

    /// Registers the runner of a work kind: `shell`, `process`, `agent` (any agent), or
    /// `agent:<name>` (one agent, preferred over `agent`), or a host-defined kind.
    pub fn runner(self, kind: impl Into<String>, runner: impl WorkRunner) -> Self {
        self.runner_arc(kind, Arc::new(runner))
    }

    /// Registers a shared runner.
    pub fn runner_arc(mut self, kind: impl Into<String>, runner: Arc<dyn WorkRunner>) -> Self {
        self.runners.insert(kind.into(), runner);
        self
    }

    /// Registers the controller of a composite work kind (SPEC §12): it decides, from stored
    /// facts, which sub-jobs a composite job gets and when it is done. `split` (the jobs that
    /// leave a split manifest) has [`crate::composite::SplitController`] unless replaced.
    ///
    /// ```
    /// use orchestrator_core::composite::SplitController;
    /// use orchestrator_core::Orchestrator;
    /// let o = Orchestrator::builder().controller("split", SplitController).build();
    /// assert!(o.is_ok());
    /// ```
    pub fn controller(mut self, kind: impl Into<String>, controller: impl Controller) -> Self {
        self.controllers.insert(kind.into(), Arc::new(controller));
        self
    }

    /// Resolves merge conflicts in merge-fi instead of failing the job.
    pub fn conflict_resolver(mut self, resolver: impl ConflictResolver) -> Self {
        self.resolver = Some(Arc::new(resolver));
        self
    }

    /// Heals failed shell/process phases (SPEC §3 auto-heal), e.g. with an agent.
    pub fn healer(mut self, healer: impl Healer) -> Self {
        self.healer = Some(Arc::new(healer));
        self
    }

    /// Serves every agent job its own durable tools (SPEC §15: `wait`, `cron`, `cron_at`,
    /// `ask_user`, ...): the engine opens an endpoint for each run of an agent's work and parks
    /// the job when its agent asks to wait. `orchestrator_agents::tools::ToolServer` is the
    /// implementation (MCP on loopback HTTP).
    pub fn agent_tools(mut self, tools: Arc<dyn crate::tools::AgentTools>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Dehydrates parked agents (SPEC §15): a job whose agent parks for longer than the plan's
    /// `dehydrateAfter` has its CLI state stored in `archive` and its worktree removed until it
    /// wakes. `orchestrator_storage::blob::BlobSessions` is the implementation (a local folder
    /// or any object store URL). Without one, parked jobs keep their worktrees.
    pub fn session_archive(mut self, archive: Arc<dyn crate::tools::SessionArchive>) -> Self {
        self.sessions = Some(archive);
        self
    }

    /// Runs jobs' phases elsewhere (SPEC §16, see [`crate::remote`]): this orchestrator
    /// coordinates its plans (merges in memory, pushes each job's base to the executor's git
    /// remote) and the executor's workers run the phases.
    /// `orchestrator_storage::pg::PgExecutor` is the implementation (a PostgreSQL work queue);
    /// without one every job runs in this process.
    pub fn executor(mut self, executor: Arc<dyn crate::remote::Executor>) -> Self {
        self.executor = Some(executor);
        self
    }

    /// Stops the process groups a crashed owner of a plan left running, when the plan is taken
    /// over ([`Orchestrator::open_plan`]); `orchestrator_agents::stop_leftovers` is the
    /// implementation for the process runners. Without one, such processes are left alone.
    pub fn reaper(
        mut self,
        reaper: impl Fn(&[Leftover]) -> Vec<u32> + Send + Sync + 'static,
    ) -> Self {
        self.reaper = Some(Reaper::new(reaper));
        self
    }

    /// A capacity shared beyond this orchestrator, e.g. machine-wide slots
    /// (`orchestrator_storage::MachineSlots`) or a [`ProcessSlots`] shared with another
    /// orchestrator. It applies on top of [`OrchestratorOptions::global_capacity`] and each
    /// plan's `maxParallel`: a job starts once it holds a slot of each (default: none).
    ///
    /// ```
    /// use orchestrator_core::capacity::ProcessSlots;
    /// use orchestrator_core::Orchestrator;
    /// // Two orchestrators of one process that together run at most 4 jobs at once.
    /// let shared = ProcessSlots::new(4).unwrap();
    /// let a = Orchestrator::builder().capacity(shared.clone()).build().unwrap();
    /// let b = Orchestrator::builder().capacity(shared).build().unwrap();
    /// # drop((a, b));
    /// ```
    pub fn capacity(self, capacity: impl Capacity) -> Self {
        self.capacity_arc(Arc::new(capacity))
    }

    /// A shared capacity, shared (see [`OrchestratorBuilder::capacity`]).
    pub fn capacity_arc(mut self, capacity: Arc<dyn Capacity>) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// Tunables.
    pub fn options(mut self, options: OrchestratorOptions) -> Self {
        self.options = options;
        self
    }

    /// Calls `f` for every event, synchronously on the engine's task: keep it quick.
    pub fn on_event(mut self, f: impl Fn(&OrchestratorEvent) + Send + Sync + 'static) -> Self {
        self.callbacks.push(Arc::new(f));
        self
    }

    /// Checks the configuration and builds the orchestrator.
    pub fn build(self) -> Result<Orchestrator> {
        let o = &self.options;
        if o.global_capacity == 0 {
            return Err(Error::Config(ConfigProblem::NoCapacity));
        }
        if o.event_buffer == 0 {
            return Err(Error::Config(ConfigProblem::NoEventBuffer));
        }
        if let Some(kind) = self.runners.keys().find(|k| k.trim().is_empty()) {
            return Err(Error::Config(ConfigProblem::EmptyRunnerKind {
                kind: kind.clone(),
            }));
        }
        if let (Some(root), Some(git)) = (&o.worktree_root, &self.git) {
            git.allow_worktree_root(root)?;
        }
        let process: Arc<dyn Capacity> = Arc::new(
            ProcessSlots::new(o.global_capacity)
                .map_err(|e| Error::Config(ConfigProblem::Capacity(e.to_string())))?,
        );
        // The process slot first: a process waits for a shared slot only when it could use it.
        let capacity: Arc<dyn Capacity> = match self.capacity {
            Some(shared) => Arc::new(Both::new(process, shared)),
            None => process,
        };
        let events = EventBus::with_callbacks(o.event_buffer, self.callbacks);
        // Jobs inherit the host's environment, so its secrets (an API key exported in the
        // shell) are as likely to be printed as the plan's own.
        let host_vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        let redactor = Arc::new(Redactor::new().with_vars(host_vars, &o.secret_env));
        Ok(Orchestrator::from_ctx(EngineCtx {
            // A plugged store gets its transient errors retried where that is safe.
            repository: self
                .repository
                .map(|r| Arc::new(crate::repository::Retrying::new(r)) as Arc<dyn PlanRepository>)
                .unwrap_or_else(|| Arc::new(InMemoryPlanRepository::new())),
            // Every plugged git layer gets its transient errors retried (lock contention).
            git: self
                .git
                .map(|g| Arc::new(crate::git::Retrying::new(g)) as Arc<dyn GitOperations>),
            runners: self.runners,
            controllers: {
                let mut c = self.controllers;
                c.entry("split".to_owned())
                    .or_insert_with(|| Arc::new(crate::composite::SplitController));
                c
            },
            resolver: self.resolver,
            healer: self.healer,
            tools: self.tools,
            sessions: self.sessions,
            reaper: self.reaper,
            executor: self.executor,
            on_remote: Default::default(),
            capacity,
            options: self.options,
            events,
            redactor,
            swept: Default::default(),
            plans: Default::default(),
        }))
    }
}

impl Orchestrator {
    /// Starts building an orchestrator.
    pub fn builder() -> OrchestratorBuilder {
        OrchestratorBuilder::default()
    }
}
