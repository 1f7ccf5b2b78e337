//! The plan format of SPEC §2: typed, serde-backed, camelCase with snake_case aliases.
//!
//! Every struct denies unknown fields, so a typo is an error that names the field; parsing goes
//! through [`crate::plan::parse`] which adds the path (`jobs[3].work`) to that error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::WorkSpec;
use crate::extra::{Empty, Extra};

mod read;

/// Environment variables, sorted so that stored specs are deterministic.
pub type Env = BTreeMap<String, String>;

/// A whole plan: the input object of the reference's `create_copilot_plan` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanSpec {
    /// Human-readable plan name (1–200 characters).
    pub name: String,
    /// The jobs; order is kept and gives every job its node index.
    pub jobs: Vec<JobSpec>,
    /// Revision the plan starts from (branch, tag or commit). Default: current branch, else `main`.
    #[serde(
        default,
        alias = "base_branch",
        skip_serializing_if = "Option::is_none"
    )]
    pub base_branch: Option<String>,
    /// Branch that receives the validated result. Default: see SPEC §2.
    #[serde(
        default,
        alias = "target_branch",
        skip_serializing_if = "Option::is_none"
    )]
    pub target_branch: Option<String>,
    /// Jobs of this plan running at once; `0` (or absent) defers to the global capacity.
    #[serde(
        default,
        alias = "max_parallel",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_parallel: Option<u32>,
    /// Remove a job's worktree once its work has been consumed (default `true`).
    #[serde(
        default,
        alias = "clean_up_successful_work",
        skip_serializing_if = "Option::is_none"
    )]
    pub clean_up_successful_work: Option<bool>,
    /// Folders of the main checkout symlinked into every worktree (e.g. `node_modules`).
    #[serde(
        default,
        alias = "additional_symlink_dirs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub additional_symlink_dirs: Vec<String>,
    /// Create the plan paused: nothing starts until it is resumed.
    #[serde(default, alias = "start_paused", skip_serializing_if = "is_false")]
    pub start_paused: bool,
    /// Validation the snapshot node runs before the final merge.
    #[serde(default, alias = "verify_ri", skip_serializing_if = "Option::is_none")]
    pub verify_ri: Option<WorkSpec>,
    /// Environment for every job of the plan.
    #[serde(default, skip_serializing_if = "Env::is_empty")]
    pub env: Env,
    /// Plan chaining: start when the plan with this id has succeeded.
    #[serde(
        default,
        alias = "resume_after_plan",
        skip_serializing_if = "Option::is_none"
    )]
    pub resume_after_plan: Option<String>,
    /// Work run in every new worktree (e.g. `npm ci`).
    #[serde(
        default,
        alias = "worktree_init",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub worktree_init: Vec<WorkSpec>,
    /// Where jobs run: their own worktrees (default) or the repository directory itself.
    #[serde(default, skip_serializing_if = "Isolation::is_default")]
    pub isolation: Isolation,
    /// Where this plan's worktrees live: an absolute path, or one relative to the repository
    /// (default: the orchestrator's [`crate::OrchestratorOptions::worktree_root`], else
    /// `<repo>/.worktrees`). Every command, crash repair and the orphan sweep use it.
    #[serde(
        default,
        alias = "worktree_root",
        skip_serializing_if = "Option::is_none"
    )]
    pub worktree_root: Option<std::path::PathBuf>,
    /// Nested groups of jobs (the reference's documented form). Parsing and plan creation
    /// flatten them into `jobs` with qualified producerIds (see [`PlanSpec::flatten_groups`]),
    /// so a stored or validated plan has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupSpec>,
    /// Usage limits (SPEC §12): the plan pauses when a finished attempt reaches one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::usage::Budget>,
    /// Whether jobs may split into sub-jobs (SPEC §12) unless a job says otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitPolicy>,
    /// How long an agent's `wait` sleeps inside its turn, in seconds (SPEC §15's
    /// `waitThreshold`, default 30): a longer wait parks the job in `waiting(timer)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_threshold: Option<u64>,
    /// How long a parked agent's wait must be, in seconds, before its session is archived and
    /// its worktree removed until it wakes (SPEC §15's `dehydrateAfter`, default 300; needs
    /// a session archive on the engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dehydrate_after: Option<u64>,
}

/// A group of the nested form: a name (one path segment, `^[a-z0-9-]{3,64}$`), its jobs and its
/// subgroups. Groups never order anything; they give their jobs a namespace and a `group` path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupSpec {
    /// The group's name: one segment of its jobs' qualified producerIds.
    pub name: String,
    /// Jobs of this group; their producerIds need only be unique within it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<JobSpec>,
    /// Groups nested in this one, to any depth.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupSpec>,
}

