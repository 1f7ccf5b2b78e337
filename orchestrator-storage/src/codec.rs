//! The binary payload of a journal record: a compact encoding of the changes that make up
//! almost every batch (node transitions, attempts and phases starting and ending), with the
//! rare ones embedded as JSON.
//!
//! A run of a no-op job journals eight changes; as JSON they took about 68 bytes each and
//! their encoding was the largest part of an append's CPU time. Here a node transition takes
//! about 5 bytes. A smaller journal is also compacted less often: compaction (writing and
//! flushing the whole snapshot) was the largest part of an append's wall time.
//!
//! ```text
//! payload  BINARY (1 byte) | change*
//! change   op (1 byte) | fields (below)
//! ```
//!
//! Integers are LEB128 varints; each `at` is the zigzag varint of its difference to the
//! previous `at` of the same record (the first to 0), so the stamps of a batch, which are
//! nearly equal, take a byte each. A string is its length (varint) and its UTF-8 bytes. An
//! enum is one byte, its index in the tables below (append only: stored records depend on
//! them). An option is a presence byte (0 or 1) then the value, except where a `flags` byte
//! says which optional fields follow.
//!
//! A change with no compact form (or holding a status this build's tables lack) is op
//! [`OP_JSON`]: a string holding the change's JSON, decoded (and upgraded from an older
//! schema) like a record of the JSON payload. Changes that may hold secret values (an `env`
//! object) make [`encode`] refuse the whole batch, which then goes as a JSON payload through
//! [`crate::secrets`], exactly as before this encoding existed.
//!
//! The encoding is the store's own, not the schema's: a schema version that changes one of
//! these variants needs a new op (and the old one kept for old records).

use std::path::PathBuf;

use orchestrator_core::state::{
    AttemptStatus, FailureReason, NodeStatus, Phase, PhaseStatus, StateChange, SCHEMA_VERSION,
};

use crate::schema;
use crate::secrets::Secrets;

/// First byte of a binary payload (a JSON payload starts with `[`).
pub(crate) const BINARY: u8 = 0x01;

/// A change as JSON text.
const OP_JSON: u8 = 0;
const OP_NODE: u8 = 1;
const OP_ATTEMPT_STARTED: u8 = 2;
const OP_PHASE_STARTED: u8 = 3;
const OP_PHASE_ENDED: u8 = 4;
const OP_ATTEMPT_ENDED: u8 = 5;
const OP_PROCESS: u8 = 6;
const OP_COMMIT: u8 = 7;
const OP_SESSION: u8 = 8;
const OP_WORKTREE: u8 = 9;
const OP_OUTPUT: u8 = 10;
/// Plan-level changes holding only `at`: op `OP_PLAN + i` is `PLAN_OPS[i]`.
const OP_PLAN: u8 = 16;

const NODE_STATUSES: &[NodeStatus] = &[
    NodeStatus::Pending,
    NodeStatus::Ready,
    NodeStatus::Scheduled,
    NodeStatus::Running,
    NodeStatus::Succeeded,
    NodeStatus::Failed,
    NodeStatus::Blocked,
    NodeStatus::Canceled,
    NodeStatus::CompletedSplit,
    NodeStatus::Waiting,
];

const PHASES: &[Phase] = &[
    Phase::MergeFi,
    Phase::Setup,
    Phase::Prechecks,
    Phase::Work,
    Phase::Commit,
    Phase::Postchecks,
    Phase::MergeRi,
];

const PHASE_STATUSES: &[PhaseStatus] = &[
    PhaseStatus::Running,
    PhaseStatus::Succeeded,
    PhaseStatus::Failed,
    PhaseStatus::Skipped,
    PhaseStatus::Canceled,
];

const ATTEMPT_STATUSES: &[AttemptStatus] = &[
    AttemptStatus::Running,
    AttemptStatus::Succeeded,
    AttemptStatus::Failed,
    AttemptStatus::Canceled,
];

