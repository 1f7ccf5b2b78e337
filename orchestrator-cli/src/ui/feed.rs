//! What changed, as it changes: the store tells (the file store through the operating
//! system's file notifications on its folder, not by reading files on a timer), and the pages'
//! event streams reload what they show through the SDK when their plan is named.
//!
//! Notifications are gathered for [`SETTLE`] and then sent once per plan, so a plan whose jobs
//! change fifty times a second costs its viewers a few reloads a second, not fifty.

use std::collections::{BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use orchestrator_core::PlanId;
use tokio::sync::{broadcast, mpsc};

/// How long notifications are gathered before they are sent.
pub const SETTLE: Duration = Duration::from_millis(100);

/// How often plans kept in a database are looked at (it sends no notifications here).
const DATABASE_TICK: Duration = Duration::from_secs(1);

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// Something of this plan changed: its state, its logs, a new plan.
    Plan(PlanId),
    /// A session changed.
    Sessions,
}

/// The changes of one store, for any number of listeners.
pub struct Feed {
    changes: broadcast::Sender<Change>,
    watching: Option<Arc<Watching>>,
    generations: Generations,
}

/// How many changes of each plan were announced: what a listener reads after a change is at
/// least that change's number, so a plan loaded for that number or a later one shows it (and
/// the listeners of one plan share one load per change).
#[derive(Clone, Default)]
struct Generations(Arc<Mutex<std::collections::HashMap<PlanId, u64>>>);

impl Generations {
    fn bump(&self, id: &PlanId) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry(id.clone()).or_default() += 1;
    }

    fn of(&self, id: &PlanId) -> u64 {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(id).copied().unwrap_or_default()
    }
}

/// Sends `change`, first counting it for its plan.
fn announce(out: &broadcast::Sender<Change>, generations: &Generations, change: Change) {
    if let Change::Plan(id) = &change {
        generations.bump(id);
    }
    let _ = out.send(change);
}

/// The folders watched, each on its own (never a whole tree: a store of many large plans has
/// more folders than the system lets one process watch): the store, `plans/` and each plan's
/// folder (its journal and snapshot), `sessions/` and each session's folder — and, for the plans
/// someone looks at, their `logs/` tree (the live log tails).
struct Watching {
    root: PathBuf,
    watcher: Mutex<notify::RecommendedWatcher>,
    watched: Mutex<HashSet<PathBuf>>,
    followed: Mutex<HashSet<PlanId>>,
}

impl Watching {
    /// Watches `dir` (once); false when it cannot be watched (missing, or the system's limit).
    fn add(&self, dir: &Path, mode: RecursiveMode) -> bool {
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        if watched.contains(dir) {
            return true;
        }
        let ok = self
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .watch(dir, mode)
            .is_ok();
        if ok {
            watched.insert(dir.to_path_buf());
        }
        ok
    }

    /// Watches what is under `dir` (`plans` or `sessions`) and what is in it already.
    fn add_listing(&self, dir: &Path) {
        if !self.add(dir, RecursiveMode::NonRecursive) {
            return;
        }
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !hidden(&path) {
                self.add(&path, RecursiveMode::NonRecursive);
            }
        }
    }

    /// Takes note of a notification about `path`: new folders of the layout are watched.
    fn notice(&self, path: &Path) {
        let Ok(rest) = path.strip_prefix(&self.root) else {
            return;
        };
        let parts: Vec<&str> = rest
            .components()
            .filter_map(|c| match c {
                Component::Normal(p) => p.to_str(),
                _ => None,
            })
            .collect();
        match parts.as_slice() {
            ["plans"] | ["sessions"] => self.add_listing(path),
            ["plans" | "sessions", name] if !name.starts_with('.') && path.is_dir() => {
                self.add(path, RecursiveMode::NonRecursive);
            }
            ["plans", id, "logs"] => {
                let followed = self.followed.lock().unwrap_or_else(|e| e.into_inner());
                if followed.contains(&PlanId::from(*id)) {
                    self.add(path, RecursiveMode::Recursive);
                }
            }
            _ => {}
        }
    }
}

/// Whether a notification is of something written, made, renamed or removed.
fn writes(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    use notify::EventKind;
    matches!(
        kind,
        EventKind::Create(_)
            | EventKind::Modify(_)
            | EventKind::Remove(_)
            | EventKind::Access(AccessKind::Close(AccessMode::Write))
    )
}

