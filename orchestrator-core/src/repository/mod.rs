//! The storage plug-in point: [`PlanRepository`], its errors, and [`InMemoryPlanRepository`].
//!
//! A store keeps a plan as its creation record plus an append-only list of
//! [`StateChange`]s; [`PlanRepository::load`] returns the record with every appended change
//! applied. Every implementation runs `conformance::repository::run_all` (feature `testing`).

use std::fmt::Debug;
use std::path::PathBuf;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::ids::{Millis, NodeId, PlanId};
use crate::plan::WorkSpec;
use crate::state::{Phase, PlanRecord, PlanStatus, StateChange};

mod memory;
mod retrying;

pub use memory::InMemoryPlanRepository;
pub use retrying::Retrying;

/// Store failures, as data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No plan with this id.
    #[error("plan {0} not found in the store")]
    NotFound(PlanId),
    /// A plan with this id exists already.
    #[error("plan {0} already exists in the store")]
    AlreadyExists(PlanId),
    /// Another process (or handle) owns the plan.
    #[error("plan {plan} is in use by {owner}")]
    Locked {
        /// Plan.
        plan: PlanId,
        /// Who holds it, e.g. `process 4242` .
        owner: String,
    },
    /// Stored data cannot be read back.
    #[error("damaged plan data in {}: {message}", .path.display())]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Stored data of a schema version this build cannot read.
    #[error("{}: schema version {found} is not supported (this build reads up to {supported})", .path.display())]
    SchemaVersion {
        /// The file.
        path: PathBuf,
        /// Version found.
        found: u32,
        /// Newest version supported.
        supported: u32,
    },
    /// A change that the stored state rejects.
    #[error("plan {plan}: {message}")]
    Rejected {
        /// Plan.
        plan: PlanId,
        /// Why.
        message: String,
    },
    /// I/O failure.
    #[error("{operation} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        operation: &'static str,
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    /// Whether the failure is momentary, so that trying the same call again in a few
    /// milliseconds may succeed: an I/O call that was interrupted (`EINTR`, or a read that
    /// raced a compaction), would block (`EAGAIN`/`EWOULDBLOCK`) or timed out. [`Retrying`]
    /// retries these with a short backoff.
    ///
    /// A plan [`Locked`](StoreError::Locked) by another owner is not transient: its lease is
    /// held for as long as that owner runs the plan, so for the caller the answer stands
    /// (see [`StoreError::is_retryable`]). Stores wait for their own short-lived locks (the file
    /// store's journal lock) instead of failing.
    ///
    /// ```
    /// use std::io;
    /// use orchestrator_core::{PlanId, StoreError};
    /// let io = |kind| StoreError::Io {
    ///     operation: "read",
    ///     path: "state.json".into(),
    ///     source: io::Error::from(kind),
    /// };
    /// assert!(io(io::ErrorKind::Interrupted).is_transient());
    /// assert!(!io(io::ErrorKind::PermissionDenied).is_transient());
    /// let locked = StoreError::Locked { plan: PlanId::from("p"), owner: "process 42".into() };
    /// assert!(!locked.is_transient() && locked.is_retryable());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::Interrupted
                    | std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
            ),
            _ => false,
        }
    }

    /// Whether the same call may succeed when tried again later: a
    /// [transient](StoreError::is_transient) failure, or a plan [`Locked`](StoreError::Locked)
    /// by another owner, which it releases when it stops running the plan.
    pub fn is_retryable(&self) -> bool {
        self.is_transient() || matches!(self, StoreError::Locked { .. })
    }
}

/// A plan in a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PlanSummary {
    /// Id.
    pub plan_id: PlanId,
    /// Name.
    pub name: String,
    /// Derived status.
    pub status: PlanStatus,
    /// Creation time.
    pub created_at: Millis,
}

impl PlanSummary {
    /// Summary of a record.
    pub fn of(record: &PlanRecord) -> Self {
        PlanSummary {
            plan_id: record.state.id.clone(),
            name: record.spec.name.clone(),
            status: record.status(),
            created_at: record.state.created_at,
        }
    }
}

/// Result of [`PlanRepository::list`]: readable plans newest first, and the damaged ones.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct PlanListing {
    /// Plans, newest first.
    pub plans: Vec<PlanSummary>,
    /// Plans that could not be read, with the reason.
    pub damaged: Vec<(PlanId, StoreError)>,
}

