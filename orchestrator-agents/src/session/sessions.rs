//! [`Sessions`]: opening, running and keeping agent sessions of one repository.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use orchestrator_core::git::{GitOperations, MergeStyle};
use orchestrator_core::plan::Effort;
use tokio::sync::broadcast;

use super::event::SessionEvent;
use super::files::SessionFiles;
use super::record::{checkpoint_ref, Isolation, SessionRecord, TurnStatus};
use super::repository::{FileSessionRepository, SessionRepository};
use super::steer::SteerInbox;
use super::turn::PendingMap;
use crate::agent::prepare::state_dir_of;
use crate::agent::{AgentRunner, AgentWorkRunner, PermissionPolicy};
use crate::error::Error;

/// How many events a slow subscriber may fall behind before it misses some.
const EVENT_CAPACITY: usize = 1024;

/// What a new session is made of ([`Sessions::create`]).
///
/// ```
/// use orchestrator_agents::session::{Isolation, NewSession};
/// let s = NewSession::new().agent("claude").model("claude-sonnet-4.5").base("main");
/// assert_eq!(s.isolation, Isolation::Worktree);
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct NewSession {
    /// The agent (default: the runner's default agent).
    pub agent: Option<String>,
    /// The model (default: the CLI's).
    pub model: Option<String>,
    /// The effort.
    pub effort: Option<Effort>,
    /// The revision the worktree starts at (default `HEAD`).
    pub base: Option<String>,
    /// Worktree (default) or none.
    pub isolation: Isolation,
    /// With [`Isolation::None`]: the directory to work in (default: the repository).
    pub dir: Option<PathBuf>,
    /// Which tool requests the agent may make (default allow-all).
    pub permissions: PermissionPolicy,
}

impl NewSession {
    /// The defaults.
    pub fn new() -> Self {
        NewSession::default()
    }
    /// Sets the agent.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }
    /// Sets the model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }
    /// Sets the effort.
    pub fn effort(mut self, effort: Effort) -> Self {
        self.effort = Some(effort);
        self
    }
    /// Sets the base revision.
    pub fn base(mut self, rev: impl Into<String>) -> Self {
        self.base = Some(rev.into());
        self
    }
    /// Works in `dir` as it is: no worktree, no checkpoints.
    pub fn no_worktree(mut self, dir: impl Into<PathBuf>) -> Self {
        self.isolation = Isolation::None;
        self.dir = Some(dir.into());
        self
    }
    /// Sets the permission policy.
    pub fn permissions(mut self, policy: PermissionPolicy) -> Self {
        self.permissions = policy;
        self
    }
}

/// The agent sessions of one repository (SPEC §14): each a conversation of one agent CLI in
/// its own worktree, turn by turn, checkpointed after every turn under
/// `refs/orchestrator/sessions/<id>/turn-<n>`, stored in a [`SessionRepository`] so a later
/// process goes on where an earlier one stopped.
///
/// ```no_run
/// # async fn run() -> Result<(), orchestrator_agents::Error> {
/// use orchestrator_agents::session::{NewSession, Sessions};
/// let sessions = Sessions::builder("/work/repo")
///     .git(orchestrator_git::Git2Operations::new())
///     .build()?;
/// let s = sessions.create(NewSession::new().agent("claude")).await?;
/// let turn = sessions.send(&s.id, "Add a README").await?;
/// println!("{:?} at {:?}", turn.reply, turn.checkpoint);
/// sessions.revert(&s.id, 0).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Sessions {
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) repo: PathBuf,
    pub(super) store: Arc<dyn SessionRepository>,
    pub(super) git: Arc<dyn GitOperations>,
    pub(super) agents: AgentWorkRunner,
    pub(super) files: PathBuf,
    pub(super) worktrees: PathBuf,
    pub(super) events: broadcast::Sender<SessionEvent>,
    pub(super) pending: PendingMap,
}

/// Builds [`Sessions`]: the repository, a [`GitOperations`] (required), the agents, the
/// store and where worktrees and files go.
#[derive(Debug)]
pub struct SessionsBuilder {
    repo: PathBuf,
    store: Option<Arc<dyn SessionRepository>>,
    git: Option<Arc<dyn GitOperations>>,
    agents: Option<AgentWorkRunner>,
    files: Option<PathBuf>,
    worktrees: Option<PathBuf>,
}

