//! Fixtures shared by the storage tests.
#![allow(dead_code)]

use std::path::PathBuf;

use orchestrator_core::ids::PlanId;
use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
use orchestrator_core::state::{
    AttemptStatus, FailureReason, NodeStatus, Phase, PhaseStatus, PlanRecord, StateChange,
};
use orchestrator_core::PlanRepository;

/// A plan of `jobs` independent shell jobs (no snapshot node: isolation none).
pub fn plan(jobs: usize) -> PlanRecord {
    let mut spec = PlanSpec::new(format!("plan of {jobs}")).isolation(Isolation::None);
    for i in 0..jobs {
        spec = spec.job(JobSpec::new(
            format!("job-{i:05}"),
            format!("Task {i}"),
            WorkSpec::shell(format!("echo {i}")),
        ));
    }
    let nodes = PlanGraph::build(&spec).expect("valid plan").node_count();
    PlanRecord::new(PlanId::random(), spec, PathBuf::from("/repo"), nodes, 1_000)
}

/// Change number `i` of an endless, always valid sequence on a plan of at least 3 nodes.
///
/// Every 50 changes, one node goes through a failing attempt and back to pending (11
/// changes); the others overwrite a session id or a commit, so the state stays small.
pub fn change(i: u64) -> StateChange {
    let at = 10_000 + i;
    let block = i / 50;
    let node = (block % 3) as usize;
    let step = i % 50;
    let status = |status| StateChange::Node { node, status, at };
    match step {
        0 => status(NodeStatus::Ready),
        1 => status(NodeStatus::Scheduled),
        2 => status(NodeStatus::Running),
        3 => StateChange::AttemptStarted {
            node,
            at,
            resume_from: None,
        },
        4 => StateChange::PhaseStarted {
            node,
            phase: Phase::Work,
            at,
        },
        5 => StateChange::Metrics {
            node,
            metrics: serde_json::json!({ "change": i }),
        },
        6 => StateChange::PhaseEnded {
            node,
            phase: Phase::Work,
            status: PhaseStatus::Failed,
            at,
            error: Some(format!("failure {i}")),
        },
        7 => StateChange::AttemptEnded {
            node,
            status: AttemptStatus::Failed,
            at,
            error: Some(format!("failure {i}")),
            reason: Some(FailureReason::PhaseFailed),
            failed_phase: Some(Phase::Work),
        },
        8 => status(NodeStatus::Failed),
        9 => StateChange::RetryRequested {
            node,
            resume_from: Some(Phase::Work),
            anew: true,
        },
        10 => status(NodeStatus::Pending),
        s if s % 2 == 0 => StateChange::Session {
            node: (i % 3) as usize,
            session_id: format!("session-{i}"),
        },
        _ => StateChange::Commit {
            node: (i % 3) as usize,
            commit: format!("{i:040x}"),
        },
    }
}

/// Size of the batch that starts at change `start` (1 to 4 changes).
pub fn batch_len(start: u64) -> u64 {
    1 + (start.wrapping_mul(2_654_435_761) >> 7) % 4
}

/// Changes `0..n` (and a few more: the last batch is whole) in the batches [`batch_len`]
/// makes.
pub fn batches(n: u64) -> Vec<std::ops::Range<u64>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let len = batch_len(i);
        out.push(i..i + len);
        i += len;
    }
    out
}

/// Applies changes `from..to` to `record`.
pub fn apply_range(record: &mut PlanRecord, from: u64, to: u64) {
    for i in from..to {
        record.apply(&change(i)).expect("fixture change applies");
    }
}

/// Appends [`full_run`] of `record`'s nodes to its plan in `store`; returns `record` with the
/// run applied, as the store should now hold it.
pub async fn append_full_run(store: &dyn PlanRepository, record: &PlanRecord) -> PlanRecord {
    let mut expected = record.clone();
    for batch in full_run(record.state.nodes.len()) {
        store
            .append(&record.state.id, &batch)
            .await
            .expect("append");
        for c in &batch {
            expected.apply(c).expect("applies");
        }
    }
    expected
}

/// The changes of a whole run of a plan of `nodes` independent nodes, batched the way an
/// engine would (1 to 50 changes per batch): 8 changes per node.
pub fn full_run(nodes: usize) -> Vec<Vec<StateChange>> {
    let mut all = Vec::with_capacity(nodes * 8);
    let window = 8usize;
    let mut at = 100_000u64;
    // Nodes run `window` at a time; each phase of the window is reported together.
    for chunk in (0..nodes).collect::<Vec<_>>().chunks(window) {
        at += 1;
        for &n in chunk {
            all.push(StateChange::Node {
                node: n,
                status: NodeStatus::Ready,
                at,
            });
        }
        for &n in chunk {
            all.push(StateChange::Node {
                node: n,
                status: NodeStatus::Scheduled,
                at,
            });
            all.push(StateChange::Node {
                node: n,
                status: NodeStatus::Running,
                at,
            });
            all.push(StateChange::AttemptStarted {
                node: n,
                at,
                resume_from: None,
            });
            all.push(StateChange::PhaseStarted {
                node: n,
                phase: Phase::Work,
                at,
            });
        }
        for &n in chunk {
            all.push(StateChange::PhaseEnded {
                node: n,
                phase: Phase::Work,
                status: PhaseStatus::Succeeded,
                at: at + 5,
                error: None,
            });
            all.push(StateChange::AttemptEnded {
                node: n,
                status: AttemptStatus::Succeeded,
                at: at + 5,
                error: None,
                reason: None,
                failed_phase: None,
            });
            all.push(StateChange::Node {
                node: n,
                status: NodeStatus::Succeeded,
                at: at + 5,
            });
        }
    }
    let mut batches = Vec::new();
    let mut rest = &all[..];
    let mut seed = 0x9E37_79B9u64;
    while !rest.is_empty() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (1 + (seed % 50) as usize).min(rest.len());
        batches.push(rest[..len].to_vec());
        rest = &rest[len..];
    }
    batches
}

/// A journal header as the store writes it (see `journal.rs`), at header `version`: 1 in
/// builds before binary records, the schema version + 1 since.
pub fn journal_header(version: u32, generation: u64) -> Vec<u8> {
    let mut h = b"ORCHJRNL".to_vec();
    h.extend(version.to_le_bytes());
    h.extend(generation.to_le_bytes());
    let crc = crc32fast::hash(&h);
    h.extend(crc.to_le_bytes());
    h
}

/// A record as the store wrote them before its binary encoding: the batch as a JSON array.
pub fn json_record(batch: &[StateChange]) -> Vec<u8> {
    let payload = serde_json::to_vec(batch).expect("json");
    let mut r = (payload.len() as u32).to_le_bytes().to_vec();
    r.extend(crc32fast::hash(&payload).to_le_bytes());
    r.extend(payload);
    r
}

/// The names in `dir`, sorted (hidden ones too).
pub fn files_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
