//! The PostgreSQL store (SPEC §16): [`PgPlanRepository`], a [`PlanRepository`] that every
//! machine reaching the database shares, with leases that survive no process.
//!
//! One PostgreSQL *schema* ([`PgOptions::schema`], default `orchestrator`) holds its tables:
//!
//! | table | holds |
//! | --- | --- |
//! | `plans` | per plan: the state as of the last compaction, the summary `list` reads, the journal's head |
//! | `plan_batches` | the journal: one row per appended batch of changes, as JSON |
//! | `plan_leases` | who runs each plan: owner, generation, expiry |
//! | `attempt_specs` | the specs each attempt ran with |
//! | `phase_logs` | phase logs, one row per append |
//! | `work_items` | the [work queue](PgWorkQueue) of remote execution: attempts workers claim |
//! | `sessions` | agent sessions (SPEC §14): one JSON record per session, kept by `orchestrator-agents`' `PgSessionRepository` through [`PgPlanRepository::client`] |
//! | `schema_migrations` | the [migrations](MIGRATION_VERSION) applied |
//!
//! The migrations are SQL files under `orchestrator-storage/migrations/`, embedded in the
//! build and applied by [`PgPlanRepository::connect`].
//!
//! Connections come from a pool (`deadpool-postgres` over `tokio-postgres`, without TLS: use
//! a unix socket, a trusted network or a TLS-terminating proxy). Secret env values in plan
//! specs are stored as given: access to the database is the boundary.
//!
//! ```no_run
//! use std::sync::Arc;
//! use orchestrator_core::PlanRepository;
//! use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), orchestrator_core::StoreError> {
//! let url = std::env::var("DATABASE_URL")
//!     .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
//! let store: Arc<dyn PlanRepository> =
//!     Arc::new(PgPlanRepository::connect(&url, PgOptions::default()).await?);
//! for plan in store.list().await?.plans {
//!     println!("{} {} {:?}", plan.plan_id, plan.name, plan.status);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! [`PlanRepository`]: orchestrator_core::PlanRepository

mod attempts;
mod codec;
mod connect;
mod error;
mod executor;
mod lease;
mod migrate;
mod options;
mod plans;
mod queue;
mod stats;
mod worker;

pub use executor::PgExecutor;
pub use lease::{LeaseInfo, PgLease};
pub use migrate::MIGRATION_VERSION;
pub use options::PgOptions;
pub use plans::{host_name, PgPlanRepository};
pub use queue::{Claim, Expired, Finished, PgWorkQueue, QueueError, WorkItem};
pub use stats::PgStats;
pub use worker::{PgWorker, WorkerError};

/// The pool and the client the store runs on (the types of [`PgPlanRepository::client`]),
/// re-exported so that crates using that connection need not depend on them.
pub use deadpool_postgres;
/// See [`deadpool_postgres`].
pub use tokio_postgres;
