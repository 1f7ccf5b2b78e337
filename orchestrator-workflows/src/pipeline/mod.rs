//! The `pipeline` controller (SPEC §13, seed 003): a task routed by complexity through roles
//! — `simple`: coder → review; `medium`: architect → coder → review; `complex`: architect →
//! designer (with `ui`) → coder → review — each a sub-job `<pipeline>/<role>` building on the
//! one before. Every reply must end with the signed contract ([`crate::rules::contract`]); one
//! that does not fails its stage with reason `contract` (the engine asks
//! [`Controller::check`]) and the pipeline with it. The review's verdict decides: `ship`
//! succeeds, `minor_fixes` fails, `needs_work` runs `debugger-<k>` → `coder-<k+1>` →
//! `review-<k+1>`, up to `maxDebugAttempts`. With `approval: between` every stage after the
//! first waits for a person's approval. A `bootstrap` pipeline runs architect → planner, and
//! the planner's roadmap becomes `pipeline` sub-jobs with its dependencies.

mod prompts;
mod roadmap;

use orchestrator_core::composite::{ChildFacts, CompositeFacts, Controller, Decision};
use orchestrator_core::plan::{
    Approval, Complexity, JobSpec, PipelineSpec, StageApproval, WorkSpec,
    DEFAULT_MAX_DEBUG_ATTEMPTS,
};
use orchestrator_core::NodeStatus;
use serde::Serialize;

use crate::rules::{parse_contract, Role, Verdict};
use crate::subjob::{name_under, own_name, task_line, Runs, SubJob};
pub use roadmap::{parse_roadmap, RoadmapItem};

/// Runs `pipeline` work (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct PipelineController;

impl Controller for PipelineController {
    fn decide(&self, facts: &CompositeFacts<'_>) -> Decision {
        let WorkSpec::Pipeline(spec) = &facts.job.work else {
            return failed("the pipeline controller runs only `pipeline` work");
        };
        if let Some(c) = facts
            .children
            .iter()
            .find(|c| c.status != NodeStatus::Succeeded)
        {
            return failed(format!(
                "stage `{}` is {}; the stages after it do not run",
                own_name(facts, c.producer_id),
                c.status
            ));
        }
        if spec.bootstrap {
            bootstrap(facts, spec)
        } else {
            stages(facts, spec)
        }
    }

    fn check(&self, parent: &JobSpec, child: &JobSpec, output: Option<&str>) -> Result<(), String> {
        if !matches!(parent.work, WorkSpec::Pipeline(_)) {
            return Ok(());
        }
        let name = name_under(&parent.producer_id, &child.producer_id);
        // A bootstrap's roadmap items are pipelines of their own, with their own stages.
        let Some(role) = role_of(name) else {
            return Ok(());
        };
        let reply = output.unwrap_or("");
        parse_contract(reply, role).map_err(|e| format!("contract: {e}"))?;
        if role == Role::Planner {
            parse_roadmap(reply).map_err(|e| format!("contract: {e}"))?;
        }
        Ok(())
    }

    fn progress(&self, facts: &CompositeFacts<'_>) -> Option<String> {
        Some(Summary::of(facts).to_json())
    }
}

fn failed(reason: impl Into<String>) -> Decision {
    Decision::Failed {
        reason: reason.into(),
    }
}

/// The role of stage `name` (`coder`, `coder-2`, `debugger-1`); `None` for a roadmap item.
fn role_of(name: &str) -> Option<Role> {
    let base = match name.rsplit_once('-') {
        Some((base, n)) if n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() => base,
        _ => name,
    };
    Role::from_name(base)
}

/// The stages a task of `spec` goes through before any debugging.
pub fn route(spec: &PipelineSpec) -> Vec<Role> {
    match spec.complexity.unwrap_or_default() {
        Complexity::Simple => vec![Role::Coder, Role::Review],
        Complexity::Medium => vec![Role::Architect, Role::Coder, Role::Review],
        _ if spec.ui => vec![Role::Architect, Role::Designer, Role::Coder, Role::Review],
        _ => vec![Role::Architect, Role::Coder, Role::Review],
    }
}

fn runs_of(spec: &PipelineSpec, role: Role) -> Runs {
    let own = spec.roles.get(role.name());
    Runs::with_fallback(
        own.and_then(|r| r.agent.as_ref()),
        own.and_then(|r| r.model.as_ref()),
        own.and_then(|r| r.effort),
        spec.agent.as_ref(),
        spec.model.as_ref(),
    )
}

