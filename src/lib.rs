//! # orchestrator
//!
//! Facade over the orchestrator crates: run many AI coding agents on one code base at once,
//! safely — a plan (a DAG of jobs) where every job works in its own git worktree and the
//! commits flow along the DAG by merges onto a target branch.
//!
//! - [`core`]: plan model, validation, state machine, engine, builder, plug-in traits.
//! - [`synthetic`]: generated plans for benchmarks.

pub use orchestrator_core as core;

pub mod synthetic;
