//! What changed, as it changes: the store tells (the file store through the operating
//! system's file notifications on its folder, not by reading files on a timer), and the pages'
//! event streams reload what they show through the SDK when their plan is named.
//!
//! Notifications are gathered for [`SETTLE`] and then sent once per plan, so a plan whose jobs
//! change fifty times a second costs its viewers a few reloads a second, not fifty.

use std::collections::BTreeSet;
use std::path::{Component, Path};
use std::time::Duration;

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
    // Kept for as long as the feed: dropping it stops the notifications.
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Feed {
    /// Changes of the file store at `store_root` (`<repo>/.orchestrator`), which is made when
    /// missing (owner only, as the store makes it) so that plans to come are seen.
    pub fn watch_files(store_root: &Path) -> std::io::Result<Feed> {
        make_private_dir(store_root)?;
        let (raw, rx) = mpsc::unbounded_channel();
        let root = store_root.to_path_buf();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                for path in &event.paths {
                    if let Some(change) = change_of(&root, path) {
                        let _ = raw.send(change);
                    }
                }
            })
            .map_err(std::io::Error::other)?;
        notify::Watcher::watch(&mut watcher, store_root, notify::RecursiveMode::Recursive)
            .map_err(std::io::Error::other)?;
        let (changes, _) = broadcast::channel(1024);
        tokio::spawn(settle(rx, changes.clone()));
        Ok(Feed {
            changes,
            _watcher: Some(watcher),
        })
    }

    /// Changes of plans kept in a database: `unfinished` lists the plans still going (through
    /// the SDK), which are announced every second.
    pub fn tick<F, Fut>(unfinished: F) -> Feed
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Vec<PlanId>> + Send,
    {
        let (changes, _) = broadcast::channel(1024);
        let tx = changes.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(DATABASE_TICK).await;
                if tx.receiver_count() == 0 {
                    continue;
                }
                for id in unfinished().await {
                    let _ = tx.send(Change::Plan(id));
                }
                let _ = tx.send(Change::Sessions);
            }
        });
        Feed {
            changes,
            _watcher: None,
        }
    }

    /// Listens to the changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }
}

/// Sends each change gathered over [`SETTLE`] once.
async fn settle(mut raw: mpsc::UnboundedReceiver<Change>, out: broadcast::Sender<Change>) {
    while let Some(first) = raw.recv().await {
        let mut batch = BTreeSet::from([first]);
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                next = raw.recv() => match next {
                    Some(c) => { batch.insert(c); }
                    None => break,
                },
            }
        }
        for change in batch {
            let _ = out.send(change);
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
