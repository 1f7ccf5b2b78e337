//! The JSON documents hosts show for plans and jobs: the CLI's `--json` output (SPEC §5) and
//! the MCP tools' results (SPEC §6) are built here, so both speak the same shape.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::engine::SNAPSHOT_LABEL;
use crate::state::{NodeState, NodeStatus, PlanRecord};

/// A plan's status document: `{"planId","name","status","targetBranch","jobs":[...]}` with the
/// jobs in plan order (see [`job_json`]), the snapshot-validation node apart in
/// `snapshotValidation`, the groups with their derived status in `groups`
/// (`[{"path","status"}]`), and more facts (`counts`, branches, times).
///
/// ```
/// use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
/// use orchestrator_core::state::PlanRecord;
/// let spec = PlanSpec::new("p").isolation(Isolation::None)
///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")));
/// let graph = PlanGraph::build(&spec).unwrap();
/// let record = PlanRecord::new("id".into(), spec, ".".into(), graph.node_count(), 0);
/// let doc = orchestrator_core::report::plan_json(&record);
/// assert_eq!(doc["jobs"][0]["producerId"], "aaa");
/// assert_eq!(doc["status"], "pending");
/// ```
pub fn plan_json(record: &PlanRecord) -> Value {
    let s = &record.state;
    // Blockers of every job in one pass: per job, the report would walk shared ancestors
    // again and again (quadratic when a failure blocks a long chain).
    let mut blockers = Blockers::new(record);
    let jobs: Vec<Value> = (0..record.spec.jobs.len().min(s.nodes.len()))
        .map(|n| job_doc(record, n, &blockers.names(n)))
        .collect();
    let snapshot = (s.nodes.len() > record.spec.jobs.len())
        .then(|| job_doc(record, record.spec.jobs.len(), &[]));
    let c = s.counts();
    json!({
        "planId": s.id,
        "name": record.spec.name,
        "status": record.status().as_str(),
        "targetBranch": s.target_branch,
        "jobs": jobs,
        "groups": groups_json(record),
        "snapshotValidation": snapshot,
        "snapshotBranch": s.snapshot_branch,
        "baseCommit": s.base_commit,
        "repo": s.repo,
        "isolation": record.spec.isolation,
        "options": options_json(&record.spec),
        "usage": crate::usage::Usage::of_plan(record),
        "createdAt": s.created_at,
        "startedAt": s.started_at,
        "endedAt": s.ended_at,
        "counts": {
            "pending": c.pending + c.ready,
            "running": c.active,
            "succeeded": c.succeeded,
            "failed": c.failed,
            "blocked": c.blocked,
            "canceled": c.canceled,
        },
    })
}

/// Every group path of the plan's jobs (flattened nested groups and flat `group` paths alike,
/// enclosing groups included) with its derived status (SPEC §2), sorted by path.
fn groups_json(record: &PlanRecord) -> Value {
    let jobs = record.spec.jobs.iter().enumerate().map(|(n, job)| {
        let status = record
            .state
            .nodes
            .get(n)
            .map_or(NodeStatus::Pending, |s| s.status);
        (job.extra.group.as_deref(), status)
    });
    let groups: Vec<Value> = crate::plan::group_statuses(jobs)
        .into_iter()
        .map(|(path, status)| json!({"path": path, "status": status.as_str()}))
        .collect();
    Value::Array(groups)
}

/// The plan's options as given (the plan format's plan-level fields other than name and jobs),
/// with the values of secret env variables of `verifyRi` and `worktreeInit` redacted.
fn options_json(spec: &crate::plan::PlanSpec) -> Value {
    let mut doc = json!({
        "baseBranch": spec.base_branch,
        "targetBranch": spec.target_branch,
        "maxParallel": spec.max_parallel,
        "cleanUpSuccessfulWork": spec.cleans_up(),
        "additionalSymlinkDirs": spec.additional_symlink_dirs,
        "startPaused": spec.start_paused,
        "verifyRi": spec.verify_ri,
        "envKeys": spec.env.keys().collect::<Vec<_>>(),
        "resumeAfterPlan": spec.resume_after_plan,
        "worktreeInit": spec.worktree_init,
    });
    crate::redact::redact_env_json(&mut doc, &crate::redact::SecretNames::from_env());
    doc
}

