//! An MCP server (stdio, built on `rmcp`) that exposes the orchestrator to AI assistants with
//! the reference system's tool names and argument names (SPEC §6).
//!
//! Hosts embed it by building an [`orchestrator_core::Orchestrator`] for a repository and
//! handing it to [`OrchestratorMcp::new`]; [`OrchestratorMcp::serve_stdio`] serves until the
//! client goes away. The `orchestrator mcp` command does exactly that. Plans created through the
//! server keep running inside the host process while the client polls their status.
//!
//! Every tool answers with structured JSON and a short text; invalid arguments get a tool error
//! naming the field, the value given and what is allowed.

mod args;
mod edit_args;
mod edit_tools;
mod report;
mod schema;
mod server;
mod stdio;

pub use server::{OrchestratorMcp, MAX_JOBS_PER_CALL, TOOL_NAMES};
