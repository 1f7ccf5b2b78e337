//! `AgentWorkRunner` with fake agent CLIs (`common::fakes`): exact argv per CLI, session
//! capture and resume, usage, per-run directories, instructions files, the generic agent, and
//! auto-heal and agent jobs through the engine. What happens when things go wrong (retries,
//! timeouts, the hang guard, redaction, unknown agents) is in `agent_failures.rs`.
#![cfg(unix)]

mod common;

use common::ctx;
use common::fakes::{agent_spec, assert_argv, faked, quick, s, usage, Fake, CLAUDE_OK};
use orchestrator_agents::agent::{
    AgentHealer, AgentWorkRunner, ClaudeCode, CodexCli, CopilotCli, GeminiCli, GenericAgent,
    ModelEndpoint, ProviderKind,
};
use orchestrator_agents::ShellRunner;
use orchestrator_core::plan::{Effort, Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::runner::WorkRunner;
use orchestrator_core::state::FailureReason;
use orchestrator_core::{NodeStatus, Orchestrator, PlanStatus};

#[tokio::test]
async fn claude_argv_env_usage_and_resume() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    std::fs::create_dir(wt.path().join("shared")).expect("shared");
    let fake = Fake::new(root.path(), "claude", CLAUDE_OK);
    let runner = quick(
        AgentWorkRunner::new().register(
            "claude",
            ClaudeCode::new().program(fake.program()).endpoint(
                ModelEndpoint::new("http://127.0.0.1:9", ProviderKind::Anthropic)
                    .api_key("endpoint-key-123"),
            ),
        ),
    );
    let spec = agent_spec("claude", |a| {
        a.model = Some("opus".into());
        a.effort = Some(Effort::High);
        a.max_turns = Some(7);
        a.allowed_folders = vec!["shared".into()];
    });
    let mut c = ctx(wt.path());
    let out = runner.run(&spec, &c).await.expect("runs");
    let shared = wt.path().join("shared").canonicalize().expect("canonical");
    assert_argv(
        &fake.argv(1),
        &["-p"],
        &[
            s(&[
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
            ]),
            s(&["--model", "opus", "--effort", "high", "--max-turns", "7"]),
            vec!["--add-dir".into(), shared.display().to_string()],
        ]
        .concat(),
    );
    assert_eq!(out.session_id.as_deref(), Some("sess-claude-1"));
    let u = usage(&out);
    assert_eq!(
        (u.input_tokens, u.cached_tokens, u.output_tokens),
        (Some(160), Some(50), Some(20))
    );
    assert_eq!(
        (u.turns, u.duration_ms, u.cost_usd),
        (Some(2), Some(1500), Some(0.25))
    );
    assert_eq!(u.agent.as_deref(), Some("claude"));
    assert_eq!(u.model.as_deref(), Some("claude-opus-4"));

    // Per-run and per-worktree directories, never the user's own.
    let base = wt.path().join(".orchestrator/agent");
    let instructions =
        std::fs::read_to_string(base.join("work-1/instructions.md")).expect("instructions");
    assert_eq!(instructions, "Add a greeting to README.md");
    let env = fake.env(1);
    let home = base.join("sessions/claude/home");
    assert_eq!(env["HOME"], home.display().to_string());
    assert_ne!(Some(&env["HOME"]), std::env::var("HOME").ok().as_ref());
    assert_eq!(
        env["CLAUDE_CONFIG_DIR"],
        base.join("sessions/claude/claude").display().to_string()
    );
    assert_eq!(
        env["XDG_CONFIG_HOME"],
        home.join(".config").display().to_string()
    );
    assert_eq!(env["TMPDIR"], base.join("work-1/tmp").display().to_string());
    assert_eq!(env["CLAUDE_CODE_MAX_RETRIES"], "0");
    assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
    assert_eq!(env["ANTHROPIC_API_KEY"], "endpoint-key-123");
    assert!(base.join("sessions/claude/claude").is_dir());

    // The next phase (or a retry) resumes the captured session.
    c.session_id = out.session_id.clone();
    c.attempt = 2;
    runner.run(&spec, &c).await.expect("resumes");
    let argv = fake.argv(2);
    assert!(
        argv.windows(2).any(|w| w == ["--resume", "sess-claude-1"]),
        "{argv:#?}"
    );
    assert!(base.join("work-2/instructions.md").is_file());

    // `resumeSession: false` starts afresh.
    let fresh = agent_spec("claude", |a| a.resume_session = Some(false));
    runner.run(&fresh, &c).await.expect("fresh");
    assert!(!fake.argv(3).contains(&"--resume".to_string()));
    assert!(
        base.join("work-2-2").is_dir(),
        "a second run of the same attempt gets its own dir"
    );
}

