//! The crate's error type.

use std::path::PathBuf;

use crate::git::GitError;
use crate::ids::PlanId;
use crate::plan::{EditError, ValidationErrors};
use crate::repository::StoreError;
use crate::state::ApplyError;

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
    /// A job reference that resolves to no node (or to more than one).
    #[error("plan {plan}: {message}")]
    JobNotFound {
        /// Plan.
        plan: PlanId,
        /// What was looked for and why it failed.
        message: String,
    },
    /// An operation not allowed in the plan's or node's current state.
    #[error("plan {plan}: {message}")]
    InvalidState {
        /// Plan.
        plan: PlanId,
        /// What is not allowed, and why.
        message: String,
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
    Config(String),
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
    /// Whether the same call may succeed when tried again (transient store or git failures).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Store(e) => e.is_retryable(),
            Error::Git(e) => e.is_retryable(),
            _ => false,
        }
    }
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
