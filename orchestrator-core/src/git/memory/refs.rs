//! Branch and ref rules for [`MemoryGit`](super::MemoryGit): protecting checked-out branches,
//! git's branch-name format, and short commit ids for messages.

use super::super::GitError;
use super::model::Repo;

/// Refuses to move or delete the default branch or the branch checked out in the main checkout.
pub(super) fn protect(r: &Repo, branch: &str, operation: &str) -> Result<(), GitError> {
    let reason = if branch == r.default_branch {
        "it is the default branch"
    } else if r.checked_out(branch) {
        "it is checked out in the main worktree"
    } else {
        return Ok(());
    };
    Err(GitError::ProtectedBranch {
        branch: branch.to_string(),
        operation: operation.to_string(),
        reason: reason.to_string(),
    })
}

/// Checks a branch name against git's ref-format rules (`git check-ref-format --branch`).
pub(super) fn check_branch_name(name: &str) -> Result<(), GitError> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.starts_with('-') {
        Some("it starts with `-`")
    } else if name == "HEAD" || name == "@" {
        Some("it is reserved")
    } else if name.contains("..") {
        Some("it contains `..`")
    } else if name.contains("@{") {
        Some("it contains `@{`")
    } else if name.contains("//") || name.starts_with('/') || name.ends_with('/') {
        Some("it has an empty path component")
    } else if name.ends_with('.') {
        Some("it ends with `.`")
    } else if name
        .chars()
        .any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c))
    {
        Some("it contains a space, a control character or one of ~ ^ : ? * [ \\")
    } else if name
        .split('/')
        .any(|part| part.starts_with('.') || part.ends_with(".lock"))
    {
        Some("a component starts with `.` or ends with `.lock`")
    } else {
        None
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(GitError::InvalidBranchName {
            name: name.to_string(),
            reason: reason.to_string(),
        }),
    }
}

pub(super) fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}
