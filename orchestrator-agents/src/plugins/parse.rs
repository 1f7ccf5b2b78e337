//! The files of a plugin folder, parsed: `plugin.json`, `agents/*.agent.md`,
//! `skills/*/SKILL.md` and `.mcp.json`. Parsing reads text only; nothing is run.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value as Json};

use super::front::{self, Field, Value};
use super::{McpServer, McpTransport, PluginAgent, Skill};
use crate::error::Error;

/// The agent CLIs a plugin agent may name as its `cli`.
pub const CLIS: [&str; 4] = ["claude", "copilot", "codex", "gemini"];

/// The fields of `plugin.json`: what is read, and Claude Code's descriptive ones, accepted and
/// ignored. Anything else is refused.
const MANIFEST_FIELDS: [&str; 8] = [
    "name",
    "description",
    "version",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
];
/// Claude Code manifest fields that would change what a plugin does, which plugins here
/// cannot: refused with why.
const UNSUPPORTED_MANIFEST_FIELDS: [&str; 6] = [
    "commands",
    "agents",
    "hooks",
    "mcpServers",
    "outputStyles",
    "lspServers",
];
/// The front matter fields of an agent file (`color` is Claude Code's, accepted and ignored).
const AGENT_FIELDS: [&str; 8] = [
    "name",
    "description",
    "model",
    "tools",
    "system",
    "skills",
    "cli",
    "color",
];
/// The front matter fields of a `SKILL.md` (`license` and `allowed-tools` are accepted and
/// ignored).
const SKILL_FIELDS: [&str; 4] = ["name", "description", "license", "allowed-tools"];

/// A problem of `file`, at `field` and `line` when known.
pub(crate) fn bad(
    file: &Path,
    field: Option<&str>,
    line: Option<usize>,
    message: impl Into<String>,
) -> Error {
    Error::Plugin {
        file: file.to_path_buf(),
        field: field.map(str::to_owned),
        line,
        message: message.into(),
    }
}

/// `plugin.json`'s name, description and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) version: Option<String>,
}

/// Whether `name` can name a plugin, an agent or a skill: `[a-z0-9][a-z0-9._-]*` (agents:
/// without `.`, so that a plan's `agent` can name them).
fn is_name(name: &str, dots: bool) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || c == '-'
                || c == '_'
                || (dots && c == '.')
        })
}

/// Parses `plugin.json`.
pub(crate) fn manifest(file: &Path, text: &str) -> Result<Manifest, Error> {
    let json: Json = serde_json::from_str(text)
        .map_err(|e| bad(file, None, Some(e.line()), format!("not valid JSON: {e}")))?;
    let Json::Object(map) = json else {
        return Err(bad(file, None, None, "must be a JSON object"));
    };
    for key in map.keys() {
        if UNSUPPORTED_MANIFEST_FIELDS.contains(&key.as_str()) {
            return Err(bad(
                file,
                Some(key),
                None,
                "is not supported: agents, skills and MCP servers are read from `agents/`, `skills/` and `.mcp.json`",
            ));
        }
        if !MANIFEST_FIELDS.contains(&key.as_str()) {
            return Err(bad(
                file,
                Some(key),
                None,
                format!(
                    "unknown field; known fields: {}",
                    MANIFEST_FIELDS.join(", ")
                ),
            ));
        }
    }
    let text_field = |key: &str| -> Result<Option<String>, Error> {
        match map.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(file, Some(key), None, "must be a string")),
        }
    };
    let name = text_field("name")?.ok_or_else(|| bad(file, Some("name"), None, "is required"))?;
    if !is_name(&name, true) {
        return Err(bad(
            file,
            Some("name"),
            None,
            format!("`{name}` is not a plugin name: lowercase letters, digits, `.`, `-` and `_`, starting with a letter or digit"),
        ));
    }
    for key in ["homepage", "license"] {
        text_field(key)?;
    }
    if let Some(keywords) = map.get("keywords") {
        let ok = keywords
            .as_array()
            .is_some_and(|k| k.iter().all(Json::is_string));
        if !ok {
            return Err(bad(
                file,
                Some("keywords"),
                None,
                "must be a list of strings",
            ));
        }
    }
    Ok(Manifest {
        name,
        description: text_field("description")?,
        version: text_field("version")?,
    })
}

/// The front matter of `file`, or the problem located in it.
fn document(file: &Path, text: &str) -> Result<front::Document, Error> {
    front::parse(text).map_err(|p| bad(file, p.field.as_deref(), Some(p.line), p.message))
}

