//! The nested-groups form of SPEC §2 and the status of a group.
//!
//! A plan may carry `groups: [{"name", "jobs"?, "groups"?}]` nested to any depth. Everything
//! after parsing (validation, the graph, the engine, every command and MCP tool) sees only the
//! flat form: [`flatten`] appends each group's jobs to `jobs` with a qualified producerId (the
//! group path plus its own id, `phase1/collection/count-files`), `group` set to the path, and
//! every dependency resolved to the qualified id it names. Resolution rules:
//!
//! - a dependency without `/` names a job of the same group;
//! - one with `/` is looked up relative to the job's enclosing groups from the innermost
//!   outward, then from the root (`collection/count-files` from `phase1/analysis` is
//!   `phase1/collection/count-files` when that exists);
//! - a reference that matches nothing is a problem naming the reference and the job's
//!   qualified path.
//!
//! Groups never order anything. A group's status ([`GroupStatus`]) is derived from its jobs'
//! (those of its subgroups included): see [`group_statuses`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use serde::Serialize;

use crate::plan::validate::{producer_id_problem, ParseProblem};
use crate::plan::{GroupSpec, JobSpec, PlanSpec, ValidationError, ValidationErrors};
use crate::state::NodeStatus;

/// Stands in for a dependency that resolves to no job: no producerId can be spelled like it,
/// so the graph never links it to a real job, and problems about it are left out.
const UNRESOLVED: &str = "<unresolved>";

/// What flattening found: its problems (at their slots: `0` the plan, `i + 1` for `jobs[i]` of
/// the flattened plan) and, per slot, the fields whose validation problems would only repeat
/// one of them.
#[derive(Debug, Default)]
pub(crate) struct Flattened {
    pub(crate) problems: Vec<ParseProblem>,
    pub(crate) unread: HashMap<usize, HashSet<String>>,
}

impl Flattened {
    /// Whether validation problems of `field` at `slot` are left out (see [`Flattened`]).
    pub(crate) fn covers(&self, slot: usize, field: &str) -> bool {
        self.unread.get(&slot).is_some_and(|f| f.contains(field))
    }

    fn report(&mut self, slot: usize, field: String, value: &str, message: String) {
        self.problems.push(ParseProblem {
            slot,
            field,
            value: value.to_owned(),
            message,
        });
    }

    fn mark(&mut self, slot: usize, field: String) {
        self.unread.entry(slot).or_default().insert(field);
    }
}

/// A job of a group, before it joins the flat list.
struct Nested {
    job: JobSpec,
    /// The enclosing groups' names, outermost first.
    path: Vec<String>,
    /// Where the job is in the document (`groups[0].groups[1].jobs[2]`).
    at: String,
    /// Some enclosing group has a name that is not a valid path segment.
    bad_group: bool,
}

/// Moves `spec.groups` into `spec.jobs` (after the plan's own jobs, depth first: a group's
/// jobs, then its subgroups'), qualified and resolved as the module documentation says.
pub(crate) fn flatten(spec: &mut PlanSpec) -> Flattened {
    let mut found = Flattened::default();
    let groups = std::mem::take(&mut spec.groups);
    let mut nested = Vec::new();
    collect(&groups, "", &mut Vec::new(), false, &mut nested, &mut found);

    let mut known: HashSet<String> = spec.jobs.iter().map(|j| j.producer_id.clone()).collect();
    // The document path of the first job with each qualified id, for duplicate problems that
    // say where both are written.
    let mut first_at: HashMap<String, String> = HashMap::new();
    let qualified: Vec<String> = nested
        .iter()
        .map(|n| join(&n.path, &n.job.producer_id))
        .collect();
    known.extend(qualified.iter().cloned());

    let first_slot = spec.jobs.len() + 1;
    spec.jobs.reserve(nested.len());
    for (k, (mut n, id)) in nested.into_iter().zip(qualified).enumerate() {
        let slot = first_slot + k;
        let group = n.path.join("/");
        if n.bad_group {
            // The group's name was reported once, at the group.
            found.mark(slot, "producerId".to_owned());
        }
        match first_at.get(&id) {
            Some(first) => {
                found.report(
                    slot,
                    "producerId".to_owned(),
                    &n.job.producer_id,
                    format!(
                        "duplicate producerId in group `{group}`: {first} and {} both use it; \
                         producerIds need only be unique within their group",
                        n.at
                    ),
                );
                found.mark(slot, "producerId".to_owned());
            }
            None => {
                first_at.insert(id.clone(), n.at.clone());
            }
        }
        if let Some(own) = n.job.extra.group.as_deref().filter(|own| *own != group) {
            found.report(
                slot,
                "group".to_owned(),
                own,
                format!(
                    "a job inside a group gets its group from where it is written \
                     (`{group}`); omit `group` there or move the job"
                ),
            );
        }
        for (d, dep) in n.job.dependencies.iter_mut().enumerate() {
            match resolve(dep, &n.path, &known) {
                Ok(target) => *dep = target,
                Err(tried) => {
                    let field = format!("dependencies[{d}]");
                    found.report(
                        slot,
                        field.clone(),
                        dep,
                        format!(
                            "unknown dependency: `{dep}` matches no job (looked for {tried}); \
                             a dependency without `/` names a job of the same group, one with \
                             `/` is looked up from the job's group outward, then from the root"
                        ),
                    );
                    found.mark(slot, field);
                    *dep = UNRESOLVED.to_owned();
                }
            }
        }
        n.job.producer_id = id;
        n.job.extra.make_mut().group = Some(group);
        spec.jobs.push(n.job);
    }
    found
}

