//! The journal file: a header, then one checksummed, length-prefixed record per `append`.
//!
//! ```text
//! header  "ORCHJRNL" | version u32 LE | generation u64 LE | crc32 of the 20 bytes before
//! record  payload length u32 LE | crc32 of the payload u32 LE | payload
//! payload JSON array of changes (starts with `[`) | codec::BINARY, changes (see crate::codec)
//! ```
//!
//! Records are binary unless a change of the batch may hold secret values: those batches go
//! as JSON, the form [`crate::secrets`] hides values in. Journals written before the binary
//! form existed hold only JSON records, and still read; both kinds mix freely in a journal.
//! The header's version keeps older builds from reading binary records (see [`VERSION`]).
//!
//! A record is written with one `write` and flushed before `append` returns. After a crash the
//! last record may be torn (short, or with a bad checksum): reading stops there, so a reader
//! sees every batch completely or not at all, and the next writer truncates the torn bytes.
//! A bad record that is followed by a good one is not a torn write but damage, and is
//! reported as such.

use std::path::Path;

use orchestrator_core::state::{StateChange, SCHEMA_VERSION};
use orchestrator_core::StoreError;

use crate::codec;
use crate::fsutil::corrupt;
use crate::schema;
use crate::secrets::Secrets;

const MAGIC: &[u8; 8] = b"ORCHJRNL";
/// Bytes in the header.
pub(crate) const HEADER_LEN: u64 = 24;
/// Bytes before a record's payload.
pub(crate) const RECORD_HEAD: usize = 8;

/// The version in the header of the journals this build writes: its schema version plus one.
///
/// Builds before the binary records wrote the schema version itself, 1, and refuse a newer
/// one: they report these journals as of an unsupported version instead of taking their
/// binary records for damage. So a header version of 1 is a journal of those builds (JSON
/// records at schema 1), and any later version `v` one of schema `v - 1`. Appending to an
/// older journal compacts it first (see `Live::append`), so no binary record is written
/// under an older header.
pub(crate) const VERSION: u32 = SCHEMA_VERSION + 1;

/// The header of a journal of `generation`, at [`VERSION`].
pub(crate) fn header(generation: u64) -> [u8; HEADER_LEN as usize] {
    header_at(VERSION, generation)
}

