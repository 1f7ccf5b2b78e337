//! Agent sessions (SPEC §14): one agent CLI's conversation in one worktree, turn by turn.
//!
//! - [`Sessions`] opens, runs and keeps the sessions of a repository: [`Sessions::create`]
//!   (agent, model, effort, base revision, isolation, [`PermissionPolicy`](crate::agent::PermissionPolicy)),
//!   [`Sessions::send`] (a turn; its [`SessionEvent`]s through [`Sessions::subscribe`]),
//!   [`Sessions::steer`], [`Sessions::set_model`], [`Sessions::revert`], [`Sessions::fork`],
//!   [`Sessions::close`] (optionally merging onto a branch).
//! - Checkpoints: after every turn that ended well the worktree is committed (no branch
//!   moves; the worktree's HEAD is detached) and `refs/orchestrator/sessions/<id>/turn-<n>`
//!   points at it (`turn-0` is the base); the CLI's state folder (its conversation) is copied
//!   to `<files>/<id>/turns/<n>/`. `revert N` restores both; `fork N` starts a new session
//!   from both.
//! - A turn that fails — the CLI failed, was stopped, or its process died (found by the next
//!   `send`) — is recorded as failed and the worktree and conversation go back to the last
//!   checkpoint.
//! - Storage: a [`SessionRepository`] — [`FileSessionRepository`] (`.orchestrator/sessions/`,
//!   the default), [`PgSessionRepository`] (the PostgreSQL store's database, shared by every
//!   machine reaching it) or [`MemorySessionRepository`]; one turn at a time per session,
//!   across processes (the second is refused with the first one's pid).
//!
//! # Steering
//!
//! [`Sessions::steer`] (and `orchestrator session steer`, from any process) drops the
//! message into the running turn's [`SteerInbox`]; the runner hands it over through the best
//! mechanism the CLI has:
//!
//! | CLI         | steering                                                                 |
//! |-------------|--------------------------------------------------------------------------|
//! | Claude Code | live: a session turn runs it with `--input-format stream-json`; the message interrupts the current step (`interrupt` control request) and follows as a user message, in the same process |
//! | Codex, Copilot CLI, Gemini CLI | they read no input while they work headless: the CLI is stopped and its session resumed with the message first, the files as the agent left them |
//!
//! Plan jobs' agent phases watch the same inbox in their worktree (stopped and resumed, for
//! every CLI), so `orchestrator session steer PLAN/JOB` reaches a running job's agent.
//!
//! # Asking the host
//!
//! A policy that asks (`ask`, or rules no rule of which matches a request) reaches the host
//! where the CLI can put its requests to it: Claude Code (`--permission-prompt-tool stdio`).
//! Each request is decided by the policy, and what it leaves to the host is a
//! [`SessionEvent::PermissionRequested`] answered by [`Sessions::answer_permission`] (the
//! agent waits for it). The other CLIs deny such requests and the turn's log says so.

#[cfg(feature = "testing")]
pub mod conformance;
mod event;
mod files;
mod pg;
mod record;
mod repository;
mod sessions;
pub(crate) mod steer;
mod turn;

pub use event::SessionEvent;
pub use pg::PgSessionRepository;
pub use record::{checkpoint_ref, Isolation, SessionRecord, TurnRecord, TurnStatus};
pub use repository::{
    check_session_id, FileSessionRepository, MemorySessionRepository, SessionRepository, TurnLock,
};
pub use sessions::{NewSession, Sessions, SessionsBuilder};
pub use steer::SteerInbox;
pub use turn::TurnReport;
