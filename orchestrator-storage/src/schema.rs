//! Schema versions of stored state and the migrations between them.
//!
//! Snapshots and journals record the [`SCHEMA_VERSION`] they were written with. Reading an
//! older version upgrades each stored value step by step (`n -> n + 1`) before decoding it;
//! the next compaction rewrites the plan at the current version. A newer version than this
//! build knows is refused with [`StoreError::SchemaVersion`] naming the file.

use std::path::Path;

use orchestrator_core::state::{StateChange, SCHEMA_VERSION};
use orchestrator_core::StoreError;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One upgrade step: a value of version `n` to version `n + 1`.
type Step = fn(Value) -> Result<Value, String>;

/// `RECORD_STEPS[i]` upgrades a stored `PlanRecord` from version `i + 1` to `i + 2`.
///
/// A snapshot's lists may be compact from schema 1 on (see `fast_json`): the first step
/// added here must be given its jobs and nodes as objects, which `snapshot::open` does not do
/// yet for an older schema (there is none).
const RECORD_STEPS: &[Step] = &[];

/// `CHANGE_STEPS[i]` upgrades one stored `StateChange` from version `i + 1` to `i + 2`.
const CHANGE_STEPS: &[Step] = &[];

// Raising SCHEMA_VERSION in orchestrator-core without adding the matching steps above
// breaks this build on purpose: old plans must stay readable.
const _: () = assert!(
    RECORD_STEPS.len() + 1 == SCHEMA_VERSION as usize
        && CHANGE_STEPS.len() + 1 == SCHEMA_VERSION as usize
);

/// The schema version of a journal whose header says `version` (a snapshot's is
/// [`crate::snapshot::schema_of`]).
///
/// Builds before the journal's binary records wrote the schema version itself, 1, and refuse
/// a newer one. So a version of 1 is a file of those builds (at schema 1), and any later
/// version `v` a file of the current format at schema `v - 1` (see
/// [`crate::journal::VERSION`]).
pub(crate) fn of_format(version: u32) -> u32 {
    match version {
        // 0 is refused; 1 is a file of a build before the current formats.
        0 | 1 => version,
        v => v - 1,
    }
}

/// Refuses versions this build cannot read (0, or newer than [`SCHEMA_VERSION`]).
pub(crate) fn check(found: u32, path: &Path) -> Result<(), StoreError> {
    if found == 0 || found > SCHEMA_VERSION {
        return Err(StoreError::SchemaVersion {
            path: path.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Upgrades a stored plan record of version `from` to the current version.
pub(crate) fn upgrade_record(value: Value, from: u32) -> Result<Value, String> {
    upgrade(RECORD_STEPS, value, from)
}

/// Upgrades one stored change of version `from` to the current version.
pub(crate) fn upgrade_change(value: Value, from: u32) -> Result<Value, String> {
    upgrade(CHANGE_STEPS, value, from)
}

/// Decodes one stored change (its JSON) of schema `version`, upgrading an older one.
pub(crate) fn decode_change(json: &[u8], version: u32) -> Result<StateChange, String> {
    decode(json, version, upgrade_change)
}

/// Decodes a stored batch of changes (a JSON array) of schema `version`, upgrading older ones.
pub(crate) fn decode_changes(json: &[u8], version: u32) -> Result<Vec<StateChange>, String> {
    decode(json, version, |batch, from| match batch {
        Value::Array(changes) => changes
            .into_iter()
            .map(|c| upgrade_change(c, from))
            .collect::<Result<_, _>>()
            .map(Value::Array),
        _ => Err("not a JSON array".to_string()),
    })
}

/// Decodes `json` of schema `version`: directly when current, else through `upgrade`.
fn decode<T: DeserializeOwned>(
    json: &[u8],
    version: u32,
    upgrade: impl FnOnce(Value, u32) -> Result<Value, String>,
) -> Result<T, String> {
    if version == SCHEMA_VERSION {
        return serde_json::from_slice(json).map_err(|e| e.to_string());
    }
    let value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    serde_json::from_value(upgrade(value, version)?).map_err(|e| e.to_string())
}

fn upgrade(steps: &[Step], mut value: Value, from: u32) -> Result<Value, String> {
    let first = (from as usize).saturating_sub(1);
    for (i, step) in steps.iter().enumerate().skip(first) {
        value = step(value).map_err(|e| format!("upgrading from version {}: {e}", i + 1))?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rename_task(mut v: Value) -> Result<Value, String> {
        let map = v.as_object_mut().ok_or("not an object")?;
        let title = map.remove("title").ok_or("no title field")?;
        map.insert("task".into(), title);
        Ok(v)
    }

    fn add_group(mut v: Value) -> Result<Value, String> {
        v["group"] = json!("default");
        Ok(v)
    }

    #[test]
    fn steps_apply_in_order_from_the_stored_version() {
        let steps: &[Step] = &[rename_task, add_group];
        let v1 = json!({"title": "t"});
        assert_eq!(
            upgrade(steps, v1, 1),
            Ok(json!({"task": "t", "group": "default"}))
        );
        let v2 = json!({"task": "t"});
        assert_eq!(
            upgrade(steps, v2, 2),
            Ok(json!({"task": "t", "group": "default"}))
        );
        let current = json!({"task": "t", "group": "g"});
        assert_eq!(upgrade(steps, current.clone(), 3), Ok(current));
        let broken = upgrade(steps, json!({"x": 1}), 1);
        assert_eq!(
            broken,
            Err("upgrading from version 1: no title field".to_string())
        );
    }

    #[test]
    fn unknown_versions_are_refused_naming_the_file() {
        let path = Path::new("/x/plan.json");
        assert!(check(SCHEMA_VERSION, path).is_ok());
        for bad in [0, SCHEMA_VERSION + 1] {
            match check(bad, path) {
                Err(StoreError::SchemaVersion {
                    path: p,
                    found,
                    supported,
                }) => {
                    assert_eq!(p, path);
                    assert_eq!(found, bad);
                    assert_eq!(supported, SCHEMA_VERSION);
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
