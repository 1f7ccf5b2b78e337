//! The `team` controller (SPEC §13, seed 002): broadcast, sequential, orchestrator and
//! reflect teams, every member's turn a sub-job.
//!
//! The controller keeps no state: each decision reads the team's sub-jobs back from their
//! names and outputs. A broadcast's workers are `<team>/<worker>` (and `<team>/evaluate` for a
//! best-of-N pick); a sequential team's the same, one after another. An orchestrator or
//! reflect team works in rounds `<team>/<round>/...`: `plan` (the orchestrator's
//! assignments), one sub-job per assigned worker, `synthesis`, and `evaluate` with an
//! evaluator. A sub-job that failed is run again (a new attempt of the same sub-job) after a
//! 2-second back-off, and one that failed three times in a row ends the loop as `errors`. A
//! round whose replies are unusable (an unreadable score, nothing assigned in the first
//! iteration) is run again as the next round after a 2-second `backoff` timer job; three such
//! rounds in a row end the loop as `errors`, and their work is not merged.

mod prompts;
mod summary;

use std::collections::BTreeMap;
use std::path::Path;

use orchestrator_core::composite::{ChildFacts, CompositeFacts, Controller, Decision};
use orchestrator_core::plan::{
    JobSpec, TeamMode, TeamSelect, TeamSpec, TimerSpec, ValidationError, WorkSpec, WorkerSpec,
    DEFAULT_MAX_ITERATIONS, DEFAULT_THRESHOLD,
};
use orchestrator_core::NodeStatus;

use crate::rules::{
    find_sentinel, match_worker, parse_assignments, parse_best, parse_score, trend, Sentinel,
    StallCheck,
};
use crate::subjob::{own_name, task_line, Runs, SubJob};
use prompts::{LastIteration, Reply};
pub use summary::{ExitReason, TeamSummary};

/// Failed rounds in a row that end a loop.
pub const MAX_ERRORS: u32 = 3;
/// The back-off before a failed round is retried, in seconds.
pub const BACKOFF_SECONDS: f64 = 2.0;

/// Runs `team` work (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct TeamController;

impl Controller for TeamController {
    fn decide(&self, facts: &CompositeFacts<'_>) -> Decision {
        let WorkSpec::Team(team) = &facts.job.work else {
            return Decision::Failed {
                reason: "the team controller runs only `team` work".to_owned(),
            };
        };
        match team.mode() {
            TeamMode::Broadcast => broadcast(facts, team),
            TeamMode::Sequential => sequential(facts, team),
            _ => Loop::read(facts, team).next(facts, team),
        }
    }

    /// Reads the team's Squad folder or preset into its spec ([`crate::resolve`]), with the
    /// user's presets of this machine.
    fn prepare(&self, job: &mut JobSpec, repo: &Path) -> Result<(), Vec<ValidationError>> {
        let user = crate::preset::user_presets_path();
        crate::resolve::resolve_job(job, repo, user.as_deref(), &mut None)
            .map(|_notes| ())
            .map_err(|p| {
                let value = match &job.work {
                    WorkSpec::Team(t) => t.squad.clone().or(t.preset.clone()).unwrap_or_default(),
                    _ => String::new(),
                };
                vec![ValidationError::new(Some(job), p.field, value, p.message)]
            })
    }

    fn progress(&self, facts: &CompositeFacts<'_>) -> Option<String> {
        let WorkSpec::Team(team) = &facts.job.work else {
            return None;
        };
        let summary = match team.mode() {
            TeamMode::Broadcast | TeamMode::Sequential => TeamSummary::one_pass(team.mode()),
            _ => Loop::read(facts, team).summary,
        };
        Some(summary.to_json())
    }
}

/// The agent settings of a worker, falling back to the team's.
fn worker_runs(team: &TeamSpec, w: &WorkerSpec) -> Runs {
    Runs::with_fallback(
        w.agent.as_ref(),
        w.model.as_ref(),
        w.effort,
        team.agent.as_ref(),
        team.model.as_ref(),
    )
}

