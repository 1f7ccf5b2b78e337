//! [`Retrying`]: the engine's wrapper around the plugged store, retrying what the store marks
//! as [transient](StoreError::is_transient) (an interrupted, would-block or timed-out I/O
//! call) on the same backoff as [`crate::git::Retrying`] (4 tries, waiting 25, 100 and
//! 400 ms), so that a plan does not fail on a hiccup of the disk or the database. Permanent
//! errors, a plan [`Locked`](StoreError::Locked) by another owner among them, pass through at
//! once, unchanged.
//!
//! Only operations that are safe to repeat are retried:
//!
//! - reads ([`load`](PlanRepository::load), [`list`](PlanRepository::list),
//!   [`load_attempt_specs`](PlanRepository::load_attempt_specs),
//!   [`read_log`](PlanRepository::read_log)) change nothing;
//! - [`save_attempt_specs`](PlanRepository::save_attempt_specs) replaces whatever was stored
//!   for the attempt, so writing it twice leaves what writing it once does;
//! - [`acquire`](PlanRepository::acquire): a failed acquire holds no lease (the file store's
//!   lock belongs to the open lock file, closed on every error path), so trying again is
//!   taking it afresh;
//! - [`create`](PlanRepository::create) and [`delete`](PlanRepository::delete) write the whole
//!   plan or nothing (the file store renames a finished folder into place, or away), but a try
//!   that failed transiently may have done so before failing (the rename was made, the sync of
//!   the folder after it timed out). A retry that then answers `AlreadyExists` (`create`) or
//!   `NotFound` (`delete`) cannot tell whether the failed try or someone else did the write,
//!   so the first transient error is returned: what the caller would have seen without this
//!   wrapper.
//!
//! Not retried:
//!
//! - [`append`](PlanRepository::append) of journal changes: a failed append is not known to
//!   have written nothing. The file store writes the record and then flushes it; a write that
//!   fails half-way leaves a torn tail that the next append cuts, but a flush that fails (times
//!   out) after the whole record was written leaves the changes in the journal, and a SQL store
//!   can lose the answer to a commit that was made. Appending the batch again would apply the
//!   changes twice (a transition rejected as already made, an output or a count recorded
//!   twice), so the error goes to the engine, which decides.
//! - [`append_log`](PlanRepository::append_log), for the same reason: a log write that fails
//!   after some bytes were written would, tried again, repeat the lines (or a part of one).

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    AttemptSpecs, Lease, LogKey, LogQuery, PlanListing, PlanRepository, Staged, StoreError,
};
use crate::backoff::{self, Backoff};
use crate::ids::{NodeId, PlanId};
use crate::state::{PlanRecord, StateChange};

/// A store whose transient errors are retried where that is safe (see the module docs).
#[derive(Debug, Clone)]
pub struct Retrying(Arc<dyn PlanRepository>);

impl Retrying {
    /// Wraps `store`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use orchestrator_core::repository::{InMemoryPlanRepository, PlanRepository, Retrying};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // What the orchestrator's builder does with the store it is given.
    /// let store: Arc<dyn PlanRepository> = Arc::new(InMemoryPlanRepository::new());
    /// let store: Arc<dyn PlanRepository> = Arc::new(Retrying::new(store));
    /// assert!(store.list().await.expect("an empty store lists").plans.is_empty());
    /// # }
    /// ```
    pub fn new(store: Arc<dyn PlanRepository>) -> Self {
        Retrying(store)
    }
}

/// Runs `op` until it succeeds, fails permanently, or has been tried
/// [`TRIES`](backoff::TRIES) times; returns the last answer.
async fn again<T, F, Fut>(what: &str, op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    backoff::retry("store", what, StoreError::is_transient, op).await
}

