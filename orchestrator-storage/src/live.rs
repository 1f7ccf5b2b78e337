//! One plan's state files: reading them (snapshot + journal replay), appending to the
//! journal, and compacting the journal into a new snapshot.
//!
//! Crash safety of compaction, generation `g` to `g + 1`:
//! 1. write `journal-(g+1).log` holding only a header (temporary file, flush, rename);
//! 2. write `plan.json` naming generation `g + 1` (temporary file, flush, rename);
//! 3. flush the folder, then remove `journal-g.log`.
//!
//! The snapshot names the one journal whose records follow it, so a crash before step 2 leaves
//! generation `g` whole (the new empty journal is ignored and cleaned up later), and a crash
//! after it leaves generation `g + 1` whole (the old journal is ignored). Nothing is lost and
//! nothing is applied twice.
//!
//! A large plan is compacted in the background instead: see [`background`].

use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;

use orchestrator_core::parallel::both;
use orchestrator_core::state::{PlanRecord, StateChange, SCHEMA_VERSION};
use orchestrator_core::{PlanId, StoreError};

use crate::fsutil::{
    corrupt, file_id, file_len, io_err, is_tmp_name, read_if_exists, sync_dir, write_atomic,
    FileId, DECODE_THREAD,
};
use crate::journal::{self, HEADER_LEN};
use crate::layout::{journal_generation, PlanPaths};
use crate::options::{Durability, FsOptions};
use crate::secrets::{self, Secrets};
use crate::snapshot::{self, SpecJson};

mod background;

use crate::stats::{Account, Counters};
pub(crate) use background::SnapshotJob;

/// What a store operation on one plan needs.
pub(crate) struct Ctx<'a> {
    pub(crate) plan: &'a PlanId,
    pub(crate) paths: &'a PlanPaths,
    pub(crate) options: &'a FsOptions,
    pub(crate) counters: &'a Counters,
}

impl Ctx<'_> {
    fn sync(&self) -> bool {
        self.options.durability == Durability::Full
    }

    /// `json` about to be written with its secret values replaced (see [`crate::secrets`]);
    /// `None` when it holds none. Called under the plan's write lock.
    fn hide_secrets(&self, json: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        secrets::hide_in(
            &self.paths.secrets(),
            json,
            &self.options.secret_env,
            self.sync(),
            self.counters,
        )
    }
}

/// A plan as this process last saw it on disk, plus what appending to it needs.
#[derive(Debug)]
pub(crate) struct Live {
    /// The record with every journal record applied.
    pub(crate) record: PlanRecord,
    /// Nanosecond creation stamp (orders plans created in the same millisecond).
    pub(crate) created_ns: u64,
    /// The generation of the journal appended to.
    generation: u64,
    /// The generation `plan.json` names: `generation`, or the one before it while a new
    /// snapshot is written in the background (see the module documentation).
    snapshot_generation: u64,
    snapshot_id: FileId,
    snapshot_version: u32,
    /// Where the [`SnapshotJob`] this state started hands its snapshot over, while it runs or
    /// until the snapshot is put in place.
    pending: Option<background::Handover>,
    /// Length of the journal file when last seen.
    journal_len: u64,
    /// Bytes of whole records (and header) in it.
    journal_valid: u64,
    journal_records: u64,
    /// Changes in those records.
    journal_changes: u64,
    /// The version in the journal's header (see [`journal::VERSION`]).
    journal_version: u32,
    appender: Option<File>,
    cleaned: bool,
    /// The JSON of the spec the snapshot was last written with (see [`SpecJson`]).
    spec_json: SpecJson,
}

/// Journals larger than this decode on their own thread while the snapshot decodes.
const PARALLEL_JOURNAL_BYTES: usize = 64 * 1024;

/// The journal bytes a change counts as, at least, for compaction (see
/// [`Live::compaction_due`]).
const CHANGE_BYTES: u64 = 16;

/// The snapshot bytes a node counts as, at least, for compaction (see
/// [`Live::compaction_due`]): what a node of a new plan of no-op jobs took before fresh nodes
/// were written as a count (its job's compact entry, ~49 bytes, and its id, 39). A new plan's
/// snapshot holds its nodes as a count now; weighed by its bytes alone (490 of 880 KB at
/// 10,000 nodes), it made the journal of the plan's run due half-way, and the run rewrote
/// the plan while it ran (2-5 ms longer in `store_bench`).
const NODE_BYTES: u64 = 88;

