//! Identifiers of plans and nodes.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// A fresh random (v4 UUID) id.
            pub fn random() -> Self {
                let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
                $name(Arc::from(&*uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf)))
            }

            /// The id as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The first 8 characters, used in folder names (`.worktrees/<id8>`).
            pub fn short(&self) -> &str {
                self.0.get(..8).unwrap_or(&self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s.into())
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.into())
            }
        }
    };
}

id_type!(
    /// Identifies a plan (a UUID string). Cheap to clone.
    PlanId
);
id_type!(
    /// Identifies a node of a plan (a UUID string), distinct from the job's producerId.
    NodeId
);

/// Position of a node in its plan (jobs in file order, then the snapshot-validation node).
pub type NodeIndex = usize;

/// Milliseconds since the Unix epoch.
pub type Millis = u64;

/// Now, in milliseconds since the Unix epoch.
pub fn now_millis() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
