//! Plugins (SPEC §15) through the built `orchestrator` binary:
//!
//! - `orchestrator plugins [--json]` lists what loads from the repository, the user's folder
//!   and `--plugins`, never showing env or header values;
//! - a malformed plugin stops `run` at start with exit code 2, naming the file and the field;
//! - end to end with the real Claude Code CLI against the testkit's scripted model server: a
//!   plan job whose `agent` names a plugin agent gets that agent's system prompt and a skill
//!   in its instructions, its model in the model request and only its tools, and the MCP
//!   server of a `--plugins` plugin is in the CLI's configuration (its tools are offered to
//!   the model).
//!
//! The real-CLI test says so and passes when Claude Code is missing
//! (`scripts/install-agent-clis.sh`).
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};

use common::{Repo, BIN};
use orchestrator_testkit::{ModelServer, Script, Turn};
use serde_json::{json, Value};

/// Writes `files` (path, content) under `dir`.
fn write(dir: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write");
    }
}

/// The repository's plugin `review`: agent `reviewer` (model, tools, system prompt, a skill).
fn review_plugin(repo: &Repo) -> PathBuf {
    let dir = repo.dir.join(".orchestrator/plugins/review");
    write(
        &dir,
        &[
            (
                "plugin.json",
                r#"{"name": "review", "version": "1.2.0", "description": "Code review"}"#,
            ),
            (
                "agents/reviewer.agent.md",
                "---\nname: reviewer\ndescription: Reviews changes\nmodel: claude-haiku-4-5\n\
                 tools: [Read, Bash, Write]\nsystem: You are the PLUGIN REVIEWER.\n---\n\
                 Review every change with care.\n",
            ),
            (
                "skills/house-style/SKILL.md",
                "---\nname: house-style\ndescription: How this team writes code\n---\n\
                 SKILL-TEXT-42: four spaces, no tabs.\n",
            ),
        ],
    );
    dir
}