impl GroupSpec {
    /// An empty group called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        GroupSpec {
            name: name.into(),
            jobs: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// Adds a job.
    pub fn job(mut self, job: JobSpec) -> Self {
        self.jobs.push(job);
        self
    }

    /// Adds a subgroup.
    pub fn group(mut self, group: GroupSpec) -> Self {
        self.groups.push(group);
        self
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl PlanSpec {
    /// A plan with a name and no jobs yet; add jobs with [`PlanSpec::job`].
    ///
    /// ```
    /// use orchestrator_core::plan::{JobSpec, PlanSpec, WorkSpec};
    /// let plan = PlanSpec::new("demo")
    ///     .job(JobSpec::new("build", "Build it", WorkSpec::shell("make")))
    ///     .job(JobSpec::new("test", "Test it", WorkSpec::shell("make test")).depends_on(["build"]));
    /// assert_eq!(plan.jobs.len(), 2);
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        PlanSpec {
            name: name.into(),
            jobs: Vec::new(),
            base_branch: None,
            target_branch: None,
            max_parallel: None,
            clean_up_successful_work: None,
            additional_symlink_dirs: Vec::new(),
            start_paused: false,
            verify_ri: None,
            env: Env::new(),
            resume_after_plan: None,
            worktree_init: Vec::new(),
            isolation: Isolation::Worktree,
            worktree_root: None,
            groups: Vec::new(),
            budget: None,
            split: None,
            wait_threshold: None,
            dehydrate_after: None,
        }
    }

    /// Adds a job.
    pub fn job(mut self, job: JobSpec) -> Self {
        self.jobs.push(job);
        self
    }

    /// Adds a group of the nested form (flattened by [`PlanSpec::flatten_groups`]).
    pub fn group(mut self, group: GroupSpec) -> Self {
        self.groups.push(group);
        self
    }

    /// Sets `maxParallel`.
    pub fn max_parallel(mut self, n: u32) -> Self {
        self.max_parallel = Some(n);
        self
    }

    /// Sets the isolation mode.
    pub fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    /// Sets the target branch.
    pub fn target_branch(mut self, branch: impl Into<String>) -> Self {
        self.target_branch = Some(branch.into());
        self
    }

    /// Sets the base revision.
    pub fn base_branch(mut self, rev: impl Into<String>) -> Self {
        self.base_branch = Some(rev.into());
        self
    }

    /// Effective `cleanUpSuccessfulWork` (default `true`).
    pub fn cleans_up(&self) -> bool {
        self.clean_up_successful_work.unwrap_or(true)
    }
}

/// Where a plan's jobs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Isolation {
    /// Every job in its own detached git worktree; results merged along the DAG (default).
    #[default]
    Worktree,
    /// Jobs run in the repository directory itself; no git phases (a plain DAG task runner).
    None,
}

impl Isolation {
    fn is_default(&self) -> bool {
        *self == Isolation::Worktree
    }
}

/// One job (a node of the DAG).
///
/// The fields most jobs leave unset are in [`JobExtra`], behind one pointer (`extra`): a plan of
/// a million jobs holds a million of these. The plan format is flat (`"group": ...` sits next to
/// `"task"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "read::RawJob")]
pub struct JobSpec {
    /// Stable id other jobs depend on: `^[a-z0-9-]{3,64}$`, unique in the plan.
    pub producer_id: String,
    /// Short description; also the commit message (`[Plan] <task>`).
    pub task: String,
    /// What the job does.
    pub work: WorkSpec,
    /// producerIds this job depends on (may be empty).
    pub dependencies: Vec<String>,
    /// Display name (default: the producerId).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Everything else: checks, environment, group, approval, ...
    #[serde(flatten)]
    pub extra: Extra<JobExtra>,
}

/// The fields of a [`JobSpec`] most jobs leave unset.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobExtra {
    /// Checks run before the work (boxed: most jobs have none, and a plan holds every job).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prechecks: Option<Box<WorkSpec>>,
    /// Checks run after the commit (boxed, as `prechecks`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postchecks: Option<Box<WorkSpec>>,
    /// Extra instructions for agent work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Base revision for a root job (overrides the plan's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    /// The job is expected to change nothing: an empty commit phase is a success.
    #[serde(skip_serializing_if = "is_false")]
    pub expects_no_changes: bool,
    /// Let an agent heal failed shell/process phases (default `true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_heal: Option<bool>,
    /// Visual grouping path such as `backend/api`; no effect on order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Environment for this job.
    #[serde(skip_serializing_if = "Env::is_empty")]
    pub env: Env,
    /// Hold the job for a person's approval (SPEC §12): `before` it starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// Whether the job may split into sub-jobs (SPEC §12): by default agent work may (when
    /// its context fills), shell and process work only with `allow`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitPolicy>,
    /// The composite job this one is a sub-job of (its producerId is `<parent>/<name>`). Set
    /// by the engine when the composite job expands; a plan file does not set it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Set on a sub-agent, a child job an agent spawned (SPEC §15), with the contract its
    /// outcome is checked against. Set by the engine; a plan file does not set it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_agent: Option<Box<crate::tools::SubAgentSpec>>,
}