/// [`again`] for a write that a later try may find done (see the module docs): when a try
/// after a transient failure answers an error that `done` accepts, the first transient error
/// is returned instead.
async fn again_unless_done<F, Fut>(
    what: &str,
    done: fn(&StoreError) -> bool,
    mut op: F,
) -> Result<(), StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), StoreError>>,
{
    let mut backoff = Backoff::new();
    let mut first: Option<StoreError> = None;
    loop {
        let e = match op().await {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if done(&e) {
            if let Some(first) = first {
                return Err(first);
            }
        }
        if !e.is_transient() || !backoff.wait("store", what, &e).await {
            return Err(e);
        }
        first.get_or_insert(e);
    }
}

#[async_trait]
impl PlanRepository for Retrying {
    async fn create(&self, plan: &PlanRecord) -> Result<(), StoreError> {
        let exists = |e: &StoreError| matches!(e, StoreError::AlreadyExists(_));
        again_unless_done("create", exists, || self.0.create(plan)).await
    }

    async fn stage(&self, plan: &PlanRecord) -> Result<Staged, StoreError> {
        again("stage", || self.0.stage(plan)).await
    }

    async fn create_staged(&self, plan: &PlanRecord, staged: Staged) -> Result<(), StoreError> {
        // What was staged is used up by the first try (which leaves nothing staged behind
        // when it fails): a transient failure is retried as a plain create, and a plan found
        // created by then gives the first error, as `create`'s retries do.
        let first = match self.0.create_staged(plan, staged).await {
            Err(e) if e.is_transient() => e,
            other => return other,
        };
        match self.create(plan).await {
            Err(StoreError::AlreadyExists(_)) => Err(first),
            other => other,
        }
    }

    async fn discard(&self, staged: Staged) {
        self.0.discard(staged).await
    }

    async fn append(&self, plan: &PlanId, changes: &[StateChange]) -> Result<(), StoreError> {
        // Not retried: a failed append may have written the changes (see the module docs).
        self.0.append(plan, changes).await
    }

    async fn append_owned(
        &self,
        plan: &PlanId,
        changes: Vec<StateChange>,
    ) -> (Result<(), StoreError>, Vec<StateChange>) {
        // Not retried, as `append`.
        self.0.append_owned(plan, changes).await
    }

    async fn load(&self, plan: &PlanId) -> Result<PlanRecord, StoreError> {
        again("load", || self.0.load(plan)).await
    }

    async fn list(&self) -> Result<PlanListing, StoreError> {
        again("list", || self.0.list()).await
    }

    async fn delete(&self, plan: &PlanId) -> Result<(), StoreError> {
        let gone = |e: &StoreError| matches!(e, StoreError::NotFound(_));
        again_unless_done("delete", gone, || self.0.delete(plan)).await
    }

    async fn acquire(&self, plan: &PlanId) -> Result<Lease, StoreError> {
        again("acquire", || self.0.acquire(plan)).await
    }

    async fn save_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
        specs: &AttemptSpecs,
    ) -> Result<(), StoreError> {
        again("save attempt specs", || {
            self.0.save_attempt_specs(plan, node, attempt, specs)
        })
        .await
    }

    async fn load_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
    ) -> Result<AttemptSpecs, StoreError> {
        again("load attempt specs", || {
            self.0.load_attempt_specs(plan, node, attempt)
        })
        .await
    }

    async fn append_log(&self, key: &LogKey, text: &str) -> Result<(), StoreError> {
        // Not retried: a failed log write may have written part of the text.
        self.0.append_log(key, text).await
    }

    async fn read_log(
        &self,
        plan: &PlanId,
        node: &NodeId,
        query: LogQuery,
    ) -> Result<String, StoreError> {
        again("read log", || self.0.read_log(plan, node, query)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::TRIES;
    use crate::plan::PlanSpec;
    use crate::state::Phase;
    use std::collections::VecDeque;
    use std::io;
    use std::path::PathBuf;
    use std::sync::Mutex;
    use std::time::Duration;
    use tokio::time::Instant;

    /// How one call of the fake answers: `None` succeeds.
    type Answer = Option<fn() -> StoreError>;

    /// A store whose calls answer from a script (then succeed), recording when each came.
    #[derive(Debug)]
    struct Scripted {
        answers: Mutex<VecDeque<Answer>>,
        /// Repeats the last answer of the script forever instead of succeeding after it.
        repeat_last: bool,
        calls: Mutex<Vec<Instant>>,
    }

    fn held<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    impl Scripted {
        fn answer(&self) -> Result<(), StoreError> {
            held(&self.calls).push(Instant::now());
            let mut answers = held(&self.answers);
            let answer = if self.repeat_last && answers.len() == 1 {
                answers.front().copied().flatten()
            } else {
                answers.pop_front().flatten()
            };
            answer.map_or(Ok(()), |error| Err(error()))
        }

        fn calls(&self) -> usize {
            held(&self.calls).len()
        }

        /// The waits between consecutive calls.
        fn waits(&self) -> Vec<Duration> {
            let calls = held(&self.calls);
            calls.windows(2).map(|w| w[1] - w[0]).collect()
        }
    }

    fn record() -> PlanRecord {
        PlanRecord::new(
            PlanId::from("p"),
            PlanSpec::new("p"),
            PathBuf::from("/repo"),
            0,
            0,
        )
    }

    #[async_trait]
    impl PlanRepository for Scripted {
        async fn create(&self, _: &PlanRecord) -> Result<(), StoreError> {
            self.answer()
        }
        async fn append(&self, _: &PlanId, _: &[StateChange]) -> Result<(), StoreError> {
            self.answer()
        }
        async fn load(&self, _: &PlanId) -> Result<PlanRecord, StoreError> {
            self.answer().map(|()| record())
        }
        async fn list(&self) -> Result<PlanListing, StoreError> {
            self.answer().map(|()| PlanListing::default())
        }
        async fn delete(&self, _: &PlanId) -> Result<(), StoreError> {
            self.answer()
        }
        async fn acquire(&self, _: &PlanId) -> Result<Lease, StoreError> {
            self.answer().map(|()| Lease::new(()))
        }
        async fn save_attempt_specs(
            &self,
            _: &PlanId,
            _: &NodeId,
            _: u32,
            _: &AttemptSpecs,
        ) -> Result<(), StoreError> {
            self.answer()
        }
        async fn load_attempt_specs(
            &self,
            _: &PlanId,
            _: &NodeId,
            _: u32,
        ) -> Result<AttemptSpecs, StoreError> {
            self.answer().map(|()| AttemptSpecs::default())
        }
        async fn append_log(&self, _: &LogKey, _: &str) -> Result<(), StoreError> {
            self.answer()
        }
        async fn read_log(
            &self,
            _: &PlanId,
            _: &NodeId,
            _: LogQuery,
        ) -> Result<String, StoreError> {
            self.answer().map(|()| "log\n".to_string())
        }
    }

    fn io(kind: io::ErrorKind) -> StoreError {
        StoreError::Io {
            operation: "read",
            path: PathBuf::from("/store/plans/p/state.json"),
            source: io::Error::from(kind),
        }
    }
    fn interrupted() -> StoreError {
        io(io::ErrorKind::Interrupted)
    }
    fn would_block() -> StoreError {
        io(io::ErrorKind::WouldBlock)
    }
    fn timed_out() -> StoreError {
        io(io::ErrorKind::TimedOut)
    }
    fn denied() -> StoreError {
        io(io::ErrorKind::PermissionDenied)
    }
    fn corrupt() -> StoreError {
        StoreError::Corrupt {
            path: PathBuf::from("/store/plans/p/state.json"),
            message: "not JSON".into(),
        }
    }
    fn locked() -> StoreError {
        StoreError::Locked {
            plan: PlanId::from("p"),
            owner: "process 4242".into(),
        }
    }
    fn exists() -> StoreError {
        StoreError::AlreadyExists(PlanId::from("p"))
    }
    fn not_found() -> StoreError {
        StoreError::NotFound(PlanId::from("p"))
    }

    fn store(script: &[Answer], repeat_last: bool) -> (Arc<Scripted>, Retrying) {
        let inner = Arc::new(Scripted {
            answers: Mutex::new(script.iter().copied().collect()),
            repeat_last,
            calls: Mutex::new(Vec::new()),
        });
        (inner.clone(), Retrying::new(inner))
    }

    /// A store that fails `n` times with `error`, then succeeds.
    fn failing(n: usize, error: fn() -> StoreError) -> (Arc<Scripted>, Retrying) {
        store(&vec![Some(error); n], false)
    }

    /// A store that always fails with `error`.
    fn broken(error: fn() -> StoreError) -> (Arc<Scripted>, Retrying) {
        store(&[Some(error)], true)
    }

    fn ms(waits: &[u64]) -> Vec<Duration> {
        waits.iter().copied().map(Duration::from_millis).collect()
    }

    #[test]
    fn interrupted_would_block_and_timed_out_io_is_transient_and_the_rest_is_not() {
        for e in [interrupted(), would_block(), timed_out()] {
            assert!(e.is_transient() && e.is_retryable(), "{e:?}");
        }
        for e in [denied(), corrupt(), exists(), not_found()] {
            assert!(!e.is_transient() && !e.is_retryable(), "{e:?}");
        }
        // Held by another owner for as long as it runs the plan: not retried here, though
        // the caller may try again later.
        assert!(!locked().is_transient() && locked().is_retryable());
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_on_the_backoff_schedule_until_the_call_succeeds() {
        let (inner, repo) = failing(TRIES as usize - 1, interrupted);
        let start = Instant::now();
        assert!(repo.list().await.is_ok());
        assert_eq!(inner.calls(), TRIES as usize);
        assert_eq!(inner.waits(), ms(&[25, 100, 400]));
        assert_eq!(start.elapsed(), Duration::from_millis(525));
    }

    #[tokio::test(start_paused = true)]
    async fn one_transient_failure_costs_one_short_wait() {
        let (inner, repo) = failing(1, would_block);
        assert_eq!(repo.load(&PlanId::from("p")).await.ok(), Some(record()));
        assert_eq!(inner.waits(), ms(&[25]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_error_that_stays_is_returned_after_the_last_try() {
        let (inner, repo) = broken(timed_out);
        let (p, n) = (PlanId::from("p"), NodeId::from("n"));
        let e = repo.read_log(&p, &n, LogQuery::new()).await.err();
        assert!(e.is_some_and(|e| e.is_transient()));
        assert_eq!(inner.calls(), TRIES as usize);
        assert_eq!(inner.waits(), ms(&[25, 100, 400]));
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_errors_are_returned_at_once_unchanged() {
        let start = Instant::now();
        let (inner, repo) = broken(corrupt);
        match repo.load(&PlanId::from("p")).await {
            Err(StoreError::Corrupt { message, .. }) => assert_eq!(message, "not JSON"),
            other => panic!("expected the store's Corrupt error, got {other:?}"),
        }
        assert_eq!(inner.calls(), 1);
        let (inner, repo) = broken(denied);
        let e = repo.list().await.err();
        assert!(e.is_some_and(|e| matches!(
            e,
            StoreError::Io { source, .. } if source.kind() == io::ErrorKind::PermissionDenied
        )));
        assert_eq!(inner.calls(), 1);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_plan_locked_by_another_owner_is_not_retried() {
        let (inner, repo) = broken(locked);
        let e = repo.acquire(&PlanId::from("p")).await.err();
        assert!(e.is_some_and(
            |e| matches!(e, StoreError::Locked { owner, .. } if owner == "process 4242")
        ));
        assert_eq!(inner.calls(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn reads_and_idempotent_writes_are_retried() {
        let (p, n) = (PlanId::from("p"), NodeId::from("n"));
        let (inner, repo) = failing(1, interrupted);
        assert!(repo.load_attempt_specs(&p, &n, 1).await.is_ok());
        assert_eq!(inner.calls(), 2);
        let (inner, repo) = failing(1, interrupted);
        let specs = AttemptSpecs::default();
        assert!(repo.save_attempt_specs(&p, &n, 1, &specs).await.is_ok());
        assert_eq!(inner.calls(), 2);
        let (inner, repo) = failing(2, would_block);
        assert!(repo.acquire(&p).await.is_ok());
        assert_eq!(inner.calls(), 3);
        let (inner, repo) = failing(1, timed_out);
        assert!(repo.create(&record()).await.is_ok());
        assert_eq!(inner.calls(), 2);
        let (inner, repo) = failing(1, timed_out);
        assert!(repo.delete(&p).await.is_ok());
        assert_eq!(inner.calls(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn appends_are_not_retried() {
        let (inner, repo) = failing(1, interrupted);
        let e = repo.append(&PlanId::from("p"), &[]).await.err();
        assert!(e.is_some_and(|e| e.is_transient()));
        assert_eq!(inner.calls(), 1);
        let (inner, repo) = failing(1, timed_out);
        let key = LogKey {
            plan: PlanId::from("p"),
            node: NodeId::from("n"),
            phase: Phase::Work,
            attempt: 1,
        };
        assert!(repo.append_log(&key, "line\n").await.is_err());
        assert_eq!(inner.calls(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_create_or_delete_found_done_after_a_transient_failure_returns_the_first_error() {
        // The failed try may have created the plan: "already exists" would be wrong.
        let (inner, repo) = store(&[Some(timed_out), Some(interrupted), Some(exists)], false);
        let e = repo.create(&record()).await.err();
        assert!(e.is_some_and(|e| matches!(
            e,
            StoreError::Io { source, .. } if source.kind() == io::ErrorKind::TimedOut
        )));
        assert_eq!(inner.calls(), 3);
        let (inner, repo) = store(&[Some(would_block), Some(not_found)], false);
        let e = repo.delete(&PlanId::from("p")).await.err();
        assert!(e.is_some_and(|e| e.is_transient()));
        assert_eq!(inner.calls(), 2);
        // At the first try, the answer stands.
        let (inner, repo) = broken(exists);
        let e = repo.create(&record()).await.err();
        assert!(e.is_some_and(|e| matches!(e, StoreError::AlreadyExists(_))));
        assert_eq!(inner.calls(), 1);
        let (inner, repo) = broken(not_found);
        let e = repo.delete(&PlanId::from("p")).await.err();
        assert!(e.is_some_and(|e| matches!(e, StoreError::NotFound(_))));
        assert_eq!(inner.calls(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_create_failing_transiently_on_every_try_returns_the_last_error_on_schedule() {
        let (inner, repo) = store(
            &[
                Some(interrupted),
                Some(interrupted),
                Some(interrupted),
                Some(timed_out),
            ],
            false,
        );
        let e = repo.create(&record()).await.err();
        assert!(e.is_some_and(|e| matches!(
            e,
            StoreError::Io { source, .. } if source.kind() == io::ErrorKind::TimedOut
        )));
        assert_eq!(inner.waits(), ms(&[25, 100, 400]));
    }
}
