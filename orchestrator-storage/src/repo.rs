//! [`FsPlanRepository`]: the default, file-based [`PlanRepository`].

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use orchestrator_core::repository::{
    AttemptSpecs, Lease, LogKey, LogQuery, PlanListing, PlanRepository, PlanSummary, Staged,
};
use orchestrator_core::state::{PlanRecord, StateChange};
use orchestrator_core::{NodeId, PlanId, StoreError};

use crate::fsutil::{
    create_private_dir, create_private_dir_all, io_err, make_dir_private, sync_dir, sync_together,
    unique_suffix, write_file, write_new,
};
use crate::journal;
use crate::layout::{is_safe_component, PlanPaths, CREATE_PREFIX, DELETED_PREFIX, SNAPSHOT};
use crate::live::{Ctx, Live, SnapshotJob};
use crate::lock::{acquire_owner, HeldLeases, WriteLock};
use crate::options::{Durability, FsOptions};
use crate::snapshot::SpecJson;
use crate::stats::{Account, Counters, IoStats};
use crate::{logs, secrets, snapshot, specs};

/// The default store: plans as files under a root folder (the CLI uses `<repo>/.orchestrator`).
///
/// Layout (SPEC §4), under `<root>/plans/<planId>/`: `plan.json` (a snapshot of the plan with
/// its schema version), `journal-<n>.log` (the changes appended since, as checksummed
/// records), `specs/<nodeId>/attempts/<n>/` and `logs/<nodeId>/<attempt>/<phase>.log`.
///
/// - Every change is appended to the journal with one write and (with [`Durability::Full`],
///   the default) one flush: a transition costs O(size of the change), whatever the plan's
///   size. The journal is folded into a new snapshot from time to time (see
///   [`crate::Compaction`]); a large plan's on a thread of its own while appends go on, which
///   the last handle of the store to be dropped waits for. Every file is replaced atomically,
///   and a crash at any point leaves a readable plan holding a prefix of the appended batches,
///   each whole.
/// - [`load`](PlanRepository::load) reads the files (it reuses this handle's copy only when
///   the files have not changed since), so changes made by other processes are seen.
/// - [`acquire`](PlanRepository::acquire) takes an advisory lock that the operating system
///   releases if the process dies; a second process gets [`StoreError::Locked`] naming the
///   holder's pid. [`delete`](PlanRepository::delete) of a plan that someone else holds is
///   refused the same way.
/// - Logs are rotated when they reach [`FsOptions::log_max_bytes`] (one old file is kept).
///
/// Cloning shares the handle (and its cache). All file work runs on tokio's blocking pool.
///
/// ```
/// use orchestrator_core::ids::PlanId;
/// use orchestrator_core::plan::{JobSpec, PlanGraph, PlanSpec, WorkSpec};
/// use orchestrator_core::state::{NodeStatus, PlanRecord, StateChange};
/// use orchestrator_core::PlanRepository;
/// use orchestrator_storage::FsPlanRepository;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = FsPlanRepository::new(dir.path().join(".orchestrator"));
///
/// let spec = PlanSpec::new("demo").job(JobSpec::new("build", "Build", WorkSpec::shell("make")));
/// let nodes = PlanGraph::build(&spec).unwrap().node_count();
/// let plan = PlanRecord::new(PlanId::random(), spec, dir.path().into(), nodes, 0);
/// store.create(&plan).await.unwrap();
///
/// let ready = StateChange::Node { node: 0, status: NodeStatus::Ready, at: 1 };
/// store.append(&plan.state.id, &[ready]).await.unwrap();
///
/// let loaded = store.load(&plan.state.id).await.unwrap();
/// assert_eq!(loaded.state.nodes[0].status, NodeStatus::Ready);
/// # });
/// ```
#[derive(Clone)]
pub struct FsPlanRepository {
    inner: Arc<Inner>,
    snapshots: Arc<SnapshotThreads>,
}

