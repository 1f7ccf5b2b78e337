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

/// The ids of a new plan's nodes, derived from the plan's id and each node's index, so that a
/// store need not write them: a stored node whose id is derived at its index can be written
/// as nothing (see the file store's snapshots, where a 10,000-node plan's fresh ids were 390
/// of its 880 KB, all flushed before its first job starts).
///
/// A derived id is a v4-formatted UUID: its first 8 hex digits (the folder name of the
/// node's worktree, [`NodeId::short`]) are a bijective mix of the index and the plan's id,
/// distinct for every node of the plan; the other 28 characters are the same for all of them
/// and taken, scrambled, from the plan's id, so that two plans' nodes do not share ids. Only a
/// plan whose id is a lower-case hyphenated UUID (as [`PlanId::random`] makes) has them, and
/// only for the first 2^32 nodes; nodes added later (a reshape) get random ids.
///
/// ```
/// use orchestrator_core::ids::{DerivedIds, PlanId};
/// let plan = PlanId::random();
/// let ids = DerivedIds::of(&plan).expect("a UUID plan id");
/// let (a, b) = (ids.id(0), ids.id(1));
/// assert_ne!(a.short(), b.short());
/// assert!(ids.is(&a, 0) && !ids.is(&a, 1));
/// assert_eq!(a, DerivedIds::of(&plan).expect("again").id(0));
/// assert!(DerivedIds::of(&PlanId::from("not-a-uuid")).is_none());
/// ```
#[derive(Debug, Clone)]
pub struct DerivedIds {
    key: u32,
    /// Characters 8..36 of every derived id: `-xxxx-4xxx-yxxx-xxxxxxxxxxxx`.
    tail: [u8; 28],
}

impl DerivedIds {
    /// The derived ids of the plan `plan`, if its id is a lower-case hyphenated UUID.
    pub fn of(plan: &PlanId) -> Option<Self> {
        let uuid = uuid::Uuid::try_parse(plan.as_str()).ok()?;
        let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
        if uuid.hyphenated().encode_lower(&mut buf) != plan.as_str() {
            return None;
        }
        let bits = uuid.as_u128();
        // The tail: the plan's bits scrambled (a fixed odd multiplier is a bijection), made a
        // v4 UUID's version and variant.
        let scrambled = bits
            .rotate_left(64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
        let tailed = uuid::Builder::from_u128(scrambled)
            .with_version(uuid::Version::Random)
            .with_variant(uuid::Variant::RFC4122)
            .into_uuid();
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        tailed.hyphenated().encode_lower(&mut text);
        let mut tail = [0u8; 28];
        tail.copy_from_slice(&text[8..]);
        Some(DerivedIds {
            key: (bits >> 96) as u32 ^ bits as u32,
            tail,
        })
    }

    /// The id of the node at `index` (random past 2^32 nodes: see [`DerivedIds`]).
    pub fn id(&self, index: NodeIndex) -> NodeId {
        match self.head(index) {
            Some(head) => {
                let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
                text[..8].copy_from_slice(&head);
                text[8..].copy_from_slice(&self.tail);
                // Hex digits and hyphens only: always UTF-8.
                NodeId(Arc::from(std::str::from_utf8(&text).unwrap_or_default()))
            }
            None => NodeId::random(),
        }
    }

    /// Whether `id` is the id derived for the node at `index`.
    pub fn is(&self, id: &NodeId, index: NodeIndex) -> bool {
        let bytes = id.as_str().as_bytes();
        bytes.len() == uuid::fmt::Hyphenated::LENGTH
            && bytes[8..] == self.tail
            && self.head(index).is_some_and(|head| bytes[..8] == head)
    }

    /// The first 8 characters of the id at `index`: the hex digits of a bijective mix of the
    /// index (`lowbias32`, whose steps are each invertible), none past `u32::MAX`.
    fn head(&self, index: NodeIndex) -> Option<[u8; 8]> {
        let mut x = u32::try_from(index).ok()? ^ self.key;
        x ^= x >> 16;
        x = x.wrapping_mul(0x7feb_352d);
        x ^= x >> 15;
        x = x.wrapping_mul(0x846c_a68b);
        x ^= x >> 16;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut head = [0u8; 8];
        for (i, digit) in head.iter_mut().enumerate() {
            *digit = HEX[((x >> (28 - 4 * i)) & 0xf) as usize];
        }
        Some(head)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn derived_ids_are_distinct_v4_uuids_and_recognized_only_at_their_index() {
        let plan = PlanId::random();
        let ids = DerivedIds::of(&plan).expect("a random plan id is a UUID");
        let mut shorts = HashSet::new();
        for i in 0..200_000 {
            let id = ids.id(i);
            let uuid = uuid::Uuid::try_parse(id.as_str()).expect("a UUID");
            assert_eq!(uuid.get_version(), Some(uuid::Version::Random), "{id}");
            assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122, "{id}");
            // The worktree folder names of one plan's nodes never collide.
            assert!(shorts.insert(id.short().to_owned()), "{id} at {i}");
            assert!(ids.is(&id, i));
            assert!(!ids.is(&id, i + 1));
        }
        assert!(!ids.is(&NodeId::random(), 0));
        assert!(!ids.is(&NodeId::from("short"), 0));
        // Another plan's nodes have other ids, and are not taken for this plan's.
        let other = DerivedIds::of(&PlanId::random()).expect("UUID");
        assert_ne!(other.id(0), ids.id(0));
        assert!(!ids.is(&other.id(0), 0));
        // Past 2^32 nodes, ids are random and never taken for derived.
        let far = ids.id(1 << 32);
        assert!(!ids.is(&far, 1 << 32));
    }

    #[test]
    fn only_lower_case_hyphenated_uuids_have_derived_ids() {
        let plan = PlanId::random();
        assert!(DerivedIds::of(&plan).is_some());
        for other in [
            plan.as_str().to_uppercase(),
            plan.as_str().replace('-', ""),
            format!("{{{plan}}}"),
            "p1".to_owned(),
            String::new(),
        ] {
            assert!(
                DerivedIds::of(&PlanId::from(other.as_str())).is_none(),
                "{other}"
            );
        }
    }
}