/// One job of a plan: `{"producerId","name","status","attempts","commit","error"}` plus its
/// node id, task, dependencies, group, failed phase and reason, worktree, `output` (SPEC §12,
/// `null` when it has none) and `blockedBy`.
pub fn job_json(record: &PlanRecord, n: usize) -> Value {
    job_doc(record, n, &blocked_by(record, n))
}

fn job_doc(record: &PlanRecord, n: usize, blockers: &[String]) -> Value {
    let Some(node) = record.state.nodes.get(n) else {
        return Value::Null;
    };
    let mut doc = node_json(node);
    match record.spec.jobs.get(n) {
        Some(job) => {
            doc["producerId"] = json!(job.producer_id);
            doc["name"] = json!(job.display_name());
            doc["task"] = json!(job.task);
            doc["dependencies"] = json!(job.dependencies);
            if let Some(group) = &job.extra.group {
                doc["group"] = json!(group);
            }
            // A sub-job (SPEC §12) names the composite job it belongs to.
            if let Some(parent) = &job.extra.parent {
                doc["parent"] = json!(parent);
            }
            if !blockers.is_empty() {
                doc["blockedBy"] = json!(blockers);
            }
        }
        None => {
            doc["producerId"] = json!(SNAPSHOT_LABEL);
            doc["name"] = json!(SNAPSHOT_LABEL);
        }
    }
    doc
}

fn node_json(node: &NodeState) -> Value {
    let last = node.last_attempt();
    let usage: Vec<&Value> = node
        .attempts
        .iter()
        .filter_map(|a| a.extra.metrics.as_deref())
        .collect();
    let mut doc = json!({
        "jobId": node.id,
        "nodeId": node.id,
        "status": node.status.as_str(),
        "attempts": node.attempts.len(),
        "commit": node.extra.commit,
        "error": node.extra.error,
        "failedPhase": last.and_then(|a| a.extra.failed_phase),
        "failureReason": last.and_then(|a| a.extra.failure_reason),
        "worktree": node.extra.worktree,
        "output": node.output(),
        "waitingFor": node.extra.waiting.as_ref().map(|w| w.waiting_for.as_str()),
    });
    if let Some(waiting) = &node.extra.waiting {
        doc["waiting"] = json!(waiting);
    }
    // Runner metrics (agent usage: tokens, cost, turns, session): the last attempt's, and each
    // attempt's in order.
    if let Some(latest) = usage.last() {
        doc["usage"] = (*latest).clone();
        doc["usageByAttempt"] = json!(node
            .attempts
            .iter()
            .map(|a| a.extra.metrics.as_deref().cloned().unwrap_or(Value::Null))
            .collect::<Vec<_>>());
    }
    doc
}

/// The failed (or canceled) jobs a blocked job waits on: its nearest such ancestors, sorted.
/// For every job of a plan at once, [`Blockers`] shares the work between jobs.
pub fn blocked_by(record: &PlanRecord, n: usize) -> Vec<String> {
    Blockers::new(record).names(n)
}

/// The blockers of a plan's jobs ([`blocked_by`]), each computed once and shared by the
/// blocked jobs downstream of it.
pub struct Blockers<'a> {
    record: &'a PlanRecord,
    by_id: HashMap<&'a str, usize>,
    /// Per job, once computed: the indices of its blockers, sorted.
    memo: Vec<Option<Vec<usize>>>,
}

