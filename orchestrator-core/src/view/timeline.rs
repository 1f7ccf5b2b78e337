//! A plan's timeline: every phase of every attempt with its start and end, from the stored
//! phase records, as data ([`timeline`], the status JSON's `timeline`) and as a Mermaid gantt
//! chart ([`gantt`], `orchestrator graph PLAN --format gantt`).

use std::fmt::Write;

use serde::Serialize;

use crate::ids::{Millis, NodeId};
use crate::state::{Phase, PhaseStatus, PlanRecord};

/// One phase of one attempt of one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineEntry {
    /// The node's label: its producerId, or `snapshot-validation`.
    pub producer_id: String,
    /// The node's id.
    pub node_id: NodeId,
    /// The attempt's number (1-based).
    pub attempt: u32,
    /// The phase.
    pub phase: Phase,
    /// When the phase started, in milliseconds since the Unix epoch.
    pub started_at: Millis,
    /// When it ended, in milliseconds since the Unix epoch; `None` while it runs.
    pub ended_at: Option<Millis>,
    /// How it ended (or `running`).
    pub status: PhaseStatus,
}

/// Every phase record of `record`, by node in plan order, then attempt, then phase in the
/// order run.
///
/// ```
/// use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
/// use orchestrator_core::state::PlanRecord;
/// let spec = PlanSpec::new("p").isolation(Isolation::None)
///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")));
/// let record = PlanRecord::new("id".into(), spec, ".".into(), 1, 0);
/// assert!(orchestrator_core::view::timeline(&record).is_empty()); // nothing ran yet
/// ```
pub fn timeline(record: &PlanRecord) -> Vec<TimelineEntry> {
    let mut out = Vec::new();
    for (n, node) in record.state.nodes.iter().enumerate() {
        let label = super::label_of(record, n);
        for attempt in &node.attempts {
            for p in &attempt.phases {
                out.push(TimelineEntry {
                    producer_id: label.to_owned(),
                    node_id: node.id.clone(),
                    attempt: attempt.number,
                    phase: p.phase,
                    started_at: p.started_at,
                    ended_at: p.ended_at,
                    status: p.status,
                });
            }
        }
    }
    out
}

/// A Mermaid gantt chart of `record`'s timeline: a section per job (in the order they first
/// started), one bar per phase of each attempt, named `<phase> (attempt <n>)`. Times are epoch
/// milliseconds (`dateFormat x`); succeeded phases are `done`, failed ones `crit`, running
/// ones `active` and end at `now`. Skipped phases are left out (they did nothing and have no
/// length).
///
/// ```
/// use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
/// use orchestrator_core::state::PlanRecord;
/// let spec = PlanSpec::new("p").isolation(Isolation::None)
///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")));
/// let record = PlanRecord::new("id".into(), spec, ".".into(), 1, 0);
/// let chart = orchestrator_core::view::gantt(&record, 0);
/// assert!(chart.starts_with("gantt\n"));
/// assert!(chart.contains("dateFormat x"));
/// ```
pub fn gantt(record: &PlanRecord, now: Millis) -> String {
    let entries = timeline(record);
    let mut out = String::from("gantt\n");
    let _ = writeln!(
        out,
        "  title {} ({})",
        text(&record.spec.name),
        record.status()
    );
    out.push_str("  dateFormat x\n  axisFormat %H:%M:%S\n  todayMarker off\n");
    // Sections in the order the jobs first started, so the chart reads top-down like the run.
    let mut sections: Vec<(&str, Millis, Vec<&TimelineEntry>)> = Vec::new();
    for e in entries.iter().filter(|e| e.status != PhaseStatus::Skipped) {
        match sections
            .iter_mut()
            .find(|(id, ..)| *id == e.node_id.as_str())
        {
            Some((_, first, bars)) => {
                *first = (*first).min(e.started_at);
                bars.push(e);
            }
            None => sections.push((e.node_id.as_str(), e.started_at, vec![e])),
        }
    }
    sections.sort_by_key(|(_, first, _)| *first);
    let mut task = 0usize;
    for (_, _, bars) in &sections {
        let Some(first) = bars.first() else { continue };
        let _ = writeln!(out, "  section {}", text(&first.producer_id));
        for e in bars {
            let tag = match e.status {
                PhaseStatus::Succeeded => "done, ",
                PhaseStatus::Failed => "crit, ",
                PhaseStatus::Running => "active, ",
                _ => "",
            };
            let end = e.ended_at.unwrap_or(now);
            // A bar needs some length to be drawn; phases faster than a millisecond get one.
            let end = end.max(e.started_at + 1);
            let _ = writeln!(
                out,
                "    {} (attempt {}) :{tag}t{task}, {}, {end}",
                e.phase, e.attempt, e.started_at
            );
            task += 1;
        }
    }
    out
}

/// Text safe in a gantt title or section line: `:` separates a task's name from its data,
/// `;` ends a statement and `#` starts an entity code in Mermaid.
fn text(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ':' | ';' | '#' | '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}
