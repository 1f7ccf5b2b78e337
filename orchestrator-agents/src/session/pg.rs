//! [`PgSessionRepository`]: sessions in PostgreSQL, in the same database and schema as a
//! [`PgPlanRepository`] (SPEC §16: "sessions (§14) ... live there too").

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::StoreError;
use orchestrator_storage::pg::deadpool_postgres::{ClientWrapper, Object};
use orchestrator_storage::pg::{tokio_postgres, PgPlanRepository};
use tokio::sync::watch;

use super::record::SessionRecord;
use super::repository::{check_session_id, SessionRepository, TurnLock};
use crate::error::Error;

/// Sessions in PostgreSQL: the `sessions` table of a [`PgPlanRepository`]'s schema (its
/// migration `0003_sessions`, applied by [`PgPlanRepository::connect`]), so every machine
/// reaching the database sees the same sessions.
///
/// - A session is one row: its [`SessionRecord`] as JSON, and its `createdAt` on its own,
///   which [`list`](SessionRepository::list) orders by (oldest first, then by id).
/// - [`create`](SessionRepository::create) is one `INSERT ... ON CONFLICT DO NOTHING`
///   ([`Error::SessionExists`] when the id is taken), [`save`](SessionRepository::save) one
///   `UPDATE` (atomic; [`Error::UnknownSession`] when there is no such row).
/// - [`lock`](SessionRepository::lock) takes a session-level advisory lock
///   (`pg_try_advisory_lock`, keyed on the schema and the session id) on a connection of its
///   own, taken out of the pool and held by the [`TurnLock`]: exclusive across processes and
///   machines, never waited for. Dropping the lock unlocks it and closes that connection; if
///   the process dies, its connection closes and the server releases the lock. A lock is as
///   good as its connection: one broken during a turn (the server restarted) loses the lock.
///   Each held lock is one more connection to the server, outside the pool's
///   [`pool_size`](orchestrator_storage::pg::PgOptions::pool_size).
/// - A lock held elsewhere is [`Error::SessionBusy`] whose `pid` is the holder's process id
///   on its own machine (written into its lock connection's `application_name` as
///   `orchestrator-session pid=<pid> host=<host>`); `None` when the server does not show it
///   (a holder connected as another role, seen by one without `pg_read_all_stats`).
/// - Failures of the database are [`Error::SessionStore`] naming
///   `<store location>/sessions/<id>`, whose source keeps the store's kind (`Interrupted` or
///   `TimedOut` for a transient failure, see [`PgPlanRepository::db_error`]); a record that
///   does not read back is kind `InvalidData`.
///
/// Cloning shares the store's pool.
///
/// ```no_run
/// use orchestrator_agents::session::{PgSessionRepository, SessionRecord, SessionRepository};
/// use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = PgPlanRepository::connect(
///     "postgres://postgres@127.0.0.1:5432/test",
///     PgOptions::default(),
/// )
/// .await?;
/// let sessions = PgSessionRepository::new(store);
/// let record = SessionRecord::new("s-1", "claude", "/work/repo".into(), "/work/wt".into());
/// sessions.create(&record).await?;
/// let turn = sessions.lock("s-1").await?; // one turn at a time, across machines
/// assert_eq!(sessions.load("s-1").await?, Some(record));
/// drop(turn);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PgSessionRepository {
    store: PgPlanRepository,
}

impl PgSessionRepository {
    /// The sessions of `store`'s database and schema.
    pub fn new(store: PgPlanRepository) -> Self {
        PgSessionRepository { store }
    }

    /// The plan store whose database holds the sessions.
    pub fn store(&self) -> &PgPlanRepository {
        &self.store
    }

    /// What errors about session `id` name: `<store location>/sessions/<id>`.
    fn path(&self, id: &str) -> PathBuf {
        self.store.location().join("sessions").join(id)
    }

    async fn client(&self, what: &'static str, path: &Path) -> Result<Object, Error> {
        self.store
            .client(what)
            .await
            .map_err(|e| session_store(path.to_path_buf(), e))
    }

    /// Turns a failure of a query run for `what` into the crate's error.
    fn fail<'a>(
        &'a self,
        what: &'static str,
        path: &'a Path,
    ) -> impl FnOnce(tokio_postgres::Error) -> Error + 'a {
        move |e| session_store(path.to_path_buf(), self.store.db_error(what, e))
    }

    /// The advisory lock key of session `id`, and where the process-wide table keeps it.
    fn lock_key(&self, id: &str) -> LockKey {
        LockKey::new(self.store.schema(), id, self.path(id))
    }
}

