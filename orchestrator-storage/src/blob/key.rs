//! [`BlobKey`]: the checked name of a blob.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::BlobError;

/// The longest key accepted, in bytes (well under every object store's limit).
pub const MAX_KEY_LEN: usize = 1024;

/// The name of a blob: relative, `/`-separated segments of `A-Z a-z 0-9 . _ -`, none of them
/// empty, `.` or `..`, at most [`MAX_KEY_LEN`] bytes in all.
///
/// The rules make a key the same path on every backend (no escaping, no case of `a//b`
/// meaning `a/b` on one store and not on another) and keep it inside its store's folder.
///
/// ```
/// use orchestrator_storage::blob::BlobKey;
///
/// let key = BlobKey::new("sessions/plan-1/node.7")?;
/// assert_eq!(key.as_str(), "sessions/plan-1/node.7");
/// assert_eq!(key.join("state")?.as_str(), "sessions/plan-1/node.7/state");
///
/// let bad = BlobKey::new("sessions/../etc").unwrap_err();
/// assert!(bad.to_string().contains("sessions/../etc"));
/// # Ok::<(), orchestrator_storage::blob::BlobError>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BlobKey(String);

impl BlobKey {
    /// Checks `key` against the rules; the error names the key and the rule it breaks.
    pub fn new(key: impl Into<String>) -> Result<BlobKey, BlobError> {
        let key = key.into();
        match problem(&key) {
            None => Ok(BlobKey(key)),
            Some(reason) => Err(BlobError::InvalidKey { key, reason }),
        }
    }

    /// The key below this one: `self/segment` (`segment` may hold several segments).
    pub fn join(&self, segment: &str) -> Result<BlobKey, BlobError> {
        BlobKey::new(format!("{}/{segment}", self.0))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this key is `prefix` itself or lies below it (`a/b` is under `a`, `a/bc` is
    /// not); every key is under the empty prefix.
    pub fn is_under(&self, prefix: &KeyPrefix) -> bool {
        match prefix.0.as_deref() {
            None => true,
            Some(p) => {
                self.0 == p
                    || (self.0.len() > p.len()
                        && self.0.starts_with(p)
                        && self.0.as_bytes().get(p.len()) == Some(&b'/'))
            }
        }
    }
}

/// Which rule `key` breaks, if any.
fn problem(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some("it is empty".into());
    }
    if key.len() > MAX_KEY_LEN {
        return Some(format!("it is longer than {MAX_KEY_LEN} bytes"));
    }
    if key.starts_with('/') {
        return Some("it starts with '/' (keys are relative)".into());
    }
    if key.ends_with('/') {
        return Some("it ends with '/'".into());
    }
    for segment in key.split('/') {
        if segment.is_empty() {
            return Some("it has an empty segment ('//')".into());
        }
        if segment == "." || segment == ".." {
            return Some(format!("it has a {segment:?} segment"));
        }
        if let Some(c) = segment.chars().find(|c| !allowed(*c)) {
            return Some(format!(
                "it has the character {c:?} (allowed: A-Z a-z 0-9 . _ - and '/' between segments)"
            ));
        }
    }
    None
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

impl fmt::Display for BlobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for BlobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobKey({:?})", self.0)
    }
}

impl AsRef<str> for BlobKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for BlobKey {
    type Err = BlobError;

    fn from_str(key: &str) -> Result<BlobKey, BlobError> {
        BlobKey::new(key)
    }
}

impl TryFrom<String> for BlobKey {
    type Error = BlobError;

    fn try_from(key: String) -> Result<BlobKey, BlobError> {
        BlobKey::new(key)
    }
}

impl TryFrom<&str> for BlobKey {
    type Error = BlobError;

    fn try_from(key: &str) -> Result<BlobKey, BlobError> {
        BlobKey::new(key)
    }
}

impl From<BlobKey> for String {
    fn from(key: BlobKey) -> String {
        key.0
    }
}

/// A checked [`list`](super::BlobStore::list) prefix: empty (every key) or a key, with one
/// trailing `/` allowed (`a/` is the same prefix as `a`).
///
/// ```
/// use orchestrator_storage::blob::{BlobKey, KeyPrefix};
///
/// let prefix = KeyPrefix::new("sessions/")?;
/// assert!(BlobKey::new("sessions/p1")?.is_under(&prefix));
/// assert!(!BlobKey::new("sessions-old/p1")?.is_under(&prefix));
/// assert!(KeyPrefix::new("")?.as_key().is_none());
/// # Ok::<(), orchestrator_storage::blob::BlobError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPrefix(Option<String>);

impl KeyPrefix {
    /// Checks `prefix`; the error names it and the rule it breaks.
    pub fn new(prefix: &str) -> Result<KeyPrefix, BlobError> {
        let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
        if trimmed.is_empty() && prefix.len() <= 1 {
            return Ok(KeyPrefix(None));
        }
        match problem(trimmed) {
            None => Ok(KeyPrefix(Some(trimmed.to_owned()))),
            Some(reason) => Err(BlobError::InvalidKey {
                key: prefix.to_owned(),
                reason: format!("as a list prefix, {reason}"),
            }),
        }
    }

    /// The prefix as text, without a trailing `/` (`""` for the empty prefix).
    pub fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or("")
    }

    /// The prefix as a key, `None` for the empty prefix.
    pub fn as_key(&self) -> Option<BlobKey> {
        self.0.clone().map(BlobKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        for good in ["a", "a/b", "A-z_0.9/x", ".hidden", "a..b", "x/.y"] {
            assert!(BlobKey::new(good).is_ok(), "{good}");
        }
        for bad in [
            "", "/a", "a/", "a//b", "..", "a/../b", "./a", "a b", "a\\b", "é", "a:b",
        ] {
            let err = BlobKey::new(bad).expect_err(bad);
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        assert!(BlobKey::new("a".repeat(MAX_KEY_LEN + 1)).is_err());
    }

    #[test]
    fn prefixes_match_on_segments() {
        let key = BlobKey::new("a/b/c").expect("key");
        for yes in ["", "/", "a", "a/", "a/b", "a/b/", "a/b/c"] {
            assert!(key.is_under(&KeyPrefix::new(yes).expect(yes)), "{yes}");
        }
        for no in ["a/b/c/d", "a/bc", "a/b/c.d", "b"] {
            assert!(!key.is_under(&KeyPrefix::new(no).expect(no)), "{no}");
        }
        assert!(KeyPrefix::new("a//").is_err());
        assert!(KeyPrefix::new("//").is_err());
    }

    #[test]
    fn serde_checks_keys() {
        let key: BlobKey = serde_json::from_str("\"a/b\"").expect("valid");
        assert_eq!(serde_json::to_string(&key).expect("json"), "\"a/b\"");
        assert!(serde_json::from_str::<BlobKey>("\"../a\"").is_err());
    }
}
