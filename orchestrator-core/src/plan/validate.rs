//! Validation of a [`PlanSpec`]: every problem at once, each naming the job, the field and the
//! offending value.
//!
//! Everything here is O(size of the plan): one pass over the jobs with a hash map for
//! producerIds, plus [`PlanGraph::build`] for dependencies and cycles. Nothing is allocated for a
//! job that has no problem, so 100k-job plans validate in milliseconds.

//!
//! The error types are in `error`; plan and job field checks in `fields`; work-spec checks in
//! `work`; path checks in `paths`; dependency and cycle checks in `graph`; the syntax of names,
//! refs and URLs in `names`.

mod error;
mod fields;
mod graph;
mod names;
mod paths;
mod work;
mod workflow;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::plan::{JobSpec, PlanGraph, PlanSpec};

pub use error::{ValidationError, ValidationErrors};
pub use names::producer_id_problem;
use paths::PathKind;

#[cfg(test)]
mod tests;

/// Context for checks that look at the file system (`instructionsFile`, `allowedFolders`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidationContext<'a> {
    /// Repository root; when given, referenced files and folders must exist inside it.
    pub repo: Option<&'a Path>,
    /// The plan is being scaffolded: it may have no jobs yet.
    pub scaffolding: bool,
}

/// Validates a plan, returning its graph or every problem found.
///
/// Problems come in a fixed order: plan-level fields first, then job by job (in plan order),
/// each job's fields in the order of the plan format. Dependency problems (unknown dependency,
/// self-dependency, cycles) come from [`PlanGraph::build`] and are merged in at their job.
///
/// Paths (`cwd`, `instructionsFile`, `allowedFolders`, `additionalSymlinkDirs`) are judged
/// lexically: relative, and no `..` that climbs out. With `ctx.repo`, `instructionsFile` and
/// `allowedFolders` must also exist inside the repository, symlinks resolved.
///
/// ```
/// use orchestrator_core::plan::{validate, JobSpec, PlanSpec, ValidationContext, WorkSpec};
/// let plan = PlanSpec::new("p")
///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")).depends_on(["nope"]))
///     .job(JobSpec::new("B", "b", WorkSpec::shell("")));
/// let errors = validate(&plan, ValidationContext::default()).unwrap_err();
/// assert!(errors.to_string().contains("unknown dependency"));
/// let fields: Vec<(&str, &str)> = errors
///     .errors()
///     .iter()
///     .map(|e| (e.job.as_deref().unwrap_or(""), e.field.as_str()))
///     .collect();
/// assert_eq!(
///     fields,
///     [("aaa", "dependencies[0]"), ("B", "producerId"), ("B", "work.command")]
/// );
///
/// let ok = PlanSpec::new("p").job(JobSpec::new("aaa", "a", WorkSpec::shell("true")));
/// let graph = validate(&ok, ValidationContext::default()).unwrap();
/// assert_eq!(graph.job_count(), 1);
/// ```
pub fn validate(
    spec: &PlanSpec,
    ctx: ValidationContext<'_>,
) -> Result<PlanGraph, ValidationErrors> {
    let mut v = Validator::new(ctx);
    v.plan(spec);
    let producers = v.jobs(spec);
    match PlanGraph::build_indexed(spec, producers) {
        Ok(graph) if v.problems.is_empty() => Ok(graph),
        Ok(_) => Err(v.finish()),
        Err((graph_errors, producers)) => {
            v.merge_graph_errors(spec, &producers, graph_errors);
            Err(v.finish())
        }
    }
}

/// A problem the tolerant parse found (see `plan::collect`), at its slot: `0` for the plan's
/// own fields, `i + 1` for `jobs[i]`.
#[derive(Debug, Clone)]
pub(crate) struct ParseProblem {
    pub(crate) slot: usize,
    /// Field path inside the plan or job, as written in the document.
    pub(crate) field: String,
    pub(crate) value: String,
    pub(crate) message: String,
}

