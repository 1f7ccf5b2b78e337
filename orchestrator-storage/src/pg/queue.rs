//! The work queue of remote execution (SPEC §16): [`PgWorkQueue`]. A plan's coordinator
//! enqueues each attempt of a job that is ready to run; workers on any machine claim items
//! with `FOR UPDATE SKIP LOCKED` (two workers never get one item), renew their lease by
//! heartbeat, and finish with a result; the coordinator collects the results and, for items
//! whose lease expired (a worker killed, stalled or cut off), records a crashed attempt and
//! enqueues the next one.
//!
//! Every time is the database's (`now()`), never a worker's: a worker whose clock is off
//! changes nothing. Each claim increments the item's generation, its fencing token: a renew
//! or finish must name the generation it claimed, so a worker that stalled past its lease and
//! wakes up finds its claim gone ([`QueueError::Fenced`]) and its result is never used.

use std::time::Duration;

use orchestrator_core::{PlanId, StoreError};
use serde_json::Value;
use tokio_postgres::Row;

use super::error;
use super::plans::PgPlanRepository;

/// An attempt of a job to run: what the coordinator enqueues.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkItem {
    /// The plan.
    pub plan: PlanId,
    /// The job's node id.
    pub node: String,
    /// The attempt number.
    pub attempt: u32,
    /// What the worker needs to run it (base commit, specs, env ...), as JSON.
    pub payload: Value,
}

impl WorkItem {
    /// Attempt `attempt` of job `node` of `plan`.
    pub fn new(plan: PlanId, node: impl Into<String>, attempt: u32, payload: Value) -> Self {
        WorkItem {
            plan,
            node: node.into(),
            attempt,
            payload,
        }
    }
}

/// A worker's claim of an item: the item and the generation that fences it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Claim {
    /// The item's id in the queue.
    pub id: i64,
    /// What was enqueued.
    pub item: WorkItem,
    /// The claim's generation: only this claim may renew or finish the item.
    pub generation: i64,
    /// Who claimed it.
    pub worker: String,
}

/// A finished item, as the coordinator collects it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Finished {
    /// What was enqueued.
    pub item: WorkItem,
    /// The worker that finished it.
    pub worker: String,
    /// Its result, as the worker reported it.
    pub result: Value,
}

/// An item whose lease expired before it was finished: its worker is gone or stalled.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Expired {
    /// What was enqueued.
    pub item: WorkItem,
    /// The worker that held it.
    pub worker: String,
}

/// A queue call that did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The claim is not the item's current one any more (its lease expired, another worker
    /// claimed it, it was finished): nothing was changed, and the caller must stop the work.
    #[error("the claim of work item {id} (generation {generation}) is no longer valid: {why}")]
    Fenced {
        /// The item.
        id: i64,
        /// The claim's generation.
        generation: i64,
        /// What the item's row says now.
        why: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The work queue, on the same database (and pool) as a [`PgPlanRepository`].
///
/// ```no_run
/// use std::time::Duration;
/// use orchestrator_core::PlanId;
/// use orchestrator_storage::pg::{PgOptions, PgPlanRepository, WorkItem};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
/// let queue = store.work_queue(Duration::from_secs(30));
/// // The coordinator:
/// queue.enqueue(&WorkItem::new(PlanId::from("p"), "n1", 1, serde_json::json!({"base": "abc"}))).await?;
/// // A worker:
/// for claim in queue.claim("worker-a", 1).await? {
///     queue.renew(&claim).await?; // every few seconds while it works
///     queue.finish(&claim, serde_json::json!({"commit": "def"})).await?;
/// }
/// // The coordinator again:
/// let done = queue.collect(&PlanId::from("p")).await?;
/// # let _ = done; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PgWorkQueue {
    store: PgPlanRepository,
    lease: Duration,
}

impl PgPlanRepository {
    /// The work queue of this store's database; claims last `lease` without renewal.
    pub fn work_queue(&self, lease: Duration) -> PgWorkQueue {
        PgWorkQueue {
            store: self.clone(),
            lease,
        }
    }
}

/// Columns of an item as [`item_of`] reads them.
const ITEM: &str = "id, plan_id, node_id, attempt, payload, generation, worker";

fn item_of(row: &Row, what: &'static str, path: &std::path::Path) -> Result<Claim, StoreError> {
    let fail = |e| error::db(what, path, e);
    let attempt: i64 = row.try_get(3).map_err(fail)?;
    let plan: String = row.try_get(1).map_err(fail)?;
    Ok(Claim {
        id: row.try_get(0).map_err(fail)?,
        item: WorkItem {
            plan: PlanId::from(plan.as_str()),
            node: row.try_get(2).map_err(fail)?,
            attempt: u32::try_from(attempt).unwrap_or(0),
            payload: row.try_get(4).map_err(fail)?,
        },
        generation: row.try_get(5).map_err(fail)?,
        worker: row
            .try_get::<_, Option<String>>(6)
            .map_err(fail)?
            .unwrap_or_default(),
    })
}

