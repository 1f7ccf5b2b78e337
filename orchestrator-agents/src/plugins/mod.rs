//! Plugins (SPEC §15): folders of agents, skills and MCP servers that agent jobs can use.
//!
//! A plugin is a folder holding:
//!
//! | file                  | holds                                                           |
//! |-----------------------|-----------------------------------------------------------------|
//! | `plugin.json`         | `name` (required), `description`, `version` (Claude Code's `author`, `homepage`, `repository`, `license`, `keywords` are accepted and ignored; other fields are refused) |
//! | `agents/*.agent.md`   | one agent each: front matter `name`, `description`, `model`, `tools` (list), `system`, `skills` (list), `cli` (`claude`, `copilot`, `codex` or `gemini`); the body is its system prompt |
//! | `skills/*/SKILL.md`   | one skill each: front matter `name`, `description`; the body is the skill's text |
//! | `.mcp.json`           | MCP servers, in Claude Code's format: `{"mcpServers": {"<name>": {"type": "stdio", "command", "args", "env"} or {"type": "http"/"sse", "url", "headers"}}}` |
//!
//! The front matter is a strict subset of YAML between two `---` lines: `key: value`,
//! `key: [a, b]`, `key:` followed by `- item` lines, and `key: |` blocks.
//!
//! [`PluginPlaces`] says where plugins load from, in order: `<repo>/.orchestrator/plugins/*/`,
//! `~/.config/orchestrator/plugins/*/` (`$XDG_CONFIG_HOME/orchestrator/plugins/*/` when set)
//! and each `--plugins DIR` (a plugin itself, or a folder of plugins). A plugin name, an agent
//! name or an MCP server name met again later is left out, with a [note](Plugins::notes): the
//! first wins. Two agents or skills of one name in one plugin are an error, and so is an MCP
//! server named `orchestrator` (the SDK's own tool server).
//!
//! Loading reads text only; nothing is run. A malformed file is refused with an
//! [`Error::Plugin`](crate::Error::Plugin) naming the file, the field and (where known) the line; a symbolic link
//! leading outside its plugin folder and a file over [`MAX_FILE_BYTES`] are refused too.
//!
//! What a plugin changes: a spec's `agent` may name a plugin agent (see
//! [`AgentWorkRunner::plugins`](crate::agent::AgentWorkRunner::plugins)) and the MCP servers of
//! every loaded plugin are handed to every agent CLI, next to the SDK's own.
//!
//! ```
//! use orchestrator_agents::plugins::PluginPlaces;
//! let dir = tempfile::tempdir()?;
//! let plugin = dir.path().join("review");
//! std::fs::create_dir_all(plugin.join("agents"))?;
//! std::fs::write(plugin.join("plugin.json"), r#"{"name": "review", "version": "1.0.0"}"#)?;
//! std::fs::write(
//!     plugin.join("agents/reviewer.agent.md"),
//!     "---\nname: reviewer\nmodel: claude-sonnet-4-5\ntools: [Read, Grep]\n---\nYou review code.\n",
//! )?;
//! let plugins = PluginPlaces::new().dir(dir.path()).load()?;
//! let (plugin, agent) = plugins.agent("reviewer").expect("loaded");
//! assert_eq!(plugin.name(), "review");
//! assert_eq!(agent.model(), Some("claude-sonnet-4-5"));
//! assert_eq!(agent.tools(), ["Read", "Grep"]);
//! assert_eq!(agent.system_prompt(), "You review code.");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod expand;
mod front;
mod load;
mod parse;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use load::{PluginPlaces, MAX_FILE_BYTES};
pub use parse::CLIS;

/// Where a plugin was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Origin {
    /// `<repo>/.orchestrator/plugins/`.
    Repo,
    /// `~/.config/orchestrator/plugins/` (or `$XDG_CONFIG_HOME/orchestrator/plugins/`).
    User,
    /// A `--plugins DIR`.
    Flag,
}

impl Origin {
    /// `repo`, `user` or `flag`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Repo => "repo",
            Origin::User => "user",
            Origin::Flag => "flag",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One loaded plugin folder.
#[derive(Debug, Clone)]
pub struct Plugin {
    name: String,
    description: Option<String>,
    version: Option<String>,
    dir: PathBuf,
    origin: Origin,
    agents: Vec<PluginAgent>,
    skills: Vec<Skill>,
    mcp_servers: Vec<McpServer>,
}

impl Plugin {
    /// `plugin.json`'s `name`.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// `plugin.json`'s `description`.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// `plugin.json`'s `version`.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }
    /// The plugin's folder (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// Where it was found.
    pub fn origin(&self) -> Origin {
        self.origin
    }
    /// Its agents (`agents/*.agent.md`), sorted by file name.
    pub fn agents(&self) -> &[PluginAgent] {
        &self.agents
    }
    /// Its skills (`skills/*/SKILL.md`), sorted by folder name.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }
    /// Its MCP servers (`.mcp.json`), sorted by name.
    pub fn mcp_servers(&self) -> &[McpServer] {
        &self.mcp_servers
    }
}

/// An agent of a plugin (`agents/<file>.agent.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginAgent {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) tools: Vec<String>,
    pub(crate) skills: Vec<String>,
    pub(crate) skills_line: Option<usize>,
    pub(crate) cli: Option<String>,
    pub(crate) system: Option<String>,
    pub(crate) body: String,
    pub(crate) file: PathBuf,
}

