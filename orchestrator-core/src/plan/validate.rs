//! Validation of a [`PlanSpec`]: every problem at once, each naming the job, the field and the
//! offending value.
//!
//! Everything here is O(size of the plan): one pass over the jobs with a hash map for
//! producerIds, plus [`PlanGraph::build`] for dependencies and cycles. Nothing is allocated for a
//! job that has no problem, so 100k-job plans validate in milliseconds.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::plan::{AgentSpec, Env, JobSpec, PlanGraph, PlanSpec, WorkSpec};

#[cfg(test)]
mod tests;

/// One problem in a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// producerId of the job (or `jobs[i]` when it has none); `None` for plan-level fields.
    pub job: Option<String>,
    /// Field path inside the job (or plan), e.g. `work.cwd`, `dependencies[1]`.
    pub field: String,
    /// The offending value.
    pub value: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl ValidationError {
    /// A problem in `job` (or the plan, with `None`).
    pub fn new(
        job: Option<&JobSpec>,
        field: impl Into<String>,
        value: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ValidationError {
            job: job.map(|j| j.producer_id.clone()),
            field: field.into(),
            value: value.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.job {
            Some(job) => write!(f, "job `{job}`, field `{}`", self.field)?,
            None => write!(f, "plan field `{}`", self.field)?,
        }
        if !self.value.is_empty() {
            write!(f, " = {:?}", self.value)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// All problems of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl ValidationErrors {
    /// The problems.
    pub fn errors(&self) -> &[ValidationError] {
        &self.0
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "{n} problem{} in the plan:",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationErrors {}

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
    let first_index = v.jobs(spec);
    match PlanGraph::build(spec) {
        Ok(graph) if v.problems.is_empty() => Ok(graph),
        Ok(_) => Err(v.finish()),
        Err(graph_errors) => {
            v.merge_graph_errors(spec, &first_index, graph_errors);
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
    let first_index = v.jobs(spec);
    if let Err(graph_errors) = PlanGraph::build(spec) {
        v.merge_graph_errors(spec, &first_index, graph_errors);
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
            _ if p.slot == 0 => Section::BeforeDependencies,
            "producerId" | "producer_id" | "task" | "work" | "" => Section::BeforeDependencies,
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
    /// producerId, task, work.
    BeforeDependencies,
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

/// What a path field must name when the repository is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum PathKind {
    File,
    Folder,
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
            section: Section::BeforeDependencies,
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

    // ---- the plan -------------------------------------------------------------------------

    fn plan(&mut self, spec: &'a PlanSpec) {
        self.display_name("name", &spec.name, true);
        if !spec.groups.is_empty() {
            // The graph and every job problem are about `jobs`; nested groups are judged when
            // they are flattened (parsing and plan creation do it).
            self.report(
                "groups",
                &format!("{} group(s)", spec.groups.len()),
                "nested groups must be flattened into `jobs` before validation: call \
                 PlanSpec::flatten_groups (parse_plan and plan creation do)",
            );
        }
        if spec.jobs.is_empty() && !self.scaffolding {
            self.report("jobs", "[]", "a plan needs at least one job");
        }
        if let Some(base) = &spec.base_branch {
            self.revision("baseBranch", base);
        }
        if let Some(target) = &spec.target_branch {
            self.branch("targetBranch", target);
        }
        for (i, dir) in spec.additional_symlink_dirs.iter().enumerate() {
            self.symlink_dir(&format!("additionalSymlinkDirs[{i}]"), dir);
        }
        if let Some(verify) = &spec.verify_ri {
            self.work("verifyRi", verify);
        }
        self.env(Field::top("env"), &spec.env);
        if let Some(after) = &spec.resume_after_plan {
            if after.trim().is_empty() {
                self.report(
                    "resumeAfterPlan",
                    after,
                    "must name the plan to wait for (its id); omit the field to start at once",
                );
            }
        }
        for (i, init) in spec.worktree_init.iter().enumerate() {
            self.work(&format!("worktreeInit[{i}]"), init);
        }
    }

    // ---- jobs -----------------------------------------------------------------------------

    /// Checks every job; returns the index of the first job with each producerId.
    fn jobs(&mut self, spec: &'a PlanSpec) -> HashMap<&'a str, usize> {
        let mut first_index: HashMap<&'a str, usize> = HashMap::with_capacity(spec.jobs.len());
        for (index, job) in spec.jobs.iter().enumerate() {
            self.current = Some(Current { index, job });
            self.section = Section::BeforeDependencies;
            self.producer_id(job);
            if let Some(&first) = first_index.get(job.producer_id.as_str()) {
                self.report(
                    "producerId",
                    &job.producer_id,
                    format!(
                        "duplicate producerId: jobs[{first}] and jobs[{index}] both use it; \
                         every job needs its own producerId"
                    ),
                );
            } else {
                first_index.insert(&job.producer_id, index);
            }
            if job.task.trim().is_empty() {
                self.report(
                    "task",
                    &job.task,
                    "must not be empty: give a short description of what the job does",
                );
            }
            self.work("work", &job.work);
            self.section = Section::AfterDependencies;
            if let Some(name) = &job.name {
                self.display_name("name", name, false);
            }
            if let Some(pre) = &job.prechecks {
                self.work("prechecks", pre);
            }
            if let Some(post) = &job.postchecks {
                self.work("postchecks", post);
            }
            if let Some(base) = &job.base_branch {
                self.revision("baseBranch", base);
            }
            if let Some(group) = &job.group {
                self.group(group);
            }
            self.env(Field::top("env"), &job.env);
        }
        self.current = None;
        first_index
    }

    fn producer_id(&mut self, job: &JobSpec) {
        let id = job.producer_id.as_str();
        // A qualified producerId (a flattened group's job, SPEC §2) is its group path plus its
        // own id; the pattern holds for every segment. Anywhere else `/` is refused as before.
        let qualified = id
            .rsplit_once('/')
            .filter(|(group, _)| job.group.as_deref() == Some(*group));
        let problem = match qualified {
            Some(_) => id.split('/').find_map(|segment| {
                producer_id_problem(segment).map(|reason| format!("segment `{segment}` {reason}"))
            }),
            None => producer_id_problem(id),
        };
        if let Some(reason) = problem {
            self.report(
                "producerId",
                id,
                format!(
                    "{reason}; a producerId is 3–64 characters of lowercase letters `a-z`, \
                     digits and `-` (e.g. `build-api`)"
                ),
            );
        }
    }

    /// A plan or job display name: non-empty after trimming, at most 200 characters.
    fn display_name(&mut self, field: &str, name: &str, required: bool) {
        let len = name.chars().count();
        if name.trim().is_empty() {
            let hint = if required {
                "the plan needs a name of 1–200 characters"
            } else {
                "give a name of 1–200 characters or omit the field"
            };
            self.report(field, name, format!("must not be empty: {hint}"));
        } else if len > MAX_NAME_CHARS {
            self.report(
                field,
                name,
                format!("is {len} characters long; at most {MAX_NAME_CHARS} are allowed"),
            );
        }
    }

    fn group(&mut self, group: &str) {
        if group.split('/').any(|segment| segment.trim().is_empty()) {
            self.report(
                "group",
                group,
                "has an empty segment; a group is a path of non-empty names separated by \
                 single `/` (e.g. `backend/api`), with no leading or trailing `/`",
            );
        }
    }

    fn env(&mut self, field: Field<'_>, env: &Env) {
        for key in env.keys() {
            if !is_env_name(key) {
                self.report(
                    field,
                    key,
                    "not a valid environment variable name: use letters, digits and `_`, \
                     not starting with a digit (`[A-Za-z_][A-Za-z0-9_]*`)",
                );
            }
        }
    }

    // ---- branches -------------------------------------------------------------------------

    fn revision(&mut self, field: &str, rev: &str) {
        if let Some(reason) = ref_name_problem(rev) {
            self.report(
                field,
                rev,
                format!(
                    "not a usable revision: {reason}; give a branch, tag or commit sha that \
                     follows git's ref-name rules (e.g. `main`, `release/1.2`, `v1.2.0`, `3f2a9c1`)"
                ),
            );
        }
    }

    fn branch(&mut self, field: &str, branch: &str) {
        if let Some(reason) = ref_name_problem(branch) {
            self.report(
                field,
                branch,
                format!(
                    "not a valid branch name: {reason}; branch names follow git's ref-name \
                     rules (e.g. `main`, `feature/login`, `orchestrator/my-plan`)"
                ),
            );
        }
    }

    // ---- work specs -----------------------------------------------------------------------

    fn work(&mut self, prefix: &str, work: &'a WorkSpec) {
        match work {
            WorkSpec::Shell(s) => {
                if s.command.trim().is_empty() {
                    self.report(
                        Field::new(prefix, "command"),
                        &s.command,
                        "must not be empty: give the command line to run",
                    );
                }
            }
            WorkSpec::Process(p) => {
                if p.executable.trim().is_empty() {
                    self.report(
                        Field::new(prefix, "executable"),
                        &p.executable,
                        "must not be empty: give the program to run (a name on PATH or a path)",
                    );
                }
            }
            WorkSpec::Agent(a) => self.agent(prefix, a),
        }
        if let Some(cwd) = work.cwd() {
            self.cwd(prefix, cwd);
        }
        if work.timeout_ms() == Some(0) {
            self.report(
                Field::new(prefix, "timeout"),
                "0",
                "must be at least 1 (milliseconds); omit it for no timeout",
            );
        }
        self.env(Field::new(prefix, "env"), work.env());
    }

    fn agent(&mut self, prefix: &str, a: &'a AgentSpec) {
        match (&a.instructions, &a.instructions_file) {
            (Some(_), Some(file)) => self.report(
                Field::new(prefix, "instructionsFile"),
                file,
                "both `instructions` and `instructionsFile` are given; give exactly one of them",
            ),
            (None, None) => self.report(
                Field::new(prefix, "instructions"),
                "",
                "agent work needs `instructions` or `instructionsFile` (exactly one)",
            ),
            _ => {}
        }
        if let Some(text) = &a.instructions {
            if text.trim().is_empty() {
                self.report(
                    Field::new(prefix, "instructions"),
                    text,
                    "must not be empty: tell the agent what to do (or use `instructionsFile`)",
                );
            }
        }
        if let Some(file) = &a.instructions_file {
            self.repo_path(Field::new(prefix, "instructionsFile"), file, PathKind::File);
        }
        if let Some(agent) = &a.agent {
            if !is_agent_name(agent) {
                self.report(
                    Field::new(prefix, "agent"),
                    agent,
                    "not a valid agent name: use lowercase letters, digits, `-` and `_` \
                     (e.g. `copilot`, `claude`, `codex`, `gemini`, or a host-registered name)",
                );
            }
        }
        if let Some(model) = &a.model {
            if model.trim().is_empty() {
                self.report(
                    Field::new(prefix, "model"),
                    model,
                    "must not be empty: name a model or omit the field to use the default",
                );
            }
        }
        if a.max_turns == Some(0) {
            self.report(
                Field::new(prefix, "maxTurns"),
                "0",
                "must be at least 1; omit it for the agent's default",
            );
        }
        for (i, folder) in a.allowed_folders.iter().enumerate() {
            self.repo_path(
                Field::new(prefix, "allowedFolders").at(i),
                folder,
                PathKind::Folder,
            );
        }
        for (i, url) in a.allowed_urls.iter().enumerate() {
            if let Some(reason) = url_problem(url) {
                self.report(
                    Field::new(prefix, "allowedUrls").at(i),
                    url,
                    format!(
                        "{reason}; allowed are http:// or https:// URLs (e.g. \
                         `https://docs.rs/serde`) and domain patterns (`example.com`, \
                         `*.example.com`)"
                    ),
                );
            }
        }
    }

    fn cwd(&mut self, prefix: &str, cwd: &str) {
        let problem = match lexical_depth(cwd) {
            Err(p) => p,
            Ok(_) => return,
        };
        let message = match problem {
            PathProblem::Empty => {
                "must not be empty: give a folder relative to the worktree, or omit it to run \
                 at the worktree root"
            }
            PathProblem::Absolute => {
                "must be relative to the job's worktree (e.g. `crates/api`); absolute paths \
                 are not allowed"
            }
            PathProblem::Escapes => {
                "climbs out of the job's worktree with `..`; the working directory must stay \
                 inside it"
            }
        };
        self.report(Field::new(prefix, "cwd"), cwd, message);
    }

    fn symlink_dir(&mut self, field: &str, dir: &str) {
        let message = match lexical_depth(dir) {
            Ok(depth) if depth > 0 => return,
            Ok(_) => {
                "names the repository root itself; give a folder inside it (e.g. `node_modules`)"
            }
            Err(PathProblem::Empty) => {
                "must not be empty: give a folder of the repository (e.g. `node_modules`)"
            }
            Err(PathProblem::Absolute) => {
                "must be relative to the repository root (e.g. `node_modules`); absolute \
                 paths are not allowed"
            }
            Err(PathProblem::Escapes) => {
                "climbs out of the repository with `..`; give a folder inside it"
            }
        };
        self.report(field, dir, message);
    }

    /// `instructionsFile` and `allowedFolders`: relative, inside the repository, and existing
    /// there (symlinks resolved) when the repository is known.
    fn repo_path(&mut self, field: Field<'_>, path: &'a str, kind: PathKind) {
        let what = match kind {
            PathKind::File => "file",
            PathKind::Folder => "folder",
        };
        let message = match lexical_depth(path) {
            Err(PathProblem::Empty) => Some(format!(
                "must not be empty: give a {what} relative to the repository root"
            )),
            Err(PathProblem::Absolute) => Some(format!(
                "must be a {what} relative to the repository root; absolute paths are not allowed"
            )),
            Err(PathProblem::Escapes) => Some(format!(
                "climbs out of the repository with `..`; the {what} must be inside it"
            )),
            Ok(0) if kind == PathKind::File => Some(
                "names the repository root, not a file; give a file relative to the repository root"
                    .to_owned(),
            ),
            Ok(_) => self.check_on_disk(path, kind),
        };
        if let Some(message) = message {
            self.report(field, path, message);
        }
    }

    fn check_on_disk(&mut self, path: &'a str, kind: PathKind) -> Option<String> {
        let root = self.repo.as_deref()?;
        if let Some(known) = self.fs_cache.get(&(path, kind)) {
            return known.clone();
        }
        let result = on_disk_problem(root, path, kind);
        self.fs_cache.insert((path, kind), result.clone());
        result
    }

    // ---- dependencies (from the graph) ----------------------------------------------------

    /// Adds the graph's problems at their jobs.
    fn merge_graph_errors(
        &mut self,
        spec: &PlanSpec,
        first_index: &HashMap<&str, usize>,
        errors: ValidationErrors,
    ) {
        let mut cursor = Cursor::default();
        for mut error in errors.0 {
            let index = graph_error_job(spec, first_index, &error, &mut cursor);
            if let Some((i, job)) = index.and_then(|i| Some((i, spec.jobs.get(i)?))) {
                error.job = Some(job_label(i, job));
            }
            let position = Position {
                slot: index.map_or(0, |i| i + 1),
                section: Section::Dependencies,
            };
            self.problems.push((position, error));
        }
    }
}

/// The index of the job a graph error is about. The graph names jobs by producerId only; with
/// duplicate producerIds the job is the one whose `dependencies[d]` holds the reported value.
fn graph_error_job(
    spec: &PlanSpec,
    first_index: &HashMap<&str, usize>,
    error: &ValidationError,
    cursor: &mut Cursor,
) -> Option<usize> {
    let id = error.job.as_deref()?;
    let first = *first_index.get(id)?;
    let Some(d) = dependency_entry(&error.field) else {
        // A cycle: reported at the first job with the id.
        return Some(first);
    };
    let owns =
        |job: &JobSpec| job.producer_id == id && job.dependencies.get(d) == Some(&error.value);
    let found = spec
        .jobs
        .iter()
        .enumerate()
        .skip(cursor.next_search(d).max(first))
        .find(|(_, job)| owns(job))
        .map(|(i, _)| i);
    match found {
        Some(i) => {
            *cursor = Cursor {
                job: i,
                entry: Some(d),
            };
            Some(i)
        }
        None => Some(first),
    }
}

/// Where the last dependency problem was found. The graph reports dependency entries in
/// (job, entry) order, so each search resumes here: linear even when every job shares one
/// producerId.
#[derive(Debug, Default)]
struct Cursor {
    job: usize,
    entry: Option<usize>,
}

impl Cursor {
    /// The first job that can hold entry `d` of the next problem.
    fn next_search(&self, d: usize) -> usize {
        match self.entry {
            Some(last) if d <= last => self.job + 1,
            _ => self.job,
        }
    }
}

/// `d` of a `dependencies[d]` field.
fn dependency_entry(field: &str) -> Option<usize> {
    field
        .strip_prefix("dependencies[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

const MAX_NAME_CHARS: usize = 200;

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

/// Why `id` does not match `^[a-z0-9-]{3,64}$`, if it does not.
pub(crate) fn producer_id_problem(id: &str) -> Option<String> {
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        let hint = if c.is_ascii_uppercase() {
            " (use lowercase)"
        } else {
            ""
        };
        return Some(format!("contains {c:?}{hint}"));
    }
    let len = id.len();
    if len < 3 {
        return Some(format!("is {len} characters long, fewer than 3"));
    }
    if len > 64 {
        return Some(format!("is {len} characters long, more than 64"));
    }
    None
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `[a-z0-9_-]+`.
fn is_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Why `name` breaks git's ref-name rules (`git check-ref-format`), if it does.
fn ref_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if name == "@" {
        return Some("must not be `@` alone".to_owned());
    }
    if name.starts_with('-') {
        return Some("must not start with `-`".to_owned());
    }
    if let Some(c) = name.chars().find(|&c| {
        c.is_ascii_control() || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\')
    }) {
        let what = match c {
            ' ' => "a space".to_owned(),
            c if c.is_ascii_control() => format!("the control character {c:?}"),
            c => format!("`{c}`"),
        };
        return Some(format!("must not contain {what}"));
    }
    for (pattern, what) in [("..", "`..`"), ("//", "`//`"), ("@{", "`@{`")] {
        if name.contains(pattern) {
            return Some(format!("must not contain {what}"));
        }
    }
    if name.starts_with('/') {
        return Some("must not start with `/`".to_owned());
    }
    if name.ends_with('/') {
        return Some("must not end with `/`".to_owned());
    }
    if name.ends_with('.') {
        return Some("must not end with `.`".to_owned());
    }
    for component in name.split('/') {
        if component.starts_with('.') {
            return Some(format!("the part {component:?} must not start with `.`"));
        }
        if component.ends_with(".lock") {
            return Some(format!("the part {component:?} must not end with `.lock`"));
        }
    }
    None
}

/// Why `url` is neither an http(s) URL nor a domain pattern, if it is not.
fn url_problem(url: &str) -> Option<String> {
    if url.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("must not contain spaces or control characters".to_owned());
    }
    if let Some(rest) = strip_prefix_ignore_case(url, "https://")
        .or_else(|| strip_prefix_ignore_case(url, "http://"))
    {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        return (!is_host_and_port(&rest[..end]))
            .then(|| "the URL has no valid host (e.g. `https://example.com/path`)".to_owned());
    }
    if let Some((scheme, _)) = url.split_once(':') {
        if url[scheme.len()..].starts_with("://") || !is_host_and_port(url) {
            return Some(format!(
                "the scheme `{scheme}:` is not allowed, only http and https"
            ));
        }
    }
    (!is_host_and_port(url)).then(|| "not a URL or domain pattern".to_owned())
}

fn strip_prefix_ignore_case<'s>(s: &'s str, prefix: &str) -> Option<&'s str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `host` or `host:port`, where host is a domain (optionally `*.`-prefixed), an IPv4 address
/// or a bracketed IPv6 address.
fn is_host_and_port(s: &str) -> bool {
    if let Some(inner) = s.strip_prefix('[') {
        let Some((addr, after)) = inner.split_once(']') else {
            return false;
        };
        let is_ipv6 = !addr.is_empty()
            && addr
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
        return is_ipv6 && (after.is_empty() || after.strip_prefix(':').is_some_and(is_port));
    }
    match s.split_once(':') {
        Some((host, port)) => is_domain_pattern(host) && is_port(port),
        None => is_domain_pattern(s),
    }
}

/// A TCP port: 1–65535.
fn is_port(p: &str) -> bool {
    p.len() <= 5
        && p.bytes().all(|b| b.is_ascii_digit())
        && p.parse::<u32>().is_ok_and(|n| (1..=65_535).contains(&n))
}

/// `example.com`, `*.example.com`, `localhost`, `10.0.0.1`: labels of letters, digits and `-`
/// (not at either end), at most 63 characters each and 253 in all.
fn is_domain_pattern(host: &str) -> bool {
    let domain = host.strip_prefix("*.").unwrap_or(host);
    !domain.is_empty()
        && domain.len() <= 253
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
}

/// Why a relative path is unusable, found without touching the file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathProblem {
    Empty,
    Absolute,
    Escapes,
}

/// Depth of a relative path after lexical normalization (`a/b/..` is 1, `.` is 0), or why it
/// is not a path that stays inside its root. Both `/` and `\` separate components, so a plan
/// written on Windows is judged the same way everywhere.
fn lexical_depth(path: &str) -> Result<usize, PathProblem> {
    if path.trim().is_empty() {
        return Err(PathProblem::Empty);
    }
    if is_absolute_anywhere(path) {
        return Err(PathProblem::Absolute);
    }
    let mut depth = 0usize;
    for component in path.split(['/', '\\']) {
        match component {
            "" | "." => {}
            ".." => depth = depth.checked_sub(1).ok_or(PathProblem::Escapes)?,
            _ => depth += 1,
        }
    }
    Ok(depth)
}

/// Absolute on Unix or Windows (`/x`, `\x`, `\\server\share`, `C:\x`, `C:x`), or home-relative
/// (`~`, `~/x`), which a shell or agent would expand to somewhere outside.
fn is_absolute_anywhere(path: &str) -> bool {
    let bytes = path.as_bytes();
    matches!(bytes.first(), Some(b'/' | b'\\'))
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
        || path == "~"
        || path.starts_with("~/")
        || path.starts_with("~\\")
}

/// Whether `path` (relative) exists under `root` as a `kind`, without leaving it through a
/// symlink.
fn on_disk_problem(root: &Path, path: &str, kind: PathKind) -> Option<String> {
    let joined = root.join(path);
    let real = match joined.canonicalize() {
        Ok(real) => real,
        Err(_) => {
            return Some(format!(
                "does not exist in the repository (looked for {})",
                joined.display()
            ))
        }
    };
    if !real.starts_with(root) {
        return Some(format!(
            "resolves to {} through a symlink, outside the repository",
            real.display()
        ));
    }
    match kind {
        PathKind::File if !real.is_file() => Some("is not a file".to_owned()),
        PathKind::Folder if !real.is_dir() => Some("is not a folder".to_owned()),
        _ => None,
    }
}