/// Walks `groups` depth first, collecting their jobs and reporting bad group names.
fn collect(
    groups: &[GroupSpec],
    at: &str,
    path: &mut Vec<String>,
    bad_above: bool,
    out: &mut Vec<Nested>,
    found: &mut Flattened,
) {
    for (i, group) in groups.iter().enumerate() {
        let here = format!("{at}groups[{i}]");
        path.push(group.name.clone());
        let bad = match producer_id_problem(&group.name) {
            Some(reason) => {
                found.report(
                    0,
                    format!("{here}.name"),
                    &group.name,
                    format!(
                        "group `{}`: not a valid group name: {reason}; a group name is one \
                         segment of its jobs' qualified producerIds: 3–64 characters of \
                         lowercase letters `a-z`, digits and `-` (e.g. `phase1`)",
                        path.join("/")
                    ),
                );
                true
            }
            None => false,
        };
        for (j, job) in group.jobs.iter().enumerate() {
            out.push(Nested {
                job: job.clone(),
                path: path.clone(),
                at: format!("{here}.jobs[{j}]"),
                bad_group: bad || bad_above,
            });
        }
        collect(
            &group.groups,
            &format!("{here}."),
            path,
            bad || bad_above,
            out,
            found,
        );
        path.pop();
    }
}

/// The qualified id `reference` names from a job in group `path`, or the candidates tried
/// (for the problem's message).
fn resolve(reference: &str, path: &[String], known: &HashSet<String>) -> Result<String, String> {
    let candidates: Vec<String> = if reference.contains('/') {
        // Innermost enclosing group first, the root last.
        (0..=path.len())
            .rev()
            .map(|k| join(&path[..k], reference))
            .collect()
    } else {
        vec![join(path, reference)]
    };
    match candidates.iter().find(|c| known.contains(c.as_str())) {
        Some(found) => Ok(found.clone()),
        None => Err(candidates
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ")),
    }
}

/// `a/b/id` from `[a, b]` and `id`.
fn join(path: &[String], id: &str) -> String {
    let mut out = String::with_capacity(path.iter().map(|p| p.len() + 1).sum::<usize>() + id.len());
    for segment in path {
        out.push_str(segment);
        out.push('/');
    }
    out.push_str(id);
    out
}

impl PlanSpec {
    /// Flattens the nested-groups form (SPEC §2) into `jobs`: each group's jobs get a qualified
    /// producerId (`phase1/collection/count-files`), `group` set to their group path, and
    /// dependencies resolved (without `/`: the same group; with `/`: from the job's group
    /// outward, then from the root). [`crate::plan::parse_plan`] and plan creation do this;
    /// a plan without groups is left as it is.
    ///
    /// On error the problems are those of the groups only (bad group names, duplicate
    /// producerIds in a group, references that match nothing); the rest of the plan is judged
    /// by [`crate::plan::validate`].
    ///
    /// ```
    /// use orchestrator_core::plan::{GroupSpec, JobSpec, PlanSpec, WorkSpec};
    /// let job = |id: &str| JobSpec::new(id, id, WorkSpec::shell("true"));
    /// let mut plan = PlanSpec::new("p").group(
    ///     GroupSpec::new("phase1")
    ///         .group(GroupSpec::new("collection").job(job("count-files")))
    ///         .group(GroupSpec::new("analysis")
    ///             .job(job("analyze").depends_on(["collection/count-files"]))),
    /// );
    /// plan.flatten_groups().unwrap();
    /// assert_eq!(plan.jobs[1].producer_id, "phase1/analysis/analyze");
    /// assert_eq!(plan.jobs[1].dependencies, ["phase1/collection/count-files"]);
    /// assert_eq!(plan.jobs[1].extra.group.as_deref(), Some("phase1/analysis"));
    ///
    /// let mut bad = PlanSpec::new("p")
    ///     .group(GroupSpec::new("phase1").job(job("analyze").depends_on(["nope/count"])));
    /// let errors = bad.flatten_groups().unwrap_err();
    /// assert!(errors.to_string().contains("nope/count"));
    /// ```
    pub fn flatten_groups(&mut self) -> Result<(), ValidationErrors> {
        if self.groups.is_empty() {
            return Ok(());
        }
        let found = flatten(self);
        if found.problems.is_empty() {
            return Ok(());
        }
        let errors = found
            .problems
            .into_iter()
            .map(|p| ValidationError {
                job: p
                    .slot
                    .checked_sub(1)
                    .and_then(|i| self.jobs.get(i))
                    .map(|j| j.producer_id.clone()),
                field: p.field,
                value: p.value,
                message: p.message,
            })
            .collect();
        Err(ValidationErrors(errors))
    }
}

/// The derived status of a group of jobs (SPEC §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum GroupStatus {
    /// No job of the group has started.
    Pending,
    /// Some job is under way, or some have ended and others not yet.
    Running,
    /// Every job succeeded.
    Succeeded,
    /// Every job has ended and none succeeded (failed, blocked or canceled).
    Failed,
    /// Every job has ended, some succeeded and some did not.
    Partial,
}

