//! The snapshot file (`plan.json`): the plan record as of the start of a journal generation.

use std::path::Path;
use std::sync::Arc;

use orchestrator_core::plan::PlanSpec;
use orchestrator_core::state::{PlanRecord, SCHEMA_VERSION};
use orchestrator_core::StoreError;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::fast_json;
use crate::fsutil::{corrupt, DECODE_THREAD};
use crate::schema;
use crate::secrets::Secrets;
use orchestrator_core::parallel::both;

/// The envelope as builds before [`VERSION`] wrote it (serde's, lists of objects), for tests.
#[cfg(test)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct EnvelopeOut<'a> {
    schema_version: u32,
    generation: u64,
    created_ns: u64,
    record: &'a PlanRecord,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvelopeIn<R> {
    schema_version: u32,
    generation: u64,
    #[serde(default)]
    created_ns: u64,
    record: R,
}

/// The version in the envelope of the snapshots this build writes: its schema version plus
/// two (see [`schema_of`]).
///
/// The first builds wrote the schema version itself, 1, with every job and node as an object;
/// the builds after them wrote the schema version plus one (2), with compact lists (see
/// [`fast_json`]); this build's lists may also hold counts of fresh nodes whose ids are
/// derived. Each refuses a newer version: it reports such a snapshot as of an unsupported
/// version instead of taking what it cannot read for damage.
pub(crate) const VERSION: u32 = SCHEMA_VERSION + 2;

/// The schema version of a snapshot whose envelope says `version` (see [`VERSION`]): 1 and 2
/// are snapshots at schema 1 of earlier builds (which this one reads too), and a later `v`
/// one of schema `v - 2`. (0 is refused.)
pub(crate) fn schema_of(version: u32) -> u32 {
    match version {
        0 | 1 => version,
        2 => 1,
        v => v - 2,
    }
}

/// The JSON of the spec a plan's last snapshot was written with, kept while the record holds
/// that same spec (`Arc`): a compaction rewrites the state, which changes, but encodes the
/// spec, which rarely does (a reshape replaces it), only when it changed. (A 10,000-job spec
/// is 1.2 MB of JSON, encoded again at every compaction before.)
///
/// Cloning shares the bytes: a compaction on its own thread takes a clone.
#[derive(Debug, Default, Clone)]
pub(crate) struct SpecJson(Option<(Arc<PlanSpec>, Arc<Vec<u8>>)>);

impl SpecJson {
    /// The JSON of `spec`, if it is the one last encoded.
    pub(crate) fn of(&self, spec: &Arc<PlanSpec>) -> Option<&Arc<Vec<u8>>> {
        match &self.0 {
            Some((known, json)) if Arc::ptr_eq(known, spec) => Some(json),
            _ => None,
        }
    }
}

/// An encoded snapshot, in the pieces it was encoded in: written piece by piece rather than
/// copied into one buffer first (for a 10,000-node plan, 1.85 MB more to copy, into memory
/// the kernel has to hand over page by page). The spec's piece is shared with [`SpecJson`].
pub(crate) struct Encoded(Text);

enum Text {
    Pieces {
        /// The envelope up to the spec: `{"schemaVersion":…,"record":{"spec":`.
        head: Vec<u8>,
        spec: Arc<Vec<u8>>,
        state: Vec<u8>,
    },
    /// One buffer: the text with its secret values hidden.
    Whole(Vec<u8>),
}

impl Encoded {
    /// The bytes of the file, in order.
    pub(crate) fn pieces(&self) -> Vec<&[u8]> {
        match &self.0 {
            Text::Pieces { head, spec, state } => {
                vec![head, spec.as_slice(), b",\"state\":", state, b"}}"]
            }
            Text::Whole(bytes) => vec![bytes],
        }
    }

    /// The bytes of the file in one buffer.
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.pieces().concat()
    }

    /// Whether some `env` object may hold a secret value (see
    /// [`Secrets::may_hold_secrets`]), piece by piece: no piece ends inside an object key.
    pub(crate) fn may_hold_secrets(&self) -> bool {
        self.pieces().into_iter().any(Secrets::may_hold_secrets)
    }

    /// Hides the secret values of the text's `env` objects with `hide` (which is given the
    /// whole text, and returns it with the values hidden, or `None` when there were none):
    /// only when it may hold some, so a snapshot without any is never copied whole.
    pub(crate) fn hide_secrets(
        &mut self,
        hide: impl FnOnce(&[u8]) -> Result<Option<Vec<u8>>, StoreError>,
    ) -> Result<(), StoreError> {
        if self.may_hold_secrets() {
            if let Some(hidden) = hide(&self.to_vec())? {
                self.0 = Text::Whole(hidden);
            }
        }
        Ok(())
    }
}