/// Reading a plan races with compactions in other processes; this many tries before giving up.
const READ_TRIES: usize = 20;

impl Live {
    /// The state of a plan just created with `record` (snapshot generation 0, empty journal).
    pub(crate) fn created(
        ctx: &Ctx<'_>,
        record: PlanRecord,
        created_ns: u64,
        spec_json: SpecJson,
    ) -> Result<Live, StoreError> {
        let path = ctx.paths.snapshot();
        let snapshot_id = file_id(&path)?.ok_or_else(|| corrupt(&path, "missing after create"))?;
        Ok(Live {
            record,
            created_ns,
            generation: 0,
            snapshot_generation: 0,
            snapshot_id,
            snapshot_version: SCHEMA_VERSION,
            pending: None,
            journal_len: HEADER_LEN,
            journal_valid: HEADER_LEN,
            journal_records: 0,
            journal_changes: 0,
            journal_version: journal::VERSION,
            appender: None,
            cleaned: true,
            spec_json,
        })
    }

    /// Reads a plan from disk: its snapshot with its journal replayed.
    pub(crate) fn read(ctx: &Ctx<'_>) -> Result<Live, StoreError> {
        let path = ctx.paths.snapshot();
        for _ in 0..READ_TRIES {
            let mut file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(if ctx.paths.dir.is_dir() {
                        corrupt(&path, "missing: the plan folder has no snapshot")
                    } else {
                        StoreError::NotFound(ctx.plan.clone())
                    });
                }
                Err(e) => return Err(io_err("open", &path)(e)),
            };
            let meta = file.metadata().map_err(io_err("inspect", &path))?;
            let snapshot_id = FileId::of(&meta);
            let mut bytes = Vec::with_capacity(meta.len() as usize);
            file.read_to_end(&mut bytes)
                .map_err(io_err("read", &path))?;
            drop(file);
            let envelope = snapshot::open(&bytes, &path)?;
            let snapshot_generation = envelope.generation;
            let jpath = ctx.paths.journal(snapshot_generation);
            let jbytes = read_if_exists(&jpath)?;
            // The journal a snapshot being written in the background will name, read after
            // the one before it (which no one appends to once this one exists).
            let next_path = ctx.paths.journal(snapshot_generation + 1);
            let next_bytes = read_if_exists(&next_path)?;
            // The old journal may have grown between the two reads (its last appends, then the
            // new journal's first): then what was read of it is not all it holds.
            let grew = next_bytes.is_some()
                && file_len(&jpath)? != jbytes.as_ref().map(|b| b.len() as u64);
            // A compaction elsewhere may have replaced the snapshot and removed this journal
            // while we read: then read again.
            if grew || file_id(&path)? != Some(snapshot_id) {
                continue;
            }
            // Otherwise the journal the snapshot names must be there: it is written before the
            // snapshot that names it (at creation and at compaction), so its absence is damage,
            // not a plan without changes.
            let jbytes = jbytes.ok_or_else(|| {
                corrupt(
                    &jpath,
                    "missing: the plan's snapshot names this journal, so the changes recorded \
                     since the snapshot are lost (restore the file, or delete the plan)",
                )
            })?;
            // Read after the files that refer to it (values are added before they are
            // referred to), so every value they refer to is in it.
            let secrets = Secrets::read(&ctx.paths.secrets())?;
            let revealed = match &secrets {
                Some(table) => table.reveal(&bytes, &path)?,
                None if secrets::refers(&bytes) => {
                    return Err(secrets::missing_table(&path, "the snapshot"))
                }
                None => Cow::Borrowed(&bytes[..]),
            };
            let envelope = match &revealed {
                Cow::Owned(real) => snapshot::open(real, &path)?,
                Cow::Borrowed(_) => envelope,
            };
            let (created_ns, version) = (envelope.created_ns, envelope.version);
            // The journals decode while the snapshot does.
            let journal_bytes = jbytes.len() + next_bytes.as_ref().map_or(0, Vec::len);
            let scan_all = || {
                let scan = journal::scan(&jbytes, snapshot_generation, &jpath, secrets.as_ref())?;
                let next = match &next_bytes {
                    // Only a whole journal is followed by the next one (see the module
                    // documentation); a torn one ends the history.
                    Some(next) if scan.valid_len == jbytes.len() as u64 => Some(journal::scan(
                        next,
                        snapshot_generation + 1,
                        &next_path,
                        secrets.as_ref(),
                    )?),
                    _ => None,
                };
                Ok::<_, StoreError>((scan, next))
            };
            let parallel = journal_bytes > PARALLEL_JOURNAL_BYTES;
            let (scans, record) =
                both(DECODE_THREAD, parallel, scan_all, || envelope.decode(&path));
            let scans = scans.map_err(|message| corrupt(&path, message))?;
            let ((scan, next), mut record) = (scans?, record?);
            if &record.state.id != ctx.plan {
                return Err(corrupt(
                    &path,
                    format!("holds plan {} instead of {}", record.state.id, ctx.plan),
                ));
            }
            replay(&mut record, &scan, &jpath)?;
            let (generation, scan, len) = match next {
                Some(next) => {
                    replay(&mut record, &next, &next_path)?;
                    let len = next_bytes.as_ref().map_or(0, Vec::len);
                    (snapshot_generation + 1, next, len)
                }
                None => (snapshot_generation, scan, jbytes.len()),
            };
            return Ok(Live {
                record,
                created_ns,
                generation,
                snapshot_generation,
                snapshot_id,
                snapshot_version: version,
                pending: None,
                journal_len: len as u64,
                journal_valid: scan.valid_len,
                journal_records: scan.batches.len() as u64,
                journal_changes: scan.batches.iter().map(|b| b.len() as u64).sum(),
                journal_version: scan.version,
                appender: None,
                cleaned: false,
                spec_json: SpecJson::default(),
            });
        }
        Err(io_err("read", &path)(io::Error::new(
            io::ErrorKind::Interrupted,
            "the plan kept changing while it was read",
        )))
    }

    /// Whether the files on disk are still exactly what this state was built from.
    pub(crate) fn is_current(&self, ctx: &Ctx<'_>) -> Result<bool, StoreError> {
        if file_id(&ctx.paths.snapshot())? != Some(self.snapshot_id) {
            return Ok(false);
        }
        let len = file_len(&ctx.paths.journal(self.generation))?.unwrap_or(0);
        if len != self.journal_len {
            return Ok(false);
        }
        // A writer that started a background compaction appends to the next journal while
        // the snapshot still names this one.
        Ok(self.snapshot_generation != self.generation
            || file_len(&ctx.paths.journal(self.generation + 1))?.is_none())
    }

    /// Appends `changes` (the caller holds the plan's write lock and has checked
    /// [`Live::is_current`]). Applies them in order and writes the ones that apply as one
    /// record. On `Err`, this state may no longer match the disk: drop it.
    pub(crate) fn append(
        &mut self,
        ctx: &Ctx<'_>,
        changes: &[StateChange],
    ) -> Result<(), StoreError> {
        self.finish_pending(ctx);
        self.prepare_journal(ctx)?;
        let mut applied = 0;
        let mut rejection = None;
        for change in changes {
            match self.record.apply(change) {
                Ok(()) => applied += 1,
                Err(e) => {
                    rejection = Some(e);
                    break;
                }
            }
        }
        if applied > 0 {
            let rejected = |message| StoreError::Rejected {
                plan: ctx.plan.clone(),
                message,
            };
            let (mut bytes, json) = journal::encode(&changes[..applied]).map_err(rejected)?;
            // Specs in edits carry env: its secret values stay in secrets.json. (Batches that
            // may hold any are always JSON.)
            if json {
                if let Some(hidden) = ctx.hide_secrets(&bytes[journal::RECORD_HEAD..])? {
                    bytes = journal::frame(&hidden).map_err(rejected)?;
                }
            }
            // The path only names the file in an error: not built on the way of every append.
            let generation = self.generation;
            let failed = |operation| move |e| io_err(operation, &ctx.paths.journal(generation))(e);
            let file = self.appender(ctx)?;
            file.write_all(&bytes).map_err(failed("append to"))?;
            ctx.counters.wrote(Account::Journal, bytes.len());
            if ctx.sync() {
                ctx.counters.fsync();
                file.sync_data().map_err(failed("flush"))?;
            }
            ctx.counters.appended(applied);
            self.journal_len += bytes.len() as u64;
            self.journal_valid = self.journal_len;
            self.journal_records += 1;
            self.journal_changes += applied as u64;
        }
        if let Some(e) = rejection {
            return Err(StoreError::Rejected {
                plan: ctx.plan.clone(),
                message: e.to_string(),
            });
        }
        Ok(())
    }

    /// Whether the journal should be folded into a new snapshot now.
    ///
    /// Each change counts as at least [`CHANGE_BYTES`] bytes of journal, which is what its
    /// replay costs in snapshot bytes decoded: binary records take ~5 bytes a change, so by
    /// bytes alone a journal could hold three times the changes before a compaction, and a
    /// reload take that much longer. Measured on a 10,000-node plan: its snapshot as created
    /// (0.88 MB, compact lists) decodes in 5-6 ms (6-7 ns a byte), and the 40k changes of its
    /// run replay in 3-4 ms more (75-105 ns a change, the cost of 12-20 snapshot bytes); its
    /// final snapshot decodes at 4-8 ns a byte. So a journal at the threshold replays in
    /// about the time its snapshot decodes in. (At 32, as before the compact lists, the
    /// creation's halved snapshot made a 10,000-node run compact half-way, rewriting 2.5 MB
    /// while it ran; at 64, before that, the same with the old snapshot.)
    ///
    /// And each node counts as at least [`NODE_BYTES`] bytes of snapshot.
    pub(crate) fn compaction_due(&self, ctx: &Ctx<'_>) -> bool {
        let nodes = self.record.state.nodes.len() as u64;
        ctx.options.compaction.is_due(
            self.journal_weight(),
            self.journal_records,
            self.snapshot_id.len().max(nodes.saturating_mul(NODE_BYTES)),
        )
    }

    /// The journal's size for compaction: its bytes, each change counting as at least
    /// [`CHANGE_BYTES`] (see [`Live::compaction_due`]).
    fn journal_weight(&self) -> u64 {
        let bytes = self.journal_len.saturating_sub(HEADER_LEN);
        bytes.max(self.journal_changes.saturating_mul(CHANGE_BYTES))
    }

    /// Whether a plan that has just ended should be compacted once more, on a thread of its
    /// own: its journal is past [`crate::Compaction::min_journal_bytes`] (weighed as in
    /// [`Live::compaction_due`]) and no compaction is under way. An ended plan's journal
    /// stops growing, so nothing else would fold it, and from now on the plan is only read
    /// (`status`, reports, `list`): a 10,000-node plan reloaded in 13–17 ms from its
    /// snapshot alone, ~21 ms with its run's journal.
    pub(crate) fn compaction_due_at_end(&self, ctx: &Ctx<'_>) -> bool {
        self.pending.is_none() && self.journal_weight() > ctx.options.compaction.min_journal_bytes
    }

    /// Makes the journal ready for appending: upgrades an old schema or journal version by
    /// compacting (records of this build under an older header would be misread by older
    /// builds), cuts a torn tail, removes leftovers of interrupted compactions. (A missing
    /// journal never gets here: reading the plan refuses it as damage.)
    fn prepare_journal(&mut self, ctx: &Ctx<'_>) -> Result<(), StoreError> {
        if self.snapshot_version < SCHEMA_VERSION || self.journal_version < journal::VERSION {
            self.compact(ctx)?;
        }
        if !self.cleaned {
            self.remove_leftovers(ctx);
            self.cleaned = true;
        }
        if self.journal_valid < self.journal_len {
            let path = ctx.paths.journal(self.generation);
            tracing::warn!(
                plan = %ctx.plan,
                journal = %path.display(),
                bytes = self.journal_len - self.journal_valid,
                "cutting the torn last record of a journal (a write was interrupted)"
            );
            let valid = self.journal_valid;
            let file = self.appender(ctx)?;
            file.set_len(valid).map_err(io_err("truncate", &path))?;
            if ctx.sync() {
                ctx.counters.fsync();
                file.sync_all().map_err(io_err("flush", &path))?;
            }
            self.journal_len = valid;
        }
        Ok(())
    }

    fn appender(&mut self, ctx: &Ctx<'_>) -> Result<&mut File, StoreError> {
        let file = match self.appender.take() {
            Some(f) => f,
            None => {
                let path = ctx.paths.journal(self.generation);
                OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .map_err(io_err("open", &path))?
            }
        };
        Ok(self.appender.insert(file))
    }

    /// Appends go to the new, empty journal of `generation` from now on.
    fn start_journal(&mut self, generation: u64) {
        self.generation = generation;
        self.journal_len = HEADER_LEN;
        self.journal_valid = HEADER_LEN;
        self.journal_records = 0;
        self.journal_changes = 0;
        self.journal_version = journal::VERSION;
        self.appender = None;
    }

    /// Folds the journal into a new snapshot (see the module documentation for the order).
    pub(crate) fn compact(&mut self, ctx: &Ctx<'_>) -> Result<(), StoreError> {
        let next = self.generation + 1;
        let sync = ctx.sync();
        new_journal(ctx, next)?;
        let mut snapshot = encode_snapshot(
            ctx,
            &self.record,
            next,
            self.created_ns,
            &mut self.spec_json,
        )?;
        snapshot.hide_secrets(|json| ctx.hide_secrets(json))?;
        let path = ctx.paths.snapshot();
        write_atomic(
            &path,
            &snapshot.pieces(),
            sync,
            ctx.counters,
            Account::Snapshot,
        )?;
        if sync {
            sync_dir(&ctx.paths.dir, ctx.counters)?;
        }
        remove_journal(ctx, self.generation);
        if self.snapshot_generation != self.generation {
            remove_journal(ctx, self.snapshot_generation);
        }
        ctx.counters.compacted();
        self.snapshot_in_place(ctx, next)?;
        self.start_journal(next);
        Ok(())
    }

    /// `plan.json` is now a snapshot of this build naming `generation`.
    fn snapshot_in_place(&mut self, ctx: &Ctx<'_>, generation: u64) -> Result<(), StoreError> {
        let path = ctx.paths.snapshot();
        self.snapshot_id =
            file_id(&path)?.ok_or_else(|| corrupt(&path, "missing after compaction"))?;
        self.snapshot_generation = generation;
        self.snapshot_version = SCHEMA_VERSION;
        Ok(())
    }

    /// Removes journals of other generations and temporary files left by interrupted writes.
    /// Only called under the write lock, when no other writer can be mid-way.
    fn remove_leftovers(&self, ctx: &Ctx<'_>) {
        let Ok(entries) = fs::read_dir(&ctx.paths.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let stale_journal = journal_generation(name)
                .is_some_and(|g| g != self.generation && g != self.snapshot_generation);
            if stale_journal || is_tmp_name(name) {
                let path = entry.path();
                if let Err(e) = fs::remove_file(&path) {
                    tracing::debug!(file = %path.display(), error = %e, "cannot remove a leftover file");
                }
            }
        }
    }
}

