//! Tunables of [`crate::FsPlanRepository`].

use orchestrator_core::redact::SecretNames;

/// How hard a write works to survive a crash.
///
/// ```
/// use orchestrator_storage::Durability;
/// assert_eq!(Durability::default(), Durability::Full);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Every state append and every snapshot is flushed to the disk (`fsync`) before the call
    /// returns: nothing acknowledged is lost even on power loss. The default.
    #[default]
    Full,
    /// Data is handed to the operating system but not flushed: acknowledged changes survive a
    /// crash or `kill -9` of the process, not a power loss or kernel crash (which may lose
    /// the last changes, never corrupt the plan). Much faster on slow disks.
    Flush,
}

/// When the journal of a plan is folded into a new snapshot.
///
/// The journal is compacted when it holds more than `max_journal_records` records, or when
/// it is larger than both `min_journal_bytes` and `snapshot_percent` % of the snapshot.
/// Tying the threshold to the snapshot's size keeps the amortized cost of compaction per
/// appended byte constant, so a transition costs O(size of the change) whatever the plan's
/// size, while bounding the replay work of a reload.
///
/// The file store counts each change as at least 16 bytes of journal, about what replaying
/// it costs in snapshot bytes decoded: its binary records take ~5 bytes a change. It also
/// compacts a plan once when it ends (its `Ended` change is appended), on a thread of its
/// own, if the journal is past `min_journal_bytes`: an ended plan is only read from then on.
///
/// ```
/// use orchestrator_storage::Compaction;
/// let c = Compaction::default().min_journal_bytes(4096);
/// assert_eq!(c.min_journal_bytes, 4096);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compaction {
    /// Never compact a journal smaller than this (default 256 KiB).
    pub min_journal_bytes: u64,
    /// Compact once the journal exceeds this percentage of the snapshot's size (default 100:
    /// a reload replays at most about one snapshot's worth of journal, and each byte of state
    /// is rewritten about twice).
    pub snapshot_percent: u64,
    /// Compact once the journal holds this many records (append calls), whatever their size
    /// (default 50 000).
    pub max_journal_records: u64,
    /// File store: a plan whose snapshot is at least this large (default 256 KiB) is
    /// compacted on a thread of its own. The append that finds the journal due starts a new
    /// journal and returns; the new snapshot (the record as of that point) is encoded and
    /// written while later appends go on. (Within the append, a 10,000-node plan's
    /// compaction took 6–15 ms of a 45 ms run.) Smaller snapshots are written within the
    /// append, which costs less than starting a thread. `u64::MAX` never compacts in the
    /// background. The PostgreSQL store compacts within its transaction and ignores this.
    pub background_bytes: u64,
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction {
            min_journal_bytes: 256 * 1024,
            snapshot_percent: 100,
            max_journal_records: 50_000,
            background_bytes: 256 * 1024,
        }
    }
}

impl Compaction {
    /// Sets [`Compaction::min_journal_bytes`].
    ///
    /// ```
    /// let c = orchestrator_storage::Compaction::default().min_journal_bytes(1 << 20);
    /// assert_eq!(c.min_journal_bytes, 1 << 20);
    /// ```
    pub fn min_journal_bytes(mut self, bytes: u64) -> Self {
        self.min_journal_bytes = bytes;
        self
    }

    /// Sets [`Compaction::snapshot_percent`].
    ///
    /// ```
    /// let c = orchestrator_storage::Compaction::default().snapshot_percent(100);
    /// assert_eq!(c.snapshot_percent, 100);
    /// ```
    pub fn snapshot_percent(mut self, percent: u64) -> Self {
        self.snapshot_percent = percent;
        self
    }

    /// Sets [`Compaction::max_journal_records`].
    ///
    /// ```
    /// let c = orchestrator_storage::Compaction::default().max_journal_records(1000);
    /// assert_eq!(c.max_journal_records, 1000);
    /// ```
    pub fn max_journal_records(mut self, records: u64) -> Self {
        self.max_journal_records = records;
        self
    }

