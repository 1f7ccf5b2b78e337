//! Sub-agents (SPEC §15, [`crate::tools::AgentCall`]): a parked agent's sub-agent call, done
//! from the plan's own state. A child is a sub-job `<parent>/agent-<k>` added by a plan
//! edit in the same journal batch as the parent's park, branched from the parent's
//! checkpoint; the parent's session resumes with the call's result at once, or — for
//! `wait_for_agents` — in `waiting(children)` once the children it waits for have ended.

use super::*;
use crate::plan::{JobSpec, WorkSpec};
use crate::state::{Waiting, WaitingFor};
use crate::tools::{child_name, AgentCall, SubAgent, SubAgentSpec, MAX_AGENT_DEPTH};

/// How much of a child's output a report carries (as the instructions' section on
/// dependencies' outputs).
const OUTPUT_CUT: usize = crate::inputs::SECTION_BYTES_PER_JOB;

/// What a sub-agent call comes to: the parent resumes now with this text, or waits for
/// these children.
enum Outcome {
    Resume(String),
    Wait(Vec<String>),
}

impl PlanActor {
    /// Running node `n`'s agent ended its turn with `call`: does it, and resumes the agent
    /// (or parks it until its children end). A call that cannot be done resumes the agent
    /// with why, like a tool error.
    pub(super) fn agent_call(
        &mut self,
        n: NodeIndex,
        call: AgentCall,
    ) -> std::result::Result<(), ApplyError> {
        let outcome = match call {
            AgentCall::Spawn(sub) => self.spawn_agent(n, sub).map(Outcome::Resume),
            AgentCall::Wait { agents } => self.wait_for_agents(n, &agents),
            AgentCall::Check => Ok(Outcome::Resume(self.agents_report(n, None))),
            AgentCall::ListSessions => Ok(Outcome::Resume(self.sessions_report())),
            AgentCall::Message { agent, message } => self
                .child(n, &agent)
                .and_then(|c| self.message_agent(c, &message))
                .map(Outcome::Resume),
            AgentCall::Complete { agent } => self
                .child(n, &agent)
                .and_then(|c| self.complete_agent(c))
                .map(Outcome::Resume),
            AgentCall::Cancel { agent } => self
                .child(n, &agent)
                .and_then(|c| self.cancel_agent(c))
                .map(Outcome::Resume),
            AgentCall::Delete { agent } => self.child(n, &agent).and_then(|c| {
                let id = self.spec.jobs[c].producer_id.clone();
                self.cancel_agent(c)?;
                self.machine
                    .record_change(StateChange::AgentDeleted { node: n, child: id })
                    .map_err(|e| e.to_string())?;
                Ok(Outcome::Resume(format!(
                    "Sub-agent `{agent}` is deleted: it is stopped, its work is not merged and \
                     the tools no longer list it."
                )))
            }),
        };
        match outcome {
            Ok(Outcome::Wait(agents)) => {
                let waiting = Waiting {
                    agents,
                    ..Waiting::new(WaitingFor::Children, self.clock)
                };
                self.machine.hold_after(n, waiting, self.clock)
            }
            Ok(Outcome::Resume(text)) => self.resume_now(n, text),
            Err(why) => self.resume_now(n, format!("The sub-agent tool call failed: {why}")),
        }
    }

    /// Parent `n` in `waiting(children)`: once every child it waits for has ended, its
    /// session resumes with their results (their commits are merged into its worktree as it
    /// resumes). Whether `n` was such a parent.
    pub(super) fn check_agent_wait(&mut self, n: NodeIndex) -> bool {
        let node = &self.machine.record().state.nodes[n];
        let Some(waiting) = node.extra.waiting.as_deref().filter(|w| {
            node.status == NodeStatus::Waiting && w.waiting_for == WaitingFor::Children
        }) else {
            return false;
        };
        let agents = waiting.agents.clone();
        let ended = agents.iter().all(|id| {
            self.machine
                .graph()
                .index_of(id)
                .is_none_or(|c| self.machine.status_of(c).is_terminal())
        });
        if ended && self.machine.has_open_attempt(n) {
            let text = self.waited_report(n, &agents);
            if let Err(e) = self.resume_now(n, text) {
                tracing::error!(node = n, error = %e, "could not resume a parent agent");
            }
        }
        true
    }

