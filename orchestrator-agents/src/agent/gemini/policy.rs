//! A permission policy as a Gemini CLI policy file (`--policy <run>/permissions.toml`): deny
//! rules, allow rules and a catch-all deny, with `argsPattern`s Gemini's ReDoS check accepts.

use std::path::Path;

use super::super::permission::{is_literal, policy_note, NOT_ALLOWED};
use super::super::{AgentRequest, PermissionPolicy, PermissionRule, ToolKind};
use super::CLI;

/// Gemini CLI's tools per kind.
const READ_TOOLS: [&str; 5] = [
    "read_file",
    "read_many_files",
    "list_directory",
    "glob",
    "grep_search",
];
const WRITE_TOOLS: [&str; 2] = ["write_file", "replace"];
const SHELL_TOOLS: [&str; 1] = ["run_shell_command"];
const URL_TOOLS: [&str; 2] = ["web_fetch", "google_web_search"];
/// Read tools that search many files, denied as a whole by a read deny glob.
const SEARCH_TOOLS: [&str; 2] = ["read_many_files", "grep_search"];

/// The priorities of the policy file's rules.
const DENY_PRIORITY: u32 = 300;
const ALLOW_PRIORITY: u32 = 200;
const CATCH_ALL_PRIORITY: u32 = 100;

/// One rule of Gemini CLI's policy engine, without its decision.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PolicyRule {
    /// `toolName`: tool names, or `["*"]`.
    tools: Vec<String>,
    /// `mcpName`, for MCP tools (`*`: any server).
    mcp: Option<String>,
    /// `argsPattern`.
    args: Option<String>,
}

