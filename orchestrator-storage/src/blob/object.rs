//! [`ObjectBlobStore`]: blobs on any [`object_store::ObjectStore`] (a local folder, memory,
//! S3, Azure, GCS), and [`InMemoryBlobStore`].
//!
//! # Layout
//!
//! Under the store's root, a blob `k` is two objects:
//! - `data/k.<version>`: the bytes, written once and never changed (`<version>` is random,
//!   new on every `put`);
//! - `meta/k.json`: the sidecar, naming the version and holding the [`BlobMeta`] (size,
//!   SHA-256, attributes). It is the blob's commit point.
//!
//! # Order of writes and reads
//!
//! `put` writes the data object first, then the sidecar (one object put: atomic on every
//! object store, and on a local folder a rename of a staged file), then deletes the data
//! object the previous sidecar named. `get` reads the sidecar first, then the data it names,
//! and checks the data against the sidecar's size and SHA-256. So a reader sees the old blob
//! or the new one, never half of one or a mix: data objects do not change once written, and a
//! sidecar only ever names a data object that was complete before it. If the data object a
//! reader was sent to is gone (overwritten or deleted meanwhile), it reads the sidecar again.
//! `delete` removes the sidecar (the blob is gone from that moment) and then the data.
//!
//! A crash (or concurrent puts to one key) can leave a data object that no sidecar names;
//! it costs space, never correctness. Listing reads sidecars only.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutPayload};
use serde::{Deserialize, Serialize};
use url::Url;

use super::{BlobError, BlobKey, BlobMeta, BlobStore, KeyPrefix};

/// The format number of the sidecar this build writes and reads.
const SIDECAR_FORMAT: u32 = 1;
/// The URL schemes [`ObjectBlobStore::from_url`] knows, for error messages.
const SCHEMES: &str = "file://, memory://, s3://, az://, gs://";
/// How often `get` starts over when the blob changes under it before it gives up.
const READ_ATTEMPTS: usize = 8;

/// What `meta/<key>.json` holds.
#[derive(Debug, Serialize, Deserialize)]
struct Sidecar {
    /// [`SIDECAR_FORMAT`].
    format: u32,
    /// The version of the data object: `data/<key>.<version>`.
    version: String,
    /// The blob's metadata, sealed.
    meta: BlobMeta,
}

/// A [`BlobStore`] on an [`ObjectStore`], under a root path of it (see the module docs
/// for the layout and why readers never see half a blob).
///
/// ```
/// use orchestrator_storage::blob::{BlobKey, BlobMeta, BlobStore, ObjectBlobStore};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = ObjectBlobStore::local(dir.path().join("blobs")).unwrap();
/// let key = BlobKey::new("sessions/plan-1/node-2").unwrap();
/// store.put(&key, b"tarball".to_vec(), BlobMeta::new().with("cli", "codex")).await.unwrap();
/// let (bytes, meta) = store.get(&key).await.unwrap().unwrap();
/// assert_eq!(bytes, b"tarball");
/// assert_eq!(meta.attribute("cli"), Some("codex"));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct ObjectBlobStore {
    store: Arc<dyn ObjectStore>,
    /// Where the store's objects live (`""` for the top of `store`).
    root: String,
}

impl ObjectBlobStore {
    /// Blobs at the top of `store`.
    pub fn new(store: Arc<dyn ObjectStore>) -> ObjectBlobStore {
        ObjectBlobStore {
            store,
            root: String::new(),
        }
    }

    /// Blobs under `root` in `store` (`root` as object store paths go: `a/b`, no leading or
    /// trailing `/`).
    pub fn with_root(store: Arc<dyn ObjectStore>, root: &str) -> ObjectBlobStore {
        ObjectBlobStore {
            store,
            root: root.trim_matches('/').to_owned(),
        }
    }

