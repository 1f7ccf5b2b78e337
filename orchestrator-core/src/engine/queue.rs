//! The ready queue: longest remaining critical path first, then most dependents, then plan order.

use crate::ids::NodeIndex;
use crate::plan::PlanGraph;

/// The ready nodes as a set of their places in the graph's scheduling order
/// ([`PlanGraph::rank`], sorted once when the graph is built), so that the first ready node is
/// the lowest set bit: a bitmap with a summary bitmap per level above it, each bit of which
/// says whether a word below it is not zero. Push and pop touch one word per level (four
/// levels for a million nodes, 125 KiB in all), where a binary heap of a hundred thousand
/// ready nodes missed the cache at every step of every pop.
#[derive(Debug, Default)]
pub(crate) struct ReadyQueue {
    /// `levels[0]` has a bit per rank; the last level is one word.
    levels: Vec<Vec<u64>>,
}

impl ReadyQueue {
    /// Queues `n` (once: a node queued already stays queued once).
    pub(crate) fn push(&mut self, graph: &PlanGraph, n: NodeIndex) {
        let Some(rank) = graph.rank(n) else { return };
        if rank >= self.capacity() {
            self.grow(graph.node_count().max(rank + 1));
        }
        let mut i = rank;
        for level in &mut self.levels {
            let word = &mut level[i / 64];
            let was_empty = *word == 0;
            *word |= 1 << (i % 64);
            if !was_empty {
                break;
            }
            i /= 64;
        }
    }

    /// Takes the queued node that runs first. `graph` is the one the nodes were pushed with.
    pub(crate) fn pop(&mut self, graph: &PlanGraph) -> Option<NodeIndex> {
        loop {
            let rank = self.take_first()?;
            if let Some(n) = graph.node_at_rank(rank) {
                return Some(n);
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        for level in &mut self.levels {
            level.fill(0);
        }
    }

    fn capacity(&self) -> usize {
        self.levels.first().map_or(0, |l| l.len() * 64)
    }

    /// Removes and returns the lowest rank queued.
    fn take_first(&mut self) -> Option<usize> {
        if self.levels.last()?.first().is_none_or(|&w| w == 0) {
            return None;
        }
        // Down from the top: each level's lowest set bit names the word below to look in.
        let mut i = 0;
        for level in self.levels.iter().rev() {
            i = i * 64 + level[i].trailing_zeros() as usize;
        }
        let rank = i;
        for level in &mut self.levels {
            let word = &mut level[i / 64];
            *word &= !(1 << (i % 64));
            if *word != 0 {
                break;
            }
            i /= 64;
        }
        Some(rank)
    }

    /// Room for ranks below `ranks`, keeping what is queued.
    fn grow(&mut self, ranks: usize) {
        let mut bottom = self.levels.first().cloned().unwrap_or_default();
        bottom.resize(ranks.div_ceil(64).max(1), 0);
        let mut levels = vec![bottom];
        while let Some(below) = levels.last().filter(|l| l.len() > 1) {
            let mut level = vec![0u64; below.len().div_ceil(64)];
            for (w, _) in below.iter().enumerate().filter(|(_, &word)| word != 0) {
                level[w / 64] |= 1 << (w % 64);
            }
            levels.push(level);
        }
        self.levels = levels;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;
    use crate::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};

    fn job(id: &str, deps: &[String]) -> JobSpec {
        JobSpec::new(id, "t", WorkSpec::shell("true")).depends_on(deps.iter().cloned())
    }

    #[test]
    fn pops_longest_path_then_most_dependents_then_plan_order() {
        let deps = |d: &[&str]| d.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let spec = PlanSpec::new("q")
            .isolation(Isolation::None)
            .job(job("aaa", &[])) // 0: path 1
            .job(job("bbb", &[])) // 1: path 2, 1 dependent
            .job(job("ccc", &[])) // 2: path 2, 2 dependents
            .job(job("ddd", &deps(&["bbb", "ccc"]))) // 3
            .job(job("eee", &deps(&["ccc"]))) // 4
            .job(job("fff", &[])); // 5: path 1
        let g = PlanGraph::build(&spec).expect("valid");
        let mut q = ReadyQueue::default();
        for n in [0, 5, 1, 2, 5] {
            q.push(&g, n);
        }
        assert_eq!(
            std::iter::from_fn(|| q.pop(&g)).collect::<Vec<_>>(),
            vec![2, 1, 0, 5]
        );
        q.push(&g, 4);
        q.clear();
        assert_eq!(q.pop(&g), None);
    }

    proptest! {
        /// Against the queue's definition: the set of queued nodes, the first being the
        /// greatest (critical path, dependents, reversed index), over random graphs (up to
        /// three levels of bitmap) and random pushes, pops and clears.
        #[test]
        fn pops_what_a_sorted_set_of_priorities_pops(
            nodes in 1usize..5_000,
            seed in any::<u64>(),
            ops in proptest::collection::vec((0u8..10, any::<u32>()), 1..400),
        ) {
            let mut next = crate::plan::graph::tests::xorshift(seed);
            let id = |i: usize| format!("job-{i}");
            let mut spec = PlanSpec::new("q").isolation(Isolation::None);
            for i in 0..nodes {
                let deps: Vec<String> = (0..next() % 3)
                    .filter(|_| i > 0)
                    .map(|_| id((next() % i as u64) as usize))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                spec = spec.job(job(&id(i), &deps));
            }
            let g = PlanGraph::build(&spec).expect("valid");
            let key = |n: NodeIndex| {
                let p = g.priority(n);
                (p.critical_path, p.dependents, std::cmp::Reverse(n))
            };
            let mut q = ReadyQueue::default();
            let mut model = BTreeSet::new();
            for (op, x) in ops {
                match op {
                    0..=5 => {
                        let n = x as usize % nodes;
                        q.push(&g, n);
                        model.insert((key(n), n));
                    }
                    6..=8 => {
                        let want = model.pop_last().map(|(_, n)| n);
                        prop_assert_eq!(q.pop(&g), want);
                    }
                    _ => {
                        q.clear();
                        model.clear();
                    }
                }
            }
            while let Some((_, n)) = model.pop_last() {
                prop_assert_eq!(q.pop(&g), Some(n));
            }
            prop_assert_eq!(q.pop(&g), None);
        }
    }
}
