//! The messages of the engine: what hosts ask of a plan's actor, what its node tasks report,
//! and the public request and report types that travel with them. A module of its own so that
//! the orchestrator, the actor and the node tasks depend on it and not on one another.

use std::path::PathBuf;

use tokio::sync::oneshot;

use crate::error::Result;
use crate::git::GitError;
use crate::ids::NodeIndex;
use crate::plan::{PlanEdit, WorkSpec};
use crate::state::{FailureReason, Heal, Phase, PlanRecord, StateChange};

/// Where an actor answers a host's request.
pub(crate) type Reply<T> = oneshot::Sender<Result<T>>;

/// A plan actor's inbox.
#[derive(Debug)]
pub(crate) enum Message {
    /// From a host.
    Host(HostRequest),
    /// From one of the plan's node tasks.
    Node(NodeProgress),
    /// The plan this one is chained to (`resumeAfterPlan`) succeeded.
    ChainSatisfied,
}

/// What a host asks of a plan (through [`crate::Orchestrator`]), each with where to answer.
#[derive(Debug)]
pub(crate) enum HostRequest {
    Start {
        reply: Reply<()>,
    },
    Pause {
        stop_running: bool,
        reply: Reply<()>,
    },
    Resume {
        reply: Reply<()>,
    },
    Cancel {
        reply: Reply<()>,
    },
    Retry {
        request: Box<RetryRequest>,
        reply: Reply<usize>,
    },
    ForceFail {
        job: String,
        reply: Reply<()>,
    },
    Approve {
        job: String,
        reply: Reply<()>,
    },
    Reject {
        job: String,
        reason: String,
        reply: Reply<()>,
    },
    Answer {
        job: String,
        answer: String,
        reply: Reply<()>,
    },
    Snapshot {
        reply: Reply<PlanRecord>,
    },
    Recover {
        reply: Reply<()>,
    },
    Archive {
        reply: Reply<ArchiveReport>,
    },
    Close {
        /// Record a pause (else just stop running jobs so they resume later).
        pause: bool,
        reply: Reply<()>,
    },
    Edit {
        edits: Vec<PlanEdit>,
        reply: Reply<()>,
    },
    Finalize {
        reply: Reply<()>,
    },
}

/// What a node task reports to its plan's actor.
#[derive(Debug)]
pub(crate) enum NodeProgress {
    /// Progress of a node task (phases, worktree, commit, session, metrics), in order, with
    /// the layout generation the task was launched in.
    Changes {
        gen: usize,
        changes: Vec<StateChange>,
    },
    /// A node task ended, with its last progress.
    Done {
        gen: usize,
        node: NodeIndex,
        changes: Vec<StateChange>,
        result: std::result::Result<RunEnd, NodeFailure>,
    },
}

/// Where a node's phases report the process groups their runners start: straight to the
/// plan's actor (not with the buffered progress), so the store knows them before the work gets
/// far. Only starts: the attempt's end clears them, which saves a message and a journal record
/// per process.
#[derive(Debug, Clone)]
pub(crate) struct ProcessReports {
    pub(crate) tx: tokio::sync::mpsc::UnboundedSender<Message>,
    /// The layout generation the node was launched in.
    pub(crate) gen: usize,
    pub(crate) node: NodeIndex,
}

impl ProcessReports {
    pub(crate) fn report(&self, pgid: u32, running: bool) {
        if running {
            let _ = self.tx.send(Message::Node(NodeProgress::Changes {
                gen: self.gen,
                changes: vec![StateChange::Process {
                    node: self.node,
                    pgid,
                    running,
                }],
            }));
        }
    }
}

/// How a node's run that did not fail ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// Its pipeline ran to the end: the node succeeded.
    Finished,
    /// It stopped on purpose, for the actor to go on from there.
    Held(Hold),
}

/// Why a node attempt failed.
#[derive(Debug, Clone)]
pub(crate) struct NodeFailure {
    pub(crate) message: String,
    pub(crate) reason: FailureReason,
    pub(crate) phase: Option<Phase>,
    /// A shell or process failure a healer may fix (its `round` is set by the actor).
    pub(crate) heal: Option<Box<Heal>>,
}

/// Why a run stopped before its end without failing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hold {
    /// An `approval: after` job's phases passed: it waits for a person.
    Approval,
    /// The work left a split manifest (its text) and its commit is made: the job splits.
    Split(String),
    /// Composite work (a team or a pipeline) has its commit: its controller takes over.
    Compose,
    /// The agent's turn ended to wait (SPEC §15): the node parks, its attempt open.
    Park(crate::tools::Park),
}

impl NodeFailure {
    pub(crate) fn new(phase: Phase, reason: FailureReason, message: impl Into<String>) -> Self {
        NodeFailure {
            message: message.into(),
            reason,
            phase: Some(phase),
            heal: None,
        }
    }

    pub(crate) fn git(phase: Phase, e: GitError) -> Self {
        let reason = match e {
            GitError::MergeConflict { .. } => FailureReason::MergeConflict,
            _ => FailureReason::PhaseFailed,
        };
        NodeFailure::new(phase, reason, e.to_string())
    }
}

/// What [`Orchestrator::archive`](crate::Orchestrator::archive) removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ArchiveReport {
    /// Worktrees removed.
    pub worktrees_removed: Vec<PathBuf>,
    /// Branches deleted.
    pub branches_deleted: Vec<String>,
    /// What could not be removed, and why (archiving goes on past these).
    pub warnings: Vec<String>,
}

/// What [`Orchestrator::retry`](crate::Orchestrator::retry) retries and how.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RetryRequest {
    /// Jobs to retry (producerId, node id or unique name); empty: every failed job.
    pub jobs: Vec<String>,
    /// Replacement work.
    pub work: Option<WorkSpec>,
    /// Replacement prechecks.
    pub prechecks: Option<WorkSpec>,
    /// Replacement postchecks.
    pub postchecks: Option<WorkSpec>,
    /// Remove the worktree and start over from merge-fi.
    pub clear_worktree: bool,
}

impl RetryRequest {
    /// Retry every failed job.
    pub fn all_failed() -> Self {
        RetryRequest::default()
    }

    /// Retry these jobs.
    pub fn jobs<I, S>(jobs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RetryRequest {
            jobs: jobs.into_iter().map(Into::into).collect(),
            ..RetryRequest::default()
        }
    }

    /// Replaces the work of the retried jobs.
    pub fn with_work(mut self, work: WorkSpec) -> Self {
        self.work = Some(work);
        self
    }

    /// Replaces the postchecks of the retried jobs.
    pub fn with_postchecks(mut self, spec: WorkSpec) -> Self {
        self.postchecks = Some(spec);
        self
    }

    /// Replaces the prechecks of the retried jobs.
    pub fn with_prechecks(mut self, spec: WorkSpec) -> Self {
        self.prechecks = Some(spec);
        self
    }

    /// Starts over from a fresh worktree.
    pub fn clear_worktree(mut self) -> Self {
        self.clear_worktree = true;
        self
    }
}