#[tokio::test]
async fn codex_argv_config_usage_and_resume() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(
        root.path(),
        "codex",
        r#"echo 'Reading additional input from stdin...' >&2
echo '{"type":"thread.started","thread_id":"thread-7"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}'
echo '{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc ls","aggregated_output":"README.md","exit_code":0,"status":"completed"}}'
echo '{"type":"item.started","item":{"id":"item_1","type":"file_change","changes":[{"path":"/wt/README.md","kind":"update"}],"status":"in_progress"}}'
echo '{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"/wt/README.md","kind":"update"}],"status":"completed"}}'
echo '{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"done"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":300,"cached_input_tokens":120,"cache_write_input_tokens":0,"output_tokens":40,"reasoning_output_tokens":0}}'"#,
    );
    let runner = quick(
        AgentWorkRunner::new().register(
            "codex",
            CodexCli::new().program(fake.program()).endpoint(
                ModelEndpoint::new("http://127.0.0.1:9/v1", ProviderKind::OpenAi)
                    .api_key("codex-key-123"),
            ),
        ),
    );
    let spec = agent_spec("codex", |a| {
        a.model = Some("gpt-5-codex".into());
        a.effort = Some(Effort::Low);
        a.max_turns = Some(3);
    });
    let mut c = ctx(wt.path());
    let out = runner.run(&spec, &c).await.expect("runs");
    let head = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--model",
        "gpt-5-codex",
        "-c",
        "model_reasoning_effort=low",
    ];
    assert_argv(&fake.argv(1), &head, &[]);
    assert_eq!(out.session_id.as_deref(), Some("thread-7"));
    let u = usage(&out);
    assert_eq!(
        (u.input_tokens, u.cached_tokens, u.output_tokens, u.turns),
        (Some(300), Some(120), Some(40), Some(1))
    );
    let env = fake.env(1);
    let home = wt.path().join(".orchestrator/agent/sessions/codex/codex");
    assert_eq!(env["CODEX_HOME"], home.display().to_string());
    assert_eq!(env["ORCHESTRATOR_CODEX_API_KEY"], "codex-key-123");
    let config = std::fs::read_to_string(home.join("config.toml")).expect("config.toml");
    assert!(
        config.starts_with("model = \"gpt-5-codex\"\nmodel_provider = \"orchestrator\"\n"),
        "{config}"
    );
    assert!(
        config.contains("[model_providers.orchestrator]"),
        "{config}"
    );
    assert!(config.contains("stream_max_retries = 0"), "{config}");
    assert!(config.contains("[analytics]\nenabled = false"), "{config}");
    assert!(c.log.take().contains("Codex has no option for maxTurns"));

    c.session_id = out.session_id;
    runner.run(&spec, &c).await.expect("resumes");
    let resumed = [&head[..], &["resume", "thread-7"]].concat();
    assert_argv(&fake.argv(2), &resumed, &[]);
}

/// Copilot CLI 1.0: progress noise on stdout, the session id only in the final `result`,
/// tokens only in `$COPILOT_HOME/session-state/<id>/events.jsonl` (a resume appends to it;
/// the `session.shutdown` snapshot and the result's usage are cumulative over the session).
const COPILOT_FAKE: &str = r#"d="$COPILOT_HOME/session-state/cp-1"; mkdir -p "$d"
case " $* " in
  *" --resume "*) echo '{"type":"session.resume","data":{"eventCount":7,"selectedModel":"gpt-5.5"}}' >> "$d/events.jsonl" ;;
  *) echo '{"type":"session.start","data":{"sessionId":"cp-1","copilotVersion":"1.0.102","selectedModel":"gpt-5.5"}}' > "$d/events.jsonl" ;;
