//! producerId → node index for [`super::PlanGraph`]: every id in one buffer and a hash table of
//! node indices looked up through it, where a map keyed by `String` would hold a copy of each
//! id in an allocation of its own (on a 1M-job plan, ~60 MB more, and a cache miss per id).
//! Each slot of the table also holds the id's length and first bytes: a short id (most are)
//! is confirmed in the slot itself, without reading the buffer. On a 1M-job plan each
//! dependency lookup otherwise read two more places of a large buffer at random.

use std::hash::BuildHasher;

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;

/// Hashed with foldhash: a plan's own ids need no guard against adversarial keys (std's
/// SipHash), and hashing 100k of them is on the path of creating every plan. Of foldhash,
/// rustc-hash and the former hand-written FxHash, foldhash built a 100k-job graph in the fewest
/// instructions. Fixed seed: the table is only looked up, never iterated.
type Hasher = foldhash::fast::FixedState;

/// Bytes of an id a slot holds.
const HEAD: usize = 11;

/// A job index with its id's length (at most 255) and first [`HEAD`] bytes.
#[derive(Debug, Clone, Copy)]
struct Slot {
    index: u32,
    len: u8,
    head: [u8; HEAD],
}

impl Slot {
    fn new(index: u32, id: &str) -> Slot {
        let bytes = id.as_bytes();
        let mut head = [0; HEAD];
        let n = bytes.len().min(HEAD);
        head[..n].copy_from_slice(&bytes[..n]);
        Slot {
            index,
            len: bytes.len().min(255) as u8,
            head,
        }
    }

    /// Whether this slot is `id`'s; only an id longer than [`HEAD`] reads the buffer.
    fn is(&self, id: &str, text: &str, ends: &[usize]) -> bool {
        let bytes = id.as_bytes();
        if usize::from(self.len) != bytes.len().min(255) {
            return false;
        }
        if bytes.len() <= HEAD {
            return self.head[..bytes.len()] == *bytes;
        }
        self.head == bytes[..HEAD] && id_at(text, ends, self.index) == id
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Producers {
    /// Every job's id, one after the other.
    text: String,
    /// Where job `i`'s id ends in `text` (it starts where job `i - 1`'s ends).
    ends: Vec<usize>,
    /// Job indices, found by their id's hash; the first job with an id holds it.
    table: HashTable<Slot>,
    hasher: Hasher,
}

impl Producers {
    /// Room for `jobs` ids.
    pub(crate) fn with_capacity(jobs: usize) -> Self {
        Producers {
            text: String::new(),
            ends: Vec::with_capacity(jobs),
            table: HashTable::with_capacity(jobs),
            hasher: Hasher::default(),
        }
    }

    /// Adds the next job's id (job `i` is the `i`-th added). A repeated id keeps pointing at
    /// its first job, whose index is returned.
    pub(crate) fn push(&mut self, id: &str) -> Option<usize> {
        let Ok(index) = u32::try_from(self.ends.len()) else {
            // More than 4 billion jobs: the id is not indexed (no such plan fits in memory).
            return None;
        };
        self.text.push_str(id);
        self.ends.push(self.text.len());
        let (text, ends, hasher) = (&self.text, &self.ends, &self.hasher);
        let hash = hasher.hash_one(id);
        match self.table.entry(
            hash,
            |slot| slot.is(id, text, ends),
            |slot| hasher.hash_one(id_at(text, ends, slot.index)),
        ) {
            Entry::Occupied(first) => Some(first.get().index as usize),
            Entry::Vacant(room) => {
                room.insert(Slot::new(index, id));
                None
            }
        }
    }

    /// The index of the first job with `id`.
    pub(crate) fn get(&self, id: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(id);
        self.table
            .find(hash, |slot| slot.is(id, &self.text, &self.ends))
            .map(|slot| slot.index as usize)
    }
}

/// Job `k`'s id.
fn id_at<'a>(text: &'a str, ends: &[usize], k: u32) -> &'a str {
    let k = k as usize;
    let start = if k == 0 { 0 } else { ends[k - 1] };
    text.get(start..ends[k]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_id_and_the_first_of_a_repeated_one() {
        let mut p = Producers::with_capacity(2);
        let firsts: Vec<Option<usize>> = ["aaa", "bbb", "", "aaa", "ccc"]
            .into_iter()
            .map(|id| p.push(id))
            .collect();
        assert_eq!(firsts, [None, None, None, Some(0), None]);
        assert_eq!(p.get("aaa"), Some(0));
        assert_eq!(p.get("bbb"), Some(1));
        assert_eq!(p.get(""), Some(2));
        assert_eq!(p.get("ccc"), Some(4));
        assert_eq!(p.get("aa"), None);
        assert_eq!(p.get("aaab"), None);
    }

    #[test]
    fn ids_longer_than_a_slot_are_told_apart_by_their_whole_text() {
        let long = "x".repeat(300);
        let ids = [
            "shared-head-one",
            "shared-head-two",
            "shared-head",
            "shared-head-",
            long.as_str(),
        ];
        let mut p = Producers::with_capacity(ids.len());
        for id in ids {
            p.push(id);
        }
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(p.get(id), Some(i), "{id}");
        }
        assert_eq!(p.get("shared-head-three"), None);
        assert_eq!(p.get("shared-head-on"), None);
        assert_eq!(p.get(&"x".repeat(299)), None);
        assert_eq!(
            p.get(&"x".repeat(301)),
            None,
            "lengths past 255 compare in full"
        );
    }

    #[test]
    fn many_ids_survive_the_table_growing() {
        let mut p = Producers::with_capacity(0);
        for i in 0..10_000 {
            p.push(&format!("job-{i}"));
        }
        assert!((0..10_000).all(|i| p.get(&format!("job-{i}")) == Some(i)));
    }
}
