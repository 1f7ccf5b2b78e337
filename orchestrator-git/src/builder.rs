//! [`Git2OperationsBuilder`], the options of [`Git2Operations`], and the commit [`Identity`]
//! they set.

use std::path::PathBuf;

use git2::Signature;
use orchestrator_core::git::GitError;

use crate::error::Context;
use crate::ops::Git2Operations;

/// A commit author and committer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Name, e.g. `Orchestrator`.
    pub name: String,
    /// E-mail address, e.g. `orchestrator@localhost`.
    pub email: String,
}

impl Identity {
    /// An identity from a name and an e-mail address.
    pub fn new(name: impl Into<String>, email: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            email: email.into(),
        }
    }
}

impl Default for Identity {
    /// `Orchestrator <orchestrator@localhost>`.
    fn default() -> Self {
        Self::new("Orchestrator", "orchestrator@localhost")
    }
}

/// How many finished worktrees a repository's pool keeps, and how much disk they may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolLimits {
    pub(crate) count: usize,
    pub(crate) bytes: u64,
}

impl PoolLimits {
    /// No pool: removed worktrees are deleted.
    pub(crate) const DISABLED: PoolLimits = PoolLimits { count: 0, bytes: 0 };

    /// Whether anything may be pooled.
    pub(crate) fn enabled(&self) -> bool {
        self.count > 0 && self.bytes > 0
    }
}

impl Default for PoolLimits {
    /// 8 worktrees, 2 GiB.
    fn default() -> Self {
        PoolLimits {
            count: 8,
            bytes: 2 << 30,
        }
    }
}

/// Options for [`Git2Operations`]; see [`Git2Operations::builder`].
#[derive(Debug, Clone, Default)]
pub struct Git2OperationsBuilder {
    identity: Option<Identity>,
    fallback: Identity,
    roots: Vec<PathBuf>,
    pool: PoolLimits,
}

impl Git2OperationsBuilder {
    /// Commits as `identity` always, whatever the repository's configuration says.
    pub fn identity(mut self, identity: Identity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Commits as `identity` when the repository's configuration has no `user.name` /
    /// `user.email` (default: [`Identity::default`]).
    pub fn fallback_identity(mut self, identity: Identity) -> Self {
        self.fallback = identity;
        self
    }

    /// Also allows worktrees under `root` (by default only inside the repository's folder).
    pub fn worktree_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.roots.push(root.into());
        self
    }

    /// Keeps up to `count` removed worktrees per repository, taking at most `bytes` of disk
    /// together, to make new worktrees from (default: 8 and 2 GiB; 0 for either turns the
    /// pool off and removal deletes).
    ///
    /// A pooled worktree is moved to the new job's path and brought to its commit by touching
    /// only the files that differ; the result is what a fresh `git worktree add --detach`
    /// would write. The pool lives in `<git common dir>/orchestrator/worktree-pool/`, is
    /// invisible to `git worktree list`, and is only used when it is on the same file system
    /// as the worktree and the repository checks files out byte for byte (no attributes or
    /// line-ending conversion, no submodules); otherwise worktrees are made and deleted afresh.
    /// [`GitOperations::clear_worktree_pool`](orchestrator_core::git::GitOperations::clear_worktree_pool)
    /// empties it.
    pub fn worktree_pool(mut self, count: usize, bytes: u64) -> Self {
        self.pool = PoolLimits { count, bytes };
        self
    }

    /// Checks the options and builds the operations.
    pub fn build(self) -> Result<Git2Operations, GitError> {
        for identity in self.identity.iter().chain([&self.fallback]) {
            Signature::now(&identity.name, &identity.email).ctx("check identity")?;
        }
        if let Some(root) = self.roots.iter().find(|r| !r.is_absolute()) {
            return Err(GitError::other(
                "configure",
                format!("worktree root {} is not an absolute path", root.display()),
            ));
        }
        Ok(self.assemble())
    }

    /// The operations with these options, unchecked.
    pub(crate) fn assemble(self) -> Git2Operations {
        Git2Operations::with_options(self.identity, self.fallback, self.roots, self.pool)
    }
}
