//! [`PermissionPolicy`]: which tool requests of an agent are allowed (SPEC §14).
//!
//! A policy decides each tool request — its [`ToolKind`] (read, write, shell, url, mcp) and
//! its target — with [`PermissionPolicy::decide`]: [`Permission::Allow`],
//! [`Permission::Deny`] with a reason the agent sees, or [`Permission::Ask`] the host.
//!
//! | policy      | written as                                   | decides                                  |
//! |-------------|----------------------------------------------|------------------------------------------|
//! | `allow-all` | `allow-all` (the default)                    | everything allowed                       |
//! | `read-only` | `read-only`                                  | writes and shell commands denied; reads, URLs and MCP tools allowed |
//! | `no-shell`  | `no-shell`                                   | shell commands denied, the rest allowed  |
//! | `ask`       | `ask`                                        | everything asked                         |
//! | rules       | `{"allow": ["read", "write:src/**"], "deny": ["shell:rm *"]}` | a matching `deny` rule denies, else a matching `allow` rule allows, else ask |
//!
//! A rule is `kind` (every target) or `kind:glob`, or the object `{"kind": "write", "glob":
//! "src/**"}`. Targets: for `read` and `write` the path relative to the working directory
//! (`src/main.rs`; an absolute path only matches an absolute glob), for `shell` the command
//! line, for `url` the URL, for `mcp` `server/tool`. Globs: `*` is any text within one
//! `/`-separated segment, `**` any text across segments (`**/` also none), `?` one character
//! other than `/`; in shell globs, which have no segments, `*` and `**` are any text. There are
//! no escapes: every other character stands for itself.
//!
//! # How each CLI enforces a policy
//!
//! Every CLI gets the policy through its own mechanism (the runners' `command`). None of them
//! can call back to the host yet (that takes the SDK's MCP tool server), so **`ask`, and the
//! "ask" of rules no rule matches, are denied**, and the run's log says so. Where a CLI cannot
//! enforce a part of the policy, one note in the log says exactly which part. Allow rules a
//! CLI cannot express are left out (those requests are then denied); deny rules it cannot
//! express exactly are widened to the whole kind (the note says so).
//!
//! | policy      | Claude Code (`claude`) | Copilot CLI (`copilot`) | Codex (`codex exec`) | Gemini CLI (`gemini`) |
//! |-------------|------------------------|-------------------------|----------------------|-----------------------|
//! | `allow-all` | `--dangerously-skip-permissions` (unchanged) | `--allow-all-tools` (unchanged) | `--dangerously-bypass-approvals-and-sandbox` (unchanged) | `--yolo` (unchanged) |
//! | `read-only` | `--dangerously-skip-permissions --disallowedTools Edit Write MultiEdit NotebookEdit EnterWorktree Bash Monitor PowerShell`: the tools are removed from the model's list | `--allow-all-tools --deny-tool write --deny-tool shell`: the model's calls are refused | `--sandbox read-only -c approval_policy="never"`: patches are refused; shell commands still run, in a read-only sandbox (noted) | `--policy <run>/permissions.toml` denying `write_file`, `replace`, `run_shell_command`: removed from the model's list |
//! | `no-shell`  | `--dangerously-skip-permissions --disallowedTools Bash Monitor PowerShell` (removed) | `--allow-all-tools --deny-tool shell` (refused) | `--disable shell_tool` (removed; Codex then cannot read files: noted) | policy denying `run_shell_command` (removed) |
//! | `ask`, rules | `--permission-mode dontAsk` (what no rule allows is refused) with `--allowedTools`/`--disallowedTools` patterns `Read(glob)`, `Edit(glob)` (every file-editing tool), `Bash(glob)`, `WebFetch`/`WebSearch`, `mcp__server[__tool]`; not enforced: reads inside the working directories that no rule allows (Claude Code never asks about them) | no `--allow-all-tools` (in `-p` mode what no rule allows is refused); `--allow-tool`/`--deny-tool` patterns `write(<absolute path>)` (literal paths only), `shell(words:*)` (for `words *`; a literal command only as a deny rule), `url(<literal>)`, `server[(tool)]`; not enforced: every read rule (Copilot has none) | `--sandbox workspace-write` when every write is allowed, else `read-only` (the sandbox cannot tell paths apart: noted); shell deny rules become `prefix_rule(…, decision = "forbidden")` lines of `$CODEX_HOME/rules/orchestrator.rules` (widened to the literal words before a wildcard: noted); `--disable shell_tool` when no command is allowed; not enforced: shell commands no rule allows, read, URL and MCP rules | a policy file: deny rules (priority 300, their reason as `denyMessage`), allow rules (200), a catch-all deny (100); kinds are tool names, globs `argsPattern`s on `file_path` or `command` (an allow glob never matches a path holding `..`; a deny glob also matches the end of any path); URL globs and read globs beyond `read_file` are widened or left out (noted) |
//!
//! Verified against the real CLIs (Claude Code 2.1, Copilot CLI 1.0, Codex 0.171, Gemini CLI
//! 0.61) by `tests/permissions.rs`. The SDK's own instructions file stays readable: Claude
//! Code and Copilot read it unasked, Gemini gets an allow rule for `read_file` of that one file
//! (a deny rule on reads still wins), and Codex can only read it while its shell is enabled.
//! The Codex rules file is rewritten before every run (a comment only, unless there are shell
//! deny rules), so a later run in the same worktree never inherits an earlier run's rules;
//! Gemini's policy file is per run.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

