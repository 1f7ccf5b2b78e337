//! Counters of the work a [`super::PgPlanRepository`] did, for tests, benchmarks and metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a [`super::PgPlanRepository`] (and its clones) has done since it connected.
///
/// ```no_run
/// use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), orchestrator_core::StoreError> {
/// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
/// let stats = store.stats();
/// assert_eq!(stats.batches_read, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PgStats {
    /// Journal batches written (calls of `append` that wrote something).
    pub appends: u64,
    /// Changes in those batches.
    pub changes: u64,
    /// Journal batches read back and replayed (by `load`, or by an `append` whose cached copy
    /// of the plan was behind).
    pub batches_read: u64,
    /// Whole plan states read back (a plan this handle had no current copy of).
    pub states_read: u64,
    /// Journals folded into their plan's stored state.
    pub compactions: u64,
    /// Calls of `list`.
    pub listings: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    appends: AtomicU64,
    changes: AtomicU64,
    batches_read: AtomicU64,
    states_read: AtomicU64,
    compactions: AtomicU64,
    listings: AtomicU64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn appended(&self, changes: usize) {
        add(&self.appends, 1);
        add(&self.changes, changes as u64);
    }
    pub(crate) fn read_batch(&self) {
        add(&self.batches_read, 1);
    }
    pub(crate) fn read_state(&self) {
        add(&self.states_read, 1);
    }
    pub(crate) fn compacted(&self) {
        add(&self.compactions, 1);
    }
    pub(crate) fn listed(&self) {
        add(&self.listings, 1);
    }
    pub(crate) fn snapshot(&self) -> PgStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PgStats {
            appends: get(&self.appends),
            changes: get(&self.changes),
            batches_read: get(&self.batches_read),
            states_read: get(&self.states_read),
            compactions: get(&self.compactions),
            listings: get(&self.listings),
        }
    }
}
