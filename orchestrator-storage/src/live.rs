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
//! A large plan is compacted in the background (see [`crate::Compaction::background_bytes`]):
//! the append that finds the journal due does step 1 and flushes the folder, and later
//! appends go to `journal-(g+1).log` at once, while a [`SnapshotJob`] encodes the record as of
//! that point and writes it to a temporary file; steps 2 and 3 follow under the write lock,
//! done by the next append or by the job's thread, whichever comes first.
//! Until then `plan.json` names `g`, and a reader replays `journal-g.log` and then
//! `journal-(g+1).log`: once a journal of `g + 1` exists, `journal-g.log` is never appended
//! to again, so the two are one history. (A torn last record in `journal-g.log`, which only a
//! machine crash without [`crate::Durability::Full`] can leave behind a newer journal, ends
//! the history there: what follows it is dropped as the torn record is.) There is at most one
//! such pair: a compaction due while one runs in the background waits for it.

use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SendError, Sender, TryRecvError};

use orchestrator_core::state::{PlanRecord, StateChange, SCHEMA_VERSION};
use orchestrator_core::{PlanId, StoreError};

use crate::fsutil::{
    both, corrupt, file_id, file_len, io_err, is_tmp_name, read_if_exists, sync_dir, tmp_path,
    write_atomic, write_new, FileId,
};
use crate::journal::{self, HEADER_LEN};
use crate::layout::{journal_generation, PlanPaths};
use crate::options::{Durability, FsOptions};
use crate::secrets::{self, Secrets};
use crate::snapshot::{self, SpecJson};
use crate::stats::{Account, Counters};

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
    pending: Option<Receiver<Result<Written, StoreError>>>,
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

