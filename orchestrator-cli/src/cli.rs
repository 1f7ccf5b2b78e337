//! The command line (SPEC §5, a stable contract: names, flags and exit codes).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Runs many AI coding agents (or any commands) on one code base at once, safely: a plan is a
/// DAG of jobs, each in its own git worktree, whose commits flow along the DAG by merges until
/// the validated result lands on a target branch. Your own checkout is never touched.
///
/// Exit codes: 0 the plan succeeded (`run`, `retry`, `resume`, `demo`) or the command was done
/// (every other command, whatever the plan's status); 1 the plan ended without succeeding
/// (failed, canceled, blocked jobs) or stopped paused (Ctrl-C, SIGTERM, `orchestrator pause`),
/// or `resume` was refused for a canceled or archived plan, or a `session send` turn failed;
/// 2 invalid input (a bad plan file or argument, an unknown plan id, job or session, approving
/// a job that does not wait for it: the message names every problem); 3 any other error;
/// 4 `--until-waiting` was given and the plan waits for a person (a job waits for approval).
///
/// State lives in `<repo>/.orchestrator`; worktrees in `<repo>/.worktrees` unless the plan's
/// `worktreeRoot` (or `run --worktree-root`) names another folder. Every state change is flushed
/// to the disk before the jobs it enables start; ORCHESTRATOR_DURABILITY=flush only hands it to
/// the operating system (still safe against a crash or `kill -9` of the process, not against a
/// power loss).
///
/// Environment: ORCHESTRATOR_AGENT (the agent CLI for agent work that names none; default
/// copilot), ORCHESTRATOR_HEAL_AGENT (auto-heal failed jobs with that agent),
/// ORCHESTRATOR_SECRET_ENV (more variables whose values are secrets: comma-separated names,
/// `*` wildcards), ORCHESTRATOR_MACHINE_SLOTS and ORCHESTRATOR_SLOTS_DIR (machine-wide
/// capacity, see `run --help`), ORCHESTRATOR_DURABILITY (`full` or `flush`).
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
    ///
    /// The plan is stored before its first job starts. Progress goes to stderr. Ctrl-C (or
    /// SIGTERM) pauses the plan cleanly: running jobs are stopped, the state is saved and
    /// `orchestrator resume` continues it; a second Ctrl-C exits at once. Exit code 0 when the
    /// plan succeeded, 1 when it failed, was canceled or stopped paused.
    Run(RunArgs),
    /// Shows a plan (by default the most recent one).
    ///
    /// A table of its jobs, or with --json the plan's status document. The exit code is 0
    /// whatever the plan's status: read the status from the output.
    Status(StatusArgs),
    /// Lists the plans of the repository, newest first.
    List(ListArgs),
    /// Prints a job's logs (the latest attempt, every phase unless --phase).
    Logs(LogsArgs),
    /// Retries failed jobs (all of them when no JOB is named) and runs the plan to the end.
    ///
    /// Exit code 0 when the plan then succeeds, 1 when it does not (as for `run`).
    Retry(RetryArgs),
    /// Resumes a paused or interrupted plan and runs it to the end.
    ///
    /// A plan that never started is started. A canceled plan needs `orchestrator recover`
    /// first and an archived one cannot run again (both exit 1). Exit code 0 when the plan
    /// succeeds, 1 when it does not (as for `run`).
    Resume(ResumeArgs),
    /// Pauses a plan: running jobs finish, nothing new starts.
    ///
    /// A plan another `orchestrator` process is running is paused by that process, on request;
    /// this command then waits (at most 30 s) for the running jobs to finish and prints the
    /// plan's status. `orchestrator resume` continues the plan.
    #[command(mut_arg("quiet", |a| a.help("No note on stderr when another process runs the plan")))]
    #[command(mut_arg("verbose", |a| a.hide(true)))]
    Pause(PlanArgs),
    /// Cancels a plan: running jobs are stopped, nothing else starts (worktrees are kept).
    ///
    /// A plan another `orchestrator` process is running is canceled by that process, on
    /// request. `orchestrator recover` makes a canceled plan runnable again.
    #[command(mut_arg("quiet", |a| a.help("No note on stderr when another process runs the plan")))]
    #[command(mut_arg("verbose", |a| a.hide(true)))]
    Cancel(PlanArgs),
    /// Recovers a failed or canceled plan: leaves it paused, ready for `resume`.
    ///
    /// The target branch exists again, succeeded jobs keep their work, and failed, blocked and
    /// canceled jobs are pending again. Nothing runs until `orchestrator resume`.
    #[command(mut_arg("quiet", |a| a.hide(true)))]
    #[command(mut_arg("verbose", |a| a.hide(true)))]
    Recover(PlanArgs),
    /// Archives an ended plan: removes its worktrees and branches, keeps its state and logs.
    ///
    /// The branches removed are the plan's snapshot and target branches (never the default
    /// branch); with --json the document also lists what was removed.
    #[command(mut_arg("quiet", |a| a.hide(true)))]
    #[command(mut_arg("verbose", |a| a.hide(true)))]
    Archive(PlanArgs),
    /// Approves a job waiting for approval (`"approval": "before"`): it starts when the plan runs.
    ///
    /// A plan another `orchestrator` process is running is told by that process, on request;
    /// else the approval is stored and `orchestrator resume` runs the job. A job that does not
    /// wait for approval: exit code 2, naming what it waits for.
    #[command(mut_arg("quiet", |a| a.help("No note on stderr when another process runs the plan")))]
    #[command(mut_arg("verbose", |a| a.hide(true)))]
    Approve(JobArgs),
    /// Rejects a job waiting for approval: it fails with reason `rejected` and the reason given,
    /// and the jobs that depend on it are blocked (`retry` holds it for approval again).
    #[command(mut_arg("quiet", |a| a.help("No note on stderr when another process runs the plan")))]
    #[command(mut_arg("verbose", |a| a.hide(true)))]
    Reject(RejectArgs),
    /// Answers a job waiting for input (a question an agent asked).
    #[command(mut_arg("quiet", |a| a.help("No note on stderr when another process runs the plan")))]
    #[command(mut_arg("verbose", |a| a.hide(true)))]
    Answer(AnswerArgs),
    /// Prints the plan's graph (Mermaid flowchart or Graphviz DOT) or its timeline (Mermaid gantt).
    Graph(GraphArgs),
    /// Serves the MCP plan and job tools (create_copilot_plan, ...) on stdin/stdout.
    ///
    /// For an MCP client that starts it as a child process; it runs until the client closes
    /// the connection (exit code 0). At start it takes over and resumes the repository's plans
    /// that were running when the previous server stopped; when it ends, the plans it runs are
    /// released (running jobs are stopped and resume from their phase next time).
    Mcp(McpArgs),
    /// Runs a small demo plan in a new temporary repository and shows where the result is.
    ///
    /// Four shell jobs in a diamond, each in its own worktree; the repository (kept afterwards)
    /// needs no git identity or configuration. Exit code 0 when the demo plan succeeded.
    Demo(DemoArgs),
    /// Agent sessions: one agent conversation in its own worktree, turn by turn.
    ///
    /// `new` opens a session (a detached worktree at --base, checkpoint `turn-0`); each `send`
    /// is one turn that resumes the agent CLI's own conversation and, when the agent answered,
    /// commits the worktree as `refs/orchestrator/sessions/<id>/turn-<n>` (no branch moves).
    /// `revert` and `fork` go back to a turn's checkpoint, `close` ends a session (optionally
    /// merging its work onto a branch). `steer` hands a message to a running turn, also to a
    /// running plan job's agent (`PLAN_ID/JOB`). Sessions are stored in
    /// `<repo>/.orchestrator/sessions` and their worktrees live in `<repo>/.worktrees/sessions`.
    ///
    /// SESSION is a session id, a unique prefix of one, or `PLAN_ID/JOB` for the agent of a
    /// plan's job (steer only: plan jobs' sessions have no stored turns). The agent is --agent,
    /// else ORCHESTRATOR_AGENT, else copilot; the agent CLI must be on PATH. Exit codes: 0 done;
    /// 1 the turn failed (the session is back at its last checkpoint) or was interrupted;
    /// 2 invalid input (an unknown or ambiguous session, a closed session, a turn that does not
    /// exist, nothing running to steer, a session busy in another process); 3 other errors.
    Session(SessionArgs),
    /// Multi-agent teams (SPEC §13): `team save PLAN_ID JOB` writes a plan's team back to a
    /// Squad folder.
    Team(TeamArgs),
    /// Lists the models of the repository's model providers whose credentials are set.
    ///
    /// The providers are those of `<repo>/.model_providers.json` (types github, azure, openai,
    /// anthropic, ollama, gemini; each with its base URL, the variable holding its key as
    /// `"apiKey": "env:NAME"`, and its models); a spec's `model` may then be `provider:model`.
    /// Prints one `provider:model` a line; the providers left out because their key's variable
    /// is unset or empty go to stderr, each with why. With --json: `{"providers": [{"name",
    /// "type", "baseUrl", "keyEnv", "models", "usable", "reason"}], "models": [...],
    /// "defaultModel", "file"}`. No file: nothing is listed (exit code 0). Exit code 2 when the
    /// file is malformed: the message names the file and every field at fault.
    Models(ModelsArgs),
    /// Lists the plugins agent jobs use: their agents, skills and MCP servers.
    ///
    /// Plugins load from, in order, `<repo>/.orchestrator/plugins/*/`,
    /// `~/.config/orchestrator/plugins/*/` ($XDG_CONFIG_HOME/orchestrator/plugins/*/ when set)
    /// and each --plugins DIR (a plugin, or a folder of plugins); a name met again later is left
    /// out, with a note on stderr. A plugin folder holds `plugin.json` (`name`, `description`,
    /// `version`), `agents/*.agent.md` (front matter `name`, `description`, `model`, `tools`,
    /// `system`, `skills`, `cli`; the body is the system prompt), `skills/*/SKILL.md` (front
    /// matter `name`, `description`; the body is the skill) and `.mcp.json` (Claude Code's
    /// `mcpServers`). A plan job's `agent` may name a plugin agent. Prints one line per plugin,
    /// agent, skill and server, with where it came from (never env or header values); with
    /// --json `{"plugins": [{"name", "description", "version", "origin", "dir", "agents",
    /// "skills", "mcpServers"}], "notes"}`. Exit code 2 when a plugin is malformed: the message
    /// names the file and the field.
    Plugins(PluginsArgs),
    /// Runs jobs of plans coordinated elsewhere (SPEC §16) until Ctrl-C or SIGTERM.
    ///
    /// Claims the jobs that `orchestrator run --database URL --remote GIT_URL` enqueues in the
    /// database, SLOTS at a time, each in a worktree of the worker's own clone of the remote
    /// (under DIR), renewing its lease every third of $ORCHESTRATOR_LEASE_TIMEOUT (seconds,
    /// default 30); the results go back as commits on the remote and reports in the database.
    /// A job whose lease lapses (the worker killed, stalled, cut off) is run again elsewhere
    /// as a new attempt. With --coordinate it also takes over plans whose coordinator died.
    /// On Ctrl-C it claims nothing more and lets its running jobs (and plans) end.
    Worker(WorkerArgs),
    /// Serves a live dashboard of the repository's plans and sessions in the browser (SPEC §18).
    ///
    /// Binds 127.0.0.1 only and prints its URL (`http://127.0.0.1:PORT/?token=...`) as the
    /// first line of stdout; every request needs that token, and requests whose Host or Origin
    /// is not the dashboard's own are refused. Pages: the plans, a plan (its DAG and the
    /// timeline of its phases, updating live), a job (phases, attempts, log tail, output, usage,
    /// why it waits or failed), the jobs waiting for a person (approve, reject, answer) and the
    /// sessions. Actions go through the same checks as the commands of the same names. Runs
    /// until Ctrl-C or SIGTERM (exit code 0).
    Ui(UiArgs),
}