/// About the bytes of JSON a job of a spec and a node of a state take (a no-op job ~120, a
/// pending node ~50): the buffers they are encoded into start this large for their count,
/// instead of growing by doubling and copying what they held into new memory each time.
/// Memory reserved and never written costs no more than its address space.
const JOB_JSON: usize = 128;
const NODE_JSON: usize = 64;

/// Serializes a snapshot at the current schema version, reusing (and keeping in `cache`) the
/// JSON of the record's spec.
pub(crate) fn encode(
    record: &PlanRecord,
    generation: u64,
    created_ns: u64,
    cache: &mut SpecJson,
) -> Result<Encoded, serde_json::Error> {
    // A large plan's (the engine's own threshold) spec and state are encoded on two threads
    // when the spec is not cached (see `SpecJson`: at creation, and at the first compaction
    // after a read or a reshape). Smaller halves gain nothing from a second thread on the VMs
    // this is built on (see `both`): a 10,000-node plan's creation took 3.9-4.3 ms with the
    // split (at 2,000 nodes, before) and without.
    let parallel = record.state.nodes.len() >= orchestrator_core::parallel::LARGE_PLAN;
    encode_with(record, generation, created_ns, cache, parallel)
}

/// [`encode`], with the spec and the state encoded on two threads when `parallel` and the
/// spec is not cached: the same bytes every way.
fn encode_with(
    record: &PlanRecord,
    generation: u64,
    created_ns: u64,
    cache: &mut SpecJson,
    parallel: bool,
) -> Result<Encoded, serde_json::Error> {
    // The envelope, with its record's halves encoded on their own.
    let head = format!(
        "{{\"schemaVersion\":{VERSION},\"generation\":{generation},\"createdNs\":{created_ns},\"record\":{{\"spec\":"
    )
    .into_bytes();
    let spec_json = || fast_json::spec(&record.spec, record.spec.jobs.len() * JOB_JSON + 1024);
    let state_json =
        || fast_json::state(&record.state, record.state.nodes.len() * NODE_JSON + 1024);
    if let Some(spec) = cache.of(&record.spec) {
        let spec = spec.clone();
        return Ok(Encoded(Text::Pieces {
            head,
            spec,
            state: state_json()?,
        }));
    }
    let (spec, state) = both(DECODE_THREAD, parallel, spec_json, state_json);
    // The spec's thread panicked (it does not): encoded again, here.
    let (spec, state) = (spec.unwrap_or_else(|_| spec_json())?, state?);
    let spec = Arc::new(spec);
    cache.0 = Some((record.spec.clone(), spec.clone()));
    Ok(Encoded(Text::Pieces { head, spec, state }))
}

/// A snapshot whose envelope has been read and whose record is not decoded yet.
pub(crate) struct Envelope<'a> {
    /// The journal generation whose changes follow this snapshot.
    pub(crate) generation: u64,
    /// Creation time in nanoseconds (orders plans created in the same millisecond).
    pub(crate) created_ns: u64,
    /// The schema version the file was written with (not its envelope's version).
    pub(crate) version: u32,
    body: Body<'a>,
}

enum Body<'a> {
    /// The current schema: the two halves, still as JSON text, their lists compact or (a
    /// snapshot of a build before [`VERSION`]) not: one reader takes both.
    Current {
        spec: &'a RawValue,
        state: &'a RawValue,
    },
    /// An older schema, to upgrade.
    Older(Value),
}

#[derive(Deserialize)]
struct RawRecord<'a> {
    #[serde(borrow)]
    spec: &'a RawValue,
    #[serde(borrow)]
    state: &'a RawValue,
}

