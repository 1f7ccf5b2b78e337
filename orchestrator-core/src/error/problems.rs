//! The typed reasons inside [`Error::InvalidState`](super::Error::InvalidState) and
//! [`Error::Config`](super::Error::Config): what a caller branches on, each with the message a
//! person reads.

use crate::state::{NodeStatus, PlanStatus};

/// Why an operation is not allowed in the plan's or a job's current state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateProblem {
    /// The plan is archived.
    #[error("the plan is archived")]
    Archived,
    /// The plan is still being scaffolded (start, run).
    #[error("the plan is still being scaffolded; finalize it first")]
    Scaffolding,
    /// The plan is not being scaffolded (finalize).
    #[error("the plan is not being scaffolded")]
    NotScaffolding,
    /// The plan was canceled (start, resume, retry).
    #[error("the plan was canceled; recover it to run it again")]
    Canceled,
    /// The plan has ended (pause, resume of an ended plan).
    #[error("the plan has already ended ({status})")]
    Ended {
        /// Its status.
        status: PlanStatus,
    },
    /// A plan in this status cannot be reshaped or updated.
    #[error("a {status} plan cannot be changed")]
    Unchangeable {
        /// Its status.
        status: PlanStatus,
    },
    /// The plan's result is being delivered to the target branch.
    #[error("the plan is delivering its result to the target branch; it can no longer change")]
    Delivering,
    /// An edit would leave a started job as a leaf.
    #[error("job `{job}` is {status} and would become a leaf; keep a job depending on it")]
    WouldBecomeLeaf {
        /// The job's producerId.
        job: String,
        /// Its status.
        status: NodeStatus,
    },
    /// Force-fail of a job that neither runs nor waits.
    #[error(
        "job `{job}` is not running (it is {status}); only running or waiting jobs can be \
         force-failed"
    )]
    NotRunning {
        /// The job, as named.
        job: String,
        /// Its status.
        status: NodeStatus,
    },
    /// Retry of a job that did not fail.
    #[error("job `{job}` is {status}; only failed jobs can be retried")]
    NotFailed {
        /// The job, as named.
        job: String,
        /// Its status.
        status: NodeStatus,
    },
    /// Retry with nothing failed.
    #[error("there are no failed jobs to retry")]
    NothingToRetry,
    /// Retry with new work for the snapshot-validation job.
    #[error(
        "the snapshot-validation job runs the plan's verifyRi; its work cannot be replaced by retry"
    )]
    SnapshotWork,
    /// Recover of a plan that neither failed nor was canceled.
    #[error("only failed or canceled plans can be recovered; this one is {status}")]
    NotRecoverable {
        /// Its status.
        status: PlanStatus,
    },
    /// Archive of a plan that has not ended.
    #[error(
        "only ended plans (succeeded, failed, canceled) can be archived; this one is {status}"
    )]
    NotArchivable {
        /// Its status.
        status: PlanStatus,
    },
    /// An answer the job's question does not accept: empty, or not one of its choices.
    #[error("job `{job}`'s question does not accept that answer: {why}")]
    BadAnswer {
        /// The job's producerId.
        job: String,
        /// Why (naming the choices).
        why: String,
    },
    /// The stored state does not fit its plan (damage).
    #[error("stored state has {stored} nodes but its plan defines {defined}")]
    NodeCountMismatch {
        /// Nodes in the stored state.
        stored: usize,
        /// Nodes the plan defines.
        defined: usize,
    },
}

/// Why the orchestrator's configuration cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigProblem {
    /// A plan with worktree isolation on an orchestrator without a git layer.
    #[error(
        "this plan uses worktree isolation but the orchestrator has no git layer; add one with \
         OrchestratorBuilder::git, or set `isolation: none`"
    )]
    NoGitLayer,
    /// `global_capacity` of 0.
    #[error("global_capacity must be at least 1 (it bounds how many jobs run at once)")]
    NoCapacity,
    /// `event_buffer` of 0.
    #[error("event_buffer must be at least 1")]
    NoEventBuffer,
    /// A runner registered under an empty kind.
    #[error("runner kind {kind:?} is empty")]
    EmptyRunnerKind {
        /// The kind as given.
        kind: String,
    },
    /// The process capacity could not be made.
    #[error("{0}")]
    Capacity(String),
}
