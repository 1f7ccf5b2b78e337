//! # orchestrator-storage
//!
//! [`FsPlanRepository`], the default [`PlanRepository`](orchestrator_core::PlanRepository):
//! plans as files under a folder (the CLI uses `<repo>/.orchestrator`), with atomic writes,
//! an append-only checksummed journal per plan compacted into snapshots, per-plan
//! process locks, per-attempt specs, and rotated phase logs; and [`MachineSlots`], the
//! machine-wide capacity (slot files locked like the plans' owner locks); and
//! [`PgPlanRepository`], the same store in PostgreSQL for plans shared by many machines
//! ([`pg`]).
//!
//! ```
//! use orchestrator_core::PlanRepository;
//! use orchestrator_storage::{Durability, FsOptions, FsPlanRepository};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = FsPlanRepository::with_options(
//!     dir.path(),
//!     FsOptions::default().durability(Durability::Full),
//! );
//! assert!(store.list().await.unwrap().plans.is_empty());
//! # });
//! ```

pub mod blob;
mod codec;
mod fast_json;
mod fsutil;
mod journal;
mod layout;
mod live;
mod lock;
mod logs;
mod options;
pub mod pg;
mod repo;
mod schema;
mod secrets;
mod slots;
mod snapshot;
mod specs;
mod stats;

pub use logs::LogCopy;
pub use options::{Compaction, Durability, FsOptions};
pub use pg::{PgOptions, PgPlanRepository};
pub use repo::FsPlanRepository;
pub use slots::MachineSlots;
pub use stats::IoStats;
