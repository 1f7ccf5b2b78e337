//! `session new|send|steer|log|revert|fork|list|close` (SPEC §14): the agent sessions of the
//! repository (through [`Sessions`]), and steering of running plan jobs' agents
//! (`PLAN_ID/JOB`, through their worktree's [`SteerInbox`]).

use std::io::Write;
use std::path::PathBuf;
use std::str::FromStr;

use orchestrator_agents::agent::{Permission, PermissionPolicy};
use orchestrator_agents::session::{
    Isolation, NewSession, SessionEvent, SessionRecord, Sessions, SteerInbox, TurnStatus,
};
use orchestrator_core::plan::{Effort, WorkSpec};
use orchestrator_core::{NodeStatus, PlanRepository, PlanStatus};
use serde_json::{json, Value};
use tokio::sync::{broadcast, oneshot};

use crate::cli::{
    DatabaseArg, EffortArg, SessionArgs, SessionCloseArgs, SessionCommand, SessionForkArgs,
    SessionListArgs, SessionLogArgs, SessionNewArgs, SessionRevertArgs, SessionSendArgs,
    SessionSteerArgs,
};
use crate::drive::repo_arg;
use crate::error::{CliError, CliResult, Exit};
use crate::report::{shell_quote, short};
use crate::workspace::{agent_runner, Workspace};

/// Runs a `session` subcommand.
pub async fn session(args: SessionArgs) -> CliResult<Exit> {
    match args.command {
        SessionCommand::New(a) => new(a).await,
        SessionCommand::Send(a) => send(a).await,
        SessionCommand::Steer(a) => steer(a).await,
        SessionCommand::Log(a) => log(a).await,
        SessionCommand::Revert(a) => revert(a).await,
        SessionCommand::Fork(a) => fork(a).await,
        SessionCommand::List(a) => list(a).await,
        SessionCommand::Close(a) => close(a).await,
    }
}

/// The sessions of the workspace's repository: its git layer, the agents plans use
/// (`ORCHESTRATOR_AGENT` the default one), stored in `<repo>/.orchestrator/sessions` — or,
/// when `ORCHESTRATOR_DATABASE_URL` names one, in that PostgreSQL database (SPEC §16; the
/// logs and conversation copies stay under the repository's folder).
pub(crate) async fn sessions_of(ws: &Workspace) -> CliResult<Sessions> {
    let mut builder = Sessions::builder(ws.root())
        .git(ws.git.clone())
        .agents(agent_runner());
    let in_db = ws.clone().with_database(&DatabaseArg::default()).await?;
    if let Some(pg) = in_db.pg {
        builder = builder.store(orchestrator_agents::session::PgSessionRepository::new(pg));
    }
    Ok(builder.build()?)
}

fn effort(arg: EffortArg) -> Effort {
    match arg {
        EffortArg::Low => Effort::Low,
        EffortArg::Medium => Effort::Medium,
        EffortArg::High => Effort::High,
        EffortArg::Xhigh => Effort::Xhigh,
    }
}

/// `PLAN_ID/JOB` split in two, when `given` has that form (session ids have no `/`).
fn plan_job(given: &str) -> Option<(&str, &str)> {
    given
        .split_once('/')
        .filter(|(plan, job)| !plan.is_empty() && !job.is_empty())
}

/// Refuses a plan job's session for a command that needs stored turns.
fn stored_only(given: &str, action: &str) -> CliResult<()> {
    if given.contains('/') {
        let (plan, job) = plan_job(given).unwrap_or((given, ""));
        return Err(CliError::invalid(format!(
            "`{given}` names a plan job's session, which can only be steered \
             (`orchestrator session steer {given} MESSAGE`): plan jobs' sessions have no stored \
             turns, so `session {action}` does not apply to them; the job's log: \
             `orchestrator logs {plan} {job}`"
        )));
    }
    Ok(())
}

