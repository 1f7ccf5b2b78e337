//! The MCP servers each CLI's configuration names: the agents' tool server (SPEC §15),
//! [`crate::tools::SERVER_NAME`], with the run's bearer token, and the servers of the loaded
//! plugins' `.mcp.json` files ([`AgentRequest::mcp_servers`]).

use orchestrator_core::tools::ToolEndpoint;
use serde_json::{json, Map, Value};

use super::AgentRequest;
use crate::plugins::{McpServer, McpTransport};

pub(crate) use crate::tools::SERVER_NAME;

/// The environment variable Codex reads the bearer token from (its config names the
/// variable, never the token).
pub(crate) const TOKEN_VAR: &str = "ORCHESTRATOR_TOOLS_TOKEN";

/// The `Authorization` header of the run's calls.
pub(crate) fn authorization(endpoint: &ToolEndpoint) -> Value {
    json!({"Authorization": format!("Bearer {}", endpoint.token)})
}

/// Whose configuration format a server entry is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Claude Code's `--mcp-config` (the `.mcp.json` format itself).
    Claude,
    /// Copilot CLI's `--additional-mcp-config` (`local` for stdio, every tool enabled).
    Copilot,
    /// Gemini CLI's `settings.json` (`httpUrl` for streamable HTTP, `url` for SSE; trusted).
    Gemini,
}

/// The `mcpServers` object of `r` in `format`: ours when the run has its tools, then the
/// plugins'. Empty when there are none.
pub(crate) fn all_servers(r: &AgentRequest, format: Format) -> Map<String, Value> {
    let mut map = Map::new();
    if let Some(tools) = &r.tools {
        let ours = match format {
            Format::Claude => {
                json!({"type": "http", "url": tools.url, "headers": authorization(tools)})
            }
            Format::Copilot => {
                json!({"type": "http", "url": tools.url, "headers": authorization(tools),
                                      "tools": ["*"]})
            }
            Format::Gemini => json!({"httpUrl": tools.url, "headers": authorization(tools),
                                     "trust": true}),
        };
        map.insert(SERVER_NAME.to_owned(), ours);
    }
    for server in &r.mcp_servers {
        map.insert(server.name().to_owned(), plugin_server(server, format));
    }
    map
}

/// One plugin server in `format`.
fn plugin_server(server: &McpServer, format: Format) -> Value {
    let mut entry = match (server.transport(), format) {
        (McpTransport::Stdio { command, args, env }, _) => {
            let kind = if format == Format::Copilot {
                "local"
            } else {
                "stdio"
            };
            json!({"type": kind, "command": command, "args": args, "env": env})
        }
        (McpTransport::Http { url, headers }, Format::Gemini) => {
            json!({"httpUrl": url, "headers": headers})
        }
        (McpTransport::Sse { url, headers }, Format::Gemini) => {
            json!({"url": url, "headers": headers})
        }
        (McpTransport::Http { url, headers }, _) => {
            json!({"type": "http", "url": url, "headers": headers})
        }
        (McpTransport::Sse { url, headers }, _) => {
            json!({"type": "sse", "url": url, "headers": headers})
        }
    };
    if let Some(obj) = entry.as_object_mut() {
        match format {
            Format::Copilot => {
                obj.insert("tools".into(), json!(["*"]));
            }
            Format::Gemini => {
                // Gemini infers the transport from the fields.
                obj.remove("type");
                obj.insert("trust".into(), json!(true));
            }
            Format::Claude => {}
        }
    }
    entry
}

/// The `[mcp_servers.<name>]` tables of the plugins' servers for Codex's `config.toml`, and
/// notes for those Codex cannot reach (it has no SSE transport).
pub(crate) fn codex_tables(servers: &[McpServer]) -> (String, Vec<String>) {
    let mut toml = String::new();
    let mut notes = Vec::new();
    for server in servers {
        let name = toml_string(server.name());
        match server.transport() {
            McpTransport::Stdio { command, args, env } => {
                toml.push_str(&format!("\n[mcp_servers.{name}]\n"));
                toml.push_str(&format!("command = {}\n", toml_string(command)));
                let args: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
                toml.push_str(&format!("args = [{}]\n", args.join(", ")));
                toml.push_str(&format!("env = {}\n", inline_table(env)));
            }
            McpTransport::Http { url, headers } => {
                toml.push_str(&format!("\n[mcp_servers.{name}]\n"));
                toml.push_str(&format!("url = {}\n", toml_string(url)));
                toml.push_str(&format!("http_headers = {}\n", inline_table(headers)));
            }
            McpTransport::Sse { .. } => notes.push(format!(
                "Codex has no SSE transport for MCP servers: plugin server `{}` is not passed on",
                server.name()
            )),
        }
    }
    (toml, notes)
}

/// `{ "k" = "v", ... }`.
fn inline_table(map: &std::collections::BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{} = {}", toml_string(k), toml_string(v)))
        .collect();
    format!("{{ {} }}", pairs.join(", "))
}

/// A TOML basic string (JSON string escapes are valid TOML escapes).
pub(crate) fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The instructions' section on the tools, for agents that have them.
pub(crate) const INSTRUCTIONS: &str = "## Your orchestrator tools\n\n\
    The MCP server `orchestrator` gives you durable tools: `wait(seconds, reason)` to wait \
    (for CI, a deploy, a rate limit), `cron(seconds, reason)` / `cron_at(minute, hour, \
    day_of_week, day_of_month, tz, reason)` to be woken on a schedule after each turn until \
    you call them with `action: \"cancel\"`, and `ask_user(question, choices, allowFreeform)` \
    to ask a person. Sub-agents: `spawn_agent(task, agent_name, model, system_message, \
    contract)` starts a child agent in its own worktree from your work so far; \
    `check_agents()`, `message_agent(agent_id, message)`, `wait_for_agents(agent_ids)` (their \
    outputs come back and their commits are merged into your worktree), `complete_agent`, \
    `cancel_agent`, `delete_agent` and `list_sessions()` manage them. A long wait, a cron, a \
    question and every sub-agent tool end your turn: end it when the tool says so; this \
    conversation resumes with a message carrying the result.";
