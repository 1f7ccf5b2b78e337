//! The parsers: what each file may hold, and that every refusal names the file and the field
//! (and the line, where it has one).

use std::path::Path;

use super::expand::expand;
use super::front::{self, Value};
use super::parse;
use super::McpTransport;
use crate::error::Error;

const AGENT_FILE: &str = "/p/agents/reviewer.agent.md";
const SKILL_FILE: &str = "/p/skills/style/SKILL.md";
const MCP_FILE: &str = "/p/.mcp.json";
const MANIFEST_FILE: &str = "/p/plugin.json";

/// The file, field and line of a plugin error (panics on any other error).
fn located(e: Error) -> (String, Option<String>, Option<usize>, String) {
    let text = e.to_string();
    match e {
        Error::Plugin {
            file, field, line, ..
        } => (file.display().to_string(), field, line, text),
        other => panic!("not a plugin error: {other}"),
    }
}

/// Asserts that `result` is refused for `file`, naming `field` (and `line` when given) in
/// its message.
fn refused<T: std::fmt::Debug>(
    result: Result<T, Error>,
    file: &str,
    field: &str,
    line: Option<usize>,
) -> String {
    let (f, fld, l, text) = located(result.expect_err("refused"));
    assert_eq!(f, file, "{text}");
    assert_eq!(fld.as_deref(), Some(field), "{text}");
    assert!(text.contains(file), "{text}");
    assert!(text.contains(&format!("field `{field}`")), "{text}");
    if let Some(line) = line {
        assert_eq!(l, Some(line), "{text}");
        assert!(text.contains(&format!("line {line}")), "{text}");
    }
    text
}

#[test]
fn front_matter_values_lists_and_blocks() {
    let doc = front::parse(
        "---\n\
         name: reviewer   # a comment\n\
         description: \"Reviews: code, \\\"carefully\\\"\"\n\
         quoted: 'it''s # not a comment'\n\
         tools: [Read, \"Grep\", 'Bash(git *)']\n\
         skills:\n  - style\n  - tests\n\
         system: |\n  Line one.\n\n  Line two.\n\
         folded: >\n  a\n  b\n\
         ---\n\n# Body\n\nText.\n",
    )
    .expect("parses");
    let text = |k: &str| match &doc.fields[k].value {
        Value::Text(t) => t.clone(),
        Value::List(l) => panic!("{k} is a list: {l:?}"),
    };
    let list = |k: &str| match &doc.fields[k].value {
        Value::List(l) => l.clone(),
        Value::Text(t) => panic!("{k} is text: {t}"),
    };
    assert_eq!(text("name"), "reviewer");
    assert_eq!(text("description"), "Reviews: code, \"carefully\"");
    assert_eq!(text("quoted"), "it's # not a comment");
    assert_eq!(list("tools"), ["Read", "Grep", "Bash(git *)"]);
    assert_eq!(list("skills"), ["style", "tests"]);
    assert_eq!(text("system"), "Line one.\n\nLine two.");
    assert_eq!(text("folded"), "a b");
    assert_eq!(doc.fields["tools"].line, 5);
    assert_eq!(doc.fields["skills"].line, 6);
    assert_eq!(doc.body, "# Body\n\nText.");
}

#[test]
fn front_matter_refusals_have_lines() {
    let cases: &[(&str, usize, Option<&str>, &str)] = &[
        ("name: x\n---\n", 1, None, "must start with"),
        ("---\nname: x\n", 1, None, "no closing"),
        ("---\nname x\n---\n", 2, None, "expected `key: value`"),
        ("---\nname: a\nname: b\n---\n", 3, Some("name"), "twice"),
        (
            "---\nmeta:\n  key: v\n---\n",
            3,
            Some("meta"),
            "nested mappings",
        ),
        ("---\n  indented: v\n---\n", 2, None, "indented line"),
        (
            "---\ntools: [a, b\n---\n",
            2,
            Some("tools"),
            "must end with `]`",
        ),
        (
            "---\ntools: [a, [b]]\n---\n",
            2,
            Some("tools"),
            "single value",
        ),
        ("---\nname: \"open\n---\n", 2, Some("name"), "double-quoted"),
        ("---\nname: 'open\n---\n", 2, Some("name"), "single-quoted"),
        ("---\nname: &anchor x\n---\n", 2, Some("name"), "quote it"),
        ("---\nname: {a: b}\n---\n", 2, Some("name"), "quote it"),
        ("---\nname:\n---\n", 2, Some("name"), "no value"),
        ("---\nname:x\n---\n", 2, Some("name"), "a space must follow"),
        ("---\ntools:\n\t- a\n---\n", 3, Some("tools"), "tabs"),
        ("---\nna me: x\n---\n", 2, None, "not a field name"),
    ];
    for (text, line, field, words) in cases {
        let p = front::parse(text).expect_err(text);
        assert_eq!(p.line, *line, "{text:?}: {p:?}");
        assert_eq!(p.field.as_deref(), *field, "{text:?}: {p:?}");
        assert!(p.message.contains(words), "{text:?}: {p:?}");
    }
}