esac
cat >> "$d/events.jsonl" <<'EOF'
{"type":"user.message","data":{"content":"Read the file"}}
{"type":"assistant.turn_start","data":{"turnId":"0"}}
{"type":"session.usage_record","data":{"usage":{"model":"gpt-5.5","inputTokens":1000,"outputTokens":50,"cacheReadTokens":400,"cacheWriteTokens":0,"reasoningTokens":0,"cost":0.0,"apiEndpoint":"/chat/completions"}}}
{"type":"assistant.turn_end","data":{"turnId":"0"}}
{"type":"session.usage_record","data":{"usage":{"model":"gpt-5.5","inputTokens":500,"outputTokens":25,"cacheReadTokens":0,"cacheWriteTokens":0,"reasoningTokens":0,"cost":0.0}}}
{"type":"assistant.turn_end","data":{"turnId":"1"}}
EOF
echo "{\"type\":\"session.shutdown\",\"data\":{\"accountingSnapshot\":{\"totalPremiumRequestCost\":$n,\"totalUserRequests\":$n,\"codeChanges\":{\"linesAdded\":$((n*12)),\"linesRemoved\":$((n*3)),\"filesModifiedCount\":1},\"modelMetrics\":{\"gpt-5.5\":{\"usage\":{\"inputTokens\":$((n*1500)),\"outputTokens\":$((n*75))}}}}}}" >> "$d/events.jsonl"
echo '{"type":"session.background_tasks_changed","data":{},"ephemeral":true,"id":"a"}'
echo '{"type":"session.tools_updated","data":{"model":"gpt-5.5"},"ephemeral":true,"id":"b"}'
echo '{"type":"assistant.message","data":{"messageId":"m1","model":"gpt-5.5","content":"","toolRequests":[{"toolCallId":"call_1","name":"apply_patch","type":"custom"}]}}'
echo '{"type":"tool.execution_start","data":{"toolCallId":"call_1","toolName":"apply_patch"}}'
echo '{"type":"tool.execution_complete","data":{"toolCallId":"call_1","success":true,"fileEdits":[{"path":"/wt/README.md"}]}}'
echo '{"type":"assistant.message","data":{"messageId":"m2","model":"gpt-5.5","content":"done","toolRequests":[]}}'
echo '{"type":"session.background_tasks_changed","data":{},"ephemeral":true,"id":"c"}'
echo "{\"type\":\"result\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"sessionId\":\"cp-1\",\"exitCode\":0,\"usage\":{\"premiumRequests\":$n,\"totalApiDurationMs\":800,\"sessionDurationMs\":$((n*1200)),\"codeChanges\":{\"linesAdded\":$((n*12)),\"linesRemoved\":$((n*3)),\"filesModified\":[\"/wt/README.md\"]}}}""#;

