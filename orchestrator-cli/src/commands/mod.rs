//! One module per group of commands; [`dispatch`] runs the one the command line names.

pub mod demo;
pub mod inspect;
pub mod models;
pub mod plugins;
pub mod run;
pub mod session;
pub mod steer;
pub mod team;
pub mod worker;

use crate::cli::{Command, McpArgs};
use crate::error::{CliError, CliResult, Exit};

/// Runs a command.
pub async fn dispatch(command: Command) -> CliResult<Exit> {
    match command {
        Command::Run(a) => run::run(a).await,
        Command::Status(a) => inspect::status(a).await,
        Command::List(a) => inspect::list(a).await,
        Command::Logs(a) => inspect::logs(a).await,
        Command::Retry(a) => run::retry(a).await,
        Command::Resume(a) => run::resume(a).await,
        Command::Pause(a) => steer::pause(a).await,
        Command::Cancel(a) => steer::cancel(a).await,
        Command::Recover(a) => steer::recover(a).await,
        Command::Archive(a) => steer::archive(a).await,
        Command::Approve(a) => steer::approve(a).await,
        Command::Reject(a) => steer::reject(a).await,
        Command::Answer(a) => steer::answer(a).await,
        Command::Graph(a) => inspect::graph(a).await,
        Command::Mcp(a) => mcp(a).await,
        Command::Demo(a) => demo::demo(a).await,
        Command::Session(a) => session::session(a).await,
        Command::Team(a) => team::team(a).await,
        Command::Models(a) => models::models(a).await,
        Command::Plugins(a) => plugins::plugins(a).await,
        Command::Worker(a) => worker::worker(a).await,
        Command::Ui(a) => crate::ui::serve(a).await,
    }
}

/// `mcp`: the MCP server of the repository on stdin/stdout, until the client goes away.
async fn mcp(args: McpArgs) -> CliResult<Exit> {
    let ws = crate::workspace::Workspace::open(args.repo.repo.as_deref())?
        .with_plugins(&args.plugins.plugins)?;
    // The MCP server runs jobs too: ORCHESTRATOR_MACHINE_SLOTS applies.
    let o = ws.job_orchestrator(16, None)?;
    ws.exclude_own_folders().await?;
    // Crash leftovers of the repository's plans are swept by the engine as plans are opened
    // and created (resume_interrupted opens the interrupted ones).
    let server = orchestrator_mcp::OrchestratorMcp::new(o, ws.root());
    let resumed = server.resume_interrupted().await;
    if !resumed.is_empty() {
        let ids: Vec<&str> = resumed.iter().map(|id| id.as_str()).collect();
        eprintln!("resumed interrupted plan(s): {}", ids.join(", "));
    }
    server
        .serve_stdio()
        .await
        .map_err(|e| CliError::other(format!("MCP server: {e}")))?;
    Ok(Exit::Ok)
}
