//! Composite jobs (SPEC §12, "plans that grow"): a job that expands at run time into sub-jobs,
//! ordinary nodes named `<parent>/<name>`.
//!
//! A [`Controller`] decides, from stored facts only (the plan, the composite job, its commit,
//! what it asked for, its sub-jobs' states and outputs), what comes next: more sub-jobs, done,
//! or failed. It does no I/O, so asking again after a crash gives the same answer. The engine
//! applies a [`Decision::Spawn`] as a plan edit in the same journal batch as the completion
//! that caused it, so a crash neither loses nor repeats a sub-job. Sub-jobs branch from the
//! composite job's commit; the composite job depends on them, and once they all succeeded it
//! runs on: their commits are merged into its own, its postchecks run, and its commit flows
//! on like any job's.
//!
//! The controller is found by work type: `team` and `pipeline` work (SPEC §13; their
//! controllers are in the `orchestrator-workflows` crate) is composite from the start — the
//! job runs nothing itself, its commit is its merged dependencies, and its controller is asked
//! at once. Any other job becomes composite when its run leaves a split manifest, and the
//! `split` controller ([`split`]) decides: an agent job that ran out of room commits what it
//! has and leaves a manifest of the rest.

pub mod split;

use std::fmt;

use crate::plan::{JobSpec, PlanSpec, SplitPolicy, WorkSpec};
use crate::state::NodeStatus;

pub use split::{SplitController, SplitItem, SplitManifest, MANIFEST_FILE};

/// Most sub-jobs one decision may add.
pub const MAX_SUB_JOBS: usize = 8;
/// Deepest nesting of sub-jobs below a plan job (a plan job is at depth 0).
pub const MAX_DEPTH: usize = 3;

/// What a controller decides from. Everything in it is stored in the plan's journal.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CompositeFacts<'a> {
    /// The plan.
    pub plan: &'a PlanSpec,
    /// The composite job.
    pub job: &'a JobSpec,
    /// How deep the composite job is nested (0 for a plan job).
    pub depth: usize,
    /// The composite job's commit, once it has one.
    pub commit: Option<&'a str>,
    /// What the composite job's own run asked for (a split manifest's text); `None` when
    /// the engine asks again because the sub-jobs ended.
    pub request: Option<&'a str>,
    /// Its sub-jobs so far, in the plan's order.
    pub children: Vec<ChildFacts<'a>>,
}

impl<'a> CompositeFacts<'a> {
    /// The facts of composite job `job` of `plan` (depth 0, no commit, no request, no
    /// sub-jobs yet), for testing a controller; set the rest with the methods below.
    pub fn new(plan: &'a PlanSpec, job: &'a JobSpec) -> Self {
        CompositeFacts {
            plan,
            job,
            depth: 0,
            commit: None,
            request: None,
            children: Vec::new(),
        }
    }

    /// `job` made a sub-job of the composite job: its `parent` is the composite job, and it
    /// branches from the composite job's commit (`baseBranch`).
    pub fn sub_job(&self, mut job: JobSpec) -> JobSpec {
        let extra = job.extra.make_mut();
        extra.parent = Some(self.job.producer_id.clone());
        extra.base_branch = self.commit.map(str::to_owned);
        job
    }

    /// With this commit of the composite job.
    pub fn commit(mut self, commit: &'a str) -> Self {
        self.commit = Some(commit);
        self
    }

    /// With these sub-jobs.
    pub fn children(mut self, children: Vec<ChildFacts<'a>>) -> Self {
        self.children = children;
        self
    }
}

impl<'a> ChildFacts<'a> {
    /// A sub-job with this producerId, status and output (no commit).
    pub fn new(producer_id: &'a str, status: NodeStatus, output: Option<&'a str>) -> Self {
        ChildFacts {
            producer_id,
            status,
            output,
            commit: None,
            attempts: 1,
        }
    }

    /// With this many attempts.
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }
}

/// One sub-job, as a controller sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChildFacts<'a> {
    /// Its producerId (`<parent>/<name>`).
    pub producer_id: &'a str,
    /// Its status.
    pub status: NodeStatus,
    /// Its output, when it has one.
    pub output: Option<&'a str>,
    /// Its commit, when it has one.
    pub commit: Option<&'a str>,
    /// How many attempts it has had (a failed sub-job retried twice has 3).
    pub attempts: u32,
}

/// A controller's answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Decision {
    /// Add these sub-jobs (producerIds `<parent>/<name>`, dependencies among the composite
    /// job's sub-jobs). The engine refuses, failing the composite job with the reason, an
    /// answer that reuses a name, makes a cycle or passes [`MAX_SUB_JOBS`] or [`MAX_DEPTH`].
    Spawn(Vec<JobSpec>),
    /// The composite job is done: its sub-jobs' commits are merged into its own and it goes
    /// on, with this output.
    Done {
        /// Its output (for its dependents and the job JSON).
        output: Option<String>,
    },
    /// The composite job is done, but only these sub-jobs' commits are merged into its own
    /// (producerIds; a best-of-N pick). The others keep their work on their own commits.
    Keep {
        /// The sub-jobs whose commits are merged.
        only: Vec<String>,
        /// Its output.
        output: Option<String>,
    },
    /// Run these failed sub-jobs again (producerIds), each as a new attempt of the same
    /// sub-job, after `after_seconds` (a back-off kept as a timer wait, so a restart neither
    /// skips nor restarts it). A retry that succeeds leaves no failure behind.
    Retry {
        /// The failed sub-jobs to run again.
        jobs: Vec<String>,
        /// How long to wait first, in seconds.
        after_seconds: f64,
    },
    /// The composite job failed.
    Failed {
        /// Why, for the person reading the job.
        reason: String,
    },
}