mod glob;
mod translate;

pub(crate) use glob::{command_prefix, glob_match, is_literal};
pub(crate) use translate::{policy_note, policy_note_for, RuleSet};

/// What a tool request does, as a policy sees it.
///
/// ```
/// use orchestrator_agents::agent::ToolKind;
/// assert_eq!("shell".parse::<ToolKind>(), Ok(ToolKind::Shell));
/// assert_eq!(ToolKind::Url.to_string(), "url");
/// ```
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

impl ToolKind {
    /// Every kind, in the order they are listed.
    pub const ALL: [ToolKind; 5] = [
        ToolKind::Read,
        ToolKind::Write,
        ToolKind::Shell,
        ToolKind::Url,
        ToolKind::Mcp,
    ];

    /// The name it is written as: `read`, `write`, `shell`, `url`, `mcp`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Write => "write",
            ToolKind::Shell => "shell",
            ToolKind::Url => "url",
            ToolKind::Mcp => "mcp",
        }
    }

    /// The separator of segments in its targets (`/`), or none (shell command lines).
    fn separator(self) -> Option<char> {
        match self {
            ToolKind::Shell => None,
            _ => Some('/'),
        }
    }
}

impl fmt::Display for ToolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ToolKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ToolKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s.trim())
            .ok_or_else(|| {
                format!(
                    "unknown kind `{}`; known kinds: read, write, shell, url, mcp",
                    s.trim()
                )
            })
    }
}

/// One rule of [`PermissionPolicy::Rules`]: a kind of tool request and a glob over its target
/// (a path for read/write, the command line for shell, the URL for url, `server/tool` for
/// mcp). Written `kind` (every target) or `kind:glob`; serialized as that string.
///
/// ```
/// use orchestrator_agents::agent::{PermissionRule, ToolKind};
/// let rule: PermissionRule = "write:src/**".parse().unwrap();
/// assert_eq!(rule, PermissionRule::with_glob(ToolKind::Write, "src/**"));
/// assert!(rule.matches(ToolKind::Write, "src/agent/mod.rs"));
/// assert!(!rule.matches(ToolKind::Write, "README.md"));
/// assert!(!rule.matches(ToolKind::Read, "src/lib.rs"));
/// assert_eq!(rule.to_string(), "write:src/**");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PermissionRule {
    /// The kind of request.
    pub kind: ToolKind,
    /// The glob over the target; `None` matches every target.
    pub glob: Option<String>,
}

impl PermissionRule {
    /// A rule matching every request of `kind`.
    pub fn new(kind: ToolKind) -> Self {
        PermissionRule { kind, glob: None }
    }

    /// A rule matching the requests of `kind` whose target matches `glob`.
    pub fn with_glob(kind: ToolKind, glob: impl Into<String>) -> Self {
        PermissionRule {
            kind,
            glob: Some(glob.into()),
        }
    }

    /// Whether a request of `kind` on `target` matches this rule (a leading `./` of the
    /// target is ignored).
    pub fn matches(&self, kind: ToolKind, target: &str) -> bool {
        if kind != self.kind {
            return false;
        }
        let Some(glob) = &self.glob else {
            return true;
        };
        let target = target.strip_prefix("./").unwrap_or(target);
        glob_match(glob, target, kind.separator())
    }
}

