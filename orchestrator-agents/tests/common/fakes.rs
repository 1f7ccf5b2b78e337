//! Fake agent CLIs: small `sh` scripts that record their argv and env and print each real
//! CLI's output shapes, and the runners and specs the tests built on them share.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use orchestrator_agents::agent::{
    AgentUsage, AgentWorkRunner, ClaudeCode, CodexCli, CopilotCli, GeminiCli, RetryPolicy,
};
use orchestrator_core::plan::{AgentSpec, WorkSpec};
use orchestrator_core::runner::WorkOutput;

/// A fake CLI: a script that counts its calls and records argv (one per line) and env.
pub struct Fake {
    pub dir: PathBuf,
    pub script: PathBuf,
}

impl Fake {
    pub fn new(root: &Path, name: &str, body: &str) -> Fake {
        let dir = root.join(format!("fake-{name}"));
        std::fs::create_dir_all(&dir).expect("fake dir");
        let script = dir.join(name);
        let text = format!(
            "#!/bin/sh\nF='{}'\n\
             n=$(cat \"$F/count\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$F/count\"\n\
             printf '%s\\n' \"$@\" > \"$F/argv.$n\"\nenv > \"$F/env.$n\"\n{body}\n",
            dir.display()
        );
        std::fs::write(&script, text).expect("write fake");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Fake { dir, script }
    }

    pub fn program(&self) -> String {
        self.script.display().to_string()
    }

    pub fn calls(&self) -> u32 {
        std::fs::read_to_string(self.dir.join("count"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    pub fn argv(&self, call: u32) -> Vec<String> {
        std::fs::read_to_string(self.dir.join(format!("argv.{call}")))
            .expect("argv recorded")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn env(&self, call: u32) -> BTreeMap<String, String> {
        std::fs::read_to_string(self.dir.join(format!("env.{call}")))
            .expect("env recorded")
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

pub fn quick(runner: AgentWorkRunner) -> AgentWorkRunner {
    runner
        .retry(RetryPolicy::new(3, Duration::from_millis(10)))
        .result_grace(Duration::from_millis(300))
}

/// A quick runner whose built-in `agent` CLI is `fake`.
pub fn faked(agent: &str, fake: &Fake) -> AgentWorkRunner {
    let program = fake.program();
    let runner = AgentWorkRunner::new();
    quick(match agent {
        "claude" => runner.register(agent, ClaudeCode::new().program(program)),
        "codex" => runner.register(agent, CodexCli::new().program(program)),
        "copilot" => runner.register(agent, CopilotCli::new().program(program)),
        "gemini" => runner.register(agent, GeminiCli::new().program(program)),
        other => panic!("no built-in agent `{other}`"),
    })
}

pub fn agent_spec(agent: &str, f: impl FnOnce(&mut AgentSpec)) -> WorkSpec {
    let mut spec = AgentSpec {
        instructions: Some("Add a greeting to README.md".into()),
        agent: Some(agent.into()),
        ..AgentSpec::default()
    };
    f(&mut spec);
    WorkSpec::Agent(Box::new(spec))
}

pub fn usage(out: &WorkOutput) -> AgentUsage {
    serde_json::from_value(out.metrics.clone().expect("metrics")).expect("usage json")
}

/// Asserts `argv` starts with `before`, then the prompt (pointing at the instructions), then
/// `after`.
pub fn assert_argv(argv: &[String], before: &[&str], after: &[String]) {
    assert_eq!(&argv[..before.len()], before, "{argv:#?}");
    let prompt = &argv[before.len()];
    assert!(
        prompt.starts_with("Read the file ") && prompt.contains("instructions.md"),
        "{prompt}"
    );
    assert_eq!(&argv[before.len() + 1..], after, "{argv:#?}");
}

pub fn s(items: &[&str]) -> Vec<String> {
    items.iter().map(|i| i.to_string()).collect()
}

/// Claude Code 2.1's `stream-json` for a run that wrote a file (fields as recorded, long
/// arrays shortened).
pub const CLAUDE_OK: &str = r#"echo '{"type":"system","subtype":"init","cwd":"/wt","session_id":"sess-claude-1","tools":["Task","Bash","Edit","Read","Write"],"mcp_servers":[],"model":"claude-opus-4","permissionMode":"bypassPermissions","apiKeySource":"ANTHROPIC_API_KEY"}'
echo '{"type":"assistant","message":{"content":[{"id":"toolu_1","input":{"file_path":"/wt/README.md","content":"hi"},"name":"Write","type":"tool_use"}],"id":"msg_1","model":"claude-opus-4","role":"assistant","stop_reason":null,"type":"message","usage":{"input_tokens":50,"output_tokens":10}},"parent_tool_use_id":null,"session_id":"sess-claude-1"}'
echo '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"File created successfully at: /wt/README.md"}]},"parent_tool_use_id":null,"session_id":"sess-claude-1"}'
echo '{"type":"assistant","message":{"content":[{"text":"done","type":"text"}],"id":"msg_2","model":"claude-opus-4","role":"assistant","stop_reason":null,"type":"message"},"parent_tool_use_id":null,"session_id":"sess-claude-1"}'
echo '{"duration_api_ms":56,"stop_reason":"end_turn","session_id":"sess-claude-1","total_cost_usd":0.25,"usage":{"input_tokens":100,"cache_creation_input_tokens":10,"cache_read_input_tokens":50,"output_tokens":20,"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard"},"terminal_reason":"completed","is_error":false,"num_turns":2,"subtype":"success","api_error_status":null,"result":"done","type":"result","duration_ms":1500,"modelUsage":{"claude-opus-4":{"inputTokens":100,"outputTokens":20,"costUSD":0.25}},"model_usage_since_last_result":{"claude-opus-4":{"inputTokens":100,"outputTokens":20,"costUSD":0.25}}}'"#;

/// Claude Code's output when the API answered 500 (exit code 1).
pub const CLAUDE_API_500: &str = r#"echo '{"type":"system","subtype":"init","cwd":"/wt","session_id":"sess-claude-1","tools":["Bash"],"model":"claude-opus-4"}'
echo '{"type":"assistant","message":{"id":"m0","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","type":"message","usage":{"input_tokens":0,"output_tokens":0},"content":[{"type":"text","text":"API Error: 500 Internal server error"}]},"parent_tool_use_id":null,"session_id":"sess-claude-1","error":"unknown"}'
echo '{"duration_api_ms":0,"stop_reason":"stop_sequence","session_id":"sess-claude-1","total_cost_usd":0,"usage":{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"terminal_reason":"api_error","is_error":true,"num_turns":1,"subtype":"success","api_error_status":500,"api_error_type":"api_error","result":"API Error: 500 Internal server error","type":"result","duration_ms":434}'
exit 1"#;