impl<'a> Blockers<'a> {
    /// Ready to answer for the jobs of `record`.
    pub fn new(record: &'a PlanRecord) -> Self {
        let by_id = record
            .spec
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.producer_id.as_str(), i))
            .collect();
        Blockers {
            record,
            by_id,
            memo: vec![None; record.spec.jobs.len()],
        }
    }

    /// The producerIds job `n` waits on (empty unless it is blocked), sorted.
    pub fn names(&mut self, n: usize) -> Vec<String> {
        let jobs = &self.record.spec.jobs;
        let mut names: Vec<String> = self
            .indices(n)
            .iter()
            .map(|&d| jobs[d].producer_id.clone())
            .collect();
        names.sort();
        names
    }

    fn status(&self, n: usize) -> Option<NodeStatus> {
        self.record.state.nodes.get(n).map(|s| s.status)
    }

    fn deps(&self, n: usize) -> impl Iterator<Item = usize> + '_ {
        self.record.spec.jobs[n]
            .dependencies
            .iter()
            .filter_map(|d| self.by_id.get(d.as_str()).copied())
    }

    /// Post-order over blocked ancestors (iterative: chains can be 100k jobs long).
    fn indices(&mut self, n: usize) -> Vec<usize> {
        if n >= self.memo.len() || self.status(n) != Some(NodeStatus::Blocked) {
            return Vec::new();
        }
        let mut stack = vec![(n, false)];
        while let Some((i, expanded)) = stack.pop() {
            if self.memo[i].is_some() {
                continue;
            }
            if !expanded {
                stack.push((i, true));
                let pending: Vec<usize> = self
                    .deps(i)
                    .filter(|&d| {
                        self.status(d) == Some(NodeStatus::Blocked) && self.memo[d].is_none()
                    })
                    .collect();
                stack.extend(pending.into_iter().map(|d| (d, false)));
                continue;
            }
            let mut found = Vec::new();
            for d in self.deps(i) {
                match self.status(d) {
                    Some(NodeStatus::Failed | NodeStatus::Canceled) => found.push(d),
                    Some(NodeStatus::Blocked) => {
                        found.extend(self.memo[d].iter().flatten().copied());
                    }
                    _ => {}
                }
            }
            found.sort_unstable();
            found.dedup();
            self.memo[i] = Some(found);
        }
        self.memo[n].clone().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};

    #[test]
    fn blockers_are_the_nearest_failed_or_canceled_ancestors() {
        // f1 (failed) -> b1 -> b2 ; c1 (canceled) -> b2 ; ok -> b3 (b3 blocked through b1).
        let job = |id: &str, deps: &[&str]| {
            JobSpec::new(id, id, WorkSpec::shell("true")).depends_on(deps.iter().copied())
        };
        let spec = PlanSpec::new("p")
            .isolation(Isolation::None)
            .job(job("fff", &[]))
            .job(job("ccc", &[]))
            .job(job("okk", &[]))
            .job(job("bb1", &["fff"]))
            .job(job("bb2", &["bb1", "ccc"]))
            .job(job("bb3", &["okk", "bb1"]));
        let nodes = PlanGraph::build(&spec).expect("graph").node_count();
        let mut record = PlanRecord::new("p".into(), spec, ".".into(), nodes, 0);
        let statuses = [
            NodeStatus::Failed,
            NodeStatus::Canceled,
            NodeStatus::Succeeded,
            NodeStatus::Blocked,
            NodeStatus::Blocked,
            NodeStatus::Blocked,
        ];
        for (node, status) in record.state.nodes.iter_mut().zip(statuses) {
            node.status = status;
        }
        let mut all = Blockers::new(&record);
        let names: Vec<Vec<String>> = (0..6).map(|n| all.names(n)).collect();
        assert_eq!(
            names,
            [
                vec![],
                vec![],
                vec![],
                vec!["fff".to_owned()],
                vec!["ccc".to_owned(), "fff".to_owned()],
                vec!["fff".to_owned()],
            ]
        );
        assert_eq!(blocked_by(&record, 4), names[4]);
        assert_eq!(
            plan_json(&record)["jobs"][4]["blockedBy"],
            json!(["ccc", "fff"])
        );
    }
}
