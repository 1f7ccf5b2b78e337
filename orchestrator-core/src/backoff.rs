//! The backoff schedule shared by the engine's retrying wrappers ([`crate::git::Retrying`],
//! [`crate::repository::Retrying`]): an operation that fails transiently is tried up to
//! [`TRIES`] times in all, waiting 25, 100 and 400 ms before the retries.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

/// Tries of one operation, the first included.
pub(crate) const TRIES: u32 = 4;

/// Wait before the first retry; each further one waits four times longer (25, 100, 400 ms).
pub(crate) const FIRST_DELAY: Duration = Duration::from_millis(25);

/// Where one operation is in the schedule.
#[derive(Debug)]
pub(crate) struct Backoff {
    tried: u32,
    delay: Duration,
}

impl Backoff {
    /// Before the first try.
    pub(crate) fn new() -> Self {
        Backoff {
            tried: 0,
            delay: FIRST_DELAY,
        }
    }

    /// Counts a try that failed transiently and returns the wait before the next one, or
    /// `None` when it was the last.
    pub(crate) fn failed(&mut self) -> Option<Duration> {
        self.tried += 1;
        if self.tried >= TRIES {
            return None;
        }
        let delay = self.delay;
        self.delay *= 4;
        Some(delay)
    }

    /// Counts a transient failure `error` of `operation` of `layer` ("git", "store"): waits
    /// before the next try and returns true, or returns false when no try is left.
    pub(crate) async fn wait(
        &mut self,
        layer: &str,
        operation: &str,
        error: &(dyn Display + Sync),
    ) -> bool {
        let Some(delay) = self.failed() else {
            return false;
        };
        tracing::debug!(
            layer,
            operation,
            error = %error,
            tried = self.tried,
            "transient error; trying again"
        );
        tokio::time::sleep(delay).await;
        true
    }
}

/// Runs `op` until it succeeds, fails with an error that `transient` does not accept, or has
/// been tried [`TRIES`] times; returns the last answer.
pub(crate) async fn retry<T, E, F, Fut>(
    layer: &str,
    operation: &str,
    transient: impl Fn(&E) -> bool,
    mut op: F,
) -> Result<T, E>
where
    E: Display + Sync,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut backoff = Backoff::new();
    loop {
        match op().await {
            Err(e) if transient(&e) => {
                if !backoff.wait(layer, operation, &e).await {
                    return Err(e);
                }
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_three_waits_growing_fourfold() {
        let mut backoff = Backoff::new();
        let waits: Vec<_> = std::iter::from_fn(|| backoff.failed()).collect();
        assert_eq!(
            waits,
            [25, 100, 400].map(Duration::from_millis),
            "{TRIES} tries"
        );
        assert_eq!(
            backoff.failed(),
            None,
            "no wait after the last of {TRIES} tries"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retry_returns_the_last_transient_error_after_the_last_try() {
        let start = tokio::time::Instant::now();
        let mut calls = 0;
        let result: Result<(), String> = retry(
            "test",
            "op",
            |_| true,
            || {
                calls += 1;
                std::future::ready(Err(format!("try {calls}")))
            },
        )
        .await;
        assert_eq!(result, Err(format!("try {TRIES}")));
        assert_eq!(calls, TRIES);
        assert_eq!(start.elapsed(), Duration::from_millis(525));
    }
}
