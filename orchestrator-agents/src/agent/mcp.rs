//! The agents' tool server (SPEC §15) as each CLI's MCP configuration names it: one HTTP
//! server, [`crate::tools::SERVER_NAME`], with the run's bearer token.

use orchestrator_core::tools::ToolEndpoint;
use serde_json::{json, Value};

pub(crate) use crate::tools::SERVER_NAME;

/// The environment variable Codex reads the bearer token from (its config names the
/// variable, never the token).
pub(crate) const TOKEN_VAR: &str = "ORCHESTRATOR_TOOLS_TOKEN";

/// The `Authorization` header of the run's calls.
pub(crate) fn authorization(endpoint: &ToolEndpoint) -> Value {
    json!({"Authorization": format!("Bearer {}", endpoint.token)})
}

/// `{"orchestrator": {"type": "http", "url": ..., "headers": {"Authorization": ...}}}` plus
/// `extra` fields, the `mcpServers` entry of Claude Code's and Copilot CLI's configuration.
pub(crate) fn servers(endpoint: &ToolEndpoint, extra: Value) -> Value {
    let mut server = json!({
        "type": "http",
        "url": endpoint.url,
        "headers": authorization(endpoint),
    });
    if let (Some(server), Value::Object(extra)) = (server.as_object_mut(), extra) {
        server.extend(extra);
    }
    json!({ SERVER_NAME: server })
}

/// The instructions' section on the tools, for agents that have them.
pub(crate) const INSTRUCTIONS: &str = "## Your orchestrator tools\n\n\
    The MCP server `orchestrator` gives you durable tools: `wait(seconds, reason)` to wait \
    (for CI, a deploy, a rate limit), `cron(seconds, reason)` / `cron_at(minute, hour, \
    day_of_week, day_of_month, tz, reason)` to be woken on a schedule after each turn until \
    you call them with `action: \"cancel\"`, and `ask_user(question, choices, allowFreeform)` \
    to ask a person. A long wait, a cron or a question ends your turn: end it when the tool \
    says so; this conversation resumes with a message when the wait is over.";
