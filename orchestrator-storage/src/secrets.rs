//! `secrets.json`: the values of a plan's secret environment variables, kept apart from the
//! snapshot, the journal and the stored specs, which hold a placeholder instead.
//!
//! Which values: those of every `env` object of the stored JSON whose variable name is secret
//! ([`SecretNames`]: `*_KEY`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, ... and the configured
//! names) or whose value has a well-known token shape. Each distinct value gets a number, and
//! every JSON string equal to it is written as `"[REDACTED secret <nonce>#<n>]"`; reading puts
//! the value back before decoding, so the plan a process loads to run (and `resume` after a
//! crash) has the real values, byte for byte.
//!
//! Order of writes: a value is added to `secrets.json` (atomically, flushed) before any
//! snapshot, journal record or spec that refers to it, and values are never removed or
//! renumbered, so whatever refers to a number finds it. Readers read `secrets.json` after the
//! files that refer to it. The nonce (random per plan) keeps a placeholder from being mistaken
//! for text a plan happens to hold.
//!
//! Cost: only JSON holding a non-empty `"env":{...}` object is examined, so plans without
//! `env` pay a substring search per write.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use memchr::memmem;

use orchestrator_core::redact::SecretNames;
use orchestrator_core::{PlanId, StoreError};
use serde::{Deserialize, Serialize};

use crate::fsutil::{corrupt, read_if_exists, sync_dir, write_atomic};
use crate::stats::{Account, Counters};

/// What an `env` object looks like in compact JSON (an empty one is never serialized).
const ENV_OBJECT: &str = "\"env\":{\"";
/// How every placeholder starts, whatever its plan's nonce.
const ANY_PLACEHOLDER: &str = "\"[REDACTED secret ";

/// The secret values of one plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Secrets {
    /// Random per plan: part of every placeholder.
    nonce: String,
    /// The values, numbered by position.
    values: Vec<String>,
}

impl Secrets {
    /// An empty table with a fresh nonce.
    pub(crate) fn new() -> Secrets {
        let nonce: String = PlanId::random()
            .as_str()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(12)
            .collect();
        Secrets {
            nonce,
            values: Vec::new(),
        }
    }

