//! Per-attempt specs: `specs/<nodeId>/attempts/<n>/{work,prechecks,postchecks}.json`, with an
//! agent's instructions also written out as `<kind>.md` for people to read.
//!
//! Secret env values are not written here but kept in the plan's `secrets.json` (see
//! [`crate::secrets`]); the files hold placeholders, replaced by the values on load.
//!
//! The JSON files are authoritative. They are written atomically (a crash leaves the old file
//! or the new one) but not flushed to disk: they are a record for inspection, while the specs
//! that drive execution live in the plan's durable state.

use std::path::Path;

use orchestrator_core::plan::WorkSpec;
use orchestrator_core::repository::AttemptSpecs;
use orchestrator_core::StoreError;

use crate::fsutil::{
    corrupt, create_private_dir_all, read_if_exists, remove_if_exists, write_atomic,
};
use crate::secrets::reveal_in;
use crate::stats::{Account, Counters};

fn kinds(specs: &AttemptSpecs) -> [(&'static str, Option<&WorkSpec>); 3] {
    [
        ("work", specs.work.as_ref()),
        ("prechecks", specs.prechecks.as_ref()),
        ("postchecks", specs.postchecks.as_ref()),
    ]
}

/// Hides the secret values of a spec's compact JSON (`None`: it holds none).
pub(crate) type Hide<'a> = &'a dyn Fn(&[u8]) -> Result<Option<Vec<u8>>, StoreError>;

/// Writes the specs of one attempt into `dir`, replacing whatever was there.
pub(crate) fn save(
    dir: &Path,
    specs: &AttemptSpecs,
    counters: &Counters,
    hide: Hide<'_>,
) -> Result<(), StoreError> {
    create_private_dir_all(dir)?;
    for (kind, spec) in kinds(specs) {
        let json = dir.join(format!("{kind}.json"));
        let md = dir.join(format!("{kind}.md"));
        let Some(spec) = spec else {
            remove_if_exists(&json)?;
            remove_if_exists(&md)?;
            continue;
        };
        let invalid = |e: serde_json::Error| corrupt(&json, e.to_string());
        let compact = serde_json::to_vec(spec).map_err(invalid)?;
        let bytes = match hide(&compact)? {
            // Pretty-printing keeps every string as it is, placeholders included.
            Some(hidden) => serde_json::from_slice::<serde_json::Value>(&hidden)
                .and_then(|v| serde_json::to_vec_pretty(&v))
                .map_err(invalid)?,
            None => serde_json::to_vec_pretty(spec).map_err(invalid)?,
        };
        write_atomic(&json, &[&bytes], false, counters, Account::Other)?;
        match spec {
            WorkSpec::Agent(agent) if agent.instructions.is_some() => {
                let text = agent.instructions.as_deref().unwrap_or_default();
                write_atomic(&md, &[text.as_bytes()], false, counters, Account::Other)?;
            }
            _ => remove_if_exists(&md)?,
        }
    }
    Ok(())
}

/// Reads the specs of one attempt from `dir` (empty if none were saved), with the secret
/// values of the plan's table at `secrets` put back.
pub(crate) fn load(dir: &Path, secrets: &Path) -> Result<AttemptSpecs, StoreError> {
    let read = |kind: &str| -> Result<Option<WorkSpec>, StoreError> {
        let path = dir.join(format!("{kind}.json"));
        match read_if_exists(&path)? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&reveal_in(secrets, &bytes, &path)?)
                .map(Some)
                .map_err(|e| corrupt(&path, format!("not a work spec: {e}"))),
        }
    };
    Ok(AttemptSpecs {
        work: read("work")?,
        prechecks: read("prechecks")?,
        postchecks: read("postchecks")?,
    })
}
