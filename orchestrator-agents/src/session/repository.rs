//! Where sessions are kept: the [`SessionRepository`] plug-in point, the file store
//! ([`FileSessionRepository`], `.orchestrator/sessions/` by default) and an in-memory one
//! ([`MemorySessionRepository`]). Both pass the suite in [`conformance`](super::conformance).

use std::any::Any;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use fs4::{FileExt, TryLockError};

use super::record::SessionRecord;
use crate::error::Error;

/// Stores [`SessionRecord`]s and hands out the one-at-a-time turn lock of each session.
#[async_trait]
pub trait SessionRepository: Send + Sync + Debug + 'static {
    /// Stores a new session; [`Error::SessionExists`] when its id is taken.
    async fn create(&self, record: &SessionRecord) -> Result<(), Error>;

    /// Replaces the stored record of `record.id`; [`Error::UnknownSession`] when there is
    /// none. The write is atomic: a crash leaves the old record or the new one.
    async fn save(&self, record: &SessionRecord) -> Result<(), Error>;

    /// The session `id`, `None` when there is none.
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, Error>;

    /// Every session, oldest first.
    async fn list(&self) -> Result<Vec<SessionRecord>, Error>;

    /// Removes the session `id`; removing a missing one is not an error.
    async fn delete(&self, id: &str) -> Result<(), Error>;

    /// Takes the turn lock of session `id` without waiting: at most one holder at a time,
    /// across processes where the store is shared, released when the [`TurnLock`] is dropped
    /// (or its process dies). Held by someone else: [`Error::SessionBusy`] with their pid.
    async fn lock(&self, id: &str) -> Result<TurnLock, Error>;
}

/// A session's turn lock ([`SessionRepository::lock`]), released on drop.
pub struct TurnLock(#[allow(dead_code)] Box<dyn Any + Send + Sync>);

impl TurnLock {
    /// A lock held as long as `guard` lives (for repository implementations).
    pub fn new(guard: impl Any + Send + Sync) -> Self {
        TurnLock(Box::new(guard))
    }
}

impl Debug for TurnLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnLock")
    }
}

/// Checks that `id` is usable as a session id: 1 to 64 ASCII letters, digits, `-` or `_`,
/// not starting with `-`.
///
/// ```
/// use orchestrator_agents::session::check_session_id;
/// assert!(check_session_id("s-01ab").is_ok());
/// assert!(check_session_id("../x").is_err());
/// ```
pub fn check_session_id(id: &str) -> Result<(), Error> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && !id.starts_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidSessionId { id: id.to_owned() })
    }
}

/// Sessions in memory (tests, hosts that keep nothing). Clones share the sessions.
#[derive(Debug, Clone, Default)]
pub struct MemorySessionRepository {
    sessions: Arc<Mutex<BTreeMap<String, SessionRecord>>>,
    locked: Arc<Mutex<HashSet<String>>>,
}