/// Validates a plan the tolerant parse read (with placeholders where it could not read a
/// value), and reports its parse problems together with every validation problem, in the
/// order of [`validate`]. Problems about a field the parse could not read (`unread(slot,
/// field)`) are left out: they are about the placeholder, not about the document.
pub(crate) fn with_parse_problems(
    spec: &PlanSpec,
    ctx: ValidationContext<'_>,
    parsed: Vec<ParseProblem>,
    unread: &dyn Fn(usize, &str) -> bool,
) -> ValidationErrors {
    let mut v = Validator::new(ctx);
    v.plan(spec);
    let producers = v.jobs(spec);
    if let Err((graph_errors, producers)) = PlanGraph::build_indexed(spec, producers) {
        v.merge_graph_errors(spec, &producers, graph_errors);
    }
    v.problems.retain(|(pos, e)| !unread(pos.slot, &e.field));
    // Parse problems first: at one position, sorting keeps them before the others.
    let parsed = parsed.into_iter().map(|p| {
        let job = p
            .slot
            .checked_sub(1)
            .and_then(|i| Some(job_label(i, spec.jobs.get(i)?)));
        let top = p.field.split(['.', '[']).next().unwrap_or_default();
        let section = match top {
            // The first section of a job: a parse problem sorts before the job's other
            // problems in the fields checked before `dependencies`.
            _ if p.slot == 0 => Section::ProducerId,
            "producerId" | "producer_id" | "task" | "work" | "" => Section::ProducerId,
            "dependencies" => Section::Dependencies,
            _ => Section::AfterDependencies,
        };
        let position = Position {
            slot: p.slot,
            section,
        };
        let error = ValidationError {
            job,
            field: p.field,
            value: p.value,
            message: p.message,
        };
        (position, error)
    });
    let found = std::mem::take(&mut v.problems);
    v.problems = parsed.chain(found).collect();
    v.finish()
}

/// Where a problem sorts: plan-level before jobs, jobs in plan order, and inside a job the
/// fields checked here before `dependencies` (from the graph) before the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Position {
    /// `0` for the plan, `i + 1` for `jobs[i]`.
    slot: usize,
    section: Section,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Section {
    /// producerId (its own problems, then whether an earlier job has it).
    ProducerId,
    /// task, work.
    Fields,
    /// dependencies (reported by the graph).
    Dependencies,
    /// name, prechecks, postchecks, baseBranch, group, env.
    AfterDependencies,
}

/// The job currently being checked.
#[derive(Clone, Copy)]
struct Current<'a> {
    index: usize,
    job: &'a JobSpec,
}
struct Validator<'a> {
    /// Canonical repository root, when the context names one.
    repo: Option<PathBuf>,
    /// File-system results per (path, kind): plans often repeat the same folder or file.
    fs_cache: HashMap<(&'a str, PathKind), Option<String>>,
    scaffolding: bool,
    current: Option<Current<'a>>,
    section: Section,
    problems: Vec<(Position, ValidationError)>,
}

impl<'a> Validator<'a> {
    fn new(ctx: ValidationContext<'_>) -> Self {
        Validator {
            // A repository that cannot be resolved still gets checked: every lookup in it
            // then reports the path as missing.
            repo: ctx
                .repo
                .map(|r| r.canonicalize().unwrap_or_else(|_| r.to_path_buf())),
            fs_cache: HashMap::new(),
            scaffolding: ctx.scaffolding,
            current: None,
            section: Section::ProducerId,
            problems: Vec::new(),
        }
    }

    fn finish(mut self) -> ValidationErrors {
        // Stable: problems of one position keep the order they were found in.
        self.problems.sort_by_key(|(pos, _)| *pos);
        ValidationErrors(self.problems.into_iter().map(|(_, e)| e).collect())
    }

    /// Records a problem at the current job (or the plan) and section.
    fn report(&mut self, field: impl fmt::Display, value: &str, message: impl Into<String>) {
        let (slot, job) = match self.current {
            Some(c) => (c.index + 1, Some(job_label(c.index, c.job))),
            None => (0, None),
        };
        let position = Position {
            slot,
            section: self.section,
        };
        let error = ValidationError {
            job,
            field: field.to_string(),
            value: value.to_owned(),
            message: message.into(),
        };
        self.problems.push((position, error));
    }
}

/// How a job is named in problems: its producerId, or `jobs[i]` when it has none.
fn job_label(index: usize, job: &JobSpec) -> String {
    if job.producer_id.trim().is_empty() {
        format!("jobs[{index}]")
    } else {
        job.producer_id.clone()
    }
}

/// A field path such as `work.allowedUrls[1]`, only turned into a string when reported.
#[derive(Debug, Clone, Copy)]
struct Field<'p> {
    prefix: &'p str,
    name: &'p str,
    index: Option<usize>,
}

impl<'p> Field<'p> {
    /// `name` at the top of the plan or job.
    fn top(name: &'p str) -> Self {
        Field::new("", name)
    }

    /// `prefix.name` (just `name` with an empty prefix).
    fn new(prefix: &'p str, name: &'p str) -> Self {
        Field {
            prefix,
            name,
            index: None,
        }
    }

    /// Entry `i` of a list field.
    fn at(self, i: usize) -> Self {
        Field {
            index: Some(i),
            ..self
        }
    }
}

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.prefix.is_empty() {
            write!(f, "{}.", self.prefix)?;
        }
        f.write_str(self.name)?;
        if let Some(i) = self.index {
            write!(f, "[{i}]")?;
        }
        Ok(())
    }
}
