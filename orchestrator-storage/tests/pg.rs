//! The PostgreSQL store against a real server: core's conformance suite on a fresh schema per
//! case, migrations, leases across handles and "processes", listing without replay.
//!
//! The server comes from `ORCHESTRATOR_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`). Without one answering within 2 s every test
//! passes, printing `skipped: no PostgreSQL at ...`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orchestrator_core::conformance::repository::run_all;
use orchestrator_core::plan::{JobSpec, PlanGraph, PlanSpec, WorkSpec};
use orchestrator_core::state::{NodeStatus, PlanRecord, PlanStatus, StateChange};
use orchestrator_core::{PlanId, PlanRepository, StoreError};
use orchestrator_storage::pg::{
    PgOptions, PgPlanRepository, QueueError, WorkItem, MIGRATION_VERSION,
};
use orchestrator_storage::Compaction;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

fn url() -> String {
    std::env::var("ORCHESTRATOR_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// A raw client, if a server answers within 2 s.
async fn raw(url: &str) -> Result<tokio_postgres::Client, String> {
    let connect = tokio_postgres::connect(url, tokio_postgres::NoTls);
    match tokio::time::timeout(Duration::from_secs(2), connect).await {
        Err(_) => Err("no answer within 2 s".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok((client, connection))) => {
            tokio::spawn(connection);
            Ok(client)
        }
    }
}

/// The server's URL, or `None` (after saying so) when there is none.
async fn server() -> Option<String> {
    let url = url();
    match raw(&url).await {
        Ok(client) => match client.simple_query("SELECT 1").await {
            Ok(_) => Some(url),
            Err(e) => {
                println!("skipped: no PostgreSQL at {url}: {e}");
                None
            }
        },
        Err(e) => {
            println!("skipped: no PostgreSQL at {url}: {e}");
            None
        }
    }
}

/// A fresh schema name. Tests end with [`Schema::drop_now`]; one dropped otherwise (a test
/// that failed) is removed from a thread of its own, without waiting for it: blocking here
/// could stall the runtime whose connections still hold locks in the schema.
struct Schema {
    url: String,
    name: String,
    dropped: bool,
}

/// Drops a schema and everything in it.
async fn drop_schema(url: &str, name: &str) -> Result<(), String> {
    let client = raw(url).await?;
    let sql = format!("SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {name} CASCADE");
    client.batch_execute(&sql).await.map_err(|e| e.to_string())
}

impl Schema {
    fn new(url: &str) -> Schema {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Schema {
            url: url.to_owned(),
            name: format!("t_{}", &id[..16]),
            dropped: false,
        }
    }

    fn options(&self) -> PgOptions {
        PgOptions::default().schema(&self.name)
    }

    async fn store(&self, options: PgOptions) -> PgPlanRepository {
        let options = options.schema(&self.name);
        match PgPlanRepository::connect(&self.url, options).await {
            Ok(store) => store,
            Err(e) => panic!("connect to {}: {e}", self.name),
        }
    }

    async fn drop_now(mut self) {
        self.dropped = true;
        if let Err(e) = drop_schema(&self.url, &self.name).await {
            panic!("cannot drop schema {}: {e}", self.name);
        }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        let (url, name) = (self.url.clone(), self.name.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                if let Err(e) = rt.block_on(drop_schema(&url, &name)) {
                    eprintln!("cannot drop schema {name}: {e}");
                }
            }
        });
    }
}

fn plan(name: &str, at: u64) -> PlanRecord {
    let spec = PlanSpec::new(name)
        .job(JobSpec::new("a", "A", WorkSpec::shell("true")))
        .job(JobSpec::new("b", "B", WorkSpec::shell("true")).depends_on(["a"]));
    let nodes = PlanGraph::build(&spec).expect("valid spec").node_count();
    PlanRecord::new(PlanId::random(), spec, "/work/repo".into(), nodes, at)
}

fn started(at: u64) -> StateChange {
    StateChange::PlanStarted {
        at,
        base_commit: None,
        target_branch: None,
        snapshot_branch: None,
    }
}

fn session(node: usize, id: &str) -> StateChange {
    StateChange::Session {
        node,
        session_id: id.to_owned(),
    }
}