impl MemorySessionRepository {
    /// An empty repository.
    pub fn new() -> Self {
        MemorySessionRepository::default()
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, SessionRecord>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct MemoryLock {
    id: String,
    locked: Arc<Mutex<HashSet<String>>>,
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        self.locked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

#[async_trait]
impl SessionRepository for MemorySessionRepository {
    async fn create(&self, record: &SessionRecord) -> Result<(), Error> {
        check_session_id(&record.id)?;
        let mut sessions = self.sessions();
        if sessions.contains_key(&record.id) {
            return Err(Error::SessionExists {
                id: record.id.clone(),
            });
        }
        sessions.insert(record.id.clone(), record.clone());
        Ok(())
    }

    async fn save(&self, record: &SessionRecord) -> Result<(), Error> {
        let mut sessions = self.sessions();
        match sessions.get_mut(&record.id) {
            Some(stored) => {
                *stored = record.clone();
                Ok(())
            }
            None => Err(unknown(&record.id)),
        }
    }

    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, Error> {
        Ok(self.sessions().get(id).cloned())
    }

    async fn list(&self) -> Result<Vec<SessionRecord>, Error> {
        let mut all: Vec<SessionRecord> = self.sessions().values().cloned().collect();
        all.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(all)
    }

    async fn delete(&self, id: &str) -> Result<(), Error> {
        self.sessions().remove(id);
        Ok(())
    }

    async fn lock(&self, id: &str) -> Result<TurnLock, Error> {
        if !self.sessions().contains_key(id) {
            return Err(unknown(id));
        }
        let mut locked = self.locked.lock().unwrap_or_else(|e| e.into_inner());
        if !locked.insert(id.to_owned()) {
            return Err(Error::SessionBusy {
                id: id.to_owned(),
                pid: Some(std::process::id()),
            });
        }
        Ok(TurnLock::new(MemoryLock {
            id: id.to_owned(),
            locked: self.locked.clone(),
        }))
    }
}

fn unknown(id: &str) -> Error {
    Error::UnknownSession {
        given: id.to_owned(),
        known: String::new(),
    }
}

/// Sessions as files: `<root>/<id>/session.json` (written to a temporary file and renamed)
/// and `<root>/<id>/turn.lock` (an advisory lock holding the pid of the process running a
/// turn). The default root is `<repo>/.orchestrator/sessions`.
///
/// ```
/// use orchestrator_agents::session::FileSessionRepository;
/// let store = FileSessionRepository::for_repo("/work/repo");
/// assert_eq!(store.root(), std::path::Path::new("/work/repo/.orchestrator/sessions"));
/// ```
#[derive(Debug, Clone)]
pub struct FileSessionRepository {
    root: PathBuf,
}

impl FileSessionRepository {
    /// A store under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileSessionRepository { root: root.into() }
    }

    /// The store of the repository at `repo`: `<repo>/.orchestrator/sessions`.
    pub fn for_repo(repo: impl AsRef<Path>) -> Self {
        FileSessionRepository::new(repo.as_ref().join(".orchestrator").join("sessions"))
    }

    /// Where it keeps its sessions.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn record_file(&self, id: &str) -> Result<PathBuf, Error> {
        check_session_id(id)?;
        Ok(self.root.join(id).join("session.json"))
    }
}

fn store_err(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::SessionStore {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `record` to `file` through a temporary file and a rename.
fn write_record(file: &Path, record: &SessionRecord) -> Result<(), Error> {
    let text = serde_json::to_vec_pretty(record).map_err(|e| Error::SessionStore {
        path: file.to_path_buf(),
        source: io::Error::other(e),
    })?;
    let tmp = file.with_extension(format!("json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(store_err(&tmp))?;
    std::fs::rename(&tmp, file).map_err(store_err(file))
}

fn read_record(file: &Path) -> Result<Option<SessionRecord>, Error> {
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::SessionStore {
                path: file.to_path_buf(),
                source: io::Error::new(io::ErrorKind::InvalidData, e),
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(store_err(file)(e)),
    }
}

#[async_trait]
impl SessionRepository for FileSessionRepository {
    async fn create(&self, record: &SessionRecord) -> Result<(), Error> {
        let file = self.record_file(&record.id)?;
        let dir = self.root.join(&record.id);
        std::fs::create_dir_all(&self.root).map_err(store_err(&self.root))?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && !file.exists() => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(Error::SessionExists {
                    id: record.id.clone(),
                })
            }
            Err(e) => return Err(store_err(&dir)(e)),
        }
        write_record(&file, record)
    }

    async fn save(&self, record: &SessionRecord) -> Result<(), Error> {
        let file = self.record_file(&record.id)?;
        if !file.exists() {
            return Err(unknown(&record.id));
        }
        write_record(&file, record)
    }

    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, Error> {
        if check_session_id(id).is_err() {
            return Ok(None);
        }
        read_record(&self.record_file(id)?)
    }

    async fn list(&self) -> Result<Vec<SessionRecord>, Error> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(store_err(&self.root)(e)),
        };
        let mut all = Vec::new();
        for entry in entries {
            let entry = entry.map_err(store_err(&self.root))?;
            let name = entry.file_name();
            let Some(id) = name.to_str() else { continue };
            if check_session_id(id).is_err() {
                continue;
            }
            if let Some(record) = read_record(&entry.path().join("session.json"))? {
                all.push(record);
            }
        }
        all.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(all)
    }

    async fn delete(&self, id: &str) -> Result<(), Error> {
        check_session_id(id)?;
        let dir = self.root.join(id);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(store_err(&dir)(e)),
        }
    }

    async fn lock(&self, id: &str) -> Result<TurnLock, Error> {
        let file = self.record_file(id)?;
        if !file.exists() {
            return Err(unknown(id));
        }
        let path = self.root.join(id).join("turn.lock");
        let mut lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(store_err(&path))?;
        match FileExt::try_lock(&lock) {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = lock.read_to_string(&mut text);
                return Err(Error::SessionBusy {
                    id: id.to_owned(),
                    pid: text.trim().parse().ok(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(store_err(&path)(e)),
        }
        let pid = std::process::id().to_string();
        let written = lock
            .set_len(0)
            .and_then(|()| lock.seek(SeekFrom::Start(0)))
            .and_then(|_| lock.write_all(pid.as_bytes()))
            .and_then(|()| lock.flush());
        written.map_err(store_err(&path))?;
        Ok(TurnLock::new(FileLock(lock)))
    }
}

struct FileLock(File);

impl Drop for FileLock {
    fn drop(&mut self) {
        // Clear the pid so that nobody reads a stale holder; closing releases the lock.
        let _ = self.0.set_len(0);
        let _ = FileExt::unlock(&self.0);
    }
}