const REASONS: &[FailureReason] = &[
    FailureReason::PhaseFailed,
    FailureReason::MergeConflict,
    FailureReason::NoChanges,
    FailureReason::Timeout,
    FailureReason::ForceFailed,
    FailureReason::Crashed,
    FailureReason::StartupError,
    FailureReason::Canceled,
    FailureReason::Rejected,
    FailureReason::CompositeFailed,
    FailureReason::Contract,
];

/// The plan-level changes that hold only `at`, by their op's offset from [`OP_PLAN`].
#[derive(Clone, Copy)]
enum PlanOp {
    Paused,
    Resumed,
    Canceled,
    Archived,
    Recovered,
    Finalized,
    Ended,
}

const PLAN_OPS: &[PlanOp] = &[
    PlanOp::Paused,
    PlanOp::Resumed,
    PlanOp::Canceled,
    PlanOp::Archived,
    PlanOp::Recovered,
    PlanOp::Finalized,
    PlanOp::Ended,
];

impl PlanOp {
    fn of(change: &StateChange) -> Option<(PlanOp, u64)> {
        Some(match *change {
            StateChange::Paused { at } => (PlanOp::Paused, at),
            StateChange::Resumed { at } => (PlanOp::Resumed, at),
            StateChange::Canceled { at } => (PlanOp::Canceled, at),
            StateChange::Archived { at } => (PlanOp::Archived, at),
            StateChange::Recovered { at } => (PlanOp::Recovered, at),
            StateChange::Finalized { at } => (PlanOp::Finalized, at),
            StateChange::Ended { at } => (PlanOp::Ended, at),
            _ => return None,
        })
    }

    fn change(self, at: u64) -> StateChange {
        match self {
            PlanOp::Paused => StateChange::Paused { at },
            PlanOp::Resumed => StateChange::Resumed { at },
            PlanOp::Canceled => StateChange::Canceled { at },
            PlanOp::Archived => StateChange::Archived { at },
            PlanOp::Recovered => StateChange::Recovered { at },
            PlanOp::Finalized => StateChange::Finalized { at },
            PlanOp::Ended => StateChange::Ended { at },
        }
    }
}

/// The code of `value` in `table`; `None` for a variant the table lacks (one added to core
/// since), whose change is then written as JSON.
fn code<T: PartialEq>(table: &[T], value: &T) -> Option<u8> {
    table
        .iter()
        .position(|v| v == value)
        .and_then(|i| u8::try_from(i).ok())
}

/// Appends the binary payload of `changes` to `out`. `Ok(false)` (with `out` as it was) when
/// the batch must go as JSON instead: one of its changes may hold secret values.
pub(crate) fn encode(out: &mut Vec<u8>, changes: &[StateChange]) -> Result<bool, String> {
    let start = out.len();
    out.reserve(1 + changes.len() * 6);
    out.push(BINARY);
    let mut w = Writer { out, at: 0 };
    let mut json = Vec::new();
    for change in changes {
        if w.compact(change) {
            continue;
        }
        json.clear();
        serde_json::to_writer(&mut json, change).map_err(|e| e.to_string())?;
        if Secrets::may_hold_secrets(&json) {
            w.out.truncate(start);
            return Ok(false);
        }
        w.out.push(OP_JSON);
        w.bytes(&json);
    }
    Ok(true)
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
    /// The previous `at` of this record.
    at: u64,
}

