//! Dehydration (SPEC §15): a parked agent whose wait is longer than the plan's
//! `dehydrateAfter` has its CLI state archived through a [`SessionArchive`] and its worktree
//! removed (its files are in its checkpoint commit); when it wakes, the worktree is made
//! again at the checkpoint and the state restored, on whichever machine resumes it, and the
//! session goes on.
//!
//! The archive itself (a tarball in a blob store: a local folder, or any object store URL)
//! lives in `orchestrator-storage` (`orchestrator_storage::blob::BlobSessions`); hosts
//! register it with [`crate::OrchestratorBuilder::session_archive`].

use std::fmt;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;

/// How long a parked agent's wait must be before it is dehydrated (SPEC §15's
/// `dehydrateAfter`, default 5 min; plan field `dehydrateAfter`, in seconds).
pub const DEFAULT_DEHYDRATE_AFTER: Duration = Duration::from_secs(300);

/// The folder of a job's worktree that holds its agent CLIs' state (sessions, homes): what
/// dehydration archives.
pub const AGENT_STATE_DIR: &str = ".orchestrator/agent";

/// Where dehydrated sessions are kept (SPEC §15).
#[async_trait]
pub trait SessionArchive: Send + Sync + fmt::Debug + 'static {
    /// Packs folder `dir` and stores it under `key` with `attributes` (what the blob's
    /// metadata says about it), replacing what was there; `dir` is left as it is.
    async fn store(&self, key: &str, dir: &Path, attributes: &[(&str, &str)])
        -> Result<(), String>;

    /// Restores what `key` holds into `dir` (absent or empty). On an error — a missing or
    /// damaged blob — nothing is deleted, and `dir` is left absent or empty.
    async fn restore(&self, key: &str, dir: &Path) -> Result<(), String>;

    /// Deletes what `key` holds (nothing there is no error).
    async fn forget(&self, key: &str) -> Result<(), String>;
}

/// The blob key of a dehydrated session: job `node_id` of plan `plan_id`.
///
/// ```
/// assert_eq!(orchestrator_core::tools::session_key("p1", "n1"), "sessions/p1/n1");
/// ```
pub fn session_key(plan_id: &str, node_id: &str) -> String {
    format!("sessions/{plan_id}/{node_id}")
}