/// Prints a session just opened (`new`, `fork`): its id alone on stdout, or the JSON
/// `{"sessionId","worktree"}`; a note on stderr.
fn print_opened(ws: &Workspace, record: &SessionRecord, json: bool, note: &str) {
    if json {
        outln!(
            "{}",
            json!({"sessionId": record.id, "worktree": record.dir.display().to_string()})
        );
    } else {
        outln!("{}", record.id);
    }
    eprintln!(
        "session {} ({}) {note} {}; send it a prompt with: orchestrator session send {} PROMPT{}",
        record.id,
        agent_label(record),
        record.dir.display(),
        record.id,
        repo_arg(ws)
    );
}

/// `session new`.
async fn new(args: SessionNewArgs) -> CliResult<Exit> {
    let permissions = match &args.permissions {
        Some(p) => Some(
            PermissionPolicy::from_str(p)
                .map_err(|e| CliError::invalid(format!("--permissions {p}: {e}")))?,
        ),
        None => None,
    };
    let ws = Workspace::open(args.repo.repo.as_deref())?;
    if !args.no_worktree && ws.git_root.is_none() {
        let what = if ws.is_bare_repository() {
            "is a bare repository (no working tree to take a worktree of)"
        } else {
            "is not in a git repository"
        };
        return Err(CliError::invalid(format!(
            "{} {what}: a session needs a git repository for its worktree; use --no-worktree to \
             work in the folder itself",
            ws.dir.display()
        )));
    }
    ws.exclude_own_folders().await?;
    let sessions = sessions_of(&ws).await?;
    let mut new = NewSession::new();
    if let Some(agent) = args.agent {
        new = new.agent(agent);
    }
    if let Some(model) = args.model {
        new = new.model(model);
    }
    if let Some(e) = args.effort {
        new = new.effort(effort(e));
    }
    if let Some(base) = args.base {
        new = new.base(base);
    }
    if args.no_worktree {
        new = new.no_worktree(ws.root());
    }
    if let Some(policy) = permissions {
        new = new.permissions(policy);
    }
    let record = sessions.create(new).await?;
    let note = match record.isolation {
        Isolation::Worktree => "opened in its worktree",
        _ => "opened, working in",
    };
    print_opened(&ws, &record, args.json, note);
    Ok(Exit::Ok)
}

/// `session send`.
async fn send(args: SessionSendArgs) -> CliResult<Exit> {
    stored_only(&args.session, "send")?;
    let ws = Workspace::open(args.repo.repo.as_deref())?;
    let sessions = sessions_of(&ws).await?;
    let id = sessions.get(&args.session).await?.id;
    if args.model.is_some() || args.effort.is_some() {
        sessions
            .set_model(&id, args.model.clone(), args.effort.map(effort))
            .await?;
    }
    let progress = (!args.quiet).then(|| Progress::spawn(sessions.subscribe(), id.clone()));
    let asks = answer_permissions(&sessions, &id);
    let result = tokio::select! {
        r = sessions.send(&id, &args.prompt) => Some(r),
        () = interrupted() => None,
    };
    asks.abort();
    // The turn's future is gone (and with it the agent's process tree) before anything is
    // reported.
    if let Some(progress) = progress {
        progress.finish().await;
    }
    let report = match result {
        Some(r) => r?,
        None => {
            // The turn's process tree is stopped: record the turn as failed and go back to
            // the last checkpoint now (else the next `send` would).
            let settled = match sessions.recover(&id).await {
                Ok(_) => "it is recorded as failed and the session is back at its last \
                          checkpoint"
                    .to_owned(),
                Err(e) => format!("the next `orchestrator session send {id} ...` settles it ({e})"),
            };
            return Err(CliError {
                exit: Exit::PlanNotSucceeded,
                message: format!("interrupted: the turn of session {id} was stopped; {settled}"),
            });
        }
    };
    if args.json {
        let doc = serde_json::to_value(&report)
            .map_err(|e| CliError::other(format!("cannot write the turn's JSON: {e}")))?;
        outln!("{doc}");
    } else if let Some(reply) = &report.reply {
        if reply.ends_with('\n') {
            out!("{reply}");
        } else {
            outln!("{reply}");
        }
    }
    Ok(Exit::Ok)
}

