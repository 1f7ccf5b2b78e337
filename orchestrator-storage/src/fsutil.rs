//! Small file-system helpers: errors with context, atomic writes, folder syncs, file identity.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use orchestrator_core::StoreError;

use crate::stats::{Account, Counters};

/// Wraps an I/O error with what was being done and where.
pub(crate) fn io_err(operation: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io {
        operation,
        path,
        source,
    }
}

/// A damaged-file error naming the file.
pub(crate) fn corrupt(path: &Path, message: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// A name for a temporary file or folder, unique within this machine.
pub(crate) fn unique_suffix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Flushes a folder so that renames and creations inside it survive a power loss.
pub(crate) fn sync_dir(dir: &Path, counters: &Counters) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        counters.fsync();
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("sync folder", dir))
    }
    #[cfg(not(unix))]
    {
        // Folders cannot be opened (and need no flush) on Windows.
        let _ = (dir, counters);
        Ok(())
    }
}

/// Mode of every file the store creates: plans hold the specs of jobs, their logs and their
/// secrets, readable by their owner only.
#[cfg(unix)]
const FILE_MODE: u32 = 0o600;
/// Mode of every folder the store creates.
#[cfg(unix)]
const DIR_MODE: u32 = 0o700;

/// Options that create a file readable and writable by its owner only (on Unix).
pub(crate) fn private_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, FILE_MODE);
    options
}

/// Creates `dir` and any missing parents, each usable by its owner only (on Unix).
pub(crate) fn create_private_dir_all(dir: &Path) -> Result<(), StoreError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    builder.create(dir).map_err(io_err("create folder", dir))
}

/// Creates the folder `dir` (its parent must exist), usable by its owner only (on Unix).
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    builder.create(dir).map_err(io_err("create folder", dir))
}

/// Takes group and other permissions away from an existing folder (one made by an older
/// version, or by someone else's `mkdir`), so what the store puts in it stays private.
pub(crate) fn make_dir_private(dir: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = fs::metadata(dir).map_err(io_err("inspect", dir))?;
        if meta.permissions().mode() & 0o077 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))
                .map_err(io_err("restrict permissions of", dir))?;
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Writes `pieces` to a temporary file next to `path`, flushes it when `sync`, and renames it
/// over `path`. Readers see the old content or the new, never a mix. The caller syncs the
/// folder (once for several files) when the rename itself must be durable.
pub(crate) fn write_atomic(
    path: &Path,
    pieces: &[&[u8]],
    sync: bool,
    counters: &Counters,
    account: Account,
) -> Result<(), StoreError> {
    let tmp = tmp_path(path);
    let result = write_new(&tmp, pieces, sync, counters, account)
        .and_then(|()| fs::rename(&tmp, path).map_err(io_err("rename into place", path)));
    if result.is_err() {
        // Best effort: a leftover temporary file is harmless and removed by later cleanups.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates (or truncates) `path` with `pieces`, one after the other, flushed when `sync`.
pub(crate) fn write_new(
    path: &Path,
    pieces: &[&[u8]],
    sync: bool,
    counters: &Counters,
    account: Account,
) -> Result<(), StoreError> {
    let file = write_file(path, pieces, counters, account)?;
    if sync {
        counters.fsync();
        file.sync_all().map_err(io_err("flush", path))?;
    }
    Ok(())
}

/// Creates (or truncates) `path` with `pieces`, not flushed: the file is returned for the
/// caller to flush (see [`sync_together`]).
pub(crate) fn write_file(
    path: &Path,
    pieces: &[&[u8]],
    counters: &Counters,
    account: Account,
) -> Result<File, StoreError> {
    let mut file = private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(io_err("create", path))?;
    for piece in pieces {
        file.write_all(piece).map_err(io_err("write", path))?;
        counters.wrote(account, piece.len());
    }
    Ok(file)
}

/// Flushes `files` and the folder `dir` (the names in it) to the disk together: each file on
/// a thread of its own, so the disk works on all of them at once. (A 10,000-node plan's
/// creation flushed its 1.85 MB snapshot, its journal and its folder one after the other,
/// ~1.8 + 0.7 + 0.25 ms.) Returns the first error.
pub(crate) fn sync_together(
    files: &[(File, PathBuf)],
    dir: &Path,
    counters: &Counters,
) -> Result<(), StoreError> {
    let flush = |file: &File, path: &Path| {
        counters.fsync();
        file.sync_all().map_err(io_err("flush", path))
    };
    std::thread::scope(|scope| {
        let threads: Vec<_> = files
            .iter()
            .map(|(file, path)| {
                let thread = std::thread::Builder::new()
                    .name("orchestrator-store-sync".into())
                    .spawn_scoped(scope, move || flush(file, path))
                    // No thread: flushed here, in turn.
                    .map_err(|_| flush(file, path));
                (thread, path)
            })
            .collect();
        let mut result = sync_dir(dir, counters);
        for (thread, path) in threads {
            let flushed = match thread {
                Ok(handle) => handle.join().unwrap_or_else(|_| {
                    Err(io_err("flush", path)(io::Error::other(
                        "the flushing thread panicked",
                    )))
                }),
                Err(inline) => inline,
            };
            result = result.and(flushed);
        }
        result
    })
}

/// `<path>.tmp-<unique>`.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp-{}", unique_suffix()));
    PathBuf::from(name)
}

/// Whether a file name is one of our temporary files.
pub(crate) fn is_tmp_name(name: &str) -> bool {
    name.contains(".tmp-")
}

/// Reads a file, `None` if it does not exist.
pub(crate) fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("read", path)(e)),
    }
}

/// Removes a file; a missing file is fine.
pub(crate) fn remove_if_exists(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("remove", path)(e)),
        _ => Ok(()),
    }
}

/// What identifies one version of a file: replaced files (atomic rename) get a new identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl FileId {
    pub(crate) fn of(meta: &Metadata) -> FileId {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        FileId {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

/// The identity of the file at `path`, `None` if there is none.
pub(crate) fn file_id(path: &Path) -> Result<Option<FileId>, StoreError> {
    match fs::metadata(path) {
        Ok(meta) => Ok(Some(FileId::of(&meta))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("inspect", path)(e)),
    }
}

/// The length of the file at `path`, `None` if there is none.
pub(crate) fn file_len(path: &Path) -> Result<Option<u64>, StoreError> {
    Ok(file_id(path)?.map(|id| id.len))
}

/// The name of the thread that encodes, decodes or replays half of a large plan
/// ([`orchestrator_core::parallel::both`]).
pub(crate) const DECODE_THREAD: &str = "orchestrator-store-decode";
