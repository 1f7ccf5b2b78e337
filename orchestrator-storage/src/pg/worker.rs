//! The worker's side of remote execution (SPEC §16): [`PgWorker`] claims orders from the
//! [work queue](PgWorkQueue), runs their phases with an [`Orchestrator`]'s runners in its own
//! clone of the remote, pushes the result commits and reports back.
//!
//! A worker's folder is its own: among the workers sharing a base folder on a machine, each
//! takes the first free numbered place (`worker-<k>`, held by a file lock the operating system
//! frees when the process dies). What a folder holds when a worker takes it was left by a
//! worker that died: its job worktrees are removed before the first claim (the same repair as
//! a crashed local run's), its clones kept, so only the objects they lack are fetched.
//!
//! Leases: each claim is renewed every third of the queue's lease. A renew refused (the lease
//! lapsed while the worker stalled, or the coordinator withdrew the job) stops the job at
//! once, and its result is neither pushed nor reported: the attempt is someone else's now.
//! A renew that fails because the database does not answer is tried again at the next beat.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::remote::{JobOrder, JobOutcome, JobReport};
use orchestrator_core::runner::{Leftover, Reaper};
use orchestrator_core::state::{FailureReason, Phase};
use orchestrator_core::{GitOperations, Orchestrator, Slot};
use sha2::Digest as _;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::queue::{Claim, PgWorkQueue, QueueError};
use crate::MachineSlots;

/// How often an idle worker looks for work (default).
const POLL: Duration = Duration::from_millis(20);
/// The most places one base folder offers (workers of one machine sharing it).
const PLACES: usize = 256;

/// A worker of remote execution on PostgreSQL.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use orchestrator_core::{GitOperations, Orchestrator};
/// use orchestrator_storage::pg::{PgOptions, PgPlanRepository, PgWorker};
/// use tokio_util::sync::CancellationToken;
///
/// /// `orchestrator`: built on the same store, with the git layer (`orchestrator_git`'s
/// /// `Git2Operations`) and the runners its jobs use.
/// async fn serve(
///     store: PgPlanRepository,
///     orchestrator: Orchestrator,
///     git: Arc<dyn GitOperations>,
/// ) -> Result<(), Box<dyn std::error::Error>> {
///     let worker = PgWorker::new(store.work_queue(Duration::from_secs(30)), orchestrator, git)
///         .name("builder-1")
///         .slots(4);
///     worker.run("/var/lib/orchestrator/workers", CancellationToken::new()).await?;
///     Ok(())
/// }
/// ```
#[derive(Debug, Clone)]
pub struct PgWorker {
    queue: PgWorkQueue,
    orchestrator: Orchestrator,
    git: Arc<dyn GitOperations>,
    name: String,
    slots: usize,
    poll: Duration,
    reaper: Option<Reaper>,
}