    /// The default store: a folder of this machine, created if missing (readable by its owner
    /// only, on Unix: a session's CLI state may hold credentials). Writes are flushed to disk
    /// (file and folder) before `put` returns: a parked session survives a crash.
    pub fn local(dir: impl AsRef<Path>) -> Result<ObjectBlobStore, BlobError> {
        let dir = dir.as_ref();
        let mut folder = std::fs::DirBuilder::new();
        folder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut folder, 0o700);
        folder
            .create(dir)
            .map_err(BlobError::io("create the blob folder", dir))?;
        let local = LocalFileSystem::new_with_prefix(dir)
            .map_err(BlobError::backend("open", &dir.display().to_string()))?
            .with_fsync(true);
        Ok(ObjectBlobStore::new(Arc::new(local)))
    }

    /// A store named by URL: `file:///dir` (a local folder, as [`local`](Self::local)),
    /// `memory://` (a fresh in-memory store), or `s3://bucket/path`, `az://container/path`,
    /// `gs://bucket/path` (and the other URL forms of [`object_store::parse_url_opts`]).
    /// The cloud schemes need this crate built with its cargo feature `s3`, `azure` or `gcp`
    /// (an error says which otherwise); their settings (credentials, region, endpoint) come
    /// from the process environment (`AWS_*`, `AZURE_*`, `GOOGLE_*`).
    ///
    /// ```
    /// use orchestrator_storage::blob::ObjectBlobStore;
    ///
    /// assert!(ObjectBlobStore::from_url("memory://").is_ok());
    /// # #[cfg(not(feature = "s3"))]
    /// assert!(ObjectBlobStore::from_url("s3://bucket/sessions")
    ///     .unwrap_err()
    ///     .to_string()
    ///     .contains("feature `s3`"));
    /// ```
    pub fn from_url(url: &str) -> Result<ObjectBlobStore, BlobError> {
        ObjectBlobStore::from_url_with_options(url, std::env::vars())
    }

    /// [`from_url`](Self::from_url) with the cloud settings given (pairs such as
    /// `("aws_region", "eu-west-1")`) instead of read from the environment.
    pub fn from_url_with_options<I, K, V>(
        url: &str,
        options: I,
    ) -> Result<ObjectBlobStore, BlobError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: Into<String>,
    {
        let invalid = |message: String| BlobError::InvalidUrl {
            url: url.to_owned(),
            message,
        };
        let parsed = Url::parse(url).map_err(|e| invalid(e.to_string()))?;
        match parsed.scheme() {
            "file" => {
                if parsed.host_str().is_some_and(|h| h != "localhost") {
                    return Err(invalid(
                        "a file:// URL names a folder of this machine".into(),
                    ));
                }
                let dir = parsed
                    .to_file_path()
                    .map_err(|()| invalid("not a folder path".into()))?;
                ObjectBlobStore::local(dir)
            }
            "memory" => {
                let root = ObjectPath::from_url_path(parsed.path())
                    .map_err(|e| invalid(format!("bad path: {e}")))?;
                Ok(ObjectBlobStore::with_root(
                    Arc::new(InMemory::new()),
                    root.as_ref(),
                ))
            }
            scheme => {
                let not_a_store = || invalid(format!("not a blob store URL ({SCHEMES})"));
                let (kind, _) = ObjectStoreScheme::parse(&parsed).map_err(|_| not_a_store())?;
                let (feature, enabled) = match kind {
                    ObjectStoreScheme::AmazonS3 => ("s3", cfg!(feature = "s3")),
                    ObjectStoreScheme::MicrosoftAzure => ("azure", cfg!(feature = "azure")),
                    ObjectStoreScheme::GoogleCloudStorage => ("gcp", cfg!(feature = "gcp")),
                    _ => return Err(not_a_store()),
                };
                if !enabled {
                    return Err(BlobError::FeatureMissing {
                        url: url.to_owned(),
                        scheme: scheme.to_owned(),
                        feature,
                    });
                }
                let (store, root) = object_store::parse_url_opts(&parsed, options)
                    .map_err(|e| invalid(e.to_string()))?;
                Ok(ObjectBlobStore::with_root(Arc::from(store), root.as_ref()))
            }
        }
    }

    /// `<root>/<area>` (`meta` or `data`).
    fn area(&self, area: &str) -> String {
        if self.root.is_empty() {
            area.to_owned()
        } else {
            format!("{}/{area}", self.root)
        }
    }

    /// The object path `<root>/<area>/<name>`.
    fn path(&self, area: &str, name: &str, key: &BlobKey) -> Result<ObjectPath, BlobError> {
        ObjectPath::parse(format!("{}/{name}", self.area(area))).map_err(|e| {
            BlobError::InvalidKey {
                key: key.to_string(),
                reason: e.to_string(),
            }
        })
    }

    fn meta_path(&self, key: &BlobKey) -> Result<ObjectPath, BlobError> {
        self.path("meta", &format!("{key}.json"), key)
    }

    fn data_path(&self, key: &BlobKey, version: &str) -> Result<ObjectPath, BlobError> {
        self.path("data", &format!("{key}.{version}"), key)
    }

    /// The sidecar of `key`, `None` if there is none.
    async fn sidecar(&self, key: &BlobKey) -> Result<Option<Sidecar>, BlobError> {
        let bytes = match self.store.get(&self.meta_path(key)?).await {
            Ok(found) => found.bytes().await,
            Err(e) => Err(e),
        };
        let bytes = match bytes {
            Ok(bytes) => bytes,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(BlobError::backend("read", key.as_str())(e)),
        };
        let sidecar: Sidecar = serde_json::from_slice(&bytes)
            .map_err(|e| BlobError::damaged(key.as_str(), format!("unreadable metadata: {e}")))?;
        if sidecar.format != SIDECAR_FORMAT {
            return Err(BlobError::damaged(
                key.as_str(),
                format!(
                    "metadata format {} (this build reads {SIDECAR_FORMAT})",
                    sidecar.format
                ),
            ));
        }
        if sidecar.version.is_empty() || !sidecar.version.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BlobError::damaged(
                key.as_str(),
                "metadata names no version",
            ));
        }
        Ok(Some(sidecar))
    }

    /// Deletes `path`, which may be missing already.
    async fn remove(&self, path: &ObjectPath, key: &BlobKey) -> Result<(), BlobError> {
        match self.store.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(BlobError::backend("delete", key.as_str())(e)),
        }
    }
}

