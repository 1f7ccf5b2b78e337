//! Compacting a large plan in the background (see [`crate::Compaction::background_bytes`]),
//! with the steps of [`super`]'s documentation. The append that finds the journal due does
//! step 1 and flushes the folder, and later appends go to `journal-(g+1).log` at once, while
//! a [`SnapshotJob`] encodes the record as of that point and writes it to a temporary file;
//! steps 2 and 3 follow under the write lock, done by the next append or by the job's thread,
//! whichever comes first.
//!
//! Until then `plan.json` names `g`, and a reader replays `journal-g.log` and then
//! `journal-(g+1).log`: once a journal of `g + 1` exists, `journal-g.log` is never appended
//! to again, so the two are one history. (A torn last record in `journal-g.log`, which only a
//! machine crash without [`crate::Durability::Full`] can leave behind a newer journal, ends
//! the history there: what follows it is dropped as the torn record is.) There is at most one
//! such pair: a compaction due while one runs in the background waits for it.

use std::fs;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SendError, Sender, TryRecvError};

use orchestrator_core::state::PlanRecord;
use orchestrator_core::StoreError;

use super::{encode_snapshot, new_journal, remove_journal, Ctx, Live};
use crate::fsutil::{file_id, io_err, sync_dir, tmp_path, write_new, FileId};
use crate::snapshot::{Encoded, SpecJson};
use crate::stats::Account;

/// Where a [`SnapshotJob`] hands its snapshot over to the state that started it.
pub(crate) type Handover = Receiver<Result<Written, StoreError>>;

impl Live {
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
        new_journal(ctx, next)?;
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

    /// Steps 2 and 3 of [`super`]'s documentation for `written`, unless another writer
    /// compacted the plan meanwhile.
    fn finish(&mut self, ctx: &Ctx<'_>, written: Written) -> Result<(), StoreError> {
        let path = ctx.paths.snapshot();
        if file_id(&path)? != Some(written.replaces) {
            tracing::debug!(plan = %ctx.plan, "a newer snapshot replaced the one this compaction started from");
            let _ = fs::remove_file(&written.tmp);
            return Ok(());
        }
        if let Some(mut snapshot) = written.with_secrets {
            snapshot.hide_secrets(|json| ctx.hide_secrets(json))?;
            write_new(
                &written.tmp,
                &snapshot.pieces(),
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
        self.snapshot_in_place(ctx, written.generation)?;
        if written.spec_json.of(&self.record.spec).is_some() {
            self.spec_json = written.spec_json;
        }
        Ok(())
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
    with_secrets: Option<Encoded>,
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
        let snapshot = encode_snapshot(ctx, &record, generation, created_ns, &mut spec_json)?;
        drop(record);
        let tmp = tmp_path(&ctx.paths.snapshot());
        let with_secrets = if snapshot.may_hold_secrets() {
            Some(snapshot)
        } else {
            let pieces = snapshot.pieces();
            if let Err(e) = write_new(&tmp, &pieces, ctx.sync(), ctx.counters, Account::Snapshot) {
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
            with_secrets,
        })
    }
}
