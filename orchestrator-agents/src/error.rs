//! The crate's error type: what can go wrong before or around a supervised process.

use std::io;
use std::path::PathBuf;

use orchestrator_core::runner::WorkFailure;
use orchestrator_core::state::FailureReason;

/// Why a process could not be started or supervised.
///
/// How the process itself ended (exit code, signal, timeout, cancel) is not an error of the
/// supervisor: that is an [`Outcome`](crate::Outcome).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The program was not found (on `PATH`, when it is a bare name).
    #[error("executable `{program}` was not found (looked up on the PATH given to it)")]
    ProgramNotFound {
        /// The program as it was asked for.
        program: String,
    },
    /// The program exists but could not be started.
    #[error("could not start `{program}`: {source}")]
    Spawn {
        /// The program as it was asked for.
        program: String,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// Waiting for the process failed.
    #[error("could not wait for `{program}`: {source}")]
    Wait {
        /// The program as it was asked for.
        program: String,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A spec's `cwd` leads outside the job's directory.
    #[error("cwd `{cwd}` leads outside the job directory {}", dir.display())]
    CwdEscapes {
        /// The `cwd` as written in the spec.
        cwd: String,
        /// The job directory it must stay in.
        dir: PathBuf,
    },
    /// A spec's `cwd` (or the job directory itself) does not exist or is not a directory.
    #[error("cwd `{cwd}` ({}) is not an existing directory: {source}", path.display())]
    CwdMissing {
        /// The `cwd` as written in the spec (`.` for the job directory itself).
        cwd: String,
        /// The path it resolved to.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// Whether trying again unchanged may succeed (a transient operating-system condition),
    /// as opposed to a problem of the spec or the machine that needs a person.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Spawn { source, .. } | Error::Wait { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::OutOfMemory
            ),
            _ => false,
        }
    }
}

impl From<Error> for WorkFailure {
    /// Starting problems (missing program, bad `cwd`) are [`FailureReason::StartupError`];
    /// anything else fails the phase.
    fn from(e: Error) -> Self {
        let reason = match e {
            Error::ProgramNotFound { .. } | Error::CwdEscapes { .. } | Error::CwdMissing { .. } => {
                FailureReason::StartupError
            }
            _ => FailureReason::PhaseFailed,
        };
        WorkFailure::new(e.to_string()).reason(reason)
    }
}
