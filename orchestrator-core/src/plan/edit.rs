//! Changing a plan's jobs and options after it was created: scaffolding (jobs added one by one
//! before the plan runs) and reshaping a live plan.
//!
//! [`apply_edits`] is the pure part: it turns a spec and a list of [`PlanEdit`]s into a new spec,
//! refusing edits that would rewrite history. A job's *status* decides what may change:
//!
//! | status                          | remove | dependencies | work, checks, task, env | name, group |
//! |---------------------------------|--------|--------------|-------------------------|-------------|
//! | pending, ready, blocked, (new)  | yes    | yes          | yes                     | yes         |
//! | failed                          | yes    | no           | yes (used by the retry) | yes         |
//! | scheduled, running, succeeded, canceled, completed_split | no | no | no          | yes         |
//!
//! Jobs that depend on a removed job inherit its dependencies, so the order the removed job
//! imposed between them stays. The engine ([`crate::Orchestrator::edit_plan`]) then validates
//! the result like a new plan and re-derives the status of every job that has not started.

use std::fmt;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::plan::{Env, JobSpec, PlanSpec, WorkSpec};
use crate::state::NodeStatus;

/// One change to a plan. Serialized (tagged by `op`) into the plan's journal, which replays
/// it: an edit costs the store the size of the edit, not of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PlanEdit {
    /// Adds a job (its `dependencies` name existing or earlier-added jobs).
    AddJob {
        /// The new job.
        job: Box<JobSpec>,
    },
    /// Removes a job; jobs depending on it inherit its dependencies.
    RemoveJob {
        /// producerId of the job.
        job: String,
    },
    /// Replaces a job's dependencies.
    UpdateDeps {
        /// producerId of the job.
        job: String,
        /// New dependencies (producerIds).
        dependencies: Vec<String>,
    },
    /// Inserts a new job before `before`: it takes over `before`'s dependencies (plus its own),
    /// and `before` then depends on it alone.
    AddBefore {
        /// The new job.
        job: Box<JobSpec>,
        /// producerId of the existing job that will wait for it.
        before: String,
    },
    /// Inserts a new job after `after`: it depends on `after` (plus its own dependencies), and
    /// every job that depended on `after` depends on the new job instead.
    AddAfter {
        /// The new job.
        job: Box<JobSpec>,
        /// producerId of the existing job it follows.
        after: String,
    },
    /// Changes some fields of a job.
    UpdateJob {
        /// producerId of the job.
        job: String,
        /// Fields to change.
        update: Box<JobUpdate>,
    },
    /// Changes plan options.
    UpdatePlan {
        /// Options to change.
        update: Box<PlanUpdate>,
    },
    /// Adds sub-jobs to a composite job that is running or split (the engine's own edit, when
    /// a [`crate::composite::Controller`] decides so): each gets `parent` set, and the
    /// composite job comes to depend on them.
    AddSubJobs {
        /// producerId of the composite job.
        parent: String,
        /// The sub-jobs, named `<parent>/<name>`.
        jobs: Vec<JobSpec>,
    },
}

impl PlanEdit {
    /// The operation's name as the MCP tools spell it.
    pub fn op(&self) -> &'static str {
        match self {
            PlanEdit::AddJob { .. } => "add_job",
            PlanEdit::RemoveJob { .. } => "remove_job",
            PlanEdit::UpdateDeps { .. } => "update_deps",
            PlanEdit::AddBefore { .. } => "add_before",
            PlanEdit::AddAfter { .. } => "add_after",
            PlanEdit::UpdateJob { .. } => "update_job",
            PlanEdit::UpdatePlan { .. } => "update_plan",
            PlanEdit::AddSubJobs { .. } => "add_sub_jobs",
        }
    }
}

