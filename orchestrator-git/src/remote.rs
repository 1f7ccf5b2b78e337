//! Git through a shared remote (SPEC §16): pushing a commit as a ref and fetching one back.
//! These go through the `git` command, not libgit2, so that every transport and credential
//! setup the user's git has (ssh agents, credential helpers, `insteadOf` rules) works as it
//! does for `git push` itself.

use std::path::Path;
use std::process::Stdio;

use orchestrator_core::git::{CommitId, GitError};
use tokio::process::Command;

/// Runs `git -C repo args...`, the error naming `operation` and quoting git's own message.
async fn git(repo: &Path, operation: &str, args: &[&str]) -> Result<String, GitError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .stdin(Stdio::null())
        // Never wait for a password prompt nobody can answer.
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .await
        .map_err(|e| GitError::Other {
            operation: operation.to_owned(),
            message: format!("cannot run `git`: {e}"),
            retryable: false,
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A remote that did not answer, or a ref lock another push held, may work a moment later.
    let retryable = [
        "Could not read from remote",
        "Connection",
        "timed out",
        "lock",
    ]
    .iter()
    .any(|hint| stderr.contains(hint));
    Err(GitError::Other {
        operation: operation.to_owned(),
        message: format!(
            "`git {}` in {}: {}",
            args.join(" "),
            repo.display(),
            stderr.trim()
        ),
        retryable,
    })
}

/// A full ref name the engine may write on a remote: `refs/...`, no `..`, no spaces.
fn check_reference(reference: &str, operation: &str) -> Result<(), GitError> {
    let fine = reference.starts_with("refs/")
        && !reference.contains("..")
        && !reference
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, ':' | '^' | '~' | '?' | '*' | '[' | '\\'));
    if fine {
        return Ok(());
    }
    Err(GitError::Other {
        operation: operation.to_owned(),
        message: format!("`{reference}` is not a full ref name (refs/...)"),
        retryable: false,
    })
}

pub(crate) async fn push(
    repo: &Path,
    remote: &str,
    commit: &str,
    reference: &str,
) -> Result<(), GitError> {
    check_reference(reference, "push")?;
    let spec = format!("+{commit}:{reference}");
    git(
        repo,
        "push",
        &["push", "--quiet", "--no-verify", remote, &spec],
    )
    .await?;
    Ok(())
}

pub(crate) async fn fetch(
    repo: &Path,
    remote: &str,
    reference: &str,
) -> Result<CommitId, GitError> {
    check_reference(reference, "fetch")?;
    let spec = format!("+{reference}:{reference}");
    git(
        repo,
        "fetch",
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            remote,
            &spec,
        ],
    )
    .await?;
    git(
        repo,
        "fetch",
        &["rev-parse", "--verify", &format!("{reference}^{{commit}}")],
    )
    .await
}
