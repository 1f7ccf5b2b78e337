//! Sessions in PostgreSQL ([`PgSessionRepository`]) against a real server: the session
//! conformance suite on a fresh schema per case, turn locks across repositories and across
//! processes (this test binary run again as the holder), records across reconnects.
//!
//! The server comes from `ORCHESTRATOR_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`). Without one answering within 2 s every test
//! passes, printing `skipped: no PostgreSQL at ...`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orchestrator_agents::session::{
    conformance, PgSessionRepository, SessionRecord, SessionRepository, TurnRecord, TurnStatus,
};
use orchestrator_agents::Error;
use orchestrator_storage::pg::{tokio_postgres, PgOptions, PgPlanRepository};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Set (to `url schema id`) when this binary runs as the holder process of
/// [`a_lock_held_by_another_process_is_refused_with_its_pid_and_freed_when_it_dies`].
const CHILD_ENV: &str = "ORCHESTRATOR_PG_SESSIONS_HOLDER";

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
    let answer = match raw(&url).await {
        Ok(client) => client
            .simple_query("SELECT 1")
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    match answer {
        Ok(()) => Some(url),
        Err(e) => {
            eprintln!("skipped: no PostgreSQL at {url}: {e}");
            None
        }
    }
}

/// A fresh schema (`t_<uuid>`), dropped by [`Schema::drop_now`] or, for a test that failed,
/// from a thread of its own.
struct Schema {
    url: String,
    name: String,
    dropped: bool,
}

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
            name: format!("t_{id}"),
            dropped: false,
        }
    }

    async fn store(&self) -> PgPlanRepository {
        connect(&self.url, &self.name).await
    }

    async fn sessions(&self) -> PgSessionRepository {
        PgSessionRepository::new(self.store().await)
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

async fn connect(url: &str, schema: &str) -> PgPlanRepository {
    match PgPlanRepository::connect(url, PgOptions::default().schema(schema)).await {
        Ok(store) => store,
        Err(e) => panic!("connect to {schema}: {e}"),
    }
}

fn record(id: &str, created_at: u64) -> SessionRecord {
    let mut r = SessionRecord::new(id, "claude", PathBuf::from("/repo"), PathBuf::from("/wt"));
    r.created_at = created_at;
    r
}

fn turn(n: u32) -> TurnRecord {
    let json = serde_json::json!({
        "turn": n,
        "prompt": format!("prompt {n}"),
        "status": "succeeded",
        "reply": format!("reply {n}"),
        "checkpoint": "0123456789abcdef0123456789abcdef01234567",
        "usage": {"inputTokens": 10, "costUsd": 0.25},
        "startedAt": 1,
        "endedAt": 2,
    });
    serde_json::from_value(json).expect("a turn record")
}

/// Tries to lock `id` until it is free or `within` has passed.
async fn lock_within(
    repo: &PgSessionRepository,
    id: &str,
    within: Duration,
) -> Result<orchestrator_agents::session::TurnLock, Error> {
    let deadline = Instant::now() + within;
    loop {
        match repo.lock(id).await {
            Err(Error::SessionBusy { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => return other,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pg_repository_passes_the_conformance_suite() {
    conformance_on_fresh_schemas().await;
}

#[tokio::test]
async fn the_suite_passes_on_a_current_thread_runtime_too() {
    conformance_on_fresh_schemas().await;
}

/// The session conformance suite, each case on a fresh schema (dropped afterwards).
async fn conformance_on_fresh_schemas() {
    let Some(url) = server().await else { return };
    let schemas = Arc::new(Mutex::new(Vec::new()));
    let cases = conformance::run_all(|| {
        let (schemas, url) = (schemas.clone(), url.clone());
        async move {
            let schema = Schema::new(&url);
            let sessions = schema.sessions().await;
            schemas.lock().expect("schemas").push(schema);
            sessions
        }
    })
    .await;
    assert_eq!(cases, 7);
    let schemas = std::mem::take(&mut *schemas.lock().expect("schemas"));
    for schema in schemas {
        schema.drop_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_repositories_cannot_both_hold_a_sessions_lock() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let a = schema.sessions().await;
    let b = schema.sessions().await;
    a.create(&record("s-1", 1)).await.expect("create");
    for _ in 0..3 {
        let held = a.lock("s-1").await.expect("a locks");
        match b.lock("s-1").await {
            Err(Error::SessionBusy { id, pid }) => {
                assert_eq!(id, "s-1");
                assert_eq!(pid, Some(std::process::id()), "the holder is this process");
            }
            other => panic!("b's lock while a holds it: {other:?}"),
        }
        drop(held);
        // Right after the drop, b (a repository of its own) has it at once.
        let held = b.lock("s-1").await.expect("b locks once a dropped");
        assert!(matches!(
            a.lock("s-1").await,
            Err(Error::SessionBusy { .. })
        ));
        drop(held);
    }
    schema.drop_now().await;
}

#[tokio::test]
async fn a_record_survives_reconnecting() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let mut r = record("s-keep", 10);
    r.turns.push(turn(1));
    {
        let sessions = schema.sessions().await;
        sessions.create(&r).await.expect("create");
        r.turns.push(turn(2));
        r.model = Some("opus".into());
        sessions.save(&r).await.expect("save");
        sessions.create(&record("s-old", 5)).await.expect("create");
    }
    let sessions = schema.sessions().await;
    assert_eq!(
        sessions.load("s-keep").await.expect("load"),
        Some(r.clone())
    );
    let ids: Vec<String> = sessions
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["s-old", "s-keep"]);
    // The plans' store of the same schema is unaffected and sees the same migrations.
    let client = raw(&url).await.expect("raw client");
    let sql = format!("SELECT max(version) FROM {}.schema_migrations", schema.name);
    let row = client.query_one(sql.as_str(), &[]).await.expect("query");
    assert_eq!(
        row.get::<_, i32>(0),
        orchestrator_storage::pg::MIGRATION_VERSION as i32
    );
    schema.drop_now().await;
}

#[tokio::test]
async fn a_record_that_does_not_read_back_is_a_store_error() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let sessions = schema.sessions().await;
    let client = raw(&url).await.expect("raw client");
    let sql = format!(
        "INSERT INTO {}.sessions (id, record, created_at) VALUES ('s-bad', '{{\"no\": 1}}', 1)",
        schema.name
    );
    client.execute(sql.as_str(), &[]).await.expect("insert");
    match sessions.load("s-bad").await {
        Err(Error::SessionStore { path, source }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::InvalidData);
            assert!(path.ends_with("sessions/s-bad"), "{}", path.display());
            assert!(path.starts_with("postgres://"), "{}", path.display());
        }
        other => panic!("load of a bad record: {other:?}"),
    }
    assert!(matches!(
        sessions.list().await,
        Err(Error::SessionStore { .. })
    ));
    // A missing table (the schema dropped under it) is a store error too, not a panic.
    drop_schema(&url, &schema.name).await.expect("drop");
    match sessions.load("s-1").await {
        Err(Error::SessionStore { source, .. }) => {
            assert!(source.to_string().contains("read a session"), "{source}")
        }
        other => panic!("load without a table: {other:?}"),
    }
    schema.drop_now().await;
}

/// This binary run again as the holder: its stdin takes `drop` and `lock`, it answers on its
/// stdout, and it is killed at the end.
struct Holder {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Holder {
    fn start(url: &str, schema: &str, id: &str) -> Holder {
        let exe = std::env::current_exe().expect("the test binary");
        let mut child = Command::new(exe)
            .args([
                "holder_process",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, format!("{url} {schema} {id}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the holder");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut holder = Holder {
            child,
            stdin,
            stdout,
        };
        holder.expect("locked");
        holder
    }

    /// Reads lines until one is `want`.
    fn expect(&mut self, want: &str) {
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read the holder");
            assert!(n > 0, "the holder ended before saying {want}");
            // The test harness may print `test holder_process ... ` before it.
            if line.trim_end().ends_with(want) {
                return;
            }
            assert!(!line.contains("holder failed"), "{line}");
        }
    }

    fn tell(&mut self, what: &str) {
        writeln!(self.stdin, "{what}").expect("write to the holder");
        self.stdin.flush().expect("flush");
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The holder's side of the test below; a no-op unless [`CHILD_ENV`] is set.
#[tokio::test]
async fn holder_process() {
    let Ok(args) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = args.split(' ');
    let (Some(url), Some(schema), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
        panic!("bad {CHILD_ENV}: {args}");
    };
    let sessions = PgSessionRepository::new(connect(url, schema).await);
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut held = match sessions.lock(id).await {
        Ok(lock) => Some(lock),
        Err(e) => {
            println!("holder failed: {e}");
            return;
        }
    };
    println!("locked");
    while let Some(line) = lines.recv().await {
        match line.trim() {
            "drop" => {
                held = None;
                println!("dropped");
            }
            // `lock` tries once; `lock-wait` waits for a release still landing.
            "lock" | "lock-wait" => {
                let taken = if line.trim() == "lock" {
                    sessions.lock(id).await
                } else {
                    lock_within(&sessions, id, Duration::from_secs(10)).await
                };
                match taken {
                    Ok(lock) => {
                        held = Some(lock);
                        println!("locked");
                    }
                    Err(e) => println!("holder failed: {e}"),
                }
            }
            _ => {}
        }
    }
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_by_another_process_is_refused_with_its_pid_and_freed_when_it_dies() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let sessions = schema.sessions().await;
    sessions.create(&record("s-1", 1)).await.expect("create");
    sessions.create(&record("s-2", 1)).await.expect("create");

    let mut holder = Holder::start(&url, &schema.name, "s-1");
    match sessions.lock("s-1").await {
        Err(Error::SessionBusy { id, pid }) => {
            assert_eq!(id, "s-1");
            assert_eq!(pid, Some(holder.child.id()), "the holder's pid");
            assert_ne!(pid, Some(std::process::id()));
        }
        other => panic!("lock held by another process: {other:?}"),
    }
    let other = sessions.lock("s-2").await;
    assert!(other.is_ok(), "locks are per session: {other:?}");
    drop(other);

    // Dropped by its holder: free (as soon as the unlock has landed).
    holder.tell("drop");
    holder.expect("dropped");
    let mine = lock_within(&sessions, "s-1", Duration::from_secs(5))
        .await
        .expect("free once the holder dropped it");
    holder.tell("lock");
    let mut line = String::new();
    holder.stdout.read_line(&mut line).expect("read the holder");
    assert!(
        line.contains("holder failed") && line.contains("running a turn"),
        "the holder cannot take it back while this process holds it: {line}"
    );
    drop(mine);

    // Held again (once this process's release has landed), then the holder dies without
    // dropping anything: the server frees it.
    holder.tell("lock-wait");
    holder.expect("locked");
    assert!(matches!(
        sessions.lock("s-1").await,
        Err(Error::SessionBusy { .. })
    ));
    let _ = holder.child.kill();
    let _ = holder.child.wait();
    let died = Instant::now();
    let mine = lock_within(&sessions, "s-1", Duration::from_secs(10))
        .await
        .expect("free once the holder died");
    println!(
        "the lock was free {:?} after its holder died",
        died.elapsed()
    );
    drop(mine);
    drop(holder);
    schema.drop_now().await;
}

#[tokio::test]
async fn turn_status_round_trips_through_the_database() {
    let Some(url) = server().await else { return };
    let schema = Schema::new(&url);
    let sessions = schema.sessions().await;
    let mut r = record("s-status", 3);
    let mut running = turn(1);
    running.status = TurnStatus::Running;
    running.ended_at = None;
    r.turns.push(running);
    sessions.create(&r).await.expect("create");
    let loaded = sessions.load("s-status").await.expect("load");
    assert_eq!(
        loaded
            .as_ref()
            .and_then(|s| s.running_turn())
            .map(|t| t.turn),
        Some(1)
    );
    assert_eq!(loaded, Some(r));
    schema.drop_now().await;
}
