//! Node and plan statuses, phases, and the node transition table of SPEC §3.
//!
//! The statuses and phases that changes carry (and [`AttemptStatus`], defined with the
//! attempt) also have stable one-byte codes (`code()`, `from_code()`) for compact stored
//! encodings.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::state::AttemptStatus;

/// Status of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NodeStatus {
    /// Waiting for dependencies.
    Pending,
    /// All dependencies succeeded; waiting for capacity.
    Ready,
    /// Picked by the scheduler; its executor is starting.
    Scheduled,
    /// Executing its phases.
    Running,
    /// All phases passed.
    Succeeded,
    /// A phase failed.
    Failed,
    /// A dependency (transitively) failed.
    Blocked,
    /// The plan was canceled.
    Canceled,
    /// Split under context pressure; finishes as succeeded or failed.
    CompletedSplit,
    /// Held on one durable condition ([`crate::state::Waiting`]: an approval, a timer, an
    /// answer, children) without a process, a thread or a worktree lock.
    Waiting,
}

impl NodeStatus {
    /// Every status, in table order.
    pub const ALL: [NodeStatus; 10] = [
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

    /// Whether `self -> to` is in the transition table of SPEC §3 (retry's `failed -> pending`
    /// and the unblocking `blocked -> pending` included).
    pub fn can_transition_to(self, to: NodeStatus) -> bool {
        use NodeStatus::*;
        matches!(
            (self, to),
            (Pending, Ready | Blocked | Canceled)
                | (Ready, Scheduled | Blocked | Canceled)
                | (Scheduled, Running | Failed | Canceled)
                | (Running, Succeeded | Failed | Canceled | CompletedSplit)
                | (CompletedSplit, Succeeded | Failed | Canceled)
                | (Ready | Running, Waiting)
                | (Waiting, Ready | Failed | Canceled)
                | (Failed, Pending)
                | (Blocked, Pending)
        )
    }

    /// No further progress without a retry: succeeded, failed, blocked or canceled.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            NodeStatus::Succeeded | NodeStatus::Failed | NodeStatus::Blocked | NodeStatus::Canceled
        )
    }

    /// Holding an executor: scheduled, running or completed_split.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            NodeStatus::Scheduled | NodeStatus::Running | NodeStatus::CompletedSplit
        )
    }

    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Pending => "pending",
            NodeStatus::Ready => "ready",
            NodeStatus::Scheduled => "scheduled",
            NodeStatus::Running => "running",
            NodeStatus::Succeeded => "succeeded",
            NodeStatus::Failed => "failed",
            NodeStatus::Blocked => "blocked",
            NodeStatus::Canceled => "canceled",
            NodeStatus::CompletedSplit => "completed_split",
            NodeStatus::Waiting => "waiting",
        }
    }
}

