//! [`PgPlanRepository`]: plans, their journals and listing (leases, specs and logs live in
//! their own modules).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use orchestrator_core::repository::{
    AttemptSpecs, Lease, LogKey, LogQuery, PlanListing, PlanRepository,
};
use orchestrator_core::state::{PlanRecord, StateChange};
use orchestrator_core::{NodeId, PlanId, StoreError};
use tokio_postgres::error::SqlState;
use tokio_postgres::{IsolationLevel, Transaction};

use super::codec;
use super::connect::Db;
use super::error::{self, corrupt};
use super::migrate;
use super::options::PgOptions;
use super::stats::{Counters, PgStats};

/// A [`PlanRepository`] in PostgreSQL: every machine that reaches the database sees the same
/// plans (SPEC §16). All tables live in one schema ([`PgOptions::schema`]), created and
/// migrated on [`connect`](PgPlanRepository::connect).
///
/// - [`create`](PlanRepository::create) writes one `plans` row: the creation record, and the
///   summary that [`list`](PlanRepository::list) reads (newest first, without replaying
///   anything; a row whose summary does not read back is reported as damaged).
/// - [`append`](PlanRepository::append) is one transaction per batch: the plan's row is locked,
///   the changes are checked against the current state (a change that does not apply is
///   [`Rejected`](StoreError::Rejected) and nothing is written), then one `plan_batches` row
///   holds the batch as JSON and the plan's summary is updated: O(size of the change). Each
///   handle keeps the plans it used in memory and reads only the batches it has not seen, so
///   several handles (machines) can append to one plan.
/// - [`load`](PlanRepository::load) reads the stored state and replays the batches after it,
///   in one consistent snapshot. From time to time (see [`PgOptions::compaction`]) the journal
///   is folded into the stored state and its batches removed, which bounds that replay.
/// - [`acquire`](PlanRepository::acquire) takes the plan's lease row (see
///   [`PgPlanRepository::acquire_lease`]): exclusive across machines, renewed by a heartbeat,
///   released when dropped, and taken over [`PgOptions::lease_timeout`] after a holder died.
/// - [`delete`](PlanRepository::delete) removes the plan with its journal, lease, specs and
///   logs, unless another owner holds its lease ([`StoreError::Locked`]).
/// - Failures are [`StoreError`]s; a lost connection, a server restarting, a serialization
///   conflict are [transient](StoreError::is_transient). Getting a connection is retried with
///   backoff ([`PgOptions::connect_retries`]).
///
/// Cloning shares the pool, the cache and the leases.
///
/// ```no_run
/// use orchestrator_core::ids::PlanId;
/// use orchestrator_core::plan::{JobSpec, PlanGraph, PlanSpec, WorkSpec};
/// use orchestrator_core::state::{NodeStatus, PlanRecord, StateChange};
/// use orchestrator_core::PlanRepository;
/// use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = PgPlanRepository::connect(
///     "postgres://postgres@127.0.0.1:5432/test",
///     PgOptions::default().schema("orchestrator"),
/// )
/// .await?;
///
/// let spec = PlanSpec::new("demo").job(JobSpec::new("build", "Build", WorkSpec::shell("make")));
/// let nodes = PlanGraph::build(&spec)?.node_count();
/// let plan = PlanRecord::new(PlanId::random(), spec, "/work/repo".into(), nodes, 0);
/// store.create(&plan).await?;
///
/// let _lease = store.acquire(&plan.state.id).await?;
/// let ready = StateChange::Node { node: 0, status: NodeStatus::Ready, at: 1 };
/// store.append(&plan.state.id, &[ready]).await?;
/// assert_eq!(store.load(&plan.state.id).await?.state.nodes[0].status, NodeStatus::Ready);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PgPlanRepository {
    pub(super) inner: Arc<Inner>,
}

/// A plan as this handle last saw it: the state after batch `batch` of incarnation
/// `incarnation` (the `plans` row it was read from).
pub(super) struct Live {
    incarnation: i64,
    batch: i64,
    record: PlanRecord,
}

type Slot = Arc<tokio::sync::Mutex<Option<Live>>>;

