//! Counters of the work a store did, for benchmarks and host metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a [`crate::FsPlanRepository`] has written since it was opened (all its clones share
/// the counters).
///
/// ```
/// use orchestrator_storage::FsPlanRepository;
/// let store = FsPlanRepository::new(std::env::temp_dir().join("doc-stats-example"));
/// assert_eq!(store.io_stats().appends, 0);
/// assert_eq!(store.io_stats().state_bytes_written(), 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IoStats {
    /// Bytes written to journals (records and headers).
    pub journal_bytes_written: u64,
    /// Bytes written to snapshots (at creation and by compaction).
    pub snapshot_bytes_written: u64,
    /// Bytes written to logs and attempt specs.
    pub other_bytes_written: u64,
    /// `fsync` calls (files and folders).
    pub fsyncs: u64,
    /// Journal appends (calls of `append` that wrote something).
    pub appends: u64,
    /// Changes appended.
    pub changes: u64,
    /// Snapshots rewritten by compaction.
    pub compactions: u64,
}

impl IoStats {
    /// Bytes written to plan state: journals and snapshots.
    ///
    /// ```
    /// let stats = orchestrator_storage::IoStats::default();
    /// assert_eq!(stats.state_bytes_written(), 0);
    /// ```
    pub fn state_bytes_written(&self) -> u64 {
        self.journal_bytes_written + self.snapshot_bytes_written
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    journal_bytes: AtomicU64,
    snapshot_bytes: AtomicU64,
    other_bytes: AtomicU64,
    fsyncs: AtomicU64,
    appends: AtomicU64,
    changes: AtomicU64,
    compactions: AtomicU64,
}

/// Which counter written bytes go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Account {
    /// Journals.
    Journal,
    /// Snapshots.
    Snapshot,
    /// Logs and specs.
    Other,
}

impl Counters {
    pub(crate) fn wrote(&self, account: Account, bytes: usize) {
        let counter = match account {
            Account::Journal => &self.journal_bytes,
            Account::Snapshot => &self.snapshot_bytes,
            Account::Other => &self.other_bytes,
        };
        counter.fetch_add(bytes as u64, Ordering::Relaxed);
    }
    pub(crate) fn fsync(&self) {
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn appended(&self, changes: usize) {
        self.appends.fetch_add(1, Ordering::Relaxed);
        self.changes.fetch_add(changes as u64, Ordering::Relaxed);
    }
    pub(crate) fn compacted(&self) {
        self.compactions.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn snapshot(&self) -> IoStats {
        IoStats {
            journal_bytes_written: self.journal_bytes.load(Ordering::Relaxed),
            snapshot_bytes_written: self.snapshot_bytes.load(Ordering::Relaxed),
            other_bytes_written: self.other_bytes.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            appends: self.appends.load(Ordering::Relaxed),
            changes: self.changes.load(Ordering::Relaxed),
            compactions: self.compactions.load(Ordering::Relaxed),
        }
    }
}
