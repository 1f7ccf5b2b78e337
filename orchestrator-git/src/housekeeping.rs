//! Repository housekeeping outside of merges: patterns appended to `.git/info/exclude` and the
//! lock files a crashed process left behind.

use std::collections::BTreeSet;
use std::path::PathBuf;

use git2::Repository;
use orchestrator_core::git::GitError;

use crate::{error, paths, refs, worktree};

/// Lock files in the administrative folders of `worktrees` (found through their `.git` file)
/// and on `branches`' refs.
pub(crate) fn stale_locks(
    repo: &Repository,
    worktrees: &[PathBuf],
    branches: &[String],
) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for wt in worktrees {
        let Some(admin) = worktree::linked_admin(wt) else {
            continue;
        };
        if let Ok(entries) = std::fs::read_dir(admin) {
            found.extend(
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "lock")),
            );
        }
    }
    let heads = repo.commondir().join("refs").join("heads");
    for branch in branches {
        if refs::check_branch_name(branch).is_ok() {
            let lock = heads.join(format!("{branch}.lock"));
            if lock.exists() {
                found.push(lock);
            }
        }
    }
    found
}

/// Appends the patterns `.git/info/exclude` lacks.
pub(crate) fn exclude(repo: &Repository, patterns: &[String]) -> Result<(), GitError> {
    let file = repo.commondir().join("info").join("exclude");
    let existing = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(error::io("exclude", &file, e)),
    };
    let mut present: BTreeSet<&str> = existing.lines().map(str::trim_end).collect();
    let mut text = existing.clone();
    for pattern in patterns {
        if present.insert(pattern.as_str()) {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(pattern);
            text.push('\n');
        }
    }
    if text == existing {
        return Ok(());
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| error::io("exclude", dir, e))?;
    }
    paths::write_atomically(&file, text.as_bytes())
}
