//! What a session is, as stored: [`SessionRecord`] and its [`TurnRecord`]s.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use orchestrator_core::plan::Effort;
use serde::{Deserialize, Serialize};

use crate::agent::PermissionPolicy;

/// Where a session's agent works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Isolation {
    /// A worktree of its own (detached at the base revision), checkpointed after every turn.
    #[default]
    Worktree,
    /// A directory as it is (no worktree, no checkpoints, nothing committed).
    None,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TurnStatus {
    /// The turn is running (or its process died without recording an end: see
    /// [`SessionRecord::running_turn`]).
    Running,
    /// The agent answered; the worktree was checkpointed.
    Succeeded,
    /// The CLI failed, was stopped or crashed; the worktree and conversation went back to the
    /// last checkpoint.
    Failed,
}

/// One turn: a prompt, the agent's reply, the checkpoint after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TurnRecord {
    /// 1-based turn number (`turn-0` is the base).
    pub turn: u32,
    /// The prompt sent.
    pub prompt: String,
    /// Steering messages delivered into the turn, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steered: Vec<String>,
    /// How it ended.
    pub status: TurnStatus,
    /// The agent's final reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The commit of `refs/orchestrator/sessions/<id>/turn-<n>` (worktree sessions that
    /// succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// The CLI's own session id after this turn (what the next turn resumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli_session: Option<String>,
    /// The model asked for in this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The effort asked for in this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// Token usage and cost as the CLI reported them ([`AgentUsage`](crate::AgentUsage) JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<serde_json::Value>,
    /// When it started, ms since the Unix epoch.
    pub started_at: u64,
    /// When it ended, ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
}

/// A session as stored by a [`SessionRepository`](super::SessionRepository).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionRecord {
    /// The session id.
    pub id: String,
    /// The agent (a name registered on the [`AgentWorkRunner`](crate::AgentWorkRunner)).
    pub agent: String,
    /// The model for the next turn (`None`: the CLI's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The effort for the next turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// The repository the session belongs to.
    pub repo: PathBuf,
    /// Where the agent works: the session's worktree, or the directory.
    pub dir: PathBuf,
    /// Worktree or directory.
    pub isolation: Isolation,
    /// The base commit (`turn-0`); `None` for [`Isolation::None`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Which tool requests the agent may make.
    #[serde(default)]
    pub permissions: PermissionPolicy,
    /// The turns, in order (a revert drops the turns after its target).
    #[serde(default)]
    pub turns: Vec<TurnRecord>,
    /// Closed sessions take no more turns.
    #[serde(default)]
    pub closed: bool,
    /// The session and turn this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<(String, u32)>,
    /// When it was created, ms since the Unix epoch.
    pub created_at: u64,
}

impl SessionRecord {
    /// A new session of `agent` working in `dir` of `repo`, with no turns.
    pub fn new(
        id: impl Into<String>,
        agent: impl Into<String>,
        repo: PathBuf,
        dir: PathBuf,
    ) -> Self {
        SessionRecord {
            id: id.into(),
            agent: agent.into(),
            model: None,
            effort: None,
            repo,
            dir,
            isolation: Isolation::Worktree,
            base: None,
            permissions: PermissionPolicy::AllowAll,
            turns: Vec::new(),
            closed: false,
            forked_from: None,
            created_at: now_ms(),
        }
    }

    /// The last turn that succeeded, if any.
    pub fn last_good_turn(&self) -> Option<&TurnRecord> {
        self.turns
            .iter()
            .rev()
            .find(|t| t.status == TurnStatus::Succeeded)
    }

    /// The number of the last successful turn (0 = the base).
    pub fn current_turn(&self) -> u32 {
        self.last_good_turn().map_or(0, |t| t.turn)
    }

    /// The checkpoint commit of turn `n` (`0` = the base), if it has one.
    pub fn checkpoint(&self, n: u32) -> Option<&str> {
        if n == 0 {
            return self.base.as_deref();
        }
        self.turns
            .iter()
            .find(|t| t.turn == n && t.status == TurnStatus::Succeeded)
            .and_then(|t| t.checkpoint.as_deref())
    }

    /// The CLI session the next turn resumes: the last successful turn's.
    pub fn cli_session(&self) -> Option<&str> {
        self.last_good_turn().and_then(|t| t.cli_session.as_deref())
    }

    /// A turn still marked running (its process died before it recorded an end).
    pub fn running_turn(&self) -> Option<&TurnRecord> {
        self.turns.iter().find(|t| t.status == TurnStatus::Running)
    }

    /// The turns that succeeded, as `1, 2, ...` for messages.
    pub fn turn_numbers(&self) -> String {
        let numbers: Vec<String> = std::iter::once("0".to_owned())
            .chain(
                self.turns
                    .iter()
                    .filter(|t| t.status == TurnStatus::Succeeded)
                    .map(|t| t.turn.to_string()),
            )
            .collect();
        numbers.join(", ")
    }
}

/// The checkpoint ref of turn `n` of session `id`.
///
/// ```
/// assert_eq!(
///     orchestrator_agents::session::checkpoint_ref("s1", 2),
///     "refs/orchestrator/sessions/s1/turn-2"
/// );
/// ```
pub fn checkpoint_ref(id: &str, n: u32) -> String {
    format!("refs/orchestrator/sessions/{id}/turn-{n}")
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