/// Fields of a job to change; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobUpdate {
    /// New task description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// New display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<WorkSpec>,
    /// New prechecks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prechecks: Option<WorkSpec>,
    /// New postchecks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postchecks: Option<WorkSpec>,
    /// New agent instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// New dependencies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<String>>,
    /// New environment (replaces the job's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Env>,
    /// New `expectsNoChanges`.
    #[serde(
        default,
        alias = "expects_no_changes",
        skip_serializing_if = "Option::is_none"
    )]
    pub expects_no_changes: Option<bool>,
    /// New `autoHeal`.
    #[serde(default, alias = "auto_heal", skip_serializing_if = "Option::is_none")]
    pub auto_heal: Option<bool>,
    /// New group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// New base branch (root jobs).
    #[serde(
        default,
        alias = "base_branch",
        skip_serializing_if = "Option::is_none"
    )]
    pub base_branch: Option<String>,
}

impl JobUpdate {
    /// Whether only display fields (`name`, `group`) change, which is allowed at any time.
    fn is_cosmetic(&self) -> bool {
        let JobUpdate {
            task,
            name: _,
            work,
            prechecks,
            postchecks,
            instructions,
            dependencies,
            env,
            expects_no_changes,
            auto_heal,
            group: _,
            base_branch,
        } = self;
        task.is_none()
            && work.is_none()
            && prechecks.is_none()
            && postchecks.is_none()
            && instructions.is_none()
            && dependencies.is_none()
            && env.is_none()
            && expects_no_changes.is_none()
            && auto_heal.is_none()
            && base_branch.is_none()
    }

    fn apply(&self, job: &mut JobSpec) {
        let u = self.clone();
        if let Some(v) = u.task {
            job.task = v;
        }
        if u.name.is_some() {
            job.name = u.name;
        }
        if let Some(v) = u.work {
            job.work = v;
        }
        if u.prechecks.is_some() {
            job.extra.make_mut().prechecks = u.prechecks.map(Box::new);
        }
        if u.postchecks.is_some() {
            job.extra.make_mut().postchecks = u.postchecks.map(Box::new);
        }
        if u.instructions.is_some() {
            job.extra.make_mut().instructions = u.instructions;
        }
        if let Some(v) = u.dependencies {
            job.dependencies = v;
        }
        if let Some(v) = u.env {
            job.extra.make_mut().env = v;
        }
        if let Some(v) = u.expects_no_changes {
            job.extra.make_mut().expects_no_changes = v;
        }
        if u.auto_heal.is_some() {
            job.extra.make_mut().auto_heal = u.auto_heal;
        }
        if u.group.is_some() {
            job.extra.make_mut().group = u.group;
        }
        if u.base_branch.is_some() {
            job.extra.make_mut().base_branch = u.base_branch;
        }
    }
}

/// Plan options to change; `None` leaves an option as it is. Branches can change only before
/// the plan first starts (they are pinned then).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanUpdate {
    /// New name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// New `maxParallel` (0 = no plan limit).
    #[serde(
        default,
        alias = "max_parallel",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_parallel: Option<u32>,
    /// New plan environment (replaces it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Env>,
    /// New `verifyRi`.
    #[serde(default, alias = "verify_ri", skip_serializing_if = "Option::is_none")]
    pub verify_ri: Option<WorkSpec>,
    /// New `cleanUpSuccessfulWork`.
    #[serde(
        default,
        alias = "clean_up_successful_work",
        skip_serializing_if = "Option::is_none"
    )]
    pub clean_up_successful_work: Option<bool>,
    /// New `additionalSymlinkDirs`.
    #[serde(
        default,
        alias = "additional_symlink_dirs",
        skip_serializing_if = "Option::is_none"
    )]
    pub additional_symlink_dirs: Option<Vec<String>>,
    /// New `worktreeInit`.
    #[serde(
        default,
        alias = "worktree_init",
        skip_serializing_if = "Option::is_none"
    )]
    pub worktree_init: Option<Vec<WorkSpec>>,
    /// New base branch (before the first start only).
    #[serde(
        default,
        alias = "base_branch",
        skip_serializing_if = "Option::is_none"
    )]
    pub base_branch: Option<String>,
    /// New target branch (before the first start only).
    #[serde(
        default,
        alias = "target_branch",
        skip_serializing_if = "Option::is_none"
    )]
    pub target_branch: Option<String>,
}