pub(super) struct Inner {
    pub(super) db: Db,
    pub(super) options: PgOptions,
    /// `host:pid:uuid`, unique to this handle (and its clones).
    pub(super) owner: String,
    /// The plans whose lease this handle holds.
    pub(super) held: Arc<Mutex<HashSet<PlanId>>>,
    pub(super) counters: Counters,
    slots: Mutex<HashMap<PlanId, Slot>>,
}

impl fmt::Debug for PgPlanRepository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgPlanRepository")
            .field("location", &self.inner.db.location())
            .field("owner", &self.inner.owner)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning only means a thread panicked while holding the lock; every write below is a
    // single insert or remove, so the data is whole.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// This machine's name (`/proc/sys/kernel/hostname`, `/etc/hostname`, `$HOSTNAME`,
/// `$COMPUTERNAME`, else `localhost`), as lease owners, workers and session locks name it.
///
/// ```
/// assert!(!orchestrator_storage::pg::host_name().is_empty());
/// ```
pub fn host_name() -> String {
    let from_file = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_owned())
    };
    from_file("/proc/sys/kernel/hostname")
        .or_else(|| from_file("/etc/hostname"))
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The state of a plan's row: the head of its journal.
struct Head {
    incarnation: i64,
    last_batch: i64,
    state_batch: i64,
    state_bytes: i64,
    journal_bytes: i64,
}

/// The head of a plan; the stored state comes along unless the known copy (`$2`, `$3`) can
/// be brought up to date from the journal.
const HEAD: &str = "SELECT incarnation, last_batch, state_batch, state_bytes, journal_bytes,
        CASE WHEN incarnation = $2 AND state_batch <= $3 AND $3 <= last_batch
             THEN NULL ELSE state::text END,
        state_version
    FROM plans WHERE plan_id = $1";

impl PgPlanRepository {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/database`, or `key=value`
    /// settings; `host` may be a unix socket folder), creates `options.schema` if missing
    /// and applies the [migrations](super::MIGRATION_VERSION) it lacks.
    ///
    /// Fails with [`StoreError::SchemaVersion`] if the schema was migrated by a newer build,
    /// and with an `Io` error of kind `InvalidInput` for a bad URL or options.
    ///
    /// ```no_run
    /// use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// let store = PgPlanRepository::connect(
    ///     "postgres://postgres@127.0.0.1:5432/test",
    ///     PgOptions::default(),
    /// )
    /// .await?;
    /// assert_eq!(store.schema(), "orchestrator");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(url: &str, options: PgOptions) -> Result<Self, StoreError> {
        let db = Db::new(url, &options)?;
        migrate::run(&db, &options.schema).await?;
        let owner = format!(
            "{}:{}:{}",
            host_name(),
            std::process::id(),
            uuid::Uuid::new_v4()
        );
        Ok(PgPlanRepository {
            inner: Arc::new(Inner {
                db,
                options,
                owner,
                held: Arc::default(),
                counters: Counters::default(),
                slots: Mutex::default(),
            }),
        })
    }

    /// Applies the migrations the schema lacks (as [`connect`](Self::connect) does) and returns
    /// their versions: empty when it is current.
    ///
    /// ```no_run
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// assert!(store.migrate().await?.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn migrate(&self) -> Result<Vec<u32>, StoreError> {
        migrate::run(&self.inner.db, &self.inner.options.schema).await
    }

    /// The schema holding the store's tables.
    ///
    /// ```no_run
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default().schema("ci")).await?;
    /// assert_eq!(store.schema(), "ci");
    /// # Ok(())
    /// # }
    /// ```
    pub fn schema(&self) -> &str {
        &self.inner.options.schema
    }

    /// The options in force.
    ///
    /// ```no_run
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// assert_eq!(store.options(), &PgOptions::default());
    /// # Ok(())
    /// # }
    /// ```
    pub fn options(&self) -> &PgOptions {
        &self.inner.options
    }

    /// Where the store is, as `postgres://host:port/database/schema` (never with a password);
    /// errors name paths below it.
    ///
    /// ```no_run
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// assert_eq!(store.location().to_str(), Some("postgres://127.0.0.1:5432/test/orchestrator"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn location(&self) -> &std::path::Path {
        self.inner.db.location()
    }

    /// The owner this handle's leases are held under: `host:pid:uuid`, unique per
    /// [`connect`](Self::connect).
    ///
    /// ```no_run
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// assert!(store.owner().contains(&format!(":{}:", std::process::id())));
    /// # Ok(())
    /// # }
    /// ```
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// What this handle (and its clones) has done so far.
    ///
    /// ```no_run
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// assert_eq!(store.stats().appends, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn stats(&self) -> PgStats {
        self.inner.counters.snapshot()
    }

    /// A connection of the store's pool, for crates that keep tables of their own in the
    /// store's schema (the agents' sessions, migration `0003_sessions`): its `search_path` is
    /// [`schema`](Self::schema), so tables are named without it. Getting it is retried like
    /// the store's own connections ([`PgOptions::connect_retries`]); a failure is a
    /// [`StoreError`] for `what`, and [`db_error`](Self::db_error) turns the failures of the
    /// queries run on it into the same.
    ///
    /// Dropping the connection returns it to the pool, so leave no session state on it (no
    /// `SET`, no session-level advisory lock); to keep such state, detach it from the pool
    /// with [`Object::take`](deadpool_postgres::Object::take): it then closes when dropped.
    ///
    /// ```no_run
    /// use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// let client = store.client("count the plans").await?;
    /// let row = client
    ///     .query_one("SELECT count(*) FROM plans", &[])
    ///     .await
    ///     .map_err(|e| store.db_error("count the plans", e))?;
    /// let plans: i64 = row.get(0);
    /// assert!(plans >= 0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn client(
        &self,
        what: &'static str,
    ) -> Result<deadpool_postgres::Object, StoreError> {
        self.inner.db.client(what).await
    }

    /// A failure of the client during `what` on this store, as the store reports its own
    /// (`StoreError::Io` at [`location`](Self::location)): a lost connection, a server
    /// restarting, a serialization conflict are [transient](StoreError::is_transient)
    /// (kind `Interrupted` or `TimedOut`), anything else is kind `Other`, with the client's
    /// error as its source. See [`client`](Self::client) for an example.
    pub fn db_error(&self, what: &'static str, e: tokio_postgres::Error) -> StoreError {
        error::db(what, self.inner.db.location(), e)
    }
}

