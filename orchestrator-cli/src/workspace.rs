//! The repository a command works on: where its plan store is, and the orchestrator driving it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_agents::agent::{AgentHealer, AgentWorkRunner};
use orchestrator_agents::{ProcessRunner, ShellRunner};
use orchestrator_core::redact::SecretNames;
use orchestrator_core::state::PlanRecord;
use orchestrator_core::{Orchestrator, OrchestratorOptions, PlanId, PlanRepository, StoreError};
use orchestrator_git::Git2Operations;
use orchestrator_storage::{Durability, FsOptions, FsPlanRepository};

use crate::error::{CliError, CliResult};

/// Environment variable naming the default agent CLI.
const AGENT_VAR: &str = "ORCHESTRATOR_AGENT";
/// Environment variable naming the agent that heals failed shell/process phases.
const HEAL_AGENT_VAR: &str = "ORCHESTRATOR_HEAL_AGENT";

/// A non-empty variable's value.
fn env_name(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// Folder of the plan store inside the repository (SPEC §4).
pub const STORE_DIR: &str = ".orchestrator";

/// Environment variable choosing how hard state writes work to survive a crash: `full` (the
/// default: every state change is flushed to the disk before the jobs it enables start) or
/// `flush` (handed to the operating system only: survives a crash or `kill -9` of the process,
/// not a power loss; faster where flushing is slow).
pub const DURABILITY_VAR: &str = "ORCHESTRATOR_DURABILITY";

fn durability() -> CliResult<Durability> {
    match std::env::var(DURABILITY_VAR).ok().as_deref() {
        None | Some("") | Some("full") => Ok(Durability::Full),
        Some("flush") => Ok(Durability::Flush),
        Some(other) => Err(CliError::invalid(format!(
            "{DURABILITY_VAR}={other}: use `full` (the default) or `flush`"
        ))),
    }
}

/// Folders kept out of `git status` (through `.git/info/exclude`, nothing checked out).
const EXCLUDED: [&str; 2] = ["/.worktrees/", "/.orchestrator/"];

/// A repository (or, for `isolation: "none"` plans, any folder) and its plan store.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The folder the user named (or the current directory), made absolute.
    pub dir: PathBuf,
    /// The working tree of the git repository holding `dir`, when there is one.
    pub git_root: Option<PathBuf>,
    /// The plan store, `<git_root or dir>/.orchestrator`.
    pub store: Arc<FsPlanRepository>,
    /// The git layer.
    pub git: Git2Operations,
}

impl Workspace {
    /// The workspace of `repo` (default: the current directory).
    pub fn open(repo: Option<&Path>) -> CliResult<Workspace> {
        let given = match repo {
            Some(p) => p.to_path_buf(),
            None => std::env::current_dir()
                .map_err(|e| CliError::other(format!("cannot read the current directory: {e}")))?,
        };
        let dir = std::fs::canonicalize(&given)
            .map_err(|e| CliError::invalid(format!("--repo {}: {e}", given.display())))?;
        if !dir.is_dir() {
            return Err(CliError::invalid(format!(
                "--repo {}: not a directory",
                given.display()
            )));
        }
        let git_root = git2::Repository::discover(&dir)
            .ok()
            .and_then(|r| r.workdir().map(Path::to_path_buf))
            .map(|w| std::fs::canonicalize(&w).unwrap_or(w));
        let root = git_root.clone().unwrap_or_else(|| dir.clone());
        Ok(Workspace {
            store: Arc::new(FsPlanRepository::with_options(
                root.join(STORE_DIR),
                FsOptions::default()
                    .durability(durability()?)
                    .secret_env(SecretNames::from_env()),
            )),
            dir,
            git_root,
            git: Git2Operations::new(),
        })
    }

    /// Whether the folder is (inside) a bare repository: a repository, but without a working
    /// tree to take worktrees of.
    pub fn is_bare_repository(&self) -> bool {
        self.git_root.is_none() && git2::Repository::discover(&self.dir).is_ok_and(|r| r.is_bare())
    }

    /// The repository root (the git working tree, else the folder itself).
    pub fn root(&self) -> &Path {
        self.git_root.as_deref().unwrap_or(&self.dir)
    }

    /// An orchestrator on this workspace's store, with the git layer and the shell, process and
    /// agent runners. `capacity` bounds the jobs running at once.
    ///
    /// `ORCHESTRATOR_AGENT` names the agent CLI for agent work that names none (default
    /// `copilot`); `ORCHESTRATOR_HEAL_AGENT` turns auto-heal on with that agent;
    /// `ORCHESTRATOR_SECRET_ENV` (comma-separated, `*` wildcards) names more variables whose
    /// values are secrets, redacted from logs and kept out of the stored plan like `*_KEY`,
    /// `*TOKEN*`, `*SECRET*` and `*PASSWORD*`.
    pub fn orchestrator(&self, capacity: usize) -> CliResult<Orchestrator> {
        let store: Arc<dyn PlanRepository> = self.store.clone();
        let mut agents = AgentWorkRunner::new();
        if let Some(name) = env_name(AGENT_VAR) {
            agents = agents.default_agent(name);
        }
        let mut builder = Orchestrator::builder()
            .repository_arc(store)
            .git(self.git.clone())
            .runner("shell", ShellRunner::new())
            .runner("process", ProcessRunner::new())
            .runner("agent", agents.clone())
            .reaper(orchestrator_agents::stop_leftovers)
            .options(
                OrchestratorOptions::default()
                    .global_capacity(capacity.max(1))
                    .secret_env(SecretNames::from_env()),
            );
        if let Some(name) = env_name(HEAL_AGENT_VAR) {
            builder = builder.healer(AgentHealer::new(agents).agent(name));
        }
        builder.build().map_err(CliError::from)
    }

