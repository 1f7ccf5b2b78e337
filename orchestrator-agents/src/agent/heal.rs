//! [`AgentHealer`]: auto-heal through an agent.

use std::sync::Arc;

use async_trait::async_trait;
use orchestrator_core::plan::{AgentSpec, WorkSpec};
use orchestrator_core::runner::{
    HealRequest, Healer, WorkContext, WorkFailure, WorkResult, WorkRunner,
};

use super::redact::Redactor;
use super::AgentWorkRunner;
use crate::env::ChildEnv;

/// Longest failure message quoted in the heal instructions, in characters (the end is kept:
/// that is where the error usually is).
const MAX_LOG_CHARS: usize = 20_000;

/// Heals a failed shell or process phase with an agent (SPEC §3 auto-heal): the agent gets
/// the failed command, its exit code and its failure log, and is asked to fix the worktree so
/// that the command succeeds. Register it with `Orchestrator::builder().healer(..)`.
///
/// The heal runs through an [`AgentWorkRunner`] in the job's worktree, as an agent spec built
/// from [`AgentHealer::template`] (agent, model, effort, timeout, ...) with the heal
/// instructions. It starts a fresh session by default ([`AgentHealer::resume_session`]).
///
/// ```
/// use orchestrator_agents::agent::{AgentHealer, AgentWorkRunner};
/// let healer = AgentHealer::new(AgentWorkRunner::new()).agent("claude");
/// # let _ = healer;
/// ```
#[derive(Debug, Clone)]
pub struct AgentHealer {
    runner: Arc<AgentWorkRunner>,
    template: AgentSpec,
}

impl AgentHealer {
    /// Heals with `runner`'s default agent.
    pub fn new(runner: AgentWorkRunner) -> Self {
        AgentHealer {
            runner: Arc::new(runner),
            template: AgentSpec {
                resume_session: Some(false),
                ..AgentSpec::default()
            },
        }
    }

    /// Heals with the agent registered as `name`.
    pub fn agent(mut self, name: impl Into<String>) -> Self {
        self.template.agent = Some(name.into());
        self
    }

    /// The spec every heal starts from (its instructions are replaced); set model, effort,
    /// timeout, env and so on here.
    pub fn template(mut self, template: AgentSpec) -> Self {
        self.template = template;
        self
    }

    /// Whether a heal resumes the job's agent session. Default: false (a fresh session that
    /// only sees the failure).
    pub fn resume_session(mut self, resume: bool) -> Self {
        self.template.resume_session = Some(resume);
        self
    }

    /// The instructions for healing `request`.
    pub fn instructions(request: &HealRequest) -> String {
        heal_instructions(&request.spec, &request.failure, request.round)
    }
}

fn heal_instructions(spec: &WorkSpec, failure: &WorkFailure, round: u32) -> String {
    let command = describe(spec);
    let exit = failure.exit_code.map_or_else(
        || "none (it did not exit by itself)".to_owned(),
        |c| c.to_string(),
    );
    let log = tail_chars(&failure.message, MAX_LOG_CHARS);
    format!(
        "# Fix a failing command\n\n\
             This command failed in the current directory (a git worktree):\n\n\
             ```\n{command}\n```\n\n\
             Exit code: {exit}. Heal round: {round}.\n\n\
             Its failure log:\n\n\
             ```\n{log}\n```\n\n\
             Find the cause and change the files in this directory so that the command \
             succeeds when it is run again. Fix the code or configuration rather than the \
             check: do not delete, skip or weaken tests or the command itself. Do not commit; \
             the orchestrator runs the command again after you finish.\n",
    )
}

#[async_trait]
impl Healer for AgentHealer {
    async fn heal(&self, request: &HealRequest, ctx: &WorkContext) -> WorkResult {
        let mut spec = self.template.clone();
        // The failure's output goes to a model provider: secrets of the job's environment
        // (and anything shaped like a token) are redacted first.
        let mut env = ChildEnv::from_host();
        env.overlay(&ctx.env);
        env.overlay(request.spec.env());
        let redactor = Redactor::from_env(&env);
        let instructions = AgentHealer::instructions(request);
        spec.instructions = Some(
            instructions
                .lines()
                .map(|line| redactor.redact(line))
                .collect::<Vec<_>>()
                .join("\n"),
        );
        spec.instructions_file = None;
        // A heal that hangs must not hold the job for ever: without its own timeout it gets
        // the failed command's, else HEAL_TIMEOUT.
        if spec.timeout.is_none() {
            spec.timeout = Some(spec_timeout(&request.spec).unwrap_or(HEAL_TIMEOUT_MS));
        }
        self.runner.run(&WorkSpec::Agent(Box::new(spec)), ctx).await
    }
}

/// Timeout of a heal whose template and failed command set none: 30 minutes, in ms.
pub const HEAL_TIMEOUT_MS: u64 = 30 * 60 * 1000;

/// The timeout (ms) a shell or process spec sets.
fn spec_timeout(spec: &WorkSpec) -> Option<u64> {
    match spec {
        WorkSpec::Shell(s) => s.extra.timeout,
        WorkSpec::Process(p) => p.timeout,
        WorkSpec::Agent(a) => a.timeout,
        _ => None,
    }
}

/// The failed spec as a person would read it.
fn describe(spec: &WorkSpec) -> String {
    match spec {
        WorkSpec::Shell(s) => s.command.clone(),
        WorkSpec::Process(p) => std::iter::once(p.executable.as_str())
            .chain(p.args.iter().map(String::as_str))
            .map(|a| {
                if a.is_empty() || a.contains(char::is_whitespace) {
                    format!("{a:?}")
                } else {
                    a.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => serde_json::to_string(other).unwrap_or_else(|_| other.kind().to_owned()),
    }
}

/// The last `max` characters of `text`, marked when cut.
fn tail_chars(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().skip(count - max).collect();
    format!("[… {} characters cut]\n{kept}", count - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_quote_command_exit_code_and_log() {
        let mut failure =
            WorkFailure::new("`cargo test`: exit code 101\nlast lines of stderr:\n  boom");
        failure.exit_code = Some(101);
        let spec = WorkSpec::process("cargo", ["test", "--all targets"]);
        let text = heal_instructions(&spec, &failure, 2);
        assert!(
            text.contains("```\ncargo test \"--all targets\"\n```"),
            "{text}"
        );
        assert!(text.contains("Exit code: 101. Heal round: 2."), "{text}");
        assert!(text.contains("  boom"), "{text}");
        assert_eq!(tail_chars("abcdef", 3), "[… 3 characters cut]\ndef");
    }
}