/// Stage `name` with `role`, after the stages `done`.
fn stage_job(
    facts: &CompositeFacts<'_>,
    spec: &PipelineSpec,
    name: String,
    role: Role,
    done: &[&ChildFacts<'_>],
    debug: Option<(u32, u32)>,
) -> JobSpec {
    let task = spec
        .task
        .as_deref()
        .or(spec.objective.as_deref())
        .unwrap_or("");
    let earlier: Vec<prompts::Earlier<'_>> = done
        .iter()
        .map(|c| prompts::Earlier {
            stage: own_name(facts, c.producer_id),
            reply: c.output.unwrap_or(""),
        })
        .collect();
    let mut job = SubJob {
        task: format!("{name}: {}", task_line(task)),
        instructions: prompts::stage(role, task, &earlier, debug),
        runs: &runs_of(spec, role),
        after: done
            .last()
            .map(|c| own_name(facts, c.producer_id).to_owned())
            .into_iter()
            .collect(),
        // Only the coder is there to change files.
        reads_only: role != Role::Coder,
        name,
    }
    .build(facts);
    if spec.approval == Some(StageApproval::Between) && !done.is_empty() {
        job.extra.make_mut().approval = Some(Approval::Before);
    }
    job
}

/// The next stage of a routed pipeline whose stages so far all succeeded.
fn stages(facts: &CompositeFacts<'_>, spec: &PipelineSpec) -> Decision {
    let max = spec
        .max_debug_attempts
        .unwrap_or(DEFAULT_MAX_DEBUG_ATTEMPTS);
    let mut plan: Vec<(String, Role)> = route(spec)
        .into_iter()
        .map(|r| (r.name().to_owned(), r))
        .collect();
    let done: Vec<&ChildFacts<'_>> = facts.children.iter().collect();
    let mut debug_rounds = 0;
    for (i, child) in done.iter().enumerate() {
        let name = own_name(facts, child.producer_id);
        let Some((expected, role)) = plan.get(i).cloned() else {
            return failed(format!("stage `{name}` is not part of this pipeline"));
        };
        if name != expected {
            return failed(format!("stage `{name}` came where `{expected}` was due"));
        }
        if role != Role::Review {
            continue;
        }
        let verdict = match parse_contract(child.output.unwrap_or(""), role) {
            Ok(c) => c.verdict.unwrap_or(Verdict::MinorFixes),
            Err(e) => return failed(format!("stage `{name}`: contract: {e}")),
        };
        let summary = || Summary::of(facts).to_json();
        match verdict {
            Verdict::Ship => {
                return Decision::Done {
                    output: Some(summary()),
                }
            }
            Verdict::MinorFixes => {
                return failed(format!(
                    "stage `{name}` gave the verdict minor_fixes: issues remain that it could \
                     not fix"
                ))
            }
            Verdict::NeedsWork if debug_rounds >= max => {
                return failed(format!(
                    "stage `{name}` gave the verdict needs_work after {max} debug attempt(s)"
                ))
            }
            Verdict::NeedsWork => {
                debug_rounds += 1;
                let k = debug_rounds;
                plan.push((format!("debugger-{k}"), Role::Debugger));
                plan.push((format!("coder-{}", k + 1), Role::Coder));
                plan.push((format!("review-{}", k + 1), Role::Review));
            }
        }
    }
    let Some((name, role)) = plan.get(done.len()).cloned() else {
        return failed("the pipeline ran out of stages without a review verdict");
    };
    let debug = (role == Role::Debugger).then(|| (debug_rounds, max - debug_rounds));
    Decision::Spawn(vec![stage_job(facts, spec, name, role, &done, debug)])
}

/// The next step of a bootstrap pipeline: architect, planner, then the roadmap's pipelines.
fn bootstrap(facts: &CompositeFacts<'_>, spec: &PipelineSpec) -> Decision {
    let done: Vec<&ChildFacts<'_>> = facts.children.iter().collect();
    match done.len() {
        0 => Decision::Spawn(vec![stage_job(
            facts,
            spec,
            "architect".to_owned(),
            Role::Architect,
            &done,
            None,
        )]),
        1 => Decision::Spawn(vec![stage_job(
            facts,
            spec,
            "planner".to_owned(),
            Role::Planner,
            &done,
            None,
        )]),
        2 => {
            let items = match parse_roadmap(done[1].output.unwrap_or("")) {
                Ok(items) => items,
                Err(e) => return failed(format!("stage `planner`: contract: {e}")),
            };
            Decision::Spawn(items.iter().map(|i| roadmap_job(facts, spec, i)).collect())
        }
        _ => Decision::Done {
            output: Some(Summary::of(facts).to_json()),
        },
    }
}

/// A roadmap item as a `pipeline` sub-job with the bootstrap's settings.
fn roadmap_job(facts: &CompositeFacts<'_>, spec: &PipelineSpec, item: &RoadmapItem) -> JobSpec {
    let parent = &facts.job.producer_id;
    let mut work = spec.clone();
    work.bootstrap = false;
    work.objective = None;
    work.task = Some(item.task.clone());
    work.complexity = Some(item.complexity);
    let after = if item.depends_on.is_empty() {
        // The first items build on the plan's design.
        vec![format!("{parent}/planner")]
    } else {
        item.depends_on
            .iter()
            .map(|d| format!("{parent}/{d}"))
            .collect()
    };
    let job = JobSpec::new(
        format!("{parent}/{}", item.id),
        task_line(&item.task),
        WorkSpec::Pipeline(Box::new(work)),
    )
    .depends_on(after);
    let mut job = facts.sub_job(job);
    job.extra.make_mut().env = facts.job.extra.env.clone();
    job
}

/// A pipeline's output: its stages and verdicts.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    stages: Vec<StageSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<&'static str>,
    debug_attempts: u32,
}

#[derive(Debug, Serialize)]
struct StageSummary {
    name: String,
    status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<&'static str>,
}

impl Summary {
    fn of(facts: &CompositeFacts<'_>) -> Summary {
        let mut summary = Summary {
            stages: Vec::new(),
            verdict: None,
            debug_attempts: 0,
        };
        for c in &facts.children {
            let name = own_name(facts, c.producer_id).to_owned();
            let role = role_of(&name);
            if role == Some(Role::Debugger) {
                summary.debug_attempts += 1;
            }
            let verdict = (role == Some(Role::Review))
                .then(|| parse_contract(c.output.unwrap_or(""), Role::Review).ok())
                .flatten()
                .and_then(|c| c.verdict)
                .map(Verdict::as_str);
            if verdict.is_some() {
                summary.verdict = verdict;
            }
            summary.stages.push(StageSummary {
                name,
                status: c.status.to_string(),
                verdict,
            });
        }
        summary
    }

    fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
