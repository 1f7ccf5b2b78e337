//! [`MachineSlots`]: a [`Capacity`] shared by every process of the machine that uses the same
//! folder (SPEC §3, "all processes on the machine").
//!
//! It lives here, beside the plan locks, because it is the same mechanism: advisory file locks
//! (`flock` on Unix through `fs4`/`rustix`, `LockFileEx` on Windows) that the operating system
//! releases when the holder dies, `kill -9` included, so a crashed process never keeps a slot.
//! Core stays free of OS dependencies.
//!
//! The folder holds `slot-0` .. `slot-<N-1>`; holding slot `i` means holding an exclusive lock
//! on that file. The lock belongs to one open file (not to the process), so two
//! `MachineSlots` of one process also exclude each other, and the files are opened
//! close-on-exec, so jobs never inherit a slot. Processes sharing a folder should agree on N:
//! each uses only the first N files it was given.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use fs4::{FileExt, TryLockError};
use orchestrator_core::capacity::{Capacity, CapacityError, Slot};

/// First pause between two looks at the slot files while all are taken.
const FIRST_PAUSE: Duration = Duration::from_millis(2);
/// Longest pause: a freed slot is seen within this (the lock files give no wake-up).
const LONGEST_PAUSE: Duration = Duration::from_millis(50);

/// Jobs running at once across the processes of a machine: N lock files in a folder.
///
/// Waiting for a slot is a short backoff loop of non-blocking lock attempts (2 ms doubling up
/// to 50 ms), since file locks offer no notification and a blocking `flock` on a thread could
/// not be cancelled. Each attempt opens at most N small files.
///
/// ```
/// use orchestrator_core::capacity::Capacity;
/// use orchestrator_storage::MachineSlots;
/// let dir = tempfile::tempdir().unwrap();
/// let slots = MachineSlots::new(dir.path(), 1).unwrap();
/// let held = slots.try_acquire().unwrap().expect("a free slot");
/// // Another process (or another MachineSlots on the folder) finds the slot taken.
/// let other = MachineSlots::new(dir.path(), 1).unwrap();
/// assert!(other.try_acquire().unwrap().is_none());
/// drop(held);
/// assert!(other.try_acquire().unwrap().is_some());
/// ```
///
/// With an orchestrator: `Orchestrator::builder().capacity(MachineSlots::new(dir, 3)?)`.
#[derive(Debug, Clone)]
pub struct MachineSlots {
    dir: PathBuf,
    slots: usize,
}

/// A held slot file; closing it releases the lock.
#[derive(Debug)]
struct HeldSlot(File);

impl Drop for HeldSlot {
    fn drop(&mut self) {
        // Closing the file releases the lock too; unlocking first just makes it prompt.
        let _ = FileExt::unlock(&self.0);
    }
}

impl MachineSlots {
    /// `slots` jobs at once among the processes using `dir`; creates the folder (private to
    /// its owner on Unix) and the slot files.
    pub fn new(dir: impl Into<PathBuf>, slots: usize) -> Result<Self, CapacityError> {
        let dir = dir.into();
        if slots == 0 {
            return Err(CapacityError::NoSlots {
                what: format!("machine slots in {}", dir.display()),
            });
        }
        let me = MachineSlots { dir, slots };
        me.create_dir()?;
        for i in 0..slots {
            drop(me.open(i)?);
        }
        Ok(me)
    }

    /// The default folder: `$XDG_RUNTIME_DIR/orchestrator/slots` (a per-user folder in memory,
    /// emptied at logout), else `$HOME/.cache/orchestrator/slots`, else one in the temporary
    /// folder.
    pub fn default_dir() -> PathBuf {
        let non_empty = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
        if let Some(runtime) = non_empty("XDG_RUNTIME_DIR") {
            return PathBuf::from(runtime).join("orchestrator").join("slots");
        }
        if let Some(home) = non_empty("HOME") {
            return PathBuf::from(home)
                .join(".cache")
                .join("orchestrator")
                .join("slots");
        }
        std::env::temp_dir().join("orchestrator-slots")
    }

    /// The folder of the slot files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many jobs may hold a slot at once.
    pub fn slots(&self) -> usize {
        self.slots
    }

    fn create_dir(&self) -> Result<(), CapacityError> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&self.dir)
            .map_err(|source| CapacityError::Io {
                operation: "create slot folder",
                path: self.dir.clone(),
                source,
            })
    }

    /// [`Capacity::try_acquire`], saying which slot (`0..slots`) it holds: a process that
    /// needs a place of its own on the machine (a worker's folder) takes the one of its slot.
    pub fn try_acquire_numbered(&self) -> Result<Option<(usize, Slot)>, CapacityError> {
        for i in 0..self.slots {
            let file = self.open(i)?;
            match FileExt::try_lock(&file) {
                Ok(()) => return Ok(Some((i, Slot::new(HeldSlot(file))))),
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Error(source)) => {
                    return Err(CapacityError::Io {
                        operation: "lock slot file",
                        path: self.dir.join(format!("slot-{i}")),
                        source,
                    })
                }
            }
        }
        Ok(None)
    }

    fn open(&self, i: usize) -> Result<File, CapacityError> {
        let path = self.dir.join(format!("slot-{i}"));
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&path) {
            Ok(file) => Ok(file),
            // The folder was removed (a cleaned runtime folder): make it again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.create_dir()?;
                options.open(&path).map_err(|source| CapacityError::Io {
                    operation: "open slot file",
                    path,
                    source,
                })
            }
            Err(source) => Err(CapacityError::Io {
                operation: "open slot file",
                path,
                source,
            }),
        }
    }
}

#[async_trait]
impl Capacity for MachineSlots {
    fn try_acquire(&self) -> Result<Option<Slot>, CapacityError> {
        Ok(self.try_acquire_numbered()?.map(|(_, slot)| slot))
    }

    async fn acquire(&self) -> Result<Slot, CapacityError> {
        // Cancel-safe: nothing is held between attempts.
        let mut pause = FIRST_PAUSE;
        loop {
            if let Some(slot) = self.try_acquire()? {
                return Ok(slot);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }
}