/// Decides what a composite job does next, from stored facts only (see the module docs).
/// Registered on the builder by work type, like a runner
/// ([`crate::OrchestratorBuilder::controller`]).
///
/// ```
/// use orchestrator_core::composite::{CompositeFacts, Controller, Decision};
///
/// /// Done as soon as it is asked: a composite job with no sub-jobs.
/// #[derive(Debug)]
/// struct Nothing;
///
/// impl Controller for Nothing {
///     fn decide(&self, _facts: &CompositeFacts<'_>) -> Decision {
///         Decision::Done { output: None }
///     }
/// }
/// ```
pub trait Controller: Send + Sync + fmt::Debug + 'static {
    /// The next step of the composite job `facts.job`.
    fn decide(&self, facts: &CompositeFacts<'_>) -> Decision;

    /// Completes composite job `job` of a plan being created in `repo`, before the plan is
    /// validated and stored (a team's Squad folder or preset read into its spec): the one
    /// moment a controller may read files, so that the stored spec says everything and every
    /// later decision is pure. Problems are refused like validation's (the plan is not
    /// created). The default changes nothing.
    fn prepare(
        &self,
        job: &mut JobSpec,
        repo: &std::path::Path,
    ) -> Result<(), Vec<crate::plan::ValidationError>> {
        let _ = (job, repo);
        Ok(())
    }

    /// Judges a sub-job of `parent` whose phases passed, before it counts as succeeded: an
    /// error fails it with reason `contract` and these words (a fail-closed output contract).
    /// The default accepts everything.
    fn check(&self, parent: &JobSpec, child: &JobSpec, output: Option<&str>) -> Result<(), String> {
        let _ = (parent, child, output);
        Ok(())
    }

    /// What the composite job has done so far, shown as its output while it runs (a team's
    /// iteration and scores); recorded whenever it gets sub-jobs. The default shows nothing.
    fn progress(&self, facts: &CompositeFacts<'_>) -> Option<String> {
        let _ = facts;
        None
    }
}

/// The name a composite job's controller is registered under: its work type for composite
/// work (`team`, `pipeline`), else `split`.
pub(crate) fn controller_kind(job: &JobSpec) -> &'static str {
    if job.work.is_composite() {
        job.work.kind()
    } else {
        "split"
    }
}

/// Why a controller's [`Decision::Spawn`] cannot be applied.
pub(crate) fn spawn_problem(facts: &CompositeFacts<'_>, jobs: &[JobSpec]) -> Option<String> {
    let parent = facts.job.producer_id.as_str();
    if jobs.is_empty() {
        return Some("the decision adds no sub-jobs".to_owned());
    }
    if jobs.len() > MAX_SUB_JOBS {
        return Some(format!(
            "the decision adds {} sub-jobs; at most {MAX_SUB_JOBS} at a time",
            jobs.len()
        ));
    }
    if facts.depth + 1 > MAX_DEPTH {
        return Some(format!(
            "`{parent}` is nested {} deep; sub-jobs go at most {MAX_DEPTH} deep",
            facts.depth
        ));
    }
    let prefix = format!("{parent}/");
    for job in jobs {
        let id = job.producer_id.as_str();
        if id.strip_prefix(&prefix).is_none_or(|n| !is_sub_job_name(n)) {
            return Some(format!(
                "sub-job `{id}` is not named `{parent}/<name>` or `{parent}/<iteration>/<name>`"
            ));
        }
        if facts.plan.jobs.iter().any(|j| j.producer_id == id) {
            return Some(format!(
                "sub-job `{id}` reuses the name of a job of the plan"
            ));
        }
        for dep in &job.dependencies {
            let sibling = dep.starts_with(&prefix)
                && (jobs.iter().any(|j| &j.producer_id == dep)
                    || facts.children.iter().any(|c| c.producer_id == dep));
            if !sibling {
                return Some(format!(
                    "sub-job `{id}` depends on `{dep}`, which is no sub-job of `{parent}`"
                ));
            }
        }
    }
    None
}

/// Whether `rest` (a sub-job's producerId after `<parent>/`) is `<name>` or
/// `<iteration>/<name>`: an iteration is a number, a name a producerId segment.
pub(crate) fn is_sub_job_name(rest: &str) -> bool {
    let name = match rest.split_once('/') {
        Some((iteration, name)) => {
            if iteration.is_empty() || !iteration.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            name
        }
        None => rest,
    };
    !name.contains('/') && crate::plan::producer_id_problem(name).is_none()
}

/// Whether `job` may split (SPEC §12): its `split`, else the plan's, else `allow` for agent
/// work and `never` for the rest; never at [`MAX_DEPTH`].
pub(crate) fn may_split(plan: &PlanSpec, job: &JobSpec) -> bool {
    let policy = job.extra.split.or(plan.split);
    let allowed = match policy {
        Some(p) => p == SplitPolicy::Allow,
        None => matches!(job.work, WorkSpec::Agent(_)),
    };
    allowed && (job.extra.parent.is_none() || depth_of(plan, job) < MAX_DEPTH)
}

/// How deep `job` is nested: the length of its chain of parents in `plan`.
pub(crate) fn depth_of(plan: &PlanSpec, job: &JobSpec) -> usize {
    let mut depth = 0;
    let mut parent = job.extra.parent.as_deref();
    while let Some(p) = parent {
        depth += 1;
        if depth > MAX_DEPTH + 1 {
            break;
        }
        parent = plan
            .jobs
            .iter()
            .find(|j| j.producer_id == p)
            .and_then(|j| j.extra.parent.as_deref());
    }
    depth
}
