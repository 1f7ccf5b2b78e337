//! The process group a supervised child leads, so that signals reach its whole tree.
//!
//! On Unix every supervised child is started as the leader of a new process group; its children
//! and grandchildren stay in that group unless they deliberately leave it (`setsid`, daemons).
//! Elsewhere there is no group: only the child itself can be killed.

use std::time::Duration;

use tokio::process::Child;
use tokio::time::Instant;

use crate::tree::Tree;

/// How often a group is checked while waiting for it to empty.
const POLL: Duration = Duration::from_millis(10);

/// The process group of one supervised child.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    /// Group id (the leader's pid); `None` when unknown or not on Unix.
    #[cfg_attr(not(unix), allow(dead_code))]
    pgid: Option<i32>,
}

impl Group {
    /// The group `child` leads; call right after spawning (before the child is reaped).
    pub(crate) fn of(child: &Child) -> Self {
        // Never 0 or 1: `killpg(0)` would signal our own group, and 1 is init.
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .filter(|&id| id > 1);
        Group { pgid }
    }

    /// The group of `pgid`, e.g. one recorded by an earlier owner.
    pub(crate) fn from_id(pgid: u32) -> Self {
        Group {
            pgid: i32::try_from(pgid).ok().filter(|&id| id > 1),
        }
    }

    /// The group id, when there is a group.
    pub(crate) fn id(&self) -> Option<u32> {
        self.pgid.and_then(|p| u32::try_from(p).ok())
    }

    /// Whether some live process of the group works in `dir` or below (Linux: its current
    /// directory, from `/proc`). Elsewhere nothing can be checked, and this is false.
    pub(crate) fn works_in(&self, dir: &std::path::Path) -> bool {
        self.pgid
            .is_some_and(|pgid| imp::member_works_in(pgid, dir))
    }

    /// Asks every process of the group to stop (SIGTERM). False when there is no group to signal.
    pub(crate) fn terminate(&self) -> bool {
        self.signal(imp::TERM)
    }

    /// Kills every process of the group (SIGKILL).
    pub(crate) fn kill(&self) -> bool {
        self.signal(imp::KILL)
    }

    fn signal(&self, sig: imp::Sig) -> bool {
        self.pgid.is_some_and(|pgid| imp::signal(pgid, sig))
    }

    /// Whether any process of the group still runs (zombies waiting to be reaped do not count).
    pub(crate) fn is_alive(&self) -> bool {
        self.pgid.is_some_and(imp::has_live_member)
    }

    /// Waits until the group is gone or `deadline` passes; true when it is gone.
    pub(crate) async fn wait_gone(&self, deadline: Instant) -> bool {
        loop {
            if !self.is_alive() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
    }
}

/// Kills the group and every other process of the run with SIGKILL when dropped while armed:
/// if the future supervising a child is dropped midway (its caller gave up), the child's tree
/// does not outlive it.
#[derive(Debug)]
pub(crate) struct KillOnDrop {
    group: Group,
    tree: Tree,
    armed: bool,
}

impl KillOnDrop {
    pub(crate) fn new(group: Group, tree: Tree) -> Self {
        KillOnDrop {
            group,
            tree,
            armed: true,
        }
    }

    /// The group has been dealt with; dropping does nothing.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.armed {
            // The escaped ones first, while the parent chain through the group still holds.
            self.tree.kill_all();
            self.group.kill();
        }
        self.tree.forget_leader();
    }
}

#[cfg(unix)]
mod imp {
    use nix::errno::Errno;
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;

    pub(super) type Sig = Signal;
    pub(super) const TERM: Sig = Signal::SIGTERM;
    pub(super) const KILL: Sig = Signal::SIGKILL;

    pub(super) fn signal(pgid: i32, sig: Sig) -> bool {
        killpg(Pid::from_raw(pgid), sig).is_ok()
    }

    pub(super) fn has_live_member(pgid: i32) -> bool {
        match killpg(Pid::from_raw(pgid), None) {
            Ok(()) => live_member_on_disk(pgid),
            // ESRCH: no such group; EPERM: the id now belongs to someone else's processes.
            Err(Errno::ESRCH | Errno::EPERM) => false,
            Err(_) => true,
        }
    }

    /// The group exists; on Linux, look closer: it may hold only zombies whose parent never
    /// reaps them (orphans under an init that does not reap, as in some containers).
    #[cfg(target_os = "linux")]
    fn live_member_on_disk(pgid: i32) -> bool {
        live_members(pgid).is_none_or(|mut members| members.next().is_some())
    }

    #[cfg(not(target_os = "linux"))]
    fn live_member_on_disk(_pgid: i32) -> bool {
        true
    }

    /// Whether a live member of group `pgid` has its current directory in `dir` or below.
    #[cfg(target_os = "linux")]
    pub(super) fn member_works_in(pgid: i32, dir: &std::path::Path) -> bool {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        live_members(pgid).is_some_and(|mut members| {
            members.any(|p| p.cwd().is_some_and(|cwd| cwd.starts_with(&dir)))
        })
    }

    /// The live (not zombie) members of group `pgid`; `None` when `/proc` cannot be read.
    #[cfg(target_os = "linux")]
    fn live_members(pgid: i32) -> Option<impl Iterator<Item = crate::procs::Proc>> {
        let procs = crate::procs::scan()?;
        Some(
            procs
                .into_iter()
                .filter(move |p| p.pgrp == pgid && !p.zombie),
        )
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn member_works_in(_pgid: i32, _dir: &std::path::Path) -> bool {
        false
    }
}

#[cfg(not(unix))]
mod imp {
    pub(super) type Sig = ();
    pub(super) const TERM: Sig = ();
    pub(super) const KILL: Sig = ();

    pub(super) fn signal(_pgid: i32, _sig: Sig) -> bool {
        false
    }

    pub(super) fn has_live_member(_pgid: i32) -> bool {
        false
    }

    pub(super) fn member_works_in(_pgid: i32, _dir: &std::path::Path) -> bool {
        false
    }
}