#[tokio::test]
async fn copilot_argv_and_usage_from_the_session_events() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let cache = root.path().join("shared-cache");
    let fake = Fake::new(root.path(), "copilot", COPILOT_FAKE);
    let runner = quick(
        AgentWorkRunner::new().register(
            "copilot",
            CopilotCli::new()
                .program(fake.program())
                .shared_cache(&cache),
        ),
    );
    let spec = agent_spec("copilot", |a| {
        a.agent = None; // the default agent
        a.model = Some("gpt-5".into());
        a.effort = Some(Effort::Xhigh);
        a.allowed_urls = vec!["https://docs.rs".into()];
    });
    let mut c = ctx(wt.path());
    let out = runner.run(&spec, &c).await.expect("runs");
    let logs = wt.path().join(".orchestrator/agent/work-1/logs");
    assert_argv(
        &fake.argv(1),
        &["-p"],
        &[
            s(&[
                "--allow-all-tools",
                "--no-ask-user",
                "--no-auto-update",
                "--output-format",
                "json",
            ]),
            vec!["--add-dir".into(), wt.path().display().to_string()],
            s(&[
                "--allow-url",
                "https://docs.rs",
                "--model",
                "gpt-5",
                "--reasoning-effort",
                "xhigh",
            ]),
            vec!["--log-dir".into(), logs.display().to_string()],
        ]
        .concat(),
    );
    let env = fake.env(1);
    assert_eq!(env["XDG_CACHE_HOME"], cache.display().to_string());
    assert_eq!(
        env["COPILOT_HOME"],
        wt.path()
            .join(".orchestrator/agent/sessions/copilot/copilot")
            .display()
            .to_string()
    );
    assert_eq!(out.session_id.as_deref(), Some("cp-1"));
    let u = usage(&out);
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.cached_tokens, u.turns),
        (Some(1500), Some(75), Some(400), Some(2))
    );
    assert_eq!(
        (u.lines_added, u.lines_removed, u.premium_requests),
        (Some(12), Some(3), Some(1.0))
    );
    assert_eq!(u.duration_ms, Some(1200));
    assert_eq!(u.model.as_deref(), Some("gpt-5.5"));
    assert_eq!(u.agent.as_deref(), Some("copilot"));

    // A resumed run counts only its own part of the session's events.
    c.session_id = out.session_id.clone();
    c.attempt = 2;
    let out = runner.run(&spec, &c).await.expect("resumes");
    let argv = fake.argv(2);
    assert!(
        argv.windows(2).any(|w| w == ["--resume", "cp-1"]),
        "{argv:#?}"
    );
    let u = usage(&out);
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.turns),
        (Some(1500), Some(75), Some(2))
    );
    assert_eq!(
        (u.lines_added, u.lines_removed, u.premium_requests),
        (Some(12), Some(3), Some(1.0))
    );
    assert_ne!(
        u.duration_ms,
        Some(2400),
        "not the cumulative session duration"
    );
}

#[tokio::test]
async fn gemini_argv_settings_and_a_5xx_exit_retried() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(
        root.path(),
        "gemini",
        r#"echo 'YOLO mode is enabled. All tool calls will be automatically approved.' >&2
if [ "$n" = 1 ]; then
echo '{"type":"init","timestamp":"t","session_id":"g-1","model":"gemini-2.5-pro"}'
echo '{"type":"message","timestamp":"t","role":"user","content":"Read the file"}'
echo '{"type":"result","timestamp":"t","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":503,\"message\":\"unavailable\"}}]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":0,"models":{}}}'
exit 244
fi
echo '{"type":"init","timestamp":"t","session_id":"g-1","model":"gemini-2.5-pro"}'
echo '{"type":"message","timestamp":"t","role":"user","content":"Read the file"}'
echo '{"type":"tool_use","timestamp":"t","tool_name":"write_file","tool_id":"write_file_1","parameters":{"content":"hi","file_path":"/wt/README.md"}}'
echo '{"type":"tool_result","timestamp":"t","tool_id":"write_file_1","status":"success"}'
echo '{"type":"message","timestamp":"t","role":"assistant","content":"done","delta":true}'
echo '{"type":"result","timestamp":"t","status":"success","stats":{"total_tokens":90,"input_tokens":70,"output_tokens":20,"cached":30,"input":40,"duration_ms":640,"tool_calls":1,"models":{"gemini-2.5-pro":{"total_tokens":90,"input_tokens":70,"output_tokens":20,"cached":30,"input":40}}}}'"#,
    );
    let runner = quick(
        AgentWorkRunner::new().register(
            "gemini",
            GeminiCli::new().program(fake.program()).endpoint(
                ModelEndpoint::new("http://127.0.0.1:9", ProviderKind::Gemini)
                    .api_key("gemini-key-123"),
            ),
        ),
    );
    let spec = agent_spec("gemini", |a| {
        a.model_tier = Some(orchestrator_core::plan::ModelTier::Fast);
        a.max_turns = Some(5);
        a.effort = Some(Effort::Medium);
    });
    let c = ctx(wt.path());
    let out = runner.run(&spec, &c).await.expect("second try succeeds");
    assert_eq!(fake.calls(), 2);
    let head = s(&[
        "--output-format",
        "stream-json",
        "--yolo",
        "--skip-trust",
        "-m",
        "gemini-2.5-flash",
    ]);
    assert_argv(&fake.argv(1), &["-p"], &head);
    // The retry resumes the session the first try started.
    assert_argv(
        &fake.argv(2),
        &["-p"],
        &[head, s(&["--resume", "g-1"])].concat(),
    );
    let env = fake.env(1);
    assert_eq!(env["GOOGLE_GEMINI_BASE_URL"], "http://127.0.0.1:9");
    let settings = std::fs::read_to_string(
        wt.path()
            .join(".orchestrator/agent/sessions/gemini/home/.gemini/settings.json"),
    )
    .expect("settings");
    let settings: serde_json::Value = serde_json::from_str(&settings).expect("json");
    assert_eq!(
        settings["security"]["auth"]["selectedType"],
        "gemini-api-key"
    );
    assert_eq!(settings["model"]["maxSessionTurns"], 5);
    assert_eq!(settings["general"]["maxAttempts"], 1);
    let u = usage(&out);
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.cached_tokens),
        (Some(70), Some(20), Some(30))
    );
    let log = c.log.take();
    assert!(log.contains("Gemini CLI has no option for effort"), "{log}");
    assert!(log.contains("transient failure (try 1 of 3)"), "{log}");
}