impl PolicyRule {
    fn tools(tools: &[&'static str]) -> Self {
        PolicyRule {
            tools: tools.iter().map(|&t| t.to_owned()).collect(),
            mcp: None,
            args: None,
        }
    }

    fn with_args(tools: &[&'static str], args: String) -> Self {
        PolicyRule {
            args: Some(args),
            ..PolicyRule::tools(tools)
        }
    }

    /// The rule as a TOML `[[rule]]` table deciding `decision` (with `reason` for a denial).
    fn toml(&self, decision: &str, priority: u32, reason: Option<&str>) -> String {
        let names: Vec<String> = self.tools.iter().map(|t| toml_string(t)).collect();
        let mut t = String::from("[[rule]]\n");
        match names.as_slice() {
            [one] => t.push_str(&format!("toolName = {one}\n")),
            many => t.push_str(&format!("toolName = [{}]\n", many.join(", "))),
        }
        if let Some(mcp) = &self.mcp {
            t.push_str(&format!("mcpName = {}\n", toml_string(mcp)));
        }
        if let Some(args) = &self.args {
            t.push_str(&format!("argsPattern = {}\n", toml_string(args)));
        }
        t.push_str(&format!(
            "decision = \"{decision}\"\npriority = {priority}\n"
        ));
        if let Some(reason) = reason {
            t.push_str(&format!("denyMessage = {}\n", toml_string(reason)));
        }
        t
    }
}

/// A TOML basic string (JSON string escapes are valid TOML escapes).
pub(super) fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The policy file for `r`'s permissions (`None` for `allow-all`); what it cannot enforce
/// goes to `notes`.
pub(super) fn policy_toml(r: &AgentRequest, notes: &mut Vec<String>) -> Option<String> {
    let policy = &r.permissions;
    let set = policy.rule_set()?;
    let mut toml = format!(
        "# Written by the orchestrator for this run: the session's permission policy `{}`.\n",
        policy.name()
    );
    let mut push = |rule: &PolicyRule, decision: &str, priority: u32, reason: Option<&str>| {
        toml.push('\n');
        toml.push_str(&rule.toml(decision, priority, reason));
    };
    if matches!(
        policy,
        PermissionPolicy::ReadOnly | PermissionPolicy::NoShell
    ) {
        for (rule, reason) in &set.deny {
            for tools in whole_kind(rule.kind).unwrap_or_default() {
                push(&tools, "deny", DENY_PRIORITY, Some(reason));
            }
        }
        return Some(toml);
    }
    let dir = &r.dir;
    let mut t = set.translate(CLI, |rule, deny| patterns(rule, deny, dir), whole_kind);
    for (rule, _) in set.denied(ToolKind::Read) {
        if rule.glob.is_some() && set.denies_all(ToolKind::Read).is_none() {
            t.gaps.push(format!("the deny rule `{rule}` also denies read_many_files and grep_search as a whole (they read many files)"));
        }
    }
    if set.denies_all(ToolKind::Read).is_none() && set.falls_back(ToolKind::Read) {
        for rule in set.allowed(ToolKind::Read) {
            t.gaps.push(format!("the allow rule `{rule}` only allows read_file (the listing and search tools take directories)"));
        }
    }
    notes.extend(policy_note(CLI, policy, &t.gaps));
    for (rule, reason) in &t.deny {
        push(rule, "deny", DENY_PRIORITY, Some(reason));
    }
    for rule in &t.allow {
        push(rule, "allow", ALLOW_PRIORITY, None);
    }
    // The agent's instructions stay readable.
    let instructions = regex_escape(&json_escape(&r.instructions_file.to_string_lossy()));
    // Exact, no quantifier: always accepted.
    let read = PolicyRule::with_args(
        &["read_file"],
        format!("\\x00\"file_path\":\"{instructions}\"\\x00"),
    );
    push(&read, "allow", ALLOW_PRIORITY, None);
    push(
        &PolicyRule::tools(&["*"]),
        "deny",
        CATCH_ALL_PRIORITY,
        Some(NOT_ALLOWED),
    );
    Some(toml)
}

/// The rules denying every request of `kind`.
fn whole_kind(kind: ToolKind) -> Option<Vec<PolicyRule>> {
    let rule = match kind {
        ToolKind::Read => PolicyRule::tools(&READ_TOOLS),
        ToolKind::Write => PolicyRule::tools(&WRITE_TOOLS),
        ToolKind::Shell => PolicyRule::tools(&SHELL_TOOLS),
        ToolKind::Url => PolicyRule::tools(&URL_TOOLS),
        _ => PolicyRule {
            tools: vec!["*".into()],
            mcp: Some("*".into()),
            args: None,
        },
    };
    Some(vec![rule])
}

/// The rules matching what `rule` (a deny rule when `deny`) matches, paths taken relative to
/// the worktree `dir` (see [`path_pattern`] and [`command_pattern`]).
fn patterns(rule: &PermissionRule, deny: bool, dir: &Path) -> Option<Vec<PolicyRule>> {
    let Some(glob) = rule.glob.as_deref() else {
        return whole_kind(rule.kind);
    };
    let checked = |pattern: String| safe_pattern(&pattern).then_some(pattern);
    match rule.kind {
        ToolKind::Read => {
            let pattern = checked(path_pattern(glob, dir, deny))?;
            let mut rules = vec![PolicyRule::with_args(&["read_file"], pattern)];
            if deny {
                rules.push(PolicyRule::tools(&SEARCH_TOOLS));
            }
            Some(rules)
        }
        ToolKind::Write => {
            let pattern = checked(path_pattern(glob, dir, deny))?;
            Some(vec![PolicyRule::with_args(&WRITE_TOOLS, pattern)])
        }
        ToolKind::Shell => {
            let pattern = checked(command_pattern(glob, deny))?;
            Some(vec![PolicyRule::with_args(&SHELL_TOOLS, pattern)])
        }
        ToolKind::Mcp => {
            let (server, tool) = glob.split_once('/')?;
            if server.is_empty() || !is_literal(server) {
                return None;
            }
            let tool = match tool {
                "*" | "**" => "*",
                tool if !tool.is_empty() && is_literal(tool) && !tool.contains('/') => tool,
                _ => return None,
            };
            Some(vec![PolicyRule {
                tools: vec![tool.to_owned()],
                mcp: Some(server.to_owned()),
                args: None,
            }])
        }
        _ => None,
    }
}

/// The `argsPattern` of a `file_path` argument matching `glob`. Gemini CLI matches the
/// arguments as JSON with each top-level pair between NUL characters.
///
/// An allow pattern is strict: the path is `glob` relative to `dir` (absolute inside it, or
/// relative, or `./`-relative), its wildcards never cross a quote (so never into another
/// argument), and a path holding `..` never matches. A deny pattern errs the other way: the
/// glob may match the end of any path (`sub/../denied.txt`, or `denied.txt` in any directory),
/// and its wildcards match anything.
pub(super) fn path_pattern(glob: &str, dir: &Path, deny: bool) -> String {
    let path = glob_regex(glob.trim_start_matches('/'), Some('/'), deny);
    let prefix = if deny {
        "(.*/|)".to_owned()
    } else if glob.starts_with('/') {
        r#"(?![^"]*\.\.)/"#.to_owned()
    } else {
        let dir = regex_escape(&json_escape(dir.to_string_lossy().trim_end_matches('/')));
        format!(r#"(?![^"]*\.\.)({dir}/|\./|)"#)
    };
    format!(r#"\x00"file_path":"{prefix}{path}"\x00"#)
}

/// The `argsPattern` of a `command` argument matching the shell glob `glob` (Gemini CLI
/// checks each command of a compound command line on its own too). In an allow pattern only
/// a final `*` may cross a quote (the command's start is fixed); in a deny pattern every
/// wildcard matches anything.
pub(super) fn command_pattern(glob: &str, deny: bool) -> String {
    let (body, tail) = match glob.strip_suffix('*') {
        Some(body) if !deny => (body.trim_end_matches('*'), ".*"),
        _ => (glob, ""),
    };
    let command = glob_regex(body, None, deny);
    format!(r#"\x00"command":"{command}{tail}"\x00"#)
}

/// A regular expression matching the JSON-escaped texts that `glob` matches (see
/// [`PermissionRule`]), `sep` separating segments: for an allow pattern, no wildcard crosses a
/// quote (it under-matches a target holding one); for a deny pattern, wildcards match any
/// text (they over-match). No group is quantified: Gemini CLI drops patterns it suspects of
/// nested quantifiers ([`safe_pattern`]).
pub(super) fn glob_regex(glob: &str, sep: Option<char>, deny: bool) -> String {
    let (any, in_segment, one) = match (deny, sep.is_some()) {
        (true, true) => (".*", "[^/]*", "[^/]{1,6}"),
        (true, false) => (".*", ".*", ".{1,6}"),
        (false, true) => (r#"[^"]*"#, r#"[^"/]*"#, r#"[^"\\/]"#),
        (false, false) => (r#"[^"]*"#, r#"[^"]*"#, r#"[^"\\]"#),
    };
    let mut re = String::new();
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '?' => re.push_str(one),
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if sep.is_some() && chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str(&format!("({any}/|)"));
                } else {
                    re.push_str(any);
                }
            }
            '*' => re.push_str(in_segment),
            c => re.push_str(&regex_escape(&json_escape(&c.to_string()))),
        }
    }
    re
}

/// Whether Gemini CLI accepts `pattern`: its `isSafeRegExp` drops (silently, for the run)
/// patterns over 2048 characters and any with a group followed by a quantifier. Checked
/// more strictly here: no `)` directly followed by `*`, `+`, `?` or `{`.
pub(super) fn safe_pattern(pattern: &str) -> bool {
    pattern.len() <= 2048
        && !pattern
            .as_bytes()
            .windows(2)
            .any(|w| w[0] == b')' && b"*+?{".contains(&w[1]))
}

/// `s` as it appears inside a JSON string.
fn json_escape(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or_default()
        .to_owned()
}

/// `s` with the characters special in a JavaScript regular expression escaped.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\^$.|?*+()[]{}/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