/// `ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub database: DatabaseArg,
    /// The port on 127.0.0.1 (default: a free one).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub port: u16,
    /// Do not open the dashboard in a browser (by default `xdg-open` or `open` is tried).
    #[arg(long)]
    pub no_open: bool,
}

/// `worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub database: DatabaseArg,
    /// Jobs run at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub slots: usize,
    /// The folder the workers of this machine share: each takes a numbered place of its own
    /// in it, with its clones (default: ~/.cache/orchestrator/workers).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The name it claims under (default: <host>-<pid>).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Also coordinate: take over the running plans of the database whose coordinator's lease
    /// lapsed (it died) and whose repository is on this machine, and drive them to their end,
    /// their jobs through the remote their orders named (else --remote).
    #[arg(long)]
    pub coordinate: bool,
    /// With --coordinate: the remote of taken-over plans that have no order yet.
    #[arg(long, value_name = "GIT_URL", requires = "coordinate")]
    pub remote: Option<String>,
}

/// `--repo`.
#[derive(Debug, Clone, Args)]
pub struct RepoArgs {
    /// The repository (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
}

/// `--database URL` of the commands that keep or read plans in PostgreSQL (SPEC §16).
#[derive(Debug, Clone, Default, Args)]
pub struct DatabaseArg {
    /// Keep the plans in this PostgreSQL database (`postgres://user@host:port/db`, schema
    /// `orchestrator`) instead of `<repo>/.orchestrator/`; default: $ORCHESTRATOR_DATABASE_URL.
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
}

