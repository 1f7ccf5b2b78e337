//! The JSON stored in the `plans.state`, `plans.summary` and `plan_batches.changes` columns,
//! with the schema version each was written with ([`SCHEMA_VERSION`]); older versions are
//! upgraded by the same steps as the file store's (`crate::schema`).

use std::path::Path;

use orchestrator_core::repository::PlanSummary;
use orchestrator_core::state::{PlanRecord, StateChange, SCHEMA_VERSION};
use orchestrator_core::{PlanId, StoreError};
use serde_json::Value;

use super::error::corrupt;
use crate::schema;

/// The version stored next to what this build writes.
pub(crate) fn version() -> i32 {
    i32::try_from(SCHEMA_VERSION).unwrap_or(i32::MAX)
}

fn unserializable(plan: &PlanId, what: &str, e: serde_json::Error) -> StoreError {
    StoreError::Rejected {
        plan: plan.clone(),
        message: format!("cannot serialize the {what}: {e}"),
    }
}

/// A plan record as JSON text.
pub(crate) fn record(record: &PlanRecord) -> Result<String, StoreError> {
    serde_json::to_string(record).map_err(|e| unserializable(&record.state.id, "plan", e))
}

/// A batch of changes as JSON text.
pub(crate) fn changes(plan: &PlanId, changes: &[StateChange]) -> Result<String, StoreError> {
    serde_json::to_string(changes).map_err(|e| unserializable(plan, "changes", e))
}

/// The summary of a record as JSON text, with its status on its own (for the status column).
pub(crate) fn summary(record: &PlanRecord) -> Result<(String, String), StoreError> {
    let summary = PlanSummary::of(record);
    let bad = |e| unserializable(&record.state.id, "summary", e);
    let status = match serde_json::to_value(summary.status).map_err(bad)? {
        Value::String(s) => s,
        other => other.to_string(),
    };
    Ok((serde_json::to_string(&summary).map_err(bad)?, status))
}

/// A stored summary.
pub(crate) fn read_summary(json: &str, path: &Path) -> Result<PlanSummary, StoreError> {
    serde_json::from_str(json).map_err(|e| corrupt(path, format!("not a plan summary: {e}")))
}

fn stored_version(found: i32, path: &Path) -> Result<u32, StoreError> {
    let found = u32::try_from(found).unwrap_or(0);
    schema::check(found, path)?;
    Ok(found)
}

/// A stored plan record of schema version `found`.
pub(crate) fn read_record(json: &str, found: i32, path: &Path) -> Result<PlanRecord, StoreError> {
    let found = stored_version(found, path)?;
    if found == SCHEMA_VERSION {
        return serde_json::from_str(json)
            .map_err(|e| corrupt(path, format!("invalid plan record: {e}")));
    }
    let value: Value =
        serde_json::from_str(json).map_err(|e| corrupt(path, format!("not JSON: {e}")))?;
    let value = schema::upgrade_record(value, found).map_err(|e| corrupt(path, e))?;
    serde_json::from_value(value).map_err(|e| {
        corrupt(
            path,
            format!("plan record of schema version {found} does not upgrade: {e}"),
        )
    })
}

/// A stored batch of changes of schema version `found`.
pub(crate) fn read_changes(
    json: &str,
    found: i32,
    path: &Path,
) -> Result<Vec<StateChange>, StoreError> {
    let found = stored_version(found, path)?;
    if found == SCHEMA_VERSION {
        return serde_json::from_str(json)
            .map_err(|e| corrupt(path, format!("invalid journal batch: {e}")));
    }
    let values: Vec<Value> =
        serde_json::from_str(json).map_err(|e| corrupt(path, format!("not a JSON array: {e}")))?;
    values
        .into_iter()
        .map(|v| {
            let v = schema::upgrade_change(v, found).map_err(|e| corrupt(path, e))?;
            serde_json::from_value(v).map_err(|e| {
                corrupt(
                    path,
                    format!("change of schema version {found} does not upgrade: {e}"),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::plan::{JobSpec, PlanSpec, WorkSpec};
    use std::path::PathBuf;

    fn plan() -> PlanRecord {
        let spec = PlanSpec::new("p").job(JobSpec::new("a", "A", WorkSpec::shell("true")));
        PlanRecord::new(PlanId::from("p1"), spec, PathBuf::from("/r"), 2, 5)
    }

    #[test]
    fn records_changes_and_summaries_round_trip() {
        let path = Path::new("postgres://h:1/db/s/plans/p1");
        let r = plan();
        let back = read_record(&record(&r).unwrap_or_default(), version(), path);
        assert_eq!(back.ok(), Some(r.clone()));
        let batch = vec![StateChange::Paused { at: 9 }];
        let json = changes(&r.state.id, &batch).unwrap_or_default();
        assert_eq!(read_changes(&json, version(), path).ok(), Some(batch));
        let (json, status) = summary(&r).unwrap_or_default();
        assert_eq!(status, "pending");
        assert_eq!(read_summary(&json, path).ok(), Some(PlanSummary::of(&r)));
    }

    #[test]
    fn newer_versions_and_garbage_are_refused_naming_the_row() {
        let path = Path::new("postgres://h:1/db/s/plans/p1");
        match read_record("{}", version() + 1, path) {
            Err(StoreError::SchemaVersion { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read_changes("[{\"nope\":1}]", version(), path),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(matches!(
            read_summary("[]", path),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
