//! What the orchestrator, its plan actors and their node tasks share: the plug-ins, the
//! options, the event bus, and the registry of the plans this orchestrator drives (which is
//! what lets a plan wait for another one without holding an `Orchestrator`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

use crate::capacity::Capacity;
use crate::engine::messages::Message;
use crate::engine::options::OrchestratorOptions;
use crate::error::{Error, Result};
use crate::events::EventBus;
use crate::git::{ConflictResolver, GitOperations};
use crate::ids::PlanId;
use crate::repository::PlanRepository;
use crate::runner::{Healer, Reaper, WorkRunner};
use crate::state::PlanStatus;

/// The registered runners by work kind (`shell`, `agent:<name>`...): looked up once a phase,
/// with foldhash — the keys are the host's own, not an attacker's.
pub(crate) type Runners = HashMap<String, Arc<dyn WorkRunner>, foldhash::fast::FixedState>;

/// Shared by the orchestrator, its plan actors and their node tasks.
#[derive(Debug)]
pub(crate) struct EngineCtx {
    pub(crate) repository: Arc<dyn PlanRepository>,
    pub(crate) git: Option<Arc<dyn GitOperations>>,
    pub(crate) runners: Runners,
    /// Controllers of composite work, by kind (`split` always has one).
    pub(crate) controllers: HashMap<String, Arc<dyn crate::composite::Controller>>,
    pub(crate) resolver: Option<Arc<dyn ConflictResolver>>,
    pub(crate) healer: Option<Arc<dyn Healer>>,
    /// The agents' tool server (SPEC §15), when the host registered one.
    pub(crate) tools: Option<Arc<dyn crate::tools::AgentTools>>,
    /// Where parked agents' sessions are dehydrated to (SPEC §15), when the host set one.
    pub(crate) sessions: Option<Arc<dyn crate::tools::SessionArchive>>,
    pub(crate) reaper: Option<Reaper>,
    /// Where jobs' phases run when not here (SPEC §16), when the host set one.
    pub(crate) executor: Option<Arc<dyn crate::remote::Executor>>,
    /// Commits this orchestrator knows its executor's remote has, and a ref holding each
    /// there (bases it pushed, results it fetched): pushed once, not once per job.
    pub(crate) on_remote: Mutex<HashMap<String, String>>,
    /// Slots every job of every plan takes before it starts (see [`crate::capacity`]).
    pub(crate) capacity: Arc<dyn Capacity>,
    pub(crate) options: OrchestratorOptions,
    pub(crate) events: EventBus,
    /// Secrets of the host's environment (see [`EngineCtx::job_redactor`]).
    pub(crate) redactor: Arc<crate::redact::Redactor>,
    /// Worktree roots already swept of crash leftovers by this orchestrator.
    pub(crate) swept: Mutex<std::collections::HashSet<PathBuf>>,
    /// The plans this orchestrator drives.
    pub(crate) plans: Mutex<HashMap<PlanId, PlanHandle>>,
}

impl EngineCtx {
    pub(crate) fn handle(&self, id: &PlanId) -> Result<PlanHandle> {
        self.plans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| Error::PlanNotFound(id.clone()))
    }

    /// Waits until the plan succeeded (for chaining: a plan that fails may still be retried
    /// and succeed, so it keeps waiting). A plan this orchestrator drives is watched through
    /// its status channel; one another process runs (or nobody yet) is read from the store
    /// now and then — there is no cross-process notification to wait on — from every 100 ms
    /// growing to every 2 s. An error only when the plan cannot be read at all.
    pub(crate) async fn wait_succeeded(&self, id: &PlanId) -> Result<()> {
        const FIRST: std::time::Duration = std::time::Duration::from_millis(100);
        const LONGEST: std::time::Duration = std::time::Duration::from_secs(2);
        let mut pause = FIRST;
        loop {
            if let Ok(handle) = self.handle(id) {
                let mut rx = handle.status;
                loop {
                    if *rx.borrow_and_update() == PlanStatus::Succeeded {
                        return Ok(());
                    }
                    // A closed channel: the plan was released here; it may go on elsewhere.
                    if rx.changed().await.is_err() {
                        break;
                    }
                }
            }
            match self.repository.load(id).await {
                Ok(record) if record.status() == PlanStatus::Succeeded => return Ok(()),
                Ok(_) => {}
                Err(e) if e.is_retryable() => {}
                Err(e) => return Err(e.into()),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST);
        }
    }

    /// The status of a plan this orchestrator knows, or of a stored one.
    pub(crate) async fn status_anywhere(&self, id: &PlanId) -> Result<PlanStatus> {
        match self.handle(id) {
            Ok(handle) => Ok(*handle.status.borrow()),
            Err(_) => Ok(self.repository.load(id).await?.status()),
        }
    }

    /// What the phases of `job` (the snapshot node: `None`) redact from their logs, events and
    /// failure messages: the host's secrets and those of the plan's, job's and specs' `env`.
    pub(crate) fn job_redactor(
        &self,
        spec: &crate::plan::PlanSpec,
        job: Option<&crate::plan::JobSpec>,
    ) -> Arc<crate::redact::Redactor> {
        match crate::redact::job_redactor(&self.redactor, spec, job, &self.options.secret_env) {
            Some(own) => Arc::new(own),
            // Nothing of the job's own: share the host's.
            None => self.redactor.clone(),
        }
    }
}

#[derive(Debug, Clone)]
/// What the orchestrator keeps of a plan it drives: its actor's inbox and status.
pub(crate) struct PlanHandle {
    pub(crate) tx: mpsc::UnboundedSender<Message>,
    pub(crate) status: watch::Receiver<PlanStatus>,
}