impl fmt::Display for PermissionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.glob {
            Some(glob) => write!(f, "{}:{glob}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl FromStr for PermissionRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (kind, glob) = match s.split_once(':') {
            Some((kind, glob)) => (kind, Some(glob)),
            None => (s, None),
        };
        let kind: ToolKind = kind.parse()?;
        match glob {
            None => Ok(PermissionRule::new(kind)),
            Some("") => Err(format!("the glob after `{kind}:` is empty")),
            Some(glob) => Ok(PermissionRule::with_glob(kind, glob)),
        }
    }
}

impl Serialize for PermissionRule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PermissionRule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        rule_from_json(&value).map_err(serde::de::Error::custom)
    }
}

/// A rule from its JSON form: `"kind"`, `"kind:glob"` or `{"kind": …, "glob": …}`.
fn rule_from_json(value: &Value) -> Result<PermissionRule, String> {
    match value {
        Value::String(text) => text
            .parse()
            .map_err(|e| format!("bad permission rule `{text}`: {e}")),
        Value::Object(fields) => {
            if let Some(key) = fields.keys().find(|k| *k != "kind" && *k != "glob") {
                return Err(format!(
                    "bad permission rule {value}: unknown key `{key}`; expected `kind` and `glob`"
                ));
            }
            let kind = fields
                .get("kind")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("bad permission rule {value}: `kind` (a string) is missing"))?
                .parse()
                .map_err(|e| format!("bad permission rule {value}: {e}"))?;
            match fields.get("glob") {
                None | Some(Value::Null) => Ok(PermissionRule::new(kind)),
                Some(Value::String(glob)) if !glob.is_empty() => {
                    Ok(PermissionRule::with_glob(kind, glob))
                }
                Some(_) => Err(format!(
                    "bad permission rule {value}: `glob` must be a non-empty string"
                )),
            }
        }
        other => Err(format!(
            "bad permission rule {other}: expected a string `kind` or `kind:glob`, or an object {{\"kind\", \"glob\"}}"
        )),
    }
}

/// What a [`PermissionPolicy`] decides for one tool request.
///
/// ```
/// use orchestrator_agents::agent::{Permission, PermissionPolicy, ToolKind};
/// let p = PermissionPolicy::NoShell;
/// assert_eq!(p.decide(ToolKind::Write, "src/lib.rs"), Permission::Allow);
/// assert!(matches!(p.decide(ToolKind::Shell, "make"), Permission::Deny { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// The request may run.
    Allow,
    /// The request is refused; the agent is told `reason`.
    Deny {
        /// Why, as the agent sees it.
        reason: String,
    },
    /// The host decides (a `PermissionRequested` event).
    Ask,
}

/// A tool request a CLI put to the host while it works ([`AgentRequest::ask_host`](super::AgentRequest::ask_host)):
/// a session decides it with its policy, and asks the host when the policy says
/// [`Permission::Ask`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PermissionRequest {
    /// The CLI's id for the request (its answer names it).
    pub id: String,
    /// The tool as the CLI names it (`Write`, `Bash`, ...).
    pub tool: String,
    /// What kind of request it is, when the tool is known.
    pub kind: Option<ToolKind>,
    /// What it acts on: a path, a command line, a URL, `server/tool`.
    pub target: String,
    /// The tool's arguments.
    pub input: Value,
}

impl PermissionRequest {
    /// A request `id` for `tool` with `input`, of no known kind yet.
    pub fn new(id: impl Into<String>, tool: impl Into<String>, input: Value) -> Self {
        PermissionRequest {
            id: id.into(),
            tool: tool.into(),
            kind: None,
            target: String::new(),
            input,
        }
    }
}

impl Permission {
    /// A denial for `reason`.
    pub fn deny(reason: impl Into<String>) -> Self {
        Permission::Deny {
            reason: reason.into(),
        }
    }

    /// Whether the request may run without asking.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Permission::Allow)
    }
}

/// The reason of `read-only`'s denials of writes.
const READ_ONLY_WRITES: &str =
    "the session's permission policy is read-only: writes are not allowed";
