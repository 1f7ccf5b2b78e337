//! A team's output (SPEC §13): why it ended, its iterations, scores and trend, and the final
//! synthesis — as JSON, shown while it runs (without an exit reason) and when it ends.

use orchestrator_core::plan::TeamMode;
use serde::Serialize;

/// Why a team's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// The evaluator's score reached the threshold, the orchestrator said
    /// `[[GROUP_REFLECT_COMPLETE]]` or assigned nothing more; for one-pass modes, every
    /// worker succeeded.
    GoalMet,
    /// `maxIterations` iterations ran without meeting the goal.
    MaxIterations,
    /// The synthesis repeated itself twice in a row.
    Stalled,
    /// Three rounds in a row failed.
    Errors,
    /// Canceled.
    Canceled,
}

impl ExitReason {
    /// Its name in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            ExitReason::GoalMet => "goal_met",
            ExitReason::MaxIterations => "max_iterations",
            ExitReason::Stalled => "stalled",
            ExitReason::Errors => "errors",
            ExitReason::Canceled => "canceled",
        }
    }
}

/// A team's output.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TeamSummary {
    /// The team's mode.
    pub mode: &'static str,
    /// Why it ended; `None` while it runs.
    pub exit_reason: Option<ExitReason>,
    /// Iterations completed.
    pub iterations: u32,
    /// The round in progress or last run (rounds count retries of failed iterations).
    #[serde(skip_serializing_if = "is_zero")]
    pub round: u32,
    /// The score of each completed iteration.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<f64>,
    /// The quality trend between consecutive iterations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trends: Vec<&'static str>,
    /// A best-of-N broadcast's pick.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub picked: Option<String>,
    /// The final synthesis (or the evaluator's pick reply).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthesis: Option<String>,
    /// What happened along the way: failed rounds, repeats, skipped assignments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl TeamSummary {
    pub(crate) fn new(mode: TeamMode) -> Self {
        TeamSummary {
            mode: mode.as_str(),
            exit_reason: None,
            iterations: 0,
            round: 0,
            scores: Vec::new(),
            trends: Vec::new(),
            picked: None,
            synthesis: None,
            notes: Vec::new(),
        }
    }

    /// The summary of a one-pass team (broadcast, sequential): one iteration.
    pub(crate) fn one_pass(mode: TeamMode) -> Self {
        TeamSummary {
            iterations: 1,
            ..TeamSummary::new(mode)
        }
    }

    /// As JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// A line for a failed team's reason: iterations and scores.
    pub(crate) fn failure_words(&self) -> String {
        let scores: Vec<String> = self.scores.iter().map(|s| format!("{s:.2}")).collect();
        let mut words = format!("after {} iteration(s)", self.iterations);
        if !scores.is_empty() {
            words.push_str(&format!(", scores {}", scores.join(", ")));
        }
        if let Some(last) = self.notes.last() {
            words.push_str(&format!("; {last}"));
        }
        words
    }
}
