//! Where things live under the store's root (SPEC §4):
//!
//! ```text
//! <root>/plans/<planId>/
//!     plan.json                 snapshot: schema version, journal generation, the record
//!     journal-<generation>.log  changes appended since that snapshot
//!     journal.lock              held (flock) while appending or compacting
//!     owner.lock                held (flock) by the process running the plan; holds its pid
//!     secrets.json              values of secret env variables, which the others refer to
//!     specs/<nodeId>/attempts/<n>/{work,prechecks,postchecks}.json (+ .md for agent work)
//!     logs/<nodeId>/<attempt>/<phase>.log (+ <phase>.log.1 once rotated)
//! ```

use std::path::{Path, PathBuf};

use orchestrator_core::state::Phase;
use orchestrator_core::{NodeId, PlanId};

/// Snapshot file name.
pub(crate) const SNAPSHOT: &str = "plan.json";
/// Prefix of the hidden folders a create writes a plan in before moving it into place.
pub(crate) const CREATE_PREFIX: &str = ".create-";
/// Prefix of hidden folders a delete moves a plan to before removing it.
pub(crate) const DELETED_PREFIX: &str = ".deleted-";

/// Whether `name` can be used as one path component without escaping its folder.
pub(crate) fn is_safe_component(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && !name
            .chars()
            .any(|c| matches!(c, '/' | '\\' | ':' | '\0') || c.is_control())
}

/// The paths of one plan.
#[derive(Debug, Clone)]
pub(crate) struct PlanPaths {
    pub(crate) dir: PathBuf,
}

impl PlanPaths {
    /// The folder of `plan` under `plans`, or `None` when the id is not a safe folder name
    /// (such a plan cannot exist in this store).
    pub(crate) fn of(plans: &Path, plan: &PlanId) -> Option<PlanPaths> {
        is_safe_component(plan.as_str()).then(|| PlanPaths {
            dir: plans.join(plan.as_str()),
        })
    }

    pub(crate) fn snapshot(&self) -> PathBuf {
        self.dir.join(SNAPSHOT)
    }

    pub(crate) fn journal(&self, generation: u64) -> PathBuf {
        self.dir.join(journal_name(generation))
    }

    pub(crate) fn secrets(&self) -> PathBuf {
        self.dir.join("secrets.json")
    }

    pub(crate) fn write_lock(&self) -> PathBuf {
        self.dir.join("journal.lock")
    }

    pub(crate) fn owner_lock(&self) -> PathBuf {
        self.dir.join("owner.lock")
    }

    pub(crate) fn attempt_specs(&self, node: &NodeId, attempt: u32) -> PathBuf {
        self.dir
            .join("specs")
            .join(node.as_str())
            .join("attempts")
            .join(attempt.to_string())
    }

    pub(crate) fn node_logs(&self, node: &NodeId) -> PathBuf {
        self.dir.join("logs").join(node.as_str())
    }

    pub(crate) fn log(&self, node: &NodeId, attempt: u32, phase: Phase) -> PathBuf {
        self.node_logs(node)
            .join(attempt.to_string())
            .join(log_name(phase))
    }
}

/// `journal-000042.log`.
pub(crate) fn journal_name(generation: u64) -> String {
    format!("journal-{generation:06}.log")
}

/// The generation of a journal file name, if it is one.
pub(crate) fn journal_generation(name: &str) -> Option<u64> {
    name.strip_prefix("journal-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

/// `work.log`.
pub(crate) fn log_name(phase: Phase) -> String {
    format!("{}.log", phase.as_str())
}

/// The rotated sibling of a log file: `work.log.1`.
pub(crate) fn rotated(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_ids_are_refused() {
        for bad in [
            "", ".", "..", "../x", "a/b", "a\\b", ".hidden", "c:", "a\0b", "a\nb",
        ] {
            assert!(!is_safe_component(bad), "{bad:?}");
        }
        assert!(is_safe_component("3f2c9d7e-0b1a-4c55-9a7e-1d2c3b4a5f60"));
    }

    #[test]
    fn journal_names_round_trip() {
        assert_eq!(journal_name(7), "journal-000007.log");
        assert_eq!(journal_generation("journal-000007.log"), Some(7));
        assert_eq!(journal_generation("journal-12345678.log"), Some(12345678));
        assert_eq!(journal_generation("plan.json"), None);
    }
}