/// Runs the conformance suite with a fresh schema per case; returns how long it took.
async fn conformance(url: &str, options: PgOptions) -> Duration {
    let schemas = Arc::new(Mutex::new(Vec::new()));
    let begin = Instant::now();
    run_all(|| {
        let (schemas, options) = (schemas.clone(), options.clone());
        let url = url.to_owned();
        async move {
            let schema = Schema::new(&url);
            let store = schema.store(options).await;
            schemas.lock().expect("schemas").push(schema);
            store
        }
    })
    .await;
    let took = begin.elapsed();
    let schemas = std::mem::take(&mut *schemas.lock().expect("schemas"));
    for schema in schemas {
        schema.drop_now().await;
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_default_options() {
    let Some(url) = server().await else { return };
    let took = conformance(&url, PgOptions::default()).await;
    println!("conformance (default options) took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_constant_compaction() {
    let Some(url) = server().await else { return };
    let compaction = Compaction::default()
        .min_journal_bytes(0)
        .snapshot_percent(0)
        .max_journal_records(3);
    let options = PgOptions::default().compaction(compaction).pool_size(3);
    let took = conformance(&url, options).await;
    println!("conformance (constant compaction) took {took:?}");
}

#[tokio::test]
async fn conformance_current_thread_runtime() {
    let Some(url) = server().await else { return };
    let took = conformance(&url, PgOptions::default().pool_size(2)).await;
    println!("conformance (current-thread runtime) took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handles_share_one_plan_through_compactions() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let compaction = Compaction::default()
        .min_journal_bytes(0)
        .max_journal_records(4);
    let a = schema.store(schema.options().compaction(compaction)).await;
    let b = schema.store(schema.options()).await;
    let p = plan("shared", 1);
    let id = p.state.id.clone();
    a.create(&p).await.expect("create");
    let mut expected = p.clone();
    for i in 0..30usize {
        let (writer, other) = if i % 3 == 0 { (&b, &a) } else { (&a, &b) };
        let change = if i == 0 {
            started(2)
        } else {
            session(i % 2, &format!("s{i}"))
        };
        expected.apply(&change).expect("fixture applies");
        writer.append(&id, &[change]).await.expect("append");
        assert_eq!(other.load(&id).await.expect("load"), expected, "after {i}");
    }
    assert!(a.stats().compactions > 0, "{:?}", a.stats());
    // A third handle starts from the compacted state.
    let c = schema.store(schema.options()).await;
    assert_eq!(c.load(&id).await.expect("load"), expected);
    assert!(c.stats().batches_read < 5, "{:?}", c.stats());
    schema.drop_now().await;
}

#[tokio::test]
async fn migrations_applied_twice_are_a_no_op() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let first = schema.store(schema.options()).await;
    let second = schema.store(schema.options()).await;
    assert_eq!(first.migrate().await.expect("migrate"), Vec::<u32>::new());
    assert_eq!(second.migrate().await.expect("migrate"), Vec::<u32>::new());
    let client = raw(&url).await.expect("raw client");
    let sql = format!(
        "SELECT count(*), max(version) FROM {}.schema_migrations",
        schema.name
    );
    let row = client.query_one(sql.as_str(), &[]).await.expect("query");
    assert_eq!(row.get::<_, i64>(0), i64::from(MIGRATION_VERSION));
    assert_eq!(row.get::<_, i32>(1), MIGRATION_VERSION as i32);
    // And both handles work on the one set of tables.
    let p = plan("migrated", 1);
    first.create(&p).await.expect("create");
    assert_eq!(second.load(&p.state.id).await.expect("load"), p);
    schema.drop_now().await;
}

#[tokio::test]
async fn migrations_race_from_many_handles() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let connects = (0..4).map(|_| PgPlanRepository::connect(&url, schema.options()));
    for store in futures::future::join_all(connects).await {
        store.expect("every racing connect migrates or finds the schema current");
    }
    schema.drop_now().await;
}

#[tokio::test]
async fn a_schema_newer_than_the_build_is_refused() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    drop(schema.store(schema.options()).await);
    let client = raw(&url).await.expect("raw client");
    let newer = MIGRATION_VERSION as i32 + 1;
    let sql = format!(
        "INSERT INTO {}.schema_migrations (version, name) VALUES ($1, 'from the future')",
        schema.name
    );
    client
        .execute(sql.as_str(), &[&newer])
        .await
        .expect("insert");
    match PgPlanRepository::connect(&url, schema.options()).await {
        Err(StoreError::SchemaVersion {
            found, supported, ..
        }) => {
            assert_eq!(found, MIGRATION_VERSION + 1);
            assert_eq!(supported, MIGRATION_VERSION);
        }
        other => panic!("connect returned {other:?}, expected SchemaVersion"),
    }
    schema.drop_now().await;
}

/// Acquires a lease in a runtime of its own that then stops without releasing it: what a
/// process that dies does. Returns the owner and generation.
fn acquire_and_die(url: &str, options: PgOptions, plan: &PlanId) -> (String, u64) {
    let (url, plan) = (url.to_owned(), plan.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let store = PgPlanRepository::connect(&url, options)
                .await
                .expect("connect");
            let lease = store.acquire_lease(&plan).await.expect("acquire");
            let held = (lease.owner().to_owned(), lease.generation());
            // Neither released nor renewed again: the runtime (heartbeat included) stops.
            std::mem::forget(lease);
            held
        })
    })
    .join()
    .expect("the dying process")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_owners_lease_is_refused_then_expires_and_is_taken_over() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let timeout = Duration::from_millis(600);
    let options = schema.options().lease_timeout(timeout);
    let store = schema.store(options.clone()).await;
    let p = plan("leased", 1);
    let id = p.state.id.clone();
    store.create(&p).await.expect("create");
    let (dead, generation) = acquire_and_die(&url, options.clone(), &id);
    assert_ne!(dead, store.owner());
    let died = Instant::now();
    match store.acquire(&id).await {
        Err(StoreError::Locked { plan, owner }) => {
            assert_eq!(plan, id);
            assert_eq!(owner, dead, "Locked names the holder");
        }
        other => panic!("acquire returned {other:?}, expected Locked"),
    }
    match store.delete(&id).await {
        Err(StoreError::Locked { owner, .. }) => assert_eq!(owner, dead),
        other => panic!("delete returned {other:?}, expected Locked"),
    }
    let info = store.lease_info(&id).await.expect("info").expect("a lease");
    assert!(info.held && info.owner == dead && info.generation == generation);
    // Once the timeout has passed without renewal, the lease is taken over.
    tokio::time::sleep(timeout.saturating_sub(died.elapsed()) + Duration::from_millis(100)).await;
    let lease = store.acquire_lease(&id).await.expect("take over");
    assert_eq!(lease.owner(), store.owner());
    assert!(lease.generation() > generation);
    let info = store.lease_info(&id).await.expect("info").expect("a lease");
    assert_eq!(
        (info.owner.as_str(), info.generation),
        (store.owner(), lease.generation())
    );
    schema.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_keeps_a_lease_past_its_timeout_and_drop_releases_it() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let timeout = Duration::from_millis(600);
    let a = schema.store(schema.options().lease_timeout(timeout)).await;
    let b = schema.store(schema.options().lease_timeout(timeout)).await;
    let p = plan("kept", 1);
    let id = p.state.id.clone();
    a.create(&p).await.expect("create");
    let lease = a.acquire_lease(&id).await.expect("acquire");
    tokio::time::sleep(timeout * 3).await;
    assert!(
        matches!(b.acquire(&id).await, Err(StoreError::Locked { .. })),
        "a renewed lease stays held"
    );
    assert!(!lease.is_lost());
    let generation = lease.generation();
    drop(lease);
    // The release is spawned: it lands within moments, long before the timeout.
    let begin = Instant::now();
    let taken = loop {
        match b.acquire_lease(&id).await {
            Ok(lease) => break lease,
            Err(StoreError::Locked { .. }) if begin.elapsed() < timeout / 2 => {
                tokio::time::sleep(Duration::from_millis(5)).await
            }
            Err(e) => panic!("acquire after release: {e}"),
        }
    };
    assert_eq!(taken.generation(), generation + 1);
    schema.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_taken_over_after_expiry_is_reported_lost() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let timeout = Duration::from_millis(300);
    let a = schema.store(schema.options().lease_timeout(timeout)).await;
    let b = schema.store(schema.options()).await;
    let p = plan("lost", 1);
    let id = p.state.id.clone();
    a.create(&p).await.expect("create");
    let lease = a.acquire_lease(&id).await.expect("acquire");
    // As if a's renewals had not reached the database for a while.
    let client = raw(&url).await.expect("raw client");
    let sql = format!(
        "UPDATE {}.plan_leases SET expires_time = now() - interval '1 second'",
        schema.name
    );
    client.execute(sql.as_str(), &[]).await.expect("expire");
    let taken = b.acquire_lease(&id).await.expect("take over");
    assert!(taken.generation() > lease.generation());
    // The next beat (within a third of the timeout) notices; allow for a loaded machine.
    let begin = Instant::now();
    while !lease.is_lost() && begin.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(lease.is_lost(), "the heartbeat notices the takeover");
    drop(lease);
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The old holder's release does not free the new holder's lease.
    let info = b.lease_info(&id).await.expect("info").expect("a lease");
    assert!(info.held && info.owner == b.owner());
    schema.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_racing_acquirers_exactly_one_wins() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(schema.store(schema.options()).await);
    }
    for round in 0..10 {
        let p = plan(&format!("race {round}"), 1);
        stores[0].create(&p).await.expect("create");
        let id = &p.state.id;
        let tries = stores.iter().map(|s| s.acquire_lease(id));
        let results = futures::future::join_all(tries).await;
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let winner = winners[0].owner().to_owned();
        for r in &results {
            match r {
                Ok(_) => {}
                Err(StoreError::Locked { owner, .. }) => assert_eq!(owner, &winner),
                Err(e) => panic!("round {round}: {e}"),
            }
        }
    }
    schema.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_200_plans_reads_summaries_only() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let writer = schema.store(schema.options()).await;
    let mut ids = Vec::new();
    for i in 0..200u64 {
        let p = plan(&format!("plan {i:03}"), 1_000 + i);
        writer.create(&p).await.expect("create");
        let id = p.state.id.clone();
        writer.append(&id, &[started(2_000)]).await.expect("append");
        for k in 0..3 {
            let change = session(0, &format!("s{k}"));
            writer.append(&id, &[change]).await.expect("append");
        }
        ids.push(id);
    }
    // A fresh handle, with nothing cached: listing must not read a state or a batch.
    let reader = schema.store(schema.options()).await;
    let begin = Instant::now();
    let listing = reader.list().await.expect("list");
    let took = begin.elapsed();
    println!("listing 200 plans took {took:?}");
    let stats = reader.stats();
    assert_eq!((stats.states_read, stats.batches_read), (0, 0), "{stats:?}");
    assert_eq!(listing.plans.len(), 200);
    assert!(listing.damaged.is_empty());
    let listed: Vec<&PlanId> = listing.plans.iter().map(|s| &s.plan_id).collect();
    let newest_first: Vec<&PlanId> = ids.iter().rev().collect();
    assert_eq!(listed, newest_first);
    assert!(listing
        .plans
        .iter()
        .all(|s| s.status == PlanStatus::Running));
    // The summaries are kept current by appends, in their own column.
    let client = raw(&url).await.expect("raw client");
    let sql = format!(
        "SELECT count(*) FROM {}.plans WHERE status = 'running'",
        schema.name
    );
    let row = client.query_one(sql.as_str(), &[]).await.expect("count");
    assert_eq!(row.get::<_, i64>(0), 200);
    schema.drop_now().await;
}

