//! Sub-agents (SPEC §15): what an agent asks of its children through the tools
//! `spawn_agent`, `message_agent`, `check_agents`, `wait_for_agents`, `complete_agent`,
//! `cancel_agent`, `delete_agent` and `list_sessions`.
//!
//! As in the reference (seed 001), every one of these calls ends the agent's turn: the run
//! parks with an [`AgentCall`] ([`super::Park::Agents`]), the engine does it from the plan's
//! own state — a child is an ordinary sub-job `<parent>/agent-<k>` branched from the
//! parent's checkpoint commit, with its own worktree, attempts and logs — and resumes the
//! parent's session with the result. `wait_for_agents` keeps the parent in
//! `waiting(children)` until the children it names have ended; the parent then resumes with
//! their outputs, their commits merged into its worktree (a conflict is told to it, naming
//! the files, and leaves its worktree as it was).

use serde::{Deserialize, Serialize};

/// Deepest nesting of sub-agents below a plan job (a plan job is at 0, its children at 1).
pub const MAX_AGENT_DEPTH: usize = 2;

/// One sub-agent tool call, done by the engine once the parent's turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentCall {
    /// `spawn_agent`: a new child.
    Spawn(SubAgent),
    /// `message_agent`: a message for a child's session (at once when it is parked, else when
    /// its turn ends: it goes on with the message before it finishes).
    Message {
        /// The child (`agent-<k>` or its producerId).
        agent: String,
        /// The message.
        message: String,
    },
    /// `check_agents`: how the children are doing.
    Check,
    /// `wait_for_agents`: wait until these children (all of them when empty) have ended.
    Wait {
        /// The children waited for.
        agents: Vec<String>,
    },
    /// `complete_agent`: ask a child to finish (its cron is canceled, and it is told to end).
    Complete {
        /// The child.
        agent: String,
    },
    /// `cancel_agent`: stop a child (its job ends `canceled`).
    Cancel {
        /// The child.
        agent: String,
    },
    /// `delete_agent`: cancel a child and forget it (its commit is not merged, the tools no
    /// longer list it; its job stays in the plan's history).
    Delete {
        /// The child.
        agent: String,
    },
    /// `list_sessions`: the plan's agent jobs with their sessions.
    ListSessions,
}

/// What `spawn_agent` asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SubAgent {
    /// The child's task.
    pub task: String,
    /// The agent (CLI or plugin agent) to run it; the parent's when absent.
    pub agent_name: Option<String>,
    /// The model; the parent's when absent.
    pub model: Option<String>,
    /// A system message put before the task in the child's instructions.
    pub system_message: Option<String>,
    /// What the child's outcome must show.
    pub contract: Option<Contract>,
}

impl SubAgent {
    /// A sub-agent for `task`, everything else as its parent's.
    pub fn new(task: impl Into<String>) -> Self {
        SubAgent {
            task: task.into(),
            ..SubAgent::default()
        }
    }
}

/// What marks a job as a sub-agent (job field `subAgent`, set by the engine when a parent's
/// agent spawns it): the contract stored with it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubAgentSpec {
    /// What its outcome is checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<Contract>,
}

/// A child's contract (`spawn_agent`'s `contract`): the facts its final reply must state,
/// checked fail-closed when it ends (a missing fact fails it with reason `contract`), and
/// success criteria it is given with its task.
///
/// ```
/// use orchestrator_core::tools::Contract;
/// let c = Contract { expected_facts: vec!["tests".into()], success_criteria: vec![] };
/// assert!(c.check(Some("Done.\ntests: 12 passed")).is_ok());
/// assert!(c.check(Some("Done.")).unwrap_err().contains("tests"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Contract {
    /// Names of facts the final reply states, each on a line `<name>: <value>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_facts: Vec<String>,
    /// What success means, in words, for the child (shown to it and in its report).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub success_criteria: Vec<String>,
}

impl Contract {
    /// Why `output` breaks the contract: the expected facts it does not state.
    pub fn check(&self, output: Option<&str>) -> Result<(), String> {
        let text = output.unwrap_or("");
        let missing: Vec<&str> = self
            .expected_facts
            .iter()
            .map(String::as_str)
            .filter(|fact| fact_value(text, fact).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(format!(
            "its final reply does not state the contract's fact{} {} (a line `<name>: <value>` each)",
            if missing.len() == 1 { "" } else { "s" },
            missing
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// The section of the child's instructions that tells it the contract.
    pub fn instructions(&self) -> String {
        let mut out = String::from("## Your contract\n");
        if !self.expected_facts.is_empty() {
            out.push_str(
                "\nEnd your final reply with one line `<name>: <value>` for each of these facts \
                 (your work is refused without them):\n",
            );
            for fact in &self.expected_facts {
                out.push_str(&format!("- {fact}\n"));
            }
        }
        if !self.success_criteria.is_empty() {
            out.push_str("\nYour work succeeds when:\n");
            for c in &self.success_criteria {
                out.push_str(&format!("- {c}\n"));
            }
        }
        out
    }
}

/// The value of fact `name` in `text`: a line `name: value` (case-insensitive name, list
/// markers and bold around the name allowed), the value not empty.
fn fact_value<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let name = name.trim();
    text.lines().find_map(|line| {
        let line = line.trim().trim_start_matches(['-', '*', '+']).trim_start();
        let (key, value) = line.split_once(':')?;
        let key = key.trim().trim_matches('*').trim_matches('`').trim();
        let value = value.trim().trim_start_matches('*').trim();
        (key.eq_ignore_ascii_case(name) && !value.is_empty()).then_some(value)
    })
}

/// The name of a parent's `k`-th child (`agent-<k>`, from 1).
pub fn child_name(k: usize) -> String {
    format!("agent-{k}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_found_in_the_usual_shapes() {
        let c = Contract {
            expected_facts: vec!["files".into(), "Tests".into()],
            success_criteria: vec!["the build passes".into()],
        };
        assert!(c
            .check(Some("- **files**: a.txt\n* tests: 3 passed"))
            .is_ok());
        assert!(c.check(Some("`files`: a.txt\nTESTS: ok")).is_ok());
        let err = c
            .check(Some("files: a.txt\ntests:   "))
            .expect_err("no tests");
        assert!(err.contains("`Tests`") && !err.contains("`files`"), "{err}");
        let err = c.check(None).expect_err("nothing stated");
        assert!(err.contains("facts `files`, `Tests`"), "{err}");
        let text = c.instructions();
        assert!(text.contains("- files\n") && text.contains("the build passes"));
    }

    #[test]
    fn an_empty_contract_accepts_everything() {
        assert!(Contract::default().check(None).is_ok());
    }

    #[test]
    fn the_spec_field_reads_and_refuses_unknown_fields() {
        let spec: SubAgentSpec =
            serde_json::from_str(r#"{"contract":{"expectedFacts":["x"]}}"#).expect("reads");
        assert_eq!(
            spec.contract.map(|c| c.expected_facts),
            Some(vec!["x".to_owned()])
        );
        assert!(serde_json::from_str::<SubAgentSpec>(r#"{"contract":{"facts":[]}}"#).is_err());
    }
}
