//! The coordinator's side of remote execution (SPEC §16): [`PgExecutor`], the
//! [`Executor`] that hands each job's order to the [work queue](PgWorkQueue) and waits for a
//! worker's report.
//!
//! One collector task per plan with orders in flight collects the finished items and takes
//! back the expired ones (by the database's clock) every poll interval, and wakes the order
//! each belongs to. A database that does not answer (restarted, cut off) is tried again with
//! a growing pause; the orders keep waiting meanwhile, and the workers' leases, which the
//! workers cannot renew either, decide afterwards which attempts were lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::remote::{Executor, JobOrder, JobOutcome, JobReport};
use orchestrator_core::state::FailureReason;
use orchestrator_core::{PlanId, StoreError};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::queue::{PgWorkQueue, WorkItem};

/// How often finished and expired items are looked for (default).
const POLL: Duration = Duration::from_millis(20);
/// The longest pause between tries while the database does not answer.
const LONGEST_PAUSE: Duration = Duration::from_secs(2);

/// An order's key in the queue: plan, node id, attempt.
type Key = (PlanId, String, u32);

/// What the collector found for an order.
#[derive(Debug)]
enum Found {
    Report(serde_json::Value, String),
    Lost(String),
}

/// Runs jobs' phases on the workers of a PostgreSQL [work queue](PgWorkQueue), their git
/// going through `remote`.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use orchestrator_core::Orchestrator;
/// use orchestrator_storage::pg::{PgExecutor, PgOptions, PgPlanRepository};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
/// let executor = PgExecutor::new(store.work_queue(Duration::from_secs(30)), "git@example.com:team/repo.git");
/// let orchestrator = Orchestrator::builder()
///     .repository(store)
///     .executor(Arc::new(executor))
///     .build()?;
/// # let _ = orchestrator; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PgExecutor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    queue: PgWorkQueue,
    remote: String,
    poll: Duration,
    /// The orders waiting, and whether their plan's collector runs.
    waiting: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    orders: HashMap<Key, oneshot::Sender<Found>>,
    collecting: std::collections::HashSet<PlanId>,
}

impl PgExecutor {
    /// An executor enqueuing on `queue`, git through `remote` (a URL or path every worker
    /// reaches under the same name).
    pub fn new(queue: PgWorkQueue, remote: impl Into<String>) -> Self {
        PgExecutor {
            inner: Arc::new(Inner {
                queue,
                remote: remote.into(),
                poll: POLL,
                waiting: Mutex::new(Waiting::default()),
            }),
        }
    }

    /// How often finished and expired items are looked for (default 20 ms); set before the
    /// executor is cloned or handed to an orchestrator.
    pub fn poll_interval(mut self, poll: Duration) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.poll = poll.max(Duration::from_millis(1));
        }
        self
    }
}

impl Inner {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The collector of `plan`, while it has orders waiting.
    async fn collect(self: Arc<Self>, plan: PlanId) {
        let mut pause = self.poll;
        loop {
            tokio::time::sleep(pause).await;
            {
                // Under the lock an order registers under: none is added in between.
                let mut waiting = self.waiting();
                if !waiting.orders.keys().any(|k| k.0 == plan) {
                    waiting.collecting.remove(&plan);
                    return;
                }
            }
            match self.round(&plan).await {
                Ok(()) => pause = self.poll,
                Err(e) => {
                    tracing::warn!(plan = %plan, error = %e, "cannot read the work queue; trying again");
                    pause = (pause * 2).clamp(self.poll, LONGEST_PAUSE);
                }
            }
        }
    }

    async fn round(&self, plan: &PlanId) -> Result<(), StoreError> {
        for done in self.queue.collect(plan).await? {
            self.wake(&done.item, Found::Report(done.result, done.worker));
        }
        for lost in self.queue.expire(plan).await? {
            self.wake(&lost.item, Found::Lost(lost.worker));
        }
        Ok(())
    }

    fn wake(&self, item: &WorkItem, found: Found) {
        let key = (item.plan.clone(), item.node.clone(), item.attempt);
        match self.waiting().orders.remove(&key) {
            Some(tx) => {
                let _ = tx.send(found);
            }
            // An order of an earlier coordinator of the plan: its attempt was re-run.
            None => {
                tracing::debug!(plan = %item.plan, node = %item.node, attempt = item.attempt, "work item nobody waits for")
            }
        }
    }

    /// Enqueues, trying again while the database does not answer (an enqueue is idempotent).
    async fn enqueue(&self, item: &WorkItem, cancel: &CancellationToken) -> bool {
        let mut pause = self.poll;
        loop {
            match self.queue.enqueue(item).await {
                Ok(()) => return true,
                Err(e) => {
                    tracing::warn!(node = %item.node, error = %e, "cannot enqueue a job; trying again")
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return false,
                () = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }
}

#[async_trait]
impl Executor for PgExecutor {
    fn remote(&self) -> &str {
        &self.inner.remote
    }

    async fn execute(
        &self,
        order: JobOrder,
        cancel: CancellationToken,
    ) -> Result<JobReport, StoreError> {
        let inner = &self.inner;
        let payload = serde_json::to_value(&order).map_err(|e| StoreError::Rejected {
            plan: order.plan.clone(),
            message: format!("cannot encode the order of {}: {e}", order.node),
        })?;
        let item = WorkItem::new(
            order.plan.clone(),
            order.node.as_str(),
            order.attempt,
            payload,
        );
        let key = (order.plan.clone(), item.node.clone(), order.attempt);
        let (tx, rx) = oneshot::channel();
        let start_collector = {
            let mut waiting = inner.waiting();
            waiting.orders.insert(key.clone(), tx);
            waiting.collecting.insert(order.plan.clone())
        };
        if start_collector {
            tokio::spawn(inner.clone().collect(order.plan.clone()));
        }
        let canceled = || {
            JobReport::new(JobOutcome::Failed {
                phase: None,
                reason: FailureReason::Canceled,
                message: "canceled".into(),
            })
        };
        if !inner.enqueue(&item, &cancel).await {
            inner.waiting().orders.remove(&key);
            return Ok(canceled());
        }
        tokio::select! {
            found = rx => Ok(match found {
                Ok(Found::Report(value, worker)) => serde_json::from_value(value).unwrap_or_else(|e| {
                    JobReport::new(JobOutcome::Failed {
                        phase: None,
                        reason: FailureReason::PhaseFailed,
                        message: format!("worker {worker} sent a report this coordinator cannot read: {e}"),
                    })
                }),
                Ok(Found::Lost(worker)) => JobReport::new(JobOutcome::Lost {
                    message: format!("worker {worker} stopped renewing its lease"),
                }),
                Err(_) => JobReport::new(JobOutcome::Lost { message: "the order's collector stopped".into() }),
            }),
            () = cancel.cancelled() => {
                inner.waiting().orders.remove(&key);
                if let Err(e) = inner.queue.withdraw(&order.plan, &item.node, order.attempt).await {
                    tracing::warn!(node = %item.node, error = %e, "cannot withdraw a canceled job; its worker runs it to its end");
                }
                Ok(canceled())
            }
        }
    }
}