    /// Keeps the store and worktree folders out of `git status` before anything is written.
    pub async fn exclude_own_folders(&self) -> CliResult<()> {
        use orchestrator_core::GitOperations;
        if let Some(root) = &self.git_root {
            self.git.exclude(root, &EXCLUDED).await?;
        }
        Ok(())
    }

    /// Removes worktrees left behind by crashes (git repositories only).
    ///
    /// A worktree under `<repo>/.worktrees/` is kept only while a stored plan claims it: a node
    /// records it, or the node has not ended (it may be creating it right now, in this or
    /// another process). Everything else goes, including the worktree of a job that succeeded
    /// and was being removed when the process died: the store already says it is gone.
    /// Nothing is removed while a stored plan cannot be read, since its worktrees could not be
    /// told apart. (The engine's own `remove_orphan_worktrees` keeps the same set but removes
    /// only worktrees git still lists; this one also removes folders whose registration is gone.)
    pub async fn remove_orphans(&self) -> CliResult<Vec<PathBuf>> {
        let Some(repo) = &self.git_root else {
            return Ok(Vec::new());
        };
        let root = canonical(&repo.join(".worktrees"));
        if !root.is_dir() {
            return Ok(Vec::new());
        }
        let listing = self.store.list().await?;
        if !listing.damaged.is_empty() {
            return Ok(Vec::new());
        }
        let mut live: Vec<PathBuf> = Vec::new();
        for summary in &listing.plans {
            let Ok(record) = self.store.load(&summary.plan_id).await else {
                return Ok(Vec::new());
            };
            let jobs = record.spec.jobs.len();
            for (n, node) in record.state.nodes.iter().enumerate() {
                if let Some(p) = &node.worktree {
                    live.push(canonical(p));
                } else if !node.status.is_terminal() {
                    live.push(root.join(if n < jobs {
                        node.id.short().to_owned()
                    } else {
                        format!("_snapshot-{}", record.state.id.short())
                    }));
                }
            }
        }
        Ok(self
            .git
            .remove_orphaned_worktrees(repo, &root, &live)
            .await?)
    }

    /// Puts the snapshot branch back when a crash came between the final merge and the record
    /// of its success: the snapshot node had merged its commit into the target and deleted the
    /// snapshot branch, but the store still has it unfinished, so its next run would fail on the
    /// missing branch. With the branch back at that commit the run finds the target up to date
    /// and finishes. Returns the branch restored. Call it while holding the plan's lease.
    pub async fn restore_snapshot_branch(&self, record: &PlanRecord) -> CliResult<Option<String>> {
        use orchestrator_core::{GitOperations, NodeStatus};
        let (Some(repo), Some(snapshot), Some(target)) = (
            &self.git_root,
            &record.state.snapshot_branch,
            &record.state.target_branch,
        ) else {
            return Ok(None);
        };
        let Some(node) = record.state.nodes.get(record.spec.jobs.len()) else {
            return Ok(None);
        };
        let Some(commit) = &node.commit else {
            return Ok(None);
        };
        if node.status == NodeStatus::Succeeded
            || self.git.branch_tip(repo, snapshot).await?.is_some()
        {
            return Ok(None);
        }
        let Some(tip) = self.git.branch_tip(repo, target).await? else {
            return Ok(None);
        };
        if !self.git.is_ancestor(repo, commit, &tip).await? {
            return Ok(None);
        }
        self.git.update_branch(repo, snapshot, commit, None).await?;
        Ok(Some(snapshot.clone()))
    }

    /// Resolves a plan id, or a unique prefix of one.
    pub async fn resolve_plan(&self, arg: &str) -> CliResult<PlanId> {
        let arg = arg.trim();
        let exact = PlanId::from(arg);
        if self.store.plan_dir(&exact).is_some_and(|d| d.is_dir()) {
            return Ok(exact);
        }
        let listing = self.store.list().await?;
        let found: Vec<&PlanId> = listing
            .plans
            .iter()
            .map(|p| &p.plan_id)
            .chain(listing.damaged.iter().map(|(id, _)| id))
            .filter(|id| !arg.is_empty() && id.as_str().starts_with(arg))
            .collect();
        match found.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(CliError::invalid(format!(
                "no plan `{arg}` in {}; `orchestrator list` shows the plans",
                self.store.root().display()
            ))),
            many => Err(CliError::invalid(format!(
                "`{arg}` matches {} plans ({}); give more of the id",
                many.len(),
                many.iter()
                    .map(|id| id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The most recently created plan.
    pub async fn latest_plan(&self) -> CliResult<PlanId> {
        let listing = self.store.list().await?;
        listing
            .plans
            .first()
            .map(|p| p.plan_id.clone())
            .ok_or_else(|| {
                CliError::other(format!(
                    "no plans in {}; create one with `orchestrator run PLAN_FILE`",
                    self.store.root().display()
                ))
            })
    }

    /// The stored record of a plan (as its owner last saved it).
    pub async fn load(&self, id: &PlanId) -> CliResult<PlanRecord> {
        Ok(self.store.load(id).await?)
    }
}

/// Who holds the plan (`process 4242`), when `e` says another process owns it.
pub fn locked_by(e: &orchestrator_core::Error) -> Option<String> {
    match e {
        orchestrator_core::Error::Store(StoreError::Locked { owner, .. }) => Some(owner.clone()),
        _ => None,
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}