/// Reads the envelope of a snapshot read from `path` (a quick pass over the text that finds
/// truncation, garbage and unsupported versions).
pub(crate) fn open<'a>(bytes: &'a [u8], path: &Path) -> Result<Envelope<'a>, StoreError> {
    let raw = serde_json::from_slice::<EnvelopeIn<RawRecord<'a>>>(bytes);
    if let Ok(env) = &raw {
        let version = schema_of(env.schema_version);
        if version == SCHEMA_VERSION {
            return Ok(Envelope {
                generation: env.generation,
                created_ns: env.created_ns,
                version,
                body: Body::Current {
                    spec: env.record.spec,
                    state: env.record.state,
                },
            });
        }
    }
    // Otherwise find out which version it is to give the right error, or to upgrade it.
    let env = serde_json::from_slice::<EnvelopeIn<Value>>(bytes).map_err(|e| {
        let what = if e.is_eof() {
            "truncated plan snapshot"
        } else {
            "not a plan snapshot"
        };
        corrupt(path, format!("{what}: {e}"))
    })?;
    let version = schema_of(env.schema_version);
    schema::check(version, path)?;
    if version == SCHEMA_VERSION {
        let message = match raw {
            Err(e) => format!("invalid plan record: {e}"),
            Ok(_) => "invalid plan record".to_string(),
        };
        return Err(corrupt(path, message));
    }
    // (Only builds before VERSION wrote older schemas: see `schema::RECORD_STEPS` for newer.)
    Ok(Envelope {
        generation: env.generation,
        created_ns: env.created_ns,
        version,
        body: Body::Older(env.record),
    })
}

/// Above this many bytes, the two halves of a record are decoded on two threads.
const PARALLEL_BYTES: usize = 256 * 1024;