/// A failure of the store as the crate's error.
fn session_store(path: PathBuf, e: StoreError) -> Error {
    let source = match e {
        StoreError::Io {
            operation, source, ..
        } => io::Error::new(source.kind(), Failed { operation, source }),
        StoreError::Corrupt { message, .. } => io::Error::new(io::ErrorKind::InvalidData, message),
        other => io::Error::other(other),
    };
    Error::SessionStore { path, source }
}

/// What the store was doing when it failed, and why (the path is the error's own).
#[derive(Debug)]
struct Failed {
    operation: &'static str,
    source: io::Error,
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot {}: {}", self.operation, self.source)
    }
}

impl std::error::Error for Failed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// A record that cannot be written or read back as JSON.
fn bad_json(path: &Path, e: serde_json::Error) -> Error {
    Error::SessionStore {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, e),
    }
}

fn parse(json: &str, path: &Path) -> Result<SessionRecord, Error> {
    serde_json::from_str(json).map_err(|e| bad_json(path, e))
}

/// The record's `createdAt` for the ordering column (clamped into `bigint`).
fn created_at(record: &SessionRecord) -> i64 {
    i64::try_from(record.created_at).unwrap_or(i64::MAX)
}

fn unknown(id: &str) -> Error {
    Error::UnknownSession {
        given: id.to_owned(),
        known: String::new(),
    }
}

#[async_trait]
impl SessionRepository for PgSessionRepository {
    async fn create(&self, record: &SessionRecord) -> Result<(), Error> {
        check_session_id(&record.id)?;
        let path = self.path(&record.id);
        let json = serde_json::to_string(record).map_err(|e| bad_json(&path, e))?;
        let client = self.client("create a session", &path).await?;
        let inserted = client
            .execute(
                "INSERT INTO sessions (id, record, created_at) VALUES ($1, $2::text::json, $3)
                 ON CONFLICT (id) DO NOTHING",
                &[&record.id, &json, &created_at(record)],
            )
            .await
            .map_err(self.fail("create a session", &path))?;
        if inserted == 0 {
            return Err(Error::SessionExists {
                id: record.id.clone(),
            });
        }
        Ok(())
    }

    async fn save(&self, record: &SessionRecord) -> Result<(), Error> {
        check_session_id(&record.id)?;
        let path = self.path(&record.id);
        let json = serde_json::to_string(record).map_err(|e| bad_json(&path, e))?;
        let client = self.client("save a session", &path).await?;
        let updated = client
            .execute(
                "UPDATE sessions SET record = $2::text::json, created_at = $3,
                        updated_time = now()
                 WHERE id = $1",
                &[&record.id, &json, &created_at(record)],
            )
            .await
            .map_err(self.fail("save a session", &path))?;
        if updated == 0 {
            return Err(unknown(&record.id));
        }
        Ok(())
    }

    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, Error> {
        if check_session_id(id).is_err() {
            return Ok(None);
        }
        let path = self.path(id);
        let client = self.client("read a session", &path).await?;
        let row = client
            .query_opt("SELECT record::text FROM sessions WHERE id = $1", &[&id])
            .await
            .map_err(self.fail("read a session", &path))?;
        let Some(row) = row else { return Ok(None) };
        let json: String = row.try_get(0).map_err(self.fail("read a session", &path))?;
        parse(&json, &path).map(Some)
    }

    async fn list(&self) -> Result<Vec<SessionRecord>, Error> {
        let path = self.store.location().join("sessions");
        let client = self.client("list the sessions", &path).await?;
        let rows = client
            .query(
                "SELECT id, record::text FROM sessions ORDER BY created_at, id",
                &[],
            )
            .await
            .map_err(self.fail("list the sessions", &path))?;
        let mut all = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row
                .try_get(0)
                .map_err(self.fail("list the sessions", &path))?;
            let json: String = row
                .try_get(1)
                .map_err(self.fail("list the sessions", &path))?;
            all.push(parse(&json, &path.join(id))?);
        }
        Ok(all)
    }

    async fn delete(&self, id: &str) -> Result<(), Error> {
        check_session_id(id)?;
        let path = self.path(id);
        let client = self.client("delete a session", &path).await?;
        client
            .execute("DELETE FROM sessions WHERE id = $1", &[&id])
            .await
            .map_err(self.fail("delete a session", &path))?;
        Ok(())
    }

    async fn lock(&self, id: &str) -> Result<TurnLock, Error> {
        check_session_id(id)?;
        let key = self.lock_key(id);
        let path = key.path.clone();
        {
            let client = self.client("lock a session", &path).await?;
            let found = client
                .query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&id])
                .await
                .map_err(self.fail("lock a session", &path))?;
            if found.is_none() {
                return Err(unknown(id));
            }
        }
        let wait = self.store.options().connect_timeout;
        let claim = Claim::take(&key.local, id, wait).await?;
        // A connection of its own, out of the pool: the lock lives as long as it does.
        let conn = Object::take(self.client("lock a session", &path).await?);
        let fail = self.fail("lock a session", &path);
        let got = try_lock(&conn, &key).await.map_err(fail)?;
        if !got {
            return Err(Error::SessionBusy {
                id: id.to_owned(),
                pid: holder_pid(&conn, &key).await,
            });
        }
        Ok(TurnLock::new(PgLock {
            conn: Some(conn),
            key,
            claim: Some(claim),
        }))
    }
}