/// `--remote GIT_URL` of the commands that coordinate a plan whose jobs workers run (SPEC §16).
#[derive(Debug, Clone, Default, Args)]
pub struct RemoteArg {
    /// Run the jobs on the workers of --database (`orchestrator worker`), git through this
    /// repository every machine reaches (a URL or path; jobs' base and result commits travel
    /// as refs/orchestrator/jobs/<planId>/<nodeId>/...); default: $ORCHESTRATOR_REMOTE.
    #[arg(long, value_name = "GIT_URL")]
    pub remote: Option<String>,
}

/// `--plugins DIR` of the commands that run agent jobs.
#[derive(Debug, Clone, Default, Args)]
pub struct PluginDirs {
    /// Also load plugins from DIR: a plugin folder (with `plugin.json`) or a folder of them,
    /// after those of `<repo>/.orchestrator/plugins/` and `~/.config/orchestrator/plugins/`
    /// (repeatable; `orchestrator plugins --help` describes them).
    #[arg(long = "plugins", value_name = "DIR")]
    pub plugins: Vec<PathBuf>,
}

/// `mcp`.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub plugins: PluginDirs,
}

/// `plugins`.
#[derive(Debug, Args)]
pub struct PluginsArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub plugins: PluginDirs,
    /// Print the plugins as JSON.
    #[arg(long)]
    pub json: bool,
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
    #[command(flatten)]
    pub database: DatabaseArg,
    #[command(flatten)]
    pub remote: RemoteArg,
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
    pub plugins: PluginDirs,
    #[command(flatten)]
    pub wait: WaitArgs,
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
    #[command(flatten)]
    pub database: DatabaseArg,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub database: DatabaseArg,
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
    #[command(flatten)]
    pub database: DatabaseArg,
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
    pub plugins: PluginDirs,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub database: DatabaseArg,
    #[command(flatten)]
    pub remote: RemoteArg,
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
    pub database: DatabaseArg,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `approve`: a plan and one of its jobs.
