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

/// The table is cut into this many regions (as a power of two) to order ids by
/// ([`in_table_order`]): a region of a 1M-job table is ~8 KiB.
const REGION_BITS: u32 = 12;

/// A table for fewer ids than this is filled and searched in plan order: it is small enough
/// for the processor's caches (~17 bytes a slot), and ordering cost more than it saved (a
/// 100k-job plan was created in 48 ms instead of 40).
pub(crate) const IN_ORDER_BELOW: usize = 1 << 18;

/// A job index with its id's length (at most 255) and first [`HEAD`] bytes.
#[derive(Debug, Clone, Copy)]
struct Slot {
    index: u32,
    len: u8,
    head: [u8; HEAD],
}

/// An id to insert or look up: its hash, what a slot holds of it, and which one it is (a job
/// index, or the place of a dependency among all of a plan's). Copied out of the id once, in
/// plan order, so that taking keys in the table's order reads no id again (short ones).
#[derive(Debug, Clone, Copy, Default)]
struct Key {
    hash: u64,
    at: u32,
    len: u8,
    head: [u8; HEAD],
}

impl Key {
    fn new(hasher: &Hasher, id: &str, at: u32) -> Key {
        let bytes = id.as_bytes();
        let mut head = [0; HEAD];
        let n = bytes.len().min(HEAD);
        head[..n].copy_from_slice(&bytes[..n]);
        Key {
            hash: hasher.hash_one(id),
            at,
            len: bytes.len().min(255) as u8,
            head,
        }
    }

    /// The slot that indexes this key's id as job `at`.
    fn slot(&self) -> Slot {
        Slot {
            index: self.at,
            len: self.len,
            head: self.head,
        }
    }

    /// Whether `slot` holds this key's id, which is `id()` in full. Only an id longer than
    /// [`HEAD`] is read again (and the slot's, in `text`): a shorter one is the length and
    /// the bytes both hold, padded with zeros alike.
    fn is<'a>(
        &self,
        slot: &Slot,
        id: impl FnOnce() -> &'a str,
        text: &str,
        ends: &[usize],
    ) -> bool {
        slot.len == self.len
            && slot.head == self.head
            && (usize::from(self.len) <= HEAD || id_at(text, ends, slot.index) == id())
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

/// The jobs whose producerId an earlier job has: `(job, first job with that id)`, in job order.
pub(crate) type Repeated = Vec<(usize, usize)>;

impl Producers {
    /// Indexes the jobs' `ids` (job `i`'s is the `i`-th). Returns the index and the jobs whose
    /// id an earlier job has, with that job (which the id keeps pointing at).
    ///
    /// The ids are inserted in the order of the table's slots they land in, not in plan
    /// order: on a 1M-job plan, inserting at random places of a 36 MB table missed the cache
    /// twice an id (~150 ns).
    pub(crate) fn of<'a>(ids: impl ExactSizeIterator<Item = &'a str>) -> (Producers, Repeated) {
        let mut p = Producers {
            text: String::new(),
            ends: Vec::with_capacity(ids.len()),
            table: HashTable::with_capacity(ids.len()),
            hasher: Hasher::default(),
        };
        for id in ids {
            p.text.push_str(id);
            p.ends.push(p.text.len());
        }
        let mut repeated = Vec::new();
        let (text, ends, hasher, table) = (&p.text, &p.ends, &p.hasher, &mut p.table);
        // Past 4 billion jobs an id is not indexed (no such plan fits in memory).
        let keys = (0..ends.len().min(u32::MAX as usize) as u32)
            .map(|at| Key::new(hasher, id_at(text, ends, at), at));
        in_table_order(table.capacity(), keys, |key| {
            let id = || id_at(text, ends, key.at);
            match table.entry(
                key.hash,
                |slot| key.is(slot, id, text, ends),
                |slot| hasher.hash_one(id_at(text, ends, slot.index)),
            ) {
                Entry::Occupied(first) => {
                    repeated.push((key.at as usize, first.get().index as usize));
                }
                Entry::Vacant(room) => {
                    room.insert(key.slot());
                }
            }
        });
        repeated.sort_unstable();
        (p, repeated)
    }

    /// The index of the first job with `id`.
    pub(crate) fn get(&self, id: &str) -> Option<usize> {
        let key = Key::new(&self.hasher, id, 0);
        self.find(&key, || id)
    }

    fn find<'a>(&self, key: &Key, id: impl Fn() -> &'a str) -> Option<usize> {
        self.table
            .find(key.hash, |slot| key.is(slot, &id, &self.text, &self.ends))
            .map(|slot| slot.index as usize)
    }

    /// Whether [`Producers::find_all`] looks its ids up in the table's order (the table is
    /// large enough for that to pay).
    pub(crate) fn orders_lookups(&self) -> bool {
        self.table.capacity() >= IN_ORDER_BELOW
    }

    /// [`Producers::get`] of each of the `count` `ids`, in their order; `id(k)` is the `k`-th
    /// again (read only for the rare id longer than a slot's head that matches one's). Looked
    /// up in the table's order, as [`Producers::of`] inserts: a 1M-job plan's 2M dependencies,
    /// looked up in plan order, missed the cache at each (~65 ns).
    ///
    /// Past [`IN_ORDER_BELOW`] ids, each half of them is sorted and looked up on a thread of
    /// its own (the table is only read): a 1M-job plan's 2M lookups took 130 ms on one
    /// thread, and the plan's creation 55-65 ms less with two.
    pub(crate) fn find_all<'a>(
        &self,
        count: usize,
        ids: impl Iterator<Item = &'a str> + Clone + Send,
        id: impl Fn(usize) -> &'a str + Sync,
    ) -> Vec<Option<u32>> {
        let mut found = vec![None; count];
        if count < IN_ORDER_BELOW || !self.orders_lookups() {
            self.find_into(&mut found, 0, ids, &id);
            return found;
        }
        let half = count / 2;
        let (rest, lookup) = (ids.clone().skip(half), &id);
        let (first, second) = found.split_at_mut(half);
        let (second_half, ()) = crate::parallel::both(
            "orchestrator-graph",
            true,
            move || self.find_into(second, half, rest, lookup),
            || self.find_into(first, 0, ids.clone(), lookup),
        );
        if second_half.is_err() {
            // A lookup panicked (none does): the second half again, here.
            let rest = ids.skip(half);
            self.find_into(&mut found[half..], half, rest, &id);
        }
        found
    }

    /// [`Producers::find_all`] of `found.len()` of `ids`, the `first`-th of all on, into
    /// `found`.
    fn find_into<'a>(
        &self,
        found: &mut [Option<u32>],
        first: usize,
        ids: impl Iterator<Item = &'a str> + Clone,
        id: &impl Fn(usize) -> &'a str,
    ) {
        let keys = ids
            .take(found.len())
            .zip(first.min(u32::MAX as usize) as u32..u32::MAX)
            .map(|(text, at)| Key::new(&self.hasher, text, at));
        in_table_order(self.table.capacity(), keys, |key| {
            let index = self.find(&key, || id(key.at as usize));
            let place = (key.at as usize).checked_sub(first);
            if let Some(place) = place.and_then(|k| found.get_mut(k)) {
                *place = index.and_then(|i| u32::try_from(i).ok());
            }
        });
    }
}

