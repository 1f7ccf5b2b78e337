//! Multi-agent teams and contract-checked role pipelines as composite jobs (SPEC §13).
//!
//! Work `{"type":"team", ...}` and `{"type":"pipeline", ...}` is run by the controllers of
//! this crate, registered on the engine's builder with [`register`]. A controller is a pure
//! function of stored facts (the spec, its sub-jobs' statuses and outputs): it answers which
//! sub-jobs come next, and the engine runs them as ordinary jobs, each in its own worktree,
//! their commits merged back into the composite job. Nothing an agent writes is ever
//! executed here: replies are parsed as text ([`rules`]).
//!
//! - [`team`]: broadcast, sequential, orchestrator and reflect teams (seed 002).
//! - [`pipeline`]: complexity-routed role pipelines with signed contracts (seed 003).
//! - [`squad`] and [`preset`]: teams loaded from `.squad/` folders and presets, resolved into
//!   the plan before it is stored ([`resolve`]), so every later decision is pure.

mod error;
pub mod pipeline;
pub mod preset;
pub mod resolve;
pub mod rules;
pub mod squad;
mod subjob;
pub mod team;
#[cfg(test)]
mod testing;

pub use error::{Error, Result};
pub use pipeline::PipelineController;
pub use team::TeamController;

use orchestrator_core::OrchestratorBuilder;

/// Registers the `team` and `pipeline` controllers on `builder`.
///
/// ```
/// let builder = orchestrator_workflows::register(orchestrator_core::Orchestrator::builder());
/// # let _ = builder;
/// ```
pub fn register(builder: OrchestratorBuilder) -> OrchestratorBuilder {
    builder
        .controller("team", TeamController)
        .controller("pipeline", PipelineController)
}