impl SessionsBuilder {
    /// The git layer (e.g. `orchestrator_git::Git2Operations::new()`).
    pub fn git(self, git: impl GitOperations) -> Self {
        self.git_arc(Arc::new(git))
    }
    /// A shared git layer.
    pub fn git_arc(mut self, git: Arc<dyn GitOperations>) -> Self {
        self.git = Some(git);
        self
    }
    /// The agents (default: [`AgentWorkRunner::new`], the four built-in CLIs).
    pub fn agents(mut self, agents: AgentWorkRunner) -> Self {
        self.agents = Some(agents);
        self
    }
    /// The store (default: [`FileSessionRepository::for_repo`]).
    pub fn store(mut self, store: impl SessionRepository) -> Self {
        self.store = Some(Arc::new(store));
        self
    }
    /// Where each session's logs and conversation copies go (default
    /// `<repo>/.orchestrator/sessions`).
    pub fn files(mut self, dir: impl Into<PathBuf>) -> Self {
        self.files = Some(dir.into());
        self
    }
    /// Where session worktrees go (default `<repo>/.worktrees/sessions`).
    pub fn worktree_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.worktrees = Some(dir.into());
        self
    }

    /// The sessions; an error when no git layer was given or the repository is not a folder.
    pub fn build(self) -> Result<Sessions, Error> {
        let git = self.git.ok_or(Error::NoGitLayer)?;
        let repo = std::fs::canonicalize(&self.repo).map_err(|source| Error::SessionStore {
            path: self.repo.clone(),
            source,
        })?;
        let files = self
            .files
            .unwrap_or_else(|| repo.join(".orchestrator").join("sessions"));
        let worktrees = self
            .worktrees
            .unwrap_or_else(|| repo.join(".worktrees").join("sessions"));
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(FileSessionRepository::new(files.clone())));
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        Ok(Sessions {
            inner: Arc::new(Inner {
                repo,
                store,
                git,
                agents: self.agents.unwrap_or_default(),
                files,
                worktrees,
                events,
                pending: PendingMap::default(),
            }),
        })
    }
}

impl Sessions {
    /// A builder for the sessions of the repository at `repo`.
    pub fn builder(repo: impl Into<PathBuf>) -> SessionsBuilder {
        SessionsBuilder {
            repo: repo.into(),
            store: None,
            git: None,
            agents: None,
            files: None,
            worktrees: None,
        }
    }