/// The threads writing snapshots in the background (see
/// [`crate::Compaction::background_bytes`]). The last handle of the store to be dropped waits
/// for them, so that a process that ends with its store leaves each snapshot in place, not a
/// temporary file and two journals to read. (The threads hold the store's `Inner`, not this.)
#[derive(Default)]
struct SnapshotThreads(Mutex<Vec<std::thread::JoinHandle<()>>>);

impl SnapshotThreads {
    fn join(&self) {
        let threads = std::mem::take(&mut *lock(&self.0));
        for thread in threads {
            let _ = thread.join();
        }
    }
}

impl Drop for SnapshotThreads {
    fn drop(&mut self) {
        self.join();
    }
}

type Slot = Arc<Mutex<Option<Live>>>;

/// A compaction an append leaves to a thread of its own.
enum Later {
    /// A large plan's journal was due: the snapshot to write (see [`SnapshotJob`]).
    Snapshot(Box<SnapshotJob>),
    /// The plan has ended (see [`Live::compaction_due_at_end`]).
    Compact,
}

struct Inner {
    root: PathBuf,
    plans: PathBuf,
    options: FsOptions,
    /// This handle's view of each plan it has used; `None` until read or after a failure.
    slots: Mutex<HashMap<PlanId, Slot>>,
    held: HeldLeases,
    /// Serializes log appends so that rotations do not race.
    logs: Mutex<()>,
    counters: Counters,
}

impl fmt::Debug for FsPlanRepository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FsPlanRepository")
            .field("root", &self.inner.root)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning only means a thread panicked while holding the lock; every slot write
    // replaces the whole value, so the data is never half-updated.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A nanosecond stamp that strictly increases within this process.
fn creation_stamp() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(actual) => last = actual,
        }
    }
}

/// Runs blocking file work off the async threads.
async fn blocking<T, F>(f: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, StoreError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) => Err(task_failed(e)),
    }
}

/// The error of a store task that panicked or was cancelled, saying why.
fn task_failed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io {
        operation: "run a store task",
        path: PathBuf::new(),
        source: io::Error::other(e.to_string()),
    }
}

/// A new plan written into a hidden folder (see [`PlanRepository::stage`]).
struct StagedPlan {
    id: PlanId,
    /// The hidden folder.
    tmp: PathBuf,
    /// Where the plan goes.
    paths: PlanPaths,
    created_ns: u64,
    spec_json: SpecJson,
}

