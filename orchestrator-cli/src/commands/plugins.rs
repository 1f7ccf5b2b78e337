//! `plugins`: the plugins agent jobs use (SPEC §15) — their agents, skills and MCP servers,
//! and where each came from. Env and header values of MCP servers are never shown.

use orchestrator_agents::plugins::{McpServer, McpTransport, Plugin, PluginAgent, Plugins};
use serde_json::{json, Value};

use crate::cli::PluginsArgs;
use crate::error::{CliResult, Exit};
use crate::workspace::{load_plugins, Workspace};

/// `plugins [--repo DIR] [--plugins DIR]... [--json]`: one line per plugin, agent, skill and
/// MCP server on stdout (what loading left out on stderr), or the JSON document. A malformed
/// plugin is invalid input (exit 2).
pub async fn plugins(args: PluginsArgs) -> CliResult<Exit> {
    let ws = Workspace::open(args.repo.repo.as_deref())?;
    let plugins = load_plugins(ws.root(), &args.plugins.plugins)?;
    if args.json {
        outln!("{}", document(&plugins));
        return Ok(Exit::Ok);
    }
    for note in plugins.notes() {
        eprintln!("note: {note}");
    }
    if plugins.is_empty() {
        eprintln!("no plugins (looked in {}/.orchestrator/plugins, the user's plugin folder and --plugins)", ws.root().display());
    }
    for plugin in plugins.plugins() {
        let version = plugin
            .version()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        outln!(
            "plugin {}{version} ({}: {})",
            plugin.name(),
            plugin.origin(),
            plugin.dir().display()
        );
        for agent in plugin.agents() {
            let left_out = if in_effect(&plugins, agent) {
                ""
            } else {
                " [left out: an earlier plugin defines it]"
            };
            outln!(
                "  agent {}{}{left_out} ({})",
                agent.name(),
                agent_details(agent),
                agent.file().display()
            );
        }
        for skill in plugin.skills() {
            outln!("  skill {} ({})", skill.name(), skill.file().display());
        }
        for server in plugin.mcp_servers() {
            let left_out = if server_in_effect(&plugins, plugin, server) {
                ""
            } else {
                " [left out: an earlier plugin defines it]"
            };
            outln!(
                "  mcp server {} ({}){left_out} ({})",
                server.name(),
                server.kind(),
                server.file().display()
            );
        }
    }
    Ok(Exit::Ok)
}

/// ` — model M, cli C, tools A, B` (what is set).
fn agent_details(agent: &PluginAgent) -> String {
    let mut parts = Vec::new();
    if let Some(model) = agent.model() {
        parts.push(format!("model {model}"));
    }
    if let Some(cli) = agent.cli() {
        parts.push(format!("cli {cli}"));
    }
    if !agent.tools().is_empty() {
        parts.push(format!("tools {}", agent.tools().join(", ")));
    }
    if !agent.skill_names().is_empty() {
        parts.push(format!("skills {}", agent.skill_names().join(", ")));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join("; "))
    }
}

/// Whether `agent` is the one its name runs (not left out for an earlier one).
fn in_effect(plugins: &Plugins, agent: &PluginAgent) -> bool {
    plugins
        .agent(agent.name())
        .is_some_and(|(_, a)| a.file() == agent.file())
}

fn server_in_effect(plugins: &Plugins, plugin: &Plugin, server: &McpServer) -> bool {
    plugins
        .mcp_servers()
        .any(|(p, s)| p.dir() == plugin.dir() && s.name() == server.name())
}

/// `{"plugins": [...], "notes": [...]}`.
fn document(plugins: &Plugins) -> Value {
    let list: Vec<Value> = plugins
        .plugins()
        .iter()
        .map(|p| plugin_json(plugins, p))
        .collect();
    json!({"plugins": list, "notes": plugins.notes()})
}

fn plugin_json(plugins: &Plugins, plugin: &Plugin) -> Value {
    let agents: Vec<Value> = plugin
        .agents()
        .iter()
        .map(|a| {
            json!({
                "name": a.name(),
                "description": a.description(),
                "model": a.model(),
                "cli": a.cli(),
                "tools": a.tools(),
                "skills": a.skill_names(),
                "file": a.file(),
                "inEffect": in_effect(plugins, a),
            })
        })
        .collect();
    let skills: Vec<Value> = plugin
        .skills()
        .iter()
        .map(|s| json!({"name": s.name(), "description": s.description(), "file": s.file()}))
        .collect();
    let servers: Vec<Value> = plugin
        .mcp_servers()
        .iter()
        .map(|s| {
            // Names only: env and header values are often credentials.
            let (env, headers): (Vec<&String>, Vec<&String>) = match s.transport() {
                McpTransport::Stdio { env, .. } => (env.keys().collect(), Vec::new()),
                McpTransport::Http { headers, .. } | McpTransport::Sse { headers, .. } => {
                    (Vec::new(), headers.keys().collect())
                }
                _ => (Vec::new(), Vec::new()),
            };
            json!({
                "name": s.name(),
                "type": s.kind(),
                "envNames": env,
                "headerNames": headers,
                "file": s.file(),
                "inEffect": server_in_effect(plugins, plugin, s),
            })
        })
        .collect();
    json!({
        "name": plugin.name(),
        "description": plugin.description(),
        "version": plugin.version(),
        "origin": plugin.origin().as_str(),
        "dir": plugin.dir(),
        "agents": agents,
        "skills": skills,
        "mcpServers": servers,
    })
}