/// Calls `f` with each of `keys`, in the order of the regions of a table of `capacity` their
/// probing starts in (a stable counting sort: the same id keeps its plan order), or in their
/// own order when there are few (then nothing is allocated).
fn in_table_order(capacity: usize, keys: impl Iterator<Item = Key>, f: impl FnMut(Key)) {
    if capacity < IN_ORDER_BELOW {
        return keys.for_each(f);
    }
    let keys: Vec<Key> = keys.collect();
    // hashbrown probes from the hash's low bits, masked to its bucket count: a power of two
    // of which 7/8 is the capacity. (A wrong guess only costs speed.)
    let buckets = (capacity * 8 / 7).next_power_of_two() as u64;
    let shift = buckets.trailing_zeros().saturating_sub(REGION_BITS);
    let region = |key: &Key| ((key.hash & (buckets - 1)) >> shift) as usize;
    let mut starts = vec![0usize; (1 << REGION_BITS) + 1];
    for key in &keys {
        starts[region(key) + 1] += 1;
    }
    for r in 1..starts.len() {
        starts[r] += starts[r - 1];
    }
    let mut sorted = vec![Key::default(); keys.len()];
    for key in keys {
        let place = &mut starts[region(&key)];
        sorted[*place] = key;
        *place += 1;
    }
    sorted.into_iter().for_each(f);
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

    fn of(ids: &[&str]) -> (Producers, Repeated) {
        Producers::of(ids.iter().copied())
    }

    #[test]
    fn finds_each_id_and_the_first_of_a_repeated_one() {
        let (p, repeated) = of(&["aaa", "bbb", "", "aaa", "ccc", "aaa"]);
        assert_eq!(repeated, [(3, 0), (5, 0)]);
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
        let (p, repeated) = of(&ids);
        assert!(repeated.is_empty());
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

    /// Enough ids to be inserted and looked up in the table's order, not plan order, each
    /// half of the lookups on a thread of its own: the first job with a repeated id (short or
    /// long) is still the one found, and every id is found where plan order finds it.
    #[test]
    fn ids_taken_in_table_order_find_what_plan_order_finds() {
        let n = IN_ORDER_BELOW + 5_000;
        let ids: Vec<String> = (0..n)
            .map(|i| match i % 7 {
                // Repeats of earlier ids, short and long (past HEAD bytes).
                3 => format!("job-{}", i / 2),
                5 => format!("a-long-shared-head-{}", i / 3),
                _ if i % 2 == 0 => format!("job-{i}"),
                _ => format!("a-long-shared-head-{i}"),
            })
            .collect();
        let (p, repeated) = Producers::of(ids.iter().map(String::as_str));
        let mut first = std::collections::HashMap::new();
        let mut expected = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            if let Some(&f) = first.get(id) {
                expected.push((i, f));
            } else {
                first.insert(id, i);
            }
        }
        assert!(expected.len() > 1000, "the ids repeat");
        assert_eq!(repeated, expected);
        let lookups: Vec<String> = (0..n)
            .map(|i| match i % 3 {
                0 => format!("job-{}", n - i),
                1 => format!("a-long-shared-head-{i}"),
                _ => format!("absent-{i}"),
            })
            .collect();
        let found = p.find_all(n, lookups.iter().map(String::as_str), |k| &lookups[k]);
        assert_eq!(found.len(), n);
        for (k, id) in lookups.iter().enumerate() {
            let want = first.get(id).map(|&i| i as u32);
            assert_eq!(found[k], want, "{id}");
            assert_eq!(p.get(id), want.map(|i| i as usize), "{id}");
        }
    }
}
