//! The journal writer: persists a plan's changes in order, coalescing whatever queued up while
//! the previous append (and its fsync) was in flight — group commit.
//!
//! The actor never waits for the store: it pushes each turn's changes onto a shared queue and
//! goes on. What must follow durability does: command replies and the published plan status
//! (so `wait` returning means the store holds the final state) run after the append that
//! covers them.
//!
//! The queue is two lists used in turn: the actor fills one while the writer appends the
//! other, which is then cleared and handed back (see [`Queue::give_back`] for which are kept).
//! A writer that fell behind takes everything queued in one append without copying it; it
//! used to join the turns' lists by copying them into a fresh one, whose pages the kernel had
//! to clear.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::engine::context::EngineCtx;
use crate::events::OrchestratorEvent;
use crate::ids::PlanId;
use crate::repository::{Lease, StoreError};
use crate::state::{PlanStatus, StateChange};

/// Something to run once a batch is durable.
pub(crate) type AfterDurable = Box<dyn FnOnce() + Send + Sync>;

/// Pause before appending again after the store failed.
const STORE_RETRY: Duration = Duration::from_millis(250);

/// A list this long (in changes, a few MiB) is always kept for reuse; a longer one until the
/// backlog has filled less than a quarter of it [`QUIET_TAKES`] appends in a row (see
/// [`Queue::give_back`]).
const SPARE_MAX: usize = 1 << 16;

/// Appends in a row whose backlog filled less than a quarter of a list longer than
/// [`SPARE_MAX`] before that list is freed.
const QUIET_TAKES: u32 = 16;

/// What the actor queued and the writer has not taken yet; what the writer takes, as one.
#[derive(Default)]
struct Pending {
    changes: Vec<StateChange>,
    /// The plan status as of the last turn queued.
    status: Option<PlanStatus>,
    after: Vec<AfterDurable>,
    /// The list the writer appended last, cleared: the next one to fill.
    spare: Vec<StateChange>,
    /// No more turns come (`finish`).
    closed: bool,
}

#[derive(Default)]
struct Queue {
    pending: Mutex<Pending>,
    /// Wakes the writer: something was queued, or the queue closed.
    queued: Notify,
    /// Lists past [`SPARE_MAX`] given back in a row with less than a quarter of them used
    /// (only the writer gives back).
    quiet: AtomicU32,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves whole lists behind: pushes and swaps only.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a turn: `changes` (in order), the plan status after it, and what to run once
    /// they are durable.
    fn push(
        &self,
        changes: impl IntoIterator<Item = StateChange>,
        status: PlanStatus,
        after: Vec<AfterDurable>,
    ) {
        let mut p = self.lock();
        p.changes.extend(changes);
        p.status = Some(status);
        p.after.extend(after);
    }

    /// Everything queued (its `spare` empty), leaving the spare list to fill.
    fn take(&self) -> Pending {
        let mut p = self.lock();
        let next = Pending {
            changes: std::mem::take(&mut p.spare),
            closed: p.closed,
            ..Pending::default()
        };
        std::mem::replace(&mut *p, next)
    }

    /// Hands the list of the last [`Queue::take`] back, cleared, as the next spare. A writer
    /// far behind on a huge plan (takes of up to 240k changes, 27 MB, on a 1M-node plan)
    /// reuses its lists instead of freeing them and having the next ones' pages cleared by the
    /// kernel again. Its backlog comes and goes, so a list longer than [`SPARE_MAX`] is freed
    /// only after [`QUIET_TAKES`] appends in a row carried less than a quarter of it: freeing
    /// it at the first small take (as before) cost a 1M-node run ~5% in page clearing, and
    /// once the burst is over, a quiet plan holds no big list for long.
    fn give_back(&self, mut changes: Vec<StateChange>) {
        if changes.capacity() > SPARE_MAX && changes.len() < changes.capacity() / 4 {
            if self.quiet.fetch_add(1, Ordering::Relaxed) + 1 >= QUIET_TAKES {
                self.quiet.store(0, Ordering::Relaxed);
                return;
            }
        } else {
            self.quiet.store(0, Ordering::Relaxed);
        }
        changes.clear();
        self.lock().spare = changes;
    }
}

pub(crate) struct JournalWriter {
    queue: Arc<Queue>,
    failing: Arc<AtomicBool>,
    task: Option<JoinHandle<()>>,
}