impl Empty for JobExtra {
    fn empty() -> &'static Self {
        static EMPTY: JobExtra = JobExtra {
            prechecks: None,
            postchecks: None,
            instructions: None,
            base_branch: None,
            expects_no_changes: false,
            auto_heal: None,
            group: None,
            env: Env::new(),
            approval: None,
            split: None,
            parent: None,
            sub_agent: None,
        };
        &EMPTY
    }
}

/// Whether a job may split into sub-jobs (`"split"`, SPEC §12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SplitPolicy {
    /// It may: a manifest `.orchestrator-split.json` its work leaves turns into sub-jobs.
    Allow,
    /// It never splits (a manifest is left alone and committed like any file).
    Never,
}

/// When a job waits for a person's approval (SPEC §12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Approval {
    /// When it is ready, before anything of it runs.
    Before,
    /// After its phases passed (work, commit, postchecks), before its commit moves on
    /// (merge-ri, dependents): a person approves the commit itself.
    After,
}

impl JobSpec {
    /// A job with no dependencies.
    pub fn new(producer_id: impl Into<String>, task: impl Into<String>, work: WorkSpec) -> Self {
        JobSpec {
            producer_id: producer_id.into(),
            task: task.into(),
            work,
            dependencies: Vec::new(),
            name: None,
            extra: Extra::default(),
        }
    }

    /// This job, held for a person's approval as `approval` says.
    ///
    /// ```
    /// use orchestrator_core::plan::{Approval, JobSpec, WorkSpec};
    /// let job = JobSpec::new("deploy", "Deploy", WorkSpec::shell("make deploy"))
    ///     .approval(Approval::Before);
    /// assert_eq!(job.extra.approval, Some(Approval::Before));
    /// ```
    pub fn approval(mut self, approval: Approval) -> Self {
        self.extra.make_mut().approval = Some(approval);
        self
    }

    /// Adds dependencies (producerIds).
    pub fn depends_on<I, S>(mut self, deps: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.dependencies.extend(deps.into_iter().map(Into::into));
        self
    }

    /// Sets prechecks.
    pub fn prechecks(mut self, spec: WorkSpec) -> Self {
        self.extra.make_mut().prechecks = Some(Box::new(spec));
        self
    }

    /// Sets postchecks.
    pub fn postchecks(mut self, spec: WorkSpec) -> Self {
        self.extra.make_mut().postchecks = Some(Box::new(spec));
        self
    }

    /// Marks the job as expecting no changes.
    pub fn expects_no_changes(mut self) -> Self {
        self.extra.make_mut().expects_no_changes = true;
        self
    }

    /// Sets a job environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra.make_mut().env.insert(key.into(), value.into());
        self
    }

    /// Display name: `name`, else the producerId.
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.producer_id)
    }

    /// Replaces the specs a retry may replace (SPEC §3: `retry --work/--prechecks/--postchecks`);
    /// `None` keeps that spec as it is.
    ///
    /// ```
    /// use orchestrator_core::plan::{JobSpec, WorkSpec};
    /// let mut job = JobSpec::new("aaa", "a", WorkSpec::shell("false")).postchecks(WorkSpec::shell("test -f a"));
    /// job.replace_specs(Some(&WorkSpec::shell("true")), Some(&WorkSpec::shell("make lint")), None);
    /// assert_eq!(job.work, WorkSpec::shell("true"));
    /// assert_eq!(job.extra.prechecks.as_deref(), Some(&WorkSpec::shell("make lint")));
    /// assert_eq!(job.extra.postchecks.as_deref(), Some(&WorkSpec::shell("test -f a")));
    /// ```
    pub fn replace_specs(
        &mut self,
        work: Option<&WorkSpec>,
        prechecks: Option<&WorkSpec>,
        postchecks: Option<&WorkSpec>,
    ) {
        if let Some(w) = work {
            self.work = w.clone();
        }
        if let Some(p) = prechecks {
            self.extra.make_mut().prechecks = Some(Box::new(p.clone()));
        }
        if let Some(p) = postchecks {
            self.extra.make_mut().postchecks = Some(Box::new(p.clone()));
        }
    }
}