/// The orchestrator's (or with `evaluator`, the evaluator's) agent settings.
fn lead_runs(team: &TeamSpec, evaluator: bool) -> Runs {
    let lead = if evaluator {
        team.evaluator.as_ref().or(team.orchestrator.as_ref())
    } else {
        team.orchestrator.as_ref()
    };
    Runs::with_fallback(
        lead.and_then(|l| l.agent.as_ref()),
        lead.and_then(|l| l.model.as_ref()),
        lead.and_then(|l| l.effort),
        team.agent.as_ref(),
        team.model.as_ref(),
    )
}

fn worker_names(team: &TeamSpec) -> Vec<&str> {
    team.workers.iter().map(|w| w.name.as_str()).collect()
}

fn failed(reason: impl Into<String>) -> Decision {
    Decision::Failed {
        reason: reason.into(),
    }
}

/// The first sub-job of `children` that did not succeed, as words.
fn first_failure(facts: &CompositeFacts<'_>, children: &[&ChildFacts<'_>]) -> Option<String> {
    children
        .iter()
        .find(|c| c.status != NodeStatus::Succeeded)
        .map(|c| format!("`{}` {}", own_name(facts, c.producer_id), c.status))
}

// ----- broadcast and sequential -------------------------------------------------------------

fn broadcast(facts: &CompositeFacts<'_>, team: &TeamSpec) -> Decision {
    let best = team.select == Some(TeamSelect::Best);
    let children: Vec<&ChildFacts<'_>> = facts.children.iter().collect();
    if children.is_empty() {
        let jobs = team
            .workers
            .iter()
            .map(|w| {
                SubJob {
                    name: w.name.clone(),
                    task: format!("{}: {}", w.name, task_line(&team.prompt)),
                    instructions: prompts::worker(team, w, &team.prompt, &[]),
                    runs: &worker_runs(team, w),
                    after: Vec::new(),
                    reads_only: true,
                }
                .build(facts)
            })
            .collect();
        return Decision::Spawn(jobs);
    }
    if let Some(why) = first_failure(facts, &children) {
        return failed(format!("errors: {why}"));
    }
    let mut summary = TeamSummary::one_pass(team.mode());
    if !best {
        summary.exit_reason = Some(ExitReason::GoalMet);
        return Decision::Done {
            output: Some(summary.to_json()),
        };
    }
    let Some(evaluation) = children
        .iter()
        .find(|c| own_name(facts, c.producer_id) == "evaluate")
    else {
        let evaluate = SubJob {
            name: "evaluate".to_owned(),
            task: "pick the best candidate".to_owned(),
            instructions: prompts::pick(team, &replies_of(facts, &children)),
            runs: &lead_runs(team, true),
            after: Vec::new(),
            reads_only: true,
        };
        return Decision::Spawn(vec![evaluate.build(facts)]);
    };
    let reply = evaluation.output.unwrap_or("");
    let names = worker_names(team);
    let Some(picked) = parse_best(reply).and_then(|b| match_worker(b, &names)) else {
        return failed(format!(
            "errors: the evaluator named no candidate with a `Best: <worker>` line (candidates: {})",
            names.join(", ")
        ));
    };
    summary.exit_reason = Some(ExitReason::GoalMet);
    summary.picked = Some(picked.to_owned());
    summary.synthesis = Some(reply.trim().to_owned());
    Decision::Keep {
        only: vec![format!("{}/{picked}", facts.job.producer_id)],
        output: Some(summary.to_json()),
    }
}

fn sequential(facts: &CompositeFacts<'_>, team: &TeamSpec) -> Decision {
    let children: Vec<&ChildFacts<'_>> = facts.children.iter().collect();
    if let Some(why) = first_failure(facts, &children) {
        return failed(format!("errors: {why}"));
    }
    let Some(next) = team.workers.get(children.len()) else {
        let mut summary = TeamSummary::one_pass(team.mode());
        summary.exit_reason = Some(ExitReason::GoalMet);
        return Decision::Done {
            output: Some(summary.to_json()),
        };
    };
    let earlier = replies_of(facts, &children);
    let job = SubJob {
        name: next.name.clone(),
        task: format!("{}: {}", next.name, task_line(&team.prompt)),
        instructions: prompts::worker(team, next, &team.prompt, &earlier),
        runs: &worker_runs(team, next),
        after: children
            .last()
            .map(|c| own_name(facts, c.producer_id).to_owned())
            .into_iter()
            .collect(),
        reads_only: true,
    };
    Decision::Spawn(vec![job.build(facts)])
}

