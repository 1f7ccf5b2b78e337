//! [`BlobMeta`]: what is stored beside a blob's bytes, with the checksum that lets hydration
//! notice damage.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{BlobError, BlobKey};

/// The metadata of a blob: free-form text attributes (who parked the session, which CLI,
/// which plan and node, ...) plus the size and SHA-256 of the bytes, which every store fills
/// in on [`put`](super::BlobStore::put) (see [`sealed`](BlobMeta::sealed)) whatever the
/// caller passed.
///
/// ```
/// use orchestrator_storage::blob::{BlobKey, BlobMeta};
///
/// let meta = BlobMeta::new().with("cli", "claude").sealed(b"state");
/// assert_eq!(meta.attribute("cli"), Some("claude"));
/// assert_eq!(meta.size(), 5);
/// let key = BlobKey::new("sessions/a")?;
/// assert!(meta.verify(&key, b"state").is_ok());
/// assert!(meta.verify(&key, b"stale").is_err());
/// # Ok::<(), orchestrator_storage::blob::BlobError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobMeta {
    /// Free-form attributes, sorted by name.
    #[serde(default)]
    attributes: BTreeMap<String, String>,
    /// Length of the bytes.
    #[serde(default)]
    size: u64,
    /// SHA-256 of the bytes, lowercase hex; empty until sealed.
    #[serde(default)]
    sha256: String,
}

impl BlobMeta {
    /// Metadata without attributes.
    pub fn new() -> BlobMeta {
        BlobMeta::default()
    }

    /// With the attribute `name` set to `value` (replacing an earlier value).
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> BlobMeta {
        self.attributes.insert(name.into(), value.into());
        self
    }

    /// The value of the attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.get(name).map(String::as_str)
    }

    /// Every attribute, sorted by name.
    pub fn attributes(&self) -> &BTreeMap<String, String> {
        &self.attributes
    }

    /// The length of the blob in bytes (0 until sealed).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The SHA-256 of the blob, lowercase hex (empty until sealed).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// This metadata describing `bytes`: their size and checksum set. Stores call it on
    /// `put`; an implementation of [`BlobStore`](super::BlobStore) outside this crate should
    /// too.
    pub fn sealed(mut self, bytes: &[u8]) -> BlobMeta {
        self.size = bytes.len() as u64;
        self.sha256 = sha256_hex(bytes);
        self
    }

    /// Whether `bytes` are the ones this metadata was sealed for: a
    /// [`Damaged`](BlobError::Damaged) error naming `key` if their size or checksum differ.
    pub fn verify(&self, key: &BlobKey, bytes: &[u8]) -> Result<(), BlobError> {
        if bytes.len() as u64 != self.size {
            return Err(BlobError::damaged(
                key.as_str(),
                format!("{} bytes stored, {} expected", bytes.len(), self.size),
            ));
        }
        let actual = sha256_hex(bytes);
        if actual != self.sha256 {
            return Err(BlobError::damaged(
                key.as_str(),
                format!("SHA-256 {actual}, {} expected", self.sha256),
            ));
        }
        Ok(())
    }
}

/// The SHA-256 of `bytes` as lowercase hex.
fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            // Writing to a String cannot fail.
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_text() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn sealing_replaces_what_the_caller_set() {
        let forged = BlobMeta {
            attributes: BTreeMap::new(),
            size: 99,
            sha256: "00".into(),
        };
        let meta = forged.sealed(b"x");
        assert_eq!(meta.size(), 1);
        assert_eq!(meta.sha256().len(), 64);
    }

    #[test]
    fn an_unsealed_meta_verifies_no_bytes() {
        let key = BlobKey::new("k").expect("key");
        let err = BlobMeta::new().verify(&key, b"x").expect_err("size");
        assert!(err.to_string().contains("blob k is damaged"), "{err}");
    }
}