impl Drop for StagedPlan {
    /// A staged plan never created is removed (after a move into place, nothing is left).
    fn drop(&mut self) {
        if self.tmp.exists() {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

/// A folder of a create that was interrupted: creates take milliseconds, so one left for ten
/// minutes belongs to a process that died.
fn is_stale_create(name: &str, entry: &fs::DirEntry) -> bool {
    name.starts_with(CREATE_PREFIX)
        && entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > std::time::Duration::from_secs(600))
}

fn rejected_node(plan: &PlanId, node: &NodeId) -> StoreError {
    StoreError::Rejected {
        plan: plan.clone(),
        message: format!("node id {node:?} cannot be used as a folder name"),
    }
}

impl FsPlanRepository {
    /// A store rooted at `root` with default options. Nothing is created until a plan is.
    ///
    /// ```
    /// use orchestrator_storage::FsPlanRepository;
    /// let store = FsPlanRepository::new("/tmp/my-repo/.orchestrator");
    /// assert!(store.root().ends_with(".orchestrator"));
    /// ```
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self::with_options(root, FsOptions::default())
    }

    /// A store rooted at `root` with `options`.
    ///
    /// ```
    /// use orchestrator_storage::{Durability, FsOptions, FsPlanRepository};
    /// let store = FsPlanRepository::with_options(
    ///     "/tmp/my-repo/.orchestrator",
    ///     FsOptions::default().durability(Durability::Flush),
    /// );
    /// assert_eq!(store.options().durability, Durability::Flush);
    /// ```
    pub fn with_options(root: impl Into<PathBuf>, options: FsOptions) -> Self {
        let root = root.into();
        FsPlanRepository {
            inner: Arc::new(Inner {
                plans: root.join("plans"),
                root,
                options,
                slots: Mutex::new(HashMap::new()),
                held: HeldLeases::default(),
                logs: Mutex::new(()),
                counters: Counters::default(),
            }),
            snapshots: Arc::default(),
        }
    }

    /// The root folder.
    ///
    /// ```
    /// use orchestrator_storage::FsPlanRepository;
    /// assert_eq!(FsPlanRepository::new("/x").root(), std::path::Path::new("/x"));
    /// ```
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The options in force.
    ///
    /// ```
    /// use orchestrator_storage::{FsOptions, FsPlanRepository};
    /// assert_eq!(FsPlanRepository::new("/x").options(), &FsOptions::default());
    /// ```
    pub fn options(&self) -> &FsOptions {
        &self.inner.options
    }

    /// The folder holding a plan's files (whether or not it exists), or `None` for an id that
    /// cannot be a folder name.
    ///
    /// ```
    /// use orchestrator_core::PlanId;
    /// use orchestrator_storage::FsPlanRepository;
    /// let store = FsPlanRepository::new("/r");
    /// let dir = store.plan_dir(&PlanId::from("abc")).unwrap();
    /// assert_eq!(dir, std::path::Path::new("/r/plans/abc"));
    /// assert!(store.plan_dir(&PlanId::from("../etc")).is_none());
    /// ```
    pub fn plan_dir(&self, plan: &PlanId) -> Option<PathBuf> {
        PlanPaths::of(&self.inner.plans, plan).map(|p| p.dir)
    }

    /// Waits until the snapshots this store (and its clones) is writing in the background
    /// are written (see [`crate::Compaction::background_bytes`]); they are put in place by
    /// then, or by the next append. Blocks the calling thread: a benchmark calls it between
    /// runs, a host before it copies the store's folder. Dropping the last handle waits too.
    ///
    /// ```
    /// use orchestrator_storage::FsPlanRepository;
    /// FsPlanRepository::new("/x").settle(); // nothing under way: returns at once
    /// ```
    pub fn settle(&self) {
        self.snapshots.join();
    }

    /// What this store (and its clones) has written so far.
    ///
    /// ```
    /// use orchestrator_storage::FsPlanRepository;
    /// let stats = FsPlanRepository::new("/x").io_stats();
    /// assert_eq!(stats.state_bytes_written(), 0);
    /// ```
    pub fn io_stats(&self) -> IoStats {
        self.inner.counters.snapshot()
    }
}

impl Inner {
    fn paths(&self, plan: &PlanId) -> Result<PlanPaths, StoreError> {
        PlanPaths::of(&self.plans, plan).ok_or_else(|| StoreError::NotFound(plan.clone()))
    }

    /// Paths of an existing plan.
    fn existing(&self, plan: &PlanId) -> Result<PlanPaths, StoreError> {
        let paths = self.paths(plan)?;
        if !paths.dir.is_dir() {
            return Err(StoreError::NotFound(plan.clone()));
        }
        Ok(paths)
    }