fn replies_of<'c>(facts: &CompositeFacts<'_>, children: &[&'c ChildFacts<'c>]) -> Vec<Reply<'c>> {
    children
        .iter()
        .map(|c| Reply {
            worker: own_name(facts, c.producer_id)
                .rsplit('/')
                .next()
                .unwrap_or(c.producer_id),
            text: c.output.unwrap_or("(no reply)"),
        })
        .collect()
}

// ----- orchestrator and reflect --------------------------------------------------------------

/// The steps of a round, read back from its sub-jobs.
#[derive(Default)]
struct Round<'c> {
    backoff: Option<&'c ChildFacts<'c>>,
    plan: Option<&'c ChildFacts<'c>>,
    workers: Vec<&'c ChildFacts<'c>>,
    synthesis: Option<&'c ChildFacts<'c>>,
    evaluate: Option<&'c ChildFacts<'c>>,
}

impl<'c> Round<'c> {
    fn all(&self) -> Vec<&'c ChildFacts<'c>> {
        let mut all: Vec<&ChildFacts<'_>> = Vec::new();
        all.extend(self.backoff);
        all.extend(self.plan);
        all.extend(self.workers.iter().copied());
        all.extend(self.synthesis);
        all.extend(self.evaluate);
        all
    }

    /// The last sub-job of the round, which every later one builds on.
    fn last(&self) -> Option<&'c ChildFacts<'c>> {
        self.all().last().copied()
    }
}

/// What the next step of a loop is.
enum Step<'c> {
    /// The rounds so far ended the loop.
    Exit(ExitReason),
    /// Spawn the orchestrator's plan of round `round`, after `after`.
    Plan { round: u32, after: Option<String> },
    /// Run the round's failed sub-jobs again, after the back-off.
    Retry(Vec<String>),
    /// Spawn a back-off before round `round`, after `after`.
    Backoff { round: u32, after: Option<String> },
    /// Spawn the workers the plan of round `round` assigned.
    Workers {
        round: u32,
        plan: &'c ChildFacts<'c>,
    },
    /// Spawn the synthesis of round `round`.
    Synthesis {
        round: u32,
        workers: Vec<&'c ChildFacts<'c>>,
    },
    /// Spawn the evaluation of round `round`'s synthesis.
    Evaluate {
        round: u32,
        synthesis: &'c ChildFacts<'c>,
    },
}

/// An orchestrator or reflect loop, read back from its sub-jobs.
struct Loop<'c> {
    summary: TeamSummary,
    step: Step<'c>,
    /// The sub-jobs of the rounds that completed: the ones merged.
    kept: Vec<String>,
    last_synthesis: Option<&'c str>,
    last_score: f64,
    last_rationale: String,
}

