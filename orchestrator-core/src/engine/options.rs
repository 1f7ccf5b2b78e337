//! [`OrchestratorOptions`]: the engine's tunables.

use std::path::PathBuf;

use crate::redact::SecretNames;

/// Tunables, each with a documented default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OrchestratorOptions {
    /// Jobs running at once across every plan of this orchestrator (default: 16); a capacity
    /// given to [`OrchestratorBuilder::capacity`](crate::OrchestratorBuilder::capacity) may bound them further.
    pub global_capacity: usize,
    /// Events each subscriber may lag behind before it skips ahead (default: 4096).
    pub event_buffer: usize,
    /// Where job worktrees live (default: `<repo>/.worktrees`).
    pub worktree_root: Option<PathBuf>,
    /// Prefix of job commit messages (default: `[Plan]`).
    pub commit_prefix: String,
    /// Agent used when a spec names none (default: `copilot`).
    pub default_agent: String,
    /// Heals tried per failed shell/process phase when a healer is set (default: 4).
    pub auto_heal_budget: u32,
    /// Environment variables whose values are secrets, beyond the built-in rules (names
    /// containing `TOKEN`, `SECRET`, `PASSWORD`, ending in `_KEY`, ...; see
    /// [`SecretNames`]). Their values in the host's environment and in plan, job and spec
    /// `env` are redacted from phase logs, log events and failure messages (default: the
    /// built-in rules only; hosts may read [`SecretNames::from_env`]).
    pub secret_env: SecretNames,
}

impl Default for OrchestratorOptions {
    fn default() -> Self {
        OrchestratorOptions {
            global_capacity: 16,
            event_buffer: 4096,
            worktree_root: None,
            commit_prefix: "[Plan]".into(),
            default_agent: "copilot".into(),
            auto_heal_budget: 4,
            secret_env: SecretNames::new(),
        }
    }
}

impl OrchestratorOptions {
    /// Sets [`OrchestratorOptions::global_capacity`].
    pub fn global_capacity(mut self, n: usize) -> Self {
        self.global_capacity = n;
        self
    }

    /// Where the worktrees of plans on `repo` live: [`OrchestratorOptions::worktree_root`], or
    /// `<repo>/.worktrees`. The orchestrator tells its git layer about the root
    /// ([`crate::GitOperations::allow_worktree_root`]): it is configured here once.
    pub fn worktree_root_for(&self, repo: &std::path::Path) -> PathBuf {
        self.worktree_root
            .clone()
            .unwrap_or_else(|| repo.join(".worktrees"))
    }

    /// Where the worktrees of `spec`, a plan on `repo`, live: the plan's `worktreeRoot`
    /// (relative to the repository), else [`OrchestratorOptions::worktree_root_for`].
    pub fn plan_worktree_root(
        &self,
        spec: &crate::plan::PlanSpec,
        repo: &std::path::Path,
    ) -> PathBuf {
        match &spec.worktree_root {
            Some(root) => repo.join(root),
            None => self.worktree_root_for(repo),
        }
    }

    /// Sets [`OrchestratorOptions::worktree_root`].
    pub fn worktree_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.worktree_root = Some(root.into());
        self
    }

    /// Sets [`OrchestratorOptions::secret_env`].
    ///
    /// ```
    /// use orchestrator_core::redact::SecretNames;
    /// let options = orchestrator_core::OrchestratorOptions::default()
    ///     .secret_env(SecretNames::parse("DEPLOY_HOOK"));
    /// assert!(options.secret_env.is_secret("DEPLOY_HOOK"));
    /// ```
    pub fn secret_env(mut self, names: SecretNames) -> Self {
        self.secret_env = names;
        self
    }
}
