//! The ready queue: longest remaining critical path first, then most dependents, then plan order.

use std::collections::BinaryHeap;

use crate::ids::NodeIndex;
use crate::plan::PlanGraph;

/// A max-heap of packed keys: critical path (high 32 bits), dependents, then the complement of
/// the node index (so earlier nodes win ties). One integer compare per step keeps `pop` cheap
/// when hundreds of thousands of nodes are ready at once.
#[derive(Debug, Default)]
pub(crate) struct ReadyQueue {
    heap: BinaryHeap<u128>,
}

impl ReadyQueue {
    pub(crate) fn push(&mut self, graph: &PlanGraph, n: NodeIndex) {
        let p = graph.priority(n);
        let key = (u128::from(p.critical_path) << 96)
            | (u128::from(p.dependents) << 64)
            | u128::from(u64::MAX - n as u64);
        self.heap.push(key);
    }

    pub(crate) fn pop(&mut self) -> Option<NodeIndex> {
        self.heap
            .pop()
            .map(|key| (u64::MAX - (key as u64)) as NodeIndex)
    }

    pub(crate) fn clear(&mut self) {
        self.heap.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};

    #[test]
    fn pops_longest_path_then_most_dependents_then_plan_order() {
        let job = |id: &str, deps: &[&str]| {
            JobSpec::new(id, "t", WorkSpec::shell("true")).depends_on(deps.iter().copied())
        };
        let spec = PlanSpec::new("q")
            .isolation(Isolation::None)
            .job(job("aaa", &[])) // 0: path 1
            .job(job("bbb", &[])) // 1: path 2, 1 dependent
            .job(job("ccc", &[])) // 2: path 2, 2 dependents
            .job(job("ddd", &["bbb", "ccc"])) // 3
            .job(job("eee", &["ccc"])) // 4
            .job(job("fff", &[])); // 5: path 1
        let g = PlanGraph::build(&spec).expect("valid");
        let mut q = ReadyQueue::default();
        for n in [0, 5, 1, 2] {
            q.push(&g, n);
        }
        assert_eq!(
            std::iter::from_fn(|| q.pop()).collect::<Vec<_>>(),
            vec![2, 1, 0, 5]
        );
    }
}