impl<'c> Loop<'c> {
    fn read(facts: &'c CompositeFacts<'c>, team: &TeamSpec) -> Loop<'c> {
        let one_pass = team.mode() == TeamMode::Orchestrator;
        let max = if one_pass {
            1
        } else {
            team.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS)
        };
        let threshold = team
            .evaluator
            .as_ref()
            .and_then(|e| e.threshold)
            .unwrap_or(DEFAULT_THRESHOLD);
        let mut rounds: BTreeMap<u32, Round<'c>> = BTreeMap::new();
        for c in &facts.children {
            let name = own_name(facts, c.producer_id);
            let Some((n, step)) = name.split_once('/') else {
                continue;
            };
            let Ok(n) = n.parse::<u32>() else { continue };
            let round = rounds.entry(n).or_default();
            match step {
                "backoff" => round.backoff = Some(c),
                "plan" => round.plan = Some(c),
                "synthesis" => round.synthesis = Some(c),
                "evaluate" => round.evaluate = Some(c),
                _ => round.workers.push(c),
            }
        }
        let mut this = Loop {
            summary: TeamSummary::new(team.mode()),
            step: Step::Plan {
                round: 1,
                after: None,
            },
            kept: Vec::new(),
            last_synthesis: None,
            last_score: 0.0,
            last_rationale: String::new(),
        };
        let mut stall = StallCheck::default();
        let mut errors = 0;
        let mut anchor: Option<String> = None;
        let count = rounds.len();
        for (i, (&n, round)) in rounds.iter().enumerate() {
            let last = i + 1 == count;
            this.summary.round = n;
            let outcome = this.round_outcome(facts, team, round, threshold);
            match outcome {
                Outcome::Next(step) if last => {
                    this.step = step;
                    return this;
                }
                Outcome::Retry(jobs) if last => {
                    this.step = Step::Retry(jobs);
                    return this;
                }
                Outcome::Exhausted(why) => {
                    this.summary.notes.push(format!("round {n}: {why}"));
                    this.step = Step::Exit(ExitReason::Errors);
                    return this;
                }
                // An earlier round cannot be unfinished; read it as failed.
                Outcome::Next(_) | Outcome::Retry(_) => errors += 1,
                Outcome::Failed(why) => {
                    errors += 1;
                    this.summary.notes.push(format!("round {n} failed: {why}"));
                }
                Outcome::NothingAssigned if this.summary.iterations == 0 => {
                    errors += 1;
                    this.summary
                        .notes
                        .push(format!("round {n}: the orchestrator assigned no task"));
                }
                Outcome::NothingAssigned => {
                    this.kept
                        .extend(round.all().iter().map(|c| c.producer_id.to_owned()));
                    this.step = Step::Exit(ExitReason::GoalMet);
                    return this;
                }
                Outcome::Evaluated {
                    synthesis,
                    score,
                    rationale,
                    met,
                } => {
                    errors = 0;
                    this.summary.iterations += 1;
                    if let Some(&prev) = this.summary.scores.last() {
                        this.summary.trends.push(trend(prev, score).as_str());
                    }
                    this.summary.scores.push(score);
                    this.summary.synthesis = Some(synthesis.trim().to_owned());
                    this.kept
                        .extend(round.all().iter().map(|c| c.producer_id.to_owned()));
                    anchor = round
                        .last()
                        .map(|c| own_name(facts, c.producer_id).to_owned());
                    this.last_synthesis = Some(synthesis);
                    this.last_score = score;
                    this.last_rationale = rationale;
                    let stalled = stall.record(synthesis);
                    if stalled && !stall.stalled() {
                        this.summary.notes.push(format!(
                            "iteration {}: the synthesis repeats an earlier one",
                            this.summary.iterations
                        ));
                    }
                    let exit = if met {
                        Some(ExitReason::GoalMet)
                    } else if stall.stalled() {
                        Some(ExitReason::Stalled)
                    } else if this.summary.iterations >= max {
                        Some(if one_pass {
                            ExitReason::GoalMet
                        } else {
                            ExitReason::MaxIterations
                        })
                    } else {
                        None
                    };
                    if let Some(exit) = exit {
                        this.step = Step::Exit(exit);
                        return this;
                    }
                }
            }
            if errors >= MAX_ERRORS {
                this.step = Step::Exit(ExitReason::Errors);
                return this;
            }
            if last {
                this.step = if errors > 0 {
                    Step::Backoff {
                        round: n + 1,
                        after: anchor.clone(),
                    }
                } else {
                    Step::Plan {
                        round: n + 1,
                        after: anchor.clone(),
                    }
                };
            }
        }
        this
    }

    /// Where round `round` stands.
    fn round_outcome(
        &mut self,
        facts: &CompositeFacts<'_>,
        team: &TeamSpec,
        round: &Round<'c>,
        threshold: f64,
    ) -> Outcome<'c> {
        let n = self.summary.round;
        let all = round.all();
        let failed: Vec<&ChildFacts<'_>> = all
            .iter()
            .copied()
            .filter(|c| c.status == NodeStatus::Failed)
            .collect();
        if let Some(c) = failed.iter().find(|c| c.attempts >= MAX_ERRORS) {
            let name = own_name(facts, c.producer_id);
            return Outcome::Exhausted(format!("`{name}` failed {} times in a row", c.attempts));
        }
        if !failed.is_empty() {
            for c in &failed {
                let name = own_name(facts, c.producer_id);
                self.summary.notes.push(format!(
                    "round {n}: `{name}` failed (attempt {}); retried",
                    c.attempts
                ));
            }
            return Outcome::Retry(failed.iter().map(|c| c.producer_id.to_owned()).collect());
        }
        if let Some(why) = first_failure(facts, &all) {
            return Outcome::Failed(why);
        }
        let Some(plan) = round.plan else {
            let after = round
                .backoff
                .map(|b| own_name(facts, b.producer_id).to_owned());
            return Outcome::Next(Step::Plan { round: n, after });
        };
        let (tasks, unknown) = assigned(team, plan);
        for name in unknown {
            self.summary.notes.push(format!(
                "round {n}: the orchestrator assigned a task to `{name}`, who is not on the \
                 team; skipped"
            ));
        }
        if tasks.is_empty() {
            return Outcome::NothingAssigned;
        }
        if round.workers.is_empty() {
            return Outcome::Next(Step::Workers { round: n, plan });
        }
        let Some(synthesis) = round.synthesis else {
            return Outcome::Next(Step::Synthesis {
                round: n,
                workers: round.workers.clone(),
            });
        };
        let text = synthesis.output.unwrap_or("");
        let one_pass = team.mode() == TeamMode::Orchestrator;
        if one_pass && team.evaluator.is_none() {
            return Outcome::Evaluated {
                synthesis: text,
                score: 1.0,
                rationale: String::new(),
                met: true,
            };
        }
        if team.evaluator.is_none() {
            // Self-evaluation: the sentinel, and no sentinel counts as more to do.
            let sentinel = find_sentinel(text);
            if sentinel.is_none() {
                self.summary.notes.push(format!(
                    "round {n}: the synthesis has no sentinel line; read as more work needed"
                ));
            }
            let s = sentinel.unwrap_or(Sentinel::NeedsIteration);
            return Outcome::Evaluated {
                synthesis: text,
                score: s.score(),
                rationale: String::new(),
                met: s == Sentinel::Complete,
            };
        }
        let Some(evaluate) = round.evaluate else {
            return Outcome::Next(Step::Evaluate {
                round: n,
                synthesis,
            });
        };
        match parse_score(evaluate.output.unwrap_or("")) {
            Ok(e) => Outcome::Evaluated {
                synthesis: text,
                score: e.score,
                rationale: e.rationale,
                met: e.score >= threshold,
            },
            Err(why) => Outcome::Failed(why),
        }
    }

    /// The decision this loop comes to.
    fn next(self, facts: &CompositeFacts<'_>, team: &TeamSpec) -> Decision {
        let parent = &facts.job.producer_id;
        let mut summary = self.summary;
        match self.step {
            Step::Exit(reason) => {
                summary.exit_reason = Some(reason);
                let output = Some(summary.to_json());
                if reason == ExitReason::GoalMet {
                    Decision::Keep {
                        only: self.kept,
                        output,
                    }
                } else {
                    failed(format!("{}: {}", reason.as_str(), summary.failure_words()))
                }
            }
            Step::Retry(jobs) => Decision::Retry {
                jobs,
                after_seconds: BACKOFF_SECONDS,
            },
            Step::Backoff { round, after } => {
                let job = JobSpec::new(
                    format!("{parent}/{round}/backoff"),
                    format!("wait {BACKOFF_SECONDS} s before retrying"),
                    WorkSpec::Timer(TimerSpec {
                        seconds: Some(BACKOFF_SECONDS),
                        until: None,
                    }),
                )
                .depends_on(after.map(|a| format!("{parent}/{a}")));
                Decision::Spawn(vec![facts.sub_job(job)])
            }
            Step::Plan { round, after } => {
                let instructions = match self.last_synthesis {
                    Some(synthesis) => prompts::replanning(
                        team,
                        summary.iterations + 1,
                        &LastIteration {
                            synthesis,
                            score: self.last_score,
                            rationale: &self.last_rationale,
                        },
                    ),
                    None => prompts::planning(team),
                };
                let job = SubJob {
                    name: format!("{round}/plan"),
                    task: format!("plan iteration {}", summary.iterations + 1),
                    instructions,
                    runs: &lead_runs(team, false),
                    after: after.into_iter().collect(),
                    reads_only: true,
                };
                Decision::Spawn(vec![job.build(facts)])
            }
            Step::Workers { round, plan } => {
                let (tasks, unknown) = assigned(team, plan);
                for name in unknown {
                    tracing::warn!(team = %parent, worker = %name, "the orchestrator assigned a task to a worker the team does not have; skipped");
                }
                let plan_name = own_name(facts, plan.producer_id).to_owned();
                let jobs = tasks
                    .into_iter()
                    .map(|(w, task)| {
                        SubJob {
                            name: format!("{round}/{}", w.name),
                            task: format!("{}: {}", w.name, task_line(&task)),
                            instructions: prompts::worker(team, w, &task, &[]),
                            runs: &worker_runs(team, w),
                            after: vec![plan_name.clone()],
                            reads_only: true,
                        }
                        .build(facts)
                    })
                    .collect();
                Decision::Spawn(jobs)
            }
            Step::Synthesis { round, workers } => {
                let replies = replies_of(facts, &workers);
                let job = SubJob {
                    name: format!("{round}/synthesis"),
                    task: format!("synthesize iteration {}", summary.iterations + 1),
                    instructions: prompts::synthesis(team, &replies, team.evaluator.is_none()),
                    runs: &lead_runs(team, false),
                    after: workers
                        .iter()
                        .map(|w| own_name(facts, w.producer_id).to_owned())
                        .collect(),
                    reads_only: true,
                };
                Decision::Spawn(vec![job.build(facts)])
            }
            Step::Evaluate { round, synthesis } => {
                let job = SubJob {
                    name: format!("{round}/evaluate"),
                    task: format!("evaluate iteration {}", summary.iterations + 1),
                    instructions: prompts::evaluation(team, synthesis.output.unwrap_or("")),
                    runs: &lead_runs(team, true),
                    after: vec![own_name(facts, synthesis.producer_id).to_owned()],
                    reads_only: true,
                };
                Decision::Spawn(vec![job.build(facts)])
            }
        }
    }
}

