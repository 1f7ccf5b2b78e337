//! `status`, `list`, `logs` and `graph`: read-only views of the plan store. They never take a
//! plan over, so they work while another process runs it.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use orchestrator_core::repository::LogQuery;
use orchestrator_core::view;
use orchestrator_core::Phase;

use crate::cli::{GraphArgs, GraphFormat, ListArgs, LogsArgs, StatusArgs};
use crate::drive::repo_arg;
use crate::error::{CliError, CliResult, Exit};
use crate::report;
use crate::workspace::Workspace;

/// `status [PLAN_ID]`.
pub async fn status(args: StatusArgs) -> CliResult<Exit> {
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_database(&args.database)
        .await?;
    let id = match &args.plan {
        Some(p) => ws.resolve_plan(p).await?,
        None => ws.latest_plan().await?,
    };
    let record = ws.load(&id).await?;
    if args.json {
        outln!("{}", report::plan_json(&record));
    } else {
        out!("{}", report::plan_text(&record));
        if let Some(hint) = report::hint(&record, &repo_arg(&ws)) {
            outln!("{hint}");
        }
    }
    Ok(Exit::Ok)
}

/// `list`.
pub async fn list(args: ListArgs) -> CliResult<Exit> {
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_database(&args.database)
        .await?;
    let listing = ws.plans.list().await?;
    let damaged: Vec<(String, String)> = listing
        .damaged
        .iter()
        .map(|(id, e)| (id.to_string(), e.to_string()))
        .collect();
    if args.json {
        outln!("{}", report::list_json(&listing.plans, &damaged));
    } else {
        out!("{}", report::list_text(&listing.plans));
    }
    for (id, e) in &damaged {
        eprintln!("warning: plan {id} cannot be read: {e}");
    }
    Ok(Exit::Ok)
}

/// `logs PLAN_ID JOB [--phase PHASE]`.
pub async fn logs(args: LogsArgs) -> CliResult<Exit> {
    let phase = match &args.phase {
        Some(p) => Some(Phase::parse(p).ok_or_else(|| {
            CliError::invalid(format!(
                "--phase {p}: unknown phase; use one of {}",
                Phase::ALL.map(Phase::as_str).join(", ")
            ))
        })?),
        None => None,
    };
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_database(&args.database)
        .await?;
    let id = ws.resolve_plan(&args.plan).await?;
    let view = ws.view(&id).await?;
    let n = view.resolve(&args.job)?;
    let (node, label) = (&view.state.nodes[n], view.label(n));
    let attempt = match args.attempt {
        Some(a) if a == 0 || a as usize > node.attempts.len() => {
            return Err(CliError::invalid(format!(
                "job `{label}` has {} attempt(s); --attempt {a} does not exist",
                node.attempts.len()
            )))
        }
        Some(a) => Some(a),
        None => None,
    };
    let mut query = LogQuery::new();
    if let Some(a) = attempt {
        query = query.attempt(a);
    }
    if let Some(t) = args.tail {
        query = query.tail(t);
    }
    let phases: Vec<Phase> = match phase {
        Some(p) => vec![p],
        None => Phase::ALL.to_vec(),
    };
    let mut printed = false;
    for p in phases {
        let header = phase.is_none().then(|| format!("== {p} ==\n"));
        if ws.database.is_some() {
            // From the database, one phase at a time.
            let text = ws.plans.read_log(&id, &node.id, query.phase(p)).await?;
            if text.is_empty() {
                continue;
            }
            out!("{}{text}", header.unwrap_or_default());
            if !text.ends_with('\n') {
                outln!();
            }
            printed = true;
            continue;
        }
        // Streamed from the files: a log of hundreds of MB is never held in memory.
        let stdout = LogOut::new(header);
        let closed = stdout.closed.clone();
        let copied = match ws
            .store
            .copy_log(&id, &node.id, query.phase(p), stdout)
            .await
        {
            // The reader went away (`orchestrator logs ... | head`): the rest is dropped.
            Err(_) if closed.load(Ordering::Relaxed) => return Ok(Exit::Ok),
            other => other?,
        };
        if copied.bytes == 0 {
            continue;
        }
        if !copied.ends_with_newline {
            outln!();
        }
        printed = true;
    }
    if !printed {
        let which = phase.map_or(String::new(), |p| format!(" in phase {p}"));
        eprintln!(
            "no logs for job `{label}`{which} (status {}, {} attempt(s))",
            node.status,
            node.attempts.len()
        );
    }
    Ok(Exit::Ok)
}

/// Standard output for one phase's log: writes `header` before the first byte of the log (so
/// an empty log prints nothing), and notes when stdout has gone away.
struct LogOut {
    header: Option<String>,
    stdout: std::io::Stdout,
    closed: Arc<AtomicBool>,
}

impl LogOut {
    fn new(header: Option<String>) -> Self {
        LogOut {
            header,
            stdout: std::io::stdout(),
            closed: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl Write for LogOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let written = match self.header.take() {
            Some(header) => self.stdout.write_all(header.as_bytes()),
            None => Ok(()),
        }
        .and_then(|()| self.stdout.write(buf));
        if written.is_err() {
            self.closed.store(true, Ordering::Relaxed);
        }
        written
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stdout.flush()
    }
}

impl Drop for LogOut {
    fn drop(&mut self) {
        let _ = self.stdout.flush();
    }
}

/// `graph PLAN_ID [--format mermaid|dot|gantt]`.
pub async fn graph(args: GraphArgs) -> CliResult<Exit> {
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_database(&args.database)
        .await?;
    let id = ws.resolve_plan(&args.plan).await?;
    let format = match args.format {
        GraphFormat::Mermaid => view::GraphFormat::Mermaid,
        GraphFormat::Dot => view::GraphFormat::Dot,
        GraphFormat::Gantt => view::GraphFormat::Gantt,
    };
    out!("{}", ws.view(&id).await?.render(format)?);
    Ok(Exit::Ok)
}
