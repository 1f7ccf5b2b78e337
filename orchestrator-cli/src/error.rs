//! Exit codes and the error type every command returns.

use std::fmt;

use orchestrator_core::{Error, GitError, StoreError};

/// The exit codes of SPEC §5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The plan succeeded, or the command was done.
    Ok = 0,
    /// The plan failed, was canceled, has blocked jobs, or stopped paused.
    PlanNotSucceeded = 1,
    /// Invalid input: a bad plan file, argument, plan id or job reference.
    Invalid = 2,
    /// Anything else.
    Other = 3,
    /// `--until-waiting`: the plan waits for a person (SPEC §12).
    Waiting = 4,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// A failed command: what to tell the user and which exit code to use.
#[derive(Debug)]
pub struct CliError {
    /// Exit code.
    pub exit: Exit,
    /// Message for stderr (may span lines).
    pub message: String,
}

impl CliError {
    /// Invalid input (exit 2).
    pub fn invalid(message: impl Into<String>) -> Self {
        CliError {
            exit: Exit::Invalid,
            message: message.into(),
        }
    }

    /// Any other error (exit 3).
    pub fn other(message: impl Into<String>) -> Self {
        CliError {
            exit: Exit::Other,
            message: message.into(),
        }
    }

    /// Prefixes the message with what was being done.
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        let exit = if e.is_bad_input() {
            Exit::Invalid
        } else {
            Exit::Other
        };
        CliError {
            exit,
            message: e.to_string(),
        }
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        CliError::from(Error::Store(e))
    }
}

impl From<GitError> for CliError {
    fn from(e: GitError) -> Self {
        CliError::from(Error::Git(e))
    }
}

/// Result of a command.
pub type CliResult<T = Exit> = Result<T, CliError>;

impl From<orchestrator_core::plan::ValidationErrors> for CliError {
    fn from(e: orchestrator_core::plan::ValidationErrors) -> Self {
        CliError::invalid(e.to_string())
    }
}

impl From<orchestrator_agents::Error> for CliError {
    /// Session errors (SPEC §14): what the user named that does not fit is invalid input
    /// (exit 2), a failed turn is exit 1 (the session is back at its last checkpoint), the rest
    /// exit 3.
    fn from(e: orchestrator_agents::Error) -> Self {
        use orchestrator_agents::Error as E;
        let exit = match &e {
            E::TurnFailed { .. } => Exit::PlanNotSucceeded,
            e if e.is_bad_input() => Exit::Invalid,
            _ => Exit::Other,
        };
        CliError {
            exit,
            message: e.to_string(),
        }
    }
}
