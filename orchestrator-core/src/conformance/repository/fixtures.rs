//! The conformance suite's fixtures: the diamond plan and a realistic run of it, in the
//! batches an engine would append.

use std::path::PathBuf;

use crate::ids::{Millis, NodeIndex, PlanId};
use crate::plan::{JobSpec, PlanGraph, PlanSpec, WorkSpec};
use crate::state::{
    AttemptStatus, FailureReason, NodeStatus, Phase, PhaseStatus, PlanRecord, StateChange,
};

pub(super) const T0: Millis = 1_700_000_000_000;

/// `a`; `b` and `c` after `a`; `d` after `b` and `c`; node 4 is the snapshot node.
pub(super) fn diamond_spec(name: &str) -> PlanSpec {
    PlanSpec::new(name)
        .job(JobSpec::new("aaa", "Build a", WorkSpec::shell("make a")))
        .job(
            JobSpec::new(
                "bbb",
                "Build b",
                WorkSpec::agent("Write b.\nKeep it short."),
            )
            .depends_on(["aaa"])
            .prechecks(WorkSpec::shell("test -f a")),
        )
        .job(
            JobSpec::new("ccc", "Build c", WorkSpec::process("cargo", ["build"]))
                .depends_on(["aaa"])
                .postchecks(WorkSpec::shell("cargo test")),
        )
        .job(JobSpec::new("ddd", "Join", WorkSpec::shell("make d")).depends_on(["bbb", "ccc"]))
}

pub(super) fn record_at(name: &str, at: Millis) -> PlanRecord {
    let spec = diamond_spec(name);
    let count = match PlanGraph::build(&spec) {
        Ok(graph) => graph.node_count(),
        Err(e) => panic!("conformance fixture is invalid: {e:?}"),
    };
    PlanRecord::new(
        PlanId::random(),
        spec,
        PathBuf::from("/work/repo"),
        count,
        at,
    )
}

pub(super) fn record(name: &str) -> PlanRecord {
    record_at(name, T0)
}

pub(super) fn node(at: Millis, n: NodeIndex, status: NodeStatus) -> StateChange {
    StateChange::Node {
        node: n,
        status,
        at,
    }
}

fn phase(n: NodeIndex, p: Phase, at: Millis, status: PhaseStatus) -> [StateChange; 2] {
    [
        StateChange::PhaseStarted {
            node: n,
            phase: p,
            at,
        },
        StateChange::PhaseEnded {
            node: n,
            phase: p,
            status,
            at: at + 1,
            error: (status == PhaseStatus::Failed).then(|| format!("{p} failed on node {n}")),
        },
    ]
}

/// pending -> ready -> scheduled -> running, with an attempt started.
pub(super) fn start_node(n: NodeIndex, at: Millis, resume_from: Option<Phase>) -> Vec<StateChange> {
    let mut v = Vec::new();
    if resume_from.is_none() {
        v.push(node(at, n, NodeStatus::Ready));
    }
    v.extend([
        node(at + 1, n, NodeStatus::Scheduled),
        node(at + 2, n, NodeStatus::Running),
        StateChange::AttemptStarted {
            node: n,
            at: at + 3,
            resume_from,
        },
        StateChange::Worktree {
            node: n,
            path: Some(PathBuf::from(format!("/work/repo/.worktrees/node{n}"))),
            base_commit: Some(format!("base{n}")),
        },
    ]);
    v
}

/// A whole successful attempt from `from` to merge-ri, ending in `succeeded`.
pub(super) fn succeed_node(n: NodeIndex, at: Millis, from: Phase) -> Vec<StateChange> {
    let mut v = Vec::new();
    let mut t = at;
    for p in Phase::ALL.into_iter().filter(|p| *p >= from) {
        let status = if p == Phase::Prechecks {
            PhaseStatus::Skipped
        } else {
            PhaseStatus::Succeeded
        };
        v.extend(phase(n, p, t, status));
        if p == Phase::Work {
            v.push(StateChange::Session {
                node: n,
                session_id: format!("session-{n}"),
            });
            v.push(StateChange::Metrics {
                node: n,
                metrics: serde_json::json!({"tokensIn": 1200 + n, "tokensOut": 300, "turns": 3}),
            });
        }
        if p == Phase::Commit {
            v.push(StateChange::Commit {
                node: n,
                commit: format!("{n:040x}"),
            });
        }
        t += 10;
    }
    v.push(StateChange::AttemptEnded {
        node: n,
        status: AttemptStatus::Succeeded,
        at: t,
        error: None,
        reason: None,
        failed_phase: None,
    });
    v.push(node(t + 1, n, NodeStatus::Succeeded));
    v
}

