//! Capacity: how many jobs may run at once across plans (SPEC §3), as a plug-in point.
//!
//! Before a job starts, the engine takes a [`Slot`] from its [`Capacity`]; the job keeps it
//! until it ends, and dropping the slot frees it. A plan's `maxParallel` applies on top, in the
//! plan's actor. Two implementations:
//!
//! - [`ProcessSlots`] (here): a semaphore shared by every plan of one process; the engine always
//!   has one, sized by `OrchestratorOptions::global_capacity`.
//! - `orchestrator_storage::MachineSlots`: N lock files in a folder, shared by every process
//!   of the machine that uses the folder, freed by the operating system when a process dies.
//!   Given to the builder with `.capacity(..)`, it is taken *after* a process slot, so one
//!   process never holds more machine slots than it can use.
//!
//! ```
//! use orchestrator_core::capacity::{Capacity, ProcessSlots};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let slots = ProcessSlots::new(1).unwrap();
//! let held = slots.acquire().await.unwrap();
//! assert!(slots.try_acquire().unwrap().is_none(), "the only slot is taken");
//! drop(held);
//! assert!(slots.try_acquire().unwrap().is_some());
//! # });
//! ```

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Semaphore;

/// Why a slot could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CapacityError {
    /// A capacity was asked for with no slots: no job could ever run.
    #[error("{what} needs at least one slot")]
    NoSlots {
        /// Which capacity (`process slots`, `machine slots in <dir>`).
        what: String,
    },
    /// A slot file or folder could not be created, opened or locked.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done (`create slot folder`, `lock slot file`).
        operation: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The capacity was shut down; nothing more can be taken from it.
    #[error("{what} was closed")]
    Closed {
        /// Which capacity.
        what: String,
    },
}

/// The right to run one job, freed when dropped.
pub struct Slot(#[allow(dead_code)] Guard);

/// What frees a [`Slot`]. A [`ProcessSlots`] permit is a case of its own, not boxed: every
/// job takes one, and this keeps taking it to no allocation.
// Held only to be dropped.
#[allow(dead_code)]
enum Guard {
    Permit(tokio::sync::OwnedSemaphorePermit),
    Other(Box<dyn Send + Sync>),
}

impl Slot {
    /// Wraps whatever frees the slot on drop (a semaphore permit, a locked file, a pair of
    /// slots...).
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        Slot(Guard::Other(Box::new(guard)))
    }

    fn permit(permit: tokio::sync::OwnedSemaphorePermit) -> Self {
        Slot(Guard::Permit(permit))
    }
}

impl Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slot")
    }
}

/// A limit on the jobs running at once, shared by whoever holds the same capacity.
///
/// Implementations must make [`acquire`](Capacity::acquire) cancel-safe: a dropped wait takes
/// nothing. `orchestrator_core::conformance::capacity::run_all` (feature `testing`) checks an
/// implementation.
#[async_trait]
pub trait Capacity: Send + Sync + Debug + 'static {
    /// A slot if one is free right now, without waiting (the engine's fast path, called on its
    /// scheduling turn, so it must not block).
    fn try_acquire(&self) -> Result<Option<Slot>, CapacityError>;

    /// Waits until a slot is free and takes it.
    async fn acquire(&self) -> Result<Slot, CapacityError>;
}

/// The in-process capacity: a semaphore of `slots` permits.
///
/// Clones share the permits, so one `ProcessSlots` can bound several orchestrators of a process.
#[derive(Debug, Clone)]
pub struct ProcessSlots {
    semaphore: Arc<Semaphore>,
    slots: usize,
}