    /// Every event of every turn run through these sessions, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.inner.events.subscribe()
    }

    /// The repository.
    pub fn repo(&self) -> &Path {
        &self.inner.repo
    }

    pub(super) fn emit(&self, event: SessionEvent) {
        let _ = self.inner.events.send(event);
    }

    pub(super) fn git_err(
        what: impl Into<String>,
    ) -> impl FnOnce(orchestrator_core::git::GitError) -> Error {
        let what = what.into();
        move |source| Error::SessionGit { what, source }
    }

    /// Every stored session, oldest first.
    pub async fn list(&self) -> Result<Vec<SessionRecord>, Error> {
        self.inner.store.list().await
    }

    /// The session `given`: its id or a unique prefix of one.
    pub async fn get(&self, given: &str) -> Result<SessionRecord, Error> {
        if let Some(record) = self.inner.store.load(given).await? {
            return Ok(record);
        }
        let all = self.inner.store.list().await?;
        let fits: Vec<&SessionRecord> = all.iter().filter(|r| r.id.starts_with(given)).collect();
        match fits.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(Error::UnknownSession {
                given: given.to_owned(),
                known: all
                    .iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
            many => Err(Error::AmbiguousSession {
                given: given.to_owned(),
                matches: many
                    .iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Opens a new session: its worktree at the base revision (checkpoint `turn-0`), or the
    /// directory with [`Isolation::None`].
    pub async fn create(&self, new: NewSession) -> Result<SessionRecord, Error> {
        let agent = new
            .agent
            .clone()
            .unwrap_or_else(|| self.inner.agents.default_agent_name().to_owned());
        self.runner_of(&agent)?;
        let id = new_id();
        let (dir, base) = match new.isolation {
            Isolation::Worktree => {
                let rev = new.base.as_deref().unwrap_or("HEAD");
                let base = self.start_worktree(&id, rev).await?;
                (self.inner.worktrees.join(&id), Some(base))
            }
            _ => {
                let dir = new.dir.clone().unwrap_or_else(|| self.inner.repo.clone());
                if !dir.is_dir() {
                    return Err(Error::WorktreeGone { id, dir });
                }
                (dir, None)
            }
        };
        let mut record = SessionRecord::new(&id, agent, self.inner.repo.clone(), dir);
        record.model = new.model;
        record.effort = new.effort;
        record.isolation = new.isolation;
        record.base = base;
        record.permissions = new.permissions;
        self.inner.store.create(&record).await?;
        Ok(record)
    }

    /// The runner of `agent`, or [`Error::UnknownAgent`] naming the registered ones.
    pub(super) fn runner_of(&self, agent: &str) -> Result<Arc<dyn AgentRunner>, Error> {
        if let Some(runner) = self.inner.agents.agent(agent) {
            return Ok(runner.clone());
        }
        Err(Error::UnknownAgent {
            agent: agent.to_owned(),
            known: self
                .inner
                .agents
                .agent_names()
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Creates the worktree of session `id` at `rev` and its `turn-0` ref; returns the commit.
    async fn start_worktree(&self, id: &str, rev: &str) -> Result<String, Error> {
        let git = &self.inner.git;
        let repo = &self.inner.repo;
        let base = git.resolve(repo, rev).await.map_err(Self::git_err(format!(
            "cannot resolve the base revision `{rev}`"
        )))?;
        self.worktree_at(id, &base).await?;
        git.set_ref(repo, &checkpoint_ref(id, 0), &base)
            .await
            .map_err(Self::git_err("cannot write the base checkpoint"))?;
        Ok(base)
    }

    /// Creates the worktree of session `id` at `commit`.
    async fn worktree_at(&self, id: &str, commit: &str) -> Result<PathBuf, Error> {
        let git = &self.inner.git;
        let repo = &self.inner.repo;
        let root = &self.inner.worktrees;
        std::fs::create_dir_all(root).map_err(|source| Error::SessionStore {
            path: root.clone(),
            source,
        })?;
        git.allow_worktree_root(root)
            .map_err(Self::git_err("cannot use the session worktree root"))?;
        git.exclude(repo, &["/.orchestrator/", "/.worktrees/"])
            .await
            .map_err(Self::git_err(
                "cannot exclude the session folders from git status",
            ))?;
        let dir = root.join(id);
        git.create_worktree(repo, &dir, commit)
            .await
            .map_err(Self::git_err(format!(
                "cannot create the worktree of session {id}"
            )))?;
        Ok(dir)
    }

    /// Hands `message` to the session's running turn; [`Error::NotRunning`] when no turn
    /// runs.
    pub async fn steer(&self, given: &str, message: &str) -> Result<(), Error> {
        let record = self.get(given).await?;
        SteerInbox::of(&record.dir).post(&record.id, message)
    }

    /// Switches the model and effort for the next turns (`None` leaves one as it is).
    pub async fn set_model(
        &self,
        given: &str,
        model: Option<String>,
        effort: Option<Effort>,
    ) -> Result<SessionRecord, Error> {
        let id = self.get(given).await?.id;
        let _lock = self.inner.store.lock(&id).await?;
        let mut record = self.get(&id).await?;
        if record.closed {
            return Err(Error::SessionClosed { id });
        }
        if model.is_some() {
            record.model = model;
        }
        if effort.is_some() {
            record.effort = effort;
        }
        self.inner.store.save(&record).await?;
        Ok(record)
    }

    fn checked_turn(
        record: &SessionRecord,
        turn: u32,
        action: &'static str,
    ) -> Result<String, Error> {
        if record.isolation == Isolation::None {
            return Err(Error::NoCheckpoints {
                id: record.id.clone(),
                action,
            });
        }
        record
            .checkpoint(turn)
            .map(str::to_owned)
            .ok_or_else(|| Error::NoSuchTurn {
                id: record.id.clone(),
                turn,
                turns: record.turn_numbers(),
            })
    }

    /// Goes back to turn `turn`: the worktree as its checkpoint, the conversation as it was
    /// after it; the turns after it are dropped (and their refs deleted).
    pub async fn revert(&self, given: &str, turn: u32) -> Result<SessionRecord, Error> {
        let id = self.get(given).await?.id;
        let _lock = self.inner.store.lock(&id).await?;
        let mut record = self.get(&id).await?;
        if record.closed {
            return Err(Error::SessionClosed { id });
        }
        Self::checked_turn(&record, turn, "revert")?;
        if !record.dir.is_dir() {
            return Err(Error::WorktreeGone {
                id,
                dir: record.dir.clone(),
            });
        }
        self.restore(&record, turn).await?;
        let dropped: Vec<u32> = record
            .turns
            .iter()
            .filter(|t| t.turn > turn)
            .map(|t| t.turn)
            .collect();
        for n in dropped {
            self.inner
                .git
                .delete_ref(&self.inner.repo, &checkpoint_ref(&id, n))
                .await
                .map_err(Self::git_err(format!(
                    "cannot drop the checkpoint of turn {n}"
                )))?;
        }
        record.turns.retain(|t| t.turn <= turn);
        SessionFiles::new(&self.inner.files, &id).drop_after(turn)?;
        self.inner.store.save(&record).await?;
        Ok(record)
    }

    /// Starts a new session from turn `turn` (default: the last successful one) of `given`:
    /// a worktree of its own at that checkpoint, and a copy of the conversation after it.
    pub async fn fork(&self, given: &str, turn: Option<u32>) -> Result<SessionRecord, Error> {
        let source = self.get(given).await?;
        let turn = turn.unwrap_or_else(|| source.current_turn());
        let commit = Self::checked_turn(&source, turn, "fork")?;
        if !source.dir.is_dir() {
            return Err(Error::WorktreeGone {
                id: source.id.clone(),
                dir: source.dir.clone(),
            });
        }
        let id = new_id();
        let dir = self.worktree_at(&id, &commit).await?;
        let mut record = SessionRecord::new(&id, &source.agent, self.inner.repo.clone(), dir);
        record.model = source.model.clone();
        record.effort = source.effort;
        record.permissions = source.permissions.clone();
        record.base = source.base.clone();
        record.forked_from = Some((source.id.clone(), turn));
        record.turns = source
            .turns
            .iter()
            .filter(|t| t.turn <= turn && t.status == TurnStatus::Succeeded)
            .cloned()
            .collect();
        let git = &self.inner.git;
        for n in std::iter::once(0).chain(record.turns.iter().map(|t| t.turn)) {
            if let Some(commit) = record.checkpoint(n) {
                git.set_ref(&self.inner.repo, &checkpoint_ref(&id, n), commit)
                    .await
                    .map_err(Self::git_err(format!(
                        "cannot copy the checkpoint of turn {n}"
                    )))?;
            }
        }
        let from = SessionFiles::new(&self.inner.files, &source.id);
        let to = SessionFiles::new(&self.inner.files, &id);
        from.copy_conversation(turn, &to)?;
        self.inner.store.create(&record).await?;
        let state = state_dir_of(&record.dir, &record.agent);
        to.restore_conversation(turn, &state)?;
        if state.is_dir() {
            super::files::relocate(&state, &source.dir, &record.dir).map_err(|source| {
                Error::SessionStore {
                    path: state.clone(),
                    source,
                }
            })?;
        }
        if let Some(runner) = self.inner.agents.agent(&record.agent) {
            runner.relocate_state(&state, &source.dir, &record.dir);
        }
        // Keep the relocated copy as the fork's own turn, for a later revert to it.
        to.save_conversation(turn, &state)?;
        Ok(record)
    }

    /// Closes the session: with `merge`, its last checkpoint is first merged onto that branch
    /// (created there when missing); the worktree is removed, the checkpoints stay. Returns
    /// the branch's new tip when merged.
    pub async fn close(&self, given: &str, merge: Option<&str>) -> Result<Option<String>, Error> {
        let id = self.get(given).await?.id;
        let _lock = self.inner.store.lock(&id).await?;
        let mut record = self.get(&id).await?;
        if record.closed {
            return Err(Error::SessionClosed { id });
        }
        let git = &self.inner.git;
        let repo = &self.inner.repo;
        let mut tip = None;
        if let Some(branch) = merge {
            let commit = Self::checked_turn(&record, record.current_turn(), "merge")?;
            let existing = git
                .branch_tip(repo, branch)
                .await
                .map_err(Self::git_err(format!("cannot read branch {branch}")))?;
            tip = Some(match existing {
                None => {
                    git.update_branch(repo, branch, &commit, None)
                        .await
                        .map_err(Self::git_err(format!("cannot create branch {branch}")))?;
                    commit
                }
                Some(_) => {
                    let message = format!("Merge session {id} into {branch}");
                    git.merge_into_branch(repo, branch, &commit, &message, MergeStyle::FastForward)
                        .await
                        .map_err(Self::git_err(format!(
                            "cannot merge session {id} into {branch}"
                        )))?
                }
            });
        }
        if record.isolation == Isolation::Worktree && record.dir.exists() {
            git.remove_worktree(repo, &record.dir)
                .await
                .map_err(Self::git_err(format!(
                    "cannot remove the worktree of session {id}"
                )))?;
        }
        record.closed = true;
        self.inner.store.save(&record).await?;
        Ok(tip)
    }
}

/// A new session id: `s-` and 12 hex digits from the clock, the process and a counter.
fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mixed = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mixed = mixed.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    format!("s-{:012x}", mixed >> 16)
}