impl PluginAgent {
    /// Its `name`: what a spec's `agent` names.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Its `description`.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// Its `model`, used when the spec names neither a `model` nor a `modelTier`.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
    /// Its `tools`: the CLI's allowed tools (see [`AgentRequest::allowed_tools`](crate::agent::AgentRequest::allowed_tools)).
    pub fn tools(&self) -> &[String] {
        &self.tools
    }
    /// The skills it names (`skills`); none: every skill of its plugin.
    pub fn skill_names(&self) -> &[String] {
        &self.skills
    }
    /// The CLI it runs on (`cli`); none: the runner's default agent.
    pub fn cli(&self) -> Option<&str> {
        self.cli.as_deref()
    }
    /// Its system prompt: the front matter's `system`, then the file's body.
    pub fn system_prompt(&self) -> String {
        [self.system.as_deref().unwrap_or(""), self.body.as_str()]
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n")
    }
    /// The file it was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }
}

/// A skill of a plugin (`skills/<dir>/SKILL.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) body: String,
    pub(crate) file: PathBuf,
}

impl Skill {
    /// Its `name`.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Its `description`.
    pub fn description(&self) -> &str {
        &self.description
    }
    /// Its text (the file's body).
    pub fn body(&self) -> &str {
        &self.body
    }
    /// The file it was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }
}

/// An MCP server of a plugin's `.mcp.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub(crate) name: String,
    pub(crate) transport: McpTransport,
    pub(crate) plugin_dir: PathBuf,
    pub(crate) file: PathBuf,
}

impl McpServer {
    /// Its name (the key in `mcpServers`).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// How it is reached.
    pub fn transport(&self) -> &McpTransport {
        &self.transport
    }
    /// The `.mcp.json` it was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }
    /// `stdio`, `http` or `sse`.
    pub fn kind(&self) -> &'static str {
        match self.transport {
            McpTransport::Stdio { .. } => "stdio",
            McpTransport::Http { .. } => "http",
            McpTransport::Sse { .. } => "sse",
        }
    }
}

/// How an MCP server is reached. Values may hold `${VAR}` or `${VAR:-default}`, expanded
/// from the agent run's environment when the run starts (`${CLAUDE_PLUGIN_ROOT}` and
/// `${PLUGIN_ROOT}`: the plugin's folder).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A program the CLI starts, speaking MCP on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it.
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
    /// Server-sent events (the older HTTP transport).
    Sse {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

impl McpTransport {
    /// The secret-bearing values: env values and header values (redacted from logs).
    pub(crate) fn secrets(&self) -> impl Iterator<Item = &str> {
        let map = match self {
            McpTransport::Stdio { env, .. } => env,
            McpTransport::Http { headers, .. } | McpTransport::Sse { headers, .. } => headers,
        };
        map.values().map(String::as_str)
    }
}

/// The plugins loaded from their [places](PluginPlaces), with which of their agents and MCP
/// servers are in effect (the first of a name wins).
#[derive(Debug, Clone, Default)]
pub struct Plugins {
    plugins: Vec<Plugin>,
    /// Agent name → (plugin, agent) indices, the first of each name.
    agents: BTreeMap<String, (usize, usize)>,
    /// The MCP servers in effect, (plugin, server) indices, in load order.
    servers: Vec<(usize, usize)>,
    notes: Vec<String>,
}

impl Plugins {
    /// No plugins.
    pub const fn empty() -> Self {
        Plugins {
            plugins: Vec::new(),
            agents: BTreeMap::new(),
            servers: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Whether no plugin is loaded.
    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }

    /// The plugins, in load order.
    pub fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    /// What was left out while loading (a plugin, agent or server name met again), one
    /// sentence each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The agent of this name in effect, with its plugin.
    pub fn agent(&self, name: &str) -> Option<(&Plugin, &PluginAgent)> {
        let &(p, a) = self.agents.get(name)?;
        let plugin = &self.plugins[p];
        Some((plugin, &plugin.agents[a]))
    }

    /// The agents in effect, sorted by name, with their plugins.
    pub fn agents(&self) -> impl Iterator<Item = (&Plugin, &PluginAgent)> {
        self.agents.values().map(|&(p, a)| {
            let plugin = &self.plugins[p];
            (plugin, &plugin.agents[a])
        })
    }

    /// The MCP servers in effect, in load order, with their plugins.
    pub fn mcp_servers(&self) -> impl Iterator<Item = (&Plugin, &McpServer)> {
        self.servers.iter().map(|&(p, s)| {
            let plugin = &self.plugins[p];
            (plugin, &plugin.mcp_servers[s])
        })
    }

    /// The skills `agent` of `plugin` uses: those its `skills` names (looked up in its plugin
    /// first, then in the others in load order), else every skill of its plugin.
    pub fn skills_of<'a>(&'a self, plugin: &'a Plugin, agent: &PluginAgent) -> Vec<&'a Skill> {
        if agent.skills.is_empty() {
            return plugin.skills.iter().collect();
        }
        agent
            .skills
            .iter()
            .filter_map(|name| self.find_skill(plugin, name))
            .collect()
    }

    fn find_skill<'a>(&'a self, plugin: &'a Plugin, name: &str) -> Option<&'a Skill> {
        std::iter::once(plugin)
            .chain(self.plugins.iter())
            .flat_map(|p| p.skills.iter())
            .find(|s| s.name == name)
    }

    /// The "## Skills" section of the instructions for `skills` (empty for none).
    pub fn skills_section(skills: &[&Skill]) -> String {
        if skills.is_empty() {
            return String::new();
        }
        let mut out = String::from("## Skills\n\nUse these skills where they apply.");
        for skill in skills {
            out.push_str(&format!(
                "\n\n### {}\n\n{}\n\n{}",
                skill.name,
                skill.description,
                skill.body.trim()
            ));
        }
        out
    }
}

pub(crate) use expand::expand_servers;
