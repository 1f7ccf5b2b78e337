//! The repository a command works on: where its plan store is, and the orchestrator driving it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use orchestrator_agents::agent::{AgentHealer, AgentWorkRunner};
use orchestrator_agents::plugins::{PluginPlaces, Plugins};
use orchestrator_agents::{ProcessRunner, ShellRunner};
use orchestrator_core::redact::SecretNames;
use orchestrator_core::state::PlanRecord;
use orchestrator_core::view::PlanView;
use orchestrator_core::{Orchestrator, OrchestratorOptions, PlanId, PlanRepository, StoreError};
use orchestrator_git::Git2Operations;
use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
use orchestrator_storage::{Durability, FsOptions, FsPlanRepository, MachineSlots};

use crate::cli::{DatabaseArg, RemoteArg};
use crate::error::{CliError, CliResult};

/// Environment variable naming the default agent CLI.
const AGENT_VAR: &str = "ORCHESTRATOR_AGENT";
/// Environment variable naming the agent that heals failed shell/process phases.
const HEAL_AGENT_VAR: &str = "ORCHESTRATOR_HEAL_AGENT";
/// The object store URL parked agents are dehydrated to (default: the store's `blobs/` folder).
const BLOB_STORE_VAR: &str = "ORCHESTRATOR_BLOB_STORE";
/// The PostgreSQL database plans are kept in when a command's `--database` names none.
pub const DATABASE_VAR: &str = "ORCHESTRATOR_DATABASE_URL";
/// The git remote jobs' commits travel through when a command's `--remote` names none.
pub const REMOTE_VAR: &str = "ORCHESTRATOR_REMOTE";
/// How long a plan's or a job's lease lasts without renewal, in seconds (default 30).
pub const LEASE_VAR: &str = "ORCHESTRATOR_LEASE_TIMEOUT";

/// The lease timeout of `ORCHESTRATOR_LEASE_TIMEOUT`, else PostgreSQL's default.
fn lease_timeout() -> CliResult<std::time::Duration> {
    let Some(text) = env_name(LEASE_VAR) else {
        return Ok(PgOptions::default().lease_timeout);
    };
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| {
            CliError::invalid(format!(
                "{LEASE_VAR}={text}: use a number of seconds greater than 0 (default 30)"
            ))
        })
}

