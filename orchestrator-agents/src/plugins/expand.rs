//! `${VAR}` in a plugin's MCP servers, expanded when an agent run starts (as Claude Code
//! expands them in `.mcp.json`): `${VAR}` and `${VAR:-default}` from the run's environment,
//! `${CLAUDE_PLUGIN_ROOT}` and `${PLUGIN_ROOT}` to the plugin's folder. A server naming a
//! variable that is unset and has no default is left out of the run, with a note.

use std::collections::BTreeMap;

use super::{McpServer, McpTransport, Plugins};

/// The servers in effect of `plugins`, expanded with `lookup`; the notes of those left out.
pub(crate) fn expand_servers(
    plugins: &Plugins,
    lookup: impl Fn(&str) -> Option<String>,
) -> (Vec<McpServer>, Vec<String>) {
    let mut servers = Vec::new();
    let mut notes = Vec::new();
    for (plugin, server) in plugins.mcp_servers() {
        match expand_server(server, &lookup) {
            Ok(s) => servers.push(s),
            Err(var) => notes.push(format!(
                "MCP server `{}` of plugin `{}` is left out of this run: it uses ${{{var}}}, which is not set ({})",
                server.name,
                plugin.name(),
                server.file.display()
            )),
        }
    }
    (servers, notes)
}

/// `server` with its values expanded, or the variable that is missing.
fn expand_server(
    server: &McpServer,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<McpServer, String> {
    let root = server.plugin_dir.to_string_lossy().into_owned();
    let get = |var: &str| match var {
        "CLAUDE_PLUGIN_ROOT" | "PLUGIN_ROOT" => Some(root.clone()),
        _ => lookup(var),
    };
    let one = |text: &String| expand(text, &get);
    let map = |m: &BTreeMap<String, String>| -> Result<BTreeMap<String, String>, String> {
        m.iter().map(|(k, v)| Ok((k.clone(), one(v)?))).collect()
    };
    let transport = match &server.transport {
        McpTransport::Stdio { command, args, env } => McpTransport::Stdio {
            command: one(command)?,
            args: args.iter().map(one).collect::<Result<_, _>>()?,
            env: map(env)?,
        },
        McpTransport::Http { url, headers } => McpTransport::Http {
            url: one(url)?,
            headers: map(headers)?,
        },
        McpTransport::Sse { url, headers } => McpTransport::Sse {
            url: one(url)?,
            headers: map(headers)?,
        },
    };
    Ok(McpServer {
        transport,
        ..server.clone()
    })
}

/// `text` with each `${VAR}` / `${VAR:-default}` replaced; the missing variable, if any.
/// A `$` not followed by `{NAME}` is kept as it is.
pub(crate) fn expand(text: &str, get: &impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[at..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            out.push_str("${");
            rest = after;
            continue;
        }
        let value = get(name).filter(|v| !v.is_empty() || default.is_none());
        match value.or_else(|| default.map(str::to_owned)) {
            Some(value) => out.push_str(&value),
            None => return Err(name.to_owned()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
