//! The real agent CLIs against the testkit's scripted model server: one runner per CLI with
//! its program, `PATH` and endpoint set the way every real-CLI test needs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_agents::agent::{
    AgentRunner, ClaudeCode, CodexCli, CopilotCli, GeminiCli, ModelEndpoint, ProviderKind,
};
use orchestrator_testkit::ModelServer;

use super::bin_dir;

/// The API key every CLI sends to the model server.
pub const KEY: &str = "testkit-key";

/// The four built-in CLIs.
pub const CLIS: [&str; 4] = ["claude", "codex", "copilot", "gemini"];

/// The cache Copilot unpacks itself into once: `$AGENT_CLIS_CACHE` or
/// `<workspace>/.agent-clis/cache`.
pub fn copilot_cache() -> PathBuf {
    std::env::var_os("AGENT_CLIS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(".agent-clis")
                .join("cache")
        })
}

/// `PATH` for the CLIs: their bin dir first (they find each other and `node` there or on the
/// host's `PATH`).
pub fn cli_path() -> String {
    let host = std::env::var("PATH").unwrap_or_default();
    format!("{}:{host}", bin_dir().display())
}

/// The runner for `cli`, its program at `program`, talking to `server`.
pub fn runner_for(cli: &str, program: &Path, server: &ModelServer) -> Arc<dyn AgentRunner> {
    let path = cli_path();
    let program = program.display().to_string();
    let openai = ModelEndpoint::new(server.openai_base_url(), ProviderKind::OpenAi).api_key(KEY);
    match cli {
        "claude" => Arc::new(
            ClaudeCode::new()
                .program(program)
                .env("PATH", path)
                .endpoint(ModelEndpoint::new(server.url(), ProviderKind::Anthropic).api_key(KEY)),
        ),
        "codex" => Arc::new(
            CodexCli::new()
                .program(program)
                .env("PATH", path)
                .endpoint(openai),
        ),
        "copilot" => Arc::new(
            CopilotCli::new()
                .program(program)
                .env("PATH", path)
                .shared_cache(copilot_cache())
                .endpoint(openai),
        ),
        "gemini" => Arc::new(
            GeminiCli::new()
                .program(program)
                .env("PATH", path)
                .endpoint(
                    ModelEndpoint::new(server.url(), ProviderKind::Gemini)
                        .api_key(KEY)
                        .model("gemini-2.5-pro"),
                ),
        ),
        other => panic!("no runner for {other}"),
    }
}