/// Answers the turn's permission requests (a policy that asks, with an agent that can put
/// its requests to the host): at a terminal the user is asked `allow? [y/N]` on stderr;
/// without one nobody can answer, so they are denied, saying why (the agent is told).
fn answer_permissions(sessions: &Sessions, id: &str) -> tokio::task::JoinHandle<()> {
    use std::io::IsTerminal;
    let mut events = sessions.subscribe();
    let (sessions, id) = (sessions.clone(), id.to_owned());
    tokio::spawn(async move {
        loop {
            let request = match events.recv().await {
                Ok(SessionEvent::PermissionRequested {
                    session, request, ..
                }) if session == id => request,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let what = format!("{} {}", request.tool, request.target);
            let decision = if std::io::stdin().is_terminal() {
                eprint!("the agent asks to use {what}: allow? [y/N] ");
                let answer = tokio::task::spawn_blocking(|| {
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line).map(|_| line)
                })
                .await;
                match answer {
                    Ok(Ok(line)) if matches!(line.trim(), "y" | "Y" | "yes") => Permission::Allow,
                    _ => Permission::deny("the user denied it at the terminal"),
                }
            } else {
                eprintln!("the agent asks to use {what}: denied (no terminal to ask at)");
                Permission::deny(
                    "nobody can answer: `orchestrator session send` asks about tool requests only \
                     when it runs in a terminal",
                )
            };
            if let Err(e) = sessions.answer_permission(&id, &request.id, decision) {
                eprintln!("cannot answer the request: {e}");
            }
        }
    })
}

/// Resolves when the process gets SIGINT or SIGTERM (Ctrl-C elsewhere).
pub(crate) async fn interrupted() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            // Without handlers the signals keep their default action.
            _ => std::future::pending::<()>().await,
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The live progress of a turn on stderr: `turn N started`, the agent's text as it grows,
/// steering messages, how the turn ended.
struct Progress {
    done: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// What the progress printer has printed so far.
#[derive(Default)]
struct Printed {
    text: String,
    line_start: bool,
}

impl Printed {
    fn write(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(s.as_bytes()).and_then(|()| err.flush());
        self.line_start = s.ends_with('\n');
    }

    fn line(&mut self, s: &str) {
        if !self.line_start {
            self.write("\n");
        }
        self.write(&format!("{s}\n"));
    }

    fn show(&mut self, event: SessionEvent, id: &str) {
        match event {
            SessionEvent::TurnStarted { session, turn, .. } if session == id => {
                self.text.clear();
                self.line(&format!("turn {turn} started"));
            }
            SessionEvent::Text { session, text, .. } if session == id => {
                let new = match text.strip_prefix(self.text.as_str()) {
                    Some(rest) if !self.text.is_empty() => rest.to_owned(),
                    _ => {
                        if !self.line_start {
                            self.write("\n");
                        }
                        text.clone()
                    }
                };
                self.write(&new);
                self.text = text;
            }
            SessionEvent::Steered {
                session, message, ..
            } if session == id => {
                self.line(&format!(
                    "steered: {}",
                    message.lines().next().unwrap_or("")
                ));
            }
            SessionEvent::TurnEnded {
                session,
                turn,
                status,
                checkpoint,
                ..
            } if session == id => match status {
                TurnStatus::Succeeded => self.line(&match checkpoint {
                    Some(c) => format!("turn {turn} succeeded (checkpoint {})", short(&c)),
                    None => format!("turn {turn} succeeded"),
                }),
                TurnStatus::Failed => self.line(&format!(
                    "turn {turn} failed; the session is back at its last checkpoint"
                )),
                _ => {}
            },
            _ => {}
        }
    }
}

impl Progress {
    fn spawn(mut events: broadcast::Receiver<SessionEvent>, id: String) -> Progress {
        let (done, mut finished) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut printed = Printed {
                line_start: true,
                ..Printed::default()
            };
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Ok(event) => printed.show(event, &id),
                        Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => break,
                    },
                    _ = &mut finished => {
                        loop {
                            match events.try_recv() {
                                Ok(event) => printed.show(event, &id),
                                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                                Err(_) => break,
                            }
                        }
                        break;
                    }
                }
            }
            if !printed.line_start {
                printed.write("\n");
            }
        });
        Progress { done, task }
    }

    /// Prints what is left and stops.
    async fn finish(self) {
        let _ = self.done.send(());
        let _ = self.task.await;
    }
}

