//! The crate's error type.

use std::path::PathBuf;

use crate::git::GitError;
use crate::ids::PlanId;
use crate::plan::{EditError, ValidationErrors};
use crate::repository::StoreError;
use crate::state::ApplyError;

mod problems;
pub use problems::{ConfigProblem, StateProblem};

/// Errors of the orchestrator core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The plan file could not be read or parsed.
    #[error("cannot parse plan {source_name}: {message}")]
    Parse {
        /// File name or `<input>`.
        source_name: String,
        /// Path inside the document (`jobs[2].work`) when known.
        path: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// The plan is invalid; every problem is listed.
    #[error("{0}")]
    Invalid(#[from] ValidationErrors),
    /// A plan id that the orchestrator does not know.
    #[error("plan {0} not found")]
    PlanNotFound(PlanId),
    /// A job reference (producerId, node id, unique job name or node-id prefix) that names no
    /// node of the plan.
    #[error(
        "plan {plan}: no job `{reference}`: name a producerId, a node id or a unique job name"
    )]
    JobNotFound {
        /// The plan searched.
        plan: PlanId,
        /// The reference as given.
        reference: String,
    },
    /// A job reference that names more than one node: a job name several jobs share, or a
    /// node-id prefix of several nodes.
    #[error(
        "plan {plan}: job {} `{reference}` is used by {} jobs ({}); name it by producerId instead",
        ambiguous_kind(.by_name),
        .matches.len(),
        .matches.join(", ")
    )]
    AmbiguousJob {
        /// The plan searched.
        plan: PlanId,
        /// The reference as given.
        reference: String,
        /// Whether it matched jobs' display names (else a prefix of their node ids).
        by_name: bool,
        /// The producerIds of the nodes it names, in plan order.
        matches: Vec<String>,
    },
    /// A plan-id prefix that more than one stored plan's id starts with.
    #[error(
        "`{reference}` matches {} plans ({}); give more of the id",
        .matches.len(),
        joined(.matches)
    )]
    AmbiguousPlan {
        /// The prefix as given.
        reference: String,
        /// The ids it matches.
        matches: Vec<PlanId>,
    },
    /// A stored plan whose dependency graph cannot be built again (its definition was
    /// damaged after it was validated).
    #[error("plan {plan}: the stored plan's graph is damaged: {source}")]
    DamagedGraph {
        /// The plan.
        plan: PlanId,
        /// What the graph build found.
        #[source]
        source: ValidationErrors,
    },
    /// An operation not allowed in the plan's or node's current state.
    #[error("plan {plan}: {problem}")]
    InvalidState {
        /// Plan.
        plan: PlanId,
        /// What is not allowed, and why.
        problem: StateProblem,
    },
    /// `approve`, `reject` or `answer` of a job that does not wait for that (SPEC §12).
    #[error("plan {plan}: job `{job}` {}; only a job waiting for {wanted} can be {verb}", waits_for(.status, .waiting_for))]
    NotWaiting {
        /// Plan.
        plan: PlanId,
        /// The job's producerId.
        job: String,
        /// Its status.
        status: crate::state::NodeStatus,
        /// What it waits for, when it waits.
        waiting_for: Option<crate::state::WaitingFor>,
        /// What the call needs it to wait for.
        wanted: crate::state::WaitingFor,
        /// The call: `approved`, `rejected` or `answered`.
        verb: &'static str,
    },
    /// An edit of a plan (scaffolding, reshape, update) was refused.
    #[error("plan {plan}: {source}")]
    Edit {
        /// Plan.
        plan: PlanId,
        /// Which edit and why.
        #[source]
        source: EditError,
    },
    /// A state change was rejected by the state machine.
    #[error("plan {plan}: {source}")]
    Transition {
        /// Plan.
        plan: PlanId,
        /// The rejected change.
        #[source]
        source: ApplyError,
    },
    /// The plan store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A git operation failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The builder was given inconsistent settings.
    #[error("invalid orchestrator configuration: {0}")]
    Config(ConfigProblem),
    /// I/O outside the store (reading a plan file, creating symlinks).
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done.
        operation: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The orchestrator was shut down.
    #[error("the orchestrator has shut down")]
    Shutdown,
}

