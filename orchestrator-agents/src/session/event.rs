//! [`SessionEvent`]: what a turn reports while it runs.

use orchestrator_core::runner::LogStream;
use serde::Serialize;

use super::record::TurnStatus;
use crate::agent::PermissionRequest;

/// One event of a session's turn, in the order they happen
/// ([`Sessions::subscribe`](super::Sessions::subscribe)).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum SessionEvent {
    /// A turn started.
    #[serde(rename_all = "camelCase")]
    TurnStarted {
        /// The session.
        session: String,
        /// The turn number.
        turn: u32,
        /// The prompt.
        prompt: String,
    },
    /// A line the CLI printed (secrets redacted).
    #[serde(rename_all = "camelCase")]
    Output {
        /// The session.
        session: String,
        /// The turn number.
        turn: u32,
        /// Which stream.
        stream: LogStream,
        /// The line.
        line: String,
    },
    /// The agent's message text, as far as it got (each event holds the whole text so far).
    #[serde(rename_all = "camelCase")]
    Text {
        /// The session.
        session: String,
        /// The turn number.
        turn: u32,
        /// The text.
        text: String,
    },
    /// The agent called a tool.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        /// The session.
        session: String,
        /// The turn number.
        turn: u32,
        /// The tool's name as the CLI calls it.
        tool: String,
        /// Its arguments.
        input: serde_json::Value,
    },
    /// A tool call ended.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The session.
        session: String,
        /// The turn number.
        turn: u32,
        /// The tool, when the CLI names it in the result.
        tool: Option<String>,
        /// What it answered.
        output: String,
        /// It failed or was refused (a denied permission included).
        is_error: bool,
    },
    /// The agent asks to use a tool the session's policy leaves to the host: answer it with
    /// [`Sessions::answer_permission`](super::Sessions::answer_permission) (the agent waits).
    #[serde(rename_all = "camelCase")]
    PermissionRequested {
        /// The session.
        session: String,
        /// The turn number.
        turn: u32,
        /// The request.
        request: PermissionRequest,
    },
    /// A steering message was handed to the agent.
    #[serde(rename_all = "camelCase")]
    Steered {
        /// The session.
        session: String,
        /// The turn number.
        turn: u32,
        /// The message.
        message: String,
    },
    /// A turn ended.
    #[serde(rename_all = "camelCase")]
    TurnEnded {
        /// The session.
        session: String,
        /// The turn number.
        turn: u32,
        /// How it ended.
        status: TurnStatus,
        /// The agent's final reply.
        reply: Option<String>,
        /// The checkpoint commit.
        checkpoint: Option<String>,
        /// Token usage and cost as the CLI reported them.
        usage: Option<serde_json::Value>,
    },
}
