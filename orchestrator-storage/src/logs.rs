//! Phase logs: `logs/<nodeId>/<attempt>/<phase>.log`, rotated to `<phase>.log.1` (one kept)
//! when a file would exceed the size cap.
//!
//! Logs are appended without flushing to disk: they are diagnostics, and flushing every line
//! would slow the jobs down. A crash of the process loses nothing already appended.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use orchestrator_core::repository::LogQuery;
use orchestrator_core::state::Phase;
use orchestrator_core::StoreError;

use crate::fsutil::{create_private_dir_all, file_len, io_err, private_file};
use crate::layout::{log_name, rotated};
use crate::stats::{Account, Counters};

/// Appends `text` to the log at `path`, rotating it first if it would outgrow `max_bytes`.
pub(crate) fn append(
    path: &Path,
    text: &str,
    max_bytes: u64,
    counters: &Counters,
) -> Result<(), StoreError> {
    if text.is_empty() {
        return Ok(());
    }
    let size = file_len(path)?.unwrap_or(0);
    if size > 0 && size + text.len() as u64 > max_bytes {
        let old = rotated(path);
        fs::rename(path, &old).map_err(io_err("rotate log", path))?;
    }
    let open = || private_file().create(true).append(true).open(path);
    let mut file = match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                create_private_dir_all(parent)?;
            }
            open()
        }
        other => other,
    }
    .map_err(io_err("open log", path))?;
    file.write_all(text.as_bytes())
        .map_err(io_err("append to log", path))?;
    counters.wrote(Account::Other, text.len());
    Ok(())
}

/// Reads a node's logs from `node_dir` (see [`LogQuery`]).
pub(crate) fn read(node_dir: &Path, query: LogQuery) -> Result<String, StoreError> {
    let mut out = Vec::new();
    copy(node_dir, query, &mut out)?;
    // Logs are appended as text; a damaged file still reads, with replacement characters.
    Ok(match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// What [`FsPlanRepository::copy_log`](crate::FsPlanRepository::copy_log) wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogCopy {
    /// Bytes written.
    pub bytes: u64,
    /// The last byte written was a newline (false when nothing was written).
    pub ends_with_newline: bool,
}

/// Bytes read at a time when looking for the start of a tail.
const TAIL_BLOCK: usize = 64 * 1024;

/// Writes a node's logs from `node_dir` (see [`LogQuery`]) to `out` as stored, through a small
/// buffer: a log of any size costs the same memory. With a tail, the files are searched for
/// the start of the last lines from their end.
pub(crate) fn copy(
    node_dir: &Path,
    query: LogQuery,
    out: &mut dyn Write,
) -> Result<LogCopy, StoreError> {
    let files = files(node_dir, query)?;
    let (first, offset) = match query.tail {
        Some(0) => return Ok(LogCopy::default()),
        Some(n) => tail_start(&files, n)?,
        None => (0, 0),
    };
    let mut counted = Counted {
        out,
        copy: LogCopy::default(),
    };
    for (i, (path, _)) in files.iter().enumerate().skip(first) {
        let mut file = match fs::File::open(path) {
            Ok(f) => f,
            // Rotated away since it was listed: what it held is in the next file now.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err("read", path)(e)),
        };
        if i == first && offset > 0 {
            file.seek(SeekFrom::Start(offset))
                .map_err(io_err("read", path))?;
        }
        io::copy(&mut file, &mut counted).map_err(io_err("copy log", path))?;
    }
    Ok(counted.copy)
}

/// The existing files of a node's logs for `query`, in reading order, with their sizes.
fn files(node_dir: &Path, query: LogQuery) -> Result<Vec<(PathBuf, u64)>, StoreError> {
    let attempt = match query.attempt {
        Some(a) => a,
        None => match latest_attempt(node_dir)? {
            Some(a) => a,
            None => return Ok(Vec::new()),
        },
    };
    let dir = node_dir.join(attempt.to_string());
    let phases = match query.phase {
        Some(p) => vec![p],
        None => Phase::ALL.to_vec(),
    };
    let mut files = Vec::new();
    for phase in phases {
        let current = dir.join(log_name(phase));
        for file in [rotated(&current), current] {
            if let Some(len) = file_len(&file)? {
                files.push((file, len));
            }
        }
    }
    Ok(files)
}

/// Where the last `n` (at least 1) lines of the concatenated `files` start: a file index and
/// an offset in it. The same cut as [`orchestrator_core::repository::tail_lines`]: a final
/// newline ends the last line rather than starting another.
fn tail_start(files: &[(PathBuf, u64)], n: usize) -> Result<(usize, u64), StoreError> {
    let mut buf = vec![0u8; TAIL_BLOCK];
    let mut at_end = true;
    let mut newlines = 0usize;
    for (i, (path, len)) in files.iter().enumerate().rev() {
        let mut file = match fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err("read", path)(e)),
        };
        let mut end = *len;
        while end > 0 {
            let start = end.saturating_sub(TAIL_BLOCK as u64);
            // At most TAIL_BLOCK, so it fits.
            let size = usize::try_from(end - start).unwrap_or(TAIL_BLOCK);
            let block = &mut buf[..size];
            file.seek(SeekFrom::Start(start))
                .and_then(|_| file.read_exact(block))
                .map_err(io_err("read", path))?;
            for (j, &b) in block.iter().enumerate().rev() {
                if b == b'\n' && !at_end {
                    newlines += 1;
                    if newlines == n {
                        return Ok((i, start + j as u64 + 1));
                    }
                }
                at_end = false;
            }
            end = start;
        }
    }
    Ok((0, 0))
}

/// A writer that counts what goes through and remembers whether it ended a line.
struct Counted<'a> {
    out: &'a mut dyn Write,
    copy: LogCopy,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        if n > 0 {
            self.copy.bytes += n as u64;
            self.copy.ends_with_newline = buf[n - 1] == b'\n';
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// The highest attempt number with a log folder.
fn latest_attempt(node_dir: &Path) -> Result<Option<u32>, StoreError> {
    let entries = match fs::read_dir(node_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("list", node_dir)(e)),
    };
    let mut latest = None;
    for entry in entries {
        let entry = entry.map_err(io_err("list", node_dir))?;
        if let Some(n) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        {
            latest = latest.max(Some(n));
        }
    }
    Ok(latest)
}
