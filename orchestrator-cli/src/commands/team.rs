//! `team save`: a plan's team written back to a Squad folder (SPEC §13).

use orchestrator_core::plan::WorkSpec;
use orchestrator_workflows::squad::{self, SquadTeam};

use crate::cli::{TeamArgs, TeamCommand, TeamSaveArgs};
use crate::error::{CliError, CliResult, Exit};
use crate::workspace::Workspace;

/// `team ...`.
pub async fn team(args: TeamArgs) -> CliResult<Exit> {
    match args.command {
        TeamCommand::Save(a) => save(a).await,
    }
}

async fn save(args: TeamSaveArgs) -> CliResult<Exit> {
    let ws = Workspace::open(args.job.plan.repo.repo.as_deref())?;
    let id = ws.resolve_plan(&args.job.plan.plan).await?;
    let view = ws.view(&id).await?;
    let n = view.resolve(&args.job.job)?;
    let job = view
        .job(n)
        .ok_or_else(|| CliError::invalid(format!("`{}` is no job of plan {id}", args.job.job)))?;
    let WorkSpec::Team(spec) = &job.work else {
        return Err(CliError::invalid(format!(
            "job `{}` of plan {id} is {} work, not a team",
            job.producer_id,
            job.work.kind()
        )));
    };
    let dir = match &args.dir {
        Some(d) => std::path::absolute(d)
            .map_err(|e| CliError::invalid(format!("--dir {}: {e}", d.display())))?,
        None => ws.root().join(squad::SQUAD_DIRS[0]),
    };
    let team = SquadTeam {
        name: args.name.clone().unwrap_or_else(|| job.producer_id.clone()),
        workers: spec.workers.clone(),
        routing: spec.routing.clone(),
        decisions: spec.decisions.clone(),
        notes: Vec::new(),
    };
    squad::save(&dir, &team).map_err(|e| CliError::invalid(e.to_string()))?;
    println!("{}", dir.display());
    Ok(Exit::Ok)
}
