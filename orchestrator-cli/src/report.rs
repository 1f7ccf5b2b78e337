//! What the commands print: the `--json` documents of SPEC §5 and their human forms.

use std::fmt::Write;

use orchestrator_core::report::Blockers;
use orchestrator_core::repository::PlanSummary;
use orchestrator_core::state::PlanRecord;
use orchestrator_core::view::label_of;
use orchestrator_core::PlanStatus;
use serde_json::{json, Value};

use crate::error::Exit;

/// The exit code a plan's status calls for.
pub fn exit_for(status: PlanStatus) -> Exit {
    match status {
        PlanStatus::Succeeded => Exit::Ok,
        _ => Exit::PlanNotSucceeded,
    }
}

/// The `--json` document of `run`, `status`, `retry`, `resume`, `pause`, `cancel`, `recover`
/// and `archive`: the plan's status (SPEC §5 shape, shared with the MCP tools) with its
/// `timeline`.
pub use orchestrator_core::view::status_json as plan_json;

/// The `--json` document of `list`: `{"plans":[{"planId","name","status","createdAt"}]}`.
pub fn list_json(plans: &[PlanSummary], damaged: &[(String, String)]) -> Value {
    json!({
        "plans": plans.iter().map(|p| json!({
            "planId": p.plan_id,
            "name": p.name,
            "status": p.status.as_str(),
            "createdAt": p.created_at,
        })).collect::<Vec<_>>(),
        "damaged": damaged.iter().map(|(id, e)| json!({"planId": id, "error": e})).collect::<Vec<_>>(),
    })
}

/// A plan as a table for people.
pub fn plan_text(record: &PlanRecord) -> String {
    let s = &record.state;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plan {} ({})  {}",
        record.spec.name,
        s.id,
        record.status()
    );
    if let Some(target) = &s.target_branch {
        let base = s.base_commit.as_deref().map(short).unwrap_or("-");
        let _ = writeln!(out, "target branch {target} (base {base})");
    }
    let c = s.counts();
    let _ = writeln!(
        out,
        "{} jobs: {} succeeded, {} failed, {} blocked, {} canceled, {} running, {} waiting",
        s.nodes.len(),
        c.succeeded,
        c.failed,
        c.blocked,
        c.canceled,
        c.active,
        c.pending + c.ready
    );
    let mut blockers = Blockers::new(record);
    let rows: Vec<[String; 5]> = s
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let label = label_of(record, i);
            let mut error = node.extra.error.clone().unwrap_or_default();
            let blockers = blockers.names(i);
            if !blockers.is_empty() {
                error = format!("waits on failed {}", blockers.join(", "));
            }
            [
                label.to_owned(),
                node.status.to_string(),
                node.attempts.len().to_string(),
                node.extra
                    .commit
                    .as_deref()
                    .map(short)
                    .unwrap_or("")
                    .to_owned(),
                first_line(&error),
            ]
        })
        .collect();
    let header = ["JOB", "STATUS", "ATTEMPTS", "COMMIT", "ERROR"].map(String::from);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::from("  ");
        for (w, cell) in widths.iter().zip(row.iter()) {
            let _ = write!(line, "{cell:<w$}  ", w = *w);
        }
        line.push_str(&row[4]);
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// What to do next, for a plan that stopped with `status`.
pub fn hint(record: &PlanRecord, repo_arg: &str) -> Option<String> {
    let id = &record.state.id;
    match record.status() {
        PlanStatus::Succeeded => record.state.target_branch.as_ref().map(|t| {
            format!(
                "result on branch `{t}`: git -C {} log --oneline {t}",
                shell_quote(&record.state.repo.display().to_string())
            )
        }),
        PlanStatus::Failed => Some(format!(
            "see a job's log: orchestrator logs {id} JOB{repo_arg}\n\
             retry the failed jobs: orchestrator retry {id}{repo_arg}"
        )),
        PlanStatus::Canceled => Some(format!(
            "recover it to run it again: orchestrator recover {id}{repo_arg}"
        )),
        PlanStatus::Paused | PlanStatus::Pausing | PlanStatus::Running | PlanStatus::Pending => {
            Some(format!("continue it: orchestrator resume {id}{repo_arg}"))
        }
        _ => None,
    }
}

/// A plan listing for people.
pub fn list_text(plans: &[PlanSummary]) -> String {
    let mut out = String::new();
    if plans.is_empty() {
        out.push_str("no plans\n");
        return out;
    }
    let name_w = plans
        .iter()
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "{:<36}  {:<name_w$}  {:<10}  CREATED",
        "PLAN", "NAME", "STATUS"
    );
    for p in plans {
        let _ = writeln!(
            out,
            "{:<36}  {:<name_w$}  {:<10}  {}",
            p.plan_id.as_str(),
            p.name,
            p.status.as_str(),
            utc_time(p.created_at)
        );
    }
    out
}

/// The first 10 characters of a commit id.
pub fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_owned()
}

/// Quotes a path for a shell command line when it needs it.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `2024-05-01 12:34:56Z` from milliseconds since the Unix epoch.
pub fn utc_time(millis: u64) -> String {
    i64::try_from(millis)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(
            || format!("{millis} ms after the epoch"),
            |t| t.strftime("%Y-%m-%d %H:%M:%SZ").to_string(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times() {
        assert_eq!(utc_time(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc_time(951_782_400_000), "2000-02-29 00:00:00Z");
        assert_eq!(utc_time(1_700_000_000_123), "2023-11-14 22:13:20Z");
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/tmp/a-b"), "/tmp/a-b");
        assert_eq!(shell_quote("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
