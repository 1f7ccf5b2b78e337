//! # orchestrator-agents
//!
//! Work runners that start programs — shell commands, processes, agent CLIs — and the
//! process supervision they share:
//!
//! - [`ShellRunner`] runs `shell` work (`sh -c`, `bash -c`, `pwsh`, `powershell`, `cmd /C`);
//!   [`ProcessRunner`] runs `process` work (an executable and its arguments, no shell).
//!   Register them with `Orchestrator::builder().runner("shell", ShellRunner::new())
//!   .runner("process", ProcessRunner::new())`.
//! - [`Supervisor`] runs one [`Invocation`] in its own process group, streams its output line
//!   by line to the phase log, and on timeout or cancellation stops the whole process tree
//!   (SIGTERM, grace, SIGKILL). Agent CLI runners are built on it.
//! - [`ChildEnv`] builds a child's environment: the host's minus [`REMOVED_ENV_VARS`], then the
//!   plan/job and spec layers with `$VAR` expansion.
//! - [`resolve_cwd`] keeps a spec's `cwd` inside the job directory.
//! - [`stop_leftovers`] is the engine's reaper: when a plan is taken over after its owner was
//!   killed, it stops the process groups the dead owner's jobs left running (the supervisor
//!   reports every group it starts, and the engine records them).
//! - [`agent`]: agent CLIs (Copilot, Claude Code, Codex, Gemini, host-defined) as the `agent`
//!   work runner, [`AgentWorkRunner`]: `.runner("agent", AgentWorkRunner::new())`, and
//!   auto-heal through an agent, [`AgentHealer`]. Its module documentation has the table of
//!   which spec field becomes which flag of each CLI.
//!
//! - [`plugins`]: plugin folders (SPEC §15) — agents, skills and MCP servers that agent jobs
//!   use ([`plugins::PluginPlaces`], [`plugins::Plugins`]).
//! - [`session`]: agent sessions (SPEC §14) — [`session::Sessions`]: turns, steering,
//!   per-turn checkpoints, revert, fork, permissions, stored in a
//!   [`session::SessionRepository`].
//!
//! Only a `shell` spec's `command` is ever given to a shell; env values, `cwd` and process
//! arguments are never interpreted by one.
//!
//! Process groups are a Unix feature: elsewhere, stopping a run kills the main process only.
//! Processes that leave their group (`setsid`, daemons) are found by the
//! [`JOB_TOKEN_VAR`](orchestrator_core::runner::JOB_TOKEN_VAR) they inherit and, on Linux,
//! stay ours because the supervisor makes its process the child subreaper of what it starts.

pub mod agent;
pub mod env;
mod error;
mod group;
mod leftovers;
mod lines;
pub mod plugins;
mod procs;
pub mod providers;
mod runners;
pub mod session;
mod supervise;
pub mod tools;
mod tree;
mod workdir;

pub use agent::{AgentHealer, AgentRunner, AgentUsage, AgentWorkRunner};
pub use env::{ChildEnv, REMOVED_ENV_VARS};
pub use error::Error;
pub use leftovers::stop_leftovers;
pub use lines::{LineObserver, LineRewrite};
pub use runners::{ProcessRunner, ShellRunner};
pub use supervise::{Ending, Invocation, Outcome, Supervisor, SupervisorOptions};
pub use workdir::resolve_cwd;