/// The journal bytes a change counts as, at least, for compaction: about a node transition's
/// size as JSON (see [`Live::compaction_due`]).
const CHANGE_BYTES: u64 = 64;

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
            let (scans, record) = both(journal_bytes > PARALLEL_JOURNAL_BYTES, scan_all, || {
                envelope.decode(&path)
            })
            .map_err(|message| corrupt(&path, message))?;
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
    /// Each change counts as at least [`CHANGE_BYTES`] bytes of journal: a reload replays a
    /// change at much the same cost whatever its encoding, and binary records take ~5 bytes a
    /// change, so by bytes alone a journal could hold ~12 times the changes it held as JSON
    /// before a compaction, and a reload take that much longer. (`examples/reload_worst.rs`,
    /// the slowest reload of a 10k-node plan: 56k changes on its 3.5 MiB snapshot, ~22 ms at
    /// best against ~17 ms for the snapshot alone; counting bytes alone, 483k changes, ~100
    /// ms.)
    pub(crate) fn compaction_due(&self, ctx: &Ctx<'_>) -> bool {
        let bytes = self.journal_len.saturating_sub(HEADER_LEN);
        ctx.options.compaction.is_due(
            bytes.max(self.journal_changes.saturating_mul(CHANGE_BYTES)),
            self.journal_records,
            self.snapshot_id.len(),
        )
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

    /// Compacts the journal that [`Live::compaction_due`] found due: within this call for a
    /// small plan, or (returned) as a [`SnapshotJob`] for the caller to run on a thread of its
    /// own for a large one. Nothing is done while a job this state started runs.
    pub(crate) fn start_compaction(
        &mut self,
        ctx: &Ctx<'_>,
    ) -> Result<Option<SnapshotJob>, StoreError> {
        if self.pending.is_some() {
            return Ok(None);
        }
        let background = self.snapshot_id.len() >= ctx.options.compaction.background_bytes;
        // A pair of journals left by an interrupted job is folded here, at once.
        if !background || self.snapshot_generation != self.generation {
            return self.compact(ctx).map(|()| None);
        }
        let next = self.generation + 1;
        write_atomic(
            &ctx.paths.journal(next),
            &journal::header(next),
            ctx.sync(),
            ctx.counters,
            Account::Journal,
        )?;
        // The records appended to it from now on must not vanish with its name.
        if ctx.sync() {
            sync_dir(&ctx.paths.dir, ctx.counters)?;
        }
        ctx.counters.compacted();
        let (done, pending) = std::sync::mpsc::channel();
        let job = SnapshotJob {
            record: self.record.clone(),
            generation: next,
            created_ns: self.created_ns,
            spec_json: self.spec_json.clone(),
            replaces: self.snapshot_id,
            done,
        };
        self.start_journal(next);
        self.pending = Some(pending);
        Ok(Some(job))
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
        write_atomic(
            &ctx.paths.journal(next),
            &journal::header(next),
            sync,
            ctx.counters,
            Account::Journal,
        )?;
        let mut bytes = snapshot::encode(&self.record, next, self.created_ns, &mut self.spec_json)
            .map_err(|e| StoreError::Rejected {
                plan: ctx.plan.clone(),
                message: format!("cannot serialize the plan: {e}"),
            })?;
        if let Some(hidden) = ctx.hide_secrets(&bytes)? {
            bytes = hidden;
        }
        let path = ctx.paths.snapshot();
        write_atomic(&path, &bytes, sync, ctx.counters, Account::Snapshot)?;
        if sync {
            sync_dir(&ctx.paths.dir, ctx.counters)?;
        }
        remove_journal(ctx, self.generation);
        if self.snapshot_generation != self.generation {
            remove_journal(ctx, self.snapshot_generation);
        }
        ctx.counters.compacted();
        self.snapshot_id =
            file_id(&path)?.ok_or_else(|| corrupt(&path, "missing after compaction"))?;
        self.snapshot_generation = next;
        self.snapshot_version = SCHEMA_VERSION;
        self.start_journal(next);
        Ok(())
    }

    /// Puts the snapshot of the [`SnapshotJob`] this state started in place, if the job has
    /// handed it over (the caller holds the plan's write lock). Called by each append and by
    /// the job's thread: whichever comes first, so a writer that keeps the plan busy does not
    /// hold the snapshot back. A failure only costs the compaction.
    pub(crate) fn finish_pending(&mut self, ctx: &Ctx<'_>) {
        let Some(pending) = &self.pending else { return };
        let written = match pending.try_recv() {
            Err(TryRecvError::Empty) => return,
            // The job's thread could not start or ended without a word.
            Err(TryRecvError::Disconnected) => {
                self.pending = None;
                return;
            }
            Ok(written) => written,
        };
        self.pending = None;
        if let Err(e) = written.and_then(|w| self.finish(ctx, w)) {
            tracing::warn!(plan = %ctx.plan, error = %e, "journal compaction failed");
        }
    }

    /// Steps 2 and 3 of the module documentation for `written`, unless another writer
    /// compacted the plan meanwhile.
    fn finish(&mut self, ctx: &Ctx<'_>, written: Written) -> Result<(), StoreError> {
        let path = ctx.paths.snapshot();
        if file_id(&path)? != Some(written.replaces) {
            tracing::debug!(plan = %ctx.plan, "a newer snapshot replaced the one this compaction started from");
            let _ = fs::remove_file(&written.tmp);
            return Ok(());
        }
        if let Some(bytes) = written.secret_bytes {
            let bytes = ctx.hide_secrets(&bytes)?.unwrap_or(bytes);
            write_new(
                &written.tmp,
                &bytes,
                ctx.sync(),
                ctx.counters,
                Account::Snapshot,
            )?;
        }
        if let Err(e) = fs::rename(&written.tmp, &path) {
            let _ = fs::remove_file(&written.tmp);
            return Err(io_err("rename into place", &path)(e));
        }
        if ctx.sync() {
            sync_dir(&ctx.paths.dir, ctx.counters)?;
        }
        remove_journal(ctx, written.generation - 1);
        self.snapshot_id =
            file_id(&path)?.ok_or_else(|| corrupt(&path, "missing after compaction"))?;
        self.snapshot_generation = written.generation;
        self.snapshot_version = SCHEMA_VERSION;
        if written.spec_json.of(&self.record.spec).is_some() {
            self.spec_json = written.spec_json;
        }
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

/// Removes the journal of `generation`, folded into a snapshot (a leftover is harmless).
fn remove_journal(ctx: &Ctx<'_>, generation: u64) {
    let old = ctx.paths.journal(generation);
    if let Err(e) = fs::remove_file(&old) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(journal = %old.display(), error = %e, "cannot remove a compacted journal");
        }
    }
}

