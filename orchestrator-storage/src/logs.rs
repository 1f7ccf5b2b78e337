//! Phase logs: `logs/<nodeId>/<attempt>/<phase>.log`, rotated to `<phase>.log.1` (one kept)
//! when a file would exceed the size cap.
//!
//! Logs are appended without flushing to disk: they are diagnostics, and flushing every line
//! would slow the jobs down. A crash of the process loses nothing already appended.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use orchestrator_core::repository::{tail_lines, LogQuery};
use orchestrator_core::state::Phase;
use orchestrator_core::StoreError;

use crate::fsutil::{file_len, io_err, read_if_exists};
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
    let open = || OpenOptions::new().create(true).append(true).open(path);
    let mut file = match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(io_err("create folder", parent))?;
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
    let attempt = match query.attempt {
        Some(a) => a,
        None => match latest_attempt(node_dir)? {
            Some(a) => a,
            None => return Ok(String::new()),
        },
    };
    let dir = node_dir.join(attempt.to_string());
    let mut out = Vec::new();
    let phases = match query.phase {
        Some(p) => vec![p],
        None => Phase::ALL.to_vec(),
    };
    for phase in phases {
        let current = dir.join(log_name(phase));
        for file in [rotated(&current), current] {
            if let Some(bytes) = read_if_exists(&file)? {
                out.extend(bytes);
            }
        }
    }
    // Logs are appended as text; a damaged file still reads, with replacement characters.
    let text = match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok(match query.tail {
        Some(n) => tail_lines(&text, n).to_owned(),
        None => text,
    })
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