/// Why a worker could not start. Once it runs, the store's failures are tried again (claims,
/// renewals, reports) rather than ending it: a database restart is ridden out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// Its folder cannot be made or locked.
    #[error("worker folder {}: {message}", .path.display())]
    Folder {
        /// The folder.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl PgWorker {
    /// A worker claiming from `queue`, running jobs with `orchestrator` (its runners, its
    /// store for the plans and their logs) and `git`. Named after the host and process, one
    /// slot, until set otherwise.
    pub fn new(
        queue: PgWorkQueue,
        orchestrator: Orchestrator,
        git: Arc<dyn GitOperations>,
    ) -> Self {
        PgWorker {
            queue,
            orchestrator,
            git,
            name: default_name(),
            slots: 1,
            poll: POLL,
            reaper: None,
        }
    }

    /// The name the worker claims under (shown by `status` for its jobs' items).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How many jobs it runs at once (at least 1).
    pub fn slots(mut self, slots: usize) -> Self {
        self.slots = slots.max(1);
        self
    }

    /// Stops the processes of the jobs a dead worker ran from the folder this one takes
    /// (`orchestrator_agents::stop_leftovers` for the process runners). Without one, such
    /// processes are left alone.
    pub fn reaper(
        mut self,
        reaper: impl Fn(&[Leftover]) -> Vec<u32> + Send + Sync + 'static,
    ) -> Self {
        self.reaper = Some(Reaper::new(reaper));
        self
    }

    /// How often it looks for work while it has free slots (default 20 ms).
    pub fn poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// Claims and runs jobs until `stop` fires, then lets the running ones end (a stop never
    /// fails a job: what it does not finish, its lease gives back). `base` is the folder the
    /// workers of this machine share (see the module's documentation).
    pub async fn run(
        &self,
        base: impl AsRef<Path>,
        stop: CancellationToken,
    ) -> Result<(), WorkerError> {
        let (folder, _place) = self.take_place(base.as_ref())?;
        self.repair(&folder).await;
        tracing::info!(worker = %self.name, folder = %folder.display(), slots = self.slots, "worker started");
        let folder = Arc::new(folder);
        let free = Arc::new(Semaphore::new(self.slots));
        let clones = Arc::new(Clones::default());
        let mut jobs = tokio::task::JoinSet::new();
        let mut pause = self.poll;
        while !stop.is_cancelled() {
            while jobs.try_join_next().is_some() {}
            let room = free.available_permits();
            let claims = if room == 0 {
                Vec::new()
            } else {
                match self.queue.claim(&self.name, room).await {
                    Ok(claims) => {
                        pause = self.poll;
                        claims
                    }
                    Err(e) => {
                        tracing::warn!(worker = %self.name, error = %e, "cannot claim work; trying again");
                        pause = (pause * 2).min(Duration::from_secs(2));
                        Vec::new()
                    }
                }
            };
            if claims.is_empty() {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(pause) => {}
                }
                continue;
            }
            for claim in claims {
                let Ok(permit) = free.clone().acquire_owned().await else {
                    break;
                };
                let (me, folder, clones) = (self.clone(), folder.clone(), clones.clone());
                let span = tracing::info_span!("job", plan = %claim.item.plan, node = %claim.item.node, attempt = claim.item.attempt);
                jobs.spawn(
                    async move {
                        me.run_claim(claim, &folder, &clones).await;
                        drop(permit);
                    }
                    .instrument(span),
                );
            }
        }
        while jobs.join_next().await.is_some() {}
        tracing::info!(worker = %self.name, "worker stopped");
        Ok(())
    }

    /// The first free numbered place under `base`, held until the worker stops.
    fn take_place(&self, base: &Path) -> Result<(PathBuf, Slot), WorkerError> {
        let folder_error = |message: String| WorkerError::Folder {
            path: base.to_path_buf(),
            message,
        };
        let places = MachineSlots::new(base.join("places"), PLACES)
            .map_err(|e| folder_error(e.to_string()))?;
        let (k, slot) = places
            .try_acquire_numbered()
            .map_err(|e| folder_error(e.to_string()))?
            .ok_or_else(|| folder_error(format!("all {PLACES} worker places are taken")))?;
        let folder = base.join(format!("worker-{k}"));
        std::fs::create_dir_all(folder.join("clones")).map_err(|e| WorkerError::Folder {
            path: folder.clone(),
            message: e.to_string(),
        })?;
        Ok((folder, slot))
    }

    /// Stops the processes of the jobs a dead worker was running from `folder` (noted under
    /// `running/`) and removes the job worktrees it left in its clones.
    async fn repair(&self, folder: &Path) {
        let notes = std::fs::read_dir(folder.join("running"))
            .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default();
        let mut leftovers = Vec::new();
        for note in &notes {
            let order = std::fs::read(note)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<JobOrder>(&bytes).ok());
            if let Some(order) = order {
                let prefix = orchestrator_core::runner::job_token_prefix(&order.plan, &order.node);
                leftovers.push(Leftover::new(0, folder).token_prefix(prefix));
            }
        }
        if let (Some(reaper), false) = (&self.reaper, leftovers.is_empty()) {
            let reaper = reaper.clone();
            let stopped = tokio::task::spawn_blocking(move || reaper.reap(&leftovers))
                .await
                .unwrap_or_default();
            tracing::info!(
                groups = stopped.len(),
                "stopped the processes of a dead worker's jobs"
            );
        }
        for note in notes {
            let _ = std::fs::remove_file(note);
        }
        let Ok(entries) = std::fs::read_dir(folder.join("clones")) else {
            return;
        };
        for clone in entries.flatten().map(|e| e.path()) {
            let worktrees = self.git.list_worktrees(&clone).await.unwrap_or_default();
            for wt in worktrees {
                match self.git.remove_worktree(&clone, &wt).await {
                    Ok(()) => {
                        tracing::info!(worktree = %wt.display(), "removed a worktree a dead worker left")
                    }
                    Err(e) => {
                        tracing::warn!(worktree = %wt.display(), error = %e, "cannot remove a dead worker's worktree")
                    }
                }
            }
        }
    }

    /// Runs one claimed order to its report (or to its lost lease).
    async fn run_claim(&self, claim: Claim, folder: &Path, clones: &Clones) {
        let cancel = CancellationToken::new();
        let beat = tokio::spawn(heartbeat(self.queue.clone(), claim.clone(), cancel.clone()));
        let report = match serde_json::from_value::<JobOrder>(claim.item.payload.clone()) {
            Ok(order) => {
                // Noted while it runs, so that a worker taking this folder after a crash can
                // stop the job's processes (they outlive a killed worker).
                let note = folder.join("running").join(claim.id.to_string());
                let noted = std::fs::create_dir_all(folder.join("running")).and_then(|()| {
                    std::fs::write(&note, serde_json::to_vec(&order).unwrap_or_default())
                });
                if let Err(e) = noted {
                    tracing::warn!(error = %e, "cannot note the running job; a crash would leave its processes");
                }
                let report = self
                    .run_order(&claim, &order, folder, clones, &cancel)
                    .await;
                let _ = std::fs::remove_file(&note);
                report
            }
            Err(e) => failed(
                None,
                format!("the work item is not an order this worker reads: {e}"),
            ),
        };
        beat.abort();
        if cancel.is_cancelled() {
            tracing::warn!("the job's lease was lost while it ran; its result is dropped");
            return;
        }
        let value = match serde_json::to_value(&report) {
            Ok(v) => v,
            Err(e) => {
                serde_json::json!({"changes": [], "outcome": {"outcome": "failed", "phase": null, "reason": "startup_error", "message": format!("cannot encode the report: {e}")}})
            }
        };
        self.finish(&claim, value).await;
    }

    /// Fetches the base, runs the phases, pushes the result.
    async fn run_order(
        &self,
        claim: &Claim,
        order: &JobOrder,
        folder: &Path,
        clones: &Clones,
        cancel: &CancellationToken,
    ) -> JobReport {
        let clone = match clones.prepare(folder, &order.remote).await {
            Ok(path) => path,
            Err(message) => return failed(Some(Phase::MergeFi), message),
        };
        // Only what the clone lacks travels: a base it has (the plan's base fetched for an
        // earlier job, a result it made) is not fetched again.
        let fetched = match self.git.resolve(&clone, &order.base).await {
            Ok(have) => Ok(have),
            Err(_) => {
                self.git
                    .fetch(&clone, &order.remote, &order.refs.base)
                    .await
            }
        };
        match fetched {
            Ok(base) if base == order.base => {}
            Ok(other) => {
                return failed(
                    Some(Phase::MergeFi),
                    format!(
                        "{} on {} is {other}, not the order's base {}",
                        order.refs.base, order.remote, order.base
                    ),
                )
            }
            Err(e) => {
                return failed(
                    Some(Phase::MergeFi),
                    format!("cannot fetch the job's base: {e}"),
                )
            }
        }
        let mut report = match self
            .orchestrator
            .execute_order(order, &clone, cancel.clone())
            .await
        {
            Ok(report) => report,
            Err(e) => return failed(None, format!("cannot run the order: {e}")),
        };
        if let JobOutcome::Committed { commit } = &report.outcome {
            // A lapsed lease makes the push pointless (the attempt is lost already): checked
            // with the database first, so a worker that stalled (its heartbeat not run yet)
            // does not even write its ref.
            if let Err(QueueError::Fenced { why, .. }) = self.queue.renew(claim).await {
                tracing::warn!(%why, "the job's lease is gone; its result is not pushed");
                cancel.cancel();
            }
            if cancel.is_cancelled() {
                return report;
            }
            if let Err(e) = self
                .git
                .push(&clone, &order.remote, commit, &order.refs.result)
                .await
            {
                report.outcome = JobOutcome::Failed {
                    phase: Some(Phase::Commit),
                    reason: FailureReason::PhaseFailed,
                    message: format!("cannot push the result to {}: {e}", order.remote),
                };
            }
        }
        report
    }

    /// Reports `value`, trying again while the database does not answer, for as long as the
    /// lease could still be valid.
    async fn finish(&self, claim: &Claim, value: serde_json::Value) {
        let deadline = tokio::time::Instant::now() + self.queue.lease() * 2;
        let mut pause = Duration::from_millis(50);
        loop {
            match self.queue.finish(claim, value.clone()).await {
                Ok(()) => return,
                Err(QueueError::Fenced { why, .. }) => {
                    tracing::warn!(%why, "the result came too late and is dropped");
                    return;
                }
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(error = %e, "cannot report the result; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot report the result; its lease gives the job back");
                    return;
                }
            }
        }
    }
}