    fn ctx<'a>(&'a self, plan: &'a PlanId, paths: &'a PlanPaths) -> Ctx<'a> {
        Ctx {
            plan,
            paths,
            options: &self.options,
            counters: &self.counters,
        }
    }

    fn slot(&self, plan: &PlanId) -> Slot {
        lock(&self.slots).entry(plan.clone()).or_default().clone()
    }

    fn sync(&self) -> bool {
        self.options.durability == Durability::Full
    }

    /// Creates `plan` (owned: it becomes this handle's cached copy, not cloned again).
    fn create(&self, plan: PlanRecord) -> Result<(), StoreError> {
        let staged = self.stage(&plan)?;
        self.publish(staged, plan)
    }

    /// Writes `plan` into a hidden folder of its own, flushed with full durability: a plan
    /// folder always holds a whole plan. (A crash leaves the folder to the sweep of stale
    /// creations.)
    fn stage(&self, plan: &PlanRecord) -> Result<StagedPlan, StoreError> {
        let id = &plan.state.id;
        let paths = PlanPaths::of(&self.plans, id).ok_or_else(|| StoreError::Rejected {
            plan: id.clone(),
            message: "the plan id cannot be used as a folder name".into(),
        })?;
        if paths.dir.exists() {
            return Err(StoreError::AlreadyExists(id.clone()));
        }
        create_private_dir_all(&self.plans)?;
        // Folders made before the store kept its files private (or by hand) are restricted
        // too: the plans below them hold specs, logs and secrets.
        make_dir_private(&self.root)?;
        make_dir_private(&self.plans)?;
        let tmp = self
            .plans
            .join(format!("{CREATE_PREFIX}{id}-{}", unique_suffix()));
        match self.write_new_plan(&tmp, plan) {
            Ok((created_ns, spec_json)) => Ok(StagedPlan {
                id: id.clone(),
                tmp,
                paths,
                created_ns,
                spec_json,
            }),
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                Err(e)
            }
        }
    }

    /// Moves a staged plan's folder into place (its record `plan`), or removes it if that
    /// fails.
    fn publish(&self, mut staged: StagedPlan, plan: PlanRecord) -> Result<(), StoreError> {
        let (id, paths) = (&staged.id, &staged.paths);
        if let Err(e) = fs::rename(&staged.tmp, &paths.dir) {
            // (The staged folder is removed as `staged` is dropped.)
            return Err(if paths.dir.exists() {
                StoreError::AlreadyExists(id.clone())
            } else {
                io_err("move into place", &paths.dir)(e)
            });
        }
        if self.sync() {
            sync_dir(&self.plans, &self.counters)?;
        }
        // The plan is created; without its file identity it is just not cached.
        let spec_json = std::mem::take(&mut staged.spec_json);
        let (id, paths) = (&staged.id, &staged.paths);
        if let Ok(live) = Live::created(&self.ctx(id, paths), plan, staged.created_ns, spec_json) {
            *lock(&self.slot(id)) = Some(live);
        }
        Ok(())
    }

    /// Writes a new plan's files into `dir`; returns its creation stamp and its spec's JSON.
    fn write_new_plan(&self, dir: &Path, plan: &PlanRecord) -> Result<(u64, SpecJson), StoreError> {
        create_private_dir(dir)?;
        let created_ns = creation_stamp();
        let mut spec_json = SpecJson::default();
        let mut snapshot = snapshot::encode(plan, 0, created_ns, &mut spec_json).map_err(|e| {
            StoreError::Rejected {
                plan: plan.state.id.clone(),
                message: format!("cannot serialize the plan: {e}"),
            }
        })?;
        let (sync, c) = (self.sync(), &self.counters);
        let probe = PlanPaths {
            dir: dir.to_path_buf(),
        };
        // Secret env values go to secrets.json (written first), the snapshot refers to them.
        let names = &self.options.secret_env;
        snapshot.hide_secrets(|json| secrets::hide_in(&probe.secrets(), json, names, sync, c))?;
        let (snapshot_path, journal_path) = (probe.snapshot(), probe.journal(0));
        let written = [
            (
                write_file(&snapshot_path, &snapshot.pieces(), c, Account::Snapshot)?,
                snapshot_path,
            ),
            (
                write_file(&journal_path, &[&journal::header(0)], c, Account::Journal)?,
                journal_path,
            ),
        ];
        write_new(&probe.write_lock(), &[], false, c, Account::Other)?;
        write_new(&probe.owner_lock(), &[], false, c, Account::Other)?;
        if sync {
            // All of it must be on the disk before the folder is renamed into place, in no
            // particular order.
            sync_together(&written, dir, c)?;
        }
        Ok((created_ns, spec_json))
    }

    /// Reads a plan from disk; a plan that does not exist is forgotten by this handle.
    fn read(&self, ctx: &Ctx<'_>) -> Result<Live, StoreError> {
        let read = Live::read(ctx);
        if let Err(StoreError::NotFound(_)) = &read {
            lock(&self.slots).remove(ctx.plan);
        }
        read
    }

    /// Appends `changes`; returns the compaction to run in the background, if one is due (see
    /// [`FsPlanRepository::compact_in_background`]).
    fn append(&self, plan: &PlanId, changes: &[StateChange]) -> Result<Option<Later>, StoreError> {
        if changes.is_empty() {
            return self.existing(plan).map(|_| None);
        }
        let paths = self.paths(plan)?;
        let ctx = self.ctx(plan, &paths);
        let slot = self.slot(plan);
        let mut slot = lock(&slot);
        let _write = WriteLock::acquire(&paths.write_lock(), plan)?;
        let mut live = match slot.take() {
            Some(live) if live.is_current(&ctx)? => live,
            _ => self.read(&ctx)?,
        };
        let ended_before = live.record.state.ended_at;
        live.append(&ctx, changes)?;
        let mut later = None;
        if live.compaction_due(&ctx) {
            // The changes are already durable: a failed compaction is only reported, and
            // the next append reads the plan afresh.
            match live.start_compaction(&ctx) {
                Ok(started) => later = started.map(|job| Later::Snapshot(Box::new(job))),
                Err(e) => {
                    tracing::warn!(plan = %plan, error = %e, "journal compaction failed");
                    return Ok(None);
                }
            }
        } else if live.record.state.ended_at.is_some()
            && live.record.state.ended_at != ended_before
            && live.compaction_due_at_end(&ctx)
        {
            // This append ended the plan: its end time is new (no scan of the batch).
            later = Some(Later::Compact);
        }
        *slot = Some(live);
        Ok(later)
    }

    /// Compacts a plan that has ended (see [`Live::compaction_due_at_end`]) under its locks,
    /// unless its files changed since this handle last saw them (then whoever changed them
    /// owns the plan's journal).
    fn compact_ended(&self, plan: &PlanId) {
        let Ok(paths) = self.paths(plan) else { return };
        let ctx = self.ctx(plan, &paths);
        let slot = self.slot(plan);
        let mut slot = lock(&slot);
        let result =
            WriteLock::acquire(&paths.write_lock(), plan).and_then(|_write| match slot.as_mut() {
                Some(live) if live.is_current(&ctx)? && live.compaction_due_at_end(&ctx) => {
                    live.compact(&ctx)
                }
                _ => Ok(()),
            });
        if let Err(e) = result {
            // The next use reads the plan afresh.
            *slot = None;
            tracing::warn!(plan = %plan, error = %e, "journal compaction failed");
        }
    }

    /// Writes `job`'s snapshot and hands it over; then puts it in place under the plan's
    /// locks, unless an append did meanwhile (see [`Live::finish_pending`]).
    fn run_snapshot_job(&self, plan: &PlanId, job: SnapshotJob) {
        let Ok(paths) = self.paths(plan) else { return };
        let ctx = self.ctx(plan, &paths);
        job.run(&ctx);
        let slot = self.slot(plan);
        let mut slot = lock(&slot);
        let Some(live) = slot.as_mut() else { return };
        match WriteLock::acquire(&paths.write_lock(), plan) {
            Ok(_write) => live.finish_pending(&ctx),
            Err(e) => {
                tracing::debug!(plan = %plan, error = %e, "the next append puts the snapshot in place")
            }
        }
    }

    /// The plan as on disk, with its creation stamp; `remember` keeps it in this handle.
    fn load(&self, plan: &PlanId, remember: bool) -> Result<(PlanRecord, u64), StoreError> {
        let paths = self.paths(plan)?;
        let ctx = self.ctx(plan, &paths);
        let slot = if remember {
            Some(self.slot(plan))
        } else {
            lock(&self.slots).get(plan).cloned()
        };
        let Some(slot) = slot else {
            let live = Live::read(&ctx)?;
            return Ok((live.record, live.created_ns));
        };
        let mut slot = lock(&slot);
        if let Some(live) = slot.as_ref() {
            if live.is_current(&ctx)? {
                return Ok((live.record.clone(), live.created_ns));
            }
        }
        *slot = None;
        let live = self.read(&ctx)?;
        let out = (live.record.clone(), live.created_ns);
        if remember {
            *slot = Some(live);
        }
        Ok(out)
    }

    fn list(&self) -> Result<PlanListing, StoreError> {
        let entries = match fs::read_dir(&self.plans) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(PlanListing::default()),
            Err(e) => return Err(io_err("list", &self.plans)(e)),
        };
        let mut plans = Vec::new();
        let mut damaged = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err("list", &self.plans))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if name.starts_with(DELETED_PREFIX) || is_stale_create(&name, &entry) {
                // Left by a delete or a create that was interrupted.
                let _ = fs::remove_dir_all(entry.path());
                continue;
            }
            if !is_safe_component(&name) || !entry.path().is_dir() {
                continue;
            }
            let id = PlanId::from(name);
            match self.load(&id, false) {
                Ok((record, created_ns)) => plans.push((PlanSummary::of(&record), created_ns)),
                // Deleted while we listed.
                Err(StoreError::NotFound(_)) => {}
                Err(e) => damaged.push((id, e)),
            }
        }
        plans.sort_by(|(a, a_ns), (b, b_ns)| {
            (b.created_at, b_ns, &b.plan_id).cmp(&(a.created_at, a_ns, &a.plan_id))
        });
        damaged.sort_by(|a, b| a.0.cmp(&b.0));
        let mut listing = PlanListing::default();
        listing.plans = plans.into_iter().map(|(s, _)| s).collect();
        listing.damaged = damaged;
        Ok(listing)
    }

    fn delete(&self, plan: &PlanId) -> Result<(), StoreError> {
        let paths = self.existing(plan)?;
        let mine = lock(&self.held).contains(plan);
        // Someone else running the plan keeps it; our own lease does not.
        let _owner = if mine {
            None
        } else {
            Some(acquire_owner(&paths.owner_lock(), plan, &self.held)?)
        };
        let slot = self.slot(plan);
        let mut slot = lock(&slot);
        let _write = WriteLock::acquire(&paths.write_lock(), plan)?;
        // Renaming first makes the plan disappear at once, even if removing its files fails
        // half-way; leftovers are removed by a later `list`.
        let grave = self
            .plans
            .join(format!("{DELETED_PREFIX}{plan}-{}", unique_suffix()));
        fs::rename(&paths.dir, &grave).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => StoreError::NotFound(plan.clone()),
            _ => io_err("move away", &paths.dir)(e),
        })?;
        *slot = None;
        lock(&self.slots).remove(plan);
        if self.sync() {
            sync_dir(&self.plans, &self.counters)?;
        }
        if let Err(e) = fs::remove_dir_all(&grave) {
            tracing::warn!(folder = %grave.display(), error = %e, "cannot remove a deleted plan's files");
        }
        Ok(())
    }

    fn acquire(&self, plan: &PlanId) -> Result<Lease, StoreError> {
        let paths = self.existing(plan)?;
        if !paths.dir.join(SNAPSHOT).is_file() {
            return Err(StoreError::NotFound(plan.clone()));
        }
        acquire_owner(&paths.owner_lock(), plan, &self.held)
    }

    /// `json` about to be written to a plan's files other than its state (the attempt specs)
    /// with its secret values replaced; takes the write lock only when there are some.
    fn hide_secrets(
        &self,
        plan: &PlanId,
        paths: &PlanPaths,
        json: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        if !crate::secrets::Secrets::may_hold_secrets(json) {
            return Ok(None);
        }
        // The table may grow: under the write lock, like the state's writers.
        let _write = WriteLock::acquire(&paths.write_lock(), plan)?;
        let names = &self.options.secret_env;
        secrets::hide_in(&paths.secrets(), json, names, self.sync(), &self.counters)
    }

    fn node_paths(&self, plan: &PlanId, node: &NodeId) -> Result<PlanPaths, StoreError> {
        let paths = self.existing(plan)?;
        if !is_safe_component(node.as_str()) {
            return Err(rejected_node(plan, node));
        }
        Ok(paths)
    }
}