/// A plugin folder outside the repository (for `--plugins`) whose `.mcp.json` starts
/// `orchestrator mcp` on `scratch` as its server `plugin-tools`, with a secret header-free env.
fn tools_plugin(dir: &Path, scratch: &Path) {
    let mcp = json!({"mcpServers": {"plugin-tools": {
        "type": "stdio",
        "command": BIN,
        "args": ["mcp", "--repo", scratch],
        "env": {"PLUGIN_SECRET": "s3cr3t-value-xyz"}
    }}});
    write(
        dir,
        &[
            ("plugin.json", r#"{"name": "tools"}"#),
            (".mcp.json", &mcp.to_string()),
        ],
    );
}

#[test]
fn plugins_lists_what_loads_and_where_without_secrets() {
    let repo = Repo::new();
    review_plugin(&repo);
    let scratch = repo.scratch.join("mcp-repo");
    let extra = repo.scratch.join("tools-plugin");
    tools_plugin(&extra, &scratch);
    // The user's folder ($XDG_CONFIG_HOME of the test's HOME): another `reviewer`, left out.
    write(
        &repo.home.join(".config/orchestrator/plugins/mine"),
        &[
            ("plugin.json", r#"{"name": "mine"}"#),
            ("agents/r.agent.md", "---\nname: reviewer\n---\nMine.\n"),
        ],
    );

    let out = repo.run(&[
        "plugins",
        "--plugins",
        extra.to_str().expect("utf-8"),
        "--json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        !out.stdout.contains("s3cr3t"),
        "no env values: {}",
        out.stdout
    );
    let doc: Value = serde_json::from_str(&out.stdout).expect("json");
    let plugins = doc["plugins"].as_array().expect("plugins");
    let names: Vec<(&str, &str)> = plugins
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or(""),
                p["origin"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        names,
        [("review", "repo"), ("mine", "user"), ("tools", "flag")]
    );
    let reviewer = &plugins[0]["agents"][0];
    assert_eq!(reviewer["name"], "reviewer");
    assert_eq!(reviewer["model"], "claude-haiku-4-5");
    assert_eq!(reviewer["inEffect"], true);
    assert_eq!(plugins[1]["agents"][0]["inEffect"], false);
    assert_eq!(plugins[0]["skills"][0]["name"], "house-style");
    let server = &plugins[2]["mcpServers"][0];
    assert_eq!(server["name"], "plugin-tools");
    assert_eq!(server["type"], "stdio");
    assert_eq!(server["envNames"], json!(["PLUGIN_SECRET"]));
    assert!(
        doc["notes"][0]
            .as_str()
            .is_some_and(|n| n.contains("agent `reviewer` of plugin `mine`")),
        "{doc:#}"
    );

    let text = repo.run(&["plugins", "--plugins", extra.to_str().expect("utf-8")]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains("plugin review 1.2.0 (repo: "),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("  agent reviewer: model claude-haiku-4-5"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("  mcp server plugin-tools (stdio)"),
        "{}",
        text.stdout
    );
    assert!(
        text.stderr.contains("note: agent `reviewer`"),
        "{}",
        text.stderr
    );
    assert!(!text.stdout.contains("s3cr3t"));
}

#[test]
fn a_malformed_plugin_stops_run_at_start_with_exit_2() {
    let repo = Repo::new();
    let dir = review_plugin(&repo);
    write(
        &dir,
        &[(
            "agents/broken.agent.md",
            "---\nname: broken\ntools: [Read\n---\nx\n",
        )],
    );
    let plan = repo.scratch.join("plan.json");
    std::fs::write(
        &plan,
        json!({"name": "p", "jobs": [{"producerId": "a", "task": "t", "dependencies": [],
                "work": "echo hi"}]})
        .to_string(),
    )
    .expect("plan");
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "-q"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("broken.agent.md")
            && run.stderr.contains("field `tools`")
            && run.stderr.contains("line 3"),
        "{}",
        run.stderr
    );
    assert!(repo.latest_plan().is_none(), "nothing was created");

    // A --plugins folder that does not exist, on resume and mcp too.
    std::fs::remove_file(dir.join("agents/broken.agent.md")).expect("rm");
    let missing = repo.scratch.join("no-such-plugins");
    for args in [
        vec!["resume", "some-plan"],
        vec!["retry", "some-plan"],
        vec!["mcp"],
    ] {
        let mut args = args.clone();
        args.extend(["--plugins", missing.to_str().expect("utf-8")]);
        let out = repo.run(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("no-such-plugins"), "{}", out.stderr);
    }
}

/// Where `scripts/install-agent-clis.sh` puts the CLIs.
fn clis_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.agent-clis/bin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_job_runs_a_plugin_agent_with_its_prompt_skill_model_tools_and_mcp_server() {
    if !clis_bin().join("claude").is_file() {
        eprintln!("skipped: claude not installed (run scripts/install-agent-clis.sh)");
        return;
    }
    let script = Script::new().on_prompt(
        Turn::when("PLUGIN-JOB")
            .shell("cat .orchestrator/agent/work-1/instructions.md")
            .write_file("reviewed.txt", "reviewed\n")
            .final_text("Reviewed."),
    );
    let server = ModelServer::start(script).await.expect("model server");
    let repo = Repo::new();
    review_plugin(&repo);
    let scratch = repo.scratch.join("mcp-repo");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    let extra = repo.scratch.join("tools-plugin");
    tools_plugin(&extra, &scratch);
    let plan = repo.scratch.join("plan.json");
    std::fs::write(
        &plan,
        json!({
            "name": "plugin agent",
            "targetBranch": "feature/review",
            "jobs": [{
                "producerId": "review",
                "task": "PLUGIN-JOB: review the change",
                "dependencies": [],
                "work": {"type": "agent", "agent": "reviewer",
                         "instructions": "PLUGIN-JOB: review the change, write reviewed.txt"}
            }]
        })
        .to_string(),
    )
    .expect("plan");

    let out = repo
        .command_with_agents(
            &clis_bin(),
            &[
                "run",
                plan.to_str().expect("utf-8"),
                "--plugins",
                extra.to_str().expect("utf-8"),
                "--json",
                "-q",
            ],
        )
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ORCHESTRATOR_AGENT", "claude")
        .output()
        .expect("run");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let bodies: Vec<Value> = server
        .requests()
        .into_iter()
        .map(|r| r.to_json()["body"].clone())
        .collect();
    let texts: Vec<String> = bodies.iter().map(Value::to_string).collect();
    if doc["status"] != "succeeded" {
        let logs = repo.run(&["logs", doc["planId"].as_str().unwrap_or(""), "review"]);
        panic!(
            "{doc:#}\n{}\n{}\n{:?}",
            String::from_utf8_lossy(&out.stderr),
            logs.stdout,
            texts
                .iter()
                .map(|t| t.chars().take(2000).collect::<String>())
                .collect::<Vec<_>>()
        );
    }
    assert_eq!(
        repo.git(&["show", "feature/review:reviewed.txt"]),
        "reviewed\n"
    );

    // The instructions the agent read (the `cat` tool result): the plugin agent's system
    // prompt first, the job's text, then the skill.
    let read = texts
        .iter()
        .find(|t| t.contains("You are the PLUGIN REVIEWER."))
        .unwrap_or_else(|| panic!("no request carries the system prompt: {texts:?}"));
    assert!(read.contains("Review every change with care."), "{read}");
    assert!(
        read.contains("## Skills") && read.contains("### house-style"),
        "{read}"
    );
    assert!(
        read.contains("SKILL-TEXT-42: four spaces, no tabs."),
        "{read}"
    );

    // The plugin agent's model, and only its tools (plus the plugin server's).
    let main: Vec<&Value> = bodies
        .iter()
        .filter(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    assert!(!main.is_empty(), "no request offered tools");
    for body in &main {
        assert_eq!(body["model"], "claude-haiku-4-5", "{body}");
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        for name in ["Read", "Bash", "Write"] {
            assert!(tools.contains(&name), "{name} offered: {tools:?}");
        }
        for name in ["Grep", "Edit", "WebFetch"] {
            assert!(!tools.contains(&name), "{name} not offered: {tools:?}");
        }
        assert!(
            tools.contains(&"mcp__plugin-tools__get_copilot_plan_status"),
            "the --plugins plugin's MCP server is configured and its tools offered: {tools:?}"
        );
    }
    assert!(
        !texts.iter().any(|t| t.contains("s3cr3t-value-xyz")),
        "the server's env value never reaches the model"
    );
}