impl PlanUpdate {
    fn apply(&self, spec: &mut PlanSpec) {
        let u = self.clone();
        if let Some(v) = u.name {
            spec.name = v;
        }
        if u.max_parallel.is_some() {
            spec.max_parallel = u.max_parallel;
        }
        if let Some(v) = u.env {
            spec.env = v;
        }
        if u.verify_ri.is_some() {
            spec.verify_ri = u.verify_ri;
        }
        if u.clean_up_successful_work.is_some() {
            spec.clean_up_successful_work = u.clean_up_successful_work;
        }
        if let Some(v) = u.additional_symlink_dirs {
            spec.additional_symlink_dirs = v;
        }
        if let Some(v) = u.worktree_init {
            spec.worktree_init = v;
        }
        if u.base_branch.is_some() {
            spec.base_branch = u.base_branch;
        }
        if u.target_branch.is_some() {
            spec.target_branch = u.target_branch;
        }
    }

    fn changes_branches(&self) -> bool {
        self.base_branch.is_some() || self.target_branch.is_some()
    }
}

/// Why an edit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct EditError {
    /// Position of the edit in the list (0-based).
    pub index: usize,
    /// The edit's operation (`add_job`, `remove_job`, ...).
    pub op: &'static str,
    /// The job it is about, when it names one.
    pub job: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for EditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "edit #{} ({}", self.index, self.op)?;
        if let Some(job) = &self.job {
            write!(f, " `{job}`")?;
        }
        write!(f, "): {}", self.message)
    }
}

/// What the edits may do to a job, from its status (`None`: added by these edits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freedom {
    /// Not started: anything.
    Open,
    /// Failed: its specs may change (for the retry) and it may be removed; its place may not.
    Failed,
    /// Started or done: only display fields.
    Fixed(NodeStatus),
}

fn freedom(status: Option<NodeStatus>) -> Freedom {
    match status {
        None | Some(NodeStatus::Pending | NodeStatus::Ready | NodeStatus::Blocked) => Freedom::Open,
        Some(NodeStatus::Failed) => Freedom::Failed,
        Some(s) => Freedom::Fixed(s),
    }
}

