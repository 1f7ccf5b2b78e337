//! `worker`: runs jobs of plans coordinated elsewhere (SPEC §16).

use std::path::PathBuf;
use std::sync::Arc;

use orchestrator_core::{Orchestrator, PlanId, PlanStatus};
use orchestrator_storage::pg::PgWorker;
use tokio_util::sync::CancellationToken;

use crate::cli::{DatabaseArg, RemoteArg, WorkerArgs};
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
    let mut worker = PgWorker::new(queue, o, Arc::new(ws.git.clone()))
        .slots(args.slots)
        .reaper(orchestrator_agents::stop_leftovers);
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
    let coordinating = args.coordinate.then(|| {
        tokio::spawn(coordinate(
            ws.clone(),
            args.database.clone(),
            args.remote.clone(),
            stop.clone(),
        ))
    });
    let worked = worker.run(&dir, stop).await;
    if let Some(task) = coordinating {
        let _ = task.await;
    }
    worked.map_err(|e| CliError::other(e.to_string()))?;
    Ok(Exit::Ok)
}

/// How often a coordinating worker looks for plans whose coordinator died.
const COORDINATE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// `--coordinate`: takes over, one by one, the running plans of the database nobody holds
/// (their coordinator's lease lapsed) whose repository is on this machine, until `stop`;
/// then the plans it drives are released, still running, for the next coordinator.
async fn coordinate(
    ws: Workspace,
    database: DatabaseArg,
    fallback: Option<String>,
    stop: CancellationToken,
) {
    let (Some(pg), Some(queue)) = (ws.pg.clone(), ws.work_queue()) else {
        return;
    };
    let mut driven = std::collections::HashSet::new();
    let mut plans = tokio::task::JoinSet::new();
    while !stop.is_cancelled() {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(COORDINATE_EVERY) => {}
        }
        while plans.try_join_next().is_some() {}
        let listing = match ws.plans.list().await {
            Ok(listing) => listing,
            Err(e) => {
                eprintln!("warning: cannot list the plans: {e}");
                continue;
            }
        };
        for plan in listing
            .plans
            .iter()
            .filter(|p| p.status == PlanStatus::Running)
        {
            let id = plan.plan_id.clone();
            if driven.contains(&id)
                || pg
                    .lease_info(&id)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|l| l.held)
            {
                continue;
            }
            let remote = queue
                .remote_of(&id)
                .await
                .ok()
                .flatten()
                .or_else(|| fallback.clone());
            match take_over(&ws, &database, &id, remote).await {
                Ok(Some(o)) => {
                    eprintln!("coordinating plan {id}");
                    driven.insert(id.clone());
                    let stop = stop.clone();
                    plans.spawn(async move {
                        tokio::select! {
                            status = o.wait(&id) => {
                                let _ = o.close(&id).await;
                                match status {
                                    Ok(s) => eprintln!("plan {id} {s}"),
                                    Err(e) => eprintln!("plan {id}: {e}"),
                                }
                            }
                            // Given back, running: the next coordinator takes it over.
                            () = stop.cancelled() => {
                                let _ = o.release(&id).await;
                                eprintln!("plan {id} released");
                            }
                        }
                    });
                }
                Ok(None) => {}
                Err(e) => eprintln!("warning: cannot take plan {id} over: {e}"),
            }
        }
    }
    while plans.join_next().await.is_some() {}
}

/// Opens and resumes plan `id` in an orchestrator of its own repository (its jobs through
/// `remote` when given); `None` when the plan is not ours to take (its repository is not on
/// this machine, another coordinator was faster).
async fn take_over(
    ws: &Workspace,
    database: &DatabaseArg,
    id: &PlanId,
    remote: Option<String>,
) -> CliResult<Option<Orchestrator>> {
    let record = ws.load(id).await?;
    if !record.state.repo.is_dir() {
        return Ok(None);
    }
    let plan_ws = Workspace::open(Some(&record.state.repo))?
        .with_database(database)
        .await?
        .with_remote(&RemoteArg { remote })?;
    let o = plan_ws.job_orchestrator(super::run::capacity(&record.spec), None)?;
    match o.open_plan(id).await {
        Ok(()) => {}
        Err(e) if crate::workspace::locked_by(&e).is_some() => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    o.resume(id).await?;
    Ok(Some(o))
}