impl Error {
    /// A stable machine name of the error's kind, for front ends that answer in data (the MCP
    /// server's `"error"` field): `parse`, `invalid`, `plan_not_found`, `job_not_found`,
    /// `ambiguous`, `damaged`, `invalid_state`, `edit`, `transition`, `locked` (another
    /// process owns the plan), `store`, `merge_conflict`, `protected_branch`, `git`, `config`,
    /// `io`, `shutdown`.
    ///
    /// ```
    /// use orchestrator_core::{Error, PlanId};
    /// assert_eq!(Error::PlanNotFound(PlanId::from("p")).kind(), "plan_not_found");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Parse { .. } => "parse",
            Error::Invalid(_) => "invalid",
            Error::PlanNotFound(_) => "plan_not_found",
            Error::JobNotFound { .. } => "job_not_found",
            Error::AmbiguousJob { .. } | Error::AmbiguousPlan { .. } => "ambiguous",
            Error::DamagedGraph { .. } => "damaged",
            Error::InvalidState { .. } => "invalid_state",
            Error::NotWaiting { .. } => "not_waiting",
            Error::Edit { .. } => "edit",
            Error::Transition { .. } => "transition",
            Error::Store(StoreError::Locked { .. }) => "locked",
            Error::Store(_) => "store",
            Error::Git(GitError::MergeConflict { .. }) => "merge_conflict",
            Error::Git(GitError::ProtectedBranch { .. }) => "protected_branch",
            Error::Git(_) => "git",
            Error::Config(_) => "config",
            Error::Io { .. } => "io",
            Error::Shutdown => "shutdown",
        }
    }

    /// Whether the caller's input is at fault — a bad plan, argument, plan id, job reference
    /// or answer, a job that does not wait for what was given, a protected target branch —
    /// rather than the state of things: front ends answer it as invalid input (the CLI's exit
    /// code 2).
    ///
    /// ```
    /// use orchestrator_core::{Error, PlanId};
    /// assert!(Error::PlanNotFound(PlanId::from("p")).is_bad_input());
    /// assert!(!Error::Shutdown.is_bad_input());
    /// ```
    pub fn is_bad_input(&self) -> bool {
        // A store the caller configured wrongly (a malformed database URL, say).
        if let Error::Store(StoreError::Io { source, .. }) = self {
            return source.kind() == std::io::ErrorKind::InvalidInput;
        }
        matches!(
            self,
            Error::Invalid(_)
                | Error::Parse { .. }
                | Error::PlanNotFound(_)
                | Error::JobNotFound { .. }
                | Error::AmbiguousJob { .. }
                | Error::AmbiguousPlan { .. }
                | Error::NotWaiting { .. }
                | Error::InvalidState {
                    problem: StateProblem::BadAnswer { .. },
                    ..
                }
                | Error::Store(StoreError::NotFound(_))
                | Error::Git(GitError::ProtectedBranch { .. })
        )
    }

    /// Whether the same call may succeed when tried again (transient store or git failures).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Store(e) => e.is_retryable(),
            Error::Git(e) => e.is_retryable(),
            _ => false,
        }
    }
}

/// What an ambiguous job reference matched: names or node-id prefixes.
fn ambiguous_kind(by_name: &bool) -> &'static str {
    if *by_name {
        "name"
    } else {
        "id prefix"
    }
}

/// Plan ids for a message, comma-separated.
fn joined(ids: &[PlanId]) -> String {
    ids.iter()
        .map(PlanId::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// "waits for approval", "waits for nothing (it is running)".
fn waits_for(
    status: &crate::state::NodeStatus,
    waiting_for: &Option<crate::state::WaitingFor>,
) -> String {
    match waiting_for {
        Some(w) => format!("waits for {w}"),
        None => format!("waits for nothing (it is {status})"),
    }
}
