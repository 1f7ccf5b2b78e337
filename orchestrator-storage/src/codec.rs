//! The binary payload of a journal record: a compact encoding of the changes that make up
//! almost every batch (node transitions, attempts and phases starting and ending), with the
//! rare ones embedded as JSON.
//!
//! A run of a no-op job journaled eight changes; as JSON they took about 68 bytes each and
//! their encoding was the largest part of an append's CPU time. Here a node transition takes
//! about 5 bytes. (The engine now joins the common steps: a no-op job journals four changes,
//! `ready`, `launched`, `phase_ran` and `succeeded`.)
//!
//! ```text
//! payload  BINARY (1 byte) | change*
//! change   op (1 byte) | fields (below)
//! ```
//!
//! Integers are LEB128 varints; each `at` is the zigzag varint of its difference to the
//! previous `at` of the same record (the first to 0), so the stamps of a batch, which are
//! nearly equal, take a byte each. A string is its length (varint) and its UTF-8 bytes. A
//! status, phase or failure reason is one byte, its stable code in core (`NodeStatus::code`
//! and the like). An option is a presence byte (0 or 1) then the value, except where a
//! `flags` byte says which optional fields follow.
//!
//! A change with no compact form is op [`OP_JSON`]: a string holding the change's JSON,
//! decoded (and upgraded from an older schema) like a record of the JSON payload. Changes
//! that may hold secret values (an `env` object) make [`encode`] refuse the whole batch,
//! which then goes as a JSON payload through [`crate::secrets`], exactly as before this
//! encoding existed.
//!
//! Ops and codes are a file format: append only, never changed or reused. The encoding is the
//! store's own, not the schema's: a schema version that changes one of these variants needs a
//! new op (and the old one kept for old records).

use std::path::PathBuf;

