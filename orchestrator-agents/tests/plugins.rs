//! Plugins (SPEC §15) from real folders: the three places and which name wins, the folders
//! and files refused (symbolic links leading out, files too large, duplicates, skills that do
//! not exist), and an agent job naming a plugin agent, run through the `agent` work runner on
//! a stand-in Claude Code that records what it was given.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_agents::agent::{AgentWorkRunner, ClaudeCode};
use orchestrator_agents::plugins::{Origin, PluginPlaces, MAX_FILE_BYTES};
use orchestrator_agents::Error;
use orchestrator_core::plan::{AgentSpec, WorkSpec};
use orchestrator_core::runner::WorkRunner;

/// Writes `files` (path, content) under `dir`.
fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write");
    }
}

/// A plugin folder `dir` named `name` with one agent `agent` (its body `prompt`) and an MCP
/// server `server`.
fn plugin(dir: &Path, name: &str, agent: &str, prompt: &str, server: &str) {
    write(
        dir,
        &[
            ("plugin.json", &format!(r#"{{"name": "{name}"}}"#)),
            (
                &format!("agents/{agent}.agent.md"),
                &format!("---\nname: {agent}\n---\n{prompt}\n"),
            ),
            (
                ".mcp.json",
                &format!(r#"{{"mcpServers": {{"{server}": {{"command": "srv-{name}"}}}}}}"#),
            ),
        ],
    );
}

fn plugin_error(e: Error) -> (PathBuf, Option<String>, String) {
    let text = e.to_string();
    match e {
        Error::Plugin { file, field, .. } => (file, field, text),
        Error::PluginRead { path, .. } => (path, None, text),
        other => panic!("not a plugin error: {other}"),
    }
}

#[test]
fn the_three_places_load_in_order_and_the_first_name_wins() {
    let root = tempfile::tempdir().expect("tempdir");
    let repo = root.path().join("repo");
    let user = root.path().join("config/orchestrator/plugins");
    let flag_one = root.path().join("one-plugin");
    let flag_many = root.path().join("many");

    plugin(
        &repo.join(".orchestrator/plugins/base"),
        "base",
        "reviewer",
        "Repo reviewer.",
        "shared",
    );
    plugin(
        &user.join("mine"),
        "mine",
        "reviewer",
        "User reviewer.",
        "shared",
    );
    write(
        &user.join("mine"),
        &[(
            "agents/writer.agent.md",
            "---\nname: writer\n---\nUser writer.\n",
        )],
    );
    plugin(&flag_one, "flagged", "tester", "Flag tester.", "flagsrv");
    // A folder of plugins; `base` again (its name loaded first: left out whole).
    plugin(
        &flag_many.join("a-docs"),
        "docs",
        "documenter",
        "Docs.",
        "docsrv",
    );
    plugin(
        &flag_many.join("b-base"),
        "base",
        "other",
        "Other.",
        "other",
    );

    let places = PluginPlaces::new()
        .repo(&repo)
        .user(&user)
        .dir(&flag_one)
        .dir(&flag_many);
    let plugins = places.load().expect("loads");
    let names: Vec<(&str, Origin)> = plugins
        .plugins()
        .iter()
        .map(|p| (p.name(), p.origin()))
        .collect();
    assert_eq!(
        names,
        [
            ("base", Origin::Repo),
            ("mine", Origin::User),
            ("flagged", Origin::Flag),
            ("docs", Origin::Flag),
        ]
    );
    let (from, reviewer) = plugins.agent("reviewer").expect("reviewer");
    assert_eq!(from.name(), "base", "the repository's reviewer wins");
    assert_eq!(reviewer.system_prompt(), "Repo reviewer.");
    assert_eq!(plugins.agent("writer").map(|(p, _)| p.name()), Some("mine"));
    assert_eq!(
        plugins.agent("tester").map(|(p, _)| p.name()),
        Some("flagged")
    );
    assert!(
        plugins.agent("other").is_none(),
        "the second `base` is left out"
    );
    let servers: Vec<(&str, &str)> = plugins
        .mcp_servers()
        .map(|(p, s)| (p.name(), s.name()))
        .collect();
    assert_eq!(
        servers,
        [
            ("base", "shared"),
            ("flagged", "flagsrv"),
            ("docs", "docsrv")
        ]
    );
    let notes = plugins.notes().join("\n");
    assert!(
        notes.contains("agent `reviewer` of plugin `mine`"),
        "{notes}"
    );
    assert!(
        notes.contains("MCP server `shared` of plugin `mine`"),
        "{notes}"
    );
    assert!(notes.contains("plugin `base` (flag"), "{notes}");
    assert_eq!(plugins.notes().len(), 3, "{notes}");

    // Missing standard places are fine; a missing --plugins DIR is not.
    let none = PluginPlaces::new()
        .repo(root.path().join("nowhere"))
        .user(root.path().join("nobody"))
        .load()
        .expect("nothing to load");
    assert!(none.is_empty());
    let missing = root.path().join("missing");
    let (path, _, text) = plugin_error(
        PluginPlaces::new()
            .dir(&missing)
            .load()
            .expect_err("missing dir"),
    );
    assert_eq!(path, missing, "{text}");
}

#[test]
fn the_user_folder_follows_xdg_config_home_then_home() {
    let dir = |home: Option<&str>, xdg: Option<&str>| {
        PluginPlaces::user_dir(home.map(AsRef::as_ref), xdg.map(AsRef::as_ref))
    };
    assert_eq!(
        dir(Some("/h"), None),
        Some(PathBuf::from("/h/.config/orchestrator/plugins"))
    );
    assert_eq!(
        dir(Some("/h"), Some("/x")),
        Some(PathBuf::from("/x/orchestrator/plugins"))
    );
    assert_eq!(
        dir(Some("/h"), Some("relative")),
        Some(PathBuf::from("/h/.config/orchestrator/plugins"))
    );
    assert_eq!(dir(None, None), None);
}

#[test]
fn folders_and_files_that_are_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let load = |dir: &Path| PluginPlaces::new().dir(dir).load();

    // A symbolic link leading outside the plugin folder.
    let outside = root.path().join("secret.agent.md");
    std::fs::write(&outside, "---\nname: sneaky\n---\nx\n").expect("write");
    let linked = root.path().join("linked");
    write(&linked, &[("plugin.json", r#"{"name": "linked"}"#)]);
    std::fs::create_dir_all(linked.join("agents")).expect("mkdir");
    std::os::unix::fs::symlink(&outside, linked.join("agents/sneaky.agent.md")).expect("symlink");
    let (path, _, text) = plugin_error(load(&linked).expect_err("escaping link"));
    assert_eq!(path, linked.join("agents/sneaky.agent.md"));
    assert!(text.contains("outside its plugin folder"), "{text}");
    // A link inside the folder is fine.
    let inside = root.path().join("inside");
    write(
        &inside,
        &[
            ("plugin.json", r#"{"name": "inside"}"#),
            ("shared/a.md", "---\nname: linked-agent\n---\nHi.\n"),
        ],
    );
    std::fs::create_dir_all(inside.join("agents")).expect("mkdir");
    std::os::unix::fs::symlink(inside.join("shared/a.md"), inside.join("agents/a.agent.md"))
        .expect("symlink");
    assert!(load(&inside)
        .expect("inside link")
        .agent("linked-agent")
        .is_some());

    // A file over the limit.
    let big = root.path().join("big");
    let body = "x".repeat(MAX_FILE_BYTES as usize);
    write(
        &big,
        &[
            ("plugin.json", r#"{"name": "big"}"#),
            ("agents/a.agent.md", &format!("---\nname: a\n---\n{body}\n")),
        ],
    );
    let (path, _, text) = plugin_error(load(&big).expect_err("too big"));
    assert_eq!(path, big.join("agents/a.agent.md"));
    assert!(text.contains("256 KiB"), "{text}");

    // Two agents of one name in one plugin.
    let twice = root.path().join("twice");
    write(
        &twice,
        &[
            ("plugin.json", r#"{"name": "twice"}"#),
            ("agents/a.agent.md", "---\nname: same\n---\nA.\n"),
            ("agents/b.agent.md", "---\nname: same\n---\nB.\n"),
        ],
    );
    let (path, field, text) = plugin_error(load(&twice).expect_err("duplicate"));
    assert_eq!(path, twice.join("agents/b.agent.md"), "{text}");
    assert_eq!(field.as_deref(), Some("name"));
    assert!(text.contains("defined twice"), "{text}");

    // A skill that no plugin has.
    let skills = root.path().join("skills");
    write(
        &skills,
        &[
            ("plugin.json", r#"{"name": "skills"}"#),
            (
                "agents/a.agent.md",
                "---\nname: a\nskills: [style, nope]\n---\nA.\n",
            ),
            (
                "skills/style/SKILL.md",
                "---\nname: style\ndescription: d\n---\nS.\n",
            ),
        ],
    );
    let (path, field, text) = plugin_error(load(&skills).expect_err("unknown skill"));
    assert_eq!(path, skills.join("agents/a.agent.md"));
    assert_eq!(field.as_deref(), Some("skills"));
    assert!(text.contains("`nope`") && text.contains("line 3"), "{text}");

    // A folder in a folder of plugins without plugin.json; a skill folder without SKILL.md.
    let many = root.path().join("many");
    write(&many, &[("stray/readme.txt", "hi")]);
    let (path, _, text) = plugin_error(load(&many).expect_err("no manifest"));
    assert_eq!(path, many.join("stray"));
    assert!(text.contains("plugin.json"), "{text}");
    let no_skill = root.path().join("no-skill");
    write(
        &no_skill,
        &[
            ("plugin.json", r#"{"name": "no-skill"}"#),
            ("skills/empty/notes.txt", "x"),
        ],
    );
    let (path, _, text) = plugin_error(load(&no_skill).expect_err("no SKILL.md"));
    assert_eq!(path, no_skill.join("skills/empty"));
    assert!(text.contains("SKILL.md"), "{text}");

    // A malformed file names itself and its field.
    let bad = root.path().join("bad");
    write(
        &bad,
        &[(
            "plugin.json",
            r#"{"name": "bad", "mcpServers": {"x": {"command": "y"}}}"#,
        )],
    );
    let (path, field, text) = plugin_error(load(&bad).expect_err("inline servers"));
    assert_eq!(
        (path, field.as_deref()),
        (bad.join("plugin.json"), Some("mcpServers")),
        "{text}"
    );
}

/// A stand-in `claude` in `bin` that records its arguments, its MCP configuration and the
/// instructions file it was pointed at, then reports success as Claude Code does.
fn recording_claude(bin: &Path, record: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin).expect("mkdir");
    let script = format!(
        r#"#!/bin/sh
out={record}
: > "$out/args.txt"
for a in "$@"; do
  printf '%s\n' "$a" >> "$out/args.txt"
  case "$a" in --mcp-config=*) cp "${{a#--mcp-config=}}" "$out/mcp.json" ;; esac
done
file=$(printf '%s' "$2" | sed -n 's/^Read the file \([^ ]*\) and.*/\1/p')
cp "$file" "$out/instructions.md"
echo '{{"type":"system","subtype":"init","session_id":"s-1","model":"m"}}'
echo '{{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done","session_id":"s-1"}}'
"#,
        record = record.display()
    );
    let path = bin.join("claude");
    std::fs::write(&path, script).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[tokio::test]
async fn a_job_naming_a_plugin_agent_gets_its_prompt_skills_model_tools_and_servers() {
    let root = tempfile::tempdir().expect("tempdir");
    let plugin_dir = root.path().join("review");
    write(
        &plugin_dir,
        &[
            ("plugin.json", r#"{"name": "review", "version": "1.0.0"}"#),
            (
                "agents/reviewer.agent.md",
                "---\nname: reviewer\nmodel: plugin-model\ntools: [Read, Grep, Bash(git *)]\n\
                 system: You are the REVIEWER.\n---\nReview with care.\n",
            ),
            (
                "skills/style/SKILL.md",
                "---\nname: style\ndescription: The house style\n---\nSTYLE-BODY: tabs.\n",
            ),
            (
                ".mcp.json",
                r#"{"mcpServers": {
                    "docs": {"type": "http", "url": "https://docs.example/mcp",
                             "headers": {"Authorization": "Bearer ${DOCS_TOKEN:-none-given}"}},
                    "files": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/files", "args": ["--ro"]},
                    "needs-key": {"command": "x", "env": {"KEY": "${UNSET_PLUGIN_KEY}"}}
                }}"#,
            ),
        ],
    );
    let plugins = PluginPlaces::new().dir(&plugin_dir).load().expect("loads");
    let record = root.path().join("record");
    std::fs::create_dir_all(&record).expect("mkdir");
    let program = recording_claude(&root.path().join("bin"), &record);
    let runner = AgentWorkRunner::empty()
        .register(
            "claude",
            ClaudeCode::new().program(program.display().to_string()),
        )
        .default_agent("claude")
        .plugins(Arc::new(plugins));
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let spec = WorkSpec::Agent(Box::new(AgentSpec {
        agent: Some("reviewer".into()),
        instructions: Some("JOB-TEXT: review the change".into()),
        ..AgentSpec::default()
    }));
    let ctx = common::ctx(&work);
    let out = runner.run(&spec, &ctx).await;
    let log = ctx.log.take();
    assert!(out.is_ok(), "{out:?}\n{log}");
    assert!(log.contains("agent `reviewer` of plugin `review`"), "{log}");
    assert!(
        log.contains("`needs-key`") && log.contains("UNSET_PLUGIN_KEY"),
        "a server whose variable is unset is left out, noted: {log}"
    );

    let instructions = std::fs::read_to_string(record.join("instructions.md")).expect("recorded");
    assert!(
        instructions.starts_with("You are the REVIEWER.\n\nReview with care.\n\nJOB-TEXT"),
        "{instructions}"
    );
    assert!(
        instructions.contains("## Skills")
            && instructions.contains("### style")
            && instructions.contains("The house style")
            && instructions.contains("STYLE-BODY: tabs."),
        "{instructions}"
    );
    let args = std::fs::read_to_string(record.join("args.txt")).expect("recorded");
    let args: Vec<&str> = args.lines().collect();
    let at = |flag: &str| args.iter().position(|a| *a == flag);
    let model = at("--model").map(|i| args[i + 1]);
    assert_eq!(model, Some("plugin-model"), "{args:?}");
    let allowed = at("--allowedTools").map(|i| &args[i + 1..i + 4]);
    assert_eq!(
        allowed,
        Some(&["Read", "Grep", "Bash(git *)"][..]),
        "{args:?}"
    );
    assert!(args.contains(&"--tools=Read,Grep,Bash"), "{args:?}");
    let mcp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record.join("mcp.json")).expect("mcp"))
            .expect("json");
    let servers = &mcp["mcpServers"];
    assert_eq!(
        servers["docs"],
        serde_json::json!({"type": "http", "url": "https://docs.example/mcp",
                           "headers": {"Authorization": "Bearer none-given"}})
    );
    let root_dir = std::fs::canonicalize(&plugin_dir).expect("canonical");
    assert_eq!(
        servers["files"]["command"],
        format!("{}/bin/files", root_dir.display())
    );
    assert!(servers.get("needs-key").is_none(), "{servers}");
    assert!(
        servers.get("orchestrator").is_none(),
        "no tool endpoint: ours is not there"
    );

    // The spec's own model wins; an unknown agent names the plugin agents.
    let spec = WorkSpec::Agent(Box::new(AgentSpec {
        agent: Some("reviewer".into()),
        model: Some("spec-model".into()),
        instructions: Some("again".into()),
        ..AgentSpec::default()
    }));
    runner
        .run(&spec, &common::ctx(&work))
        .await
        .expect("second run");
    let args = std::fs::read_to_string(record.join("args.txt")).expect("recorded");
    assert!(args.contains("--model\nspec-model\n"), "{args}");
    let unknown = WorkSpec::Agent(Box::new(AgentSpec {
        agent: Some("nobody".into()),
        instructions: Some("x".into()),
        ..AgentSpec::default()
    }));
    let failure = runner
        .run(&unknown, &common::ctx(&work))
        .await
        .expect_err("unknown agent");
    assert!(
        failure.message.contains("plugin agents: reviewer"),
        "{}",
        failure.message
    );
}