#[tokio::test]
async fn a_damaged_summary_is_reported_not_fatal() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let store = schema.store(schema.options()).await;
    let (good, bad) = (plan("good", 1), plan("bad", 2));
    store.create(&good).await.expect("create");
    store.create(&bad).await.expect("create");
    let client = raw(&url).await.expect("raw client");
    let sql = format!(
        "UPDATE {}.plans SET summary = '{{\"nope\": 1}}' WHERE plan_id = $1",
        schema.name
    );
    client
        .execute(sql.as_str(), &[&bad.state.id.as_str()])
        .await
        .expect("damage");
    let listing = store.list().await.expect("list");
    assert_eq!(listing.plans.len(), 1);
    assert_eq!(listing.plans[0].plan_id, good.state.id);
    assert_eq!(listing.damaged.len(), 1);
    assert_eq!(listing.damaged[0].0, bad.state.id);
    assert!(matches!(listing.damaged[0].1, StoreError::Corrupt { .. }));
    schema.drop_now().await;
}

#[tokio::test]
async fn a_node_status_change_reaches_another_handle() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let a = schema.store(schema.options()).await;
    let b = schema.store(schema.options()).await;
    let p = plan("status", 1);
    let id = p.state.id.clone();
    a.create(&p).await.expect("create");
    assert_eq!(b.load(&id).await.expect("load"), p);
    let ready = StateChange::Node {
        node: 0,
        status: NodeStatus::Ready,
        at: 5,
    };
    a.append(&id, &[ready]).await.expect("append");
    let seen = b.load(&id).await.expect("load");
    assert_eq!(seen.state.nodes[0].status, NodeStatus::Ready);
    // b read one batch, not the plan again.
    assert_eq!((b.stats().states_read, b.stats().batches_read), (1, 1));
    schema.drop_now().await;
}

