//! The ready queue: longest remaining critical path first, then most dependents, then plan order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::ids::NodeIndex;
use crate::plan::{PlanGraph, Priority};

#[derive(Debug, Default)]
pub(crate) struct ReadyQueue {
    heap: BinaryHeap<(Priority, Reverse<NodeIndex>)>,
}

impl ReadyQueue {
    pub(crate) fn push(&mut self, graph: &PlanGraph, n: NodeIndex) {
        self.heap.push((graph.priority(n), Reverse(n)));
    }

    pub(crate) fn pop(&mut self) -> Option<NodeIndex> {
        self.heap.pop().map(|(_, Reverse(n))| n)
    }

    pub(crate) fn clear(&mut self) {
        self.heap.clear();
    }
}
