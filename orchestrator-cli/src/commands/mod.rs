//! One module per group of commands; [`dispatch`] runs the one the command line names.

pub mod demo;
pub mod inspect;
pub mod run;
pub mod steer;

use crate::cli::{Command, RepoArgs};
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
        Command::Graph(a) => inspect::graph(a).await,
        Command::Mcp(a) => mcp(a),
        Command::Demo(a) => demo::demo(a).await,
    }
}

/// `mcp`: not in this build yet.
fn mcp(_args: RepoArgs) -> CliResult<Exit> {
    Err(CliError::other(
        "the MCP server is not part of this build yet (it comes with the orchestrator-mcp \
         crate); drive plans with `orchestrator run`, `status`, `retry` ... meanwhile",
    ))
}