impl FsPlanRepository {
    /// Writes a node's logs (see [`LogQuery`]) to `out` straight from the files, through a
    /// small buffer: unlike [`PlanRepository::read_log`], a log of any size costs the same
    /// memory. Runs on a blocking thread; an error of `out` ends the copy and is returned.
    pub async fn copy_log<W: std::io::Write + Send + 'static>(
        &self,
        plan: &PlanId,
        node: &NodeId,
        query: LogQuery,
        mut out: W,
    ) -> Result<crate::LogCopy, StoreError> {
        self.on_node(plan, node, move |_, paths, node| {
            logs::copy(&paths.node_logs(node), query, &mut out)
        })
        .await
    }

    /// Runs `later` on a thread of its own (see [`crate::Compaction::background_bytes`]).
    fn compact_in_background(&self, plan: &PlanId, later: Later) {
        let (inner, id) = (self.inner.clone(), plan.clone());
        let spawned = std::thread::Builder::new()
            .name("plan-snapshot".into())
            .spawn(move || match later {
                Later::Snapshot(job) => inner.run_snapshot_job(&id, *job),
                Later::Compact => inner.compact_ended(&id),
            });
        match spawned {
            Ok(thread) => {
                let mut threads = lock(&self.snapshots.0);
                threads.retain(|t| !t.is_finished());
                threads.push(thread);
            }
            // Dropped: a due journal is compacted within the next append that finds it due,
            // and an ended plan keeps its journal (it is read whole).
            Err(e) => {
                tracing::warn!(plan = %plan, error = %e, "cannot start a thread to compact the journal")
            }
        }
    }

    /// Runs `f` off the async threads with the paths of an existing plan and a node id that
    /// can be a folder name.
    async fn on_node<T, F>(&self, plan: &PlanId, node: &NodeId, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner, PlanPaths, &NodeId) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        let (plan, node) = (plan.clone(), node.clone());
        blocking(move || f(&inner, inner.node_paths(&plan, &node)?, &node)).await
    }
}