use orchestrator_core::state::{
    AttemptStatus, FailureReason, NodeStatus, Phase, PhaseStatus, StateChange,
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
const OP_LAUNCHED: u8 = 11;
const OP_PHASE_RAN: u8 = 12;
const OP_SUCCEEDED: u8 = 13;

/// The plan-level changes that hold only `at`, each with its op (16 and up): one table for
/// [`plan_op`] and [`plan_change`].
macro_rules! plan_ops {
    ($($variant:ident = $op:literal),+ $(,)?) => {
        /// The op and stamp of a plan-level change that holds only `at`.
        fn plan_op(change: &StateChange) -> Option<(u8, u64)> {
            match *change {
                $(StateChange::$variant { at } => Some(($op, at)),)+
                _ => None,
            }
        }

        /// What makes the plan-level change of `op`, if it is one.
        fn plan_change(op: u8) -> Option<fn(u64) -> StateChange> {
            match op {
                $($op => Some(|at| StateChange::$variant { at }),)+
                _ => None,
            }
        }

        /// Every plan-level op.
        #[cfg(test)]
        const PLAN_OPS: &[u8] = &[$($op),+];
    };
}

plan_ops! {
    Paused = 16,
    Resumed = 17,
    Canceled = 18,
    Archived = 19,
    Recovered = 20,
    Finalized = 21,
    Ended = 22,
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
        self.out.push(u8::from(s.is_some()));
        if let Some(s) = s {
            self.bytes(s.as_bytes());
        }
    }

    /// The phase an attempt resumes from: 0 for none, else the phase's code + 1.
    fn resume_from(&mut self, phase: Option<Phase>) {
        self.out.push(phase.map_or(0, |p| p.code() + 1));
    }

    /// The op and node index that start every node-level change.
    fn head(&mut self, op: u8, node: usize) {
        self.out.push(op);
        self.varint(node as u64);
    }

    /// Writes `change` in its compact form; `false` (nothing written) if it has none.
    fn compact(&mut self, change: &StateChange) -> bool {
        match change {
            StateChange::Node { node, status, at } => {
                self.node_code_at(OP_NODE, *node, status.code(), *at)
            }
            StateChange::AttemptStarted {
                node,
                at,
                resume_from,
            } => {
                self.head(OP_ATTEMPT_STARTED, *node);
                self.at(*at);
                self.resume_from(*resume_from);
            }
            StateChange::Launched {
                node,
                at,
                resume_from,
            } => {
                self.head(OP_LAUNCHED, *node);
                self.at(*at);
                self.resume_from(*resume_from);
            }
            StateChange::PhaseRan {
                node,
                phase,
                status,
                started_at,
                at,
                error,
            } => {
                self.head(OP_PHASE_RAN, *node);
                self.out.extend([phase.code(), status.code()]);
                self.at(*started_at);
                self.at(*at);
                self.opt_str(error.as_deref());
            }
            StateChange::Succeeded { node, at } => {
                self.head(OP_SUCCEEDED, *node);
                self.at(*at);
            }
            StateChange::PhaseStarted { node, phase, at } => {
                self.node_code_at(OP_PHASE_STARTED, *node, phase.code(), *at)
            }
            StateChange::PhaseEnded {
                node,
                phase,
                status,
                at,
                error,
            } => {
                self.head(OP_PHASE_ENDED, *node);
                self.out.extend([phase.code(), status.code()]);
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
                let flags = u8::from(error.is_some())
                    | u8::from(reason.is_some()) << 1
                    | u8::from(failed_phase.is_some()) << 2;
                self.head(OP_ATTEMPT_ENDED, *node);
                self.out.push(status.code());
                self.at(*at);
                self.out.push(flags);
                if let Some(e) = error {
                    self.bytes(e.as_bytes());
                }
                self.out.extend(reason.map(FailureReason::code));
                self.out.extend(failed_phase.map(Phase::code));
            }
            StateChange::Process {
                node,
                pgid,
                running,
            } => {
                self.head(OP_PROCESS, *node);
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
                let path = match path.as_deref().map(|p| p.to_str()) {
                    None => None,
                    Some(Some(p)) => Some(p),
                    Some(None) => return false,
                };
                self.head(OP_WORKTREE, *node);
                self.opt_str(path);
                self.opt_str(base_commit.as_deref());
            }
            other => {
                let Some((op, at)) = plan_op(other) else {
                    return false;
                };
                self.out.push(op);
                self.at(at);
            }
        }
        true
    }

    fn node_code_at(&mut self, op: u8, node: usize, code: u8, at: u64) {
        self.head(op, node);
        self.out.push(code);
        self.at(at);
    }

    fn node_str(&mut self, op: u8, node: usize, s: &str) {
        self.head(op, node);
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

    /// A byte that must be 0 or 1.
    fn flag(&mut self) -> Result<bool, String> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!("bad boolean byte {b}")),
        }
    }

    /// `read`'s value if `present`.
    fn optional<T>(
        &mut self,
        present: bool,
        read: impl FnOnce(&mut Self) -> Result<T, String>,
    ) -> Result<Option<T>, String> {
        present.then(|| read(self)).transpose()
    }

    fn opt_string(&mut self) -> Result<Option<String>, String> {
        let present = self.flag()?;
        self.optional(present, Self::string)
    }

    /// A coded value: `from_code` of the next byte.
    fn coded<T>(&mut self, from_code: fn(u8) -> Option<T>, what: &str) -> Result<T, String> {
        let b = self.byte()?;
        from_code(b).ok_or_else(|| format!("unknown {what} code {b}"))
    }

    fn phase(&mut self) -> Result<Phase, String> {
        self.coded(Phase::from_code, "phase")
    }

    fn phase_status(&mut self) -> Result<PhaseStatus, String> {
        self.coded(PhaseStatus::from_code, "phase status")
    }

    /// The phase an attempt resumes from (see the writer's `resume_from`).
    fn resume_from(&mut self) -> Result<Option<Phase>, String> {
        match self.byte()? {
            0 => Ok(None),
            b => Phase::from_code(b - 1)
                .map(Some)
                .ok_or_else(|| format!("unknown phase code {}", b - 1)),
        }
    }

    fn change(&mut self, version: u32) -> Result<StateChange, String> {
        let op = self.byte()?;
        Ok(match op {
            OP_JSON => schema::decode_change(self.bytes()?, version)?,
            OP_NODE => StateChange::Node {
                node: self.node()?,
                status: self.coded(NodeStatus::from_code, "node status")?,
                at: self.at()?,
            },
            OP_ATTEMPT_STARTED => StateChange::AttemptStarted {
                node: self.node()?,
                at: self.at()?,
                resume_from: self.resume_from()?,
            },
            OP_LAUNCHED => StateChange::Launched {
                node: self.node()?,
                at: self.at()?,
                resume_from: self.resume_from()?,
            },
            OP_PHASE_RAN => StateChange::PhaseRan {
                node: self.node()?,
                phase: self.phase()?,
                status: self.phase_status()?,
                started_at: self.at()?,
                at: self.at()?,
                error: self.opt_string()?,
            },
            OP_SUCCEEDED => StateChange::Succeeded {
                node: self.node()?,
                at: self.at()?,
            },
            OP_PHASE_STARTED => StateChange::PhaseStarted {
                node: self.node()?,
                phase: self.phase()?,
                at: self.at()?,
            },
            OP_PHASE_ENDED => StateChange::PhaseEnded {
                node: self.node()?,
                phase: self.phase()?,
                status: self.phase_status()?,
                at: self.at()?,
                error: self.opt_string()?,
            },
            OP_ATTEMPT_ENDED => {
                let node = self.node()?;
                let status = self.coded(AttemptStatus::from_code, "attempt status")?;
                let at = self.at()?;
                let flags = self.byte()?;
                if flags & !0b111 != 0 {
                    return Err(format!("bad flags {flags:#x}"));
                }
                StateChange::AttemptEnded {
                    node,
                    status,
                    at,
                    error: self.optional(flags & 1 != 0, Self::string)?,
                    reason: self.optional(flags & 2 != 0, |r| {
                        r.coded(FailureReason::from_code, "failure reason")
                    })?,
                    failed_phase: self.optional(flags & 4 != 0, Self::phase)?,
                }
            }
            OP_PROCESS => StateChange::Process {
                node: self.node()?,
                pgid: u32::try_from(self.varint()?).map_err(|_| "pgid out of range")?,
                running: self.flag()?,
            },
            OP_COMMIT | OP_SESSION | OP_OUTPUT => {
                let (node, text) = (self.node()?, self.string()?);
                match op {
                    OP_COMMIT => StateChange::Commit { node, commit: text },
                    OP_SESSION => StateChange::Session {
                        node,
                        session_id: text,
                    },
                    _ => StateChange::Output { node, text },
                }
            }
            OP_WORKTREE => StateChange::Worktree {
                node: self.node()?,
                path: self.opt_string()?.map(PathBuf::from),
                base_commit: self.opt_string()?,
            },
            op => {
                let make = plan_change(op).ok_or_else(|| format!("unknown op {op}"))?;
                make(self.at()?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::state::SCHEMA_VERSION;

    fn round_trip(changes: &[StateChange]) -> Vec<u8> {
        let mut out = Vec::new();
        assert_eq!(encode(&mut out, changes), Ok(true));
        assert_eq!(decode(&out, SCHEMA_VERSION).as_deref(), Ok(changes));
        out
    }

    /// Every value that has a code.
    fn every<T>(from_code: fn(u8) -> Option<T>) -> Vec<T> {
        (0..=u8::MAX).filter_map(from_code).collect()
    }

    /// Every variant the encoding has a compact form for, with every code of every table.
    fn samples() -> Vec<StateChange> {
        let mut v = Vec::new();
        let mut at = 1_700_000_000_000u64;
        for (i, status) in every(NodeStatus::from_code).into_iter().enumerate() {
            at += 3;
            v.push(StateChange::Node {
                node: i * 1000,
                status,
                at,
            });
        }
        let phases = every(Phase::from_code);
        for (i, &phase) in phases.iter().enumerate() {
            v.push(StateChange::AttemptStarted {
                node: i,
                at: at - 100,
                resume_from: Some(phase),
            });
            v.push(StateChange::PhaseStarted { node: i, phase, at });
            for status in every(PhaseStatus::from_code) {
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
        for (i, &phase) in phases.iter().enumerate() {
            v.push(StateChange::Launched {
                node: i + 70,
                at: at + i as u64,
                resume_from: (i % 2 == 0).then_some(phase),
            });
            for status in every(PhaseStatus::from_code) {
                v.push(StateChange::PhaseRan {
                    node: i + 70,
                    phase,
                    status,
                    started_at: at + 5,
                    at: at + 5 + i as u64 * 1000,
                    error: (i % 2 == 1).then(|| format!("ran é {i}")),
                });
            }
            v.push(StateChange::Succeeded {
                node: i + 70,
                at: u64::MAX - i as u64,
            });
        }
        for (i, status) in every(AttemptStatus::from_code).into_iter().enumerate() {
            for (j, reason) in every(FailureReason::from_code).into_iter().enumerate() {
                v.push(StateChange::AttemptEnded {
                    node: j,
                    status,
                    at: u64::MAX - j as u64,
                    error: (j % 2 == 1).then(|| "e".repeat(200)),
                    reason: (i != 1).then_some(reason),
                    failed_phase: (j % 3 == 0).then_some(phases[j % phases.len()]),
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
        for (i, &op) in PLAN_OPS.iter().enumerate() {
            v.extend(plan_change(op).map(|make| make(at + i as u64)));
        }
        v
    }

    #[test]
    fn every_compact_variant_round_trips() {
        let changes = samples();
        round_trip(&changes);
        for change in &changes {
            let out = round_trip(std::slice::from_ref(change));
            assert_ne!(out[1], OP_JSON, "{change:?}");
        }
        assert_eq!(every(NodeStatus::from_code), NodeStatus::ALL);
        assert_eq!(every(Phase::from_code), Phase::ALL);
    }

    #[test]
    fn plan_ops_follow_the_node_ops_and_round_trip() {
        for (i, &op) in PLAN_OPS.iter().enumerate() {
            assert_eq!(usize::from(op), 16 + i);
            let change = plan_change(op).map(|make| make(7));
            assert_eq!(change.as_ref().and_then(plan_op), Some((op, 7)));
        }
        assert!(plan_change(OP_OUTPUT).is_none());
        assert!(plan_change(OP_SUCCEEDED).is_none());
        assert!(plan_change(16 + PLAN_OPS.len() as u8).is_none());
    }

    #[test]
    fn stored_bytes_never_change() {
        // Journals on disk hold these bytes: a change here breaks them.
        let changes = [
            StateChange::Node {
                node: 300,
                status: NodeStatus::Running,
                at: 1_000,
            },
            StateChange::AttemptStarted {
                node: 300,
                at: 999,
                resume_from: Some(Phase::Work),
            },
            StateChange::PhaseEnded {
                node: 2,
                phase: Phase::MergeRi,
                status: PhaseStatus::Canceled,
                at: 1_001,
                error: Some("e".into()),
            },
            StateChange::AttemptEnded {
                node: 2,
                status: AttemptStatus::Canceled,
                at: 1_001,
                error: None,
                reason: Some(FailureReason::Contract),
                failed_phase: Some(Phase::Setup),
            },
            StateChange::Ended { at: 1_002 },
            StateChange::Launched {
                node: 300,
                at: 1_003,
                resume_from: None,
            },
            StateChange::PhaseRan {
                node: 2,
                phase: Phase::Work,
                status: PhaseStatus::Succeeded,
                started_at: 1_003,
                at: 1_005,
                error: None,
            },
            StateChange::Succeeded { node: 2, at: 1_005 },
        ];
        let out = round_trip(&changes);
        let expected = [
            &[BINARY][..],
            &[OP_NODE, 0xac, 0x02, 3, 0xd0, 0x0f], // node 300, running, at 1000
            &[OP_ATTEMPT_STARTED, 0xac, 0x02, 1, 4], // at -1, work + 1
            &[OP_PHASE_ENDED, 2, 6, 4, 4, 1, 1, b'e'], // merge-ri, canceled, at +2, "e"
            &[OP_ATTEMPT_ENDED, 2, 3, 0, 0b110, 10, 1], // canceled, at +0, contract, setup
            &[22, 2],                              // ended, at +1
            &[OP_LAUNCHED, 0xac, 0x02, 2, 0],      // node 300, at +1, no resume
            &[OP_PHASE_RAN, 2, 3, 1, 0, 4, 0],     // work, succeeded, at +0 and +2, no error
            &[OP_SUCCEEDED, 2, 0],                 // at +0
        ]
        .concat();
        assert_eq!(out, expected);
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

    /// A transition, then metrics of node 1.
    fn with_metrics(metrics: serde_json::Value) -> Vec<StateChange> {
        vec![
            StateChange::Node {
                node: 1,
                status: NodeStatus::Ready,
                at: 5,
            },
            StateChange::Metrics { node: 1, metrics },
        ]
    }

    #[test]
    fn rare_changes_go_as_json_inside_the_record() {
        let mut changes = with_metrics(serde_json::json!({"tokens": 3, "nested": {"a": [1, 2]}}));
        changes.extend([
            StateChange::RetryRequested {
                node: 1,
                resume_from: Some(Phase::Work),
                anew: true,
            },
            StateChange::Approved { node: 4 },
        ]);
        let out = round_trip(&changes);
        assert!(out.windows(8).any(|w| w == b"\"tokens\""));
    }

    #[test]
    fn a_change_that_may_hold_secrets_sends_the_batch_to_json() {
        let changes = with_metrics(serde_json::json!({"env": {"API_KEY": "sk-1"}}));
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
            &[BINARY, OP_ATTEMPT_STARTED, 1, 0, 99],
            &[BINARY, OP_PROCESS, 1, 1, 2],
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
