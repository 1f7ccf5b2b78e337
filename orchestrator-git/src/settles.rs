//! The worktrees this process is settling into each repository's pool (see `pool.rs`), so
//! that a creation that finds the pool empty while one of them settles waits for it: settling
//! walks the worktree's files, a fresh checkout writes every one of them. (A job that starts
//! as soon as another ends finds that one's worktree still settling.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a creation waits for settles at most; past it, it checks out afresh.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(2);

/// Settles under way, by repository path.
#[derive(Debug, Default)]
pub(crate) struct Settles {
    under_way: Mutex<HashMap<PathBuf, usize>>,
    ended: Notify,
}

impl Settles {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, usize>> {
        // Counts only: a panic while holding the lock leaves them whole.
        self.under_way.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a settle into `repo`'s pool until the returned guard is dropped.
    pub(crate) fn begin(&self, repo: &Path) -> Settling<'_> {
        *self.counts().entry(repo.to_path_buf()).or_default() += 1;
        Settling {
            settles: self,
            repo: repo.to_path_buf(),
        }
    }

    /// Whether a settle into `repo`'s pool is under way (a count of 0 is removed).
    pub(crate) fn any(&self, repo: &Path) -> bool {
        self.counts().contains_key(repo)
    }

    /// Waits until a settle into `repo`'s pool ends (any one), or until `deadline`; at once
    /// when none is under way.
    pub(crate) async fn wait(&self, repo: &Path, deadline: Instant) {
        let ended = self.ended.notified();
        tokio::pin!(ended);
        // Registered before the count is read: a settle that ends in between still wakes it.
        ended.as_mut().enable();
        if self.any(repo) {
            let _ = tokio::time::timeout_at(deadline, ended).await;
        }
    }
}

/// A settle under way (see [`Settles::begin`]).
pub(crate) struct Settling<'a> {
    settles: &'a Settles,
    repo: PathBuf,
}

impl Drop for Settling<'_> {
    fn drop(&mut self) {
        {
            let mut counts = self.settles.counts();
            if let Some(n) = counts.get_mut(&self.repo) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(&self.repo);
                }
            }
        }
        self.settles.ended.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_wait_ends_with_the_settle_or_at_once_without_one() {
        let settles = Arc::new(Settles::default());
        let repo = Path::new("/repo");
        let start = Instant::now();
        settles
            .wait(repo, Instant::now() + Duration::from_secs(5))
            .await;
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "no settle: no wait"
        );

        let settling = settles.begin(repo);
        assert!(settles.any(repo) && !settles.any(Path::new("/other")));
        let waiter = tokio::spawn({
            let settles = settles.clone();
            async move {
                let start = Instant::now();
                settles
                    .wait(Path::new("/repo"), Instant::now() + Duration::from_secs(30))
                    .await;
                start.elapsed()
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "waits while the settle is under way");
        drop(settling);
        let waited = waiter.await.expect("waiter");
        assert!(
            waited < Duration::from_secs(10),
            "woken by the settle's end"
        );
        assert!(!settles.any(repo));
    }

    #[tokio::test]
    async fn a_wait_is_bounded() {
        let settles = Settles::default();
        let repo = Path::new("/repo");
        let _settling = settles.begin(repo);
        let start = Instant::now();
        settles.wait(repo, start + Duration::from_millis(30)).await;
        assert!(start.elapsed() >= Duration::from_millis(30));
    }
}