/// The reason of `read-only`'s denials of shell commands.
const READ_ONLY_SHELL: &str =
    "the session's permission policy is read-only: shell commands are not allowed";
/// The reason of `no-shell`'s denials.
const NO_SHELL: &str =
    "the session's permission policy is no-shell: shell commands are not allowed";

/// Decides each tool request of an agent: allow, deny (with a reason the agent sees) or ask the
/// host. Parsed from `allow-all`, `read-only`, `no-shell`, `ask`, or a JSON rule object
/// `{"allow": ["write:src/**"], "deny": ["shell"]}`; serialized as that name or object (and
/// displayed so, so that [`Display`](fmt::Display) and [`FromStr`] round-trip).
///
/// ```
/// use orchestrator_agents::agent::{Permission, PermissionPolicy, ToolKind};
/// let p: PermissionPolicy = "read-only".parse().unwrap();
/// assert_eq!(p, PermissionPolicy::ReadOnly);
/// assert_eq!(PermissionPolicy::default(), PermissionPolicy::AllowAll);
///
/// let rules: PermissionPolicy =
///     r#"{"allow": ["write:src/**", "read"], "deny": ["shell", "shell:rm *"]}"#.parse().unwrap();
/// assert_eq!(rules.decide(ToolKind::Write, "src/main.rs"), Permission::Allow);
/// assert_eq!(rules.decide(ToolKind::Write, "Cargo.toml"), Permission::Ask);
/// assert!(!rules.decide(ToolKind::Shell, "ls").is_allowed());
/// let json = serde_json::to_string(&rules).unwrap();
/// assert_eq!(json, r#"{"allow":["write:src/**","read"],"deny":["shell","shell:rm *"]}"#);
/// assert_eq!(serde_json::from_str::<PermissionPolicy>(&json).unwrap(), rules);
/// assert_eq!(rules.to_string().parse::<PermissionPolicy>().unwrap(), rules);
///
/// let err = r#"{"deny": ["exec:rm *"]}"#.parse::<PermissionPolicy>().unwrap_err();
/// assert!(err.contains("`exec:rm *`") && err.contains("read, write, shell, url, mcp"), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PermissionPolicy {
    /// Every request is allowed (plan jobs' default).
    #[default]
    AllowAll,
    /// Reads only: no writes, no shell (URLs and MCP tools are allowed).
    ReadOnly,
    /// Everything but the shell.
    NoShell,
    /// Every request is asked of the host.
    Ask,
    /// Rule lists: a request matching a `deny` rule is denied, else one matching an `allow`
    /// rule is allowed, else it is asked of the host.
    Rules {
        /// Allowed requests.
        allow: Vec<PermissionRule>,
        /// Denied requests (they win over `allow`).
        deny: Vec<PermissionRule>,
    },
}

impl PermissionPolicy {
    /// Rule lists (see [`PermissionPolicy::Rules`]).
    ///
    /// ```
    /// use orchestrator_agents::agent::{PermissionPolicy, PermissionRule, ToolKind};
    /// let p = PermissionPolicy::rules([PermissionRule::new(ToolKind::Read)], []);
    /// assert_eq!(p.to_string(), r#"{"allow":["read"],"deny":[]}"#);
    /// ```
    pub fn rules(
        allow: impl IntoIterator<Item = PermissionRule>,
        deny: impl IntoIterator<Item = PermissionRule>,
    ) -> Self {
        PermissionPolicy::Rules {
            allow: allow.into_iter().collect(),
            deny: deny.into_iter().collect(),
        }
    }

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

    /// Whether every request is allowed.
    pub fn is_allow_all(&self) -> bool {
        matches!(self, PermissionPolicy::AllowAll)
    }

