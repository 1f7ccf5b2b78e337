//! The prompts of a team's members (seed 002): the orchestrator's planning and re-planning
//! prompts, the worker's prompt with the original request, the synthesis with or without
//! self-evaluation, and the evaluator's.

use std::fmt::Write as _;

use orchestrator_core::plan::{TeamSpec, WorkerSpec};

use crate::rules::sentinel::{COMPLETE, NEEDS_ITERATION};
use crate::subjob::first_line;

/// One worker's reply, for the prompts that show them.
pub(crate) struct Reply<'a> {
    pub(crate) worker: &'a str,
    pub(crate) text: &'a str,
}

/// What the last iteration ended with, for the re-planning prompt.
pub(crate) struct LastIteration<'a> {
    pub(crate) synthesis: &'a str,
    pub(crate) score: f64,
    pub(crate) rationale: &'a str,
}

fn roster(team: &TeamSpec) -> String {
    let mut out = String::new();
    for w in &team.workers {
        let specialty = w
            .system_prompt
            .as_deref()
            .map(first_line)
            .unwrap_or("a general-purpose worker");
        let _ = writeln!(out, "- `{}`: {specialty}", w.name);
    }
    out
}

const ASSIGN_RULES: &str =
    "Assign each task on its own line as `@worker:<name> <task>`. A task may \
continue over several lines; it ends at the next `@worker:`, at a line `@end`, or at the end of \
your reply. Assign only to the workers listed, give each worker at most one task, and do not edit \
files yourself: the workers do, each in its own copy of the repository, and their changes are \
merged.";

/// The orchestrator's planning prompt of the first iteration.
pub(crate) fn planning(team: &TeamSpec) -> String {
    let mut p = format!(
        "You are the orchestrator of a team of AI coding agents working on one git repository.\n\
         Plan the work for the request below and assign it to your workers.\n\n\
         ## Request\n{}\n\n## Workers\n{}",
        team.prompt.trim(),
        roster(team)
    );
    if let Some(routing) = team.routing.as_deref().filter(|r| !r.trim().is_empty()) {
        let _ = write!(p, "\n## Routing\n{}\n", routing.trim());
    }
    let _ = write!(p, "\n{ASSIGN_RULES}\n");
    p
}

/// The orchestrator's prompt of a later iteration, after `last`.
pub(crate) fn replanning(team: &TeamSpec, iteration: u32, last: &LastIteration<'_>) -> String {
    let mut p = format!(
        "You are the orchestrator of a team of AI coding agents working on one git repository.\n\
         This is iteration {iteration}. The last iteration's result was judged {:.2} of 1.0\n\
         ({}). The repository now holds every change made so far.\n\n\
         ## Request\n{}\n\n## Last synthesis\n{}\n\n## Workers\n{}",
        last.score,
        if last.rationale.is_empty() {
            "no rationale given"
        } else {
            last.rationale
        },
        team.prompt.trim(),
        last.synthesis.trim(),
        roster(team)
    );
    if let Some(routing) = team.routing.as_deref().filter(|r| !r.trim().is_empty()) {
        let _ = write!(p, "\n## Routing\n{}\n", routing.trim());
    }
    let _ = write!(
        p,
        "\nAssign what is still missing. If the request is fully met, assign nothing and say \
         so.\n\n{ASSIGN_RULES}\n"
    );
    p
}

/// A worker's prompt: its specialty first, then the team's shared decisions, the original
/// request and its task.
pub(crate) fn worker(team: &TeamSpec, w: &WorkerSpec, task: &str, earlier: &[Reply<'_>]) -> String {
    let mut p = match w.system_prompt.as_deref() {
        Some(s) => format!("{}\n\n", s.trim()),
        None => format!(
            "You are `{}`, a worker agent of a team of AI coding agents.\n\n",
            w.name
        ),
    };
    if let Some(d) = team.decisions.as_deref().filter(|d| !d.trim().is_empty()) {
        let _ = write!(p, "## Team decisions\n{}\n\n", d.trim());
    }
    let _ = write!(p, "## The team's request\n{}\n\n", team.prompt.trim());
    if !earlier.is_empty() {
        p.push_str("## What the workers before you did (their changes are in your files)\n");
        for r in earlier {
            let _ = write!(p, "### {}\n{}\n\n", r.worker, r.text.trim());
        }
    }
    let _ = write!(
        p,
        "## Your task\n{}\n\nDo your task in this repository's files; other workers do theirs. \
         End with a short report of what you did.\n",
        task.trim()
    );
    p
}

fn replies(p: &mut String, replies: &[Reply<'_>]) {
    for r in replies {
        let _ = write!(p, "### {}\n{}\n\n", r.worker, r.text.trim());
    }
}

/// The orchestrator's synthesis of the workers' replies; without an evaluator it judges
/// itself with a sentinel line.
pub(crate) fn synthesis(team: &TeamSpec, replies_: &[Reply<'_>], evaluates_itself: bool) -> String {
    let mut p = format!(
        "You are the orchestrator of a team of AI coding agents. Your workers have finished; \
         their changes are merged into the files in front of you.\n\n## Request\n{}\n\n\
         ## Worker reports\n",
        team.prompt.trim()
    );
    replies(&mut p, replies_);
    p.push_str(
        "Synthesize one answer to the request from their work: what was done, what is still \
         missing. Do not edit files.\n",
    );
    if evaluates_itself {
        let _ = write!(
            p,
            "\nThen judge whether the request is fully met. End your reply with a line holding \
             only `{COMPLETE}` if it is, or only `{NEEDS_ITERATION}` if more work is needed.\n"
        );
    }
    p
}

/// The evaluator's prompt for a synthesis.
pub(crate) fn evaluation(team: &TeamSpec, synthesis: &str) -> String {
    format!(
        "You are an independent evaluator of a team of AI coding agents. Judge how well the \
         request below is met by the team's result (its changes are in the files in front of \
         you) and its synthesis. Do not edit files.\n\n## Request\n{}\n\n## Synthesis\n{}\n\n\
         Reply with a line `Score: <0.0 to 1.0>` (1.0: fully met) and a line \
         `Rationale: <why>`.\n",
        team.prompt.trim(),
        synthesis.trim()
    )
}

/// The evaluator's prompt for picking the best of a broadcast's candidates.
pub(crate) fn pick(team: &TeamSpec, candidates: &[Reply<'_>]) -> String {
    let mut p = format!(
        "You are an independent evaluator. Several workers each answered the request below on \
         their own (each on its own branch; you see only their reports). Pick the best one.\n\n\
         ## Request\n{}\n\n## Candidates\n",
        team.prompt.trim()
    );
    replies(&mut p, candidates);
    p.push_str(
        "Reply with a line `Best: <worker name>` naming exactly one candidate and a line \
         `Rationale: <why>`. Do not edit files.\n",
    );
    p
}
