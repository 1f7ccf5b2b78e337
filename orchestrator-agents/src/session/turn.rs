//! One turn of a session ([`Sessions::send`]): the CLI run with its hooks (events, steering,
//! permission requests), then the checkpoint, or the way back to the last one.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use orchestrator_core::runner::{LogSink, LogStream, WorkContext};
use orchestrator_core::PlanId;

use super::event::SessionEvent;
use super::files::SessionFiles;
use super::record::{checkpoint_ref, now_ms, Isolation, SessionRecord, TurnRecord, TurnStatus};
use super::sessions::Sessions;
use super::steer::SteerInbox;
use crate::agent::prepare::{base_request, state_dir_of};
use crate::agent::runner::{Hooks, StdinLines};
use crate::agent::{
    AgentRunner, Permission, PermissionPolicy, PermissionRequest, ToolActivity, Transcript,
};
use crate::error::Error;

/// The answer of one turn ([`Sessions::send`]); its JSON is the `--json` of
/// `orchestrator session send`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TurnReport {
    /// The session.
    pub session_id: String,
    /// The turn number.
    pub turn: u32,
    /// The agent's final reply.
    pub reply: Option<String>,
    /// The checkpoint commit (worktree sessions).
    pub checkpoint: Option<String>,
    /// Token usage and cost as the CLI reported them.
    pub usage: Option<serde_json::Value>,
}

/// A permission request waiting for the host's answer: where the answer goes.
pub(super) struct Pending {
    request: PermissionRequest,
    runner: Arc<dyn AgentRunner>,
    stdin: StdinLines,
}

/// Open permission requests by session and request id.
pub(super) type PendingMap = Arc<Mutex<HashMap<(String, String), Pending>>>;

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("request", &self.request)
            .finish()
    }
}