#[test]
fn an_agent_file() {
    let agent = parse::agent(
        Path::new(AGENT_FILE),
        "---\nname: reviewer\ndescription: Reviews\nmodel: claude-sonnet-4-5\n\
         tools: Read, Grep\nsystem: You are careful.\nskills: [style]\ncli: claude\ncolor: blue\n---\n\
         Review the change.\n",
    )
    .expect("parses");
    assert_eq!(agent.name(), "reviewer");
    assert_eq!(agent.description(), Some("Reviews"));
    assert_eq!(agent.model(), Some("claude-sonnet-4-5"));
    assert_eq!(agent.tools(), ["Read", "Grep"]);
    assert_eq!(agent.skill_names(), ["style"]);
    assert_eq!(agent.cli(), Some("claude"));
    assert_eq!(
        agent.system_prompt(),
        "You are careful.\n\nReview the change."
    );
    let minimal = parse::agent(Path::new(AGENT_FILE), "---\nname: r2\n---\n").expect("minimal");
    assert_eq!(minimal.system_prompt(), "");
    assert!(minimal.tools().is_empty());
}

#[test]
fn agent_refusals_name_file_field_and_line() {
    let agent = |text: &str| parse::agent(Path::new(AGENT_FILE), text);
    refused(
        agent("---\ndescription: x\n---\n"),
        AGENT_FILE,
        "name",
        None,
    );
    refused(
        agent("---\nname: Reviewer\n---\n"),
        AGENT_FILE,
        "name",
        Some(2),
    );
    let builtin = refused(
        agent("---\nname: claude\n---\n"),
        AGENT_FILE,
        "name",
        Some(2),
    );
    assert!(builtin.contains("built-in"), "{builtin}");
    refused(
        agent("---\nname: r\nmodel: [a, b]\n---\n"),
        AGENT_FILE,
        "model",
        Some(3),
    );
    refused(
        agent("---\nname: r\nmodel: \"\"\n---\n"),
        AGENT_FILE,
        "model",
        Some(3),
    );
    refused(
        agent("---\nname: r\ntools: [Read, '']\n---\n"),
        AGENT_FILE,
        "tools",
        Some(3),
    );
    refused(
        agent("---\nname: r\ncli: vim\n---\n"),
        AGENT_FILE,
        "cli",
        Some(3),
    );
    let unknown = refused(
        agent("---\nname: r\npermissionMode: plan\n---\n"),
        AGENT_FILE,
        "permissionMode",
        Some(3),
    );
    assert!(unknown.contains("unknown field"), "{unknown}");
    refused(
        agent("---\nname: r\nskills:\n  key: v\n---\n"),
        AGENT_FILE,
        "skills",
        Some(4),
    );
}

#[test]
fn a_skill_file_and_its_refusals() {
    let skill = |text: &str| parse::skill(Path::new(SKILL_FILE), text);
    let s = skill("---\nname: style\ndescription: House style\n---\nUse tabs.\n").expect("parses");
    assert_eq!(
        (s.name(), s.description(), s.body()),
        ("style", "House style", "Use tabs.")
    );
    refused(
        skill("---\ndescription: d\n---\nx\n"),
        SKILL_FILE,
        "name",
        None,
    );
    refused(
        skill("---\nname: style\n---\nx\n"),
        SKILL_FILE,
        "description",
        None,
    );
    refused(
        skill("---\nname: style\ndescription: d\nmodel: m\n---\nx\n"),
        SKILL_FILE,
        "model",
        Some(4),
    );
    refused(
        skill("---\nname: Bad Name\ndescription: d\n---\nx\n"),
        SKILL_FILE,
        "name",
        Some(2),
    );
    let empty = skill("---\nname: style\ndescription: d\n---\n").expect_err("no body");
    assert!(empty.to_string().contains(SKILL_FILE), "{empty}");
}