#[derive(Debug, Args)]
pub struct JobArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// The job: producerId, node id (or its first 8 characters) or unique name.
    #[arg(value_name = "JOB")]
    pub job: String,
}

/// `reject`.
#[derive(Debug, Args)]
pub struct RejectArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// Why it is rejected (recorded as the job's error).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

/// `answer`.
#[derive(Debug, Args)]
pub struct AnswerArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// The answer.
    #[arg(value_name = "TEXT")]
    pub answer: String,
}

/// `--until-waiting` and `--notify` of `run`, `retry` and `resume`.
#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// Return as soon as the plan waits for a person (a job waits for approval) and nothing
    /// runs, with exit code 4; the plan stays as it is for `approve`/`reject` and `resume`.
    #[arg(long)]
    pub until_waiting: bool,
    /// Run the shell command CMD (`sh -c`, in the repository) each time a job starts waiting
    /// and once when this command stops following the plan, with one JSON line on stdin:
    /// {"event":"attention_needed","planId","jobId","producerId","waitingFor","since",...} or
    /// {"event":"plan_ended"|"plan_waiting"|"plan_paused","planId","name","status"}. One at a
    /// time, in order, each stopped after 10 s; a failing CMD is only a warning.
    #[arg(long, value_name = "CMD")]
    pub notify: Option<String>,
}