impl Inner {
    pub(super) fn plan_path(&self, plan: &PlanId) -> PathBuf {
        self.db.location().join("plans").join(plan.as_str())
    }

    /// Passes `e` on; a plan that does not exist is forgotten by this handle first.
    fn forget_if_missing(&self, plan: &PlanId, e: StoreError) -> StoreError {
        if matches!(e, StoreError::NotFound(_)) {
            lock(&self.slots).remove(plan);
        }
        e
    }

    fn slot(&self, plan: &PlanId) -> Slot {
        lock(&self.slots).entry(plan.clone()).or_default().clone()
    }

    /// The plan as stored, starting from `known` (this handle's copy) when it can be brought
    /// up to date; `lock` takes the plan's row lock for the rest of the transaction.
    async fn current(
        &self,
        tx: &Transaction<'_>,
        plan: &PlanId,
        known: Option<Live>,
        lock: bool,
    ) -> Result<(Head, Live), StoreError> {
        let path = self.plan_path(plan);
        let fail = |e| error::db("read the plan", &path, e);
        let (known_inc, known_batch) = known
            .as_ref()
            .map_or((-1, -1), |l| (l.incarnation, l.batch));
        let sql = if lock {
            format!("{HEAD} FOR UPDATE")
        } else {
            HEAD.to_owned()
        };
        let row = tx
            .query_opt(sql.as_str(), &[&plan.as_str(), &known_inc, &known_batch])
            .await
            .map_err(fail)?
            .ok_or_else(|| StoreError::NotFound(plan.clone()))?;
        let head = Head {
            incarnation: row.try_get(0).map_err(fail)?,
            last_batch: row.try_get(1).map_err(fail)?,
            state_batch: row.try_get(2).map_err(fail)?,
            state_bytes: row.try_get(3).map_err(fail)?,
            journal_bytes: row.try_get(4).map_err(fail)?,
        };
        let state: Option<String> = row.try_get(5).map_err(fail)?;
        let mut live = match (state, known) {
            (None, Some(known)) => known,
            (Some(json), _) => {
                let version: i32 = row.try_get(6).map_err(fail)?;
                self.counters.read_state();
                Live {
                    incarnation: head.incarnation,
                    batch: head.state_batch,
                    record: codec::read_record(&json, version, &path)?,
                }
            }
            (None, None) => return Err(corrupt(&path, "the plan's row has no state")),
        };
        if live.batch < head.last_batch {
            let rows = tx
                .query(
                    "SELECT batch, schema_version, changes::text FROM plan_batches
                     WHERE plan_id = $1 AND batch > $2 AND batch <= $3 ORDER BY batch",
                    &[&plan.as_str(), &live.batch, &head.last_batch],
                )
                .await
                .map_err(fail)?;
            for row in rows {
                let batch: i64 = row.try_get(0).map_err(fail)?;
                let at = path.join("batches").join(batch.to_string());
                if batch != live.batch + 1 {
                    let gap = format!("journal batch {} is missing", live.batch + 1);
                    return Err(corrupt(&at, gap));
                }
                let version: i32 = row.try_get(1).map_err(fail)?;
                let json: String = row.try_get(2).map_err(fail)?;
                for change in codec::read_changes(&json, version, &at)? {
                    live.record.apply(&change).map_err(|e| {
                        corrupt(&at, format!("a stored change does not apply: {e}"))
                    })?;
                }
                self.counters.read_batch();
                live.batch = batch;
            }
        }
        if live.batch != head.last_batch {
            let missing = format!("journal batches up to {} are missing", head.last_batch);
            return Err(corrupt(&path, missing));
        }
        Ok((head, live))
    }

