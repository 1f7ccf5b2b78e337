//! `orchestrator`: the command line of the orchestrator SDK (SPEC §5).
//!
//! Runs a plan — a DAG of jobs, each in its own git worktree — to its end with live progress,
//! and inspects and steers stored plans: `run`, `status`, `list`, `logs`, `retry`, `resume`,
//! `pause`, `cancel`, `recover`, `archive`, `graph`, `mcp`, `demo`. Exit codes ([`error::Exit`]):
//! 0 the plan succeeded (or the command was done), 1 it ended without succeeding or stopped
//! paused, 2 invalid input, 3 any other error.

/// Writes a line to stdout (see [`write_stdout`]).
macro_rules! outln {
    () => {
        $crate::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::write_stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes to stdout (see [`write_stdout`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_stdout(&format!($($arg)*))
    };
}

mod cli;
mod commands;
mod control;
mod drive;
mod error;
mod notify;
mod progress;
mod report;
mod ui;
mod workspace;

use std::time::Duration;

use clap::Parser;

use crate::error::Exit;

/// mimalloc rather than the system's malloc: a run makes and frees many small objects (on
/// glibc, malloc and free were ~30% of a no-op job's CPU time; `benches/perf.sh` compares).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(Exit::Other.code());
        }
    };
    let result = runtime.block_on(commands::dispatch(cli.command));
    // Work still queued on the blocking pool (a last log write) gets a moment, not forever.
    runtime.shutdown_timeout(Duration::from_secs(2));
    let code = match result {
        Ok(exit) => exit.code(),
        Err(e) => {
            eprintln!("error: {e}");
            e.exit.code()
        }
    };
    std::process::exit(code);
}

/// Writes to stdout. A reader that went away (`orchestrator status | head -1`) is not an error:
/// the rest of the output is dropped.
pub fn write_stdout(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}