fn hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_none_or(|n| n.starts_with('.'))
}

impl Feed {
    /// Changes of the file store at `store_root` (`<repo>/.orchestrator`), which is made when
    /// missing (owner only, as the store makes it) so that plans to come are seen.
    pub fn watch_files(store_root: &Path) -> std::io::Result<Feed> {
        make_private_dir(store_root)?;
        let (raw, rx) = mpsc::unbounded_channel::<PathBuf>();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            // Only writes: a file opened or read (the dashboard's own loads among them) would
            // otherwise announce a change and have it loaded again, without end.
            if !writes(&event.kind) {
                return;
            }
            for path in event.paths {
                let _ = raw.send(path);
            }
        })
        .map_err(std::io::Error::other)?;
        let watching = Arc::new(Watching {
            root: store_root.to_path_buf(),
            watcher: Mutex::new(watcher),
            watched: Mutex::new(HashSet::new()),
            followed: Mutex::new(HashSet::new()),
        });
        if !watching.add(store_root, RecursiveMode::NonRecursive) {
            return Err(std::io::Error::other(format!(
                "{} cannot be watched",
                store_root.display()
            )));
        }
        watching.add_listing(&store_root.join("plans"));
        watching.add_listing(&store_root.join("sessions"));
        let (changes, _) = broadcast::channel(1024);
        let generations = Generations::default();
        tokio::spawn(settle(
            rx,
            watching.clone(),
            changes.clone(),
            generations.clone(),
        ));
        Ok(Feed {
            changes,
            watching: Some(watching),
            generations,
        })
    }

    /// Also follows plan `id`'s logs as they are written (for a page showing a job's log tail),
    /// as far as the system lets more folders be watched.
    pub fn follow_logs(&self, id: &PlanId) {
        let Some(w) = &self.watching else { return };
        w.followed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone());
        let logs = w.root.join("plans").join(id.as_str()).join("logs");
        if logs.is_dir() {
            w.add(&logs, RecursiveMode::Recursive);
        }
    }

    /// Changes of plans kept in a database: `unfinished` lists the plans still going (through
    /// the SDK), which are announced every second.
    pub fn tick<F, Fut>(unfinished: F) -> Feed
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Vec<PlanId>> + Send,
    {
        let (changes, _) = broadcast::channel(1024);
        let generations = Generations::default();
        let (tx, counts) = (changes.clone(), generations.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(DATABASE_TICK).await;
                if tx.receiver_count() == 0 {
                    continue;
                }
                for id in unfinished().await {
                    announce(&tx, &counts, Change::Plan(id));
                }
                announce(&tx, &counts, Change::Sessions);
            }
        });
        Feed {
            changes,
            watching: None,
            generations,
        }
    }

    /// How many changes of plan `id` were announced so far.
    pub fn generation(&self, id: &PlanId) -> u64 {
        self.generations.of(id)
    }

    /// Listens to the changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }
}

/// Sends each change gathered over [`SETTLE`] once, and watches new folders as they appear.
async fn settle(
    mut raw: mpsc::UnboundedReceiver<PathBuf>,
    watching: Arc<Watching>,
    out: broadcast::Sender<Change>,
    generations: Generations,
) {
    while let Some(first) = raw.recv().await {
        let mut paths = vec![first];
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                next = raw.recv() => match next {
                    Some(p) => paths.push(p),
                    None => break,
                },
            }
        }
        let mut batch = BTreeSet::new();
        for path in &paths {
            watching.notice(path);
            batch.extend(change_of(&watching.root, path));
        }
        for change in batch {
            announce(&out, &generations, change);
        }
    }
}

/// The change a notification about `path` under the store's `root` means: a file of
/// `plans/<planId>/…` is that plan's, one of `sessions/…` the sessions'.
fn change_of(root: &Path, path: &Path) -> Option<Change> {
    let rest = path.strip_prefix(root).ok()?;
    let mut parts = rest.components().filter_map(|c| match c {
        Component::Normal(p) => p.to_str(),
        _ => None,
    });
    match parts.next()? {
        "plans" => {
            let id = parts.next()?;
            // Temporary files of an atomic write sit beside the plans' folders.
            (!id.starts_with('.') && !id.contains('.')).then(|| Change::Plan(PlanId::from(id)))
        }
        "sessions" => Some(Change::Sessions),
        _ => None,
    }
}

fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The next change within 5 s, skipping `Sessions` unless asked for.
    async fn next(rx: &mut broadcast::Receiver<Change>) -> Option<Change> {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .ok()?
            .ok()
    }

    #[tokio::test]
    async fn plans_new_and_old_and_followed_logs_are_seen_without_watching_whole_trees() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join(".orchestrator");
        let old = root.join("plans/old-plan");
        std::fs::create_dir_all(old.join("specs/n1/attempts")).expect("mkdir");
        let feed = Feed::watch_files(&root).expect("watch");
        let mut rx = feed.subscribe();
        std::fs::write(old.join("journal-000000.log"), "x").expect("write");
        assert_eq!(
            next(&mut rx).await,
            Some(Change::Plan(PlanId::from("old-plan")))
        );
        // Counted before it was sent: a page reading the count now loads the change.
        assert_eq!(feed.generation(&PlanId::from("old-plan")), 1);
        assert_eq!(feed.generation(&PlanId::from("new-plan")), 0);
        // A plan made after the start: written aside, then renamed into place (as the store does).
        std::fs::create_dir_all(root.join("plans/.create-new")).expect("mkdir");
        std::fs::rename(root.join("plans/.create-new"), root.join("plans/new-plan")).expect("mv");
        assert_eq!(
            next(&mut rx).await,
            Some(Change::Plan(PlanId::from("new-plan")))
        );
        tokio::time::sleep(SETTLE * 2).await;
        std::fs::write(root.join("plans/new-plan/journal-000000.log"), "y").expect("write");
        assert_eq!(
            next(&mut rx).await,
            Some(Change::Plan(PlanId::from("new-plan")))
        );
        // Deeper folders are not watched unless the plan's logs are followed.
        let watched = feed
            .watching
            .as_ref()
            .map(|w| w.watched.lock().map(|s| s.len()).unwrap_or(0));
        assert_eq!(watched, Some(4), "the store, plans/ and the two plans");
        let logs = root.join("plans/new-plan/logs/n1/1");
        std::fs::create_dir_all(&logs).expect("mkdir");
        feed.follow_logs(&PlanId::from("new-plan"));
        while tokio::time::timeout(SETTLE * 3, rx.recv()).await.is_ok() {}
        std::fs::write(logs.join("work.log"), "a line\n").expect("write");
        assert_eq!(
            next(&mut rx).await,
            Some(Change::Plan(PlanId::from("new-plan")))
        );
    }

    #[test]
    fn only_writes_are_changes() {
        use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RemoveKind};
        use notify::EventKind;
        // Opening and reading (every load of a plan does) must not announce a change: the
        // dashboard would load the plan again on it, and announce that load, without end.
        assert!(!writes(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!writes(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!writes(&EventKind::Access(AccessKind::Read)));
        assert!(writes(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(writes(&EventKind::Modify(ModifyKind::Any)));
        assert!(writes(&EventKind::Create(CreateKind::Folder)));
        assert!(writes(&EventKind::Remove(RemoveKind::File)));
    }

    #[test]
    fn paths_name_their_plan_or_the_sessions() {
        let root = Path::new("/r/.orchestrator");
        assert_eq!(
            change_of(root, Path::new("/r/.orchestrator/plans/abc/journal")),
            Some(Change::Plan(PlanId::from("abc")))
        );
        assert_eq!(
            change_of(root, Path::new("/r/.orchestrator/plans/abc")),
            Some(Change::Plan(PlanId::from("abc")))
        );
        assert_eq!(
            change_of(root, Path::new("/r/.orchestrator/sessions/s1/record.json")),
            Some(Change::Sessions)
        );
        assert_eq!(change_of(root, Path::new("/r/.orchestrator/plans")), None);
        assert_eq!(
            change_of(root, Path::new("/r/.orchestrator/plans/.tmp1")),
            None
        );
        assert_eq!(change_of(root, Path::new("/r/.orchestrator/blobs/x")), None);
        assert_eq!(change_of(root, Path::new("/elsewhere/plans/abc")), None);
    }
}
