//! Advisory file locks (`flock` on Unix, `LockFileEx` on Windows), released by the operating
//! system when the process dies.
//!
//! Two locks per plan: `owner.lock`, held for as long as a process runs the plan (a
//! [`Lease`]) and holding that process's id; and `journal.lock`, held for the few
//! microseconds of each append or compaction so that writers in different processes never
//! interleave.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fs4::{FileExt, TryLockError};
use orchestrator_core::repository::Lease;
use orchestrator_core::{PlanId, StoreError};

use crate::fsutil::{io_err, private_file};

/// Opens a lock file of `plan`; a missing plan folder means the plan does not exist.
fn open(path: &Path, plan: &PlanId) -> Result<File, StoreError> {
    private_file()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => StoreError::NotFound(plan.clone()),
            _ => io_err("open lock file", path)(e),
        })
}

/// The plan's journal lock, held until dropped.
pub(crate) struct WriteLock(File);

impl WriteLock {
    /// Waits for the journal lock of `plan`.
    pub(crate) fn acquire(path: &Path, plan: &PlanId) -> Result<WriteLock, StoreError> {
        let file = open(path, plan)?;
        FileExt::lock(&file).map_err(io_err("lock", path))?;
        Ok(WriteLock(file))
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        // Closing the file releases the lock too; unlocking first just makes it prompt.
        let _ = FileExt::unlock(&self.0);
    }
}

/// Leases held through one repository (shared by its clones), so that it can tell its own
/// leases from other processes'.
pub(crate) type HeldLeases = Arc<Mutex<HashSet<PlanId>>>;

struct OwnerGuard {
    file: File,
    plan: PlanId,
    held: HeldLeases,
}

impl Drop for OwnerGuard {
    fn drop(&mut self) {
        // Clear the pid so that nobody reads a stale owner; closing releases the lock.
        let _ = self.file.set_len(0);
        let _ = FileExt::unlock(&self.file);
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.plan);
    }
}

/// Takes the owner lock of `plan` without waiting and records this process's id in it.
pub(crate) fn acquire_owner(
    path: &Path,
    plan: &PlanId,
    held: &HeldLeases,
) -> Result<Lease, StoreError> {
    let mut file = open(path, plan)?;
    match FileExt::try_lock(&file) {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(StoreError::Locked {
                plan: plan.clone(),
                owner: describe_owner(&mut file),
            })
        }
        Err(TryLockError::Error(e)) => return Err(io_err("lock", path)(e)),
    }
    let pid = format!("{}\n", std::process::id());
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(pid.as_bytes()))
        .map_err(io_err("write owner to", path))?;
    held.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(plan.clone());
    Ok(Lease::new(OwnerGuard {
        file,
        plan: plan.clone(),
        held: held.clone(),
    }))
}

/// Who holds an owner lock, from the pid its holder wrote (which may take a moment to appear).
fn describe_owner(file: &mut File) -> String {
    for _ in 0..20 {
        let mut text = String::new();
        let read = file
            .seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_string(&mut text));
        if read.is_ok() {
            if let Ok(pid) = text.trim().parse::<u32>() {
                return if pid == std::process::id() {
                    format!("process {pid} (this process, through another handle)")
                } else {
                    format!("process {pid}")
                };
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    "another process (its id is not recorded)".to_string()
}