    /// Wakes parked node `n` with `message`, after the messages its inbox holds.
    pub(super) fn wake(
        &mut self,
        n: NodeIndex,
        message: String,
    ) -> std::result::Result<(), ApplyError> {
        let inbox = self.machine.record().state.nodes[n]
            .extra
            .tools
            .as_ref()
            .map(|t| t.inbox.join("\n\n"))
            .unwrap_or_default();
        let message = match inbox.is_empty() {
            true => message,
            false => format!("{inbox}\n\n{message}"),
        };
        self.machine.wake(n, message, self.clock)
    }

    /// Whether node `n`, whose run just finished, has messages its agent has not seen
    /// (`message_agent` while it worked).
    pub(super) fn has_mail(&self, n: NodeIndex) -> bool {
        self.machine.record().state.nodes[n]
            .extra
            .tools
            .as_ref()
            .is_some_and(|t| !t.inbox.is_empty())
            && self.machine.has_open_attempt(n)
    }

    /// Node `n` finished its work with messages waiting: instead of ending, its session goes
    /// on with them, from the commit it just made (its checkpoint), and it finishes after that
    /// turn.
    pub(super) fn deliver_mail(&mut self, n: NodeIndex) -> std::result::Result<(), ApplyError> {
        if let Some(commit) = self.machine.record().state.nodes[n].extra.commit.clone() {
            self.machine
                .record_change(StateChange::Checkpoint { node: n, commit })?;
        }
        self.resume_now(
            n,
            "These messages came while you worked. Take them into account, then end your \
             turn with your final answer."
                .to_owned(),
        )
    }

    /// Running node `n` goes on at once with `text`: a `waiting(children)` that is over as it
    /// starts (journaled, so a crash resumes it the same way).
    fn resume_now(&mut self, n: NodeIndex, text: String) -> std::result::Result<(), ApplyError> {
        if self.machine.status_of(n) == NodeStatus::Running {
            let waiting = Waiting::new(WaitingFor::Children, self.clock);
            self.machine.hold_after(n, waiting, self.clock)?;
        }
        self.wake(n, text)
    }