/// Applies the batches of `scan`, read from `path`, to `record`.
fn replay(record: &mut PlanRecord, scan: &journal::Scan, path: &Path) -> Result<(), StoreError> {
    for (i, batch) in scan.batches.iter().enumerate() {
        for change in batch {
            record
                .apply(change)
                .map_err(|e| corrupt(path, format!("record {} does not apply: {e}", i + 1)))?;
        }
    }
    Ok(())
}

/// Writes the journal of `generation`, a header only (atomically: it exists whole or not).
fn new_journal(ctx: &Ctx<'_>, generation: u64) -> Result<(), StoreError> {
    write_atomic(
        &ctx.paths.journal(generation),
        &[&journal::header(generation)],
        ctx.sync(),
        ctx.counters,
        Account::Journal,
    )
}

/// `record` as a snapshot naming journal `generation` (see [`snapshot::encode`]).
fn encode_snapshot(
    ctx: &Ctx<'_>,
    record: &PlanRecord,
    generation: u64,
    created_ns: u64,
    spec_json: &mut SpecJson,
) -> Result<snapshot::Encoded, StoreError> {
    snapshot::encode(record, generation, created_ns, spec_json).map_err(|e| StoreError::Rejected {
        plan: ctx.plan.clone(),
        message: format!("cannot serialize the plan: {e}"),
    })
}

/// Removes the journal of `generation`, folded into a snapshot (a leftover is harmless).
fn remove_journal(ctx: &Ctx<'_>, generation: u64) {
    let old = ctx.paths.journal(generation);
    if let Err(e) = fs::remove_file(&old) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(journal = %old.display(), error = %e, "cannot remove a compacted journal");
        }
    }
}

#[cfg(test)]
mod tests;
