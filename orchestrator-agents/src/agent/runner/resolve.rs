//! Which CLI runs an agent job: a registered agent, or the CLI of a plugin agent of that
//! name (SPEC §15), and the error naming what is known when neither is.

use std::sync::Arc;

use orchestrator_core::runner::WorkFailure;
use orchestrator_core::state::FailureReason;

use super::super::prepare::PluginUse;
use super::super::AgentRunner;
use super::AgentWorkRunner;

impl AgentWorkRunner {
    fn unknown_agent(&self, name: &str) -> WorkFailure {
        let known = self.agent_names().collect::<Vec<_>>().join(", ");
        let plugin_agents: Vec<&str> = self.plugins.agents().map(|(_, a)| a.name()).collect();
        let plugin_agents = match plugin_agents.is_empty() {
            true => String::new(),
            false => format!("; plugin agents: {}", plugin_agents.join(", ")),
        };
        WorkFailure::new(format!(
            "unknown agent `{name}`; known agents: {known}{plugin_agents} (register others with AgentWorkRunner::register, or load a plugin defining it)"
        ))
        .reason(FailureReason::StartupError)
    }

    /// The CLI that runs the agent `requested` — a registered one, or the CLI of the plugin
    /// agent of that name — with that plugin agent.
    pub(super) fn resolve<'a>(
        &'a self,
        requested: &'a str,
    ) -> Result<(&'a str, Arc<dyn AgentRunner>, PluginUse<'a>), WorkFailure> {
        let mut plugins = PluginUse {
            plugins: &self.plugins,
            agent: None,
        };
        let name = match self.agents.contains_key(requested) {
            true => requested,
            false => {
                let Some((plugin, agent)) = self.plugins.agent(requested) else {
                    return Err(self.unknown_agent(requested));
                };
                plugins.agent = Some((plugin, agent));
                agent.cli().unwrap_or(&self.default_agent)
            }
        };
        let runner = self
            .agents
            .get(name)
            .cloned()
            .ok_or_else(|| self.unknown_agent(name))?;
        Ok((name, runner, plugins))
    }
}