    /// Sets [`Compaction::background_bytes`].
    ///
    /// ```
    /// let c = orchestrator_storage::Compaction::default().background_bytes(0);
    /// assert_eq!(c.background_bytes, 0);
    /// ```
    pub fn background_bytes(mut self, bytes: u64) -> Self {
        self.background_bytes = bytes;
        self
    }

    /// Whether a journal of `bytes` and `records` next to a snapshot of `snapshot_bytes` is due.
    pub(crate) fn is_due(&self, bytes: u64, records: u64, snapshot_bytes: u64) -> bool {
        let relative = snapshot_bytes.saturating_mul(self.snapshot_percent) / 100;
        records >= self.max_journal_records || bytes > self.min_journal_bytes.max(relative)
    }
}

/// Options of [`crate::FsPlanRepository`], with documented defaults.
///
/// ```
/// use orchestrator_storage::{Durability, FsOptions};
/// let options = FsOptions::default()
///     .durability(Durability::Flush)
///     .log_max_bytes(1 << 20);
/// assert_eq!(options.durability, Durability::Flush);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FsOptions {
    /// Flush to disk on every append (default [`Durability::Full`]).
    pub durability: Durability,
    /// When journals are compacted.
    pub compaction: Compaction,
    /// Size at which a phase log is rotated: the current file becomes `<phase>.log.1`
    /// (replacing an older one) and a new file starts (default 8 MiB).
    pub log_max_bytes: u64,
    /// Environment variables whose values are kept out of `plan.json`, the journal and the
    /// stored specs, beyond the built-in rules (see [`SecretNames`]). Their values go to the
    /// plan's `secrets.json` instead and are put back when the plan is loaded (default: the
    /// built-in rules only).
    pub secret_env: SecretNames,
}

impl Default for FsOptions {
    fn default() -> Self {
        FsOptions {
            durability: Durability::Full,
            compaction: Compaction::default(),
            log_max_bytes: 8 * 1024 * 1024,
            secret_env: SecretNames::new(),
        }
    }
}

impl FsOptions {
    /// Sets [`FsOptions::durability`].
    ///
    /// ```
    /// use orchestrator_storage::{Durability, FsOptions};
    /// let o = FsOptions::default().durability(Durability::Flush);
    /// assert_eq!(o.durability, Durability::Flush);
    /// ```
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets [`FsOptions::compaction`].
    ///
    /// ```
    /// use orchestrator_storage::{Compaction, FsOptions};
    /// let o = FsOptions::default().compaction(Compaction::default().snapshot_percent(25));
    /// assert_eq!(o.compaction.snapshot_percent, 25);
    /// ```
    pub fn compaction(mut self, compaction: Compaction) -> Self {
        self.compaction = compaction;
        self
    }

    /// Sets [`FsOptions::log_max_bytes`].
    ///
    /// ```
    /// let o = orchestrator_storage::FsOptions::default().log_max_bytes(64 * 1024);
    /// assert_eq!(o.log_max_bytes, 64 * 1024);
    /// ```
    pub fn log_max_bytes(mut self, bytes: u64) -> Self {
        self.log_max_bytes = bytes;
        self
    }

    /// Sets [`FsOptions::secret_env`].
    ///
    /// ```
    /// use orchestrator_core::redact::SecretNames;
    /// let o = orchestrator_storage::FsOptions::default().secret_env(SecretNames::parse("HOOK_URL"));
    /// assert!(o.secret_env.is_secret("HOOK_URL"));
    /// ```
    pub fn secret_env(mut self, names: SecretNames) -> Self {
        self.secret_env = names;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_is_due_by_size_or_count() {
        let c = Compaction::default()
            .min_journal_bytes(100)
            .snapshot_percent(50)
            .max_journal_records(10);
        assert!(!c.is_due(100, 1, 0));
        assert!(c.is_due(101, 1, 0));
        assert!(!c.is_due(400, 1, 1000));
        assert!(c.is_due(501, 1, 1000));
        assert!(c.is_due(1, 10, 1000));
    }
}