/// `changes` with the steps the engine records as one change joined the way it joins them
/// ([`StateChange::Launched`], [`StateChange::PhaseRan`], [`StateChange::Succeeded`]).
pub(super) fn joined(changes: Vec<StateChange>) -> Vec<StateChange> {
    let mut out: Vec<StateChange> = Vec::new();
    for change in changes {
        out.push(change);
        let (joined, steps) = match out.as_slice() {
            [.., StateChange::Node {
                node: s,
                status: NodeStatus::Scheduled,
                ..
            }, StateChange::Node {
                node: r,
                status: NodeStatus::Running,
                ..
            }, StateChange::AttemptStarted {
                node,
                at,
                resume_from,
            }] if s == node && r == node => (
                StateChange::Launched {
                    node: *node,
                    at: *at,
                    resume_from: *resume_from,
                },
                3,
            ),
            [.., StateChange::PhaseStarted { node, phase, at }, StateChange::PhaseEnded {
                node: ended_node,
                phase: ended,
                status,
                at: ended_at,
                error,
            }] if (node, phase) == (ended_node, ended) => (
                StateChange::PhaseRan {
                    node: *node,
                    phase: *phase,
                    status: *status,
                    started_at: *at,
                    at: *ended_at,
                    error: error.clone(),
                },
                2,
            ),
            [.., StateChange::AttemptEnded {
                node,
                status: AttemptStatus::Succeeded,
                error: None,
                reason: None,
                failed_phase: None,
                ..
            }, StateChange::Node {
                node: n,
                status: NodeStatus::Succeeded,
                at,
            }] if n == node => (
                StateChange::Succeeded {
                    node: *node,
                    at: *at,
                },
                2,
            ),
            _ => continue,
        };
        out.truncate(out.len() - steps);
        out.push(joined);
    }
    out
}

/// A realistic run of the diamond plan, in batches of the sizes an engine would produce:
/// `a` succeeds; `b` fails in its work and blocks `d` and the snapshot node; a pause and resume;
/// `b` is retried with new work from the work phase; everything then succeeds.
pub(super) fn diamond_run() -> Vec<Vec<StateChange>> {
    let mut batches = vec![vec![StateChange::PlanStarted {
        at: T0 + 10,
        base_commit: Some("b".repeat(40)),
        target_branch: Some("feature/x".into()),
        snapshot_branch: Some("orchestrator/snapshot/x".into()),
    }]];
    batches.push(start_node(0, T0 + 20, None));
    batches.push(succeed_node(0, T0 + 30, Phase::MergeFi));
    let mut b = start_node(1, T0 + 200, None);
    // c's changes are recorded as the engine joins them.
    b.extend(joined(start_node(2, T0 + 200, None)));
    batches.push(b);
    // b fails in its work phase.
    let mut fail = Vec::new();
    for p in [Phase::MergeFi, Phase::Setup, Phase::Prechecks] {
        fail.extend(phase(1, p, T0 + 300, PhaseStatus::Succeeded));
    }
    fail.extend(phase(1, Phase::Work, T0 + 310, PhaseStatus::Failed));
    batches.push(fail);
    batches.push(vec![
        StateChange::AttemptEnded {
            node: 1,
            status: AttemptStatus::Failed,
            at: T0 + 320,
            error: Some("exit status 2: cannot write b".into()),
            reason: Some(FailureReason::PhaseFailed),
            failed_phase: Some(Phase::Work),
        },
        node(T0 + 320, 1, NodeStatus::Failed),
        node(T0 + 320, 3, NodeStatus::Blocked),
        node(T0 + 320, 4, NodeStatus::Blocked),
    ]);
    batches.push(vec![StateChange::Paused { at: T0 + 330 }]);
    batches.push(joined(succeed_node(2, T0 + 340, Phase::MergeFi)));
    batches.push(vec![StateChange::Resumed { at: T0 + 500 }]);
    // Retry b with new work, from the work phase; d and the snapshot node are unblocked.
    batches.push(vec![
        StateChange::SpecsReplaced {
            node: 1,
            work: Some(Box::new(WorkSpec::agent(
                "Write b, and create the folder first.",
            ))),
            prechecks: None,
            postchecks: Some(Box::new(WorkSpec::shell("test -f b"))),
        },
        StateChange::RetryRequested {
            node: 1,
            resume_from: Some(Phase::Work),
            anew: true,
        },
        node(T0 + 510, 1, NodeStatus::Pending),
        node(T0 + 510, 3, NodeStatus::Pending),
        node(T0 + 510, 4, NodeStatus::Pending),
        node(T0 + 511, 1, NodeStatus::Ready),
    ]);
    batches.push(start_node(1, T0 + 520, Some(Phase::Work)));
    batches.push(succeed_node(1, T0 + 530, Phase::Work));
    for n in [3, 4] {
        let mut v = start_node(n, T0 + 700 + n as u64 * 100, None);
        v.extend(succeed_node(n, T0 + 710 + n as u64 * 100, Phase::MergeFi));
        batches.push(v);
    }
    batches.push(vec![StateChange::Ended { at: T0 + 2000 }]);
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_holds_each_change_the_engine_joins() {
        let changes: Vec<StateChange> = diamond_run().into_iter().flatten().collect();
        let has = |f: fn(&StateChange) -> bool| changes.iter().any(f);
        assert!(has(|c| matches!(c, StateChange::Launched { node: 2, .. })));
        assert!(has(|c| matches!(c, StateChange::PhaseRan { node: 2, .. })));
        assert!(has(|c| matches!(c, StateChange::Succeeded { node: 2, .. })));
        // The other nodes' steps stay one change each.
        assert!(has(|c| matches!(
            c,
            StateChange::AttemptStarted { node: 0, .. }
        )));
    }
}