/// `session steer`.
async fn steer(args: SessionSteerArgs) -> CliResult<Exit> {
    if args.message.trim().is_empty() {
        return Err(CliError::invalid("the steering message is empty"));
    }
    let ws = Workspace::open(args.repo.repo.as_deref())?;
    if let Some((plan, job)) = plan_job(&args.session) {
        return steer_plan_job(&ws, plan, job, &args.message).await;
    }
    if args.session.contains('/') {
        return Err(CliError::invalid(format!(
            "`{}`: name a plan job as PLAN_ID/JOB",
            args.session
        )));
    }
    let sessions = sessions_of(&ws).await?;
    let id = sessions.get(&args.session).await?.id;
    sessions.steer(&id, &args.message).await?;
    outln!("steered session {id}: its agent is interrupted and resumed with the message");
    Ok(Exit::Ok)
}

/// The folder a plan job's agent works in: its worktree, or the plan's folder for
/// `isolation: none` plans.
fn job_dir(record: &orchestrator_core::state::PlanRecord, n: usize) -> Option<PathBuf> {
    let node = record.state.nodes.get(n)?;
    node.extra.worktree.clone().or_else(|| {
        (record.isolation() == orchestrator_core::plan::Isolation::None)
            .then(|| record.state.repo.clone())
    })
}

/// `session steer PLAN_ID/JOB MESSAGE`: into the job's worktree's steering inbox.
async fn steer_plan_job(ws: &Workspace, plan: &str, job: &str, message: &str) -> CliResult<Exit> {
    let id = ws.resolve_plan(plan).await?;
    let view = ws.view(&id).await?;
    let n = view.resolve(job)?;
    let label = view.label(n).to_owned();
    let status = view
        .state
        .nodes
        .get(n)
        .map_or_else(|| "unknown".to_owned(), |node| node.status.to_string());
    let not_running = || {
        CliError::invalid(format!(
            "job `{label}` of plan {id} has no agent running (job status {status}); steer it \
             while its agent works (`orchestrator session list` shows the running ones)"
        ))
    };
    let inbox = SteerInbox::of(job_dir(view.record(), n).ok_or_else(not_running)?);
    let pid = inbox.runner_pid().ok_or_else(not_running)?;
    match inbox.post(&format!("{id}/{label}"), message) {
        Ok(()) => {}
        Err(orchestrator_agents::Error::NotRunning { .. }) => return Err(not_running()),
        Err(e) => return Err(e.into()),
    }
    outln!(
        "steered job `{label}` of plan {id} (run by process {pid}): its agent is interrupted \
         and resumed with the message"
    );
    Ok(Exit::Ok)
}

/// The first line of `text`, at most `max` characters.
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

/// Whether an agent runs in the session's folder now.
fn running(record: &SessionRecord) -> bool {
    !record.closed && SteerInbox::of(&record.dir).runner_pid().is_some()
}

