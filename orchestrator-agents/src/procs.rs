//! What Linux's `/proc` tells about processes: the one scan behind finding a process group's
//! live members, a job's processes that left its group, and orphans to reap.

#![cfg(target_os = "linux")]

use std::io::Read;
use std::path::{Path, PathBuf};

/// One process, from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proc {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    pub(crate) session: i32,
    /// Ended, waiting to be reaped by its parent (`Z`, or `X` while it goes).
    pub(crate) zombie: bool,
}

impl Proc {
    /// Its current directory.
    pub(crate) fn cwd(&self) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{}/cwd", self.pid)).ok()
    }

    /// The value of environment variable `name` it was started with (`None` when it has none,
    /// or its environment cannot be read: another user's process, or a zombie).
    pub(crate) fn env_var(&self, name: &str) -> Option<String> {
        let environ = read(format!("/proc/{}/environ", self.pid))?;
        environ.split(|&b| b == 0).find_map(|entry| {
            let value = entry.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
            String::from_utf8(value.to_vec()).ok()
        })
    }
}

/// Every process `/proc` lists; `None` when `/proc` cannot be read. Processes that end
/// during the scan are left out.
pub(crate) fn scan() -> Option<Vec<Proc>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    Some(
        entries
            .flatten()
            .filter_map(|entry| {
                let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
                parse_stat(pid, &read(entry.path().join("stat"))?)
            })
            .collect(),
    )
}

/// The children of process `pid`, from the `children` file of each of its threads; `None`
/// when the kernel keeps no such files (built without `CONFIG_PROC_CHILDREN`) or `pid` is gone.
pub(crate) fn children(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut found = Vec::new();
    let mut any = false;
    for task in tasks.flatten() {
        let Some(text) = read(task.path().join("children")) else {
            continue;
        };
        any = true;
        found.extend(pids(&text));
    }
    any.then_some(found)
}

/// The children of process `pid` among which are the orphans the kernel re-parented to it as
/// their child subreaper. The kernel hands an orphan to the subreaper's first live thread,
/// its main thread while that lives, so only the main thread's `children` file is read (two
/// files at the end of every job, where [`children`] reads one per thread of a busy runtime);
/// once the main thread has ended (a host that ended it alone), every thread's.
pub(crate) fn adoptive_children(pid: i32) -> Option<Vec<i32>> {
    let main = format!("/proc/{pid}/task/{pid}");
    let main_lives = read(format!("{main}/stat"))
        .and_then(|stat| parse_stat(pid, &stat))
        .is_some_and(|p| !p.zombie);
    match main_lives
        .then(|| read(format!("{main}/children")))
        .flatten()
    {
        Some(text) => Some(pids(&text).collect()),
        None => children(pid),
    }
}

/// The pids of a `children` file.
fn pids(text: &[u8]) -> impl Iterator<Item = i32> + '_ {
    text.split(u8::is_ascii_whitespace)
        .filter_map(|p| std::str::from_utf8(p).ok()?.parse::<i32>().ok())
}

/// Process `root` and all its descendants, found by walking `children` files down from it:
/// a handful of files for a supervisor's own process tree where [`scan`] reads one per
/// process of the machine (every job's end looks for leftovers, so this is on the hot path).
/// `None` when `children` files are not available; processes that end meanwhile are left
/// out.
pub(crate) fn tree_of(root: i32) -> Option<Vec<Proc>> {
    let mut found = vec![get(root)?];
    let mut next = children(root)?;
    let mut seen = std::collections::HashSet::from([root]);
    while let Some(pid) = next.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if let Some(p) = get(pid) {
            found.push(p);
            next.extend(children(pid).unwrap_or_default());
        }
    }
    Some(found)
}

/// The process `pid`, if it exists.
pub(crate) fn get(pid: i32) -> Option<Proc> {
    parse_stat(pid, &read(format!("/proc/{pid}/stat"))?)
}

/// The whole content of a `/proc` file. Unlike `std::fs::read`, it does not ask for the
/// file's size first (always 0 in `/proc`): an open, reads until the end, a close; these
/// files are read at the end of every job.
fn read(path: impl AsRef<Path>) -> Option<Vec<u8>> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut content = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return Some(content),
            Ok(n) => content.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Parses `/proc/<pid>/stat` (`pid (comm) S ppid pgrp session ...`; `comm` may itself
/// contain spaces and parentheses, hence the last `)`).
pub(crate) fn parse_stat(pid: i32, stat: &[u8]) -> Option<Proc> {
    let rest = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
    let rest = std::str::from_utf8(rest).ok()?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        pgrp,
        session,
        zombie: matches!(state, 'Z' | 'X'),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat() {
        let stat = "4242 (my (odd) name) S 1 4200 4100 0 -1 4194560";
        assert_eq!(
            parse_stat(4242, stat.as_bytes()),
            Some(Proc {
                pid: 4242,
                ppid: 1,
                pgrp: 4200,
                session: 4100,
                zombie: false
            })
        );
        assert!(parse_stat(7, b"7 (z) Z 1 7 7 0").is_some_and(|p| p.zombie));
        assert_eq!(parse_stat(1, b"garbage"), None);
    }

    #[test]
    fn the_tree_of_this_process_holds_its_children() {
        let me = i32::try_from(std::process::id()).expect("pid");
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let pid = i32::try_from(child.id()).expect("pid");
        let tree = tree_of(me);
        let _ = child.kill();
        let _ = child.wait();
        // Kernels without `children` files answer None; the callers then scan.
        if let Some(tree) = tree {
            assert!(tree.iter().any(|p| p.pid == me));
            assert!(
                tree.iter().any(|p| p.pid == pid && p.ppid == me),
                "{tree:?}"
            );
        }
    }

    #[test]
    fn sees_this_process_and_its_environment() {
        let me = i32::try_from(std::process::id()).expect("pid");
        let procs = scan().expect("/proc");
        assert!(procs.iter().any(|p| p.pid == me && !p.zombie));
        let path = std::env::var("PATH").ok();
        assert_eq!(get(me).and_then(|p| p.env_var("PATH")), path);
    }
}