#[async_trait]
impl BlobStore for ObjectBlobStore {
    async fn put(&self, key: &BlobKey, bytes: Vec<u8>, meta: BlobMeta) -> Result<(), BlobError> {
        let meta = meta.sealed(&bytes);
        // A damaged old sidecar must not keep a new blob from being written.
        let previous = self.sidecar(key).await.ok().flatten();
        let version = uuid::Uuid::new_v4().simple().to_string();
        let sidecar = Sidecar {
            format: SIDECAR_FORMAT,
            version,
            meta,
        };
        let json = serde_json::to_vec(&sidecar)
            .map_err(|e| BlobError::damaged(key.as_str(), format!("metadata: {e}")))?;
        let data = self.data_path(key, &sidecar.version)?;
        self.store
            .put(&data, PutPayload::from(bytes))
            .await
            .map_err(BlobError::backend("write", key.as_str()))?;
        self.store
            .put(&self.meta_path(key)?, PutPayload::from(json))
            .await
            .map_err(BlobError::backend("write", key.as_str()))?;
        if let Some(previous) = previous {
            // The blob is written; a failure here only leaves the old bytes behind.
            let old = self.data_path(key, &previous.version)?;
            if let Err(e) = self.remove(&old, key).await {
                tracing::warn!(%key, error = %e, "could not delete the replaced blob data");
            }
        }
        Ok(())
    }

    async fn get(&self, key: &BlobKey) -> Result<Option<(Vec<u8>, BlobMeta)>, BlobError> {
        for _ in 0..READ_ATTEMPTS {
            let Some(sidecar) = self.sidecar(key).await? else {
                return Ok(None);
            };
            let data = self.data_path(key, &sidecar.version)?;
            let bytes = match self.store.get(&data).await {
                Ok(found) => found.bytes().await,
                Err(e) => Err(e),
            };
            match bytes {
                Ok(bytes) => {
                    let bytes = Vec::from(bytes);
                    sidecar.meta.verify(key, &bytes)?;
                    return Ok(Some((bytes, sidecar.meta)));
                }
                // Overwritten or deleted since the sidecar was read: read it again.
                Err(object_store::Error::NotFound { .. }) => {
                    let now = self.sidecar(key).await?;
                    if now.is_some_and(|now| now.version == sidecar.version) {
                        return Err(BlobError::damaged(
                            key.as_str(),
                            format!("its data object {data} is missing"),
                        ));
                    }
                }
                Err(e) => return Err(BlobError::backend("read", key.as_str())(e)),
            }
        }
        Err(BlobError::damaged(
            key.as_str(),
            format!("it changed under {READ_ATTEMPTS} reads in a row"),
        ))
    }

