//! Opening repositories, resolving revisions, and branches: names, default branch, who has a
//! branch checked out, compare-and-swap updates.

use std::path::{Path, PathBuf};

use git2::{BranchType, ErrorCode, Oid, Repository};
use orchestrator_core::git::GitError;

use crate::error::{self, Context};

/// Opens the repository whose working tree (or git dir) is exactly `path`.
pub(crate) fn open(path: &Path) -> Result<Repository, GitError> {
    Repository::open(path).map_err(|e| match e.code() {
        ErrorCode::NotFound => GitError::NotFound {
            what: format!("git repository at {}", path.display()),
        },
        _ => error::git("open repository", e),
    })
}

/// `refs/heads/<branch>`.
pub(crate) fn branch_ref(branch: &str) -> String {
    format!("refs/heads/{branch}")
}

/// Resolves a revision to a commit.
pub(crate) fn resolve_commit(repo: &Repository, rev: &str) -> Result<Oid, GitError> {
    let not_found = || GitError::NotFound {
        what: format!("commit `{rev}`"),
    };
    let object = repo.revparse_single(rev).map_err(|e| match e.code() {
        ErrorCode::NotFound | ErrorCode::InvalidSpec | ErrorCode::Ambiguous => not_found(),
        _ => error::git("resolve", e),
    })?;
    object
        .peel_to_commit()
        .map(|c| c.id())
        .map_err(|_| not_found())
}

/// Checks a branch name against git's ref-format rules (as `git check-ref-format --branch`).
pub(crate) fn check_branch_name(name: &str) -> Result<(), GitError> {
    let invalid = |reason: &str| GitError::InvalidBranchName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.starts_with('-') {
        return Err(invalid("it starts with `-`"));
    }
    match git2::Branch::name_is_valid(name) {
        Ok(true) => Ok(()),
        Ok(false) => Err(invalid(
            "git's ref-format rules reject it (no `..`, `@{`, spaces, control characters, \
             `~^:?*[\\`, empty components, components starting with `.` or ending in `.lock`, \
             a trailing `.`, or `HEAD`)",
        )),
        Err(e) => Err(invalid(e.message())),
    }
}

/// The commit a local branch points at.
pub(crate) fn branch_tip(repo: &Repository, branch: &str) -> Result<Option<Oid>, GitError> {
    match repo.find_reference(&branch_ref(branch)) {
        Ok(r) => Ok(r.target()),
        Err(e) if matches!(e.code(), ErrorCode::NotFound | ErrorCode::InvalidSpec) => Ok(None),
        Err(e) => Err(error::git("read branch", e)),
    }
}

/// The branch the worktree at `repo` has checked out (`None` when detached).
pub(crate) fn current_branch(repo: &Repository) -> Result<Option<String>, GitError> {
    let head = repo.find_reference("HEAD").ctx("read HEAD")?;
    Ok(head
        .symbolic_target()
        .and_then(|t| t.strip_prefix("refs/heads/"))
        .map(str::to_string))
}

/// The default branch: `origin/HEAD`, then `init.defaultBranch`, `main`, `master` (the first
/// that exists locally), else the branch checked out, else `main`.
pub(crate) fn default_branch(repo: &Repository) -> Result<String, GitError> {
    if let Ok(origin) = repo.find_reference("refs/remotes/origin/HEAD") {
        if let Some(name) = origin
            .symbolic_target()
            .and_then(|t| t.strip_prefix("refs/remotes/origin/"))
        {
            return Ok(name.to_string());
        }
    }
    let configured = repo
        .config()
        .ok()
        .and_then(|c| c.get_string("init.defaultBranch").ok());
    for candidate in configured
        .iter()
        .map(String::as_str)
        .chain(["main", "master"])
    {
        if repo.find_branch(candidate, BranchType::Local).is_ok() {
            return Ok(candidate.to_string());
        }
    }
    Ok(current_branch(repo)?.unwrap_or_else(|| "main".to_string()))
}

/// The working folders of every worktree (the main one first) that has `branch` checked out.
pub(crate) fn checkouts_of(repo: &Repository, branch: &str) -> Result<Vec<PathBuf>, GitError> {
    let wanted = format!("ref: {}", branch_ref(branch));
    let common = repo.commondir();
    let holds = |head_file: &Path| {
        std::fs::read_to_string(head_file).is_ok_and(|head| head.trim_end() == wanted)
    };
    let mut found = Vec::new();
    if holds(&common.join("HEAD")) {
        if let Some(main) = main_workdir(repo) {
            found.push(main);
        }
    }
    if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
        for entry in entries.flatten() {
            let admin = entry.path();
            if holds(&admin.join("HEAD")) {
                if let Some(path) = crate::worktree::registered_path(&admin) {
                    found.push(path);
                }
            }
        }
    }
    Ok(found)
}

/// The main worktree's folder (`None` for a bare repository).
pub(crate) fn main_workdir(repo: &Repository) -> Option<PathBuf> {
    if !repo.is_worktree() {
        return repo.workdir().map(Path::to_path_buf);
    }
    let common = repo.commondir();
    Repository::open(common)
        .ok()
        .and_then(|main| main.workdir().map(Path::to_path_buf))
}

/// Refuses to move or delete the default branch or a checked-out branch.
pub(crate) fn protect(repo: &Repository, branch: &str, operation: &str) -> Result<(), GitError> {
    let refuse = |reason: String| GitError::ProtectedBranch {
        branch: branch.to_string(),
        operation: operation.to_string(),
        reason,
    };
    if default_branch(repo)? == branch {
        return Err(refuse("it is the repository's default branch".to_string()));
    }
    if let Some(path) = checkouts_of(repo, branch)?.first() {
        return Err(refuse(format!("it is checked out at {}", path.display())));
    }
    Ok(())
}

/// Sets `branch` to `new` if it currently is `expected` (`None`: absent), else
/// [`GitError::RefChanged`].
pub(crate) fn compare_and_swap(
    repo: &Repository,
    branch: &str,
    new: Oid,
    expected: Option<Oid>,
    expected_text: Option<&str>,
    log: &str,
) -> Result<(), GitError> {
    let name = branch_ref(branch);
    let changed = |repo: &Repository| -> GitError {
        GitError::RefChanged {
            reference: name.clone(),
            expected: expected_text.map(str::to_string),
            actual: branch_tip(repo, branch)
                .ok()
                .flatten()
                .map(|o| o.to_string()),
        }
    };
    let result = match expected {
        // "Must not exist" as the zero id, which libgit2 checks under the ref's lock: a plain
        // create checks before taking the lock, so of two processes creating the branch at
        // once the second could overwrite the first's.
        None => repo
            .reference_matching(&name, new, true, Oid::zero(), log)
            .map(|_| ()),
        Some(old) => {
            if branch_tip(repo, branch)?.is_none() {
                return Err(changed(repo));
            }
            repo.reference_matching(&name, new, true, old, log)
                .map(|_| ())
        }
    };
    match result {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.code(),
                ErrorCode::Exists | ErrorCode::Modified | ErrorCode::NotFound
            ) =>
        {
            Err(changed(repo))
        }
        Err(e) => Err(error::git("update branch", e)),
    }
}
