//! The sub-agent tools (SPEC §15): `spawn_agent`, `message_agent`, `check_agents`,
//! `wait_for_agents`, `complete_agent`, `cancel_agent`, `delete_agent` and `list_sessions`.
//! Each one ends the agent's turn, as in the reference: the engine does it once the turn is
//! over, from the plan's own state, and resumes the session with the result
//! ([`orchestrator_core::tools::AgentCall`]). What can be checked here — the arguments, the
//! nesting, the agent ids the job has — is refused as a tool error, and the turn goes on.

use orchestrator_core::tools::{AgentCall, Contract, Park, SubAgent, MAX_AGENT_DEPTH};
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::grants::Grant;
use super::handler::{grant_of, text, ToolHandler, ToolResult, END_TURN, NO_GRANT};

#[derive(Debug, Deserialize, JsonSchema)]
struct SpawnArgs {
    /// What the sub-agent is to do.
    task: String,
    /// The agent CLI (or plugin agent) to run it; yours when absent.
    #[serde(default)]
    agent_name: Option<String>,
    /// The model; yours when absent (`provider:model` works, see list_available_models).
    #[serde(default)]
    model: Option<String>,
    /// A system message put before the task.
    #[serde(default)]
    system_message: Option<String>,
    /// What its outcome must show: `{"expectedFacts": [names its final reply states as
    /// `name: value` lines], "successCriteria": [what success means]}`.
    #[serde(default)]
    contract: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AgentArgs {
    /// The sub-agent: `agent-<k>` as spawn_agent named it.
    agent_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct MessageArgs {
    /// The sub-agent: `agent-<k>` as spawn_agent named it.
    agent_id: String,
    /// The message.
    message: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct WaitAgentsArgs {
    /// The sub-agents to wait for; all that are still at work when absent.
    #[serde(default)]
    agent_ids: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct NoArgs {}

/// Ends the turn with `call`, with `what` telling the agent what happens next.
fn end_turn(grant: &Grant, call: AgentCall, what: &str) -> ToolResult {
    text(
        grant
            .park(Park::Agents(call))
            .map(|()| format!("{what} The result comes as the next message. {END_TURN}")),
    )
}

/// `agent_id` as one of the job's sub-agents, or the tool error naming it.
fn known(grant: &Grant, agent_id: &str) -> Result<String, String> {
    let id = agent_id.trim();
    let own = format!("{}/", grant.job.producer_id);
    let name = id.strip_prefix(&own).unwrap_or(id);
    if grant.job.agents.iter().any(|a| a == name) {
        return Ok(name.to_owned());
    }
    Err(match grant.job.agents.is_empty() {
        true => format!("agent_id: `{id}` is unknown; you have no sub-agents"),
        false => format!(
            "agent_id: `{id}` is none of your sub-agents ({})",
            grant.job.agents.join(", ")
        ),
    })
}

/// The contract argument, checked.
fn contract_of(value: Option<serde_json::Value>) -> Result<Option<Contract>, String> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
            format!(
                "contract: {e}; give {{\"expectedFacts\": [\"name\", ...], \"successCriteria\": \
                 [\"...\"]}}"
            )
        }),
    }
}