    async fn create(&self, record: &PlanRecord) -> Result<(), StoreError> {
        let plan = &record.state.id;
        let path = self.plan_path(plan);
        let state = codec::record(record)?;
        let (summary, status) = codec::summary(record)?;
        let created_at =
            i64::try_from(record.state.created_at).map_err(|_| StoreError::Rejected {
                plan: plan.clone(),
                message: "createdAt is out of range".into(),
            })?;
        let client = self.db.client("create the plan").await?;
        let row = client
            .query_opt(
                "INSERT INTO plans (plan_id, created_at, summary, status, state, state_version, state_bytes)
                 VALUES ($1, $2, $3::text::json, $4, $5::text::json, $6, $7)
                 ON CONFLICT (plan_id) DO NOTHING RETURNING incarnation",
                &[
                    &plan.as_str(),
                    &created_at,
                    &summary,
                    &status,
                    &state,
                    &codec::version(),
                    &(state.len() as i64),
                ],
            )
            .await
            .map_err(|e| error::db("create the plan", &path, e))?;
        let Some(row) = row else {
            return Err(StoreError::AlreadyExists(plan.clone()));
        };
        let incarnation: i64 = row
            .try_get(0)
            .map_err(|e| error::db("create the plan", &path, e))?;
        let slot = self.slot(plan);
        *slot.lock().await = Some(Live {
            incarnation,
            batch: 0,
            record: record.clone(),
        });
        Ok(())
    }

    async fn exists(&self, plan: &PlanId, operation: &'static str) -> Result<(), StoreError> {
        let client = self.db.client(operation).await?;
        client
            .query_opt("SELECT 1 FROM plans WHERE plan_id = $1", &[&plan.as_str()])
            .await
            .map_err(|e| error::db(operation, &self.plan_path(plan), e))?
            .map(|_| ())
            .ok_or_else(|| StoreError::NotFound(plan.clone()))
    }

