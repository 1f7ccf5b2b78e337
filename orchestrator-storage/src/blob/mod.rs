//! Blob storage for parked ("dehydrated") agent sessions (SPEC §15).
//!
//! A session that waits longer than `dehydrateAfter` has its CLI state folder packed into a
//! gzipped tarball ([`pack_dir`]), stored under a [`BlobKey`] with a [`BlobMeta`] in a
//! [`BlobStore`], and its worktree removed; when it wakes, on whichever machine resumes it,
//! the tarball is fetched and unpacked ([`unpack_into`]) and the CLI goes on.
//!
//! The seam is one small object-safe trait, [`BlobStore`], with one real implementation on
//! the `object_store` crate, [`ObjectBlobStore`]: a local folder by default
//! ([`ObjectBlobStore::local`]), or any object store URL ([`ObjectBlobStore::from_url`]:
//! `file://`, `memory://`, and `s3://`, `az://`, `gs://` with the cargo features `s3`,
//! `azure`, `gcp`). [`InMemoryBlobStore`] is the same code on object_store's in-memory
//! store. Every implementation runs the shared suite `conformance::run_all` (cargo feature
//! `testing`).
//!
//! ```
//! use orchestrator_storage::blob::{
//!     pack_dir, unpack_into, BlobKey, BlobMeta, BlobStore, ObjectBlobStore,
//! };
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let work = tempfile::tempdir().unwrap();
//! let state = work.path().join("claude-state");
//! std::fs::create_dir(&state).unwrap();
//! std::fs::write(state.join("session.json"), r#"{"turn":3}"#).unwrap();
//!
//! // Dehydrate: pack, store, and the state folder can go.
//! let store: Box<dyn BlobStore> = Box::new(ObjectBlobStore::local(work.path().join("blobs")).unwrap());
//! let key = BlobKey::new("sessions/plan-1/node-4").unwrap();
//! let meta = BlobMeta::new().with("cli", "claude");
//! store.put(&key, pack_dir(&state).unwrap(), meta).await.unwrap();
//! std::fs::remove_dir_all(&state).unwrap();
//!
//! // Hydrate, wherever the session resumes.
//! let (tarball, meta) = store.get(&key).await.unwrap().expect("parked");
//! unpack_into(&tarball, &state).unwrap();
//! assert_eq!(meta.attribute("cli"), Some("claude"));
//! assert_eq!(std::fs::read_to_string(state.join("session.json")).unwrap(), r#"{"turn":3}"#);
//! # });
//! ```

use std::fmt::Debug;

use async_trait::async_trait;

mod archive;
#[cfg(any(test, feature = "testing"))]
pub mod conformance;
mod error;
mod key;
mod meta;
mod object;
mod sessions;

pub use archive::{pack_dir, unpack_into};
pub use error::BlobError;
pub use key::{BlobKey, KeyPrefix, MAX_KEY_LEN};
pub use meta::BlobMeta;
pub use object::{InMemoryBlobStore, ObjectBlobStore};
pub use sessions::BlobSessions;

/// Where blobs live: bytes with metadata under a [`BlobKey`].
///
/// The contract, which `conformance::run_all` checks for every implementation:
/// - `put` stores `bytes` under `key` with `meta` [sealed](BlobMeta::sealed) to them
///   (size and SHA-256 set), replacing what was there; it is atomic for readers: a `get`
///   sees the old blob or the new one, never part of one.
/// - `get` returns the bytes and metadata, `None` for a missing key, and a
///   [`Damaged`](BlobError::Damaged) error (never wrong bytes) when the stored bytes do not
///   match their checksum.
/// - `delete` removes the blob: `true` if there was one (two deletes racing on one key may
///   both say `true`).
/// - `list(prefix)` returns the keys equal to `prefix` or below it on a segment boundary
///   (`a` lists `a` and `a/b`, not `ab`), sorted; `""` lists every key. A prefix that breaks
///   the key rules is an [`InvalidKey`](BlobError::InvalidKey) error.
///
/// Calls on different keys may run concurrently. Concurrent puts to one key leave one of
/// them, whole.
#[async_trait]
pub trait BlobStore: Send + Sync + Debug {
    /// Stores `bytes` with `meta` under `key`, replacing any blob there.
    async fn put(&self, key: &BlobKey, bytes: Vec<u8>, meta: BlobMeta) -> Result<(), BlobError>;

    /// The blob under `key` and its metadata, `None` if there is none.
    async fn get(&self, key: &BlobKey) -> Result<Option<(Vec<u8>, BlobMeta)>, BlobError>;

    /// Deletes the blob under `key`; `false` if there was none.
    async fn delete(&self, key: &BlobKey) -> Result<bool, BlobError>;

    /// The keys equal to `prefix` or below it, sorted (`""`: every key).
    async fn list(&self, prefix: &str) -> Result<Vec<BlobKey>, BlobError>;
}
