//! The processes of one supervised run wherever they went: those that left its process group
//! (`setsid`, daemons) are found by the [`JOB_TOKEN_VAR`] every process of the run inherits,
//! and, while the main process lives, by their parent chain.
//!
//! On Linux the supervisor also makes its process the *child subreaper* of everything it
//! starts (`PR_SET_CHILD_SUBREAPER`): an orphaned descendant is then re-parented to us rather
//! than to init, so it stays ours to stop and to reap ([`reap_adopted`]). Elsewhere only the
//! process group can be reached (see [`crate::group`]); this module finds nothing there.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use orchestrator_core::runner::JOB_TOKEN_VAR;
use tokio::time::Instant;

/// How often escaped processes are checked while waiting for them to end.
const POLL: Duration = Duration::from_millis(10);

/// The run's identity among processes: its token, and the pid of its main process.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    token: String,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    leader: Option<i32>,
}

impl Tree {
    /// A new token for a run of the job with token prefix `prefix` (empty outside a job):
    /// the prefix, then this process's id and a counter, so no two runs share it.
    pub(crate) fn token(prefix: Option<&str>) -> String {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        format!("{}{}-{run}", prefix.unwrap_or(""), std::process::id())
    }

    /// The run whose processes carry `token` and whose main process is `leader`, which this
    /// process started (it is ours to wait for, not an adopted orphan, until
    /// [`Tree::forget_leader`]).
    pub(crate) fn new(token: String, leader: Option<u32>) -> Self {
        let leader = leader
            .and_then(|p| i32::try_from(p).ok())
            .filter(|&p| p > 1);
        if let Some(pid) = leader {
            started().insert(pid);
        }
        Tree { token, leader }
    }

    /// The run's main process has been waited for (or given up): its pid is no longer one we
    /// started.
    pub(crate) fn forget_leader(&self) {
        if let Some(pid) = self.leader {
            started().remove(&pid);
        }
    }

    /// The live processes of the run outside its process group (the group is signalled as a
    /// whole): those carrying its token and (while the main process lives) its descendants by
    /// parent chain, which finds those that also cleared their environment.
    pub(crate) fn processes(&self) -> Vec<i32> {
        imp::processes(self)
    }

    /// [`Tree::processes`] once the run's main process has been waited for, and the adopted
    /// orphans that ended reaped ([`reap_adopted`]) from the same look at our children: the
    /// usual end of a job costs one listing of them, not two. Nothing descends from the reaped
    /// main process any more (its pid may even be someone else's by now), so only our adopted
    /// children carrying the run's token, and theirs, are the run's.
    pub(crate) fn processes_after_exit(&self) -> Vec<i32> {
        imp::processes_after_exit(self)
    }

    /// Asks each of `pids` to stop (SIGTERM).
    pub(crate) fn terminate(pids: &[i32]) {
        imp::signal_each(pids, false);
    }

    /// Kills each of `pids` (SIGKILL).
    pub(crate) fn kill(pids: &[i32]) {
        imp::signal_each(pids, true);
    }

    /// Kills every live process of the run at once (SIGKILL), e.g. when its supervision is
    /// dropped midway.
    pub(crate) fn kill_all(&self) {
        Tree::kill(&self.processes());
    }

