//! Git repositories a job creates inside its worktree (an agent that `git clone`s a library
//! into a subfolder, a scaffolder that runs `git init`).
//!
//! `git add -A` would store such a folder as a gitlink: a bare pointer to a commit of a
//! repository that exists only in this worktree, so the job's result would lose the files when
//! it merges on (and a `git init` without a commit makes `git add` fail outright). A job's commit
//! is what flows along the DAG, so the folder's files are committed as plain files instead; its
//! `.git` is left out. A real submodule (a gitlink the job staged itself, with
//! `git submodule add`) stays a gitlink.

use std::path::{Path, PathBuf};

use git2::{Index, Repository};
use orchestrator_core::git::GitError;

use crate::error::{self, Context};

/// File mode of a gitlink (submodule) entry in an index.
const GITLINK: u32 = 0o160000;

/// Whether `rel` (a folder of `wt`'s working folder, `/`-terminated as libgit2 passes it to
/// `add_all`'s callback) is a repository of its own that the index does not already hold as a
/// gitlink: such a folder is staged by [`stage_plain`] instead.
pub(crate) fn is_nested_repo(root: &Path, index: &Index, rel: &Path) -> bool {
    let text = rel.to_string_lossy();
    if !text.ends_with('/') {
        return false;
    }
    let folder = text.trim_end_matches('/');
    let staged_gitlink = index
        .get_path(Path::new(folder), 0)
        .is_some_and(|e| e.mode == GITLINK);
    !staged_gitlink && root.join(folder).join(".git").exists()
}

/// Stages every file under the nested repository folder `rel` (relative to `root`, the
/// worktree's working folder) that `.gitignore` does not exclude, as plain files. `.git`
/// folders and files are left out at every depth; symbolic links are staged as links.
pub(crate) fn stage_plain(
    wt: &Repository,
    index: &mut Index,
    root: &Path,
    rel: &Path,
) -> Result<(), GitError> {
    let mut pending: Vec<PathBuf> = vec![rel.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let dir = root.join(&folder);
        let entries = std::fs::read_dir(&dir).map_err(|e| error::io("stage", &dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| error::io("stage", &dir, e))?;
            let name = entry.file_name();
            if name == ".git" {
                continue;
            }
            let path = folder.join(&name);
            let kind = entry
                .file_type()
                .map_err(|e| error::io("stage", &entry.path(), e))?;
            let dir_like = kind.is_dir();
            if is_ignored(wt, &path, dir_like)? {
                continue;
            }
            if dir_like {
                pending.push(path);
            } else {
                index.add_path(&path).ctx("stage")?;
            }
        }
    }
    Ok(())
}

/// Whether `.gitignore` rules (of the worktree and of the nested folders) exclude `path`.
fn is_ignored(wt: &Repository, path: &Path, is_dir: bool) -> Result<bool, GitError> {
    // libgit2 tells a folder apart from a file by the trailing slash.
    let query = if is_dir {
        PathBuf::from(format!("{}/", path.to_string_lossy()))
    } else {
        path.to_path_buf()
    };
    wt.is_path_ignored(&query).ctx("check .gitignore")
}
