//! Stopping the process groups a crashed owner of a plan left running (the engine's
//! [`Reaper`](orchestrator_core::runner::Reaper) for this crate's runners).

use std::time::{Duration, Instant};

use orchestrator_core::runner::Leftover;

use crate::group::Group;
use crate::tree;

/// How long leftovers get to exit after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// Stops each leftover group that still runs *and* has a live process working in the
/// leftover's folder (the job's worktree): a pid recorded before a crash may belong to someone
/// else by now, and only processes in the job's own folder are taken for the job's. Then, with
/// a [`Leftover::token_prefix`], every process whose
/// [`JOB_TOKEN_VAR`](orchestrator_core::runner::JOB_TOKEN_VAR) starts with it, wherever it
/// works and whatever its group or session (`setsid` children, daemons): the token was given
/// to the job's processes only. SIGTERM, up to two seconds, then SIGKILL. Returns the groups
/// stopped (a group counts when any of its job's processes was). Blocks while it waits.
///
/// Register it with `Orchestrator::builder().reaper(orchestrator_agents::stop_leftovers)`. The
/// folder and token checks need Linux's `/proc`; elsewhere nothing is stopped.
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
        let mut any = false;
        // Group 0 is "none recorded" (only the token finds its processes), never ours.
        if leftover.pgid != 0 && group.is_alive() && group.works_in(&leftover.dir) {
            group.terminate();
            let deadline = Instant::now() + GRACE;
            while group.is_alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if group.is_alive() {
                group.kill();
            }
            any = true;
        }
        if let Some(prefix) = leftover.token_prefix.as_deref().filter(|p| !p.is_empty()) {
            any |= tree::stop_with_token_prefix(prefix, GRACE) > 0;
        }
        if any {
            stopped.push(leftover.pgid);
        }
    }
    stopped
}
