//! Conformance suite for [`Capacity`]: every implementation runs [`run_all`] in its own tests.
//!
//! ```
//! use orchestrator_core::capacity::ProcessSlots;
//! use orchestrator_core::conformance::capacity::run_all;
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! run_all(|slots| async move { ProcessSlots::new(slots).unwrap() }).await;
//! # });
//! ```
//!
//! The factory makes a fresh capacity of exactly `slots` slots that nobody else uses (for a
//! machine-wide one: a new folder). Each case panics with a message naming it when the
//! capacity misbehaves (this is test support code: a failed check is a test failure). The
//! cases are listed once, in [`run_all`], so an implementation cannot skip one. Behaviour
//! across processes (a dead holder's slot is free again) is the implementation's own test.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::capacity::{Capacity, Slot};

/// How long a wait that should end may take (generous: backoff loops and loaded machines).
const PATIENCE: Duration = Duration::from_secs(10);
/// How long a wait that should not end is watched.
const GLIMPSE: Duration = Duration::from_millis(150);

/// Runs every case against capacities made by `factory(slots)`.
///
/// Panics, naming the case, on the first check that fails.
pub async fn run_all<F, Fut, C>(factory: F)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = C>,
    C: Capacity,
{
    try_acquire_takes_exactly_the_slots(Arc::new(factory(3).await)).await;
    a_dropped_slot_is_free_again(Arc::new(factory(1).await)).await;
    acquire_waits_for_a_dropped_slot(Arc::new(factory(2).await)).await;
    a_dropped_wait_takes_nothing(Arc::new(factory(2).await)).await;
    concurrent_holders_never_exceed_the_slots(Arc::new(factory(3).await)).await;
    slots_are_reused_without_leaking(Arc::new(factory(2).await)).await;
}

fn take(case: &str, capacity: &dyn Capacity) -> Slot {
    match capacity.try_acquire() {
        Ok(Some(slot)) => slot,
        Ok(None) => panic!("{case}: try_acquire found no free slot where one should be"),
        Err(e) => panic!("{case}: try_acquire failed: {e}"),
    }
}

fn assert_full(case: &str, capacity: &dyn Capacity) {
    match capacity.try_acquire() {
        Ok(None) => {}
        Ok(Some(_)) => panic!("{case}: try_acquire took a slot beyond the capacity"),
        Err(e) => panic!("{case}: try_acquire failed: {e}"),
    }
}

async fn try_acquire_takes_exactly_the_slots(capacity: Arc<dyn Capacity>) {
    let case = "try_acquire_takes_exactly_the_slots";
    let held: Vec<Slot> = (0..3).map(|_| take(case, capacity.as_ref())).collect();
    assert_full(case, capacity.as_ref());
    drop(held);
    let again: Vec<Slot> = (0..3).map(|_| take(case, capacity.as_ref())).collect();
    assert_full(case, capacity.as_ref());
    drop(again);
}

async fn a_dropped_slot_is_free_again(capacity: Arc<dyn Capacity>) {
    let case = "a_dropped_slot_is_free_again";
    let slot = take(case, capacity.as_ref());
    assert_full(case, capacity.as_ref());
    drop(slot);
    drop(take(case, capacity.as_ref()));
}

async fn acquire_waits_for_a_dropped_slot(capacity: Arc<dyn Capacity>) {
    let case = "acquire_waits_for_a_dropped_slot";
    let mut held: Vec<Slot> = (0..2).map(|_| take(case, capacity.as_ref())).collect();
    let waiter = {
        let capacity = capacity.clone();
        tokio::spawn(async move { capacity.acquire().await })
    };
    tokio::time::sleep(GLIMPSE).await;
    assert!(
        !waiter.is_finished(),
        "{case}: acquire returned while every slot was held"
    );
    held.pop();
    let got = tokio::time::timeout(PATIENCE, waiter)
        .await
        .unwrap_or_else(|_| panic!("{case}: acquire did not see the slot dropped"));
    match got {
        Ok(Ok(slot)) => {
            assert_full(case, capacity.as_ref());
            drop(slot);
        }
        Ok(Err(e)) => panic!("{case}: acquire failed: {e}"),
        Err(e) => panic!("{case}: the waiting task failed: {e}"),
    }
    drop(held);
}

async fn a_dropped_wait_takes_nothing(capacity: Arc<dyn Capacity>) {
    let case = "a_dropped_wait_takes_nothing";
    let held: Vec<Slot> = (0..2).map(|_| take(case, capacity.as_ref())).collect();
    let waited = tokio::time::timeout(GLIMPSE, capacity.acquire()).await;
    assert!(waited.is_err(), "{case}: acquire returned while full");
    drop(held);
    // The abandoned wait holds nothing: both slots can be taken again.
    let again: Vec<Slot> = (0..2).map(|_| take(case, capacity.as_ref())).collect();
    assert_full(case, capacity.as_ref());
    drop(again);
}

async fn concurrent_holders_never_exceed_the_slots(capacity: Arc<dyn Capacity>) {
    let case = "concurrent_holders_never_exceed_the_slots";
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..12 {
        let (capacity, now, most) = (capacity.clone(), now.clone(), most.clone());
        tasks.spawn(async move {
            let slot = capacity.acquire().await?;
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            drop(slot);
            Ok::<(), crate::capacity::CapacityError>(())
        });
    }
    let all = async {
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("{case}: acquire failed: {e}"),
                Err(e) => panic!("{case}: a holder task failed: {e}"),
            }
        }
    };
    tokio::time::timeout(PATIENCE * 3, all)
        .await
        .unwrap_or_else(|_| panic!("{case}: the holders did not all get a slot in time"));
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 3, "{case}: {most} holders at once with 3 slots");
    assert_eq!(most, 3, "{case}: the slots were never all used at once");
    // Everything was given back.
    let held: Vec<Slot> = (0..3).map(|_| take(case, capacity.as_ref())).collect();
    drop(held);
}

async fn slots_are_reused_without_leaking(capacity: Arc<dyn Capacity>) {
    let case = "slots_are_reused_without_leaking";
    for _ in 0..200 {
        let slot = match capacity.acquire().await {
            Ok(slot) => slot,
            Err(e) => panic!("{case}: acquire failed: {e}"),
        };
        drop(slot);
    }
    let held: Vec<Slot> = (0..2).map(|_| take(case, capacity.as_ref())).collect();
    assert_full(case, capacity.as_ref());
    drop(held);
}
