//! [`BlobSessions`]: the engine's session archive (SPEC §15 dehydration) on a [`BlobStore`]:
//! a parked agent's CLI state folder as a gzipped tarball under its session key.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::tools::SessionArchive;

use super::{pack_dir, unpack_into, BlobKey, BlobMeta, BlobStore};

/// Dehydrated sessions in a blob store: register it with
/// `OrchestratorBuilder::session_archive`.
///
/// ```
/// use std::sync::Arc;
/// use orchestrator_core::tools::SessionArchive;
/// use orchestrator_storage::blob::{BlobSessions, InMemoryBlobStore};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let sessions = BlobSessions::new(Arc::new(InMemoryBlobStore::new()));
/// let dir = tempfile::tempdir().unwrap();
/// let state = dir.path().join("state");
/// std::fs::create_dir(&state).unwrap();
/// std::fs::write(state.join("session.jsonl"), "turn 1\n").unwrap();
/// sessions.store("sessions/p/n", &state, &[("job", "build")]).await.unwrap();
///
/// let back = dir.path().join("back");
/// sessions.restore("sessions/p/n", &back).await.unwrap();
/// assert_eq!(std::fs::read_to_string(back.join("session.jsonl")).unwrap(), "turn 1\n");
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct BlobSessions {
    store: Arc<dyn BlobStore>,
}

impl BlobSessions {
    /// Sessions kept in `store`.
    pub fn new(store: Arc<dyn BlobStore>) -> BlobSessions {
        BlobSessions { store }
    }
}

fn key_of(key: &str) -> Result<BlobKey, String> {
    BlobKey::new(key).map_err(|e| e.to_string())
}

#[async_trait]
impl SessionArchive for BlobSessions {
    async fn store(
        &self,
        key: &str,
        dir: &Path,
        attributes: &[(&str, &str)],
    ) -> Result<(), String> {
        let key = key_of(key)?;
        let folder = dir.to_owned();
        // Packing reads the whole folder: off the async threads.
        let bytes = tokio::task::spawn_blocking(move || pack_dir(&folder))
            .await
            .map_err(|e| format!("packing {}: {e}", dir.display()))?
            .map_err(|e| e.to_string())?;
        let meta = attributes
            .iter()
            .fold(BlobMeta::new(), |m, (name, value)| m.with(*name, *value));
        self.store
            .put(&key, bytes, meta)
            .await
            .map_err(|e| e.to_string())
    }

    async fn restore(&self, key: &str, dir: &Path) -> Result<(), String> {
        let blob = key_of(key)?;
        let (bytes, _) = self
            .store
            .get(&blob)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("there is no blob `{key}`"))?;
        let target = dir.to_owned();
        tokio::task::spawn_blocking(move || unpack_into(&bytes, &target))
            .await
            .map_err(|e| format!("unpacking into {}: {e}", dir.display()))?
            .map_err(|e| e.to_string())
    }

    async fn forget(&self, key: &str) -> Result<(), String> {
        let key = key_of(key)?;
        self.store
            .delete(&key)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::InMemoryBlobStore;

    #[tokio::test]
    async fn a_damaged_blob_fails_to_restore_and_stays() {
        let store = Arc::new(InMemoryBlobStore::new());
        let sessions = BlobSessions::new(store.clone());
        let key = BlobKey::new("sessions/p/n").expect("key");
        store
            .put(&key, b"not a tarball".to_vec(), BlobMeta::new())
            .await
            .expect("put");
        let dir = tempfile::tempdir().expect("tempdir");
        let back = dir.path().join("back");
        let err = sessions
            .restore("sessions/p/n", &back)
            .await
            .expect_err("damaged");
        assert!(!err.is_empty());
        assert!(!back.exists() || std::fs::read_dir(&back).expect("dir").next().is_none());
        assert!(
            store.get(&key).await.expect("get").is_some(),
            "the blob stays"
        );
        let missing = sessions.restore("sessions/p/other", &back).await;
        assert!(missing.is_err_and(|e| e.contains("no blob")));
    }
}