impl Sessions {
    /// Runs one turn: `prompt` to the session's agent, resuming its conversation; the
    /// worktree is checkpointed when the agent answered. A failed turn leaves the worktree
    /// and the conversation as they were at the last checkpoint and answers
    /// [`Error::TurnFailed`].
    pub async fn send(&self, given: &str, prompt: &str) -> Result<TurnReport, Error> {
        let id = self.get(given).await?.id;
        let _lock = self.inner.store.lock(&id).await?;
        let mut record = self.get(&id).await?;
        if record.closed {
            return Err(Error::SessionClosed { id });
        }
        self.settle(&mut record).await?;
        if !record.dir.is_dir() {
            return Err(Error::WorktreeGone {
                id,
                dir: record.dir.clone(),
            });
        }
        let runner = self.runner_of(&record.agent)?;
        let n = record.turns.last().map_or(1, |t| t.turn + 1);
        record.turns.push(TurnRecord {
            turn: n,
            prompt: prompt.to_owned(),
            steered: Vec::new(),
            status: TurnStatus::Running,
            reply: None,
            error: None,
            checkpoint: None,
            cli_session: None,
            model: record.model.clone(),
            effort: record.effort,
            usage: None,
            started_at: now_ms(),
            ended_at: None,
        });
        self.inner.store.save(&record).await?;
        self.emit(SessionEvent::TurnStarted {
            session: id.clone(),
            turn: n,
            prompt: prompt.to_owned(),
        });

        let files = SessionFiles::new(&self.inner.files, &id);
        let resume = record
            .cli_session()
            .map(str::to_owned)
            .filter(|_| state_dir_of(&record.dir, &record.agent).is_dir());
        let mut request = base_request(
            &record.agent,
            runner.as_ref(),
            &record.dir,
            &format!("session-turn-{n}"),
            &[],
            prompt.to_owned(),
        )
        .map_err(|f| Error::TurnFailed {
            id: id.clone(),
            turn: n,
            message: f.message,
        })?;
        request.prompt = prompt.to_owned();
        request.model = record.model.clone();
        request.effort = record.effort;
        request.permissions = record.permissions.clone();
        request.ask_host = runner.asks_host()
            && matches!(
                record.permissions,
                PermissionPolicy::Ask | PermissionPolicy::Rules { .. }
            );
        request.live = runner.live_input();
        request.resume = resume;

        let ctx = self.turn_context(&record, n, &files);
        let inbox = SteerInbox::of(&record.dir);
        let running = inbox.start()?;
        let events = self.inner.events.clone();
        let session = id.clone();
        let hooks = Hooks {
            inbox: Some(inbox),
            on_line: Some(self.line_hook(&record, n, &runner)),
            on_steer: Some(Arc::new(move |message: &str| {
                let _ = events.send(SessionEvent::Steered {
                    session: session.clone(),
                    turn: n,
                    message: message.to_owned(),
                });
            })),
        };
        let mut tried = self
            .inner
            .agents
            .run_steered(&runner, &mut request, &ctx, None, &hooks)
            .await;
        if tried.lost_session {
            request.resume = None;
            tried = self
                .inner
                .agents
                .run_steered(&runner, &mut request, &ctx, None, &hooks)
                .await;
        }
        drop(running);
        // Requests the turn left unanswered have no one to answer them any more.
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(session, _), _| *session != id);
        ctx.log.flush().await;
        let usage = Some(tried.usage.to_json());
        let turn = record.turns.last_mut().ok_or_else(|| Error::NoSuchTurn {
            id: id.clone(),
            turn: n,
            turns: String::new(),
        })?;
        turn.steered = tried.steered.clone();
        turn.reply = tried.reply.clone();
        turn.usage = usage.clone();
        turn.cli_session = tried.usage.session_id.clone().or(request.resume.clone());
        turn.ended_at = Some(now_ms());
        let report = match tried.result {
            Ok(()) => {
                let checkpoint = self.checkpoint(&record, n, &files).await?;
                if let Some(turn) = record.turns.last_mut() {
                    turn.status = TurnStatus::Succeeded;
                    turn.checkpoint = checkpoint.clone();
                }
                self.inner.store.save(&record).await?;
                Ok(TurnReport {
                    session_id: id.clone(),
                    turn: n,
                    reply: tried.reply.clone(),
                    checkpoint,
                    usage: usage.clone(),
                })
            }
            Err((failure, _)) => {
                if let Some(turn) = record.turns.last_mut() {
                    turn.status = TurnStatus::Failed;
                    turn.error = Some(failure.message.clone());
                }
                self.restore_last_good(&record).await?;
                self.inner.store.save(&record).await?;
                Err(Error::TurnFailed {
                    id: id.clone(),
                    turn: n,
                    message: failure.message,
                })
            }
        };
        let last = record.turns.last();
        self.emit(SessionEvent::TurnEnded {
            session: id,
            turn: n,
            status: last.map_or(TurnStatus::Failed, |t| t.status),
            reply: tried.reply,
            checkpoint: last.and_then(|t| t.checkpoint.clone()),
            usage,
        });
        report
    }

    /// The context a turn's CLI runs in: the session's directory, its log appended to the
    /// turn's log file.
    fn turn_context(&self, record: &SessionRecord, n: u32, files: &SessionFiles) -> WorkContext {
        let mut ctx = WorkContext::detached(&record.dir);
        ctx.plan_id = PlanId::from(format!("session-{}", record.id));
        ctx.task = format!("session {} turn {n}", record.id);
        ctx.producer_id = record.id.clone();
        let log_file = files.turn_log(n);
        ctx.log = LogSink::detached().with_writer(Arc::new(move |text: String| {
            let file = log_file.clone();
            Box::pin(async move {
                use tokio::io::AsyncWriteExt;
                if let Some(parent) = file.parent() {
                    let _ = tokio::fs::create_dir_all(parent).await;
                }
                let opened = tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&file)
                    .await;
                if let Ok(mut f) = opened {
                    let _ = f.write_all(text.as_bytes()).await;
                }
            })
        }));
        ctx
    }

    /// The line hook of turn `n`: every line as an [`SessionEvent::Output`], the tool calls
    /// and results the CLI's parser saw, and the agent's text as a [`SessionEvent::Text`]
    /// when it changed.
    fn line_hook(
        &self,
        record: &SessionRecord,
        n: u32,
        runner: &Arc<dyn AgentRunner>,
    ) -> crate::agent::runner::LineHook {
        let events = self.inner.events.clone();
        let pending = self.inner.pending.clone();
        let id = record.id.clone();
        let policy = record.permissions.clone();
        let dir = record.dir.clone();
        let runner = runner.clone();
        let last_text = Mutex::new(None::<String>);
        Arc::new(
            move |stream: LogStream, line: &str, t: &mut Transcript, stdin: Option<&StdinLines>| {
                for request in t.take_permission_requests() {
                    let decision = match request.kind {
                        Some(kind) => policy.decide(kind, &relative(&dir, &request.target)),
                        None => Permission::Ask,
                    };
                    let Some(stdin) = stdin else { continue };
                    if decision == Permission::Ask {
                        pending.lock().unwrap_or_else(|e| e.into_inner()).insert(
                            (id.clone(), request.id.clone()),
                            Pending {
                                request: request.clone(),
                                runner: runner.clone(),
                                stdin: stdin.clone(),
                            },
                        );
                        let _ = events.send(SessionEvent::PermissionRequested {
                            session: id.clone(),
                            turn: n,
                            request,
                        });
                    } else if let Some(reply) = runner.permission_reply(&request, &decision) {
                        let _ = stdin.send(reply);
                    }
                }
                let _ = events.send(SessionEvent::Output {
                    session: id.clone(),
                    turn: n,
                    stream,
                    line: line.to_owned(),
                });
                for activity in t.take_tools() {
                    let event = match activity {
                        ToolActivity::Call { tool, input } => SessionEvent::ToolCall {
                            session: id.clone(),
                            turn: n,
                            tool,
                            input,
                        },
                        ToolActivity::Result {
                            tool,
                            output,
                            is_error,
                        } => SessionEvent::ToolResult {
                            session: id.clone(),
                            turn: n,
                            tool,
                            output,
                            is_error,
                        },
                    };
                    let _ = events.send(event);
                }
                let mut last = last_text.lock().unwrap_or_else(|e| e.into_inner());
                if t.reply.is_some() && *last != t.reply {
                    last.clone_from(&t.reply);
                    let _ = events.send(SessionEvent::Text {
                        session: id.clone(),
                        turn: n,
                        text: t.reply.clone().unwrap_or_default(),
                    });
                }
            },
        )
    }

    /// Commits the worktree of a turn that ended well as `turn-<n>` and keeps the
    /// conversation; `None` for sessions without a worktree.
    async fn checkpoint(
        &self,
        record: &SessionRecord,
        n: u32,
        files: &SessionFiles,
    ) -> Result<Option<String>, Error> {
        if record.isolation == Isolation::None {
            return Ok(None);
        }
        let git = &self.inner.git;
        let message = format!("session {} turn {n}", record.id);
        git.commit_all(&record.dir, &message)
            .await
            .map_err(Self::git_err(format!("cannot checkpoint turn {n}")))?;
        let head = git
            .head(&record.dir)
            .await
            .map_err(Self::git_err(format!("cannot checkpoint turn {n}")))?;
        git.set_ref(&self.inner.repo, &checkpoint_ref(&record.id, n), &head)
            .await
            .map_err(Self::git_err(format!("cannot checkpoint turn {n}")))?;
        files.save_conversation(n, &state_dir_of(&record.dir, &record.agent))?;
        Ok(Some(head))
    }

    /// Brings the worktree and the conversation back to the last successful turn (or the
    /// base).
    async fn restore_last_good(&self, record: &SessionRecord) -> Result<(), Error> {
        self.restore(record, record.current_turn()).await
    }

    /// Brings the worktree and the conversation back to turn `n`.
    pub(super) async fn restore(&self, record: &SessionRecord, n: u32) -> Result<(), Error> {
        if record.isolation == Isolation::None {
            return Ok(());
        }
        let files = SessionFiles::new(&self.inner.files, &record.id);
        if let Some(commit) = record.checkpoint(n) {
            self.inner
                .git
                .reset_worktree(&record.dir, commit)
                .await
                .map_err(Self::git_err(format!("cannot restore turn {n}")))?;
        }
        files.restore_conversation(n, &state_dir_of(&record.dir, &record.agent))
    }

    /// Settles a turn of session `given` that was cut short — its process died, or the host
    /// dropped the `send` future (Ctrl-C): it is recorded as failed, and the worktree and
    /// conversation go back to the last checkpoint. The next `send` does this by itself;
    /// nothing happens when no turn is cut short, or while one runs (the turn lock is held:
    /// [`Error::SessionBusy`]).
    pub async fn recover(&self, given: &str) -> Result<SessionRecord, Error> {
        let id = self.get(given).await?.id;
        let _lock = self.inner.store.lock(&id).await?;
        let mut record = self.get(&id).await?;
        self.settle(&mut record).await?;
        Ok(record)
    }

    /// See [`Sessions::recover`] (the caller holds the turn lock).
    async fn settle(&self, record: &mut SessionRecord) -> Result<(), Error> {
        let mut changed = false;
        for turn in &mut record.turns {
            if turn.status == TurnStatus::Running {
                turn.status = TurnStatus::Failed;
                turn.error = Some("the process running this turn ended before it did".into());
                turn.ended_at = Some(now_ms());
                changed = true;
            }
        }
        if changed {
            if record.dir.is_dir() {
                self.restore_last_good(record).await?;
            }
            self.inner.store.save(record).await?;
        }
        Ok(())
    }

    /// Answers the open permission request `request` of session `session` (a
    /// [`SessionEvent::PermissionRequested`]) with `decision`: [`Permission::Allow`], or
    /// [`Permission::Deny`] with the reason the agent is told. Only the process running the
    /// turn can answer; an unknown or already answered request is
    /// [`Error::UnknownPermissionRequest`].
    pub fn answer_permission(
        &self,
        session: &str,
        request: &str,
        decision: Permission,
    ) -> Result<(), Error> {
        let key = (session.to_owned(), request.to_owned());
        let unknown = || Error::UnknownPermissionRequest {
            id: session.to_owned(),
            request: request.to_owned(),
        };
        let decision = match decision {
            Permission::Ask => return Err(unknown()),
            other => other,
        };
        let pending = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key)
            .ok_or_else(unknown)?;
        let reply = pending
            .runner
            .permission_reply(&pending.request, &decision)
            .ok_or_else(unknown)?;
        pending.stdin.send(reply).map_err(|_| unknown())
    }
}

/// `target` relative to `dir` when it is a path inside it (policies' globs are relative).
fn relative(dir: &Path, target: &str) -> String {
    Path::new(target)
        .strip_prefix(dir)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| target.to_owned())
}