impl GroupStatus {
    /// The status as SPEC §2 spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupStatus::Pending => "pending",
            GroupStatus::Running => "running",
            GroupStatus::Succeeded => "succeeded",
            GroupStatus::Failed => "failed",
            GroupStatus::Partial => "partial",
        }
    }

    /// The status of a group whose jobs have these statuses (none: pending).
    ///
    /// ```
    /// use orchestrator_core::plan::GroupStatus;
    /// use orchestrator_core::state::NodeStatus::*;
    /// assert_eq!(GroupStatus::of([Succeeded, Failed]), GroupStatus::Partial);
    /// assert_eq!(GroupStatus::of([Succeeded, Pending]), GroupStatus::Running);
    /// assert_eq!(GroupStatus::of([Pending, Ready]), GroupStatus::Pending);
    /// ```
    pub fn of(statuses: impl IntoIterator<Item = NodeStatus>) -> GroupStatus {
        let mut tally = Tally::default();
        for status in statuses {
            tally.add(status);
        }
        tally.status()
    }
}

impl fmt::Display for GroupStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Counts of a group's jobs by what their status means for the group.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// Not started (pending, ready).
    waiting: usize,
    /// Under way (scheduled, running, split and not yet finished).
    active: usize,
    succeeded: usize,
    /// Ended without success (failed, blocked, canceled).
    unsuccessful: usize,
}

impl Tally {
    fn add(&mut self, status: NodeStatus) {
        match status {
            NodeStatus::Pending | NodeStatus::Ready => self.waiting += 1,
            NodeStatus::Succeeded => self.succeeded += 1,
            NodeStatus::Failed | NodeStatus::Blocked | NodeStatus::Canceled => {
                self.unsuccessful += 1
            }
            // Scheduled, running, completed_split, and any status added later: under way.
            _ => self.active += 1,
        }
    }

    fn status(self) -> GroupStatus {
        let started = self.active + self.succeeded + self.unsuccessful;
        if self.active > 0 || (started > 0 && self.waiting > 0) {
            GroupStatus::Running
        } else if started == 0 {
            GroupStatus::Pending
        } else if self.unsuccessful == 0 {
            GroupStatus::Succeeded
        } else if self.succeeded == 0 {
            GroupStatus::Failed
        } else {
            GroupStatus::Partial
        }
    }
}

/// Every group path of the jobs (`group` fields; `backend/api` also makes `backend`) with its
/// derived status, sorted by path. `jobs` yields each job's group and status.
///
/// ```
/// use orchestrator_core::plan::{group_statuses, GroupStatus};
/// use orchestrator_core::state::NodeStatus;
/// let groups = group_statuses([
///     (Some("phase1/a"), NodeStatus::Succeeded),
///     (Some("phase1/b"), NodeStatus::Failed),
///     (None, NodeStatus::Running),
/// ]);
/// assert_eq!(groups[0], ("phase1".to_owned(), GroupStatus::Partial));
/// assert_eq!(groups[1], ("phase1/a".to_owned(), GroupStatus::Succeeded));
/// ```
pub fn group_statuses<'a>(
    jobs: impl IntoIterator<Item = (Option<&'a str>, NodeStatus)>,
) -> Vec<(String, GroupStatus)> {
    let mut tallies: BTreeMap<&'a str, Tally> = BTreeMap::new();
    for (group, status) in jobs {
        let Some(group) = group.filter(|g| !g.is_empty()) else {
            continue;
        };
        // The group itself and every enclosing one.
        for (end, _) in group.match_indices('/') {
            tallies.entry(&group[..end]).or_default().add(status);
        }
        tallies.entry(group).or_default().add(status);
    }
    tallies
        .into_iter()
        .map(|(path, tally)| (path.to_owned(), tally.status()))
        .collect()
}

#[cfg(test)]
mod tests;