/// Where a round stands.
enum Outcome<'c> {
    Next(Step<'c>),
    /// Sub-jobs of the round failed: run them again.
    Retry(Vec<String>),
    /// A sub-job failed [`MAX_ERRORS`] times in a row.
    Exhausted(String),
    Failed(String),
    NothingAssigned,
    Evaluated {
        synthesis: &'c str,
        score: f64,
        rationale: String,
        met: bool,
    },
}

/// The tasks the plan assigns to workers of the team (the first task of each worker), and
/// the names it wrote that match none.
fn assigned<'t>(
    team: &'t TeamSpec,
    plan: &ChildFacts<'_>,
) -> (Vec<(&'t WorkerSpec, String)>, Vec<String>) {
    let names = worker_names(team);
    let mut tasks: Vec<(&WorkerSpec, String)> = Vec::new();
    let mut unknown = Vec::new();
    for a in parse_assignments(plan.output.unwrap_or("")) {
        match match_worker(&a.worker, &names)
            .and_then(|n| team.workers.iter().find(|w| w.name == n))
        {
            Some(w) if tasks.iter().all(|(t, _)| t.name != w.name) => tasks.push((w, a.task)),
            Some(_) => {}
            None => unknown.push(a.worker),
        }
    }
    (tasks, unknown)
}

#[cfg(test)]
mod tests;