#[tokio::test]
async fn instructions_files_are_read_from_the_worktree() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    std::fs::write(wt.path().join("task.md"), "Do the thing from the file").expect("write");
    let fake = Fake::new(root.path(), "claude", CLAUDE_OK);
    let runner = faked("claude", &fake);
    let spec = agent_spec("claude", |a| {
        a.instructions = None;
        a.instructions_file = Some("task.md".into());
    });
    runner.run(&spec, &ctx(wt.path())).await.expect("runs");
    let written =
        std::fs::read_to_string(wt.path().join(".orchestrator/agent/work-1/instructions.md"))
            .expect("copied");
    assert_eq!(written, "Do the thing from the file");
    let escape = agent_spec("claude", |a| {
        a.instructions = None;
        a.instructions_file = Some("../outside.md".into());
    });
    let failure = runner
        .run(&escape, &ctx(wt.path()))
        .await
        .expect_err("escapes");
    assert_eq!(failure.reason, FailureReason::StartupError);
}

#[tokio::test]
async fn a_generic_agent_substitutes_placeholders_without_a_shell() {
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(
        root.path(),
        "my-agent",
        r#"echo '{"type":"result","session_id":"gen-1","usage":{"input_tokens":3,"output_tokens":4}}'"#,
    );
    let runner = quick(
        AgentWorkRunner::new().register(
            "mine",
            GenericAgent::new(fake.program())
                .args(["run", "--file={prompt_file}", "--cwd", "{dir}"])
                .optional(["--model", "{model}"])
                .optional(["--resume", "{session}"])
                .env("MY_AGENT_MODE", "headless"),
        ),
    );
    let spec = agent_spec("mine", |a| a.model = Some("m-1".into()));
    let out = runner.run(&spec, &ctx(wt.path())).await.expect("runs");
    let instructions = wt.path().join(".orchestrator/agent/work-1/instructions.md");
    assert_eq!(
        fake.argv(1),
        [
            "run".to_string(),
            format!("--file={}", instructions.display()),
            "--cwd".into(),
            wt.path().display().to_string(),
            "--model".into(),
            "m-1".into(),
        ]
    );
    assert_eq!(fake.env(1)["MY_AGENT_MODE"], "headless");
    assert_eq!(out.session_id.as_deref(), Some("gen-1"));
    assert_eq!(usage(&out).output_tokens, Some(4));
}

#[tokio::test]
async fn an_agent_job_runs_through_the_engine() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("plan dir");
    let fake = Fake::new(
        root.path(),
        "claude",
        &format!("echo hello > greeting.txt\n{CLAUDE_OK}"),
    );
    let o = Orchestrator::builder()
        .runner("shell", ShellRunner::new())
        .runner("agent", faked("claude", &fake))
        .build()
        .expect("build");
    let plan = PlanSpec::new("agent e2e")
        .isolation(Isolation::None)
        .job(JobSpec::new(
            "greet",
            "Write a greeting",
            agent_spec("claude", |_| {}),
        ))
        .job(
            JobSpec::new(
                "check",
                "Check it",
                WorkSpec::shell("grep hello greeting.txt"),
            )
            .depends_on(["greet"]),
        );
    let id = o.run(plan, dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let r = o.status(&id).await.expect("status");
    let greet = &r.state.nodes[0];
    assert_eq!(greet.status, NodeStatus::Succeeded);
    assert_eq!(greet.extra.session_id.as_deref(), Some("sess-claude-1"));
    let metrics = greet
        .last_attempt()
        .and_then(|a| a.extra.metrics.clone())
        .expect("metrics");
    assert_eq!(metrics["agent"], "claude");
    assert_eq!(metrics["outputTokens"], 20);
}