/// `resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub remote: RemoteArg,
    #[command(flatten)]
    pub wait: WaitArgs,
    /// Jobs running at once across every orchestrator process of this machine that uses the
    /// same slot folder (ORCHESTRATOR_SLOTS_DIR); default: $ORCHESTRATOR_MACHINE_SLOTS, else
    /// no machine-wide limit; 0 = none.
    #[arg(long, value_name = "N")]
    pub machine_slots: Option<usize>,
    #[command(flatten)]
    pub plugins: PluginDirs,
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
    #[command(flatten)]
    pub database: DatabaseArg,
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

/// `models`.
#[derive(Debug, Args)]
pub struct ModelsArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Print the providers and models as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `team`.
#[derive(Debug, Args)]
pub struct TeamArgs {
    /// What to do with teams.
    #[command(subcommand)]
    pub command: TeamCommand,
}

/// The `team` subcommands.
#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Writes the team of a plan's `team` job to a Squad folder (default `<repo>/.squad`):
    /// `team.md` (name and roster), `agents/<name>/charter.md` (each worker's system prompt),
    /// `routing.md` and `decisions.md`. Loading the folder again (`"squad": ".squad"`) gives
    /// the same team. Prints the folder. Exit code 2 when the job is no team or the team
    /// cannot be written as Squad files.
    Save(TeamSaveArgs),
}

/// `team save`.
#[derive(Debug, Args)]
pub struct TeamSaveArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// The folder to write (default: `.squad` in the repository).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The team's name in `team.md` (default: the job's producerId).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

/// `session`.
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// What to do with sessions.
    #[command(subcommand)]
    pub command: SessionCommand,
}

/// The `session` subcommands (SPEC §14).
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Opens a new session: a worktree of its own at --base (default HEAD), no turn yet.
    ///
    /// Prints the session id (alone on stdout, for scripts: `id=$(orchestrator session new)`);
    /// with --json `{"sessionId","worktree"}` (the worktree is detached: no branch). Nothing
    /// runs until `orchestrator session send`.
    New(SessionNewArgs),
    /// Runs one turn: sends PROMPT to the session's agent and prints its reply on stdout.
    ///
    /// The agent resumes its own conversation; the turn's progress (turn started, the agent's
    /// text as it comes, steering, the checkpoint) goes to stderr unless --quiet. When the
    /// agent answered, the worktree is committed as checkpoint
    /// `refs/orchestrator/sessions/<id>/turn-<n>`. A failed turn (the agent failed, or this
    /// command was interrupted or killed) leaves the session at its last checkpoint, exit
    /// code 1. With --json stdout holds only
    /// `{"sessionId","turn","reply","checkpoint","usage"}`. --model and --effort switch the
    /// session's model and effort for this turn and the next ones.
    Send(SessionSendArgs),
    /// Hands MESSAGE to the agent while it works: it is interrupted and resumed with it.
    ///
    /// SESSION is a session running a turn (`orchestrator session send` in another terminal)
    /// or `PLAN_ID/JOB`, a running plan job's agent (its job log then shows `steered: ...`).
    /// Nothing running: exit code 2 (send the message as the next prompt instead).
    Steer(SessionSteerArgs),
    /// Shows a session's turns: prompt, reply, status, checkpoint (and usage with --json).
    ///
    /// With --json `{"sessionId","turns":[{"turn","prompt","status","reply","checkpoint",
    /// "usage","steered","error","startedAt","endedAt",...}]}` (fields without a value are left
    /// out).
    Log(SessionLogArgs),
    /// Goes back to turn TURN: the worktree as its checkpoint, the conversation as it was.
    ///
    /// The turns after it are dropped (and their checkpoint refs deleted); the next `send`
    /// continues the conversation from TURN. 0 is the base.
    Revert(SessionRevertArgs),
    /// Starts a new session from turn TURN (default: the last one that succeeded).
    ///
    /// The new session gets a worktree of its own at that checkpoint and a copy of the
    /// conversation up to it; the original goes on unchanged. Prints the new session id (alone
    /// on stdout); with --json `{"sessionId","worktree"}`.
    Fork(SessionForkArgs),
    /// Lists the sessions of the repository and the agents of running plan jobs.
    ///
    /// One row per session (id, agent, model, turns, status `open`, `running` or `closed`,
    /// worktree) and per running agent job of a running plan (`PLAN_ID/JOB`, kind `plan-job`,
    /// status `running` while its agent runs). With --json an array of
    /// `{"sessionId","kind":"session"|"plan-job","agent","model","turns","status","worktree"}`
    /// (`model` null when the CLI's default; `turns` 0 for plan jobs, whose sessions have no
    /// stored turns).
    List(SessionListArgs),
    /// Closes a session: its worktree is removed, its checkpoints stay.
    ///
    /// With --merge BRANCH its last checkpoint is first merged onto BRANCH (created there when
    /// it does not exist). A closed session takes no more turns; `fork` still starts new ones
    /// from it.
    Close(SessionCloseArgs),
}