/// Refuses the fields of `doc` not in `known`.
fn known_fields(file: &Path, doc: &front::Document, known: &[&str]) -> Result<(), Error> {
    match doc
        .fields
        .iter()
        .find(|(k, _)| !known.contains(&k.as_str()))
    {
        Some((key, field)) => Err(bad(
            file,
            Some(key),
            Some(field.line),
            format!("unknown field; known fields: {}", known.join(", ")),
        )),
        None => Ok(()),
    }
}

/// A text field of `doc`: a list is refused; an empty text is refused when `required`.
fn text_of(
    file: &Path,
    doc: &front::Document,
    key: &str,
    required: bool,
) -> Result<Option<String>, Error> {
    match doc.fields.get(key) {
        None if required => Err(bad(
            file,
            Some(key),
            None,
            "is required in the front matter",
        )),
        None => Ok(None),
        Some(Field {
            value: Value::List(_),
            line,
        }) => Err(bad(
            file,
            Some(key),
            Some(*line),
            "must be a single value, not a list",
        )),
        Some(Field {
            value: Value::Text(t),
            line,
        }) => {
            if t.trim().is_empty() {
                return Err(bad(file, Some(key), Some(*line), "must not be empty"));
            }
            Ok(Some(t.trim().to_owned()))
        }
    }
}

/// A list field of `doc` (a text is read as a comma-separated list, as Claude Code writes
/// `tools: Read, Grep`); empty items are refused. Also the line it is on.
fn list(
    file: &Path,
    doc: &front::Document,
    key: &str,
) -> Result<(Vec<String>, Option<usize>), Error> {
    let Some(field) = doc.fields.get(key) else {
        return Ok((Vec::new(), None));
    };
    let items: Vec<String> = match &field.value {
        Value::List(items) => items.iter().map(|i| i.trim().to_owned()).collect(),
        Value::Text(t) => t.split(',').map(|i| i.trim().to_owned()).collect(),
    };
    if items.iter().any(String::is_empty) {
        return Err(bad(file, Some(key), Some(field.line), "has an empty item"));
    }
    Ok((items, Some(field.line)))
}

fn line_of(doc: &front::Document, key: &str) -> Option<usize> {
    doc.fields.get(key).map(|f| f.line)
}

/// Parses an `agents/*.agent.md` file.
pub(crate) fn agent(file: &Path, text: &str) -> Result<PluginAgent, Error> {
    let doc = document(file, text)?;
    known_fields(file, &doc, &AGENT_FIELDS)?;
    let name = text_of(file, &doc, "name", true)?.unwrap_or_default();
    if !is_name(&name, false) {
        return Err(bad(
            file,
            Some("name"),
            line_of(&doc, "name"),
            format!("`{name}` is not an agent name: lowercase letters, digits, `-` and `_` (a plan's `agent` names it)"),
        ));
    }
    if CLIS.contains(&name.as_str()) {
        return Err(bad(
            file,
            Some("name"),
            line_of(&doc, "name"),
            format!("`{name}` is the name of a built-in agent CLI; choose another name (and `cli: {name}` to run on it)"),
        ));
    }
    let cli = text_of(file, &doc, "cli", false)?;
    if let Some(cli) = &cli {
        if !CLIS.contains(&cli.as_str()) {
            return Err(bad(
                file,
                Some("cli"),
                line_of(&doc, "cli"),
                format!(
                    "`{cli}` is not an agent CLI; use one of {}",
                    CLIS.join(", ")
                ),
            ));
        }
    }
    let (tools, _) = list(file, &doc, "tools")?;
    let (skills, skills_line) = list(file, &doc, "skills")?;
    Ok(PluginAgent {
        name,
        description: text_of(file, &doc, "description", false)?,
        model: text_of(file, &doc, "model", false)?,
        tools,
        skills,
        skills_line,
        cli,
        system: text_of(file, &doc, "system", false)?,
        body: doc.body,
        file: file.to_path_buf(),
    })
}

/// Parses a `skills/*/SKILL.md` file.
pub(crate) fn skill(file: &Path, text: &str) -> Result<Skill, Error> {
    let doc = document(file, text)?;
    known_fields(file, &doc, &SKILL_FIELDS)?;
    let name = text_of(file, &doc, "name", true)?.unwrap_or_default();
    if !is_name(&name, true) {
        return Err(bad(
            file,
            Some("name"),
            line_of(&doc, "name"),
            format!("`{name}` is not a skill name: lowercase letters, digits, `.`, `-` and `_`"),
        ));
    }
    let description = text_of(file, &doc, "description", true)?.unwrap_or_default();
    if doc.body.is_empty() {
        return Err(bad(
            file,
            None,
            None,
            "the skill has no text after its front matter",
        ));
    }
    Ok(Skill {
        name,
        description,
        body: doc.body,
        file: file.to_path_buf(),
    })
}