impl Writer<'_> {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn at(&mut self, at: u64) {
        let delta = at.wrapping_sub(self.at) as i64;
        self.at = at;
        self.varint(((delta << 1) ^ (delta >> 63)) as u64);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.out.extend_from_slice(b);
    }

    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.out.push(1);
                self.bytes(s.as_bytes());
            }
            None => self.out.push(0),
        }
    }

    /// Writes `change` in its compact form; `false` (nothing written) if it has none.
    fn compact(&mut self, change: &StateChange) -> bool {
        // Codes first: a variant the tables lack sends the whole change to JSON before any
        // byte of it is written.
        match change {
            StateChange::Node { node, status, at } => {
                let Some(s) = code(NODE_STATUSES, status) else {
                    return false;
                };
                self.out.push(OP_NODE);
                self.varint(*node as u64);
                self.out.push(s);
                self.at(*at);
            }
            StateChange::AttemptStarted {
                node,
                at,
                resume_from,
            } => {
                let from = match resume_from {
                    None => 0,
                    Some(p) => match code(PHASES, p) {
                        Some(c) => c + 1,
                        None => return false,
                    },
                };
                self.out.push(OP_ATTEMPT_STARTED);
                self.varint(*node as u64);
                self.at(*at);
                self.out.push(from);
            }
            StateChange::PhaseStarted { node, phase, at } => {
                let Some(p) = code(PHASES, phase) else {
                    return false;
                };
                self.out.push(OP_PHASE_STARTED);
                self.varint(*node as u64);
                self.out.push(p);
                self.at(*at);
            }
            StateChange::PhaseEnded {
                node,
                phase,
                status,
                at,
                error,
            } => {
                let (Some(p), Some(s)) = (code(PHASES, phase), code(PHASE_STATUSES, status)) else {
                    return false;
                };
                self.out.push(OP_PHASE_ENDED);
                self.varint(*node as u64);
                self.out.push(p);
                self.out.push(s);
                self.at(*at);
                self.opt_str(error.as_deref());
            }
            StateChange::AttemptEnded {
                node,
                status,
                at,
                error,
                reason,
                failed_phase,
            } => {
                let Some(s) = code(ATTEMPT_STATUSES, status) else {
                    return false;
                };
                let reason = match reason {
                    None => None,
                    Some(r) => match code(REASONS, r) {
                        Some(c) => Some(c),
                        None => return false,
                    },
                };
                let phase = match failed_phase {
                    None => None,
                    Some(p) => match code(PHASES, p) {
                        Some(c) => Some(c),
                        None => return false,
                    },
                };
                let flags = u8::from(error.is_some())
                    | u8::from(reason.is_some()) << 1
                    | u8::from(phase.is_some()) << 2;
                self.out.push(OP_ATTEMPT_ENDED);
                self.varint(*node as u64);
                self.out.push(s);
                self.at(*at);
                self.out.push(flags);
                if let Some(e) = error {
                    self.bytes(e.as_bytes());
                }
                self.out.extend(reason);
                self.out.extend(phase);
            }
            StateChange::Process {
                node,
                pgid,
                running,
            } => {
                self.out.push(OP_PROCESS);
                self.varint(*node as u64);
                self.varint(u64::from(*pgid));
                self.out.push(u8::from(*running));
            }
            StateChange::Commit { node, commit } => self.node_str(OP_COMMIT, *node, commit),
            StateChange::Session { node, session_id } => {
                self.node_str(OP_SESSION, *node, session_id)
            }
            StateChange::Output { node, text } => self.node_str(OP_OUTPUT, *node, text),
            StateChange::Worktree {
                node,
                path,
                base_commit,
            } => {
                // A path that is not UTF-8 has no compact form (nor a JSON one).
                let path = match path {
                    None => None,
                    Some(p) => match p.to_str() {
                        Some(p) => Some(p),
                        None => return false,
                    },
                };
                self.out.push(OP_WORKTREE);
                self.varint(*node as u64);
                self.opt_str(path);
                self.opt_str(base_commit.as_deref());
            }
            other => {
                let Some((op, at)) = PlanOp::of(other) else {
                    return false;
                };
                self.out.push(OP_PLAN + op as u8);
                self.at(at);
            }
        }
        true
    }

    fn node_str(&mut self, op: u8, node: usize, s: &str) {
        self.out.push(op);
        self.varint(node as u64);
        self.bytes(s.as_bytes());
    }
}