#[tokio::test]
async fn auto_heal_runs_an_agent_that_fixes_the_worktree() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("plan dir");
    let fixer = Fake::new(
        root.path(),
        "fixer",
        r#"cp "$1" heal-instructions.md
echo fixed > fixed.txt
echo '{"type":"result","session_id":"heal-1"}'"#,
    );
    let agents = quick(AgentWorkRunner::new().register(
        "fixer",
        GenericAgent::new(fixer.program()).arg("{prompt_file}"),
    ));
    let o = Orchestrator::builder()
        .runner("shell", ShellRunner::new())
        .healer(AgentHealer::new(agents).agent("fixer"))
        .build()
        .expect("build");
    let plan = PlanSpec::new("heal e2e")
        .isolation(Isolation::None)
        .job(JobSpec::new(
            "needs-fix",
            "Needs a fix",
            WorkSpec::shell("echo 'fixed.txt is missing' >&2; test -f fixed.txt"),
        ));
    let id = o.run(plan, dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(fixer.calls(), 1);
    let instructions =
        std::fs::read_to_string(dir.path().join("heal-instructions.md")).expect("instructions");
    assert!(
        instructions.contains("echo 'fixed.txt is missing' >&2; test -f fixed.txt"),
        "{instructions}"
    );
    assert!(instructions.contains("Exit code: 1."), "{instructions}");
    assert!(
        instructions.contains("fixed.txt is missing"),
        "{instructions}"
    );
}

#[tokio::test]
async fn without_the_agents_session_folder_nothing_is_resumed() {
    // A cleared or recreated worktree, or a job now run by another agent: the CLI's sessions
    // are not there, so the recorded session id is not passed.
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(root.path(), "claude", CLAUDE_OK);
    let runner = faked("claude", &fake);
    let mut c = ctx(wt.path());
    c.session_id = Some("from-another-worktree".into());
    runner
        .run(&agent_spec("claude", |_| {}), &c)
        .await
        .expect("runs");
    assert_eq!(fake.calls(), 1);
    assert!(!fake.argv(1).contains(&"--resume".to_string()));
}

#[tokio::test]
async fn an_agent_continuing_an_unfinished_run_is_told_so() {
    // The engine kept the worktree as an interrupted run left it and resumes that run's
    // session: the prompt says so, so the agent continues rather than redoes its edits.
    let root = tempfile::tempdir().expect("tempdir");
    let wt = tempfile::tempdir().expect("worktree");
    let fake = Fake::new(root.path(), "claude", CLAUDE_OK);
    let runner = faked("claude", &fake);
    let spec = agent_spec("claude", |_| {});
    let mut c = ctx(wt.path());
    let first = runner.run(&spec, &c).await.expect("runs");
    let told = |call: u32| fake.argv(call)[1].contains("stopped before it finished");
    assert!(
        !told(1),
        "a first run is not told anything: {:?}",
        fake.argv(1)
    );

    c.session_id = first.session_id.clone();
    c.attempt = 2;
    c.continues_unfinished = true;
    runner.run(&spec, &c).await.expect("continues");
    assert!(told(2), "{:?}", fake.argv(2));
    assert!(
        fake.argv(2)
            .windows(2)
            .any(|w| w == ["--resume", "sess-claude-1"]),
        "{:?}",
        fake.argv(2)
    );

    // Without a session to resume there is nothing to continue: the agent starts afresh.
    c.session_id = None;
    runner.run(&spec, &c).await.expect("fresh");
    assert!(!told(3), "{:?}", fake.argv(3));
}