    async fn append(&self, plan: &PlanId, changes: &[StateChange]) -> Result<(), StoreError> {
        if changes.is_empty() {
            return self.exists(plan, "append to the plan").await;
        }
        let path = self.plan_path(plan);
        let fail = |e| error::db("append to the plan", &path, e);
        let json = codec::changes(plan, changes)?;
        let slot = self.slot(plan);
        let mut cached = slot.lock().await;
        let mut client = self.db.client("append to the plan").await?;
        let tx = client.transaction().await.map_err(fail)?;
        // Whatever goes wrong below, the copy is read afresh next time.
        let (head, mut live) = match self.current(&tx, plan, cached.take(), true).await {
            Ok(found) => found,
            Err(e) => return Err(self.forget_if_missing(plan, e)),
        };
        for change in changes {
            live.record
                .apply(change)
                .map_err(|e| StoreError::Rejected {
                    plan: plan.clone(),
                    message: e.to_string(),
                })?;
        }
        let (summary, status) = codec::summary(&live.record)?;
        let batch = head.last_batch + 1;
        let bytes = json.len() as i64;
        tx.execute(
            "WITH added AS (
                 INSERT INTO plan_batches (plan_id, batch, schema_version, changes, bytes)
                 VALUES ($1, $2, $3, $4::text::json, $5)
             )
             UPDATE plans SET last_batch = $2, summary = $6::text::json, status = $7,
                 journal_bytes = journal_bytes + $5, updated_time = now()
             WHERE plan_id = $1",
            &[
                &plan.as_str(),
                &batch,
                &codec::version(),
                &json,
                &bytes,
                &summary,
                &status,
            ],
        )
        .await
        .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        drop(client);
        self.counters.appended(changes.len());
        live.batch = batch;
        let records = u64::try_from(batch - head.state_batch).unwrap_or(0);
        let journal = u64::try_from(head.journal_bytes + bytes).unwrap_or(0);
        let state = u64::try_from(head.state_bytes).unwrap_or(0);
        if self.options.compaction.is_due(journal, records, state) {
            // The batch is committed: a failed compaction is only reported.
            if let Err(e) = self.compact(plan, &live).await {
                tracing::warn!(plan = %plan, error = %e, "journal compaction failed");
            }
        }
        *cached = Some(live);
        Ok(())
    }

    /// Folds the journal up to `live.batch` into the plan's stored state.
    async fn compact(&self, plan: &PlanId, live: &Live) -> Result<(), StoreError> {
        let path = self.plan_path(plan);
        let fail = |e| error::db("compact the journal", &path, e);
        let state = codec::record(&live.record)?;
        let mut client = self.db.client("compact the journal").await?;
        let tx = client.transaction().await.map_err(fail)?;
        let head = tx
            .query_opt(
                "SELECT state_batch FROM plans WHERE plan_id = $1 AND incarnation = $2 FOR UPDATE",
                &[&plan.as_str(), &live.incarnation],
            )
            .await
            .map_err(fail)?;
        let Some(head) = head else { return Ok(()) };
        let state_batch: i64 = head.try_get(0).map_err(fail)?;
        if state_batch >= live.batch {
            return Ok(());
        }
        tx.execute(
            "UPDATE plans SET state = $3::text::json, state_version = $4, state_batch = $2,
                 state_bytes = $5,
                 journal_bytes = (SELECT coalesce(sum(bytes), 0)::bigint FROM plan_batches
                                  WHERE plan_id = $1 AND batch > $2)
             WHERE plan_id = $1",
            &[
                &plan.as_str(),
                &live.batch,
                &state,
                &codec::version(),
                &(state.len() as i64),
            ],
        )
        .await
        .map_err(fail)?;
        tx.execute(
            "DELETE FROM plan_batches WHERE plan_id = $1 AND batch <= $2",
            &[&plan.as_str(), &live.batch],
        )
        .await
        .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        self.counters.compacted();
        Ok(())
    }

    async fn load(&self, plan: &PlanId) -> Result<PlanRecord, StoreError> {
        let path = self.plan_path(plan);
        let fail = |e| error::db("load the plan", &path, e);
        let slot = self.slot(plan);
        let mut cached = slot.lock().await;
        let mut client = self.db.client("load the plan").await?;
        // One snapshot for the head and the batches, even while others append or compact.
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(fail)?;
        let (_, live) = match self.current(&tx, plan, cached.take(), false).await {
            Ok(found) => found,
            Err(e) => return Err(self.forget_if_missing(plan, e)),
        };
        tx.commit().await.map_err(fail)?;
        let record = live.record.clone();
        *cached = Some(live);
        Ok(record)
    }

    async fn list(&self) -> Result<PlanListing, StoreError> {
        let at = self.db.location().join("plans");
        let fail = |e| error::db("list the plans", &at, e);
        let client = self.db.client("list the plans").await?;
        let rows = client
            .query(
                "SELECT plan_id, summary::text FROM plans ORDER BY created_at DESC, incarnation DESC",
                &[],
            )
            .await
            .map_err(fail)?;
        self.counters.listed();
        let mut listing = PlanListing::default();
        for row in rows {
            let id: String = row.try_get(0).map_err(fail)?;
            let id = PlanId::from(id);
            let summary: String = row.try_get(1).map_err(fail)?;
            match codec::read_summary(&summary, &self.plan_path(&id)) {
                Ok(s) => listing.plans.push(s),
                Err(e) => listing.damaged.push((id, e)),
            }
        }
        listing.damaged.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(listing)
    }

    async fn delete(&self, plan: &PlanId) -> Result<(), StoreError> {
        let path = self.plan_path(plan);
        let fail = |e| error::db("delete the plan", &path, e);
        let slot = self.slot(plan);
        let mut cached = slot.lock().await;
        let mut client = self.db.client("delete the plan").await?;
        let tx = client.transaction().await.map_err(fail)?;
        tx.query_opt(
            "SELECT 1 FROM plans WHERE plan_id = $1 FOR UPDATE",
            &[&plan.as_str()],
        )
        .await
        .map_err(fail)?
        .ok_or_else(|| StoreError::NotFound(plan.clone()))?;
        // Someone else running the plan keeps it; this handle's own lease does not.
        let holder = tx
            .query_opt(
                "SELECT owner FROM plan_leases
                 WHERE plan_id = $1 AND expires_time > now() AND owner <> $2",
                &[&plan.as_str(), &self.owner],
            )
            .await
            .map_err(fail)?;
        if let Some(row) = holder {
            let owner: String = row.try_get(0).map_err(fail)?;
            return Err(StoreError::Locked {
                plan: plan.clone(),
                owner,
            });
        }
        tx.execute("DELETE FROM plans WHERE plan_id = $1", &[&plan.as_str()])
            .await
            .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        *cached = None;
        lock(&self.slots).remove(plan);
        Ok(())
    }
}