/// Where a log line belongs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogKey {
    /// Plan.
    pub plan: PlanId,
    /// Node.
    pub node: NodeId,
    /// Phase.
    pub phase: Phase,
    /// Attempt number (1-based).
    pub attempt: u32,
}

/// Which logs to read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogQuery {
    /// Only this phase (default: all, in pipeline order).
    pub phase: Option<Phase>,
    /// Only this attempt (default: the latest that has logs).
    pub attempt: Option<u32>,
    /// Only the last `n` lines.
    pub tail: Option<usize>,
}

impl LogQuery {
    /// Every phase of the latest attempt.
    pub fn new() -> Self {
        LogQuery::default()
    }
    /// Only `phase`.
    pub fn phase(mut self, phase: Phase) -> Self {
        self.phase = Some(phase);
        self
    }
    /// Only attempt `n`.
    pub fn attempt(mut self, n: u32) -> Self {
        self.attempt = Some(n);
        self
    }
    /// Only the last `n` lines.
    pub fn tail(mut self, n: usize) -> Self {
        self.tail = Some(n);
        self
    }
}

/// The specs an attempt ran with (stored per attempt for later inspection).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptSpecs {
    /// Work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<WorkSpec>,
    /// Prechecks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prechecks: Option<WorkSpec>,
    /// Postchecks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postchecks: Option<WorkSpec>,
}

/// Exclusive ownership of a plan; dropping it releases the plan.
// The box is held only for its `Drop`.
pub struct Lease(#[allow(dead_code)] Box<dyn Send + Sync>);

impl Lease {
    /// Wraps whatever releases the ownership on drop (a lock file guard, a map entry guard...).
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        Lease(Box::new(guard))
    }
}

impl Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lease")
    }
}

/// A new plan that [`PlanRepository::stage`] wrote where no reader finds it yet: what the
/// store needs to make it visible ([`PlanRepository::create_staged`]) or to remove it
/// ([`PlanRepository::discard`]). Empty for a store that stages nothing.
///
/// ```
/// use orchestrator_core::repository::Staged;
/// let staged = Staged::new(("folder", 7u64));
/// assert_eq!(staged.take::<(&str, u64)>(), Some(("folder", 7)));
/// assert_eq!(Staged::default().take::<u64>(), None);
/// ```
#[derive(Default)]
pub struct Staged(Option<Box<dyn std::any::Any + Send + Sync>>);

impl Staged {
    /// What a store staged, for its own `create_staged` or `discard` to take back.
    pub fn new(what: impl std::any::Any + Send + Sync) -> Self {
        Staged(Some(Box::new(what)))
    }

    /// What was staged, if it is a `T` (a store takes back only its own kind).
    pub fn take<T: std::any::Any>(self) -> Option<T> {
        self.0
            .and_then(|what| what.downcast::<T>().ok())
            .map(|what| *what)
    }
}

impl Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Staged(..)"
        } else {
            "Staged(nothing)"
        })
    }
}