    async fn delete(&self, key: &BlobKey) -> Result<bool, BlobError> {
        // Whether there is a blob comes from its sidecar: object stores delete missing
        // objects without a word.
        let (existed, version) = match self.sidecar(key).await {
            Ok(Some(sidecar)) => (true, Some(sidecar.version)),
            Ok(None) => (false, None),
            // Damaged metadata: delete it all the same (its data cannot be found).
            Err(BlobError::Damaged { .. }) => (true, None),
            Err(e) => return Err(e),
        };
        if existed {
            self.remove(&self.meta_path(key)?, key).await?;
        }
        if let Some(version) = version {
            self.remove(&self.data_path(key, &version)?, key).await?;
        }
        Ok(existed)
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobKey>, BlobError> {
        let prefix = KeyPrefix::new(prefix)?;
        let area = self.area("meta");
        let below = match prefix.as_key() {
            Some(key) => format!("{area}/{key}"),
            None => area.clone(),
        };
        let failed = |e: object_store::path::Error| BlobError::backend("list", prefix.as_str())(e);
        let below_path = ObjectPath::parse(&below).map_err(failed)?;
        let locations: Vec<ObjectPath> = self
            .store
            .list(Some(&below_path))
            .map_ok(|object| object.location)
            .try_collect()
            .await
            .map_err(|e| BlobError::backend("list", prefix.as_str())(e))?;
        let mut keys: Vec<BlobKey> = locations
            .iter()
            .filter_map(|location| {
                let name = location.as_ref().strip_prefix(&area)?.strip_prefix('/')?;
                BlobKey::new(name.strip_suffix(".json")?).ok()
            })
            .filter(|key| key.is_under(&prefix))
            .collect();
        // Object stores list *below* a path, on segment boundaries: `meta/a` holds
        // `meta/a/b.json` but not `meta/a.json`, the sidecar of the prefix itself.
        if let Some(key) = prefix.as_key() {
            match self.store.head(&self.meta_path(&key)?).await {
                Ok(_) => keys.push(key),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(BlobError::backend("list", key.as_str())(e)),
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }
}

/// A [`BlobStore`] in memory: [`ObjectBlobStore`] on object_store's
/// [`InMemory`], the same code the real stores run. For tests and single-process hosts.
///
/// ```
/// use orchestrator_storage::blob::{BlobKey, BlobMeta, BlobStore, InMemoryBlobStore};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = InMemoryBlobStore::new();
/// let key = BlobKey::new("a").unwrap();
/// store.put(&key, vec![1, 2, 3], BlobMeta::new()).await.unwrap();
/// assert_eq!(store.list("").await.unwrap(), vec![key.clone()]);
/// assert!(store.delete(&key).await.unwrap());
/// assert!(store.get(&key).await.unwrap().is_none());
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct InMemoryBlobStore(ObjectBlobStore);

impl InMemoryBlobStore {
    /// An empty store.
    pub fn new() -> InMemoryBlobStore {
        InMemoryBlobStore(ObjectBlobStore::new(Arc::new(InMemory::new())))
    }
}

impl Default for InMemoryBlobStore {
    fn default() -> InMemoryBlobStore {
        InMemoryBlobStore::new()
    }
}

#[async_trait]
impl BlobStore for InMemoryBlobStore {
    async fn put(&self, key: &BlobKey, bytes: Vec<u8>, meta: BlobMeta) -> Result<(), BlobError> {
        self.0.put(key, bytes, meta).await
    }

    async fn get(&self, key: &BlobKey) -> Result<Option<(Vec<u8>, BlobMeta)>, BlobError> {
        self.0.get(key).await
    }

    async fn delete(&self, key: &BlobKey) -> Result<bool, BlobError> {
        self.0.delete(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobKey>, BlobError> {
        self.0.list(prefix).await
    }
}