/// Reasoning effort (`--effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EffortArg {
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Extra high.
    Xhigh,
}

/// A session reference.
#[derive(Debug, Clone, Args)]
pub struct SessionRef {
    /// The session: its id or a unique prefix of it.
    #[arg(value_name = "SESSION")]
    pub session: String,
    #[command(flatten)]
    pub repo: RepoArgs,
}

/// `session new`.
#[derive(Debug, Args)]
pub struct SessionNewArgs {
    /// The agent CLI: copilot, claude, codex or gemini (default: $ORCHESTRATOR_AGENT, else
    /// copilot).
    #[arg(long, value_name = "A")]
    pub agent: Option<String>,
    /// The model (default: the CLI's).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Reasoning effort.
    #[arg(long, value_enum, value_name = "E")]
    pub effort: Option<EffortArg>,
    /// The revision the worktree starts at (default: HEAD).
    #[arg(long, value_name = "REV", conflicts_with = "no_worktree")]
    pub base: Option<String>,
    /// Work in the repository folder itself: no worktree, no checkpoints (no revert or fork).
    #[arg(long)]
    pub no_worktree: bool,
    /// Which tool requests the agent may make: allow-all (the default), read-only, no-shell,
    /// ask, or a JSON rule object like {"allow": [...], "deny": [...]}.
    #[arg(long, value_name = "P")]
    pub permissions: Option<String>,
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Print `{"sessionId","worktree"}` instead of the id.
    #[arg(long)]
    pub json: bool,
}

/// `session send`.
#[derive(Debug, Args)]
pub struct SessionSendArgs {
    /// The session: its id or a unique prefix of it.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The prompt.
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
    /// Switch to this model (for this turn and the next ones).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Switch to this effort (for this turn and the next ones).
    #[arg(long, value_enum, value_name = "E")]
    pub effort: Option<EffortArg>,
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Print only `{"sessionId","turn","reply","checkpoint","usage"}` on stdout.
    #[arg(long)]
    pub json: bool,
    /// No live progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `session steer`.
#[derive(Debug, Args)]
pub struct SessionSteerArgs {
    /// The session (id or unique prefix) running a turn, or `PLAN_ID/JOB` for a running plan
    /// job's agent.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The message.
    #[arg(value_name = "MESSAGE")]
    pub message: String,
    #[command(flatten)]
    pub repo: RepoArgs,
}

/// `session log`.
#[derive(Debug, Args)]
pub struct SessionLogArgs {
    #[command(flatten)]
    pub session: SessionRef,
    /// Print `{"sessionId","turns":[...]}`.
    #[arg(long)]
    pub json: bool,
}

/// `session revert`.
#[derive(Debug, Args)]
pub struct SessionRevertArgs {
    #[command(flatten)]
    pub session: SessionRef,
    /// The turn to go back to (0: the base).
    #[arg(value_name = "TURN")]
    pub turn: u32,
}

/// `session fork`.
#[derive(Debug, Args)]
pub struct SessionForkArgs {
    #[command(flatten)]
    pub session: SessionRef,
    /// The turn to start from (default: the last one that succeeded; 0: the base).
    #[arg(value_name = "TURN")]
    pub turn: Option<u32>,
    /// Print `{"sessionId","worktree"}` instead of the id.
    #[arg(long)]
    pub json: bool,
}

/// `session list`.
#[derive(Debug, Args)]
pub struct SessionListArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Print a JSON array.
    #[arg(long)]
    pub json: bool,
}

/// `session close`.
#[derive(Debug, Args)]
pub struct SessionCloseArgs {
    #[command(flatten)]
    pub session: SessionRef,
    /// Merge the session's last checkpoint onto this branch first.
    #[arg(long, value_name = "BRANCH")]
    pub merge: Option<String>,
}