/// Applies `edits` in order to a copy of `spec`.
///
/// `status_of` gives the status of an existing job by producerId (`None` for jobs the plan
/// does not have yet); see the module docs for what each status allows. `started` says whether
/// the plan has started (its branches are pinned). The result is not validated: the caller runs
/// [`crate::plan::validate`] on it.
///
/// ```
/// use orchestrator_core::plan::{apply_edits, JobSpec, PlanEdit, PlanSpec, WorkSpec};
/// use orchestrator_core::NodeStatus;
///
/// let spec = PlanSpec::new("p")
///     .job(JobSpec::new("build", "Build", WorkSpec::shell("make")))
///     .job(JobSpec::new("test", "Test", WorkSpec::shell("make test")).depends_on(["build"]));
/// let edits = [PlanEdit::AddAfter {
///     job: Box::new(JobSpec::new("lint", "Lint", WorkSpec::shell("make lint"))),
///     after: "build".into(),
/// }];
/// let new = apply_edits(&spec, &edits, |_| Some(NodeStatus::Pending), false).unwrap();
/// assert_eq!(new.jobs[1].dependencies, ["lint"]);
/// assert_eq!(new.jobs[2].dependencies, ["build"]);
///
/// // A running job keeps its place.
/// let running = |p: &str| Some(if p == "test" { NodeStatus::Running } else { NodeStatus::Succeeded });
/// let err = apply_edits(&spec, &[PlanEdit::RemoveJob { job: "test".into() }], running, true);
/// assert!(err.unwrap_err().to_string().contains("running"));
/// ```
pub fn apply_edits(
    spec: &PlanSpec,
    edits: &[PlanEdit],
    status_of: impl Fn(&str) -> Option<NodeStatus>,
    started: bool,
) -> Result<PlanSpec, EditError> {
    let mut out = spec.clone();
    // producerIds removed by these edits: re-adding one would inherit the removed job's state.
    let mut removed: Vec<String> = Vec::new();
    for (index, edit) in edits.iter().enumerate() {
        let cx = EditContext {
            index,
            op: edit.op(),
            status_of: &status_of,
        };
        match edit {
            PlanEdit::AddJob { job } => {
                cx.adding(&out, &removed, job)?;
                out.jobs.push((**job).clone());
            }
            PlanEdit::RemoveJob { job } => removed.push(cx.remove_job(&mut out, job)?),
            PlanEdit::UpdateDeps { job, dependencies } => {
                let i = cx.position(&out, job)?;
                cx.movable(job, "change its dependencies")?;
                out.jobs[i].dependencies = dependencies.clone();
            }
            PlanEdit::AddBefore { job, before } => {
                cx.adding(&out, &removed, job)?;
                cx.add_before(&mut out, job, before)?;
            }
            PlanEdit::AddAfter { job, after } => {
                cx.adding(&out, &removed, job)?;
                cx.add_after(&mut out, job, after)?;
            }
            PlanEdit::UpdateJob { job, update } => cx.update_job(&mut out, job, update)?,
            PlanEdit::UpdatePlan { update } => {
                if started && update.changes_branches() {
                    return Err(cx.fail(
                        None,
                        "baseBranch and targetBranch are pinned when the plan starts; they can \
                         change only before that"
                            .into(),
                    ));
                }
                update.apply(&mut out);
            }
            PlanEdit::AddSubJobs { parent, jobs } => {
                let p = cx.position(&out, parent)?;
                if !matches!(
                    status_of(parent),
                    Some(NodeStatus::Running | NodeStatus::CompletedSplit)
                ) {
                    return Err(cx.fail(
                        Some(parent),
                        "sub-jobs are added only to a running or split job".into(),
                    ));
                }
                for job in jobs {
                    cx.adding(&out, &removed, job)?;
                    let mut job = job.clone();
                    job.extra.make_mut().parent = Some(parent.clone());
                    out.jobs[p].dependencies.push(job.producer_id.clone());
                    out.jobs.push(job);
                }
            }
        }
    }
    Ok(out)
}

/// One edit of an [`apply_edits`] call: where it is in the list (for its errors) and the job
/// statuses its checks read. Each edit kind that does more than one step has a method here.
struct EditContext<'a> {
    index: usize,
    op: &'static str,
    status_of: &'a dyn Fn(&str) -> Option<NodeStatus>,
}

