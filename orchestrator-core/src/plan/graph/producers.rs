//! producerId → node index for [`super::PlanGraph`]: every id in one buffer and a hash table of
//! node indices looked up through it, where a map keyed by `String` would hold a copy of each
//! id in an allocation of its own (on a 1M-job plan, ~60 MB more, and a cache miss per id).

use std::hash::BuildHasher;

use hashbrown::HashTable;

/// Hashed with foldhash: a plan's own ids need no guard against adversarial keys (std's
/// SipHash), and hashing 100k of them is on the path of creating every plan. Of foldhash,
/// rustc-hash and the former hand-written FxHash, foldhash built a 100k-job graph in the fewest
/// instructions. Fixed seed: the table is only looked up, never iterated.
type Hasher = foldhash::fast::FixedState;

#[derive(Debug, Clone, Default)]
pub(super) struct Producers {
    /// Every job's id, one after the other.
    text: String,
    /// Where job `i`'s id ends in `text` (it starts where job `i - 1`'s ends).
    ends: Vec<usize>,
    /// Job indices, found by their id's hash; the first job with an id holds it.
    table: HashTable<u32>,
    hasher: Hasher,
}

impl Producers {
    /// Room for `jobs` ids.
    pub(super) fn with_capacity(jobs: usize) -> Self {
        Producers {
            text: String::new(),
            ends: Vec::with_capacity(jobs),
            table: HashTable::with_capacity(jobs),
            hasher: Hasher::default(),
        }
    }

    /// Adds the next job's id (job `i` is the `i`-th added). A repeated id keeps pointing at
    /// its first job.
    pub(super) fn push(&mut self, id: &str) {
        let Ok(index) = u32::try_from(self.ends.len()) else {
            // More than 4 billion jobs: the id is not indexed (no such plan fits in memory).
            return;
        };
        self.text.push_str(id);
        self.ends.push(self.text.len());
        let (text, ends, hasher) = (&self.text, &self.ends, &self.hasher);
        let hash = hasher.hash_one(id);
        self.table
            .entry(
                hash,
                |&k| id_at(text, ends, k) == id,
                |&k| hasher.hash_one(id_at(text, ends, k)),
            )
            .or_insert(index);
    }

    /// The index of the first job with `id`.
    pub(super) fn get(&self, id: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(id);
        self.table
            .find(hash, |&k| id_at(&self.text, &self.ends, k) == id)
            .map(|&k| k as usize)
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
        for id in ["aaa", "bbb", "", "aaa", "ccc"] {
            p.push(id);
        }
        assert_eq!(p.get("aaa"), Some(0));
        assert_eq!(p.get("bbb"), Some(1));
        assert_eq!(p.get(""), Some(2));
        assert_eq!(p.get("ccc"), Some(4));
        assert_eq!(p.get("aa"), None);
        assert_eq!(p.get("aaab"), None);
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