    /// Adds the child `sub` under node `n`, branched from `n`'s checkpoint.
    fn spawn_agent(&mut self, n: NodeIndex, sub: SubAgent) -> std::result::Result<String, String> {
        let parent = self.spec.jobs.get(n).ok_or("no such job")?.clone();
        if self.spec.isolation != Isolation::Worktree {
            return Err("sub-agents need worktree isolation; this plan runs in place".into());
        }
        let depth = crate::composite::depth_of(&self.spec, &parent);
        if depth >= MAX_AGENT_DEPTH {
            return Err(format!(
                "`{}` is nested {depth} deep; sub-agents go at most {MAX_AGENT_DEPTH} levels \
                 below a plan job",
                parent.producer_id
            ));
        }
        let tools = self.machine.record().state.nodes[n].extra.tools.as_deref();
        let checkpoint = tools
            .and_then(|t| t.checkpoint.clone())
            .ok_or("the job's work has no checkpoint commit to branch from")?;
        let task = sub.task.trim();
        if task.is_empty() {
            return Err("task: must not be empty".into());
        }
        let k = self.sub_agents(n, true).len() + 1;
        let name = child_name(k);
        let id = format!("{}/{name}", parent.producer_id);
        let mut agent = match &parent.work {
            WorkSpec::Agent(a) => a.clone(),
            _ => Default::default(),
        };
        let mut instructions = String::new();
        if let Some(system) = sub
            .system_message
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            instructions.push_str(system.trim());
            instructions.push_str("\n\n");
        }
        instructions.push_str(task);
        if let Some(contract) = &sub.contract {
            instructions.push_str("\n\n");
            instructions.push_str(&contract.instructions());
        }
        agent.instructions = Some(instructions);
        agent.instructions_file = None;
        agent.agent = sub.agent_name.or(agent.agent);
        agent.model = sub.model.or(agent.model);
        let title: String = task
            .lines()
            .next()
            .unwrap_or(task)
            .chars()
            .take(200)
            .collect();
        let mut child = JobSpec::new(id.clone(), title, WorkSpec::Agent(agent));
        let extra = child.extra.make_mut();
        extra.base_branch = Some(checkpoint.clone());
        extra.sub_agent = Some(Box::new(SubAgentSpec {
            contract: sub.contract,
        }));
        let edit = self.sub_job_edit(n, vec![child])?;
        self.add_sub_jobs(edit).map_err(|e| e.to_string())?;
        Ok(format!(
            "Sub-agent `{name}` is started (job `{id}`): it works on its task in its own worktree \
             from your checkpoint {checkpoint}. Go on with your work; call wait_for_agents to wait \
             for it (its commit is then merged into your worktree) or check_agents to see how it \
             does."
        ))
    }

    /// Waits for the children `agents` names (all of them when empty), or resumes at once
    /// when none is still at work; why not when one is none of `n`'s children.
    fn wait_for_agents(
        &self,
        n: NodeIndex,
        agents: &[String],
    ) -> std::result::Result<Outcome, String> {
        // None named: all of them, so that the parent hears of those that ended already too.
        let ids: Vec<String> = if agents.is_empty() {
            self.sub_agents(n, false)
                .into_iter()
                .map(|c| self.spec.jobs[c].producer_id.clone())
                .collect()
        } else {
            let mut ids = Vec::with_capacity(agents.len());
            for agent in agents {
                let c = self.child(n, agent)?;
                ids.push(self.spec.jobs[c].producer_id.clone());
            }
            ids
        };
        let unfinished = ids.iter().any(|id| {
            self.machine
                .graph()
                .index_of(id)
                .is_some_and(|c| !self.machine.status_of(c).is_terminal())
        });
        if unfinished {
            return Ok(Outcome::Wait(ids));
        }
        Ok(Outcome::Resume(self.waited_report(n, &ids)))
    }

    /// What a parent that waited for its children `ids` resumes with.
    fn waited_report(&self, n: NodeIndex, ids: &[String]) -> String {
        let report = self.agents_report(n, Some(ids));
        format!(
            "The sub-agents you waited for have ended. Their commits are merged into your \
             worktree (a conflict is told below).\n\n{report}"
        )
    }

    /// A message for child `c`: it wakes a parked child at once, else waits in its inbox until
    /// the child's turn ends (then it goes on with it: [`PlanActor::deliver_mail`]).
    fn message_agent(
        &mut self,
        c: NodeIndex,
        message: &str,
    ) -> std::result::Result<String, String> {
        let name = self.ended_check(c)?;
        let text = format!(
            "Your parent agent sends you this message: {}",
            message.trim()
        );
        Ok(match self.tell(c, text)? {
            true => format!("`{name}` was waiting; it goes on with your message now."),
            false => format!(
                "`{name}` is at work; your message reaches it when its current turn ends (it \
                 goes on with the message before it finishes)."
            ),
        })
    }

    /// Gives child `c` `text`: at once when it is parked (`true`), else through its inbox
    /// (delivered when its turn ends).
    fn tell(&mut self, c: NodeIndex, text: String) -> std::result::Result<bool, String> {
        let parked = self.is_parked(c);
        let change = match parked {
            true => self.wake(c, text),
            false => self.machine.record_change(StateChange::Message {
                node: c,
                message: text,
            }),
        };
        change.map(|()| parked).map_err(|e| e.to_string())
    }

    /// Asks child `c` to finish: its cron ends, and it is told to end with its final answer.
    fn complete_agent(&mut self, c: NodeIndex) -> std::result::Result<String, String> {
        let name = self.ended_check(c)?;
        let has_cron = self.machine.record().state.nodes[c]
            .extra
            .tools
            .as_ref()
            .is_some_and(|t| t.cron.is_some());
        if has_cron {
            self.machine
                .record_change(StateChange::Cron {
                    node: c,
                    cron: None,
                })
                .map_err(|e| e.to_string())?;
        }
        let text = "Your parent agent asks you to finish now: wrap up, and end your turn with \
                    your final answer."
            .to_owned();
        self.tell(c, text)?;
        Ok(format!("`{name}` is asked to finish."))
    }

    /// Stops child `c` and its own sub-agents (their jobs end `canceled`).
    fn cancel_agent(&mut self, c: NodeIndex) -> std::result::Result<String, String> {
        let name = self.spec.jobs[c].producer_id.clone();
        let mut nodes = vec![c];
        let mut i = 0;
        while let Some(&d) = nodes.get(i) {
            nodes.extend(self.sub_agents(d, true));
            i += 1;
        }
        for d in nodes {
            if self.machine.status_of(d).is_terminal() {
                continue;
            }
            match self.running[d].as_mut() {
                Some(r) => {
                    r.stop = Some(StopReason::Cancel);
                    r.cancel.cancel();
                }
                None => self
                    .machine
                    .cancel_node(d, self.clock)
                    .map_err(|e| e.to_string())?,
            }
        }
        Ok(format!("Sub-agent `{name}` is canceled."))
    }

    /// The child of node `n` that `agent` names (`agent-<k>` or its producerId), not deleted.
    fn child(&self, n: NodeIndex, agent: &str) -> std::result::Result<NodeIndex, String> {
        let parent = &self.spec.jobs[n].producer_id;
        let agent = agent.trim();
        let id = match agent.strip_prefix(&format!("{parent}/")) {
            Some(_) => agent.to_owned(),
            None => format!("{parent}/{agent}"),
        };
        self.sub_agents(n, false)
            .into_iter()
            .find(|&c| self.spec.jobs[c].producer_id == id)
            .ok_or_else(|| format!("agent_id: `{agent}` is none of your sub-agents"))
    }

    /// The sub-agents of node `n` (its sub-jobs a `spawn_agent` made), in the plan's order,
    /// with the deleted ones or not.
    fn sub_agents(&self, n: NodeIndex, with_deleted: bool) -> Vec<NodeIndex> {
        let deleted = self.machine.record().state.nodes[n]
            .extra
            .tools
            .as_deref()
            .map(|t| t.deleted.as_slice())
            .unwrap_or_default();
        self.children(n)
            .into_iter()
            .filter(|&d| self.spec.jobs[d].extra.sub_agent.is_some())
            .filter(|&d| with_deleted || !deleted.contains(&self.spec.jobs[d].producer_id))
            .collect()
    }

    /// Child `c`'s producerId, or why a call cannot act on it: it has ended.
    fn ended_check(&self, c: NodeIndex) -> std::result::Result<String, String> {
        let name = self.spec.jobs[c].producer_id.clone();
        let status = self.machine.status_of(c);
        if status.is_terminal() {
            return Err(format!("agent_id: `{name}` has ended ({status})"));
        }
        Ok(name)
    }

    /// Whether node `c` is a parked agent (waiting with its attempt open).
    fn is_parked(&self, c: NodeIndex) -> bool {
        self.machine.status_of(c) == NodeStatus::Waiting && self.machine.has_open_attempt(c)
    }

    /// The report on node `n`'s sub-agents (only those in `only`, producerIds, when given).
    fn agents_report(&self, n: NodeIndex, only: Option<&[String]>) -> String {
        let parent = &self.spec.jobs[n].producer_id;
        let state = &self.machine.record().state;
        let mut out = String::new();
        for c in self.sub_agents(n, false) {
            let job = &self.spec.jobs[c];
            if only.is_some_and(|o| !o.contains(&job.producer_id)) {
                continue;
            }
            let node = &state.nodes[c];
            let name = job
                .producer_id
                .strip_prefix(&format!("{parent}/"))
                .unwrap_or(&job.producer_id);
            out.push_str(&format!(
                "### `{name}` (job `{}`): {}",
                job.producer_id, node.status
            ));
            if let Some(w) = node.extra.waiting.as_deref() {
                out.push_str(&format!(", waiting for {}", w.waiting_for));
            }
            out.push('\n');
            out.push_str(&format!("Task: {}\n", job.task));
            if let Some(commit) = &node.extra.commit {
                out.push_str(&format!("Commit: {commit}\n"));
            }
            if let Some(error) = &node.extra.error {
                out.push_str(&format!("Error: {error}\n"));
            }
            if let Some(tools) = node.extra.tools.as_deref().filter(|t| !t.inbox.is_empty()) {
                out.push_str(&format!(
                    "Messages not delivered yet: {}\n",
                    tools.inbox.len()
                ));
            }
            if let Some(output) = node.output() {
                let (head, cut) = crate::inputs::head(output, OUTPUT_CUT);
                out.push_str(&format!("Output:\n{head}\n"));
                if cut > 0 {
                    out.push_str(&format!("({cut} more bytes of output are in its job)\n"));
                }
            }
            out.push('\n');
        }
        if out.is_empty() {
            return "You have no sub-agents.".to_owned();
        }
        out.trim_end().to_owned()
    }

    /// The plan's agent jobs with their sessions (`list_sessions`).
    fn sessions_report(&self) -> String {
        let state = &self.machine.record().state;
        let mut out = String::from("The plan's agent sessions:\n");
        for (i, job) in self.spec.jobs.iter().enumerate() {
            if !matches!(job.work, WorkSpec::Agent(_)) {
                continue;
            }
            let node = &state.nodes[i];
            out.push_str(&format!("- `{}`: {}", job.producer_id, node.status));
            if let Some(session) = &node.extra.session_id {
                out.push_str(&format!(", session {session}"));
            }
            if let Some(parent) = &job.extra.parent {
                out.push_str(&format!(", child of `{parent}`"));
            }
            out.push('\n');
        }
        out.trim_end().to_owned()
    }
}
