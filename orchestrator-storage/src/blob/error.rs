//! [`BlobError`]: everything a blob store or an archive can fail with, naming the key or path.

use std::io;
use std::path::{Path, PathBuf};

/// Why a blob store call, [`pack_dir`](super::pack_dir) or
/// [`unpack_into`](super::unpack_into) failed. Every message names the key, URL or path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlobError {
    /// A blob key (or list prefix) that breaks the rules of [`BlobKey`](super::BlobKey).
    #[error("invalid blob key {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// A store URL that cannot be opened.
    #[error("blob store URL {url:?}: {message}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// A cloud URL whose backend this build leaves out.
    #[error(
        "blob store URL {url:?}: {scheme}:// stores need orchestrator-storage built with the \
         cargo feature `{feature}`"
    )]
    FeatureMissing {
        /// The URL as given.
        url: String,
        /// Its scheme (`s3`, `az`, `gs`, ...).
        scheme: String,
        /// The feature of `orchestrator-storage` that adds the backend.
        feature: &'static str,
    },
    /// The object store behind a blob store failed.
    #[error("blob store could not {operation} {key}: {source}")]
    Backend {
        /// What was being done (`write`, `read`, `delete`, `list`).
        operation: &'static str,
        /// The blob key (or list prefix).
        key: String,
        /// The object store's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A stored blob that cannot be read back whole: its data does not match its metadata, or
    /// its metadata is unreadable.
    #[error("blob {key} is damaged: {message}")]
    Damaged {
        /// The blob key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A file-system call failed.
    #[error("could not {operation} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        operation: &'static str,
        /// Where.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// An archive that cannot be made or read (damaged, truncated, not a gzipped tarball).
    #[error("archive of {}: {message}", .path.display())]
    Archive {
        /// The folder being packed or unpacked into.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An archive entry (or a symlink while packing) that would reach outside its folder.
    #[error("archive of {}: refused entry {entry:?}: {reason}", .path.display())]
    UnsafeEntry {
        /// The folder being packed or unpacked into.
        path: PathBuf,
        /// The entry's path inside the archive.
        entry: String,
        /// Why it is refused.
        reason: String,
    },
}

impl BlobError {
    /// An [`Io`](BlobError::Io) error maker for `map_err`.
    pub(crate) fn io(operation: &'static str, path: &Path) -> impl FnOnce(io::Error) -> BlobError {
        let path = path.to_path_buf();
        move |source| BlobError::Io {
            operation,
            path,
            source,
        }
    }

    /// A [`Backend`](BlobError::Backend) error maker for `map_err`.
    pub(crate) fn backend<E>(operation: &'static str, key: &str) -> impl FnOnce(E) -> BlobError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let key = key.to_owned();
        move |source| BlobError::Backend {
            operation,
            key,
            source: Box::new(source),
        }
    }

    /// A [`Damaged`](BlobError::Damaged) error.
    pub(crate) fn damaged(key: &str, message: impl Into<String>) -> BlobError {
        BlobError::Damaged {
            key: key.to_owned(),
            message: message.into(),
        }
    }
}