    /// Reads the table at `path`, `None` if there is none.
    pub(crate) fn read(path: &Path) -> Result<Option<Secrets>, StoreError> {
        let Some(bytes) = read_if_exists(path)? else {
            return Ok(None);
        };
        let table: Secrets = serde_json::from_slice(&bytes)
            .map_err(|e| corrupt(path, format!("not a secrets file: {e}")))?;
        if table.nonce.is_empty() || !table.nonce.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(corrupt(path, "not a secrets file: bad nonce"));
        }
        Ok(Some(table))
    }

    /// Writes the table to `path` atomically (flushed, with its folder, when `sync`).
    pub(crate) fn write(
        &self,
        path: &Path,
        sync: bool,
        counters: &Counters,
    ) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(self).map_err(|e| corrupt(path, e.to_string()))?;
        write_atomic(path, &[&bytes], sync, counters, Account::Other)?;
        if sync {
            if let Some(dir) = path.parent() {
                sync_dir(dir, counters)?;
            }
        }
        Ok(())
    }

    /// `"[REDACTED secret <nonce>#` (the opening quote included).
    fn prefix(&self) -> String {
        format!("\"[REDACTED secret {}#", self.nonce)
    }

    /// The placeholder of value number `n`, as a JSON string.
    fn placeholder(&self, n: usize) -> String {
        format!("{}{n}]\"", self.prefix())
    }

    /// Whether `json` (compact) may hold secret values to hide. A search of the bytes, with
    /// no check that they are UTF-8 first ([`Secrets::hide`] checks): a 10,000-job plan's
    /// 1.85 MB snapshot is searched when it is created and at every compaction.
    pub(crate) fn may_hold_secrets(json: &[u8]) -> bool {
        memmem::find(json, ENV_OBJECT.as_bytes()).is_some()
    }

    /// Replaces the secret values of the `env` objects of `json` (compact JSON text) by
    /// placeholders, numbering new values. `None` when there was nothing to hide. The second
    /// value says whether the table grew (then it must be written before the returned text).
    pub(crate) fn hide(&mut self, json: &[u8], names: &SecretNames) -> (Option<Vec<u8>>, bool) {
        let Ok(text) = std::str::from_utf8(json) else {
            return (None, false);
        };
        let found = secret_values(text, names);
        if found.is_empty() {
            return (None, false);
        }
        let before = self.values.len();
        let mut hidden = text.to_owned();
        for value in found {
            let n = match self.values.iter().position(|v| *v == value) {
                Some(n) => n,
                None => {
                    self.values.push(value.clone());
                    self.values.len() - 1
                }
            };
            // Serializing a string cannot fail; a value that somehow does stays as it is.
            let Ok(token) = serde_json::to_string(&value) else {
                continue;
            };
            hidden = hidden.replace(&token, &self.placeholder(n));
        }
        (Some(hidden.into_bytes()), self.values.len() != before)
    }

    /// `json` with every placeholder replaced by its value. `path` (the file `json` was read
    /// from) names a placeholder this table has no value for.
    pub(crate) fn reveal<'a>(
        &self,
        json: &'a [u8],
        path: &Path,
    ) -> Result<Cow<'a, [u8]>, StoreError> {
        let prefix = self.prefix();
        // The same byte search as `refers`: text without this plan's placeholders (a whole
        // snapshot, on every read of a plan with secrets) is not checked for UTF-8 at all.
        if memmem::find(json, prefix.as_bytes()).is_none() {
            return Ok(Cow::Borrowed(json));
        }
        let Ok(text) = std::str::from_utf8(json) else {
            return Ok(Cow::Borrowed(json));
        };
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(&prefix) {
            out.push_str(&rest[..at]);
            let after = &rest[at + prefix.len()..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            let n = after[..digits].parse::<usize>().ok();
            match (n, after[digits..].starts_with("]\"")) {
                (Some(n), true) => {
                    let value = self.values.get(n).ok_or_else(|| {
                        corrupt(
                            path,
                            format!(
                                "refers to secret #{n}, which secrets.json (holding {}) lacks",
                                self.values.len()
                            ),
                        )
                    })?;
                    let token =
                        serde_json::to_string(value).map_err(|e| corrupt(path, e.to_string()))?;
                    out.push_str(&token);
                    rest = &after[digits + 2..];
                }
                // Not one of ours after all: keep the text.
                _ => {
                    out.push_str(&prefix);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        Ok(Cow::Owned(out.into_bytes()))
    }
}

/// Whether `json` holds placeholders (of any plan): then it cannot be read without its table.
pub(crate) fn refers(json: &[u8]) -> bool {
    memmem::find(json, ANY_PLACEHOLDER.as_bytes()).is_some()
}

/// The error for `file`, which refers to secret values, when its plan has no table.
pub(crate) fn missing_table(file: &Path, what: &str) -> StoreError {
    corrupt(
        file,
        format!("{what} refers to secret values kept in secrets.json, which is missing"),
    )
}

/// Hides the secret values of `json` (compact JSON about to be written to a plan's files)
/// with the plan's table at `path`, adding new values to it (and writing it first). `None`
/// when `json` holds none. The caller holds the plan's write lock (or owns the folder, while
/// creating the plan), so that the table read here is the latest.
pub(crate) fn hide_in(
    path: &Path,
    json: &[u8],
    names: &SecretNames,
    sync: bool,
    counters: &Counters,
) -> Result<Option<Vec<u8>>, StoreError> {
    if !Secrets::may_hold_secrets(json) {
        return Ok(None);
    }
    let mut table = Secrets::read(path)?.unwrap_or_else(Secrets::new);
    let (hidden, grew) = table.hide(json, names);
    if grew {
        table.write(path, sync, counters)?;
    }
    Ok(hidden)
}

/// Puts the secret values back into `json`, read from `file` of a plan whose table is at
/// `path`. Borrowed when `json` refers to none.
pub(crate) fn reveal_in<'a>(
    path: &Path,
    json: &'a [u8],
    file: &Path,
) -> Result<Cow<'a, [u8]>, StoreError> {
    if !refers(json) {
        return Ok(Cow::Borrowed(json));
    }
    match Secrets::read(path)? {
        Some(table) => table.reveal(json, file),
        None => Err(missing_table(file, "it")),
    }
}