#[tokio::test]
async fn an_unreachable_server_is_a_transient_error() {
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    let options = PgOptions::default()
        .schema("unreachable")
        .connect_retries(1)
        .connect_timeout(Duration::from_secs(2));
    let begin = Instant::now();
    match PgPlanRepository::connect("postgres://postgres@127.0.0.1:1/test", options).await {
        Err(e) => assert!(e.is_transient(), "{e:?}"),
        Ok(store) => panic!("connected to {store:?}"),
    }
    assert!(begin.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_reconnects_after_the_server_drops_its_connections() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    // A name of its own, so that only this store's connections are terminated.
    let app = schema.name.clone();
    let sep = if url.contains('?') { '&' } else { '?' };
    let store_url = format!("{url}{sep}application_name={app}");
    let store = PgPlanRepository::connect(&store_url, schema.options())
        .await
        .expect("connect");
    let p = plan("survivor", 1);
    let id = p.state.id.clone();
    store.create(&p).await.expect("create");
    let client = raw(&url).await.expect("raw client");
    let killed = client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .expect("terminate");
    assert!(!killed.is_empty(), "the store had a connection open");
    // The server says goodbye on each connection; once the pool has seen it, calls get new
    // connections. The engine's Retrying wrapper covers a call that raced the goodbye.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let store: Arc<dyn PlanRepository> = Arc::new(store);
    let store = orchestrator_core::repository::Retrying::new(store);
    store
        .append(&id, &[started(2)])
        .await
        .expect("append after reconnect");
    let loaded = store.load(&id).await.expect("load after reconnect");
    assert_eq!(loaded.status(), PlanStatus::Running);
    schema.drop_now().await;
}

#[tokio::test]
async fn a_server_that_never_answers_is_waited_for_once() {
    // Accepts connections and says nothing: a hung server, or a host behind a black hole.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listen");
    let port = listener.local_addr().expect("address").port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let options = PgOptions::default()
        .schema("silent")
        .connect_timeout(Duration::from_millis(300));
    let begin = Instant::now();
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    match PgPlanRepository::connect(&url, options).await {
        Err(e) => assert!(e.is_transient(), "{e:?}"),
        Ok(store) => panic!("connected to {store:?}"),
    }
    let took = begin.elapsed();
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    silent.abort();
}

// ---- the work queue ---------------------------------------------------------------------------

/// A store on a fresh schema holding one plan, and that plan's id.
async fn queue_plan(url: &str) -> (Schema, PgPlanRepository, PlanId) {
    let schema = Schema::new(url);
    let store = schema.store(PgOptions::default()).await;
    let record = plan("queued", 1);
    store.create(&record).await.expect("create");
    (schema, store, record.state.id.clone())
}

fn item(plan: &PlanId, node: usize, attempt: u32) -> WorkItem {
    WorkItem::new(
        plan.clone(),
        format!("node-{node}"),
        attempt,
        serde_json::json!({"node": node}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_claim_disjoint_items_and_results_are_collected_once() {
    let Some(url) = server().await else { return };
    let (schema, store, id) = queue_plan(&url).await;
    let queue = store.work_queue(Duration::from_secs(30));
    for n in 0..24 {
        queue.enqueue(&item(&id, n, 1)).await.expect("enqueue");
    }
    // A coordinator that enqueues again after a restart adds nothing.
    queue
        .enqueue(&item(&id, 0, 1))
        .await
        .expect("enqueue again");
    let mut workers = Vec::new();
    for w in 0..4 {
        let queue = queue.clone();
        workers.push(tokio::spawn(async move {
            let name = format!("worker-{w}");
            let mut mine = Vec::new();
            loop {
                let claims = queue.claim(&name, 2).await.expect("claim");
                if claims.is_empty() {
                    return mine;
                }
                for claim in claims {
                    assert_eq!(claim.worker, name);
                    queue
                        .finish(&claim, serde_json::json!({"by": name}))
                        .await
                        .expect("finish");
                    mine.push(claim.item.node);
                }
            }
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.expect("worker"));
    }
    all.sort();
    let mut expected: Vec<String> = (0..24).map(|n| format!("node-{n}")).collect();
    expected.sort();
    assert_eq!(all, expected, "every item claimed once, none twice");
    let done = queue.collect(&id).await.expect("collect");
    assert_eq!(done.len(), 24);
    assert!(done.iter().all(|f| f.result["by"] == f.worker.as_str()));
    assert!(
        queue.collect(&id).await.expect("again").is_empty(),
        "handed out once"
    );
    schema.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_workers_lease_expires_and_its_late_result_is_fenced() {
    let Some(url) = server().await else { return };
    let (schema, store, id) = queue_plan(&url).await;
    let queue = store.work_queue(Duration::from_millis(800));
    queue.enqueue(&item(&id, 7, 1)).await.expect("enqueue");
    let stalled = queue.claim("stalled", 1).await.expect("claim").remove(0);
    assert!(
        queue.expire(&id).await.expect("expire").is_empty(),
        "not yet"
    );
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // It wakes up past its lease: renewing is refused even before the coordinator looked.
    let renew = queue.renew(&stalled).await;
    assert!(
        matches!(&renew, Err(QueueError::Fenced { why, .. }) if why.contains("expired")),
        "{renew:?}"
    );
    let expired = queue.expire(&id).await.expect("expire");
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].item.attempt, expired[0].worker.as_str()),
        (1, "stalled")
    );
    // The coordinator records a crashed attempt and enqueues the next one.
    queue.enqueue(&item(&id, 7, 2)).await.expect("next attempt");
    let fresh = queue.claim("fresh", 1).await.expect("claim").remove(0);
    assert_eq!(fresh.item.attempt, 2);
    let late = queue
        .finish(&stalled, serde_json::json!({"commit": "late"}))
        .await;
    assert!(matches!(late, Err(QueueError::Fenced { .. })), "{late:?}");
    queue
        .finish(&fresh, serde_json::json!({"commit": "good"}))
        .await
        .expect("finish");
    let done = queue.collect(&id).await.expect("collect");
    assert_eq!(done.len(), 1, "only the live claim's result: {done:?}");
    assert_eq!(done[0].result["commit"], "good");
    schema.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_claim_outlives_its_lease() {
    let Some(url) = server().await else { return };
    let (schema, store, id) = queue_plan(&url).await;
    let queue = store.work_queue(Duration::from_millis(600));
    queue.enqueue(&item(&id, 1, 1)).await.expect("enqueue");
    let claim = queue.claim("steady", 1).await.expect("claim").remove(0);
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        queue.renew(&claim).await.expect("renew");
    }
    assert!(queue.expire(&id).await.expect("expire").is_empty());
    assert!(queue.claim("other", 1).await.expect("claim").is_empty());
    queue
        .finish(&claim, serde_json::json!({}))
        .await
        .expect("finish");
    assert_eq!(queue.collect(&id).await.expect("collect").len(), 1);
    schema.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_attempt_or_a_withdrawal_stops_the_earlier_claim() {
    let Some(url) = server().await else { return };
    let (schema, store, id) = queue_plan(&url).await;
    let queue = store.work_queue(Duration::from_secs(30));
    queue.enqueue(&item(&id, 3, 1)).await.expect("enqueue");
    let old = queue.claim("old", 1).await.expect("claim").remove(0);
    // A coordinator that took the plan over runs the job again as attempt 2.
    queue.enqueue(&item(&id, 3, 2)).await.expect("attempt 2");
    let renew = queue.renew(&old).await;
    assert!(
        matches!(&renew, Err(QueueError::Fenced { why, .. }) if why.contains("withdrawn")),
        "{renew:?}"
    );
    let new = queue.claim("new", 1).await.expect("claim").remove(0);
    assert_eq!(new.item.attempt, 2);
    // A canceled job's attempt is withdrawn: its claim is fenced, nothing is collected.
    queue.withdraw(&id, "node-3", 2).await.expect("withdraw");
    assert!(matches!(
        queue.finish(&new, serde_json::json!({})).await,
        Err(QueueError::Fenced { .. })
    ));
    assert!(queue.collect(&id).await.expect("collect").is_empty());
    // Withdrawing what is gone or done already changes nothing.
    queue
        .withdraw(&id, "node-9", 1)
        .await
        .expect("withdraw a missing one");
    assert_eq!(
        queue.remote_of(&id).await.expect("remote of"),
        None,
        "these payloads name no remote"
    );
    schema.drop_now().await;
}