impl fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Status of a plan, derived from its nodes (see [`crate::state::PlanState::status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PlanStatus {
    /// Being assembled job by job; not runnable yet.
    Scaffolding,
    /// Created, not started.
    Pending,
    /// Jobs are running or ready.
    Running,
    /// Paused while jobs still run.
    Pausing,
    /// Paused; nothing runs.
    Paused,
    /// Every node succeeded.
    Succeeded,
    /// Ended with failed or blocked nodes.
    Failed,
    /// Canceled.
    Canceled,
    /// Archived: worktrees and branches removed, state kept.
    Archived,
    /// Nothing runs or is ready, and a job waits (for a person, a timer, ...): SPEC §12.
    Waiting,
}

impl PlanStatus {
    /// The plan has ended (nothing will run without a retry, resume or recovery).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            PlanStatus::Succeeded
                | PlanStatus::Failed
                | PlanStatus::Canceled
                | PlanStatus::Archived
        )
    }

    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Scaffolding => "scaffolding",
            PlanStatus::Pending => "pending",
            PlanStatus::Running => "running",
            PlanStatus::Pausing => "pausing",
            PlanStatus::Paused => "paused",
            PlanStatus::Succeeded => "succeeded",
            PlanStatus::Failed => "failed",
            PlanStatus::Canceled => "canceled",
            PlanStatus::Archived => "archived",
            PlanStatus::Waiting => "waiting",
        }
    }
}

impl fmt::Display for PlanStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The seven phases of the job pipeline, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Phase {
    /// Forward integration: worktree at the first dependency, other dependencies merged in.
    #[serde(alias = "mergeFi", alias = "merge_fi")]
    MergeFi,
    /// Symlinks and `worktreeInit`.
    Setup,
    /// Optional checks before the work.
    Prechecks,
    /// The work itself.
    Work,
    /// Stage and commit.
    Commit,
    /// Optional checks after the commit.
    Postchecks,
    /// Reverse integration into the snapshot branch (leaves) or the target (snapshot node).
    #[serde(alias = "mergeRi", alias = "merge_ri")]
    MergeRi,
}

impl Phase {
    /// All phases in pipeline order.
    pub const ALL: [Phase; 7] = [
        Phase::MergeFi,
        Phase::Setup,
        Phase::Prechecks,
        Phase::Work,
        Phase::Commit,
        Phase::Postchecks,
        Phase::MergeRi,
    ];

    /// The kebab-case name used in JSON, logs and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::MergeFi => "merge-fi",
            Phase::Setup => "setup",
            Phase::Prechecks => "prechecks",
            Phase::Work => "work",
            Phase::Commit => "commit",
            Phase::Postchecks => "postchecks",
            Phase::MergeRi => "merge-ri",
        }
    }

    /// Parses a phase name (`merge-fi`, `mergeFi`, `merge_fi` ...).
    pub fn parse(s: &str) -> Option<Phase> {
        let norm: String = s
            .chars()
            .filter(|c| *c != '-' && *c != '_')
            .collect::<String>()
            .to_ascii_lowercase();
        Phase::ALL
            .into_iter()
            .find(|p| p.as_str().replace('-', "") == norm)
    }

    /// Where a retry of a failure in this phase resumes: a failed commit re-runs the work.
    pub fn retry_from(self) -> Phase {
        match self {
            Phase::Commit => Phase::Work,
            p => p,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Outcome of one phase in one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PhaseStatus {
    /// Started, not ended.
    Running,
    /// Passed.
    Succeeded,
    /// Failed.
    Failed,
    /// Not needed (no spec, not a leaf, completed in an earlier attempt).
    Skipped,
    /// Stopped by cancel, pause or force-fail.
    Canceled,
}

/// Why an attempt failed, as data (never parsed out of messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureReason {
    /// A phase returned an error.
    PhaseFailed,
    /// Merge conflict in merge-fi or merge-ri.
    MergeConflict,
    /// The commit phase found no changes and none were expected.
    NoChanges,
    /// A timeout expired.
    Timeout,
    /// Force-failed by a user.
    ForceFailed,
    /// The process running it died (found `running` on start).
    Crashed,
    /// The node could not be started.
    StartupError,
    /// Canceled while running.
    Canceled,
    /// A person rejected it while it waited for approval.
    Rejected,
    /// A composite job's controller failed it (SPEC §12): a sub-job failed, a split manifest
    /// was malformed, or its decision could not be applied.
    CompositeFailed,
    /// A sub-job's reply broke its output contract (SPEC §13: a missing block, a wrong
    /// signature, a malformed field, `Status: blocked`).
    Contract,
}

/// Gives each listed enum a stable one-byte code per variant, `code()` and `from_code()`, from
/// one table: the compact encodings of stores (the file store's journal) write these bytes.
///
/// The codes are a file format: never change or reuse one, and give a new variant the next
/// free code. Leaving a variant out of its table does not compile.
macro_rules! stable_codes {
    ($($ty:ident { $($variant:ident = $code:literal),+ $(,)? })+) => {$(
        impl $ty {
            /// This variant's stable one-byte code (stored in files: it never changes).
            pub const fn code(self) -> u8 {
                match self {
                    $($ty::$variant => $code,)+
                }
            }

            /// The variant of a stable code; `None` for a code this build does not know.
            pub const fn from_code(code: u8) -> Option<$ty> {
                match code {
                    $($code => Some($ty::$variant),)+
                    _ => None,
                }
            }

            /// Every variant, in the order of its table (for the tests).
            #[cfg(test)]
            const CODED: &'static [$ty] = &[$($ty::$variant),+];
        }
    )+};
}

stable_codes! {
    NodeStatus {
        Pending = 0,
        Ready = 1,
        Scheduled = 2,
        Running = 3,
        Succeeded = 4,
        Failed = 5,
        Blocked = 6,
        Canceled = 7,
        CompletedSplit = 8,
        Waiting = 9,
    }
    Phase {
        MergeFi = 0,
        Setup = 1,
        Prechecks = 2,
        Work = 3,
        Commit = 4,
        Postchecks = 5,
        MergeRi = 6,
    }
    PhaseStatus {
        Running = 0,
        Succeeded = 1,
        Failed = 2,
        Skipped = 3,
        Canceled = 4,
    }
    AttemptStatus {
        Running = 0,
        Succeeded = 1,
        Failed = 2,
        Canceled = 3,
    }
    FailureReason {
        PhaseFailed = 0,
        MergeConflict = 1,
        NoChanges = 2,
        Timeout = 3,
        ForceFailed = 4,
        Crashed = 5,
        StartupError = 6,
        Canceled = 7,
        Rejected = 8,
        CompositeFailed = 9,
        Contract = 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code names one variant and back, and the codes number the table from 0, so
    /// each variant has its own.
    fn check<T: Copy + PartialEq + fmt::Debug>(
        table: &[T],
        code: fn(T) -> u8,
        from_code: fn(u8) -> Option<T>,
    ) {
        let codes: Vec<u8> = table.iter().map(|&v| code(v)).collect();
        let numbered: Vec<u8> = (0..table.len())
            .filter_map(|i| u8::try_from(i).ok())
            .collect();
        assert_eq!(codes, numbered, "{table:?}");
        for c in 0..=u8::MAX {
            let v = from_code(c);
            assert_eq!(v, table.get(usize::from(c)).copied(), "code {c}");
            assert!(v.is_none_or(|v| code(v) == c), "code {c}");
        }
    }

    #[test]
    fn stable_codes_round_trip_are_unique_and_never_change() {
        // Stored files hold these codes: a table's order is its codes, append only.
        check(NodeStatus::CODED, NodeStatus::code, NodeStatus::from_code);
        assert_eq!(NodeStatus::CODED, NodeStatus::ALL);
        check(Phase::CODED, Phase::code, Phase::from_code);
        assert_eq!(Phase::CODED, Phase::ALL);
        check(
            PhaseStatus::CODED,
            PhaseStatus::code,
            PhaseStatus::from_code,
        );
        check(
            AttemptStatus::CODED,
            AttemptStatus::code,
            AttemptStatus::from_code,
        );
        check(
            FailureReason::CODED,
            FailureReason::code,
            FailureReason::from_code,
        );
        assert_eq!(FailureReason::CODED.len(), 11);
        assert_eq!(FailureReason::from_code(10), Some(FailureReason::Contract));
    }
}