fn header_at(version: u32, generation: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&version.to_le_bytes());
    h[12..20].copy_from_slice(&generation.to_le_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// One record holding `changes`, and whether its payload is JSON (which then may hold
/// secret values to hide, see [`crate::secrets`]) rather than binary.
pub(crate) fn encode(changes: &[StateChange]) -> Result<(Vec<u8>, bool), String> {
    let mut buf = vec![0u8; RECORD_HEAD];
    let json = !codec::encode(&mut buf, changes)?;
    if json {
        serde_json::to_writer(&mut buf, changes).map_err(|e| e.to_string())?;
    }
    let payload_len = buf.len() - RECORD_HEAD;
    let len = u32::try_from(payload_len)
        .map_err(|_| format!("a batch of {payload_len} bytes is too large for one record"))?;
    let crc = crc32fast::hash(&buf[RECORD_HEAD..]);
    buf[..4].copy_from_slice(&len.to_le_bytes());
    buf[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok((buf, json))
}

/// The JSON record of `changes`, as journals were written before the binary form (and are
/// still for batches that may hold secrets).
#[cfg(test)]
pub(crate) fn encode_json(changes: &[StateChange]) -> Result<Vec<u8>, String> {
    let json = serde_json::to_vec(changes).map_err(|e| e.to_string())?;
    frame(&json)
}

/// One record holding `payload` (the JSON of a batch with its secrets hidden).
pub(crate) fn frame(payload: &[u8]) -> Result<Vec<u8>, String> {
    let len = u32::try_from(payload.len()).map_err(|_| {
        format!(
            "a batch of {} bytes is too large for one record",
            payload.len()
        )
    })?;
    let mut buf = Vec::with_capacity(RECORD_HEAD + payload.len());
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    buf.extend_from_slice(payload);
    Ok(buf)
}

/// What a journal holds.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// The version in its header (see [`VERSION`]).
    pub(crate) version: u32,
    /// The batches, in order.
    pub(crate) batches: Vec<Vec<StateChange>>,
    /// Bytes up to the end of the last whole record (the header included).
    pub(crate) valid_len: u64,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

/// A whole record at `at` with a good checksum: its payload's range.
fn record_at(bytes: &[u8], at: usize) -> Option<(usize, usize, bool)> {
    let len = u32_at(bytes, at)? as usize;
    let crc = u32_at(bytes, at + 4)?;
    let start = at + RECORD_HEAD;
    let payload = bytes.get(start..start.checked_add(len)?)?;
    Some((start, start + len, crc32fast::hash(payload) == crc))
}

/// Reads a journal of `generation` read from `path`; the plan's `secrets` (if it has any) put
/// the values of secret variables back into the records.
///
/// Every journal is created whole, header included (atomically, before its snapshot names
/// it), so an empty file is damage: read as "no changes", it would turn a plan that ran back
/// into a fresh one, and `resume` would run every job and merge onto the target again.
pub(crate) fn scan(
    bytes: &[u8],
    generation: u64,
    path: &Path,
    secrets: Option<&Secrets>,
) -> Result<Scan, StoreError> {
    if bytes.is_empty() {
        return Err(corrupt(
            path,
            "empty journal: the changes recorded since the snapshot are lost, so the plan's \
             state is unknown (restore the file, or delete the plan)",
        ));
    }
    let head = bytes
        .get(..HEADER_LEN as usize)
        .ok_or_else(|| corrupt(path, "truncated journal header"))?;
    if &head[..8] != MAGIC {
        return Err(corrupt(path, "not a journal file (bad magic bytes)"));
    }
    if u32_at(head, 20) != Some(crc32fast::hash(&head[..20])) {
        return Err(corrupt(path, "journal header checksum mismatch"));
    }
    let version = u32_at(head, 8).unwrap_or(0);
    let schema = schema::of_format(version);
    schema::check(schema, path)?;
    let mut stored_gen = [0u8; 8];
    stored_gen.copy_from_slice(&head[12..20]);
    let stored_gen = u64::from_le_bytes(stored_gen);
    if stored_gen != generation {
        return Err(corrupt(
            path,
            format!("journal of generation {stored_gen} where {generation} was expected"),
        ));
    }
    let mut scan = Scan {
        version,
        batches: Vec::new(),
        valid_len: HEADER_LEN,
    };
    let mut at = HEADER_LEN as usize;
    while at < bytes.len() {
        let record = scan.batches.len() + 1;
        match record_at(bytes, at) {
            Some((start, end, true)) => {
                let payload = &bytes[start..end];
                let batch = decode(payload, schema, secrets, path, (record, at))?;
                scan.batches.push(batch);
                at = end;
                scan.valid_len = end as u64;
            }
            Some((_, end, false)) if matches!(record_at(bytes, end), Some((_, _, true))) => {
                return Err(corrupt(
                    path,
                    format!(
                        "record {record} at byte {at} has a bad checksum and is followed by more records"
                    ),
                ));
            }
            // A torn last record: the batch it held was never acknowledged.
            _ => break,
        }
    }
    Ok(scan)
}

/// The batch in the payload of the journal's `record`th record, at byte `at`, of schema
/// `version`; the plan's `secrets` put the values of secret variables back into JSON ones.
fn decode(
    payload: &[u8],
    version: u32,
    secrets: Option<&Secrets>,
    path: &Path,
    (record, at): (usize, usize),
) -> Result<Vec<StateChange>, StoreError> {
    let batch = if payload.first() == Some(&codec::BINARY) {
        // Binary records never hold placeholders: batches with secrets go as JSON.
        codec::decode(payload, version)
    } else {
        let payload = match secrets {
            Some(secrets) => secrets.reveal(payload, path)?,
            None if crate::secrets::refers(payload) => {
                let record = format!("record {record}");
                return Err(crate::secrets::missing_table(path, &record));
            }
            None => std::borrow::Cow::Borrowed(payload),
        };
        schema::decode_changes(&payload, version)
    };
    batch.map_err(|e| corrupt(path, format!("record {record} at byte {at}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::state::NodeStatus;

    fn change(i: u64) -> StateChange {
        StateChange::Paused { at: i }
    }

    fn journal(batches: &[Vec<StateChange>]) -> Vec<u8> {
        let mut bytes = header(3).to_vec();
        for b in batches {
            bytes.extend(encode(b).map(|(r, _)| r).unwrap_or_default());
        }
        bytes
    }

    #[test]
    fn frame_matches_encode() {
        let batch = vec![change(1), change(2)];
        let record = encode(&batch).map(|(r, _)| r).unwrap_or_default();
        assert_eq!(frame(&record[RECORD_HEAD..]).ok(), Some(record));
    }

    #[test]
    fn round_trips_batches() {
        let batches = vec![vec![change(1)], vec![change(2), change(3)], vec![]];
        let bytes = journal(&batches);
        let scan = scan(&bytes, 3, Path::new("j"), None).map_err(|e| e.to_string());
        let scan = scan.unwrap_or_default();
        assert_eq!(scan.batches, batches);
        assert_eq!(scan.valid_len, bytes.len() as u64);
    }

    #[test]
    fn json_records_of_older_journals_still_read_among_binary_ones() {
        let node = |node, status| StateChange::Node {
            node,
            status,
            at: 1_700_000_000_000,
        };
        let metrics = StateChange::Metrics {
            node: 0,
            metrics: serde_json::json!({"tokens": 12}),
        };
        let batches = vec![
            vec![node(0, NodeStatus::Ready), metrics.clone()],
            vec![node(0, NodeStatus::Scheduled)],
            vec![node(1, NodeStatus::Ready), node(0, NodeStatus::Running)],
        ];
        // What the store wrote before binary records: version 1, a JSON array per record.
        let mut bytes = header_at(1, 3).to_vec();
        for b in &batches[..2] {
            bytes.extend(encode_json(b).unwrap_or_default());
        }
        let old_len = bytes.len();
        let (binary, json) = encode(&batches[2]).unwrap_or_default();
        assert!(!json);
        assert_eq!(binary[RECORD_HEAD], codec::BINARY);
        bytes.extend(binary);
        assert_eq!(bytes[HEADER_LEN as usize + RECORD_HEAD], b'[');
        let got = scan(&bytes, 3, Path::new("j"), None).map_err(|e| e.to_string());
        let got = got.unwrap_or_default();
        assert_eq!(got.batches, batches);
        assert_eq!(got.valid_len, bytes.len() as u64);
        let got = scan(&bytes[..old_len], 3, Path::new("j"), None).map(|s| s.batches);
        assert_eq!(got.ok().as_deref(), Some(&batches[..2]));
    }

    #[test]
    fn the_header_version_is_one_older_builds_refuse() {
        // Builds before binary records read versions 1 (their schema version) and below.
        assert_eq!(u32_at(&header(0), 8), Some(SCHEMA_VERSION + 1));
        assert_eq!(schema::of_format(VERSION), SCHEMA_VERSION);
        assert_eq!(schema::of_format(1), 1);
        let scan = |version| {
            let bytes = header_at(version, 3);
            super::scan(&bytes, 3, Path::new("j"), None).map(|s| s.version)
        };
        assert_eq!(scan(1).ok(), Some(1));
        assert_eq!(scan(VERSION).ok(), Some(VERSION));
        for version in [0, VERSION + 1] {
            match scan(version) {
                Err(StoreError::SchemaVersion { found, .. }) => {
                    assert_eq!(found, schema::of_format(version))
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_torn_binary_record_after_json_ones_is_dropped() {
        let mut bytes = header(3).to_vec();
        bytes.extend(encode_json(&[change(1)]).unwrap_or_default());
        let whole = bytes.len();
        bytes.extend(
            encode(&[change(2), change(3)])
                .map(|(r, _)| r)
                .unwrap_or_default(),
        );
        for cut in whole..bytes.len() {
            let got = scan(&bytes[..cut], 3, Path::new("j"), None);
            let got = got
                .map(|s| (s.batches, s.valid_len))
                .map_err(|e| e.to_string());
            assert_eq!(
                got,
                Ok((vec![vec![change(1)]], whole as u64)),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn every_torn_tail_reads_as_a_prefix() {
        let batches = vec![vec![change(1)], vec![change(2), change(3)], vec![change(4)]];
        let bytes = journal(&batches);
        let ends: Vec<usize> = {
            let mut v = vec![HEADER_LEN as usize];
            for b in &batches {
                v.push(v[v.len() - 1] + encode(b).map(|(r, _)| r.len()).unwrap_or(0));
            }
            v
        };
        for cut in HEADER_LEN as usize..=bytes.len() {
            let got = scan(&bytes[..cut], 3, Path::new("j"), None);
            let Ok(got) = got else {
                panic!("cut at {cut}: {got:?}");
            };
            let whole = ends.iter().filter(|&&e| e <= cut).count() - 1;
            assert_eq!(got.batches, batches[..whole], "cut at {cut}");
            assert_eq!(got.valid_len as usize, ends[whole], "cut at {cut}");
        }
    }

    #[test]
    fn a_flipped_bit_in_the_last_record_is_a_torn_tail() {
        let mut bytes = journal(&[vec![change(1)], vec![change(2)]]);
        let last = bytes.len() - 2;
        bytes[last] ^= 0x40;
        let got = scan(&bytes, 3, Path::new("j"), None).map(|s| s.batches.len());
        assert_eq!(got.ok(), Some(1));
    }

    #[test]
    fn damage_before_good_records_is_reported() {
        let mut bytes = journal(&[vec![change(1)], vec![change(2)]]);
        bytes[HEADER_LEN as usize + 10] ^= 0x40;
        match scan(&bytes, 3, Path::new("/p/j.log"), None) {
            Err(StoreError::Corrupt { path, message }) => {
                assert_eq!(path, Path::new("/p/j.log"));
                assert!(message.contains("bad checksum"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_headers_are_reported() {
        let good = journal(&[]);
        let mut magic = good.clone();
        magic[0] = b'X';
        let mut crc = good.clone();
        crc[13] ^= 1;
        for (bytes, gen, expect) in [
            (&good[..10], 3, "truncated journal header"),
            (&magic[..], 3, "bad magic"),
            (&crc[..], 3, "checksum"),
            (&good[..], 4, "generation 3 where 4"),
        ] {
            match scan(bytes, gen, Path::new("j"), None) {
                Err(StoreError::Corrupt { message, .. }) => {
                    assert!(message.contains(expect), "{message}")
                }
                other => panic!("{other:?}"),
            }
        }
        match scan(&[], 3, Path::new("j"), None) {
            Err(StoreError::Corrupt { message, .. }) => assert!(message.contains("empty")),
            other => panic!("{other:?}"),
        }
    }
}