/// Renews `claim` every third of the lease; a refused renew cancels the job.
async fn heartbeat(queue: PgWorkQueue, claim: Claim, cancel: CancellationToken) {
    let every = (queue.lease() / 3).max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(every).await;
        match queue.renew(&claim).await {
            Ok(()) => {}
            Err(QueueError::Fenced { why, .. }) => {
                tracing::warn!(%why, "the job's lease is gone; stopping it");
                cancel.cancel();
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew the job's lease; trying at the next beat")
            }
        }
    }
}

/// A failed report.
fn failed(phase: Option<Phase>, message: String) -> JobReport {
    JobReport::new(JobOutcome::Failed {
        phase,
        reason: FailureReason::StartupError,
        message,
    })
}

/// `<host>-<pid>`.
fn default_name() -> String {
    format!("{}-{}", super::plans::host_name(), std::process::id())
}

/// The worker's clones, one per remote, each made once.
#[derive(Debug, Default)]
struct Clones {
    made: tokio::sync::Mutex<HashMap<String, PathBuf>>,
}

impl Clones {
    /// The clone of `remote` under `folder`, made (empty: objects come with the fetches) when
    /// there is none yet.
    async fn prepare(&self, folder: &Path, remote: &str) -> Result<PathBuf, String> {
        let mut made = self.made.lock().await;
        if let Some(path) = made.get(remote) {
            return Ok(path.clone());
        }
        let digest = sha2::Sha256::digest(remote.as_bytes());
        let key: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let path = folder.join("clones").join(key);
        if !path.join(".git").exists() {
            let out = tokio::process::Command::new("git")
                .args(["init", "--quiet"])
                .arg(&path)
                .output()
                .await
                .map_err(|e| format!("cannot run `git init`: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "`git init {}`: {}",
                    path.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        made.insert(remote.to_owned(), path.clone());
        Ok(path)
    }
}