    /// Waits until none of `pids` runs or `deadline` passes; true when they are gone.
    pub(crate) async fn wait_gone(pids: &[i32], deadline: Instant) -> bool {
        loop {
            if !pids.iter().any(|&p| imp::is_alive(p)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
    }

    /// The still-running ones of `pids`.
    pub(crate) fn alive(pids: &[i32]) -> Vec<i32> {
        pids.iter().copied().filter(|&p| imp::is_alive(p)).collect()
    }
}

/// The main processes of the runs this process started and has not waited for yet: every
/// other child of ours is an orphan we adopted as the subreaper.
fn started() -> std::sync::MutexGuard<'static, std::collections::HashSet<i32>> {
    static STARTED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<i32>>> =
        std::sync::OnceLock::new();
    STARTED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Makes this process the child subreaper of its descendants (Linux, once per process), so a
/// job's orphans come to us instead of init. Returns whether it is one.
pub(crate) fn become_subreaper() -> bool {
    imp::become_subreaper()
}

/// Reaps our ended children that we did not start ourselves but adopted as a subreaper, so
/// their zombies do not pile up. Our own children are left to whoever waits for them: only a
/// zombie that is in another session than ours, or in a process group led by some other
/// process and not ours, can be an adopted one (a child we start either stays in our group or
/// leads its own; none can start a session, being a group leader).
pub(crate) fn reap_adopted() {
    imp::reap_adopted();
}

/// Stops (SIGTERM, then SIGKILL after `grace`) every live process whose token starts with
/// `prefix`, wherever it runs; returns how many there were. Blocks while it waits.
pub(crate) fn stop_with_token_prefix(prefix: &str, grace: Duration) -> usize {
    let pids = imp::with_token(|token| token.starts_with(prefix));
    if pids.is_empty() {
        return 0;
    }
    Tree::terminate(&pids);
    let deadline = std::time::Instant::now() + grace;
    while !Tree::alive(&pids).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    Tree::kill(&Tree::alive(&pids));
    pids.len()
}

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::HashMap;
    use std::sync::OnceLock;

    use nix::sys::signal::{kill, Signal};
    use nix::sys::wait::{waitpid, WaitPidFlag};
    use nix::unistd::Pid;

    use super::{started, Tree, JOB_TOKEN_VAR};
    use crate::procs::{self, Proc};

    /// Parent chains longer than this are not followed (a loop cannot happen, but a scan is
    /// not atomic).
    const MAX_DEPTH: usize = 256;

    pub(super) fn become_subreaper() -> bool {
        static DONE: OnceLock<bool> = OnceLock::new();
        *DONE.get_or_init(|| nix::sys::prctl::set_child_subreaper(true).is_ok())
    }

    fn me() -> i32 {
        i32::try_from(std::process::id()).unwrap_or(i32::MAX)
    }

    pub(super) fn processes(tree: &Tree) -> Vec<i32> {
        let me = me();
        let subreaper = become_subreaper();
        if subreaper {
            if let Some(adopted) = adopted(me) {
                // While the main process lives, what it started outside its group descends
                // from it.
                let leader = tree
                    .leader
                    .filter(|&l| procs::get(l).is_some_and(|p| !p.zombie));
                return run_tree(tree, me, &adopted, leader);
            }
        }
        scan_for(tree, me, subreaper)
    }

    pub(super) fn processes_after_exit(tree: &Tree) -> Vec<i32> {
        let me = me();
        let subreaper = become_subreaper();
        let adopted = if subreaper { adopted(me) } else { None };
        let Some(adopted) = adopted else {
            let found = scan_for(tree, me, subreaper);
            reap_adopted();
            return found;
        };
        reap(me, &adopted);
        run_tree(tree, me, &adopted, None)
    }

    /// [`processes`] from a scan of every process (no `children` files, or not the subreaper).
    fn scan_for(tree: &Tree, me: i32, subreaper: bool) -> Vec<i32> {
        let Some(procs) = procs::scan() else {
            return Vec::new();
        };
        let parents: HashMap<i32, i32> = procs.iter().map(|p| (p.pid, p.ppid)).collect();
        // The nearest of `me` and the leader on the parent chain of `p`, if any.
        let ancestor = |p: &Proc| {
            let mut pid = p.ppid;
            for _ in 0..MAX_DEPTH {
                if pid == me || Some(pid) == tree.leader {
                    return Some(pid);
                }
                pid = *parents.get(&pid)?;
            }
            None
        };
        // As the subreaper (without `children` files), only descendants need their
        // environment read.
        procs
            .iter()
            .filter(|p| !p.zombie && p.pid != me && Some(p.pgrp) != tree.leader)
            .filter(|p| {
                let up = ancestor(p);
                (up.is_some() && up == tree.leader)
                    || ((up.is_some() || !subreaper)
                        && p.env_var(JOB_TOKEN_VAR).as_deref() == Some(&tree.token))
            })
            .map(|p| p.pid)
            .collect()
    }

    /// As the subreaper: the run's processes outside its group are the descendants of its
    /// live main process `leader` and, once their parents died, those of our `adopted`
    /// children that carry the run's token. Walking just those reads a few files where a scan
    /// reads every process of the machine (this runs at the end of every job).
    fn run_tree(tree: &Tree, me: i32, adopted: &[Proc], leader: Option<i32>) -> Vec<i32> {
        let roots = adopted
            .iter()
            .filter(|p| !p.zombie && p.env_var(JOB_TOKEN_VAR).as_deref() == Some(&tree.token))
            .map(|p| p.pid)
            .chain(leader);
        let mut found: Vec<i32> = roots
            .flat_map(|root| procs::tree_of(root).unwrap_or_default())
            .filter(|p| !p.zombie && p.pid != me && Some(p.pgrp) != tree.leader)
            .map(|p| p.pid)
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Our children that we did not start (see [`started`]): orphans we adopted, alive or
    /// ended. Only those are read, not every child (the other jobs' main processes).
    fn adopted(me: i32) -> Option<Vec<Proc>> {
        let mut children = procs::adoptive_children(me)?;
        {
            let started = started();
            children.retain(|c| !started.contains(c));
        }
        Some(children.into_iter().filter_map(procs::get).collect())
    }

    pub(super) fn with_token(matches: impl Fn(&str) -> bool) -> Vec<i32> {
        let me = me();
        procs::scan()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| !p.zombie && p.pid != me)
            .filter(|p| p.env_var(JOB_TOKEN_VAR).is_some_and(|t| matches(&t)))
            .map(|p| p.pid)
            .collect()
    }

    pub(super) fn signal_each(pids: &[i32], hard: bool) {
        let sig = if hard {
            Signal::SIGKILL
        } else {
            Signal::SIGTERM
        };
        for &pid in pids.iter().filter(|&&p| p > 1) {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }

    pub(super) fn is_alive(pid: i32) -> bool {
        procs::get(pid).is_some_and(|p| !p.zombie)
    }

    pub(super) fn reap_adopted() {
        let me = me();
        // The children we did not start (else a scan of every process).
        let procs: Vec<Proc> = adopted(me).unwrap_or_else(|| procs::scan().unwrap_or_default());
        reap(me, &procs);
    }

    /// Reaps the ended ones of `procs` that are our children and surely adopted: in another
    /// session than ours or a foreign group (a `git` some other code runs and waits for is
    /// neither).
    fn reap(me: i32, procs: &[Proc]) {
        let mut zombies = procs.iter().filter(|p| p.zombie && p.ppid == me).peekable();
        // Our own session and group, read only when there is a zombie to judge.
        if zombies.peek().is_none() {
            return;
        }
        let Some(mine) = procs::get(me) else {
            return;
        };
        for p in zombies {
            let adopted = p.session != mine.session || (p.pgrp != p.pid && p.pgrp != mine.pgrp);
            if adopted {
                let _ = waitpid(Pid::from_raw(p.pid), Some(WaitPidFlag::WNOHANG));
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::Tree;

    pub(super) fn become_subreaper() -> bool {
        false
    }

    pub(super) fn processes(_tree: &Tree) -> Vec<i32> {
        Vec::new()
    }

    pub(super) fn with_token(_matches: impl Fn(&str) -> bool) -> Vec<i32> {
        Vec::new()
    }

    pub(super) fn signal_each(_pids: &[i32], _hard: bool) {}

    pub(super) fn is_alive(_pid: i32) -> bool {
        false
    }

    pub(super) fn reap_adopted() {}

    pub(super) fn processes_after_exit(_tree: &Tree) -> Vec<i32> {
        Vec::new()
    }
}