impl JournalWriter {
    /// Starts the writer; it owns the plan's lease until it has written everything.
    /// `published` is the status the plan's events last announced: the writer announces
    /// each status it persists that differs from the one before.
    pub(crate) fn spawn(
        ctx: Arc<EngineCtx>,
        plan: PlanId,
        lease: Lease,
        status_tx: watch::Sender<PlanStatus>,
        published: PlanStatus,
    ) -> Self {
        let queue = Arc::new(Queue::default());
        let failing = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(write_loop(
            ctx,
            plan,
            lease,
            status_tx,
            published,
            queue.clone(),
            failing.clone(),
        ));
        JournalWriter {
            queue,
            failing,
            task: Some(task),
        }
    }

    /// Queues a turn (see [`Queue::push`]) and wakes the writer.
    pub(crate) fn send(
        &self,
        changes: impl IntoIterator<Item = StateChange>,
        status: PlanStatus,
        after: Vec<AfterDurable>,
    ) {
        self.queue.push(changes, status, after);
        self.queue.queued.notify_one();
    }

    /// Whether the store is currently refusing appends (nothing new should start).
    pub(crate) fn is_failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    /// Writes what is queued, then releases the lease.
    pub(crate) async fn finish(&mut self) {
        self.close();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn close(&self) {
        self.queue.lock().closed = true;
        self.queue.queued.notify_one();
    }
}

impl Drop for JournalWriter {
    /// A writer dropped without `finish` (its actor stopped early) still writes what was
    /// queued and releases the lease.
    fn drop(&mut self) {
        self.close();
    }
}

async fn write_loop(
    ctx: Arc<EngineCtx>,
    plan: PlanId,
    lease: Lease,
    status_tx: watch::Sender<PlanStatus>,
    mut published: PlanStatus,
    queue: Arc<Queue>,
    failing: Arc<AtomicBool>,
) {
    loop {
        queue.queued.notified().await;
        // The first turn wakes the writer at once; letting the tasks already woken run
        // first (the actor's next turns, jobs ending) joins their changes to this append.
        // On a 2000-job plan of no-op commands this took the fsyncs from ~1,340 to ~200 and
        // the wall time 5-8% down, for a delay of microseconds.
        tokio::task::yield_now().await;
        let mut taken = queue.take();
        if !taken.changes.is_empty() {
            taken.changes = append(&ctx, &plan, taken.changes, &failing).await;
        }
        queue.give_back(taken.changes);
        if let Some(status) = taken.status.filter(|s| *s != published) {
            let from = std::mem::replace(&mut published, status);
            ctx.events
                .emit_with(|| OrchestratorEvent::PlanStatusChanged {
                    plan: plan.clone(),
                    from,
                    to: status,
                });
            status_tx.send_replace(status);
        }
        for f in taken.after {
            f();
        }
        if taken.closed {
            break;
        }
    }
    drop(lease);
}

/// Appends, retrying transient failures for as long as it takes: dropping a change would break
/// the journal's prefix property. A plan that no longer exists in the store is given up on.
/// The list goes to the store without being copied (see [`PlanRepository::append_owned`]);
/// what the store hands back is returned, for reuse.
///
/// [`PlanRepository::append_owned`]: crate::repository::PlanRepository::append_owned
async fn append(
    ctx: &EngineCtx,
    plan: &PlanId,
    mut changes: Vec<StateChange>,
    failing: &AtomicBool,
) -> Vec<StateChange> {
    loop {
        let sent = changes.len();
        let (result, back) = ctx.repository.append_owned(plan, changes).await;
        changes = back;
        match result {
            Ok(()) => {
                failing.store(false, Ordering::Relaxed);
                return changes;
            }
            Err(e @ (StoreError::NotFound(_) | StoreError::Rejected { .. })) => {
                tracing::error!(error = %e, "plan state not persisted; the store refuses it");
                failing.store(true, Ordering::Relaxed);
                return changes;
            }
            Err(e) if changes.len() != sent => {
                tracing::error!(error = %e, "plan state not persisted; the store lost the changes");
                failing.store(true, Ordering::Relaxed);
                return changes;
            }
            Err(e) => {
                tracing::error!(error = %e, "could not persist plan state; will retry");
                failing.store(true, Ordering::Relaxed);
                tokio::time::sleep(STORE_RETRY).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(node: usize) -> StateChange {
        StateChange::Node {
            node,
            status: crate::state::NodeStatus::Ready,
            at: 0,
        }
    }

    fn nodes_of(changes: &[StateChange]) -> Vec<usize> {
        changes
            .iter()
            .map(|c| match c {
                StateChange::Node { node, .. } => *node,
                _ => usize::MAX,
            })
            .collect()
    }

    /// Queues a turn of `nodes`' changes whose reply records its first node in `said`.
    fn push(
        queue: &Queue,
        nodes: impl IntoIterator<Item = usize>,
        status: PlanStatus,
        said: &Arc<Mutex<Vec<usize>>>,
    ) {
        let nodes: Vec<usize> = nodes.into_iter().collect();
        let (said, first) = (said.clone(), nodes.first().copied().unwrap_or_default());
        let after: AfterDurable = Box::new(move || {
            said.lock().unwrap_or_else(|e| e.into_inner()).push(first);
        });
        queue.push(nodes.into_iter().map(node), status, vec![after]);
    }

    #[test]
    fn turns_queued_meanwhile_are_taken_as_one_in_order_with_the_last_status() {
        let said = Arc::new(Mutex::new(Vec::new()));
        let queue = Queue::default();
        push(&queue, [1, 2], PlanStatus::Running, &said);
        push(&queue, [3], PlanStatus::Running, &said);
        push(&queue, [4, 5, 6], PlanStatus::Succeeded, &said);
        let taken = queue.take();
        assert_eq!(nodes_of(&taken.changes), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(taken.status, Some(PlanStatus::Succeeded));
        assert!(!taken.closed);
        for f in taken.after {
            f();
        }
        assert_eq!(
            *said.lock().unwrap_or_else(|e| e.into_inner()),
            vec![1, 3, 4]
        );
        // Nothing is left behind, and a take of nothing has no status to publish.
        let empty = queue.take();
        assert!(empty.changes.is_empty() && empty.after.is_empty());
        assert_eq!(empty.status, None);
    }

    #[test]
    fn the_lists_are_used_in_turn_without_growing_again() {
        let said = Arc::new(Mutex::new(Vec::new()));
        let queue = Queue::default();
        push(&queue, 0..100, PlanStatus::Running, &said);
        let first = queue.take();
        let (first_ptr, cap) = (first.changes.as_ptr(), first.changes.capacity());
        // While the writer appends the first list, the actor fills the other one.
        push(&queue, [100], PlanStatus::Running, &said);
        queue.give_back(first.changes);
        let second = queue.take();
        assert_eq!(nodes_of(&second.changes), vec![100]);
        queue.give_back(second.changes);
        // The next turn is queued onto the first list again: no allocation.
        push(&queue, 200..250, PlanStatus::Running, &said);
        let third = queue.take();
        assert_eq!(third.changes.as_ptr(), first_ptr);
        assert_eq!(third.changes.capacity(), cap);
        assert_eq!(nodes_of(&third.changes), (200..250).collect::<Vec<_>>());

        // A list past the bound is kept while the backlog it held filled a quarter of it...
        let mut busy: Vec<StateChange> = Vec::with_capacity(4 * SPARE_MAX);
        busy.extend((0..SPARE_MAX).map(node));
        let busy_ptr = busy.as_ptr();
        queue.give_back(third.changes);
        queue.give_back(busy);
        let spare = std::mem::take(&mut queue.lock().spare);
        assert_eq!((spare.as_ptr(), spare.len()), (busy_ptr, 0));
        // ... and while the backlog comes and goes: small takes in a row, fewer than
        // QUIET_TAKES, then a busy one, then again fewer...
        let mut list = spare;
        for round in 0..2 {
            for _ in 1..QUIET_TAKES {
                list.extend((0..SPARE_MAX - 1).map(node));
                queue.give_back(list);
                list = std::mem::take(&mut queue.lock().spare);
                assert_eq!(list.as_ptr(), busy_ptr, "round {round}: kept");
            }
            list.extend((0..SPARE_MAX).map(node));
            queue.give_back(list);
            list = std::mem::take(&mut queue.lock().spare);
        }
        // ... and freed once QUIET_TAKES takes in a row filled less than a quarter of it.
        for _ in 1..QUIET_TAKES {
            queue.give_back(list);
            list = std::mem::take(&mut queue.lock().spare);
        }
        assert_eq!(list.as_ptr(), busy_ptr);
        queue.give_back(list);
        assert_eq!(queue.lock().spare.capacity(), 0);
    }
}