/// A snapshot to write on a thread of its own: the record as of the start of the journal of
/// `generation` (see the module documentation).
pub(crate) struct SnapshotJob {
    record: PlanRecord,
    generation: u64,
    created_ns: u64,
    spec_json: SpecJson,
    /// The snapshot it replaces: if `plan.json` is another file by the time it is written,
    /// another writer compacted the plan meanwhile and this snapshot is dropped.
    replaces: FileId,
    /// Where it hands its snapshot over (see [`Live::finish_pending`]).
    done: Sender<Result<Written, StoreError>>,
}

/// A [`SnapshotJob`]'s snapshot, encoded and written to a temporary file.
pub(crate) struct Written {
    generation: u64,
    replaces: FileId,
    spec_json: SpecJson,
    tmp: PathBuf,
    /// The encoded snapshot when it may hold secret values: those are hidden (which may
    /// update the plan's secrets table) and it is written under the write lock.
    secret_bytes: Option<Vec<u8>>,
}

impl SnapshotJob {
    /// Encodes the snapshot, writes it to a temporary file beside `plan.json` and hands it
    /// over to the state that started the job; needs no lock.
    pub(crate) fn run(self, ctx: &Ctx<'_>) {
        let done = self.done.clone();
        let written = self.write(ctx);
        if let Err(SendError(Ok(unwanted))) = done.send(written) {
            // That state is gone (the plan was read again): its next compaction starts anew.
            let _ = fs::remove_file(&unwanted.tmp);
        }
    }