/// A non-empty variable's value.
fn env_name(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// The agent runner of plans and sessions: the built-in CLIs, `ORCHESTRATOR_AGENT` (when set)
/// the default agent.
pub fn agent_runner() -> AgentWorkRunner {
    let agents = AgentWorkRunner::new();
    match env_name(AGENT_VAR) {
        Some(name) => agents.default_agent(name),
        None => agents,
    }
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

/// Environment variable: how many jobs may run at once across every `orchestrator` process
/// of the machine that uses the same slot folder, for every command that runs jobs (`run`,
/// `retry`, `resume`, `mcp`); `--machine-slots` overrides it; `0` or empty: no such limit.
pub const MACHINE_SLOTS_VAR: &str = "ORCHESTRATOR_MACHINE_SLOTS";

/// Environment variable: the folder of the machine-wide slot files (default:
/// [`MachineSlots::default_dir`], `$XDG_RUNTIME_DIR/orchestrator/slots`).
pub const SLOTS_DIR_VAR: &str = "ORCHESTRATOR_SLOTS_DIR";

/// The machine-wide capacity asked for: `flag` (`--machine-slots N`), else
/// `ORCHESTRATOR_MACHINE_SLOTS`, in the folder `ORCHESTRATOR_SLOTS_DIR` names (or the default
/// one). `None` when neither asks for a limit (or it is 0).
pub fn machine_slots(flag: Option<usize>) -> CliResult<Option<MachineSlots>> {
    let slots = match flag {
        Some(n) => n,
        None => match std::env::var(MACHINE_SLOTS_VAR) {
            Err(_) => 0,
            Ok(text) if text.trim().is_empty() => 0,
            Ok(text) => text.trim().parse::<usize>().map_err(|_| {
                CliError::invalid(format!(
                    "{MACHINE_SLOTS_VAR}={text}: use a number of jobs (0: no machine-wide limit)"
                ))
            })?,
        },
    };
    if slots == 0 {
        return Ok(None);
    }
    let dir = std::env::var_os(SLOTS_DIR_VAR)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(MachineSlots::default_dir);
    MachineSlots::new(dir, slots)
        .map(Some)
        .map_err(|e| CliError::invalid(format!("machine-wide slots: {e}")))
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
    /// The repository's own store folder, `<git_root or dir>/.orchestrator`: its plans unless
    /// they are kept in a database, and in any case the commands between processes, the
    /// blobs and the sessions.
    pub store: Arc<FsPlanRepository>,
    /// Where the plans are: `store`, or the PostgreSQL database of `--database`
    /// ([`Workspace::with_database`]).
    pub plans: Arc<dyn PlanRepository>,
    /// The database the plans are in, as shown to people (no password), when they are.
    pub database: Option<String>,
    /// That database's store, for its work queue (SPEC §16).
    pub pg: Option<PgPlanRepository>,
    /// The git remote jobs run through on workers ([`Workspace::with_remote`]), when set.
    pub remote: Option<String>,
    /// The git layer.
    pub git: Git2Operations,
    /// The plugins its agent jobs use ([`Workspace::with_plugins`]; none by default).
    pub plugins: Arc<Plugins>,
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
        let store = Arc::new(FsPlanRepository::with_options(
            root.join(STORE_DIR),
            FsOptions::default()
                .durability(durability()?)
                .secret_env(SecretNames::from_env()),
        ));
        Ok(Workspace {
            plans: store.clone(),
            store,
            database: None,
            pg: None,
            remote: None,
            dir,
            git_root,
            git: Git2Operations::new(),
            plugins: Arc::new(Plugins::empty()),
        })
    }

    /// This workspace with its plans in the PostgreSQL database `arg` names (SPEC §16), else
    /// the one of `ORCHESTRATOR_DATABASE_URL`, else as it is. The schema is migrated on the
    /// first connection. A malformed URL is invalid input; a database that does not answer
    /// is an error naming it.
    pub async fn with_database(mut self, arg: &DatabaseArg) -> CliResult<Workspace> {
        let Some(url) = arg.database.clone().or_else(|| env_name(DATABASE_VAR)) else {
            return Ok(self);
        };
        let options = PgOptions::default().lease_timeout(lease_timeout()?);
        let pg = PgPlanRepository::connect(&url, options)
            .await
            .map_err(|e| CliError::from(e).context("--database"))?;
        self.database = Some(pg.location().display().to_string());
        self.plans = Arc::new(pg.clone());
        self.pg = Some(pg);
        Ok(self)
    }

    /// This workspace with its plans' jobs run by workers (SPEC §16), git through the remote
    /// `arg` names, else `ORCHESTRATOR_REMOTE`; as it is when neither does. The plans must be
    /// in a database ([`Workspace::with_database`] first): that is where workers find them.
    pub fn with_remote(mut self, arg: &RemoteArg) -> CliResult<Workspace> {
        let Some(remote) = arg.remote.clone().or_else(|| env_name(REMOTE_VAR)) else {
            return Ok(self);
        };
        if self.pg.is_none() {
            return Err(CliError::invalid(format!(
                "--remote {remote}: jobs run on workers only for plans kept in PostgreSQL; add --database URL (or set {DATABASE_VAR})"
            )));
        }
        self.remote = Some(remote);
        Ok(self)
    }

    /// The database's work queue, its claims lasting `ORCHESTRATOR_LEASE_TIMEOUT`.
    pub fn work_queue(&self) -> Option<orchestrator_storage::pg::PgWorkQueue> {
        self.pg
            .as_ref()
            .map(|pg| pg.work_queue(pg.options().lease_timeout))
    }

    /// Where the plans are, for messages: the database, or the store folder.
    pub fn plans_location(&self) -> String {
        match &self.database {
            Some(db) => db.clone(),
            None => self.store.root().display().to_string(),
        }
    }

    /// This workspace with its plugins loaded (SPEC §15): those of
    /// `<root>/.orchestrator/plugins/`, the user's (`~/.config/orchestrator/plugins/`, or under
    /// `$XDG_CONFIG_HOME`), then each of `dirs` (`--plugins`). What loading left out (a name
    /// met again) is noted on stderr. A malformed plugin is invalid input (exit 2), naming the
    /// file and the field.
    pub fn with_plugins(mut self, dirs: &[PathBuf]) -> CliResult<Workspace> {
        let plugins = load_plugins(self.root(), dirs)?;
        for note in plugins.notes() {
            eprintln!("note: {note}");
        }
        self.plugins = Arc::new(plugins);
        Ok(self)
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
        self.orchestrator_sharing(capacity, None, false)
    }

    /// [`Workspace::orchestrator`] for a command that runs jobs: they also take a machine-wide
    /// slot when `machine_slots` (`--machine-slots`) or, without it, `ORCHESTRATOR_MACHINE_SLOTS`
    /// asks for a limit (see [`machine_slots`]). Its agents get their own durable tools
    /// (SPEC §15) from a tool server on loopback.
    pub fn job_orchestrator(
        &self,
        capacity: usize,
        machine_slots: Option<usize>,
    ) -> CliResult<Orchestrator> {
        self.orchestrator_sharing(capacity, self::machine_slots(machine_slots)?, true)
    }

    fn orchestrator_sharing(
        &self,
        capacity: usize,
        machine: Option<MachineSlots>,
        tools: bool,
    ) -> CliResult<Orchestrator> {
        let store = self.plans.clone();
        let agents = agent_runner().plugins(self.plugins.clone());
        let mut builder = orchestrator_workflows::register(Orchestrator::builder())
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
        if let Some(machine) = machine {
            builder = builder.capacity(machine);
        }
        if let (Some(remote), Some(queue)) = (&self.remote, self.work_queue()) {
            let executor = orchestrator_storage::pg::PgExecutor::new(queue, remote.clone());
            builder = builder.executor(Arc::new(executor));
        }
        if tools {
            let server = orchestrator_agents::tools::ToolServer::start().map_err(|e| {
                CliError::other(format!("cannot start the agents' tool server: {e}"))
            })?;
            builder = builder
                .agent_tools(Arc::new(server))
                .session_archive(self.session_archive()?);
        }
        builder.build().map_err(CliError::from)
    }

    /// Where parked agents are dehydrated to (SPEC §15): the object store URL of
    /// `ORCHESTRATOR_BLOB_STORE` (`file://`, `s3://`, `az://`, `gs://`, `memory://`), else the
    /// store's `blobs/` folder.
    fn session_archive(&self) -> CliResult<Arc<dyn orchestrator_core::tools::SessionArchive>> {
        use orchestrator_storage::blob::{BlobSessions, BlobStore, ObjectBlobStore};
        let store = match env_name(BLOB_STORE_VAR) {
            Some(url) => ObjectBlobStore::from_url(&url)
                .map_err(|e| CliError::invalid(format!("{BLOB_STORE_VAR}=`{url}`: {e}")))?,
            None => ObjectBlobStore::local(self.store.root().join("blobs"))
                .map_err(|e| CliError::other(format!("the session blob store: {e}")))?,
        };
        let store: Arc<dyn BlobStore> = Arc::new(store);
        Ok(Arc::new(BlobSessions::new(store)))
    }

    /// Keeps the store and worktree folders out of `git status` before anything is written.
    pub async fn exclude_own_folders(&self) -> CliResult<()> {
        use orchestrator_core::GitOperations;
        if let Some(root) = &self.git_root {
            self.git.exclude(root, &EXCLUDED).await?;
        }
        Ok(())
    }

    /// Resolves a plan id, or a unique prefix of one.
    pub async fn resolve_plan(&self, arg: &str) -> CliResult<PlanId> {
        let arg = arg.trim();
        let exact = PlanId::from(arg);
        // An exact id without listing every plan of the store.
        let in_folder =
            self.database.is_none() && self.store.plan_dir(&exact).is_some_and(|d| d.is_dir());
        if in_folder {
            return Ok(exact);
        }
        let listing = self.plans.list().await?;
        orchestrator_core::view::find_plan(&listing, arg).map_err(|e| match e {
            orchestrator_core::Error::PlanNotFound(_) => CliError::invalid(format!(
                "no plan `{arg}` in {}; `orchestrator list` shows the plans",
                self.plans_location()
            )),
            e => e.into(),
        })
    }

    /// The most recently created plan.
    pub async fn latest_plan(&self) -> CliResult<PlanId> {
        let listing = self.plans.list().await?;
        listing
            .plans
            .first()
            .map(|p| p.plan_id.clone())
            .ok_or_else(|| {
                CliError::other(format!(
                    "no plans in {}; create one with `orchestrator run PLAN_FILE`",
                    self.plans_location()
                ))
            })
    }

    /// The stored record of a plan (as its owner last saved it).
    pub async fn load(&self, id: &PlanId) -> CliResult<PlanRecord> {
        Ok(self.plans.load(id).await?)
    }

    /// The stored plan as hosts show it ([`PlanView`]: job lookups, labels, renderings).
    pub async fn view(&self, id: &PlanId) -> CliResult<PlanView> {
        Ok(self.load(id).await?.into())
    }
}

/// The plugins of the standard places for the repository at `root`, then of `dirs`
/// (`--plugins`, relative to the current directory). A malformed plugin is invalid input.
pub fn load_plugins(root: &Path, dirs: &[PathBuf]) -> CliResult<Plugins> {
    let places = dirs
        .iter()
        .fold(PluginPlaces::standard(Some(root)), |places, dir| {
            places.dir(dir)
        });
    Ok(places.load()?)
}

/// Who holds the plan (`process 4242`), when `e` says another process owns it.
pub fn locked_by(e: &orchestrator_core::Error) -> Option<String> {
    match e {
        orchestrator_core::Error::Store(StoreError::Locked { owner, .. }) => Some(owner.clone()),
        _ => None,
    }
}
