//! Two halves of a large plan's work on two threads: a 1M-job plan's creation (its producerIds
//! indexed while its jobs are checked, its nodes made while it is validated, its dependencies
//! looked up in [`crate::plan::PlanGraph`]), and the file store's encoding, decoding and
//! replay of a large stored plan.

/// The number of jobs from which a plan's creation splits two of its passes over two threads
/// (indexing producerIds while the jobs are checked, making the nodes' ids while the plan is
/// validated). Below it each pass takes a few milliseconds at most, and starting a thread is
/// not worth it. (The graph splits its dependency lookups by their own count.)
pub const LARGE_PLAN: usize = 1 << 18;

/// Runs `a` and `b`: `a` on a new thread named `name` while `b` runs on the calling thread
/// when `parallel`, else (or when no thread can be started) both on the calling thread, one
/// after the other. `a`'s result is an error, saying so, when its thread panicked; `b`'s is
/// kept either way, so a caller redoes only `a`.
///
/// Worth it for work of several milliseconds a half, not less: a new thread often does not
/// start until its caller blocks (in the join) or a scheduler tick hands it the idle core. On
/// the 2-core VMs this is built on (250 Hz ticks), a thread spawned by a caller that then kept
/// its core busy for 1, 3 and 6 ms started after a median 1.1, 2.7 and 2.9 ms; a 10,000-node
/// plan's creation, whose two halves of snapshot encoding take ~0.4 and ~0.7 ms, ran them one
/// after the other this way. A thread that already exists and is woken does no better there:
/// it starts within microseconds, but on its waker's core (a helper parked on a channel ran two
/// 0.3 ms halves in 0.61 ms, two 1 ms halves in 2.0 ms), and two threads starting from idle
/// with 1 to 30 ms of work each took 1.6-2.7 times one half, not 1. Those VMs' kernel has a
/// `kernel.sched_vcpu_pack` setting no upstream kernel has; by its name and these numbers it
/// packs short work onto one virtual CPU, so only long halves, like a 1M-job plan's, reach the
/// second core.
///
/// ```
/// use orchestrator_core::parallel::both;
///
/// let mut halves = [0u64; 2];
/// let (left, right) = halves.split_at_mut(1);
/// let (done, ()) = both("example", true, || left[0] = (0..1_000).sum(), || right[0] = (1_000..2_000).sum());
/// assert!(done.is_ok());
/// assert_eq!(halves, [499_500, 1_499_500]);
/// ```
pub fn both<A, B>(
    name: &str,
    parallel: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B,
) -> (Result<A, String>, B)
where
    A: Send,
{
    if !parallel {
        return (Ok(a()), b());
    }
    // Held where the calling thread can still take it if no thread starts.
    let a = std::sync::Mutex::new(Some(a));
    let take_a = || a.lock().unwrap_or_else(|e| e.into_inner()).take();
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn_scoped(scope, || take_a().map(|f| f()));
        let b = b();
        let a = match spawned {
            Ok(handle) => handle
                .join()
                .map_err(|_| format!("the thread {name} panicked")),
            Err(_) => Ok(take_a().map(|f| f())),
        };
        let a =
            a.and_then(|a| a.ok_or_else(|| format!("the work of the thread {name} did not run")));
        (a, b)
    })
}