/// Whether `e` says the plan a row refers to does not exist (it was never created, or was
/// deleted meanwhile).
pub(super) fn is_missing_plan(e: &tokio_postgres::Error) -> bool {
    error::state(e) == Some(&SqlState::FOREIGN_KEY_VIOLATION)
}

#[async_trait]
impl PlanRepository for PgPlanRepository {
    async fn create(&self, plan: &PlanRecord) -> Result<(), StoreError> {
        self.inner.create(plan).await
    }

    async fn append(&self, plan: &PlanId, changes: &[StateChange]) -> Result<(), StoreError> {
        self.inner.append(plan, changes).await
    }

    async fn load(&self, plan: &PlanId) -> Result<PlanRecord, StoreError> {
        self.inner.load(plan).await
    }

    async fn list(&self) -> Result<PlanListing, StoreError> {
        self.inner.list().await
    }

    async fn delete(&self, plan: &PlanId) -> Result<(), StoreError> {
        self.inner.delete(plan).await
    }

    async fn acquire(&self, plan: &PlanId) -> Result<Lease, StoreError> {
        self.acquire_lease(plan).await.map(Lease::from)
    }

    async fn save_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
        specs: &AttemptSpecs,
    ) -> Result<(), StoreError> {
        self.inner
            .save_attempt_specs(plan, node, attempt, specs)
            .await
    }

    async fn load_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
    ) -> Result<AttemptSpecs, StoreError> {
        self.inner.load_attempt_specs(plan, node, attempt).await
    }

    async fn append_log(&self, key: &LogKey, text: &str) -> Result<(), StoreError> {
        self.inner.append_log(key, text).await
    }

    async fn read_log(
        &self,
        plan: &PlanId,
        node: &NodeId,
        query: LogQuery,
    ) -> Result<String, StoreError> {
        self.inner.read_log(plan, node, query).await
    }
}
