//! `worker`: runs jobs of plans coordinated elsewhere (SPEC §16).

use std::path::PathBuf;
use std::sync::Arc;

use orchestrator_storage::pg::PgWorker;
use tokio_util::sync::CancellationToken;

use crate::cli::WorkerArgs;
use crate::error::{CliError, CliResult, Exit};
use crate::workspace::{Workspace, DATABASE_VAR};

/// The folder the workers of this machine share by default.
fn default_dir() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("orchestrator").join("workers")
}

/// `worker --database URL [--slots N] [--dir DIR] [--name NAME]`.
pub async fn worker(args: WorkerArgs) -> CliResult<Exit> {
    if args.slots == 0 {
        return Err(CliError::invalid(
            "--slots 0: a worker runs at least 1 job at once",
        ));
    }
    let dir = match &args.dir {
        Some(d) => std::path::absolute(d)
            .map_err(|e| CliError::invalid(format!("--dir {}: {e}", d.display())))?,
        None => default_dir(),
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::invalid(format!("--dir {}: {e}", dir.display())))?;
    let ws = Workspace::open(Some(&dir))?
        .with_database(&args.database)
        .await?;
    let Some(queue) = ws.work_queue() else {
        return Err(CliError::invalid(format!(
            "a worker claims jobs from a database: give --database URL (or set {DATABASE_VAR})"
        )));
    };
    let o = ws.orchestrator(args.slots)?;
    let mut worker = PgWorker::new(queue, o, Arc::new(ws.git.clone())).slots(args.slots);
    if let Some(name) = &args.name {
        worker = worker.name(name.clone());
    }
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        super::session::interrupted().await;
        eprintln!("stopping: no new jobs; waiting for the running ones");
        on_signal.cancel();
    });
    eprintln!(
        "worker on {} with {} slot(s), folder {}",
        ws.plans_location(),
        args.slots,
        dir.display()
    );
    worker
        .run(&dir, stop)
        .await
        .map_err(|e| CliError::other(e.to_string()))?;
    Ok(Exit::Ok)
}
