//! Remote execution (SPEC §16): where a job's phases run is a plug-in point.
//!
//! Coordinating a plan stays in its actor (state machine, in-memory merges, journal). Running
//! a job's phases — its worktree, setup, prechecks, work, commit, postchecks — is what an
//! [`Executor`] does elsewhere: the actor computes the job's merge-fi commit in memory, pushes
//! it to a git remote every machine reaches ([`JobRefs::base`]), hands a [`JobOrder`] to the
//! executor and waits for its [`JobReport`]; the result commit comes back through the same
//! remote ([`JobRefs::result`]) and merge-ri runs in memory as for a local job.
//!
//! Without an executor (the default) every job runs in this process, as it always did. On a
//! worker, [`Orchestrator::execute_order`](crate::Orchestrator::execute_order) runs an order's
//! phases with the same pipeline code a local job uses, in a clone of the remote.
//!
//! Which jobs go to the executor: those of `isolation: "worktree"` plans that run work
//! (shell, process, agent) from the start or from a phase up to the commit. Composite jobs
//! (teams, pipelines, splits), jobs only waiting (timers, approvals), a woken agent going on
//! from its checkpoint, and a job resuming after its commit run where the plan is
//! coordinated: they need the plan's own state, or have nothing to run.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::git::CommitId;
use crate::ids::{NodeId, PlanId};
use crate::repository::StoreError;
use crate::state::{FailureReason, Phase, StateChange};

/// The ref names of one attempt of one job on the shared remote:
/// `refs/orchestrator/jobs/<planId>/<nodeId>/<attempt>/{base,result}`.
///
/// ```
/// use orchestrator_core::remote::JobRefs;
/// let refs = JobRefs::new(&"p1".into(), &"build".into(), 2);
/// assert_eq!(refs.base, "refs/orchestrator/jobs/p1/build/2/base");
/// assert_eq!(refs.result, "refs/orchestrator/jobs/p1/build/2/result");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JobRefs {
    /// Where the coordinator pushes the commit the job starts from.
    pub base: String,
    /// Where the worker pushes the job's result commit.
    pub result: String,
}

impl JobRefs {
    /// The refs of `attempt` of job `node` of `plan`. A sub-job's id (`parent/child`) keeps
    /// its slash: refs are paths.
    pub fn new(plan: &PlanId, node: &NodeId, attempt: u32) -> Self {
        let prefix = format!("refs/orchestrator/jobs/{plan}/{node}/{attempt}");
        JobRefs {
            base: format!("{prefix}/base"),
            result: format!("{prefix}/result"),
        }
    }

    /// The prefix of every ref of `plan`'s jobs (what archiving a plan removes).
    pub fn of_plan(plan: &PlanId) -> String {
        format!("refs/orchestrator/jobs/{plan}/")
    }
}

/// What a worker needs to run one attempt of a job's phases. The job's definition is the
/// plan's, read from the store the coordinator writes; the order carries what only the
/// coordinator knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct JobOrder {
    /// The plan.
    pub plan: PlanId,
    /// The job's node id.
    pub node: NodeId,
    /// The attempt the phases belong to.
    pub attempt: u32,
    /// The commit the job's worktree starts from (its merge-fi), pushed to `remote`.
    pub base: CommitId,
    /// The first phase to run (earlier ones completed in an earlier attempt; merge-fi and
    /// setup always run on a fresh worktree).
    pub resume_from: Phase,
    /// The git remote the base is fetched from and the result pushed to.
    pub remote: String,
    /// The refs of this attempt on the remote.
    pub refs: JobRefs,
}

/// How a job's phases ended on a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum JobOutcome {
    /// The phases passed; the job's result commit (pushed to [`JobRefs::result`]).
    Committed {
        /// The result commit.
        commit: CommitId,
    },
    /// A phase failed (or the run was canceled).
    Failed {
        /// The phase that failed.
        phase: Option<Phase>,
        /// Why.
        reason: FailureReason,
        /// What happened, redacted like the log.
        message: String,
    },
    /// The worker running it is gone (its lease expired: killed, stalled, cut off): the
    /// attempt ends as `crashed` and the engine starts a new one.
    Lost {
        /// What was seen.
        message: String,
    },
}

/// What a worker reports back: the attempt's progress as state changes (phases started and
/// ended, session ids, usage, outputs; node index as the worker's copy of the plan numbers
/// it, which the coordinator replaces with its own) and how it ended. The phase logs went to
/// the plan's store as the phases ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JobReport {
    /// The attempt's changes, in order.
    pub changes: Vec<StateChange>,
    /// How it ended.
    pub outcome: JobOutcome,
}

impl JobReport {
    /// A report with nothing but `outcome`.
    pub fn new(outcome: JobOutcome) -> Self {
        JobReport {
            changes: Vec::new(),
            outcome,
        }
    }
}

/// Runs jobs' phases somewhere else than the coordinating process (SPEC §16).
///
/// `execute` returns once the order's phases ended (or were lost, or `cancel` fired: then as
/// soon as the executor told its worker to stop, with [`JobOutcome::Failed`] of reason
/// `canceled`). A store that keeps failing is an `Err`; the engine fails the job with it.
///
/// ```
/// use orchestrator_core::remote::{Executor, JobOrder, JobOutcome, JobReport};
/// use orchestrator_core::StoreError;
/// use tokio_util::sync::CancellationToken;
///
/// /// An executor that refuses everything (a real one enqueues the order for workers).
/// #[derive(Debug)]
/// struct Refusing;
///
/// #[async_trait::async_trait]
/// impl Executor for Refusing {
///     fn remote(&self) -> &str {
///         "file:///srv/git/shared.git"
///     }
///     async fn execute(
///         &self,
///         order: JobOrder,
///         _cancel: CancellationToken,
///     ) -> Result<JobReport, StoreError> {
///         Ok(JobReport::new(JobOutcome::Failed {
///             phase: None,
///             reason: orchestrator_core::state::FailureReason::StartupError,
///             message: format!("no worker for {}", order.node),
///         }))
///     }
/// }
/// let _executor: std::sync::Arc<dyn Executor> = std::sync::Arc::new(Refusing);
/// ```
#[async_trait]
pub trait Executor: Send + Sync + std::fmt::Debug + 'static {
    /// The git remote (URL or path) the coordinator pushes base commits to and fetches
    /// results from; every worker must reach it under the same name.
    fn remote(&self) -> &str;

    /// Runs `order` and reports how it went.
    async fn execute(
        &self,
        order: JobOrder,
        cancel: CancellationToken,
    ) -> Result<JobReport, StoreError>;
}