impl PgWorkQueue {
    fn path(&self) -> std::path::PathBuf {
        self.store.location().join("work_items")
    }

    fn seconds(&self) -> f64 {
        self.lease.as_secs_f64()
    }

    /// Enqueues `item`. Enqueuing an attempt that is queued already changes nothing (a
    /// coordinator that crashed after enqueuing enqueues again on restart). Earlier attempts
    /// of the same job still queued or claimed are withdrawn in the same statement (see
    /// [`PgWorkQueue::withdraw`]): their attempt is over (a coordinator that took the plan
    /// over re-ran it), so their workers stop instead of finishing work nobody collects.
    pub async fn enqueue(&self, item: &WorkItem) -> Result<(), StoreError> {
        const WHAT: &str = "enqueue a work item";
        let client = self.store.inner.db.client(WHAT).await?;
        client
            .execute(
                "WITH stale AS (
                     UPDATE work_items SET state = 'withdrawn', finished_time = now()
                     WHERE plan_id = $1 AND node_id = $2 AND attempt < $3
                       AND state IN ('queued', 'claimed'))
                 INSERT INTO work_items (plan_id, node_id, attempt, payload)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (plan_id, node_id, attempt) DO NOTHING",
                &[
                    &item.plan.as_str(),
                    &item.node,
                    &i64::from(item.attempt),
                    &item.payload,
                ],
            )
            .await
            .map_err(|e| error::db(WHAT, &self.path(), e))?;
        Ok(())
    }

    /// Claims up to `max` queued items for `worker`, oldest first; items other workers are
    /// claiming at the same moment are skipped, never shared.
    pub async fn claim(&self, worker: &str, max: usize) -> Result<Vec<Claim>, StoreError> {
        const WHAT: &str = "claim work items";
        let client = self.store.inner.db.client(WHAT).await?;
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let sql = format!(
            "UPDATE work_items SET state = 'claimed', worker = $1, generation = generation + 1,
                 claimed_time = now(), lease_expires = now() + $3::float8 * interval '1 second'
             WHERE id IN (SELECT id FROM work_items WHERE state = 'queued'
                          ORDER BY id FOR UPDATE SKIP LOCKED LIMIT $2)
             RETURNING {ITEM}"
        );
        let rows = client
            .query(&sql, &[&worker, &limit, &self.seconds()])
            .await
            .map_err(|e| error::db(WHAT, &self.path(), e))?;
        let mut claims = rows
            .iter()
            .map(|r| item_of(r, WHAT, &self.path()))
            .collect::<Result<Vec<_>, _>>()?;
        claims.sort_by_key(|c| c.id);
        Ok(claims)
    }

    /// Renews `claim`'s lease. Refused ([`QueueError::Fenced`]) once the lease has expired —
    /// even before the coordinator noticed — so a worker that stalled stops.
    pub async fn renew(&self, claim: &Claim) -> Result<(), QueueError> {
        const WHAT: &str = "renew a work item's lease";
        let client = self.store.inner.db.client(WHAT).await?;
        let n = client
            .execute(
                "UPDATE work_items SET lease_expires = now() + $3::float8 * interval '1 second'
                 WHERE id = $1 AND generation = $2 AND state = 'claimed' AND lease_expires > now()",
                &[&claim.id, &claim.generation, &self.seconds()],
            )
            .await
            .map_err(|e| error::db(WHAT, &self.path(), e))?;
        self.fenced_unless(n == 1, claim).await
    }

    /// Finishes `claim` with `result`; [`QueueError::Fenced`] when the claim is no longer the
    /// item's (expired and taken back, claimed again): then the result is not kept.
    pub async fn finish(&self, claim: &Claim, result: Value) -> Result<(), QueueError> {
        const WHAT: &str = "finish a work item";
        let client = self.store.inner.db.client(WHAT).await?;
        let n = client
            .execute(
                "UPDATE work_items SET state = 'done', result = $3, finished_time = now()
                 WHERE id = $1 AND generation = $2 AND state = 'claimed'",
                &[&claim.id, &claim.generation, &result],
            )
            .await
            .map_err(|e| error::db(WHAT, &self.path(), e))?;
        self.fenced_unless(n == 1, claim).await
    }

    /// The finished items of `plan`, each handed out once.
    pub async fn collect(&self, plan: &PlanId) -> Result<Vec<Finished>, StoreError> {
        const WHAT: &str = "collect finished work items";
        let client = self.store.inner.db.client(WHAT).await?;
        let sql = format!(
            "UPDATE work_items SET state = 'collected'
             WHERE id IN (SELECT id FROM work_items WHERE plan_id = $1 AND state = 'done'
                          ORDER BY id FOR UPDATE SKIP LOCKED)
             RETURNING {ITEM}, result"
        );
        let rows = client
            .query(&sql, &[&plan.as_str()])
            .await
            .map_err(|e| error::db(WHAT, &self.path(), e))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let claim = item_of(row, WHAT, &self.path())?;
            let result = row
                .try_get(7)
                .map_err(|e| error::db(WHAT, &self.path(), e))?;
            out.push((
                claim.id,
                Finished {
                    item: claim.item,
                    worker: claim.worker,
                    result,
                },
            ));
        }
        out.sort_by_key(|(id, _)| *id);
        Ok(out.into_iter().map(|(_, f)| f).collect())
    }

    /// Takes back the items of `plan` whose lease expired (by the database's clock): they are
    /// `expired` from now on — their worker's renew and finish are fenced — and returned for
    /// the coordinator to record a crashed attempt and enqueue the next.
    pub async fn expire(&self, plan: &PlanId) -> Result<Vec<Expired>, StoreError> {
        const WHAT: &str = "expire work items";
        let client = self.store.inner.db.client(WHAT).await?;
        let sql = format!(
            "UPDATE work_items SET state = 'expired', finished_time = now()
             WHERE id IN (SELECT id FROM work_items
                          WHERE plan_id = $1 AND state = 'claimed' AND lease_expires <= now()
                          ORDER BY id FOR UPDATE SKIP LOCKED)
             RETURNING {ITEM}"
        );
        let rows = client
            .query(&sql, &[&plan.as_str()])
            .await
            .map_err(|e| error::db(WHAT, &self.path(), e))?;
        let mut out = rows
            .iter()
            .map(|r| item_of(r, WHAT, &self.path()))
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_by_key(|c| c.id);
        Ok(out
            .into_iter()
            .map(|c| Expired {
                item: c.item,
                worker: c.worker,
            })
            .collect())
    }

    /// Withdraws attempt `attempt` of `node` of `plan` (its job was canceled or paused): a
    /// queued item is never claimed, a claimed one's renew and finish are fenced, so its
    /// worker stops. Nothing happens to an item already finished.
    pub async fn withdraw(
        &self,
        plan: &PlanId,
        node: &str,
        attempt: u32,
    ) -> Result<(), StoreError> {
        const WHAT: &str = "withdraw a work item";
        let client = self.store.inner.db.client(WHAT).await?;
        client
            .execute(
                "UPDATE work_items SET state = 'withdrawn', finished_time = now()
                 WHERE plan_id = $1 AND node_id = $2 AND attempt = $3
                   AND state IN ('queued', 'claimed')",
                &[&plan.as_str(), &node, &i64::from(attempt)],
            )
            .await
            .map_err(|e| error::db(WHAT, &self.path(), e))?;
        Ok(())
    }

    /// The git remote `plan`'s latest order names (its `remote` field, see
    /// `orchestrator_core::remote::JobOrder`), if it has one: what a coordinator taking the
    /// plan over runs its jobs through.
    pub async fn remote_of(&self, plan: &PlanId) -> Result<Option<String>, StoreError> {
        const WHAT: &str = "read a plan's remote";
        let client = self.store.inner.db.client(WHAT).await?;
        let row = client
            .query_opt(
                "SELECT payload->>'remote' FROM work_items WHERE plan_id = $1
                 ORDER BY id DESC LIMIT 1",
                &[&plan.as_str()],
            )
            .await
            .map_err(|e| error::db(WHAT, &self.path(), e))?;
        Ok(row.and_then(|r| r.try_get::<_, Option<String>>(0).ok().flatten()))
    }

    /// How long a claim lasts without renewal.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// `Ok` when `ok`, else [`QueueError::Fenced`] saying what the item's row says now.
    async fn fenced_unless(&self, ok: bool, claim: &Claim) -> Result<(), QueueError> {
        if ok {
            return Ok(());
        }
        const WHAT: &str = "read a work item";
        let client = self.store.inner.db.client(WHAT).await?;
        let row = client
            .query_opt(
                "SELECT state, generation, worker, lease_expires <= now() FROM work_items
                 WHERE id = $1",
                &[&claim.id],
            )
            .await
            .map_err(|e| error::db(WHAT, &self.path(), e))?;
        let why = match row {
            None => "the item is gone".to_owned(),
            Some(row) => {
                let get = |i| -> Option<String> { row.try_get(i).ok() };
                let state = get(0).unwrap_or_default();
                let generation: i64 = row.try_get(1).unwrap_or_default();
                let worker = get(2).unwrap_or_default();
                let lapsed: bool = row.try_get(3).unwrap_or(false);
                match (state.as_str(), generation == claim.generation, lapsed) {
                    ("claimed", true, true) => "its lease expired".to_owned(),
                    ("claimed", false, _) => {
                        format!("it was claimed again by {worker} (generation {generation})")
                    }
                    (state, _, _) => format!("it is {state} (generation {generation})"),
                }
            }
        };
        Err(QueueError::Fenced {
            id: claim.id,
            generation: claim.generation,
            why,
        })
    }
}
