//! The sub-jobs the controllers add: agent jobs under a composite job, branching from its
//! commit, with its environment.

use orchestrator_core::composite::CompositeFacts;
use orchestrator_core::plan::{Effort, JobSpec, WorkSpec};

/// Who runs a sub-job: its agent CLI, model and effort (each `None` for the default).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Runs {
    pub(crate) agent: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) effort: Option<Effort>,
}

impl Runs {
    /// A member's own settings, its agent and model falling back to the composite job's
    /// (`fallback_agent`, `fallback_model`).
    pub(crate) fn with_fallback(
        agent: Option<&String>,
        model: Option<&String>,
        effort: Option<Effort>,
        fallback_agent: Option<&String>,
        fallback_model: Option<&String>,
    ) -> Runs {
        Runs {
            agent: agent.or(fallback_agent).cloned(),
            model: model.or(fallback_model).cloned(),
            effort,
        }
    }
}

/// One agent sub-job of `facts.job` named `<parent>/<name>`, running `instructions`.
pub(crate) struct SubJob<'a> {
    pub(crate) name: String,
    pub(crate) task: String,
    pub(crate) instructions: String,
    pub(crate) runs: &'a Runs,
    /// Sibling names (after `<parent>/`) it depends on.
    pub(crate) after: Vec<String>,
    /// It only reads and replies: an empty commit is fine.
    pub(crate) reads_only: bool,
}

impl SubJob<'_> {
    pub(crate) fn build(self, facts: &CompositeFacts<'_>) -> JobSpec {
        let parent = &facts.job.producer_id;
        let mut work = WorkSpec::agent(self.instructions);
        if let WorkSpec::Agent(a) = &mut work {
            a.agent = self.runs.agent.clone();
            a.model = self.runs.model.clone();
            a.effort = self.runs.effort;
        }
        let job = JobSpec::new(format!("{parent}/{}", self.name), self.task, work)
            .depends_on(self.after.iter().map(|d| format!("{parent}/{d}")));
        let mut job = facts.sub_job(job);
        let extra = job.extra.make_mut();
        extra.env = facts.job.extra.env.clone();
        extra.expects_no_changes = self.reads_only;
        job
    }
}

/// The part of a sub-job's producerId after `<parent>/`.
pub(crate) fn own_name<'c>(facts: &CompositeFacts<'_>, producer_id: &'c str) -> &'c str {
    name_under(&facts.job.producer_id, producer_id)
}

/// The part of `producer_id` after `<parent>/` (all of it when it is not under `parent`).
pub(crate) fn name_under<'c>(parent: &str, producer_id: &'c str) -> &'c str {
    producer_id
        .strip_prefix(parent)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(producer_id)
}

/// The first non-blank line of `text`, trimmed.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// A sub-job's `task` from `text`: its first line, cut at 80 characters (with `…`).
pub(crate) fn task_line(text: &str) -> String {
    let line = first_line(text);
    let mut out: String = line.chars().take(80).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    out
}