impl Envelope<'_> {
    /// Decodes the record, upgrading an older schema.
    pub(crate) fn decode(self, path: &Path) -> Result<PlanRecord, StoreError> {
        let invalid = |half: &str, e: serde_json::Error| {
            corrupt(path, format!("invalid plan record: {half}: {e}"))
        };
        match self.body {
            Body::Current { spec, state } => {
                let parallel = spec.get().len() + state.get().len() > PARALLEL_BYTES;
                let (spec, state) = both(
                    DECODE_THREAD,
                    parallel,
                    || fast_json::read_spec(spec.get()),
                    || fast_json::read_state(state.get()),
                );
                let spec = spec.map_err(|message| corrupt(path, message))?;
                Ok(PlanRecord {
                    spec: Arc::new(spec.map_err(|e| invalid("spec", e))?),
                    state: state.map_err(|e| invalid("state", e))?,
                })
            }
            Body::Older(value) => {
                let value =
                    schema::upgrade_record(value, self.version).map_err(|e| corrupt(path, e))?;
                serde_json::from_value(value).map_err(|e| {
                    corrupt(
                        path,
                        format!(
                            "plan record of schema version {} does not upgrade: {e}",
                            self.version
                        ),
                    )
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::ids::PlanId;
    use orchestrator_core::plan::{JobSpec, PlanGraph, WorkSpec};

    /// `bytes` read as a snapshot.
    fn read(bytes: &[u8]) -> Result<PlanRecord, StoreError> {
        open(bytes, Path::new("p")).and_then(|e| e.decode(Path::new("p")))
    }

    #[test]
    fn every_way_of_encoding_reads_back_and_old_snapshots_still_read() {
        let mut spec = PlanSpec::new("p");
        for i in 0..5 {
            spec = spec.job(JobSpec::new(format!("j{i}"), "T", WorkSpec::shell("true")));
        }
        spec = spec.job(JobSpec::new("env", "T", WorkSpec::agent("do it")).env("K", "v"));
        let nodes = PlanGraph::build(&spec).map(|g| g.node_count()).unwrap_or(0);
        let mut record = PlanRecord::new(PlanId::random(), spec, "/repo".into(), nodes, 7);
        // A snapshot of a build before VERSION: serde's objects at envelope version 1.
        let old = |r: &PlanRecord| {
            serde_json::to_vec(&EnvelopeOut {
                schema_version: 1,
                generation: 3,
                created_ns: u64::MAX,
                record: r,
            })
            .unwrap_or_default()
        };
        assert_eq!(read(&old(&record)).ok().as_ref(), Some(&record));
        let mut cache = SpecJson::default();
        let fresh = encode(&record, 3, u64::MAX, &mut cache)
            .map(|e| e.to_vec())
            .unwrap_or_default();
        assert!(fresh.len() < old(&record).len(), "compact lists");
        let envelope = open(&fresh, Path::new("p")).ok();
        assert_eq!(
            envelope.map(|e| (e.generation, e.created_ns, e.version)),
            Some((3, u64::MAX, SCHEMA_VERSION))
        );
        assert_eq!(read(&fresh).ok().as_ref(), Some(&record));
        // A snapshot of the builds before counts of fresh nodes: envelope version 2, every
        // pending node's id written out.
        let text = String::from_utf8_lossy(&fresh).into_owned();
        let count = format!(r#""nodes":[{}]"#, record.state.nodes.len());
        assert!(text.contains(&count), "{text}");
        let ids: Vec<String> = (record.state.nodes.iter())
            .map(|n| format!("\"{}\"", n.id))
            .collect();
        let listed = format!(r#""nodes":[{}]"#, ids.join(","));
        let before = text
            .replacen(
                &format!("\"schemaVersion\":{VERSION}"),
                "\"schemaVersion\":2",
                1,
            )
            .replacen(&count, &listed, 1);
        assert_eq!(read(before.as_bytes()).ok().as_ref(), Some(&record));
        assert!(cache.of(&record.spec).is_some(), "the spec's JSON is kept");
        // The state changes, the spec stays: its JSON is reused.
        record.state.paused = true;
        let cached = encode(&record, 3, u64::MAX, &mut cache)
            .map(|e| e.to_vec())
            .unwrap_or_default();
        assert_ne!(cached, fresh);
        assert_eq!(read(&cached).ok().as_ref(), Some(&record));
        // A replaced spec (a reshape) is encoded again; on two threads, the same bytes.
        let mut other = (*record.spec).clone();
        other.name = "renamed".into();
        record.spec = Arc::new(other);
        assert!(cache.of(&record.spec).is_none());
        let parallel = encode_with(&record, 3, u64::MAX, &mut cache, true)
            .map(|e| e.to_vec())
            .unwrap_or_default();
        let serial = encode_with(&record, 3, u64::MAX, &mut SpecJson::default(), false)
            .map(|e| e.to_vec())
            .unwrap_or_default();
        assert_eq!(parallel, serial);
        assert!(String::from_utf8_lossy(&parallel).contains("renamed"));
        assert_eq!(read(&parallel).ok().as_ref(), Some(&record));
    }

    #[test]
    fn damaged_compact_lists_are_named_as_such() {
        let spec = PlanSpec::new("p").job(JobSpec::new("a", "T", WorkSpec::shell("true")));
        let record = PlanRecord::new(PlanId::random(), spec, "/repo".into(), 1, 7);
        let good = encode(&record, 0, 1, &mut SpecJson::default())
            .map(|e| String::from_utf8_lossy(&e.to_vec()).into_owned())
            .unwrap_or_default();
        assert!(good.contains(r#""jobs":[["a","T","true"]]"#), "{good}");
        // One fresh node whose id is derived: its count.
        assert!(good.contains(r#""nodes":[1]"#), "{good}");
        for (from, to, says) in [
            (
                r#"[["a","T","true"]]"#,
                r#"[["a","T"]]"#,
                "invalid length 2",
            ),
            (
                r#"[["a","T","true"]]"#,
                r#"[["a","T",7]]"#,
                "invalid type: integer",
            ),
            (
                r#"[["a","T","true"]]"#,
                r#"[true]"#,
                "a job: an object, or an array",
            ),
            (
                r#""nodes":[1]"#,
                r#""nodes":[true]"#,
                "a node: an object, the id of a pending node, or a count",
            ),
            (
                r#""nodes":[1]"#,
                r#""nodes":[99999999999]"#,
                "more than a plan can hold",
            ),
            (
                r#""nodes":[1]"#,
                r#""nodes":[-1]"#,
                "invalid type: integer `-1`",
            ),
        ] {
            let bad = good.replacen(from, to, 1);
            assert_ne!(bad, good);
            match read(bad.as_bytes()) {
                Err(StoreError::Corrupt { path, message }) => {
                    assert_eq!(path, Path::new("p"));
                    assert!(message.contains(says), "{message}");
                }
                other => panic!("{to}: {other:?}"),
            }
        }
    }
}
