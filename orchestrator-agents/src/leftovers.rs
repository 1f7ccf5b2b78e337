//! Stopping the process groups a crashed owner of a plan left running (the engine's
//! [`Reaper`](orchestrator_core::runner::Reaper) for this crate's runners).

use std::time::{Duration, Instant};

use orchestrator_core::runner::Leftover;

use crate::group::Group;

/// How long leftovers get to exit after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// Stops each leftover group that still runs *and* has a live process working in the
/// leftover's folder (the job's worktree): a pid recorded before a crash may belong to someone
/// else by now, and only processes in the job's own folder are taken for the job's. SIGTERM,
/// up to two seconds, then SIGKILL. Returns the groups stopped. Blocks while it waits.
///
/// Register it with `Orchestrator::builder().reaper(orchestrator_agents::stop_leftovers)`. The
/// folder check needs Linux's `/proc`; elsewhere nothing is stopped.
///
/// ```
/// use orchestrator_core::runner::Leftover;
/// // A group that does not exist is left alone.
/// let stopped = orchestrator_agents::stop_leftovers(&[Leftover::new(999_999, "/nonexistent")]);
/// assert!(stopped.is_empty());
/// ```
pub fn stop_leftovers(leftovers: &[Leftover]) -> Vec<u32> {
    let mut stopped = Vec::new();
    for leftover in leftovers {
        let group = Group::from_id(leftover.pgid);
        if !group.is_alive() || !group.works_in(&leftover.dir) {
            continue;
        }
        group.terminate();
        let deadline = Instant::now() + GRACE;
        while group.is_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if group.is_alive() {
            group.kill();
        }
        stopped.push(leftover.pgid);
    }
    stopped
}