/// The secret values of every `env` object in `text` (compact JSON), each once.
fn secret_values(text: &str, names: &SecretNames) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(ENV_OBJECT) {
        // The object starts at the `{` after `"env":` (the pattern ends with `{"`).
        let start = from + at + ENV_OBJECT.len() - 2;
        from = start + 1;
        let mut de = serde_json::Deserializer::from_str(&text[start..]);
        // Not a map of strings (some other field called `env`): nothing to hide there.
        let Ok(env) = <BTreeMap<String, String> as Deserialize>::deserialize(&mut de) else {
            continue;
        };
        for (name, value) in env {
            if names.is_secret_var(&name, &value) && !found.contains(&value) {
                found.push(value);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names() -> SecretNames {
        SecretNames::new().with("DEPLOY_HOOK")
    }

    #[test]
    fn hides_and_reveals_byte_for_byte() {
        let doc = json!({
            "env": {"API_KEY": "sk-1", "HOME": "/home/x"},
            "jobs": [
                {"env": {"DEPLOY_HOOK": "h\"q\\u", "GH_TOKEN": "sk-1"}, "work": "echo sk-1"},
                {"env": {"PLAIN": "sk-abcdefghijklmnopqrstuvwx"}, "task": "sk-1"},
            ],
            "other": {"env": 3},
        });
        let text = serde_json::to_vec(&doc).unwrap_or_default();
        let mut table = Secrets::new();
        let (hidden, grew) = table.hide(&text, &names());
        assert!(grew);
        let hidden = hidden.unwrap_or_default();
        let shown = String::from_utf8_lossy(&hidden).into_owned();
        for secret in ["\"sk-1\"", "h\\\"q", "abcdefghijklmnop"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains("/home/x") && shown.contains("echo sk-1"),
            "{shown}"
        );
        assert_eq!(table.values.len(), 3);
        let back = table
            .reveal(&hidden, Path::new("p"))
            .map(|b| b.into_owned());
        assert_eq!(back.ok(), Some(text.clone()));
        // The same values again: no new numbers.
        let (_, grew) = table.hide(&text, &names());
        assert!(!grew);
    }

    #[test]
    fn nothing_to_hide_costs_no_copy() {
        let mut table = Secrets::new();
        let text = br#"{"env":{"HOME":"/h"},"work":"x"}"#;
        assert_eq!(table.hide(text, &names()), (None, false));
        assert!(!Secrets::may_hold_secrets(br#"{"work":"env"}"#));
        assert!(matches!(
            table.reveal(text, Path::new("p")),
            Ok(Cow::Borrowed(_))
        ));
    }

    #[test]
    fn the_searches_look_at_bytes_and_hiding_checks_the_text() {
        assert!(Secrets::may_hold_secrets(
            br#"{"a":1,"env":{"API_KEY":"v"}}"#
        ));
        assert!(!Secrets::may_hold_secrets(br#"{"env":{}}"#));
        assert!(refers(br#"["[REDACTED secret abc#0]"]"#));
        assert!(!refers(br#"["REDACTED secret abc#0]"]"#));
        // Bytes that are not UTF-8 may match the search, and are then left as they are.
        let bytes = b"\xff{\"env\":{\"API_KEY\":\"v\"}}";
        assert!(Secrets::may_hold_secrets(bytes));
        assert_eq!(Secrets::new().hide(bytes, &names()), (None, false));
    }

    #[test]
    fn a_missing_value_is_damage_naming_the_file() {
        let mut table = Secrets::new();
        let text = br#"{"env":{"API_KEY":"value"}}"#;
        let hidden = table.hide(text, &names()).0.unwrap_or_default();
        let empty = Secrets {
            nonce: table.nonce.clone(),
            values: Vec::new(),
        };
        match empty.reveal(&hidden, Path::new("/x/plan.json")) {
            Err(StoreError::Corrupt { path, message }) => {
                assert_eq!(path, Path::new("/x/plan.json"));
                assert!(message.contains("secret #0"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
