//! Checks of composite work (SPEC §13): teams and pipelines. What needs files of the
//! repository or of the machine (a Squad folder's content, a preset's name) is checked by the
//! controllers' crate when it resolves them; here only what the plan itself says.

use std::collections::HashSet;

use crate::composite::MAX_SUB_JOBS;
use crate::plan::{
    PipelineSpec, TeamAgent, TeamMode, TeamSelect, TeamSpec, WorkerSpec, PIPELINE_ROLES,
};

use super::names::{is_agent_name, producer_id_problem};
use super::paths::PathKind;
use super::{Field, Validator};

/// Most iterations a reflect team may be given.
const MAX_ITERATIONS: u32 = 50;
/// Most debugger rounds a pipeline may be given.
const MAX_DEBUG_ATTEMPTS: u32 = 10;

impl<'a> Validator<'a> {
    pub(super) fn team(&mut self, prefix: &str, team: &'a TeamSpec) {
        if team.prompt.trim().is_empty() {
            self.report(
                Field::new(prefix, "prompt"),
                &team.prompt,
                "must not be empty: say what the team is to do",
            );
        }
        let loads = team.squad.is_some() || team.preset.is_some();
        if team.workers.is_empty() && !loads {
            self.report(
                Field::new(prefix, "workers"),
                "[]",
                "a team needs workers: list them (`[{\"name\":\"alice\"}]`), or load them \
                 with `squad` or `preset`",
            );
        }
        if team.squad.is_some() && team.preset.is_some() {
            self.report(
                Field::new(prefix, "preset"),
                team.preset.as_deref().unwrap_or(""),
                "give `squad` or `preset`, not both",
            );
        }
        if let Some(squad) = &team.squad {
            self.repo_path(Field::new(prefix, "squad"), squad, PathKind::Folder);
        }
        if let Some(preset) = &team.preset {
            if preset.trim().is_empty() {
                self.report(
                    Field::new(prefix, "preset"),
                    preset,
                    "must not be empty: name a preset (e.g. `review-squad`)",
                );
            }
        }
        let mut seen = HashSet::new();
        for (i, worker) in team.workers.iter().enumerate() {
            let at = format!("{prefix}.workers[{i}]");
            self.worker(&at, worker);
            if !seen.insert(worker.name.to_ascii_lowercase()) {
                self.report(
                    Field::new(&at, "name"),
                    &worker.name,
                    "is the name of an earlier worker; worker names must differ (case aside)",
                );
            }
        }
        // A broadcast dispatches every worker at once (and, with an evaluator, its pick).
        if team.mode() == TeamMode::Broadcast && team.workers.len() > MAX_SUB_JOBS {
            self.report(
                Field::new(prefix, "workers"),
                &team.workers.len().to_string(),
                format!("a broadcast team has at most {MAX_SUB_JOBS} workers"),
            );
        }
        self.agent_name(prefix, team.agent.as_deref());
        for (name, agent) in [
            ("orchestrator", &team.orchestrator),
            ("evaluator", &team.evaluator),
        ] {
            if let Some(a) = agent {
                self.team_agent(&format!("{prefix}.{name}"), a);
            }
        }
        if let Some(n) = team.max_iterations {
            if n == 0 || n > MAX_ITERATIONS {
                self.report(
                    Field::new(prefix, "maxIterations"),
                    &n.to_string(),
                    format!("must be between 1 and {MAX_ITERATIONS}"),
                );
            }
        }
        if let Some(select) = team.select {
            if team.mode() != TeamMode::Broadcast {
                self.report(
                    Field::new(prefix, "select"),
                    if select == TeamSelect::Best {
                        "best"
                    } else {
                        "all"
                    },
                    format!(
                        "belongs to `broadcast` teams only; this team's mode is `{}`",
                        team.mode().as_str()
                    ),
                );
            }
        }
    }

    fn worker(&mut self, at: &str, worker: &'a WorkerSpec) {
        if let Some(reason) = producer_id_problem(&worker.name) {
            self.report(
                Field::new(at, "name"),
                &worker.name,
                format!(
                    "{reason}; a worker's name names its sub-jobs, so it is 3–64 characters \
                     of lowercase letters `a-z`, digits and `-` (e.g. `tester`)"
                ),
            );
        }
        self.agent_name(at, worker.agent.as_deref());
        if let Some(prompt) = &worker.system_prompt {
            if prompt.trim().is_empty() {
                self.report(
                    Field::new(at, "systemPrompt"),
                    prompt,
                    "must not be empty: describe the worker's specialty, or omit the field",
                );
            }
        }
    }

    fn team_agent(&mut self, at: &str, agent: &'a TeamAgent) {
        self.agent_name(at, agent.agent.as_deref());
        if let Some(t) = agent.threshold {
            if !(0.0..=1.0).contains(&t) {
                self.report(
                    Field::new(at, "threshold"),
                    &t.to_string(),
                    "must be between 0.0 and 1.0 (a score the evaluator gives)",
                );
            }
        }
    }

    fn agent_name(&mut self, at: &str, agent: Option<&str>) {
        if let Some(agent) = agent.filter(|a| !is_agent_name(a)) {
            self.report(
                Field::new(at, "agent"),
                agent,
                "not a valid agent name: use lowercase letters, digits, `-` and `_` \
                 (e.g. `copilot`, `claude`, `codex`, `gemini`)",
            );
        }
    }

    pub(super) fn pipeline(&mut self, prefix: &str, p: &'a PipelineSpec) {
        let text = |t: &Option<String>| t.as_deref().is_some_and(|t| !t.trim().is_empty());
        if p.bootstrap {
            if !text(&p.objective) {
                self.report(
                    Field::new(prefix, "objective"),
                    p.objective.as_deref().unwrap_or(""),
                    "a bootstrap pipeline needs an `objective` to plan",
                );
            }
        } else if !text(&p.task) {
            self.report(
                Field::new(prefix, "task"),
                p.task.as_deref().unwrap_or(""),
                "a pipeline needs a `task` (or `\"bootstrap\": true` with an `objective`)",
            );
        }
        for (role, settings) in &p.roles {
            let at = format!("{prefix}.roles");
            if !PIPELINE_ROLES.contains(&role.as_str()) {
                self.report(
                    Field::new(&at, role),
                    role,
                    format!("is no role; the roles are {}", PIPELINE_ROLES.join(", ")),
                );
                continue;
            }
            self.agent_name(&format!("{at}.{role}"), settings.agent.as_deref());
        }
        self.agent_name(prefix, p.agent.as_deref());
        if let Some(n) = p.max_debug_attempts {
            if n > MAX_DEBUG_ATTEMPTS {
                self.report(
                    Field::new(prefix, "maxDebugAttempts"),
                    &n.to_string(),
                    format!("must be at most {MAX_DEBUG_ATTEMPTS}"),
                );
            }
        }
    }
}
