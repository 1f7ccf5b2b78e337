//! Facade over the orchestrator crates: `use orchestrator::core::...`.

pub use orchestrator_core as core;
