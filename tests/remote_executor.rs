//! Remote execution's seam (SPEC §16, `orchestrator::core::remote`) in one process: the
//! coordinator's orchestrator hands jobs to an `Executor` that stands in for the PostgreSQL
//! queue — it runs each order on a second orchestrator (the worker's, sharing the store) in a
//! clone of a bare remote, as `PgWorker` does — and the results travel through the remote.
//! Checked with the `git` CLI:
//! - a diamond whose jobs all ran remotely lands the same tree as a local run, each attempt
//!   with one merge-fi (the coordinator's) and the worker's phases;
//! - an order lost with its worker (twice) is a crashed attempt and runs again; three lost
//!   in a row fail the job;
//! - a job failing on the worker fails with the worker's phase, reason and output;
//! - an `approval: after` job run remotely waits for its approval before its commit merges.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use orchestrator::agents::{ProcessRunner, ShellRunner};
use orchestrator::core::plan::{Approval, JobSpec, PlanSpec, WorkSpec};
use orchestrator::core::remote::{Executor, JobOrder, JobOutcome, JobReport};
use orchestrator::core::state::{FailureReason, NodeStatus, Phase};
use orchestrator::core::{
    GitOperations, InMemoryPlanRepository, Orchestrator, PlanId, PlanRepository, PlanStatus,
    StoreError,
};
use orchestrator::git::Git2Operations;
use orchestrator_testkit::fixtures::{git, TempRepo};
use tokio_util::sync::CancellationToken;

/// Runs orders on the worker's orchestrator in its clone of `remote`; the first `lose` orders
/// are lost (as if their worker died before it reported).
#[derive(Debug)]
struct Loopback {
    remote: String,
    clone: PathBuf,
    worker: Orchestrator,
    git: Git2Operations,
    lose: AtomicUsize,
    orders: AtomicUsize,
}

#[async_trait::async_trait]
impl Executor for Loopback {
    fn remote(&self) -> &str {
        &self.remote
    }

    async fn execute(
        &self,
        order: JobOrder,
        cancel: CancellationToken,
    ) -> Result<JobReport, StoreError> {
        self.orders.fetch_add(1, Ordering::SeqCst);
        let lost = self
            .lose
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if lost {
            return Ok(JobReport::new(JobOutcome::Lost {
                message: "worker w1 stopped renewing its lease".into(),
            }));
        }
        let failed = |message: String| {
            Ok(JobReport::new(JobOutcome::Failed {
                phase: None,
                reason: FailureReason::StartupError,
                message,
            }))
        };
        if let Err(e) = self
            .git
            .fetch(&self.clone, &order.remote, &order.refs.base)
            .await
        {
            return failed(format!("fetch: {e}"));
        }
        let report = match self.worker.execute_order(&order, &self.clone, cancel).await {
            Ok(report) => report,
            Err(e) => return failed(format!("execute: {e}")),
        };
        if let JobOutcome::Committed { commit } = &report.outcome {
            if let Err(e) = self
                .git
                .push(&self.clone, &order.remote, commit, &order.refs.result)
                .await
            {
                return failed(format!("push: {e}"));
            }
        }
        Ok(report)
    }
}

/// A repository, a bare remote, a worker clone and the coordinator wired to them.
struct Setup {
    repo: TempRepo,
    coordinator: Orchestrator,
    executor: Arc<Loopback>,
}

fn orchestrator(store: &Arc<dyn PlanRepository>) -> orchestrator::core::OrchestratorBuilder {
    Orchestrator::builder()
        .repository_arc(store.clone())
        .git(Git2Operations::new())
        .runner("shell", ShellRunner::new())
        .runner("process", ProcessRunner::new())
}