/// Decodes a binary payload (its first byte [`BINARY`]) written at schema `version`.
pub(crate) fn decode(payload: &[u8], version: u32) -> Result<Vec<StateChange>, String> {
    let body = payload.get(1..).unwrap_or_default();
    // Most changes take 4 to 6 bytes.
    let mut changes = Vec::with_capacity(body.len() / 5 + 1);
    let mut r = Reader {
        bytes: body,
        pos: 0,
        at: 0,
    };
    while r.pos < body.len() {
        let start = r.pos;
        let change = r.change(version).map_err(|e| {
            format!(
                "change {} at payload byte {}: {e}",
                changes.len() + 1,
                start + 1
            )
        })?;
        changes.push(change);
    }
    Ok(changes)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    at: u64,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.pos).ok_or("truncated")?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 64 bits".into())
    }

    fn node(&mut self) -> Result<usize, String> {
        usize::try_from(self.varint()?).map_err(|_| "node index out of range".to_string())
    }

    fn at(&mut self) -> Result<u64, String> {
        let z = self.varint()?;
        let delta = ((z >> 1) as i64) ^ -((z & 1) as i64);
        self.at = self.at.wrapping_add(delta as u64);
        Ok(self.at)
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = usize::try_from(self.varint()?).map_err(|_| "length out of range")?;
        let end = self.pos.checked_add(len).ok_or("length out of range")?;
        let b = self.bytes.get(self.pos..end).ok_or("truncated")?;
        self.pos = end;
        Ok(b)
    }

    fn string(&mut self) -> Result<String, String> {
        let b = self.bytes()?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|e| format!("invalid UTF-8: {e}"))
    }

    fn opt_string(&mut self) -> Result<Option<String>, String> {
        match self.byte()? {
            0 => Ok(None),
            1 => self.string().map(Some),
            b => Err(format!("bad presence byte {b}")),
        }
    }

    fn enumerated<T: Copy>(&mut self, table: &[T], what: &str) -> Result<T, String> {
        let b = self.byte()?;
        table
            .get(usize::from(b))
            .copied()
            .ok_or_else(|| format!("unknown {what} code {b}"))
    }

    fn change(&mut self, version: u32) -> Result<StateChange, String> {
        let op = self.byte()?;
        Ok(match op {
            OP_JSON => {
                let json = self.bytes()?;
                if version == SCHEMA_VERSION {
                    serde_json::from_slice(json).map_err(|e| e.to_string())?
                } else {
                    let v = serde_json::from_slice(json).map_err(|e| e.to_string())?;
                    let v = schema::upgrade_change(v, version)?;
                    serde_json::from_value(v).map_err(|e| e.to_string())?
                }
            }
            OP_NODE => StateChange::Node {
                node: self.node()?,
                status: self.enumerated(NODE_STATUSES, "node status")?,
                at: self.at()?,
            },
            OP_ATTEMPT_STARTED => {
                let (node, at) = (self.node()?, self.at()?);
                let resume_from = match self.byte()? {
                    0 => None,
                    b => Some(
                        *PHASES
                            .get(usize::from(b - 1))
                            .ok_or_else(|| format!("unknown phase code {}", b - 1))?,
                    ),
                };
                StateChange::AttemptStarted {
                    node,
                    at,
                    resume_from,
                }
            }
            OP_PHASE_STARTED => StateChange::PhaseStarted {
                node: self.node()?,
                phase: self.enumerated(PHASES, "phase")?,
                at: self.at()?,
            },
            OP_PHASE_ENDED => StateChange::PhaseEnded {
                node: self.node()?,
                phase: self.enumerated(PHASES, "phase")?,
                status: self.enumerated(PHASE_STATUSES, "phase status")?,
                at: self.at()?,
                error: self.opt_string()?,
            },
            OP_ATTEMPT_ENDED => {
                let node = self.node()?;
                let status = self.enumerated(ATTEMPT_STATUSES, "attempt status")?;
                let at = self.at()?;
                let flags = self.byte()?;
                if flags & !0b111 != 0 {
                    return Err(format!("bad flags {flags:#x}"));
                }
                let error = if flags & 1 != 0 {
                    Some(self.string()?)
                } else {
                    None
                };
                let reason = if flags & 2 != 0 {
                    Some(self.enumerated(REASONS, "failure reason")?)
                } else {
                    None
                };
                let failed_phase = if flags & 4 != 0 {
                    Some(self.enumerated(PHASES, "phase")?)
                } else {
                    None
                };
                StateChange::AttemptEnded {
                    node,
                    status,
                    at,
                    error,
                    reason,
                    failed_phase,
                }
            }
            OP_PROCESS => StateChange::Process {
                node: self.node()?,
                pgid: u32::try_from(self.varint()?).map_err(|_| "pgid out of range")?,
                running: match self.byte()? {
                    0 => false,
                    1 => true,
                    b => return Err(format!("bad boolean byte {b}")),
                },
            },
            OP_COMMIT => StateChange::Commit {
                node: self.node()?,
                commit: self.string()?,
            },
            OP_SESSION => StateChange::Session {
                node: self.node()?,
                session_id: self.string()?,
            },
            OP_OUTPUT => StateChange::Output {
                node: self.node()?,
                text: self.string()?,
            },
            OP_WORKTREE => StateChange::Worktree {
                node: self.node()?,
                path: self.opt_string()?.map(PathBuf::from),
                base_commit: self.opt_string()?,
            },
            op if op >= OP_PLAN => {
                let plan_op = PLAN_OPS
                    .get(usize::from(op - OP_PLAN))
                    .ok_or_else(|| format!("unknown op {op}"))?;
                plan_op.change(self.at()?)
            }
            op => return Err(format!("unknown op {op}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(changes: &[StateChange]) -> Vec<u8> {
        let mut out = Vec::new();
        assert_eq!(encode(&mut out, changes), Ok(true));
        assert_eq!(decode(&out, SCHEMA_VERSION).as_deref(), Ok(changes));
        out
    }

    /// Every variant the encoding has a compact form for, with every code of every table.
    fn samples() -> Vec<StateChange> {
        let mut v = Vec::new();
        let mut at = 1_700_000_000_000u64;
        for (i, &status) in NODE_STATUSES.iter().enumerate() {
            at += 3;
            v.push(StateChange::Node {
                node: i * 1000,
                status,
                at,
            });
        }
        for (i, &phase) in PHASES.iter().enumerate() {
            v.push(StateChange::AttemptStarted {
                node: i,
                at: at - 100,
                resume_from: Some(phase),
            });
            v.push(StateChange::PhaseStarted { node: i, phase, at });
            for &status in PHASE_STATUSES {
                v.push(StateChange::PhaseEnded {
                    node: i,
                    phase,
                    status,
                    at,
                    error: (i % 2 == 0).then(|| format!("boom é {i}")),
                });
            }
        }
        v.push(StateChange::AttemptStarted {
            node: 3,
            at: 0,
            resume_from: None,
        });
        for (i, &status) in ATTEMPT_STATUSES.iter().enumerate() {
            for (j, &reason) in REASONS.iter().enumerate() {
                v.push(StateChange::AttemptEnded {
                    node: j,
                    status,
                    at: u64::MAX - j as u64,
                    error: (j % 2 == 1).then(|| "e".repeat(200)),
                    reason: (i != 1).then_some(reason),
                    failed_phase: (j % 3 == 0).then_some(PHASES[j % PHASES.len()]),
                });
            }
        }
        v.push(StateChange::Process {
            node: 1,
            pgid: u32::MAX,
            running: true,
        });
        v.push(StateChange::Process {
            node: 1,
            pgid: 7,
            running: false,
        });
        v.push(StateChange::Commit {
            node: 2,
            commit: "a".repeat(40),
        });
        v.push(StateChange::Session {
            node: 2,
            session_id: String::new(),
        });
        v.push(StateChange::Output {
            node: usize::MAX,
            text: "out\nput".into(),
        });
        v.push(StateChange::Worktree {
            node: 2,
            path: Some("/w/t".into()),
            base_commit: Some("b".repeat(40)),
        });
        v.push(StateChange::Worktree {
            node: 2,
            path: None,
            base_commit: None,
        });
        for (i, op) in PLAN_OPS.iter().enumerate() {
            v.push(op.change(at + i as u64));
        }
        v
    }

    #[test]
    fn every_compact_variant_round_trips() {
        let changes = samples();
        let out = round_trip(&changes);
        assert!(!out[1..].contains(&OP_JSON) || out.len() > changes.len());
    }

    #[test]
    fn the_tables_cover_every_variant_core_lists() {
        // A status added to core still round-trips (as JSON), but slowly: add it here.
        for s in NodeStatus::ALL {
            assert!(code(NODE_STATUSES, &s).is_some(), "{s:?}");
        }
        for p in Phase::ALL {
            assert!(code(PHASES, &p).is_some(), "{p:?}");
        }
    }

    #[test]
    fn a_node_transition_takes_a_few_bytes() {
        let at = 1_796_220_386_784;
        let batch: Vec<StateChange> = (0..1000)
            .map(|node| StateChange::Node {
                node: 5000 + node,
                status: NodeStatus::Running,
                at: at + node as u64 / 100,
            })
            .collect();
        let out = round_trip(&batch);
        assert!(out.len() < 1000 * 5 + 10, "{} bytes", out.len());
    }

    #[test]
    fn rare_changes_go_as_json_inside_the_record() {
        let changes = vec![
            StateChange::Node {
                node: 1,
                status: NodeStatus::Ready,
                at: 5,
            },
            StateChange::Metrics {
                node: 1,
                metrics: serde_json::json!({"tokens": 3, "nested": {"a": [1, 2]}}),
            },
            StateChange::RetryRequested {
                node: 1,
                resume_from: Some(Phase::Work),
                anew: true,
            },
            StateChange::Approved { node: 4 },
        ];
        let out = round_trip(&changes);
        assert!(out.windows(8).any(|w| w == b"\"tokens\""));
    }

    #[test]
    fn a_change_that_may_hold_secrets_sends_the_batch_to_json() {
        let changes = vec![
            StateChange::Node {
                node: 1,
                status: NodeStatus::Ready,
                at: 5,
            },
            StateChange::Metrics {
                node: 1,
                metrics: serde_json::json!({"env": {"API_KEY": "sk-1"}}),
            },
        ];
        let mut out = b"head".to_vec();
        assert_eq!(encode(&mut out, &changes), Ok(false));
        assert_eq!(out, b"head");
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let out = round_trip(&samples());
        for cut in 1..out.len() {
            // A cut inside a change is an error; between changes, a shorter batch.
            if let Ok(changes) = decode(&out[..cut], SCHEMA_VERSION) {
                assert!(changes.len() < samples().len());
            }
        }
        for i in 1..out.len() {
            for bit in [0x01, 0x80] {
                let mut bad = out.clone();
                bad[i] ^= bit;
                let _ = decode(&bad, SCHEMA_VERSION);
            }
        }
        for bad in [
            &[BINARY, 200][..],
            &[BINARY, OP_NODE, 1, 99, 0],
            &[
                BINARY, OP_NODE, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1,
            ],
            &[BINARY, OP_COMMIT, 1, 2, 0xff, 0xfe],
            &[BINARY, OP_JSON, 3, b'{', b'}', b'x'],
        ] {
            assert!(decode(bad, SCHEMA_VERSION).is_err(), "{bad:?}");
        }
    }
}
