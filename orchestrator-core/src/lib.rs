//! # orchestrator-core
//!
//! The engine of the orchestrator: the plan model (SPEC §2) and its validation, the DAG state
//! machine (SPEC §3), the event-driven scheduler and the phase pipeline, typed events, the
//! builder, and the plug-in traits with in-memory implementations and conformance suites.
//!
//! The cargo feature `testing` adds the conformance suites (`conformance`) and the in-memory git
//! fake (`git::memory::MemoryGit`); enable it in the `[dev-dependencies]` of a crate whose tests
//! use them.

// The retry schedule of the retrying wrappers (git, store).
mod backoff;
pub mod capacity;
pub mod composite;
// Test support for implementations and hosts; a default build of core leaves it out.
#[cfg(feature = "testing")]
pub mod conformance;
pub mod engine;
mod error;
pub mod events;
pub mod extra;
pub mod git;
pub mod ids;
pub mod inputs;
pub mod parallel;
pub mod plan;
pub mod redact;
pub mod remote;
pub mod render;
pub mod report;
pub mod repository;
pub mod runner;
pub mod schedule;
pub mod state;
pub mod tools;
pub mod usage;
pub mod view;

pub use capacity::{Capacity, CapacityError, ProcessSlots, Slot};
pub use engine::{
    ArchiveReport, Orchestrator, OrchestratorBuilder, OrchestratorOptions, RetryRequest,
};
pub use error::{ConfigProblem, Error, Result, StateProblem};
pub use events::OrchestratorEvent;
pub use git::{ConflictResolver, GitError, GitOperations};
pub use ids::{NodeId, PlanId};
pub use repository::{InMemoryPlanRepository, PlanRepository, StoreError};
pub use runner::{FnRunner, WorkContext, WorkOutput, WorkRunner};
pub use state::{NodeStatus, Phase, PlanStatus};
