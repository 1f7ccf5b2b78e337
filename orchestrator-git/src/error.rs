//! Mapping libgit2 and I/O failures to [`GitError`].

use std::path::Path;

use git2::ErrorCode;
use orchestrator_core::git::GitError;

/// Converts a libgit2 error met while doing `operation`.
pub(crate) fn git(operation: &str, e: git2::Error) -> GitError {
    match e.code() {
        ErrorCode::NotFound | ErrorCode::UnbornBranch => GitError::NotFound {
            what: format!("{operation}: {}", e.message()),
        },
        ErrorCode::Locked => GitError::Other {
            operation: operation.to_string(),
            message: e.message().to_string(),
            retryable: true,
        },
        _ => GitError::Other {
            operation: operation.to_string(),
            message: e.message().to_string(),
            retryable: e.class() == git2::ErrorClass::Os,
        },
    }
}

/// Converts an I/O error on `path` met while doing `operation`.
pub(crate) fn io(operation: &str, path: &Path, e: std::io::Error) -> GitError {
    GitError::Other {
        operation: operation.to_string(),
        message: format!("{}: {e}", path.display()),
        retryable: matches!(
            e.kind(),
            std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
        ),
    }
}

/// `.map_err` shorthand for libgit2 results.
pub(crate) trait Context<T> {
    /// Maps the error with [`git`].
    fn ctx(self, operation: &str) -> Result<T, GitError>;
}

impl<T> Context<T> for Result<T, git2::Error> {
    fn ctx(self, operation: &str) -> Result<T, GitError> {
        self.map_err(|e| git(operation, e))
    }
}