/// Persists plans: creation records, journals of changes, per-attempt specs and logs.
#[async_trait]
pub trait PlanRepository: Send + Sync + Debug + 'static {
    /// Stores a new plan. [`StoreError::AlreadyExists`] if the id is taken.
    async fn create(&self, plan: &PlanRecord) -> Result<(), StoreError>;

    /// Begins creating `plan` where no reader finds it (`load`, `list` and other processes do
    /// not see it), written as durably as [`PlanRepository::create`] stores a plan, so that
    /// the writing goes on while the caller still checks the plan:
    /// [`PlanRepository::create_staged`] then makes it visible at little cost, or
    /// [`PlanRepository::discard`] removes it. A staged plan left behind by a crash is
    /// removed as an interrupted creation. The engine stages a large plan while it validates
    /// it. The default stages nothing, and `create_staged` creates the plan.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use orchestrator_core::repository::PlanRepository;
    /// use orchestrator_core::plan::PlanSpec;
    /// use orchestrator_core::state::PlanRecord;
    /// use orchestrator_core::{InMemoryPlanRepository, PlanId};
    ///
    /// let store = InMemoryPlanRepository::new();
    /// let plan = PlanRecord::new(PlanId::random(), PlanSpec::new("p"), ".".into(), 0, 0);
    /// let staged = store.stage(&plan).await.unwrap();
    /// store.create_staged(&plan, staged).await.unwrap();
    /// assert_eq!(store.load(&plan.state.id).await.unwrap(), plan);
    /// # });
    /// ```
    async fn stage(&self, plan: &PlanRecord) -> Result<Staged, StoreError> {
        let _ = plan;
        Ok(Staged::default())
    }

    /// Creates `plan`, which [`PlanRepository::stage`] staged as `staged` (the same record),
    /// as [`PlanRepository::create`] does: [`StoreError::AlreadyExists`] if the id is taken,
    /// and nothing staged is left behind after an error. The default creates it.
    async fn create_staged(&self, plan: &PlanRecord, staged: Staged) -> Result<(), StoreError> {
        drop(staged);
        self.create(plan).await
    }

    /// Removes what [`PlanRepository::stage`] wrote for a plan that is not to be created.
    async fn discard(&self, staged: Staged) {
        drop(staged);
    }

    /// Appends changes, durably and atomically as a batch prefix: after a crash, `load` sees a
    /// prefix of all changes ever appended, never a partial or altered change.
    async fn append(&self, plan: &PlanId, changes: &[StateChange]) -> Result<(), StoreError>;

    /// [`PlanRepository::append`] of a list the caller gives up until the append is over: a
    /// store that appends on another thread takes it there instead of copying it, and hands
    /// it back for the caller to reuse. After a success its changes may be gone; after an
    /// error it must come back whole, for the caller to retry it (a list that comes back
    /// shorter after an error cannot be retried, and the caller gives its changes up). The
    /// default appends the list as a slice and hands it back as it was.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use orchestrator_core::repository::{PlanRepository, StoreError};
    /// use orchestrator_core::state::StateChange;
    /// use orchestrator_core::{InMemoryPlanRepository, PlanId};
    ///
    /// let store = InMemoryPlanRepository::new();
    /// let changes = vec![StateChange::Paused { at: 1 }];
    /// // No such plan: refused, and the list comes back whole.
    /// let (result, back) = store.append_owned(&PlanId::random(), changes.clone()).await;
    /// assert!(matches!(result, Err(StoreError::NotFound(_))));
    /// assert_eq!(back, changes);
    /// # });
    /// ```
    async fn append_owned(
        &self,
        plan: &PlanId,
        changes: Vec<StateChange>,
    ) -> (Result<(), StoreError>, Vec<StateChange>) {
        let result = self.append(plan, &changes).await;
        (result, changes)
    }

    /// The plan with every appended change applied.
    async fn load(&self, plan: &PlanId) -> Result<PlanRecord, StoreError>;

    /// All plans, newest first; unreadable ones are reported, not fatal.
    async fn list(&self) -> Result<PlanListing, StoreError>;

    /// Deletes a plan, its specs and its logs.
    async fn delete(&self, plan: &PlanId) -> Result<(), StoreError>;

    /// Takes exclusive ownership of a plan for running it; [`StoreError::Locked`] naming the
    /// owner if someone else holds it. Released when the lease is dropped (or the process dies).
    async fn acquire(&self, plan: &PlanId) -> Result<Lease, StoreError>;

    /// Records the specs attempt `attempt` of `node` runs with.
    async fn save_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
        specs: &AttemptSpecs,
    ) -> Result<(), StoreError>;

    /// The specs recorded for an attempt.
    async fn load_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
    ) -> Result<AttemptSpecs, StoreError>;

    /// Appends text (whole lines, each ending in `\n`) to a phase log.
    async fn append_log(&self, key: &LogKey, text: &str) -> Result<(), StoreError>;

    /// Reads a node's logs (see [`LogQuery`]); empty when there are none.
    async fn read_log(
        &self,
        plan: &PlanId,
        node: &NodeId,
        query: LogQuery,
    ) -> Result<String, StoreError>;
}

/// Keeps the last `n` lines of `text`.
pub fn tail_lines(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    let trimmed = text.strip_suffix('\n').unwrap_or(text);
    let mut count = 0;
    for (i, b) in trimmed.bytes().enumerate().rev() {
        if b == b'\n' {
            count += 1;
            if count == n {
                return &text[i + 1..];
            }
        }
    }
    text
}