#[test]
fn a_manifest_and_its_refusals() {
    let manifest = |text: &str| parse::manifest(Path::new(MANIFEST_FILE), text);
    let m = manifest(
        r#"{"name": "review", "description": "d", "version": "1.2.0", "author": {"name": "me"}, "keywords": ["a"]}"#,
    )
    .expect("parses");
    assert_eq!(m.name, "review");
    assert_eq!(m.version.as_deref(), Some("1.2.0"));
    refused(manifest(r#"{"version": "1"}"#), MANIFEST_FILE, "name", None);
    refused(manifest(r#"{"name": 3}"#), MANIFEST_FILE, "name", None);
    refused(
        manifest(r#"{"name": "Has Space"}"#),
        MANIFEST_FILE,
        "name",
        None,
    );
    refused(
        manifest(r#"{"name": "p", "version": 2}"#),
        MANIFEST_FILE,
        "version",
        None,
    );
    let unknown = refused(
        manifest(r#"{"name": "p", "colour": "red"}"#),
        MANIFEST_FILE,
        "colour",
        None,
    );
    assert!(unknown.contains("unknown field"), "{unknown}");
    let hooks = refused(
        manifest(r#"{"name": "p", "hooks": {}}"#),
        MANIFEST_FILE,
        "hooks",
        None,
    );
    assert!(hooks.contains("not supported"), "{hooks}");
    refused(
        manifest(r#"{"name": "p", "keywords": [1]}"#),
        MANIFEST_FILE,
        "keywords",
        None,
    );
    let (file, _, line, text) = located(manifest("{\n\"name\": \n").expect_err("syntax"));
    assert_eq!(file, MANIFEST_FILE);
    assert!(line.is_some() && text.contains("not valid JSON"), "{text}");
}

#[test]
fn mcp_servers_and_their_refusals() {
    let mcp = |text: &str| parse::mcp(Path::new(MCP_FILE), text, Path::new("/p"));
    let servers = mcp(r#"{"mcpServers": {
        "github": {"type": "http", "url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}},
        "files": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/files", "args": ["--root", "."], "env": {"LEVEL": "debug"}},
        "events": {"type": "sse", "url": "http://127.0.0.1:9/sse"}
    }}"#)
    .expect("parses");
    let kinds: Vec<(&str, &str)> = servers.iter().map(|s| (s.name(), s.kind())).collect();
    assert_eq!(
        kinds,
        [("events", "sse"), ("files", "stdio"), ("github", "http")]
    );
    let cases: &[(&str, &str)] = &[
        (r#"{"servers": {}}"#, "servers"),
        (r#"{}"#, "mcpServers"),
        (r#"{"mcpServers": []}"#, "mcpServers"),
        (
            r#"{"mcpServers": {"orchestrator": {"command": "x"}}}"#,
            "mcpServers.orchestrator",
        ),
        (
            r#"{"mcpServers": {"a b": {"command": "x"}}}"#,
            "mcpServers.a b",
        ),
        (r#"{"mcpServers": {"s": 3}}"#, "mcpServers.s"),
        (
            r#"{"mcpServers": {"s": {"type": "ws", "url": "x"}}}"#,
            "mcpServers.s.type",
        ),
        (
            r#"{"mcpServers": {"s": {"args": []}}}"#,
            "mcpServers.s.command",
        ),
        (
            r#"{"mcpServers": {"s": {"command": ""}}}"#,
            "mcpServers.s.command",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "args": [1]}}}"#,
            "mcpServers.s.args",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "env": {"A": 1}}}}"#,
            "mcpServers.s.env",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "url": "http://h"}}}"#,
            "mcpServers.s.command",
        ),
        (
            r#"{"mcpServers": {"s": {"type": "http"}}}"#,
            "mcpServers.s.url",
        ),
        (
            r#"{"mcpServers": {"s": {"type": "http", "url": "ftp://h"}}}"#,
            "mcpServers.s.url",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "http://h", "headers": []}}}"#,
            "mcpServers.s.headers",
        ),
        (
            r#"{"mcpServers": {"s": {"url": "http://h", "cwd": "/"}}}"#,
            "mcpServers.s.cwd",
        ),
    ];
    for (text, field) in cases {
        refused(mcp(text), MCP_FILE, field, None);
    }
    let ours = refused(
        mcp(r#"{"mcpServers": {"Orchestrator": {"command": "x"}}}"#),
        MCP_FILE,
        "mcpServers.Orchestrator",
        None,
    );
    assert!(ours.contains("SDK's own"), "{ours}");
}

#[test]
fn variables_expand_with_defaults_and_plugin_root() {
    let get = |var: &str| match var {
        "TOKEN" => Some("t-1".to_owned()),
        "EMPTY" => Some(String::new()),
        "CLAUDE_PLUGIN_ROOT" => Some("/p".to_owned()),
        _ => None,
    };
    assert_eq!(expand("Bearer ${TOKEN}", &get).as_deref(), Ok("Bearer t-1"));
    assert_eq!(
        expand("${CLAUDE_PLUGIN_ROOT}/bin", &get).as_deref(),
        Ok("/p/bin")
    );
    assert_eq!(expand("${MISSING:-x}", &get).as_deref(), Ok("x"));
    assert_eq!(expand("${EMPTY:-x}", &get).as_deref(), Ok("x"));
    assert_eq!(
        expand("$HOME ${1X} ${open", &get).as_deref(),
        Ok("$HOME ${1X} ${open")
    );
    assert_eq!(expand("${MISSING}", &get), Err("MISSING".to_owned()));
    let transport = McpTransport::Http {
        url: "u".into(),
        headers: [("A".to_owned(), "secret-value".to_owned())].into(),
    };
    assert_eq!(transport.secrets().collect::<Vec<_>>(), ["secret-value"]);
}