/// Parses `.mcp.json` (Claude Code's format: `{"mcpServers": {"<name>": {...}}}`).
pub(crate) fn mcp(file: &Path, text: &str, plugin_dir: &Path) -> Result<Vec<McpServer>, Error> {
    let json: Json = serde_json::from_str(text)
        .map_err(|e| bad(file, None, Some(e.line()), format!("not valid JSON: {e}")))?;
    let Json::Object(top) = json else {
        return Err(bad(file, None, None, "must be a JSON object"));
    };
    if let Some(key) = top.keys().find(|k| k.as_str() != "mcpServers") {
        return Err(bad(
            file,
            Some(key),
            None,
            "unknown field; the file holds `mcpServers` only",
        ));
    }
    let servers = match top.get("mcpServers") {
        None => return Err(bad(file, Some("mcpServers"), None, "is required")),
        Some(Json::Object(servers)) => servers,
        Some(_) => {
            return Err(bad(
                file,
                Some("mcpServers"),
                None,
                "must be an object of servers by name",
            ))
        }
    };
    servers
        .iter()
        .map(|(name, server)| mcp_server(file, name, server, plugin_dir))
        .collect()
}

fn mcp_server(
    file: &Path,
    name: &str,
    server: &Json,
    plugin_dir: &Path,
) -> Result<McpServer, Error> {
    let at = |field: &str| {
        format!(
            "mcpServers.{name}{}",
            if field.is_empty() {
                String::new()
            } else {
                format!(".{field}")
            }
        )
    };
    let fail = |field: &str, message: &str| bad(file, Some(&at(field)), None, message.to_owned());
    if name.eq_ignore_ascii_case(crate::tools::SERVER_NAME) {
        return Err(fail(
            "",
            "the server name `orchestrator` is the SDK's own tool server; choose another name",
        ));
    }
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !name_ok {
        return Err(fail(
            "",
            "a server name must be letters, digits, `-` and `_`",
        ));
    }
    let Json::Object(fields) = server else {
        return Err(fail("", "must be an object"));
    };
    let kind = match fields.get("type") {
        None if fields.contains_key("url") => "http",
        None => "stdio",
        Some(Json::String(t)) if ["stdio", "http", "sse"].contains(&t.as_str()) => t.as_str(),
        Some(_) => return Err(fail("type", "must be `stdio`, `http` or `sse`")),
    };
    let known: &[&str] = match kind {
        "stdio" => &["type", "command", "args", "env"],
        _ => &["type", "url", "headers"],
    };
    if let Some(key) = fields.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(fail(
            key,
            &format!(
                "is not a field of a `{kind}` server; its fields: {}",
                known.join(", ")
            ),
        ));
    }
    let string = |key: &str| -> Result<String, Error> {
        match fields.get(key) {
            Some(Json::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
            Some(Json::String(_)) => Err(fail(key, "must not be empty")),
            None => Err(fail(key, &format!("is required for a `{kind}` server"))),
            Some(_) => Err(fail(key, "must be a string")),
        }
    };
    let transport = if kind == "stdio" {
        let args = match fields.get("args") {
            None => Vec::new(),
            Some(Json::Array(items)) => items
                .iter()
                .map(|a| a.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| fail("args", "must be a list of strings"))?,
            Some(_) => return Err(fail("args", "must be a list of strings")),
        };
        McpTransport::Stdio {
            command: string("command")?,
            args,
            env: string_map(fields.get("env"), || {
                fail("env", "must be an object of strings")
            })?,
        }
    } else {
        let url = string("url")?;
        let scheme_ok =
            url.starts_with("http://") || url.starts_with("https://") || url.starts_with("${");
        if !scheme_ok {
            return Err(fail("url", "must be an http:// or https:// URL"));
        }
        let headers = string_map(fields.get("headers"), || {
            fail("headers", "must be an object of strings")
        })?;
        if kind == "sse" {
            McpTransport::Sse { url, headers }
        } else {
            McpTransport::Http { url, headers }
        }
    };
    Ok(McpServer {
        name: name.to_owned(),
        transport,
        plugin_dir: plugin_dir.to_path_buf(),
        file: file.to_path_buf(),
    })
}

fn string_map(
    value: Option<&Json>,
    fail: impl Fn() -> Error,
) -> Result<BTreeMap<String, String>, Error> {
    match value {
        None => Ok(BTreeMap::new()),
        Some(Json::Object(map)) => map_of_strings(map).ok_or_else(fail),
        Some(_) => Err(fail()),
    }
}

fn map_of_strings(map: &Map<String, Json>) -> Option<BTreeMap<String, String>> {
    map.iter()
        .map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}