/// Marks the lock connection with this process and takes the lock; `false`: held elsewhere.
async fn try_lock(conn: &ClientWrapper, key: &LockKey) -> Result<bool, tokio_postgres::Error> {
    let name = format!(
        "orchestrator-session pid={} host={}",
        std::process::id(),
        orchestrator_storage::pg::host_name()
    );
    conn.execute("SELECT set_config('application_name', $1, false)", &[&name])
        .await?;
    let row = conn
        .query_one(
            "SELECT pg_try_advisory_lock($1, $2)",
            &[&key.class, &key.object],
        )
        .await?;
    row.try_get(0)
}

/// The process id the holder of `key` wrote into its connection's name, if the server shows
/// it.
async fn holder_pid(conn: &ClientWrapper, key: &LockKey) -> Option<u32> {
    let rows = conn
        .query(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND l.classid::int8 = $1 AND l.objid::int8 = $2",
            &[&key.class_oid(), &key.object_oid()],
        )
        .await
        .ok()?;
    rows.iter()
        .filter_map(|row| row.try_get::<_, Option<String>>(0).ok().flatten())
        .find_map(|name| pid_in(&name))
}

/// The pid in an `orchestrator-session pid=<pid> host=<host>` connection name.
fn pid_in(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("orchestrator-session pid=")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A session's advisory lock key: the two `int4` halves of FNV-1a over the schema and the
/// session id (the two-key form, apart from the store's own one-key migration lock), and the
/// key of the process-wide table.
struct LockKey {
    class: i32,
    object: i32,
    /// `<store location>/sessions/<id>` (the location names server, database and schema).
    path: PathBuf,
    local: String,
}

impl LockKey {
    fn new(schema: &str, id: &str, path: PathBuf) -> LockKey {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in "orchestrator-agents sessions: "
            .bytes()
            .chain(schema.bytes())
            .chain(std::iter::once(b'\n'))
            .chain(id.bytes())
        {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let [a, b, c, d, e, f, g, h] = hash.to_be_bytes();
        LockKey {
            class: i32::from_be_bytes([a, b, c, d]),
            object: i32::from_be_bytes([e, f, g, h]),
            local: path.display().to_string(),
            path,
        }
    }

    /// The halves as `pg_locks` shows them (`oid`, unsigned).
    fn class_oid(&self) -> i64 {
        i64::from(u32::from_ne_bytes(self.class.to_ne_bytes()))
    }

    fn object_oid(&self) -> i64 {
        i64::from(u32::from_ne_bytes(self.object.to_ne_bytes()))
    }
}

/// The session locks of this process, by [`LockKey::local`]: held, or being released (the
/// unlock is on its way; the receiver's sender goes when it has landed). Without it a lock
/// taken right after a drop, in this process, could still find the old one held.
enum Local {
    Held,
    Releasing(watch::Receiver<()>),
}

fn locals() -> MutexGuard<'static, HashMap<String, Local>> {
    static LOCALS: OnceLock<Mutex<HashMap<String, Local>>> = OnceLock::new();
    // Poisoning only means a thread panicked holding it; every write is one insert or remove.
    LOCALS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// This process's claim on a session's lock (its entry [`Local::Held`]); removed on drop.
#[derive(Debug)]
struct Claim {
    local: String,
}

impl Claim {
    /// Claims `local` for this process: [`Error::SessionBusy`] (with this pid) when it holds
    /// the lock already; waits up to `wait` for a release under way.
    async fn take(local: &str, id: &str, wait: Duration) -> Result<Claim, Error> {
        let busy = || Error::SessionBusy {
            id: id.to_owned(),
            pid: Some(std::process::id()),
        };
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let mut releasing = {
                let mut map = locals();
                match map.get(local) {
                    Some(Local::Held) => return Err(busy()),
                    Some(Local::Releasing(rx)) if rx.has_changed().is_ok() => rx.clone(),
                    // Released (or its release was dropped): free.
                    _ => {
                        map.insert(local.to_owned(), Local::Held);
                        return Ok(Claim {
                            local: local.to_owned(),
                        });
                    }
                }
            };
            // Ends when the releasing task drops its sender.
            let done = tokio::time::timeout_at(deadline, releasing.changed()).await;
            if done.is_err() {
                return Err(busy());
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut map = locals();
        if matches!(map.get(&self.local), Some(Local::Held)) {
            map.remove(&self.local);
        }
    }
}

/// A held session lock: its connection and this process's claim.
struct PgLock {
    conn: Option<ClientWrapper>,
    key: LockKey,
    claim: Option<Claim>,
}

/// A release under way: on drop (done, or its task dropped) the entry goes, then the sender.
struct Release {
    local: String,
    rx: watch::Receiver<()>,
    _tx: watch::Sender<()>,
}

impl Drop for Release {
    fn drop(&mut self) {
        let mut map = locals();
        if let Some(Local::Releasing(rx)) = map.get(&self.local) {
            if rx.same_channel(&self.rx) {
                map.remove(&self.local);
            }
        }
    }
}

/// How long the unlock may take before the connection is just closed (which releases the
/// lock too, when the server notices).
const UNLOCK_TIMEOUT: Duration = Duration::from_secs(5);

impl Drop for PgLock {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to unlock on: closing the connection ends its server session, which
            // releases the lock.
            drop(conn);
            return;
        };
        let (tx, rx) = watch::channel(());
        let release = Release {
            local: self.key.local.clone(),
            rx: rx.clone(),
            _tx: tx,
        };
        locals().insert(self.key.local.clone(), Local::Releasing(rx));
        // The claim's entry is replaced: dropping it now removes nothing.
        drop(self.claim.take());
        let (class, object) = (self.key.class, self.key.object);
        runtime.spawn(async move {
            let args: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&class, &object];
            let unlock = conn.execute("SELECT pg_advisory_unlock($1, $2)", &args);
            let _ = tokio::time::timeout(UNLOCK_TIMEOUT, unlock).await;
            // Out of the pool: dropping it closes it.
            drop(conn);
            drop(release);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_keys_are_stable_and_differ_by_schema_and_id() {
        let key = |schema, id| {
            let k = LockKey::new(schema, id, PathBuf::new());
            (k.class, k.object)
        };
        assert_eq!(key("orchestrator", "s-1"), key("orchestrator", "s-1"));
        assert_ne!(key("orchestrator", "s-1"), key("orchestrator", "s-2"));
        assert_ne!(key("orchestrator", "s-1"), key("other", "s-1"));
    }

    #[test]
    fn oids_are_the_unsigned_halves() {
        let k = LockKey {
            class: -1,
            object: 7,
            path: PathBuf::new(),
            local: String::new(),
        };
        assert_eq!((k.class_oid(), k.object_oid()), (4_294_967_295, 7));
    }

    #[test]
    fn the_pid_reads_back_from_the_connection_name() {
        assert_eq!(pid_in("orchestrator-session pid=4242 host=h"), Some(4242));
        assert_eq!(pid_in("orchestrator-session pid=17"), Some(17));
        assert_eq!(pid_in("orchestrator"), None);
        assert_eq!(pid_in("orchestrator-session pid=x"), None);
    }

    #[tokio::test]
    async fn a_claim_is_exclusive_in_the_process_and_goes_on_drop() {
        let local = "test://claims/s-1";
        let first = Claim::take(local, "s-1", Duration::from_millis(10)).await;
        let first = first.unwrap_or_else(|e| panic!("{e}"));
        let second = Claim::take(local, "s-1", Duration::from_millis(10)).await;
        assert!(
            matches!(second, Err(Error::SessionBusy { pid: Some(p), .. }) if p == std::process::id())
        );
        drop(first);
        assert!(Claim::take(local, "s-1", Duration::from_millis(10))
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn a_claim_waits_for_a_release_under_way() {
        let local = "test://claims/s-2";
        let (tx, rx) = watch::channel(());
        locals().insert(local.to_owned(), Local::Releasing(rx.clone()));
        let release = Release {
            local: local.to_owned(),
            rx,
            _tx: tx,
        };
        let waiter = tokio::spawn(Claim::take(local, "s-2", Duration::from_secs(5)));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "it waits for the release");
        drop(release);
        let claim = waiter.await.unwrap_or_else(|e| panic!("{e}"));
        assert!(claim.is_ok(), "{claim:?}");
    }
}
