//! A fast, non-cryptographic hasher for maps keyed by plan-author strings (producerIds).
//!
//! SipHash (std's default) guards against adversarial keys; a plan's own ids need no such
//! guard, and hashing 100k of them is on the path of creating every plan.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The multiply-rotate hash used by rustc (FxHash).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        // The multiply leaves the low bits depending only on the low input bits, and hashbrown
        // picks buckets by low bits: ids sharing a prefix (`n0000001`, `n0000002`) would all
        // collide. A splitmix64 finalizer spreads every input bit over the whole word.
        let mut h = self.0;
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }
}

/// A `HashMap` with [`FxHasher`].
pub(crate) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_with_a_common_prefix_spread_over_buckets() {
        use std::hash::BuildHasher;
        let b = BuildHasherDefault::<FxHasher>::default();
        let low: std::collections::HashSet<u64> = (0..1000)
            .map(|i| b.hash_one(format!("n{i:07}")) & 0xfff)
            .collect();
        assert!(
            low.len() > 700,
            "only {} distinct low-bit patterns",
            low.len()
        );
    }

    #[test]
    fn distinct_keys_stay_distinct() {
        let mut m: FxHashMap<String, usize> = FxHashMap::default();
        for i in 0..10_000 {
            m.insert(format!("job-{i}"), i);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.get("job-1234"), Some(&1234));
        assert_eq!(m.get("job-x"), None);
    }
}