    fn write(self, ctx: &Ctx<'_>) -> Result<Written, StoreError> {
        let SnapshotJob {
            record,
            generation,
            created_ns,
            mut spec_json,
            replaces,
            done: _,
        } = self;
        let bytes =
            snapshot::encode(&record, generation, created_ns, &mut spec_json).map_err(|e| {
                StoreError::Rejected {
                    plan: ctx.plan.clone(),
                    message: format!("cannot serialize the plan: {e}"),
                }
            })?;
        drop(record);
        let tmp = tmp_path(&ctx.paths.snapshot());
        let secret_bytes = if Secrets::may_hold_secrets(&bytes) {
            Some(bytes)
        } else {
            if let Err(e) = write_new(&tmp, &bytes, ctx.sync(), ctx.counters, Account::Snapshot) {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
            None
        };
        Ok(Written {
            generation,
            replaces,
            spec_json,
            tmp,
            secret_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    //! The background compaction's states, step by step, as a crash would leave them.

    use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
    use orchestrator_core::PlanRepository;

    use super::*;
    use crate::options::Compaction;
    use crate::stats::Counters;
    use crate::FsPlanRepository;

    struct Fixture {
        _root: tempfile::TempDir,
        plan: PlanId,
        paths: PlanPaths,
        options: FsOptions,
        counters: Counters,
    }

    impl Fixture {
        /// A stored plan of three jobs whose snapshots are always written in the background.
        fn new() -> Fixture {
            let root = tempfile::tempdir().expect("tempdir");
            let mut spec = PlanSpec::new("background").isolation(Isolation::None);
            for i in 0..3 {
                spec = spec.job(JobSpec::new(
                    format!("job-{i}"),
                    "T",
                    WorkSpec::shell("true"),
                ));
            }
            let nodes = PlanGraph::build(&spec).expect("valid").node_count();
            let record = PlanRecord::new(PlanId::random(), spec, "/repo".into(), nodes, 1);
            let plan = record.state.id.clone();
            let store = FsPlanRepository::new(root.path());
            tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime")
                .block_on(store.create(&record))
                .expect("create");
            let paths = PlanPaths::of(&root.path().join("plans"), &plan).expect("paths");
            let options = FsOptions::default().compaction(
                Compaction::default()
                    .background_bytes(0)
                    .min_journal_bytes(0),
            );
            Fixture {
                _root: root,
                plan,
                paths,
                options,
                counters: Counters::default(),
            }
        }

        fn ctx(&self) -> Ctx<'_> {
            Ctx {
                plan: &self.plan,
                paths: &self.paths,
                options: &self.options,
                counters: &self.counters,
            }
        }

        /// The plan as a new reader finds it on disk.
        fn read(&self) -> Live {
            Live::read(&self.ctx()).expect("read")
        }

        /// The files of the plan folder, sorted.
        fn files(&self) -> Vec<String> {
            let mut names: Vec<String> = fs::read_dir(&self.paths.dir)
                .expect("plan folder")
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| !n.ends_with(".lock"))
                .collect();
            names.sort();
            names
        }

        /// The plan read, four changes appended, and a background compaction started.
        fn compacting(&self) -> (Live, SnapshotJob) {
            let ctx = self.ctx();
            let mut live = self.read();
            live.append(&ctx, &batch(0, 4)).expect("append");
            let job = live.start_compaction(&ctx).expect("start").expect("a job");
            (live, job)
        }

        /// The generation `plan.json` names.
        fn snapshot_generation(&self) -> u64 {
            let bytes = fs::read(self.paths.snapshot()).expect("snapshot");
            snapshot::open(&bytes, &self.paths.snapshot())
                .expect("envelope")
                .generation
        }
    }

    /// Session ids `from..to`, one change each, on the plan's three nodes.
    fn batch(from: usize, to: usize) -> Vec<StateChange> {
        (from..to)
            .map(|i| StateChange::Session {
                node: i % 3,
                session_id: format!("session-{i}"),
            })
            .collect()
    }

    #[test]
    fn a_snapshot_written_in_the_background_keeps_every_change_at_every_step() {
        let f = Fixture::new();
        let ctx = f.ctx();
        let mut live = f.read();
        live.append(&ctx, &batch(0, 4)).expect("append");
        let before = f.read();
        assert!(before.is_current(&ctx).expect("current"));
        let job = live.start_compaction(&ctx).expect("start").expect("a job");
        // The new journal is there, the snapshot still names the old one.
        assert_eq!(
            f.files(),
            ["journal-000000.log", "journal-000001.log", "plan.json"]
        );
        assert_eq!(f.snapshot_generation(), 0);
        assert_eq!(f.read().record, live.record);

        // Appends go to the new journal while the job runs; a reader replays both.
        live.append(&ctx, &batch(4, 9)).expect("append");
        let reader = f.read();
        assert_eq!(reader.record, live.record);
        assert_eq!((reader.snapshot_generation, reader.generation), (0, 1));
        assert!(live.is_current(&ctx).expect("current"));
        // A compaction due meanwhile waits for the one under way.
        assert!(live.start_compaction(&ctx).expect("start").is_none());
        // A reader that read the plan before the new journal existed sees it is behind.
        assert!(!before.is_current(&ctx).expect("current"));

        job.run(&ctx);
        live.finish_pending(&ctx);
        assert_eq!(f.files(), ["journal-000001.log", "plan.json"]);
        assert_eq!(f.snapshot_generation(), 1);
        assert!(live.is_current(&ctx).expect("current"), "its own snapshot");
        assert_eq!(f.read().record, live.record);

        // The next one starts once this one is in place.
        live.append(&ctx, &batch(9, 12)).expect("append");
        let _job = live.start_compaction(&ctx).expect("start").expect("a job");
        assert!(f.files().contains(&"journal-000002.log".to_owned()));
        assert_eq!(f.read().record, live.record);
    }

    #[test]
    fn the_next_append_puts_a_handed_over_snapshot_in_place() {
        let f = Fixture::new();
        let ctx = f.ctx();
        let (mut live, job) = f.compacting();
        job.run(&ctx);
        assert_eq!(f.snapshot_generation(), 0, "handed over, not in place yet");
        live.append(&ctx, &batch(4, 6)).expect("append");
        assert_eq!(f.snapshot_generation(), 1);
        assert_eq!(f.files(), ["journal-000001.log", "plan.json"]);
        assert_eq!(f.read().record, live.record);
    }

    #[test]
    fn a_job_that_never_ran_leaves_the_pair_to_the_next_compaction() {
        let f = Fixture::new();
        let ctx = f.ctx();
        let (mut live, job) = f.compacting();
        // Its thread could not start.
        drop(job);
        live.append(&ctx, &batch(4, 6)).expect("append");
        assert!(live.start_compaction(&ctx).expect("start").is_none());
        assert_eq!(f.snapshot_generation(), 2);
        assert_eq!(f.files(), ["journal-000002.log", "plan.json"]);
        assert_eq!(f.read().record, live.record);
    }

    #[test]
    fn a_crash_before_the_snapshot_is_in_place_loses_nothing_and_the_pair_is_folded_later() {
        let f = Fixture::new();
        let ctx = f.ctx();
        let (mut live, job) = f.compacting();
        live.append(&ctx, &batch(4, 9)).expect("append");
        // The process dies with the snapshot written to its temporary file only.
        job.run(&ctx);
        let expected = live.record.clone();
        drop(live);
        assert_eq!(f.files().len(), 4, "{:?}", f.files());

        let mut after = f.read();
        assert_eq!(after.record, expected);
        after.append(&ctx, &batch(9, 11)).expect("append");
        let mut expected = expected;
        for change in batch(9, 11) {
            expected.apply(&change).expect("applies");
        }
        assert_eq!(f.read().record, expected);
        assert_eq!(
            f.files(),
            ["journal-000000.log", "journal-000001.log", "plan.json"],
            "the leftover temporary file is removed, both journals are kept"
        );
        // The pair is folded within the append that finds the journal due.
        assert!(after.start_compaction(&ctx).expect("start").is_none());
        assert_eq!(f.files(), ["journal-000002.log", "plan.json"]);
        assert_eq!(f.snapshot_generation(), 2);
        assert_eq!(f.read().record, expected);
    }

    #[test]
    fn a_torn_journal_ends_the_history_before_the_next_one() {
        let f = Fixture::new();
        let ctx = f.ctx();
        let mut live = f.read();
        live.append(&ctx, &batch(0, 4)).expect("append");
        let kept = live.record.clone();
        live.append(&ctx, &batch(4, 6)).expect("append");
        let _job = live.start_compaction(&ctx).expect("start").expect("a job");
        live.append(&ctx, &batch(6, 9)).expect("append");
        drop(live);
        // A machine crash without full durability lost the old journal's last bytes.
        let old = f.paths.journal(0);
        let len = fs::metadata(&old).expect("journal").len();
        OpenOptions::new()
            .write(true)
            .open(&old)
            .and_then(|file| file.set_len(len - 1))
            .expect("truncate");

        let mut after = f.read();
        assert_eq!(
            after.record, kept,
            "the torn record and what follows it are gone"
        );
        after.append(&ctx, &batch(20, 22)).expect("append");
        let mut expected = kept;
        for change in batch(20, 22) {
            expected.apply(&change).expect("applies");
        }
        assert_eq!(f.read().record, expected);
        assert_eq!(f.files(), ["journal-000000.log", "plan.json"]);
    }

    #[test]
    fn a_snapshot_overtaken_by_another_writers_compaction_is_dropped() {
        let f = Fixture::new();
        let ctx = f.ctx();
        let (mut live, job) = f.compacting();
        // Another process reads the pair and folds it while the job runs.
        let mut other = f.read();
        other.append(&ctx, &batch(4, 6)).expect("append");
        other.compact(&ctx).expect("compact");
        job.run(&ctx);
        live.finish_pending(&ctx);
        assert_eq!(f.snapshot_generation(), 2);
        assert_eq!(f.files(), ["journal-000002.log", "plan.json"]);
        assert_eq!(f.read().record, other.record);
        assert!(
            !live.is_current(&ctx).expect("current"),
            "it reads the plan again"
        );
    }
}
