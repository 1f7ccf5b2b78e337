//! The crate's error type: what can go wrong before or around a supervised process.

use std::io;
use std::path::PathBuf;

use orchestrator_core::runner::WorkFailure;
use orchestrator_core::state::FailureReason;

/// Why a process could not be started or supervised, or a session operation failed.
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
    /// [`Sessions`](crate::session::Sessions) were built without a git layer.
    #[error("Sessions need a git layer: call .git(orchestrator_git::Git2Operations::new()) on the builder")]
    NoGitLayer,
    /// No session has this id (or id prefix).
    #[error("unknown session `{given}`{}", known_sessions(known))]
    UnknownSession {
        /// What was given.
        given: String,
        /// The sessions that exist, comma-separated (may be empty).
        known: String,
    },
    /// An id prefix that fits more than one session.
    #[error("session `{given}` is ambiguous: it fits {matches}")]
    AmbiguousSession {
        /// What was given.
        given: String,
        /// The sessions it fits, comma-separated.
        matches: String,
    },
    /// A session id that cannot be one.
    #[error(
        "invalid session id `{id}`: use 1 to 64 letters, digits, `-` or `_`, not starting with `-`"
    )]
    InvalidSessionId {
        /// The id.
        id: String,
    },
    /// A session of this id exists already.
    #[error("session `{id}` exists already")]
    SessionExists {
        /// The id.
        id: String,
    },
    /// The session is closed.
    #[error("session `{id}` is closed; it takes no more turns (fork it to go on)")]
    SessionClosed {
        /// The id.
        id: String,
    },
    /// Another process (or task) is running a turn of the session.
    #[error("session `{id}` is running a turn in another process{}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    SessionBusy {
        /// The id.
        id: String,
        /// The holder's process id, when known.
        pid: Option<u32>,
    },
    /// A turn that does not exist (or has no checkpoint).
    #[error("session `{id}` has no turn {turn} to go back to; it has turns {turns}")]
    NoSuchTurn {
        /// The session.
        id: String,
        /// The turn asked for.
        turn: u32,
        /// The turns it has (with checkpoints), comma-separated.
        turns: String,
    },
    /// The session runs without a worktree: no checkpoints.
    #[error("session `{id}` runs without a worktree (isolation none): it has no checkpoints to {action}")]
    NoCheckpoints {
        /// The session.
        id: String,
        /// What was asked (`revert`, `fork`).
        action: &'static str,
    },
    /// The session's worktree is gone.
    #[error("the worktree of session `{id}` ({}) is gone", dir.display())]
    WorktreeGone {
        /// The session.
        id: String,
        /// Where it was.
        dir: PathBuf,
    },
    /// Steering a session that is not running a turn.
    #[error("session `{id}` is not running a turn; steer it while `send` runs, or send the message as the next prompt")]
    NotRunning {
        /// The session.
        id: String,
    },
    /// No open permission request of this id in the session.
    #[error("session `{id}` has no open permission request `{request}`")]
    UnknownPermissionRequest {
        /// The session.
        id: String,
        /// The request id given.
        request: String,
    },
    /// A session's agent is not registered.
    #[error("unknown agent `{agent}`; known agents: {known}")]
    UnknownAgent {
        /// The agent asked for.
        agent: String,
        /// The registered ones.
        known: String,
    },
    /// Reading or writing the session store (or a session's files) failed.
    #[error("session store {}: {source}", path.display())]
    SessionStore {
        /// The file or folder.
        path: PathBuf,
        /// What the operating system (or the parser) said.
        #[source]
        source: io::Error,
    },
    /// A turn's agent failed; the worktree and conversation are back at the last checkpoint.
    #[error("turn {turn} of session `{id}` failed; the session is back at its last checkpoint: {message}")]
    TurnFailed {
        /// The session.
        id: String,
        /// The turn.
        turn: u32,
        /// What went wrong.
        message: String,
    },
    /// A plugin file (SPEC §15) that cannot be used: it names the file, and the field and
    /// line at fault where there is one.
    #[error("plugin file {}{}: {}{message}", file.display(), at_line(*line), in_field(field.as_deref()))]
    Plugin {
        /// The file (or folder) at fault.
        file: PathBuf,
        /// The field at fault (`tools`, `mcpServers.github.url`, ...), when one is.
        field: Option<String>,
        /// The line (1-based), when known.
        line: Option<usize>,
        /// What is wrong with it.
        message: String,
    },
    /// A plugin file or folder could not be read.
    #[error("plugin file {}: cannot read it: {source}", path.display())]
    PluginRead {
        /// The file or folder.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A git operation of a session failed.
    #[error("{what}: {source}")]
    SessionGit {
        /// What the session was doing.
        what: String,
        /// What git said.
        #[source]
        source: orchestrator_core::git::GitError,
    },
}

fn known_sessions(known: &str) -> String {
    if known.is_empty() {
        "; there are no sessions".to_owned()
    } else {
        format!("; sessions: {known}")
    }
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(", line {l}")).unwrap_or_default()
}

fn in_field(field: Option<&str>) -> String {
    field.map(|f| format!("field `{f}`: ")).unwrap_or_default()
}

impl Error {
    /// Whether the error is the caller's input at fault — a malformed plugin file or folder,
    /// an unknown session or agent, ... — as opposed to the machine or a run (hosts map it to
    /// "invalid input", the CLI's exit code 2).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Error::Plugin { .. }
                | Error::PluginRead { .. }
                | Error::UnknownSession { .. }
                | Error::AmbiguousSession { .. }
                | Error::InvalidSessionId { .. }
                | Error::SessionClosed { .. }
                | Error::NoSuchTurn { .. }
                | Error::NoCheckpoints { .. }
                | Error::WorktreeGone { .. }
                | Error::NotRunning { .. }
                | Error::SessionBusy { .. }
                | Error::UnknownAgent { .. }
                | Error::CwdEscapes { .. }
        )
    }

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
