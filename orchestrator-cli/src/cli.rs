//! The command line (SPEC §5, a stable contract: names, flags and exit codes).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Runs many AI coding agents (or any commands) on one code base at once, safely: a plan is a
/// DAG of jobs, each in its own git worktree, whose commits flow along the DAG by merges until
/// the validated result lands on a target branch. Your own checkout is never touched.
///
/// Exit codes: 0 the plan succeeded (or the command was done), 1 the plan failed, was
/// canceled or paused, 2 invalid input, 3 any other error.
///
/// State lives in `<repo>/.orchestrator`, worktrees in `<repo>/.worktrees`. Every state change
/// is flushed to the disk before the jobs it enables start; ORCHESTRATOR_DURABILITY=flush only
/// hands it to the operating system (still safe against a crash or `kill -9` of the process,
/// not against a power loss).
#[derive(Debug, Parser)]
#[command(name = "orchestrator", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Creates a plan from a JSON or YAML file and runs it to the end.
    Run(RunArgs),
    /// Shows a plan (by default the most recent one).
    Status(StatusArgs),
    /// Lists the plans of the repository, newest first.
    List(ListArgs),
    /// Prints a job's logs (the latest attempt, every phase unless --phase).
    Logs(LogsArgs),
    /// Retries failed jobs (all of them when no JOB is named) and runs the plan to the end.
    Retry(RetryArgs),
    /// Resumes a paused or interrupted plan and runs it to the end.
    Resume(ResumeArgs),
    /// Pauses a plan: running jobs finish, nothing new starts.
    Pause(PlanArgs),
    /// Cancels a plan: running jobs are stopped, nothing else starts (worktrees are kept).
    Cancel(PlanArgs),
    /// Recovers a failed or canceled plan: leaves it paused, ready for `resume`.
    Recover(PlanArgs),
    /// Archives an ended plan: removes its worktrees and branches, keeps its state and logs.
    Archive(PlanArgs),
    /// Prints the plan's graph (Mermaid or Graphviz DOT).
    Graph(GraphArgs),
    /// Serves the MCP tools on stdio (not part of this build yet).
    Mcp(RepoArgs),
    /// Runs a small demo plan in a new temporary repository and shows where the result is.
    Demo(DemoArgs),
}

/// `--repo`.
#[derive(Debug, Clone, Args)]
pub struct RepoArgs {
    /// The repository (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
}

/// How a long run reports progress.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Print only the final JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    /// No live progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Also stream the jobs' output lines on stderr.
    #[arg(long, short, conflicts_with = "quiet")]
    pub verbose: bool,
}

/// `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The plan file (JSON, or YAML for any other extension).
    #[arg(value_name = "PLAN_FILE")]
    pub plan_file: PathBuf,
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Jobs running at once (overrides the plan's maxParallel; 0 = no plan limit).
    #[arg(long, value_name = "N")]
    pub max_parallel: Option<u32>,
    /// Where the plan's worktrees live (overrides the plan's worktreeRoot; default
    /// `<repo>/.worktrees`). Later commands on the plan use it too.
    #[arg(long, value_name = "DIR")]
    pub worktree_root: Option<PathBuf>,
    /// Jobs running at once across every orchestrator process of this machine that uses the
    /// same slot folder (ORCHESTRATOR_SLOTS_DIR); default: $ORCHESTRATOR_MACHINE_SLOTS, else
    /// no machine-wide limit; 0 = none.
    #[arg(long, value_name = "N")]
    pub machine_slots: Option<usize>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Plan id (or a unique prefix of it); default: the most recent plan.
    #[arg(value_name = "PLAN_ID")]
    pub plan: Option<String>,
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Plan id (or a unique prefix of it).
    #[arg(value_name = "PLAN_ID")]
    pub plan: String,
    /// A producerId, a node id or a unique job name.
    #[arg(value_name = "JOB")]
    pub job: String,
    /// Only this phase: merge-fi, setup, prechecks, work, commit, postchecks, merge-ri.
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// Attempt number (default: the latest).
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
    /// Only the last N lines.
    #[arg(long, value_name = "N")]
    pub tail: Option<usize>,
    #[command(flatten)]
    pub repo: RepoArgs,
}

/// `retry`.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// Plan id (or a unique prefix of it).
    #[arg(value_name = "PLAN_ID")]
    pub plan: String,
    /// Jobs to retry (producerId, node id or unique name); default: every failed job.
    #[arg(value_name = "JOB")]
    pub jobs: Vec<String>,
    /// New work: a command, "@agent <instructions>", or a JSON work object.
    #[arg(long, value_name = "SPEC")]
    pub work: Option<String>,
    /// New prechecks (same forms as --work).
    #[arg(long, value_name = "SPEC")]
    pub prechecks: Option<String>,
    /// New postchecks (same forms as --work).
    #[arg(long, value_name = "SPEC")]
    pub postchecks: Option<String>,
    /// Start the retried jobs over in a fresh worktree.
    #[arg(long)]
    pub clear_worktree: bool,
    /// Jobs running at once across every orchestrator process of this machine that uses the
    /// same slot folder (ORCHESTRATOR_SLOTS_DIR); default: $ORCHESTRATOR_MACHINE_SLOTS, else
    /// no machine-wide limit; 0 = none.
    #[arg(long, value_name = "N")]
    pub machine_slots: Option<usize>,
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Commands taking a plan id: `resume`, `pause`, `cancel`, `recover`, `archive`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Plan id (or a unique prefix of it).
    #[arg(value_name = "PLAN_ID")]
    pub plan: String,
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Jobs running at once across every orchestrator process of this machine that uses the
    /// same slot folder (ORCHESTRATOR_SLOTS_DIR); default: $ORCHESTRATOR_MACHINE_SLOTS, else
    /// no machine-wide limit; 0 = none.
    #[arg(long, value_name = "N")]
    pub machine_slots: Option<usize>,
}

/// Graph formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Mermaid flowchart (renders in Markdown viewers).
    #[default]
    Mermaid,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
    /// Mermaid gantt chart of the phases run: one bar per phase of each attempt, failed ones
    /// marked `crit`.
    Gantt,
}

/// `graph`.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Plan id (or a unique prefix of it).
    #[arg(value_name = "PLAN_ID")]
    pub plan: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
    pub format: GraphFormat,
    #[command(flatten)]
    pub repo: RepoArgs,
}

/// `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Create the demo repository in this (new or empty) folder instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}