impl ProcessSlots {
    /// `slots` jobs at once (at most [`Semaphore::MAX_PERMITS`]; more are clamped to it).
    ///
    /// ```
    /// use orchestrator_core::capacity::ProcessSlots;
    /// assert_eq!(ProcessSlots::new(4).unwrap().slots(), 4);
    /// assert!(ProcessSlots::new(0).is_err());
    /// ```
    pub fn new(slots: usize) -> Result<Self, CapacityError> {
        if slots == 0 {
            return Err(CapacityError::NoSlots {
                what: "process slots".into(),
            });
        }
        // Semaphore::new panics above MAX_PERMITS; nobody can run that many jobs anyway.
        let slots = slots.min(Semaphore::MAX_PERMITS);
        Ok(ProcessSlots {
            semaphore: Arc::new(Semaphore::new(slots)),
            slots,
        })
    }

    /// How many jobs may hold a slot at once.
    pub fn slots(&self) -> usize {
        self.slots
    }
}

#[async_trait]
impl Capacity for ProcessSlots {
    fn try_acquire(&self) -> Result<Option<Slot>, CapacityError> {
        match self.semaphore.clone().try_acquire_owned() {
            Ok(permit) => Ok(Some(Slot::permit(permit))),
            Err(tokio::sync::TryAcquireError::NoPermits) => Ok(None),
            Err(tokio::sync::TryAcquireError::Closed) => Err(CapacityError::Closed {
                what: "process slots".into(),
            }),
        }
    }

    async fn acquire(&self) -> Result<Slot, CapacityError> {
        match self.semaphore.clone().acquire_owned().await {
            Ok(permit) => Ok(Slot::permit(permit)),
            Err(_) => Err(CapacityError::Closed {
                what: "process slots".into(),
            }),
        }
    }
}

/// Two capacities at once: a slot of `first`, then one of `then`, freed together.
///
/// The engine puts its [`ProcessSlots`] first, so a process waits for a shared (machine) slot
/// only when it could start the job, and never keeps shared slots it cannot use.
#[derive(Debug)]
pub(crate) struct Both {
    first: Arc<dyn Capacity>,
    then: Arc<dyn Capacity>,
}

impl Both {
    pub(crate) fn new(first: Arc<dyn Capacity>, then: Arc<dyn Capacity>) -> Self {
        Both { first, then }
    }
}

#[async_trait]
impl Capacity for Both {
    fn try_acquire(&self) -> Result<Option<Slot>, CapacityError> {
        let Some(first) = self.first.try_acquire()? else {
            return Ok(None);
        };
        // Without the second slot the first one is given back (dropped) at once.
        Ok(self
            .then
            .try_acquire()?
            .map(|then| Slot::new((first, then))))
    }

    async fn acquire(&self) -> Result<Slot, CapacityError> {
        let first = self.first.acquire().await?;
        let then = self.then.acquire().await?;
        Ok(Slot::new((first, then)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn process_slots_conform() {
        crate::conformance::capacity::run_all(|n| async move {
            ProcessSlots::new(n).expect("at least one slot")
        })
        .await;
    }

    #[tokio::test]
    async fn both_conforms_and_is_bounded_by_the_smaller() {
        // The shared capacity is the smaller one, as with machine slots under a larger
        // process limit.
        crate::conformance::capacity::run_all(|n| async move {
            Both::new(
                Arc::new(ProcessSlots::new(n + 2).expect("slots")),
                Arc::new(ProcessSlots::new(n).expect("slots")),
            )
        })
        .await;
        // And the other way round: a process limit below the shared one.
        crate::conformance::capacity::run_all(|n| async move {
            Both::new(
                Arc::new(ProcessSlots::new(n).expect("slots")),
                Arc::new(ProcessSlots::new(n + 2).expect("slots")),
            )
        })
        .await;
    }

    #[test]
    fn zero_slots_is_refused_naming_the_capacity() {
        let e = ProcessSlots::new(0).expect_err("zero");
        assert_eq!(e.to_string(), "process slots needs at least one slot");
    }

    #[test]
    fn huge_counts_are_clamped_instead_of_panicking() {
        assert_eq!(
            ProcessSlots::new(usize::MAX).expect("clamped").slots(),
            Semaphore::MAX_PERMITS
        );
    }
}