impl EditContext<'_> {
    fn fail(&self, job: Option<&str>, message: String) -> EditError {
        EditError {
            index: self.index,
            op: self.op,
            job: job.map(str::to_owned),
            message,
        }
    }

    fn position(&self, spec: &PlanSpec, job: &str) -> Result<usize, EditError> {
        spec.jobs
            .iter()
            .position(|j| j.producer_id == job)
            .ok_or_else(|| self.fail(Some(job), "no job has this producerId".into()))
    }

    /// Checks a job whose place in the graph (removal, dependencies) is about to change.
    fn movable(&self, job: &str, what: &str) -> Result<(), EditError> {
        match freedom((self.status_of)(job)) {
            Freedom::Open => Ok(()),
            Freedom::Failed | Freedom::Fixed(_) => Err(self.fail(
                Some(job),
                format!(
                    "cannot {what}: the job is {}; only pending, ready or blocked jobs can",
                    (self.status_of)(job).map_or("new", NodeStatus::as_str)
                ),
            )),
        }
    }

    /// Checks a job about to be added: its producerId is new, and was not removed by an earlier
    /// edit of the same call (`removed`).
    fn adding(&self, spec: &PlanSpec, removed: &[String], job: &JobSpec) -> Result<(), EditError> {
        if spec.jobs.iter().any(|j| j.producer_id == job.producer_id) {
            Err(self.fail(
                Some(&job.producer_id),
                "a job with this producerId already exists".into(),
            ))
        } else if removed.contains(&job.producer_id) {
            Err(self.fail(
                Some(&job.producer_id),
                "this producerId was removed earlier in the same call; change the job with \
                 update_job instead, or remove it and add the new one in separate calls"
                    .into(),
            ))
        } else {
            Ok(())
        }
    }

    /// Removes `job`, its dependents inheriting its dependencies; returns its producerId.
    fn remove_job(&self, out: &mut PlanSpec, job: &str) -> Result<String, EditError> {
        let i = self.position(out, job)?;
        if let Freedom::Fixed(s) = freedom((self.status_of)(job)) {
            return Err(self.fail(
                Some(job),
                format!(
                    "cannot remove a job that is {s}; only pending, ready, blocked or \
                     failed jobs can be removed"
                ),
            ));
        }
        let gone = out.jobs.remove(i);
        for other in &mut out.jobs {
            if other.dependencies.contains(&gone.producer_id) {
                self.movable(&other.producer_id, "inherit the removed job's dependencies")?;
                let mut deps: Vec<String> = Vec::new();
                for d in &other.dependencies {
                    if *d == gone.producer_id {
                        deps.extend(gone.dependencies.iter().cloned());
                    } else {
                        deps.push(d.clone());
                    }
                }
                other.dependencies = dedup(deps);
            }
        }
        Ok(gone.producer_id)
    }

    /// Adds `job` taking over `before`'s dependencies; `before` then waits for it alone.
    fn add_before(&self, out: &mut PlanSpec, job: &JobSpec, before: &str) -> Result<(), EditError> {
        let i = self.position(out, before)?;
        self.movable(before, "insert a job before it")?;
        let mut new = job.clone();
        let mut deps = std::mem::take(&mut out.jobs[i].dependencies);
        deps.append(&mut new.dependencies);
        new.dependencies = dedup(deps);
        out.jobs[i].dependencies = vec![new.producer_id.clone()];
        out.jobs.push(new);
        Ok(())
    }

    /// Adds `job` after `after`: `after`'s dependents depend on the new job instead.
    fn add_after(&self, out: &mut PlanSpec, job: &JobSpec, after: &str) -> Result<(), EditError> {
        self.position(out, after)?;
        let mut new = job.clone();
        for other in &mut out.jobs {
            if let Some(d) = other.dependencies.iter_mut().find(|d| *d == after) {
                self.movable(&other.producer_id, "depend on the inserted job instead")?;
                d.clone_from(&new.producer_id);
                other.dependencies = dedup(std::mem::take(&mut other.dependencies));
            }
        }
        new.dependencies.insert(0, after.to_owned());
        new.dependencies = dedup(new.dependencies);
        out.jobs.push(new);
        Ok(())
    }

    /// Changes `job`'s fields, as far as its status allows.
    fn update_job(
        &self,
        out: &mut PlanSpec,
        job: &str,
        update: &JobUpdate,
    ) -> Result<(), EditError> {
        let i = self.position(out, job)?;
        if update.dependencies.is_some() {
            self.movable(job, "change its dependencies")?;
        }
        if let Freedom::Fixed(s) = freedom((self.status_of)(job)) {
            if !update.is_cosmetic() {
                return Err(self.fail(
                    Some(job),
                    format!(
                        "the job is {s}: only its name and group can change; work, \
                         checks and task can change on pending, ready, blocked or \
                         failed jobs"
                    ),
                ));
            }
        }
        update.apply(&mut out.jobs[i]);
        Ok(())
    }
}

/// Where each node of `new`'s graph was in `old`'s (by producerId; the snapshot node, last in
/// worktree plans, stays the snapshot node); `None` for new jobs.
pub fn layout(old: &PlanSpec, new: &PlanSpec) -> Vec<Option<usize>> {
    let index: HashMap<&str, usize> = old
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.producer_id.as_str(), i))
        .collect();
    let mut from: Vec<Option<usize>> = new
        .jobs
        .iter()
        .map(|j| index.get(j.producer_id.as_str()).copied())
        .collect();
    if new.isolation == crate::plan::Isolation::Worktree {
        from.push(Some(old.jobs.len()));
    }
    from
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests;