#[async_trait]
impl PlanRepository for FsPlanRepository {
    async fn create(&self, plan: &PlanRecord) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        let plan = plan.clone();
        blocking(move || inner.create(plan)).await
    }

    async fn stage(&self, plan: &PlanRecord) -> Result<Staged, StoreError> {
        let inner = self.inner.clone();
        let plan = plan.clone();
        // The record staged becomes this handle's cached copy when the plan is created.
        blocking(move || inner.stage(&plan).map(|staged| Staged::new((staged, plan)))).await
    }

    async fn create_staged(&self, plan: &PlanRecord, staged: Staged) -> Result<(), StoreError> {
        match staged.take::<(StagedPlan, PlanRecord)>() {
            // The record staged, as the engine hands it back (its spec shared): comparing
            // every node would cost a large plan's creation ~0.2 ms.
            Some((staged, record))
                if staged.id == plan.state.id
                    && Arc::ptr_eq(&record.spec, &plan.spec)
                    && record.state.nodes.len() == plan.state.nodes.len() =>
            {
                let inner = self.inner.clone();
                blocking(move || inner.publish(staged, record)).await
            }
            // Staged by another store, or for another record: created as it is now (what was
            // staged is removed as it is dropped).
            _ => self.create(plan).await,
        }
    }

    async fn discard(&self, staged: Staged) {
        // Removed off the async threads: a large plan's folder.
        if let Some(staged) = staged.take::<(StagedPlan, PlanRecord)>() {
            let _ = blocking(move || {
                drop(staged);
                Ok(())
            })
            .await;
        }
    }

    async fn append(&self, plan: &PlanId, changes: &[StateChange]) -> Result<(), StoreError> {
        self.append_owned(plan, changes.to_vec()).await.0
    }

    async fn append_owned(
        &self,
        plan: &PlanId,
        changes: Vec<StateChange>,
    ) -> (Result<(), StoreError>, Vec<StateChange>) {
        // On the blocking pool, which takes the list there and back: the engine's journal
        // writer gives up its list for the append, so nothing is copied. (Copying it cost a
        // 10,000-node run ~2 ms of CPU, beside the engine's. Running the append in place with
        // `block_in_place` saved the copy too, but made the ninja tree of
        // `benches/vs_ninja.sh` 6-13% slower.)
        let inner = self.inner.clone();
        let id = plan.clone();
        let ran = tokio::task::spawn_blocking(move || {
            // A panic must not take the list with it: the caller retries with it.
            let append = std::panic::AssertUnwindSafe(|| inner.append(&id, &changes));
            let later = std::panic::catch_unwind(append)
                .unwrap_or_else(|_| Err(task_failed("the append panicked")));
            (later, changes)
        })
        .await;
        let (later, changes) = match ran {
            Ok(ran) => ran,
            // Cancelled before it ran (the runtime is shutting down): the list is gone.
            Err(e) => (Err(task_failed(e)), Vec::new()),
        };
        let result = later.map(|later| {
            if let Some(later) = later {
                self.compact_in_background(plan, later);
            }
        });
        (result, changes)
    }

    async fn load(&self, plan: &PlanId) -> Result<PlanRecord, StoreError> {
        let inner = self.inner.clone();
        let plan = plan.clone();
        blocking(move || inner.load(&plan, true).map(|(r, _)| r)).await
    }

    async fn list(&self) -> Result<PlanListing, StoreError> {
        let inner = self.inner.clone();
        blocking(move || inner.list()).await
    }

    async fn delete(&self, plan: &PlanId) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        let plan = plan.clone();
        blocking(move || inner.delete(&plan)).await
    }

    async fn acquire(&self, plan: &PlanId) -> Result<Lease, StoreError> {
        let inner = self.inner.clone();
        let plan = plan.clone();
        blocking(move || inner.acquire(&plan)).await
    }

    async fn save_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
        attempt_specs: &AttemptSpecs,
    ) -> Result<(), StoreError> {
        let attempt_specs = attempt_specs.clone();
        let id = plan.clone();
        self.on_node(plan, node, move |inner, paths, node| {
            let hide = |json: &[u8]| inner.hide_secrets(&id, &paths, json);
            specs::save(
                &paths.attempt_specs(node, attempt),
                &attempt_specs,
                &inner.counters,
                &hide,
            )
        })
        .await
    }

    async fn load_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
    ) -> Result<AttemptSpecs, StoreError> {
        self.on_node(plan, node, move |_, paths, node| {
            specs::load(&paths.attempt_specs(node, attempt), &paths.secrets())
        })
        .await
    }

    async fn append_log(&self, key: &LogKey, text: &str) -> Result<(), StoreError> {
        let (attempt, phase, text) = (key.attempt, key.phase, text.to_owned());
        self.on_node(&key.plan, &key.node, move |inner, paths, node| {
            let _serial = lock(&inner.logs);
            logs::append(
                &paths.log(node, attempt, phase),
                &text,
                inner.options.log_max_bytes,
                &inner.counters,
            )
        })
        .await
    }

    async fn read_log(
        &self,
        plan: &PlanId,
        node: &NodeId,
        query: LogQuery,
    ) -> Result<String, StoreError> {
        self.on_node(plan, node, move |_, paths, node| {
            logs::read(&paths.node_logs(node), query)
        })
        .await
    }
}
