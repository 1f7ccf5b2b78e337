//! Worktrees and checkouts on disk for [`MemoryGit`]: moving a worktree to a
//! commit, detecting local edits, confining paths, and writing and reading trees as real files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::GitError;
use super::ignore::{ignored, IgnoreRule};

use super::{MemoryGit, Tree, DIRTY_FILES_SHOWN};

impl MemoryGit {
    /// Brings the worktree's files and HEAD to `commit`, refusing to overwrite local edits.
    pub(super) fn checkout_worktree(&self, worktree: &Path, commit: &str) -> Result<(), GitError> {
        let mut state = self.lock();
        let key = state.worktree_owner(worktree)?;
        let r = state.repo_mut(&key)?;
        let old_id = r.worktrees.get(worktree).cloned().unwrap_or_default();
        if old_id == commit {
            return Ok(());
        }
        let (old, new) = (r.tree_of(&old_id)?, r.tree_of(commit)?);
        let current = read_tree_files(worktree, &r.excludes, &[])?;
        let clobbered: Vec<String> = old
            .keys()
            .chain(new.keys())
            .filter(|p| {
                let (o, n, c) = (old.get(*p), new.get(*p), current.get(*p));
                o != n && c != o && c != n
            })
            .cloned()
            .collect();
        if !clobbered.is_empty() {
            return Err(GitError::other(
                "checkout",
                format!(
                    "local changes in {} would be overwritten: {}",
                    worktree.display(),
                    clobbered.join(", ")
                ),
            ));
        }
        write_tree_files(worktree, &old, &new)?;
        r.worktrees
            .insert(worktree.to_path_buf(), commit.to_string());
        Ok(())
    }
}

/// Files whose state would be lost by moving a checkout from `old` to `new`: tracked files that
/// differ from `old`, and untracked files at paths `new` adds. Sorted, at most
/// [`DIRTY_FILES_SHOWN`].
pub(super) fn dirty_files(old: &Tree, new: &Tree, current: &Tree) -> Vec<String> {
    let modified = old
        .iter()
        .filter(|(p, c)| current.get(*p) != Some(*c))
        .map(|(p, _)| p);
    let untracked = current.keys().filter(|p| {
        !old.contains_key(*p) && new.get(*p).is_some_and(|n| Some(n) != current.get(*p))
    });
    let all: BTreeSet<&String> = modified.chain(untracked).collect();
    all.into_iter().take(DIRTY_FILES_SHOWN).cloned().collect()
}

/// Resolves `path` (symbolic links of its existing part included) and checks that it lies
/// strictly inside `root`.
pub(super) fn confine(root: &Path, path: &Path) -> Result<PathBuf, GitError> {
    let outside = || GitError::PathOutsideRoot {
        path: path.to_path_buf(),
        root: root.to_path_buf(),
    };
    if !path.is_absolute() {
        return Err(outside());
    }
    let resolved = super::super::resolve_physical(path).map_err(|(p, e)| match e.kind() {
        std::io::ErrorKind::NotFound => GitError::NotFound {
            what: format!("path {}", p.display()),
        },
        _ => io_error("resolve path", &p, e),
    })?;
    if resolved.starts_with(root) && resolved != root {
        Ok(resolved)
    } else {
        Err(outside())
    }
}

pub(super) fn canonical(path: &Path) -> Result<PathBuf, GitError> {
    std::fs::canonicalize(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => GitError::NotFound {
            what: format!("path {}", path.display()),
        },
        _ => io_error("resolve path", path, e),
    })
}

pub(super) fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

pub(super) fn not_found_repo(path: &Path) -> GitError {
    GitError::NotFound {
        what: format!("repository {}", path.display()),
    }
}

pub(super) fn io_error(operation: &str, path: &Path, e: std::io::Error) -> GitError {
    GitError::Other {
        operation: operation.to_string(),
        message: format!("{}: {e}", path.display()),
        retryable: false,
    }
}

/// Moves the files under `dir` from tree `old` to tree `new`: writes what differs, deletes what
/// `new` lacks (and folders left empty).
pub(super) fn write_tree_files(dir: &Path, old: &Tree, new: &Tree) -> Result<(), GitError> {
    for (path, content) in new {
        if old.get(path) == Some(content) && dir.join(path).is_file() {
            continue;
        }
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error("checkout", parent, e))?;
        }
        std::fs::write(&file, content.as_slice()).map_err(|e| io_error("checkout", &file, e))?;
    }
    for path in old.keys().filter(|p| !new.contains_key(*p)) {
        let file = dir.join(path);
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("checkout", &file, e)),
        }
        let mut parent = file.parent();
        while let Some(p) = parent.filter(|p| *p != dir && is_empty_dir(p)) {
            let _ = std::fs::remove_dir(p);
            parent = p.parent();
        }
    }
    Ok(())
}

/// Reads the files under `dir` as a tree, leaving out `.git`, symbolic links, the folders in
/// `skip`, and what `.gitignore` or `excludes` ignore.
pub(super) fn read_tree_files(
    dir: &Path,
    excludes: &[String],
    skip: &[&Path],
) -> Result<Tree, GitError> {
    let mut rules: Vec<IgnoreRule> = excludes
        .iter()
        .filter_map(|l| IgnoreRule::parse(l))
        .collect();
    if let Ok(text) = std::fs::read_to_string(dir.join(".gitignore")) {
        rules.extend(text.lines().filter_map(IgnoreRule::parse));
    }
    let mut tree = Tree::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((folder, prefix)) = pending.pop() {
        // A folder's own `.gitignore` applies below it (the root's was read above).
        if !prefix.is_empty() {
            if let Ok(text) = std::fs::read_to_string(folder.join(".gitignore")) {
                let scoped = text.lines().filter_map(IgnoreRule::parse);
                rules.extend(scoped.map(|r| r.under(&prefix)));
            }
        }
        let entries =
            std::fs::read_dir(&folder).map_err(|e| io_error("read worktree", &folder, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error("read worktree", &folder, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            let kind = entry
                .file_type()
                .map_err(|e| io_error("read worktree", &entry.path(), e))?;
            if name == ".git" || kind.is_symlink() || skip.contains(&entry.path().as_path()) {
                continue;
            }
            if ignored(&rules, &rel, kind.is_dir()) {
                continue;
            }
            if kind.is_dir() {
                pending.push((entry.path(), format!("{rel}/")));
            } else {
                let content = std::fs::read(entry.path())
                    .map_err(|e| io_error("read worktree", &entry.path(), e))?;
                tree.insert(rel, Arc::new(content));
            }
        }
    }
    Ok(tree)
}
