//! Turning the client's and the pool's errors into [`StoreError`]s, by kind, never by text.
//!
//! - A lost or unobtainable connection, a server starting up or shutting down, too many
//!   connections, and the conflicts PostgreSQL itself asks to retry (serialization failure,
//!   deadlock) are [transient](StoreError::is_transient): `Io` of kind `Interrupted` (or
//!   `TimedOut` for a timeout), which the engine's [`Retrying`](orchestrator_core::repository::Retrying)
//!   wrapper tries again where that is safe.
//! - Anything else is a permanent `Io` of kind `Other` carrying the client's error as source.
//!
//! Call sites turn the SQL states they expect (a unique or foreign-key violation) into
//! `AlreadyExists` or `NotFound` before falling back to these.

use std::error::Error as _;
use std::io;
use std::path::Path;

use deadpool_postgres::PoolError;
use orchestrator_core::StoreError;
use tokio_postgres::error::SqlState;

/// Whether a failure of the client is momentary (see the module docs).
pub(crate) fn is_transient(e: &tokio_postgres::Error) -> bool {
    if let Some(code) = e.code() {
        return is_transient_state(code);
    }
    // No SQL state: the connection failed (closed, reset, refused, timed out) or the server
    // sent something the client could not read; only the former is momentary.
    e.is_closed() || io_source(e).is_some()
}

fn is_transient_state(code: &SqlState) -> bool {
    let class = code.code().get(..2);
    // 08: connection exception; 57P01-57P03: admin/crash shutdown, cannot connect now;
    // 53300: too many connections; 40001/40P01: serialization failure, deadlock.
    class == Some("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::TOO_MANY_CONNECTIONS
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
}

fn io_source(e: &tokio_postgres::Error) -> Option<&io::Error> {
    e.source().and_then(|s| s.downcast_ref::<io::Error>())
}

/// The SQL state of a failure, if the server sent one.
pub(crate) fn state(e: &tokio_postgres::Error) -> Option<&SqlState> {
    e.code()
}

/// A failure of `operation` on the store at `path`.
pub(crate) fn db(operation: &'static str, path: &Path, e: tokio_postgres::Error) -> StoreError {
    let kind = if !is_transient(&e) {
        io::ErrorKind::Other
    } else if io_source(&e).is_some_and(|s| s.kind() == io::ErrorKind::TimedOut) {
        io::ErrorKind::TimedOut
    } else {
        io::ErrorKind::Interrupted
    };
    StoreError::Io {
        operation,
        path: path.to_path_buf(),
        source: io::Error::new(kind, e),
    }
}

/// Whether a failure to get a connection from the pool is worth another try.
pub(crate) fn pool_is_transient(e: &PoolError) -> bool {
    match e {
        PoolError::Timeout(_) => true,
        PoolError::Backend(e) => is_transient(e),
        _ => false,
    }
}

/// A failure to get a connection for `operation`.
pub(crate) fn pool(operation: &'static str, path: &Path, e: PoolError) -> StoreError {
    match e {
        PoolError::Backend(e) => db(operation, path, e),
        PoolError::Timeout(_) => StoreError::Io {
            operation,
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::TimedOut, e),
        },
        other => StoreError::Io {
            operation,
            path: path.to_path_buf(),
            source: io::Error::other(other.to_string()),
        },
    }
}

/// A setting or argument the store cannot work with.
pub(crate) fn invalid(operation: &'static str, path: &Path, message: String) -> StoreError {
    StoreError::Io {
        operation,
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, message),
    }
}

/// Stored data that does not read back.
pub(crate) fn corrupt(path: &Path, message: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_states_are_transient() {
        for code in [
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::CONNECTION_FAILURE,
            SqlState::TOO_MANY_CONNECTIONS,
        ] {
            assert!(is_transient_state(&code), "{code:?}");
        }
        for code in [
            SqlState::UNIQUE_VIOLATION,
            SqlState::UNDEFINED_TABLE,
            SqlState::INSUFFICIENT_PRIVILEGE,
            SqlState::SYNTAX_ERROR,
        ] {
            assert!(!is_transient_state(&code), "{code:?}");
        }
    }

    #[test]
    fn invalid_input_is_permanent() {
        let e = invalid("connect", Path::new("postgres://h/db"), "bad".into());
        assert!(!e.is_transient() && !e.is_retryable());
    }
}
