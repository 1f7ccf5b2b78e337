#![doc = include_str!("../README.md")]

pub use orchestrator_agents as agents;
pub use orchestrator_core as core;
pub use orchestrator_git as git;
pub use orchestrator_storage as storage;
pub use orchestrator_workflows as workflows;

pub mod synthetic;