    /// What this policy decides for a request of `kind` on `target` (see [`PermissionRule`]
    /// for targets): a matching deny rule wins over allow rules; rules no rule matches ask.
    ///
    /// ```
    /// use orchestrator_agents::agent::{Permission, PermissionPolicy, ToolKind};
    /// let p = PermissionPolicy::ReadOnly;
    /// assert_eq!(p.decide(ToolKind::Read, "src/lib.rs"), Permission::Allow);
    /// assert_eq!(
    ///     p.decide(ToolKind::Write, "src/lib.rs"),
    ///     Permission::deny("the session's permission policy is read-only: writes are not allowed")
    /// );
    /// ```
    pub fn decide(&self, kind: ToolKind, target: &str) -> Permission {
        match self {
            PermissionPolicy::AllowAll => Permission::Allow,
            PermissionPolicy::ReadOnly => match kind {
                ToolKind::Write => Permission::deny(READ_ONLY_WRITES),
                ToolKind::Shell => Permission::deny(READ_ONLY_SHELL),
                _ => Permission::Allow,
            },
            PermissionPolicy::NoShell => match kind {
                ToolKind::Shell => Permission::deny(NO_SHELL),
                _ => Permission::Allow,
            },
            PermissionPolicy::Ask => Permission::Ask,
            PermissionPolicy::Rules { allow, deny } => {
                if let Some(rule) = deny.iter().find(|r| r.matches(kind, target)) {
                    Permission::deny(rule_denial(rule))
                } else if allow.iter().any(|r| r.matches(kind, target)) {
                    Permission::Allow
                } else {
                    Permission::Ask
                }
            }
        }
    }

    /// The policy as rule lists with the reason of each denial, for the CLIs' translations;
    /// `None` for `allow-all`. `ask` is the empty rule set.
    pub(crate) fn rule_set(&self) -> Option<RuleSet> {
        let all = |kinds: &[ToolKind]| kinds.iter().map(|&k| PermissionRule::new(k)).collect();
        let set = match self {
            PermissionPolicy::AllowAll => return None,
            PermissionPolicy::ReadOnly => RuleSet {
                allow: all(&[ToolKind::Read, ToolKind::Url, ToolKind::Mcp]),
                deny: vec![
                    (
                        PermissionRule::new(ToolKind::Write),
                        READ_ONLY_WRITES.into(),
                    ),
                    (PermissionRule::new(ToolKind::Shell), READ_ONLY_SHELL.into()),
                ],
            },
            PermissionPolicy::NoShell => RuleSet {
                allow: all(&[
                    ToolKind::Read,
                    ToolKind::Write,
                    ToolKind::Url,
                    ToolKind::Mcp,
                ]),
                deny: vec![(PermissionRule::new(ToolKind::Shell), NO_SHELL.into())],
            },
            PermissionPolicy::Ask => RuleSet::default(),
            PermissionPolicy::Rules { allow, deny } => RuleSet {
                allow: allow.clone(),
                deny: deny.iter().map(|r| (r.clone(), rule_denial(r))).collect(),
            },
        };
        Some(set)
    }
}

/// The reason of a denial by `rule`.
fn rule_denial(rule: &PermissionRule) -> String {
    format!("the session's permission rules deny `{rule}`")
}

/// The reason the CLIs give for requests that no rule allows (which would be asked).
pub(crate) const NOT_ALLOWED: &str =
    "no permission rule of the session allows this, and the host cannot be asked here";

impl fmt::Display for PermissionPolicy {
    /// The name, or for rules their JSON object (what [`FromStr`] reads).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PermissionPolicy::Rules { allow, deny } => {
                let json = serde_json::json!({ "allow": allow, "deny": deny });
                write!(f, "{json}")
            }
            other => f.write_str(other.name()),
        }
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
            json if json.starts_with('{') => {
                let value: Value = serde_json::from_str(json)
                    .map_err(|e| format!("the permission rules are not valid JSON: {e}"))?;
                rules_from_json(&value)
            }
            other => Err(format!(
                "unknown permission policy `{other}`; expected allow-all, read-only, no-shell, ask or rules like {{\"allow\": [\"read\", \"write:src/**\"], \"deny\": [\"shell\"]}}"
            )),
        }
    }
}

/// Rule lists from their JSON object.
fn rules_from_json(value: &Value) -> Result<PermissionPolicy, String> {
    let Value::Object(fields) = value else {
        return Err(format!(
            "the permission rules must be a JSON object with `allow` and `deny` lists, not {value}"
        ));
    };
    if let Some(key) = fields.keys().find(|k| *k != "allow" && *k != "deny") {
        return Err(format!(
            "unknown key `{key}` in the permission rules; expected `allow` and `deny`"
        ));
    }
    let list = |name: &str| -> Result<Vec<PermissionRule>, String> {
        match fields.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| rule_from_json(item).map_err(|e| format!("{e} (in `{name}`)")))
                .collect(),
            Some(other) => Err(format!(
                "`{name}` of the permission rules must be a list of rules, not {other}"
            )),
        }
    };
    Ok(PermissionPolicy::Rules {
        allow: list("allow")?,
        deny: list("deny")?,
    })
}