fn setup(lose: usize) -> Setup {
    let repo = TempRepo::new();
    let bare = repo.scratch.join("remote.git");
    let clone = repo.scratch.join("clone");
    git(&repo.scratch, &["init", "--quiet", "--bare", path(&bare)]);
    git(&repo.scratch, &["init", "--quiet", path(&clone)]);
    let store: Arc<dyn PlanRepository> = Arc::new(InMemoryPlanRepository::new());
    let worker = orchestrator(&store).build().expect("worker");
    let executor = Arc::new(Loopback {
        remote: format!("file://{}", bare.display()),
        clone,
        worker,
        git: Git2Operations::new(),
        lose: AtomicUsize::new(lose),
        orders: AtomicUsize::new(0),
    });
    let coordinator = orchestrator(&store)
        .executor(executor.clone())
        .build()
        .expect("coordinator");
    Setup {
        repo,
        coordinator,
        executor,
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn diamond() -> PlanSpec {
    PlanSpec::new("diamond")
        .target_branch("result")
        .job(JobSpec::new(
            "fetch",
            "Fetch",
            WorkSpec::shell("echo fetched > fetch.txt"),
        ))
        .job(
            JobSpec::new("left", "Left", WorkSpec::shell("cat fetch.txt > left.txt"))
                .depends_on(["fetch"]),
        )
        .job(
            JobSpec::new(
                "right",
                "Right",
                WorkSpec::process("cp", ["fetch.txt", "right.txt"]),
            )
            .depends_on(["fetch"]),
        )
        .job(
            JobSpec::new(
                "join",
                "Join",
                WorkSpec::shell("cat left.txt right.txt > join.txt"),
            )
            .depends_on(["left", "right"]),
        )
}

async fn run(o: &Orchestrator, spec: PlanSpec, dir: &Path) -> (PlanId, PlanStatus) {
    let id = o.run(spec, dir).await.expect("run");
    let status = tokio::time::timeout(Duration::from_secs(60), o.wait_or_waiting(&id))
        .await
        .expect("in time")
        .expect("wait");
    (id, status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diamond_run_remotely_lands_the_tree_of_a_local_run() {
    let s = setup(0);
    let (id, status) = run(&s.coordinator, diamond(), &s.repo.dir).await;
    assert_eq!(status, PlanStatus::Succeeded);
    assert_eq!(
        s.executor.orders.load(Ordering::SeqCst),
        4,
        "every job ran remotely"
    );

    let local_repo = TempRepo::new();
    let store: Arc<dyn PlanRepository> = Arc::new(InMemoryPlanRepository::new());
    let local = orchestrator(&store).build().expect("local");
    let (_, local_status) = run(&local, diamond(), &local_repo.dir).await;
    assert_eq!(local_status, PlanStatus::Succeeded);
    let tree = |repo: &TempRepo| git(&repo.dir, &["rev-parse", "result^{tree}"]);
    assert_eq!(tree(&s.repo), tree(&local_repo));
    assert_eq!(
        git(&s.repo.dir, &["show", "result:join.txt"]),
        "fetched\nfetched"
    );

    let record = s.coordinator.status(&id).await.expect("status");
    for node in record.state.nodes.iter().take(4) {
        let attempt = node.last_attempt().expect("an attempt");
        let phases: Vec<Phase> = attempt.phases.iter().map(|p| p.phase).collect();
        assert_eq!(
            phases.iter().filter(|p| **p == Phase::MergeFi).count(),
            1,
            "one merge-fi: {phases:?}"
        );
        assert!(
            phases.contains(&Phase::Work) && phases.contains(&Phase::Commit),
            "{phases:?}"
        );
    }
    // The results came back under the plan's refs; the user's checkout is untouched.
    let refs = git(
        &s.repo.dir,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/orchestrator/jobs/",
        ],
    );
    assert_eq!(refs.lines().count(), 4, "{refs}");
    assert_eq!(git(&s.repo.dir, &["status", "--porcelain"]), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_order_runs_again_as_a_crashed_attempt_and_three_in_a_row_fail_the_job() {
    let one = || {
        PlanSpec::new("one").job(JobSpec::new(
            "only",
            "Only",
            WorkSpec::shell("echo x > x.txt"),
        ))
    };
    let s = setup(2);
    let (id, status) = run(&s.coordinator, one(), &s.repo.dir).await;
    assert_eq!(status, PlanStatus::Succeeded);
    let record = s.coordinator.status(&id).await.expect("status");
    let reasons: Vec<_> = record.state.nodes[0]
        .attempts
        .iter()
        .map(|a| a.extra.failure_reason)
        .collect();
    assert_eq!(
        reasons,
        vec![
            Some(FailureReason::Crashed),
            Some(FailureReason::Crashed),
            None
        ]
    );

    let s = setup(3);
    let (id, status) = run(&s.coordinator, one(), &s.repo.dir).await;
    assert_eq!(status, PlanStatus::Failed);
    let record = s.coordinator.status(&id).await.expect("status");
    let node = &record.state.nodes[0];
    assert_eq!(node.status, NodeStatus::Failed);
    assert_eq!(node.attempts.len(), 3);
    assert_eq!(
        node.last_attempt().and_then(|a| a.extra.failure_reason),
        Some(FailureReason::PhaseFailed)
    );
    assert!(
        node.extra
            .error
            .as_deref()
            .unwrap_or("")
            .contains("stopped renewing"),
        "{:?}",
        node.extra.error
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_failing_on_the_worker_fails_with_the_workers_phase_and_output() {
    let s = setup(0);
    let spec = PlanSpec::new("failing").job(JobSpec::new(
        "broken",
        "Broken",
        WorkSpec::shell("echo 'no such thing' >&2; exit 3"),
    ));
    let (id, status) = run(&s.coordinator, spec, &s.repo.dir).await;
    assert_eq!(status, PlanStatus::Failed);
    let record = s.coordinator.status(&id).await.expect("status");
    let node = &record.state.nodes[0];
    let attempt = node.last_attempt().expect("attempt");
    assert_eq!(attempt.extra.failed_phase, Some(Phase::Work));
    assert_eq!(
        attempt.extra.failure_reason,
        Some(FailureReason::PhaseFailed)
    );
    assert!(
        node.extra
            .error
            .as_deref()
            .unwrap_or("")
            .contains("no such thing"),
        "{:?}",
        node.extra.error
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_after_job_run_remotely_waits_before_its_commit_merges() {
    let s = setup(0);
    let mut gated = JobSpec::new("gated", "Gated", WorkSpec::shell("echo g > g.txt"));
    gated.extra.make_mut().approval = Some(Approval::After);
    let spec = PlanSpec::new("gated").target_branch("result").job(gated);
    let (id, status) = run(&s.coordinator, spec, &s.repo.dir).await;
    assert_eq!(status, PlanStatus::Waiting, "waits for its approval");
    let landed = git(&s.repo.dir, &["ls-tree", "--name-only", "result"]);
    assert!(!landed.contains("g.txt"), "nothing landed yet: {landed}");
    s.coordinator.approve(&id, "gated").await.expect("approve");
    let status = tokio::time::timeout(Duration::from_secs(30), s.coordinator.wait(&id))
        .await
        .expect("in time")
        .expect("wait");
    assert_eq!(status, PlanStatus::Succeeded);
    assert_eq!(git(&s.repo.dir, &["show", "result:g.txt"]), "g");
    assert_eq!(
        s.executor.orders.load(Ordering::SeqCst),
        1,
        "the approval ran nothing again"
    );
}