/// `session log`.
async fn log(args: SessionLogArgs) -> CliResult<Exit> {
    stored_only(&args.session.session, "log")?;
    let ws = Workspace::open(args.session.repo.repo.as_deref())?;
    let sessions = sessions_of(&ws).await?;
    let record = sessions.get(&args.session.session).await?;
    if args.json {
        let turns = serde_json::to_value(&record.turns)
            .map_err(|e| CliError::other(format!("cannot write the turns' JSON: {e}")))?;
        outln!("{}", json!({"sessionId": record.id, "turns": turns}));
        return Ok(Exit::Ok);
    }
    let state = if record.closed {
        "closed"
    } else if running(&record) {
        "running"
    } else {
        "open"
    };
    outln!(
        "session {} ({}, {state}) in {}",
        record.id,
        agent_label(&record),
        record.dir.display()
    );
    if record.turns.is_empty() {
        outln!(
            "no turns yet; send one with: orchestrator session send {} PROMPT{}",
            record.id,
            repo_arg(&ws)
        );
        return Ok(Exit::Ok);
    }
    let alive = running(&record);
    let rows: Vec<[String; 5]> = record
        .turns
        .iter()
        .map(|t| {
            let status = match t.status {
                TurnStatus::Succeeded => "succeeded",
                TurnStatus::Failed => "failed",
                // Its process died: the next `send` records it as failed.
                TurnStatus::Running if !alive => "stopped",
                _ => "running",
            };
            [
                t.turn.to_string(),
                status.to_owned(),
                t.checkpoint.as_deref().map(short).unwrap_or("-").to_owned(),
                first_line(&t.prompt, 40),
                t.reply
                    .as_deref()
                    .or(t.error.as_deref())
                    .map(|r| first_line(r, 60))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    out!(
        "{}",
        table(&["TURN", "STATUS", "CHECKPOINT", "PROMPT", "REPLY"], &rows)
    );
    Ok(Exit::Ok)
}

/// A plain-text table: a header and rows, columns padded to their widest cell.
fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == N {
                out.push_str(cell);
            } else {
                out.push_str(cell);
                let pad = widths[i].saturating_sub(cell.chars().count()) + 2;
                out.push_str(&" ".repeat(pad));
            }
        }
        text.push_str(out.trim_end());
        text.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    text
}

/// `session revert`.
async fn revert(args: SessionRevertArgs) -> CliResult<Exit> {
    stored_only(&args.session.session, "revert")?;
    let ws = Workspace::open(args.session.repo.repo.as_deref())?;
    let sessions = sessions_of(&ws).await?;
    let record = sessions.revert(&args.session.session, args.turn).await?;
    let at = record
        .checkpoint(args.turn)
        .map(|c| format!(" (checkpoint {})", short(c)))
        .unwrap_or_default();
    outln!(
        "session {} is back at turn {}{at}; the next turn continues from there",
        record.id,
        args.turn
    );
    Ok(Exit::Ok)
}

/// `session fork`.
async fn fork(args: SessionForkArgs) -> CliResult<Exit> {
    stored_only(&args.session.session, "fork")?;
    let ws = Workspace::open(args.session.repo.repo.as_deref())?;
    let sessions = sessions_of(&ws).await?;
    let record = sessions.fork(&args.session.session, args.turn).await?;
    let note = match &record.forked_from {
        Some((from, turn)) => format!("forked from {from} at turn {turn}, in"),
        None => "forked, in".to_owned(),
    };
    print_opened(&ws, &record, args.json, &note);
    Ok(Exit::Ok)
}

/// `session close`.
async fn close(args: SessionCloseArgs) -> CliResult<Exit> {
    stored_only(&args.session.session, "close")?;
    let ws = Workspace::open(args.session.repo.repo.as_deref())?;
    let sessions = sessions_of(&ws).await?;
    let id = sessions.get(&args.session.session).await?.id;
    let tip = sessions.close(&id, args.merge.as_deref()).await?;
    if let (Some(branch), Some(tip)) = (&args.merge, &tip) {
        outln!("merged session {id} onto {branch} (now at {})", short(tip));
    }
    outln!("session {id} closed; its worktree is removed, its checkpoints stay");
    Ok(Exit::Ok)
}

/// One row of `session list`.
struct Listed {
    id: String,
    kind: &'static str,
    agent: String,
    model: Option<String>,
    turns: usize,
    status: &'static str,
    worktree: Option<PathBuf>,
}

impl Listed {
    fn json(&self) -> Value {
        json!({
            "sessionId": self.id,
            "kind": self.kind,
            "agent": self.agent,
            "model": self.model,
            "turns": self.turns,
            "status": self.status,
            "worktree": self.worktree.as_ref().map(|w| w.display().to_string()),
        })
    }
}

/// `session list`.
async fn list(args: SessionListArgs) -> CliResult<Exit> {
    let ws = Workspace::open(args.repo.repo.as_deref())?;
    let sessions = sessions_of(&ws).await?;
    let mut rows: Vec<Listed> = sessions
        .list()
        .await?
        .into_iter()
        .map(|r| Listed {
            status: if r.closed {
                "closed"
            } else if running(&r) {
                "running"
            } else {
                "open"
            },
            id: r.id,
            kind: "session",
            agent: r.agent,
            model: r.model,
            turns: r.turns.len(),
            worktree: (!r.closed).then_some(r.dir),
        })
        .collect();
    rows.extend(plan_jobs(&ws).await?);
    if args.json {
        let doc = Value::Array(rows.iter().map(Listed::json).collect());
        outln!("{doc}");
        return Ok(Exit::Ok);
    }
    if rows.is_empty() {
        outln!(
            "no sessions; open one with: orchestrator session new{}",
            repo_arg(&ws)
        );
        return Ok(Exit::Ok);
    }
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.id.clone(),
                r.kind.to_owned(),
                r.agent.clone(),
                r.model.clone().unwrap_or_else(|| "-".into()),
                r.turns.to_string(),
                r.status.to_owned(),
                r.worktree
                    .as_ref()
                    .map(|w| shell_quote(&w.display().to_string()))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    out!(
        "{}",
        table(
            &["SESSION", "KIND", "AGENT", "MODEL", "TURNS", "STATUS", "WORKTREE"],
            &cells
        )
    );
    Ok(Exit::Ok)
}

/// The agent jobs running in the repository's running plans, as `PLAN_ID/JOB` rows.
async fn plan_jobs(ws: &Workspace) -> CliResult<Vec<Listed>> {
    let listing = ws.store.list().await?;
    let default_agent = agent_runner().default_agent_name().to_owned();
    let mut rows = Vec::new();
    for summary in &listing.plans {
        if !matches!(summary.status, PlanStatus::Running | PlanStatus::Pausing) {
            continue;
        }
        // A plan that cannot be read now (being written, removed) is left out.
        let Ok(record) = ws.load(&summary.plan_id).await else {
            continue;
        };
        let view = orchestrator_core::view::PlanView::new(record);
        for (n, node) in view.state.nodes.iter().enumerate() {
            if node.status != NodeStatus::Running {
                continue;
            }
            let Some(WorkSpec::Agent(agent)) = view.job(n).map(|j| &j.work) else {
                continue;
            };
            let dir = job_dir(view.record(), n);
            let active = dir
                .as_ref()
                .is_some_and(|d| SteerInbox::of(d).runner_pid().is_some());
            rows.push(Listed {
                id: format!("{}/{}", summary.plan_id, view.label(n)),
                kind: "plan-job",
                agent: agent.agent.clone().unwrap_or_else(|| default_agent.clone()),
                model: agent.model.clone(),
                turns: 0,
                status: if active { "running" } else { "open" },
                worktree: dir,
            });
        }
    }
    Ok(rows)
}

/// `agent` or `agent, model M`, for the lines that name a session.
fn agent_label(record: &SessionRecord) -> String {
    match &record.model {
        Some(model) => format!("{}, model {model}", record.agent),
        None => record.agent.clone(),
    }
}