impl Serialize for PermissionPolicy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            PermissionPolicy::Rules { allow, deny } => {
                #[derive(Serialize)]
                struct Lists<'a> {
                    allow: &'a [PermissionRule],
                    deny: &'a [PermissionRule],
                }
                Lists { allow, deny }.serialize(serializer)
            }
            other => serializer.serialize_str(other.name()),
        }
    }
}

impl<'de> Deserialize<'de> for PermissionPolicy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        match &value {
            Value::String(text) => text.parse(),
            // The externally tagged form of the first skeleton: `{"rules": {...}}`.
            Value::Object(fields) => match fields.get("rules") {
                Some(inner) if fields.len() == 1 => rules_from_json(inner),
                _ => rules_from_json(&value),
            },
            other => rules_from_json(other),
        }
        .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(glob: &str, text: &str) -> bool {
        glob_match(glob, text, Some('/'))
    }

    #[test]
    fn globs_match_within_and_across_segments() {
        assert!(path("src/*.rs", "src/lib.rs"));
        assert!(!path("src/*.rs", "src/agent/mod.rs"));
        assert!(path("src/**", "src/agent/mod.rs"));
        assert!(path("src/**/*.rs", "src/lib.rs"), "`**/` may be nothing");
        assert!(path("src/**/*.rs", "src/a/b/c.rs"));
        assert!(!path("src/**/*.rs", "src/a/b/c.txt"));
        assert!(path("**/*.md", "README.md"));
        assert!(path("**/*.md", "docs/guide/intro.md"));
        assert!(path("**", "anything/at/all"));
        assert!(path("a?c", "abc"));
        assert!(!path("a?c", "a/c"), "`?` is not the separator");
        assert!(!path("a?c", "ac"));
        assert!(path("*", ""));
        assert!(!path("src", "src/lib.rs"), "no implicit prefix match");
        assert!(path(".env", ".env"));
        assert!(!path(".env", "config/.env"));
        assert!(path("**/.env", "config/.env"));
        assert!(path(
            "https://*.github.com/**",
            "https://api.github.com/repos/x"
        ));
        assert!(!path(
            "https://*.github.com/**",
            "https://evil.com/x.github.com/"
        ));
        assert!(path("a*b*c*d", "aXbYcZd"));
        assert!(
            !path("a*a*a*a*a*b", &"a".repeat(60)),
            "no exponential blow-up"
        );
        assert!(path("übung/*", "übung/ä.txt"));
    }

    #[test]
    fn shell_globs_have_no_segments() {
        let shell = |glob, text| glob_match(glob, text, None);
        assert!(shell("git *", "git log --oneline src/lib.rs"));
        assert!(!shell("git *", "gitk"));
        assert!(shell("rm *", "rm -rf target/debug"));
        assert!(!shell("rm *", "echo rm x"));
        assert!(shell("cargo ?est", "cargo test"));
        assert!(shell("ls", "ls"));
        assert!(!shell("ls", "ls -la"));
    }

    #[test]
    fn rules_parse_from_strings_and_objects() -> Result<(), String> {
        let p: PermissionPolicy =
            r#" {"allow": ["write:src/**", "read", {"kind": "url", "glob": "https://docs.rs/**"}],
              "deny": ["shell", "shell:rm *", {"kind": "mcp"}]} "#
                .parse()?;
        let PermissionPolicy::Rules { allow, deny } = &p else {
            return Err(format!("not rules: {p:?}"));
        };
        assert_eq!(
            allow,
            &[
                PermissionRule::with_glob(ToolKind::Write, "src/**"),
                PermissionRule::new(ToolKind::Read),
                PermissionRule::with_glob(ToolKind::Url, "https://docs.rs/**"),
            ]
        );
        assert_eq!(
            deny,
            &[
                PermissionRule::new(ToolKind::Shell),
                PermissionRule::with_glob(ToolKind::Shell, "rm *"),
                PermissionRule::new(ToolKind::Mcp),
            ]
        );
        // A URL glob keeps its own colons.
        assert_eq!(allow[2].to_string(), "url:https://docs.rs/**");
        assert_eq!(
            "{}".parse::<PermissionPolicy>()?,
            PermissionPolicy::rules([], [])
        );
        Ok(())
    }

    #[test]
    fn bad_rules_are_named_with_the_known_kinds() {
        let err = |s: &str| s.parse::<PermissionPolicy>().err().unwrap_or_default();
        let e = err(r#"{"allow": ["read", "exec:make"]}"#);
        assert!(e.contains("`exec:make`"), "{e}");
        assert!(e.contains("unknown kind `exec`"), "{e}");
        assert!(
            e.contains("known kinds: read, write, shell, url, mcp"),
            "{e}"
        );
        assert!(e.contains("in `allow`"), "{e}");
        let e = err(r#"{"deny": [{"kind": "net"}]}"#);
        assert!(
            e.contains(r#"{"kind":"net"}"#) && e.contains("in `deny`"),
            "{e}"
        );
        assert!(e.contains("known kinds"), "{e}");
        let e = err(r#"{"deny": ["write:"]}"#);
        assert!(e.contains("`write:`") && e.contains("empty"), "{e}");
        let e = err(r#"{"alow": ["read"]}"#);
        assert!(e.contains("unknown key `alow`"), "{e}");
        let e = err(r#"{"allow": "read"}"#);
        assert!(e.contains("must be a list"), "{e}");
        let e = err(r#"{"allow": [3]}"#);
        assert!(e.contains("bad permission rule 3"), "{e}");
        let e = err(r#"{"allow": [{"kind": "read", "path": "x"}]}"#);
        assert!(e.contains("unknown key `path`"), "{e}");
        let e = err(r#"{"allow": ["read""#);
        assert!(e.contains("not valid JSON"), "{e}");
        let e = err("readonly");
        assert!(e.contains("unknown permission policy `readonly`"), "{e}");
        assert!(e.contains("read-only"), "{e}");
    }

    #[test]
    fn serde_round_trips() -> Result<(), serde_json::Error> {
        let policies = [
            PermissionPolicy::AllowAll,
            PermissionPolicy::ReadOnly,
            PermissionPolicy::NoShell,
            PermissionPolicy::Ask,
            PermissionPolicy::rules([], []),
            PermissionPolicy::rules(
                [
                    PermissionRule::new(ToolKind::Read),
                    PermissionRule::with_glob(ToolKind::Write, "src/**"),
                    PermissionRule::with_glob(ToolKind::Url, "https://x.org/a:b"),
                ],
                [PermissionRule::with_glob(ToolKind::Shell, "rm *")],
            ),
        ];
        for p in policies {
            let json = serde_json::to_string(&p)?;
            assert_eq!(
                serde_json::from_str::<PermissionPolicy>(&json)?,
                p,
                "{json}"
            );
            assert_eq!(
                p.to_string().parse::<PermissionPolicy>().ok(),
                Some(p.clone())
            );
            // Inside a stored record, too.
            let doc = serde_json::json!({ "permissions": p });
            let back: PermissionPolicy = serde_json::from_value(doc["permissions"].clone())?;
            assert_eq!(back, p);
        }
        assert_eq!(
            serde_json::to_string(&PermissionPolicy::ReadOnly)?,
            "\"read-only\""
        );
        let rule: PermissionRule = serde_json::from_str(r#"{"kind":"write","glob":"src/**"}"#)?;
        assert_eq!(serde_json::to_string(&rule)?, "\"write:src/**\"");
        assert!(serde_json::from_str::<PermissionPolicy>("\"sometimes\"").is_err());
        let tagged: PermissionPolicy =
            serde_json::from_str(r#"{"rules": {"allow": ["read"], "deny": []}}"#)?;
        assert_eq!(
            tagged,
            PermissionPolicy::rules([PermissionRule::new(ToolKind::Read)], [])
        );
        Ok(())
    }

    #[test]
    fn decisions() {
        let p = PermissionPolicy::ReadOnly;
        assert_eq!(p.decide(ToolKind::Read, "a"), Permission::Allow);
        assert_eq!(p.decide(ToolKind::Url, "https://x"), Permission::Allow);
        assert_eq!(p.decide(ToolKind::Mcp, "s/t"), Permission::Allow);
        assert_eq!(
            p.decide(ToolKind::Write, "a"),
            Permission::deny(READ_ONLY_WRITES)
        );
        assert_eq!(
            p.decide(ToolKind::Shell, "ls"),
            Permission::deny(READ_ONLY_SHELL)
        );
        let p = PermissionPolicy::NoShell;
        assert_eq!(p.decide(ToolKind::Write, "a"), Permission::Allow);
        assert_eq!(p.decide(ToolKind::Shell, "ls"), Permission::deny(NO_SHELL));
        for kind in ToolKind::ALL {
            assert_eq!(
                PermissionPolicy::AllowAll.decide(kind, "x"),
                Permission::Allow
            );
            assert_eq!(PermissionPolicy::Ask.decide(kind, "x"), Permission::Ask);
        }

        let p: PermissionPolicy =
            r#"{"allow": ["write:src/**", "read", "shell:git *"], "deny": ["write:src/secret/**", "shell:git push*"]}"#
                .parse()
                .unwrap_or_default();
        assert_eq!(p.decide(ToolKind::Write, "src/lib.rs"), Permission::Allow);
        assert_eq!(p.decide(ToolKind::Write, "./src/lib.rs"), Permission::Allow);
        assert_eq!(
            p.decide(ToolKind::Write, "src/secret/key.pem"),
            Permission::deny("the session's permission rules deny `write:src/secret/**`"),
            "deny wins over allow"
        );
        assert_eq!(p.decide(ToolKind::Write, "Cargo.toml"), Permission::Ask);
        assert_eq!(p.decide(ToolKind::Read, "anything"), Permission::Allow);
        assert_eq!(p.decide(ToolKind::Shell, "git status"), Permission::Allow);
        assert!(!p.decide(ToolKind::Shell, "git push --force").is_allowed());
        assert_eq!(p.decide(ToolKind::Shell, "make"), Permission::Ask);
        assert_eq!(p.decide(ToolKind::Url, "https://x"), Permission::Ask);
    }

    #[test]
    fn rule_sets_say_what_is_wholly_allowed_or_denied() {
        assert_eq!(PermissionPolicy::AllowAll.rule_set(), None);
        let ro = PermissionPolicy::ReadOnly.rule_set().unwrap_or_default();
        assert!(ro.allows_all(ToolKind::Read) && ro.allows_all(ToolKind::Mcp));
        assert_eq!(ro.denies_all(ToolKind::Write), Some(READ_ONLY_WRITES));
        assert_eq!(ro.denies_all(ToolKind::Shell), Some(READ_ONLY_SHELL));
        let ask = PermissionPolicy::Ask.rule_set().unwrap_or_default();
        for kind in ToolKind::ALL {
            assert_eq!(ask.denies_all(kind), Some(NOT_ALLOWED));
            assert!(!ask.mentions(kind));
        }
        let rules: PermissionPolicy =
            r#"{"allow": ["write", "shell:git *"], "deny": ["write:.env"]}"#
                .parse()
                .unwrap_or_default();
        let set = rules.rule_set().unwrap_or_default();
        assert!(!set.allows_all(ToolKind::Write), "a deny rule of the kind");
        assert_eq!(set.denies_all(ToolKind::Write), None);
        assert_eq!(set.denies_all(ToolKind::Shell), None);
        assert_eq!(set.denies_all(ToolKind::Read), Some(NOT_ALLOWED));
        assert!(set.mentions(ToolKind::Shell) && !set.mentions(ToolKind::Url));
    }

    #[test]
    fn command_prefixes_and_notes() {
        assert_eq!(command_prefix("git *"), Some("git"));
        assert_eq!(command_prefix("git push *"), Some("git push"));
        assert_eq!(command_prefix("git push*"), None);
        assert_eq!(command_prefix("*"), None);
        assert_eq!(command_prefix("git status"), None);
        assert!(is_literal("git status") && !is_literal("src/*"));
        assert_eq!(
            policy_note("Copilot CLI", &PermissionPolicy::NoShell, &[]),
            None
        );
        let note = policy_note("Copilot CLI", &PermissionPolicy::Ask, &["reads".into()]);
        assert_eq!(
            note.as_deref(),
            Some("permission policy `ask`: Copilot CLI cannot ask the host about tool requests here; requests not allowed by a rule are denied. Not enforced as written by Copilot CLI: reads")
        );
    }
}