#[tool_router(router = agents_router, vis = "pub(crate)")]
impl ToolHandler {
    #[tool(
        name = "spawn_agent",
        description = "Start a sub-agent on `task`, in its own worktree from your work so far \
            (saved as a checkpoint). Ends your turn; you resume with its id (`agent-<k>`). \
            Optional: agent_name, model, system_message, contract ({\"expectedFacts\": [...], \
            \"successCriteria\": [...]}, checked when it ends)."
    )]
    async fn spawn_agent(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<SpawnArgs>,
    ) -> ToolResult {
        let Some(grant) = grant_of(&parts) else {
            return text(Err(NO_GRANT.to_owned()));
        };
        if grant.job.depth >= MAX_AGENT_DEPTH {
            return text(Err(format!(
                "nesting: you are a sub-agent {} levels below the plan's job; sub-agents go at \
                 most {MAX_AGENT_DEPTH} levels deep, so do this work yourself",
                grant.job.depth
            )));
        }
        let task = args.task.trim().to_owned();
        if task.is_empty() {
            return text(Err("task: must not be empty".to_owned()));
        }
        let contract = match contract_of(args.contract) {
            Ok(c) => c,
            Err(e) => return text(Err(e)),
        };
        let clean = |s: Option<String>| s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        let mut sub = SubAgent::new(task);
        sub.agent_name = clean(args.agent_name);
        sub.model = clean(args.model);
        sub.system_message = clean(args.system_message);
        sub.contract = contract;
        end_turn(
            &grant,
            AgentCall::Spawn(sub),
            "The sub-agent starts when you end this turn.",
        )
    }

    #[tool(
        name = "message_agent",
        description = "Send a message to your sub-agent `agent_id` (it gets it now if it \
            waits, else when its turn ends, before it finishes). Ends your turn."
    )]
    async fn message_agent(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<MessageArgs>,
    ) -> ToolResult {
        let Some(grant) = grant_of(&parts) else {
            return text(Err(NO_GRANT.to_owned()));
        };
        let agent = match known(&grant, &args.agent_id) {
            Ok(a) => a,
            Err(e) => return text(Err(e)),
        };
        let message = args.message.trim().to_owned();
        if message.is_empty() {
            return text(Err("message: must not be empty".to_owned()));
        }
        end_turn(
            &grant,
            AgentCall::Message { agent, message },
            "The message is sent when you end this turn.",
        )
    }

    #[tool(
        name = "check_agents",
        description = "How your sub-agents are doing: status, output, commit. Ends your turn."
    )]
    async fn check_agents(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(_): Parameters<NoArgs>,
    ) -> ToolResult {
        self.ends_with(
            &parts,
            AgentCall::Check,
            "Their status is read when you end this turn.",
        )
    }

    #[tool(
        name = "wait_for_agents",
        description = "Wait until your sub-agents `agent_ids` (all that are at work when \
            absent) have ended: ends your turn; you resume with their outputs, their commits \
            merged into your worktree (a conflict is told to you, naming the files)."
    )]
    async fn wait_for_agents(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<WaitAgentsArgs>,
    ) -> ToolResult {
        let Some(grant) = grant_of(&parts) else {
            return text(Err(NO_GRANT.to_owned()));
        };
        if grant.job.agents.is_empty() {
            return text(Err(
                "agent_ids: you have no sub-agents to wait for; start one with spawn_agent"
                    .to_owned(),
            ));
        }
        let mut agents = Vec::new();
        for id in args.agent_ids.unwrap_or_default() {
            match known(&grant, &id) {
                Ok(a) => agents.push(a),
                Err(e) => return text(Err(e)),
            }
        }
        end_turn(
            &grant,
            AgentCall::Wait { agents },
            "You wait for them when you end this turn.",
        )
    }

    #[tool(
        name = "complete_agent",
        description = "Ask your sub-agent `agent_id` to finish (its cron ends; it is told to \
            end with its final answer). Ends your turn."
    )]
    async fn complete_agent(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<AgentArgs>,
    ) -> ToolResult {
        self.act_on(&parts, &args.agent_id, |agent| AgentCall::Complete {
            agent,
        })
    }

    #[tool(
        name = "cancel_agent",
        description = "Stop your sub-agent `agent_id` (and its own sub-agents); its job ends \
            canceled. Ends your turn."
    )]
    async fn cancel_agent(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<AgentArgs>,
    ) -> ToolResult {
        self.act_on(&parts, &args.agent_id, |agent| AgentCall::Cancel { agent })
    }

    #[tool(
        name = "delete_agent",
        description = "Cancel your sub-agent `agent_id` and forget it: its work is not merged \
            and the tools no longer list it. Ends your turn."
    )]
    async fn delete_agent(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<AgentArgs>,
    ) -> ToolResult {
        self.act_on(&parts, &args.agent_id, |agent| AgentCall::Delete { agent })
    }

    #[tool(
        name = "list_sessions",
        description = "The plan's agent jobs with their status and session ids. Ends your turn."
    )]
    async fn list_sessions(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(_): Parameters<NoArgs>,
    ) -> ToolResult {
        self.ends_with(
            &parts,
            AgentCall::ListSessions,
            "The sessions are listed when you end this turn.",
        )
    }
}

impl ToolHandler {
    /// A call without arguments to check: the turn ends with `call`.
    fn ends_with(&self, parts: &http::request::Parts, call: AgentCall, what: &str) -> ToolResult {
        match grant_of(parts) {
            Some(grant) => end_turn(&grant, call, what),
            None => text(Err(NO_GRANT.to_owned())),
        }
    }

    /// complete/cancel/delete: `agent_id` checked, then the turn ends with `call`.
    fn act_on(
        &self,
        parts: &http::request::Parts,
        agent_id: &str,
        call: impl FnOnce(String) -> AgentCall,
    ) -> ToolResult {
        let Some(grant) = grant_of(parts) else {
            return text(Err(NO_GRANT.to_owned()));
        };
        match known(&grant, agent_id) {
            Ok(agent) => end_turn(&grant, call(agent), "It is done when you end this turn."),
            Err(e) => text(Err(e)),
        }
    }
}
