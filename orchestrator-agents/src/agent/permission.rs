//! [`PermissionPolicy`]: which tool requests of an agent are allowed (SPEC §14).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a tool request does, as a policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ToolKind {
    /// Reading files, listing, searching.
    Read,
    /// Creating, editing or deleting files.
    Write,
    /// Running a shell command.
    Shell,
    /// Fetching a URL.
    Url,
    /// Calling a tool of an MCP server.
    Mcp,
}

/// One rule of [`PermissionPolicy::Rules`]: a kind of tool request and a glob over its target
/// (a path for read/write, the command line for shell, the URL for url, `server/tool` for
/// mcp). Written `kind` (every target) or `kind:glob`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRule {
    /// The kind of request.
    pub kind: ToolKind,
    /// The glob over the target; `None` matches every target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
}

/// Decides each tool request of an agent: allow, deny (with a reason the agent sees) or ask the
/// host. Parsed from `allow-all`, `read-only`, `no-shell`, `ask`, or a JSON rule object
/// `{"allow": ["write:src/**"], "deny": ["shell"]}`.
///
/// ```
/// use orchestrator_agents::agent::PermissionPolicy;
/// let p: PermissionPolicy = "read-only".parse().unwrap();
/// assert_eq!(p, PermissionPolicy::ReadOnly);
/// assert_eq!(PermissionPolicy::default(), PermissionPolicy::AllowAll);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum PermissionPolicy {
    /// Every request is allowed (plan jobs' default).
    #[default]
    AllowAll,
    /// Reads only: no writes, no shell.
    ReadOnly,
    /// Everything but the shell.
    NoShell,
    /// Every request is asked of the host.
    Ask,
    /// Rule lists: a request matching a `deny` rule is denied, else one matching an `allow`
    /// rule is allowed, else it is asked of the host.
    Rules {
        /// Allowed requests.
        #[serde(default)]
        allow: Vec<PermissionRule>,
        /// Denied requests (they win over `allow`).
        #[serde(default)]
        deny: Vec<PermissionRule>,
    },
}

impl PermissionPolicy {
    /// The name it is written as (`allow-all`, `read-only`, `no-shell`, `ask`, `rules`).
    pub fn name(&self) -> &'static str {
        match self {
            PermissionPolicy::AllowAll => "allow-all",
            PermissionPolicy::ReadOnly => "read-only",
            PermissionPolicy::NoShell => "no-shell",
            PermissionPolicy::Ask => "ask",
            PermissionPolicy::Rules { .. } => "rules",
        }
    }
}

impl fmt::Display for PermissionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PermissionPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "allow-all" => Ok(PermissionPolicy::AllowAll),
            "read-only" => Ok(PermissionPolicy::ReadOnly),
            "no-shell" => Ok(PermissionPolicy::NoShell),
            "ask" => Ok(PermissionPolicy::Ask),
            other => Err(format!(
                "unknown permission policy `{other}`; expected allow-all, read-only, no-shell or ask"
            )),
        }
    }
}
