//! The plan's DAG: dependencies, roots, leaves, topological order, scheduling priorities, and
//! the auto-injected snapshot-validation node. Adjacency is kept in compressed rows built
//! straight from the edge list; petgraph is used only to report cycles, on the error path.

pub(crate) mod producers;

use std::collections::HashMap;
use std::sync::OnceLock;

use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex as PgIndex};
use petgraph::Direction;

use crate::ids::NodeIndex;
use crate::plan::{Isolation, PlanSpec, ValidationError, ValidationErrors};

/// producerId of the auto-injected snapshot-validation node.
pub const SNAPSHOT_PRODUCER_ID: &str = "__snapshot-validation__";

/// The DAG of a plan. Node `i < jobs.len()` is job `i`; with worktree isolation, node
/// `jobs.len()` is the snapshot-validation node, which depends on every user leaf.
#[derive(Debug, Clone)]
pub struct PlanGraph {
    /// Jobs plus the snapshot node, if any.
    nodes: usize,
    jobs: usize,
    snapshot: Option<NodeIndex>,
    /// A topological order: plan order when every dependency comes earlier in the plan,
    /// else Kahn's.
    order: Vec<NodeIndex>,
    priority: Vec<Priority>,
    /// The scheduling order, sorted on first use: only a plan that runs needs it (a graph
    /// built to validate a plan or to show it does not).
    schedule: OnceLock<Schedule>,
    /// Each node's place in `order`; empty when that is plan order (the place is the index).
    topo_pos: Vec<u32>,
    /// Adjacency in compressed rows, built once: the scheduler walks dependents on every
    /// completion, and contiguous rows beat chasing petgraph's edge lists on large plans.
    dependents: Csr,
    dependencies: Csr,
    by_producer: producers::Producers,
    /// Jobs that some job names as its `parent` (they have sub-jobs), sorted; empty in most
    /// plans, so a launch tells a job without sub-jobs from one with them without reading
    /// its dependencies' specs.
    parents: Vec<NodeIndex>,
    /// Jobs that are sub-agents (SPEC §15), sorted; empty in most plans (as `parents`).
    sub_agents: Vec<NodeIndex>,
}

/// The nodes in the order the scheduler prefers them, and each node's place in it.
#[derive(Debug, Clone)]
struct Schedule {
    /// Each node's place (0 runs first, see [`PlanGraph::rank`]).
    rank: Vec<u32>,
    /// The nodes in that order.
    by_rank: Vec<u32>,
}

/// Scheduling priority of a node: longest remaining critical path, then most dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority {
    /// Nodes on the longest path from this node to a sink, itself included.
    pub critical_path: u32,
    /// Direct dependents.
    pub dependents: u32,
}

impl PlanGraph {
    /// Builds the graph, reporting unknown dependencies, self-dependencies and cycles (every
    /// one of them, each naming the job).
    ///
    /// ```
    /// use orchestrator_core::plan::{JobSpec, PlanGraph, PlanSpec, WorkSpec};
    /// let plan = PlanSpec::new("p")
    ///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")))
    ///     .job(JobSpec::new("bbb", "b", WorkSpec::shell("true")).depends_on(["aaa"]));
    /// let g = PlanGraph::build(&plan).unwrap();
    /// assert_eq!(g.roots(), vec![0]);
    /// assert_eq!(g.user_leaves(), vec![1]);
    /// assert_eq!(g.snapshot(), Some(2)); // worktree isolation injects snapshot validation
    /// ```
    pub fn build(spec: &PlanSpec) -> Result<PlanGraph, ValidationErrors> {
        let ids = spec.jobs.iter().map(|job| job.producer_id.as_str());
        let (by_producer, _) = producers::Producers::of(ids);
        Self::build_indexed(spec, by_producer).map_err(|(errors, _)| errors)
    }

    /// [`PlanGraph::build`] with the jobs' producerIds already indexed, in plan order (the
    /// validator indexes them as it checks them: a 1M-job plan is hashed once, not twice). On
    /// failure the index comes back with the errors.
    pub(crate) fn build_indexed(
        spec: &PlanSpec,
        by_producer: producers::Producers,
    ) -> Result<PlanGraph, (ValidationErrors, producers::Producers)> {
        let jobs = spec.jobs.len();
        let with_snapshot = spec.isolation == Isolation::Worktree;
        let total = Self::node_count_of(spec);
        // Edge `a -> b`: `b` depends on `a`; in the order the jobs list them.
        let mut edges: Vec<(u32, u32)> = Vec::with_capacity(jobs * 2 + 1);
        let mut errors = Vec::new();
        // A job listing the same dependency twice gets one edge; checked per job so that a
        // node with 100k dependents costs O(1) per edge, not a scan of its edge list.
        let mut seen: Vec<NodeIndex> = Vec::new();
        // Whether every dependency comes earlier in the plan (as in most plans): then plan
        // order is a topological order, and no sort (a pass of random reads over the rows of
        // a 1M-node plan) is needed.
        let mut forward = true;
        // Jobs with sub-jobs and sub-agents, found in this pass.
        let mut parents: Vec<NodeIndex> = Vec::new();
        let mut sub_agents: Vec<NodeIndex> = Vec::new();
        // Each dependency's job: found all at once on a large plan, else where it is listed.
        let ordered = dependency_jobs(spec, &by_producer);
        let job_of = |i: usize, d: usize, dep: &str| match &ordered {
            Some((starts, found)) => found
                .get(starts[i] + d)
                .copied()
                .flatten()
                .map(|j| j as usize),
            None => by_producer.get(dep),
        };
        for (i, job) in spec.jobs.iter().enumerate() {
            parents.extend(job.extra.parent.as_deref().and_then(|p| by_producer.get(p)));
            if job.extra.sub_agent.is_some() {
                sub_agents.push(i);
            }
            seen.clear();
            for (d, dep) in job.dependencies.iter().enumerate() {
                let field = || format!("dependencies[{d}]");
                match job_of(i, d, dep) {
                    None => errors.push(ValidationError::new(
                        Some(job),
                        field(),
                        dep,
                        "unknown dependency: no job has this producerId",
                    )),
                    Some(j) if j == i => errors.push(ValidationError::new(
                        Some(job),
                        field(),
                        dep,
                        "a job cannot depend on itself",
                    )),
                    Some(j) => {
                        if !seen.contains(&j) {
                            forward &= j < i;
                            seen.push(j);
                            edges.push((j as u32, i as u32));
                        }
                    }
                }
            }
        }
        let snapshot = with_snapshot.then_some(jobs);
        if let Some(sv) = snapshot {
            let mut has_dependents = vec![false; jobs];
            for &(from, _) in &edges {
                has_dependents[from as usize] = true;
            }
            let leaves = (0..jobs).filter(|&leaf| !has_dependents[leaf]);
            edges.extend(leaves.map(|leaf| (leaf as u32, sv as u32)));
        }
        let dependents = Csr::build(total, &edges, |&(from, to)| (from, to));
        let dependencies = Csr::build(total, &edges, |&(from, to)| (to, from));
        // The snapshot node comes after every job, so its edges keep `forward` as it is.
        let sorted = if forward {
            None
        } else {
            match kahn(&dependents, &dependencies) {
                Some(order) => Some(order),
                None => {
                    errors.extend(cycles(total, &edges, spec));
                    None
                }
            }
        };
        if !errors.is_empty() {
            return Err((ValidationErrors(errors), by_producer));
        }
        parents.sort_unstable();
        parents.dedup();
        let mut g = PlanGraph {
            parents,
            sub_agents,
            nodes: total,
            jobs,
            snapshot,
            order: Vec::new(),
            priority: Vec::new(),
            schedule: OnceLock::new(),
            topo_pos: Vec::new(),
            dependents,
            dependencies,
            by_producer,
        };
        match sorted {
            Some(order) => {
                g.topo_pos = vec![0; total];
                for (i, &n) in order.iter().enumerate() {
                    g.topo_pos[n] = i as u32;
                }
                g.order = order;
            }
            None => g.order = (0..total).collect(),
        }
        g.priority = g.compute_priorities();
        Ok(g)
    }

    fn compute_priorities(&self) -> Vec<Priority> {
        let mut prio = vec![Priority::default(); self.node_count()];
        for &n in self.order.iter().rev() {
            let mut longest = 0;
            let mut count = 0;
            for d in self.dependents(n) {
                longest = longest.max(prio[d].critical_path);
                count += 1;
            }
            prio[n] = Priority {
                critical_path: longest + 1,
                dependents: count,
            };
        }
        prio
    }

    /// The nodes by priority, highest first, then in plan order, sorted once so that the
    /// ready queue orders nodes by their place in it (see `engine/queue.rs`).
    fn schedule(&self) -> &Schedule {
        self.schedule.get_or_init(|| {
            let by_rank = self.scheduling_order();
            let mut rank = vec![0; self.node_count()];
            for (r, &n) in by_rank.iter().enumerate() {
                rank[n as usize] = r as u32;
            }
            Schedule { rank, by_rank }
        })
    }

    fn scheduling_order(&self) -> Vec<u32> {
        // Packed keys, one integer compare per step: critical path (high 32 bits), dependents,
        // then the complement of the node index (earlier nodes first).
        let mut keys: Vec<u128> = (self.priority.iter().enumerate())
            .map(|(n, p)| {
                (u128::from(p.critical_path) << 96)
                    | (u128::from(p.dependents) << 64)
                    | u128::from(u64::MAX - n as u64)
            })
            .collect();
        keys.sort_unstable_by(|a, b| b.cmp(a));
        keys.into_iter()
            .map(|key| (u64::MAX - key as u64) as u32)
            .collect()
    }

    /// The number of nodes the graph of `spec` has, without building it: its jobs, plus the
    /// snapshot node with worktree isolation.
    pub(crate) fn node_count_of(spec: &PlanSpec) -> usize {
        spec.jobs.len() + usize::from(spec.isolation == Isolation::Worktree)
    }

    /// Number of nodes (jobs plus the snapshot node, if any).
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// Number of user jobs.
    pub fn job_count(&self) -> usize {
        self.jobs
    }

    /// The snapshot-validation node, with worktree isolation.
    pub fn snapshot(&self) -> Option<NodeIndex> {
        self.snapshot
    }

    /// Whether `n` is the snapshot-validation node.
    pub fn is_snapshot(&self, n: NodeIndex) -> bool {
        self.snapshot == Some(n)
    }

    /// Whether some job names job `n` as its `parent` (a composite job's sub-jobs, a
    /// sub-agent, a split's parts).
    pub fn has_sub_jobs(&self, n: NodeIndex) -> bool {
        self.parents.binary_search(&n).is_ok()
    }

    /// Whether job `n` is a sub-agent (its spec has `subAgent`).
    pub fn is_sub_agent(&self, n: NodeIndex) -> bool {
        self.sub_agents.binary_search(&n).is_ok()
    }

    /// Nodes `n` depends on.
    pub fn dependencies(&self, n: NodeIndex) -> impl Iterator<Item = NodeIndex> + '_ {
        self.dependencies.row(n)
    }

    /// Nodes that depend on `n`.
    pub fn dependents(&self, n: NodeIndex) -> impl Iterator<Item = NodeIndex> + '_ {
        self.dependents.row(n)
    }

    /// The `k`-th node that depends on `n` (in [`PlanGraph::dependents`]' order).
    pub(crate) fn dependent(&self, n: NodeIndex, k: usize) -> Option<NodeIndex> {
        self.dependents.at(n, k)
    }

    /// Dependencies of `n` in the order the job lists them (merge-fi starts from the first),
    /// each once; the snapshot node's in plan order. The rows are built in that order, so no
    /// producerId is looked up here.
    ///
    /// ```
    /// use orchestrator_core::plan::{JobSpec, PlanGraph, PlanSpec, WorkSpec};
    /// let plan = PlanSpec::new("p")
    ///     .job(JobSpec::new("aaa", "a", WorkSpec::shell("true")))
    ///     .job(JobSpec::new("bbb", "b", WorkSpec::shell("true")))
    ///     .job(JobSpec::new("ccc", "c", WorkSpec::shell("true")).depends_on(["bbb", "aaa", "bbb"]));
    /// let g = PlanGraph::build(&plan).unwrap();
    /// assert_eq!(g.ordered_dependencies(2), vec![1, 0]);
    /// ```
    pub fn ordered_dependencies(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut deps: Vec<NodeIndex> = self.dependencies(n).collect();
        if n >= self.jobs {
            deps.sort_unstable();
        }
        deps
    }

    /// Nodes with no dependencies.
    pub fn roots(&self) -> Vec<NodeIndex> {
        (0..self.node_count())
            .filter(|&n| self.dependencies(n).next().is_none())
            .collect()
    }

    /// User jobs no other user job depends on (the snapshot node's dependencies).
    pub fn user_leaves(&self) -> Vec<NodeIndex> {
        (0..self.jobs)
            .filter(|&n| self.dependents(n).all(|d| self.is_snapshot(d)))
            .collect()
    }

    /// Whether `n` is a user leaf (merges into the snapshot branch).
    pub fn is_user_leaf(&self, n: NodeIndex) -> bool {
        n < self.jobs && self.dependents(n).all(|d| self.is_snapshot(d))
    }

    /// A topological order of all nodes: plan order when every job's dependencies come
    /// earlier in the plan, else an order that keeps plan order among nodes ready together.
    ///
    /// ```
    /// use orchestrator_core::plan::{Isolation, JobSpec, PlanGraph, PlanSpec, WorkSpec};
    /// let job = |id: &str| JobSpec::new(id, "t", WorkSpec::shell("true"));
    /// let plan = PlanSpec::new("p")
    ///     .isolation(Isolation::None)
    ///     .job(job("aaa").depends_on(["ccc"]))
    ///     .job(job("bbb"))
    ///     .job(job("ccc"));
    /// let g = PlanGraph::build(&plan).unwrap();
    /// assert_eq!(g.topological_order(), [1, 2, 0]);
    /// assert_eq!(g.topological_position(0), 2);
    /// ```
    pub fn topological_order(&self) -> &[NodeIndex] {
        &self.order
    }

    /// Position of `n` in [`PlanGraph::topological_order`].
    pub fn topological_position(&self, n: NodeIndex) -> usize {
        if self.topo_pos.is_empty() {
            return if n < self.nodes { n } else { 0 };
        }
        self.topo_pos.get(n).map_or(0, |&p| p as usize)
    }

    /// Scheduling priority of `n`.
    pub fn priority(&self, n: NodeIndex) -> Priority {
        self.priority.get(n).copied().unwrap_or_default()
    }

    /// The place of `n` in the scheduling order: by [`PlanGraph::priority`], highest first,
    /// then plan order; 0 runs first.
    pub(crate) fn rank(&self, n: NodeIndex) -> Option<usize> {
        self.schedule().rank.get(n).map(|&r| r as usize)
    }

    /// The node at place `rank` of the scheduling order.
    pub(crate) fn node_at_rank(&self, rank: usize) -> Option<NodeIndex> {
        self.schedule().by_rank.get(rank).map(|&n| n as NodeIndex)
    }

    /// Node index of a producerId.
    pub fn index_of(&self, producer_id: &str) -> Option<NodeIndex> {
        self.by_producer.get(producer_id)
    }

    /// Every node reachable from `n` through dependents (not `n` itself), each once.
    pub fn descendants(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let mut seen = vec![false; self.node_count()];
        let mut stack: Vec<NodeIndex> = self.dependents(n).collect();
        let mut out = Vec::new();
        while let Some(x) = stack.pop() {
            if std::mem::replace(&mut seen[x], true) {
                continue;
            }
            out.push(x);
            stack.extend(self.dependents(x));
        }
        out
    }
}

/// Rows of neighbours, one per node, in one allocation.
#[derive(Debug, Clone, Default)]
struct Csr {
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl Csr {
    /// The rows of `n` nodes from `edges`, each edge seen by `ends` as (row, neighbour): a
    /// counting sort, so each row keeps its edges' order in the list, and every pass over the
    /// edges and rows is sequential (a 1M-node plan is built without chasing edge lists).
    fn build(n: usize, edges: &[(u32, u32)], ends: impl Fn(&(u32, u32)) -> (u32, u32)) -> Csr {
        let mut offsets = vec![0u32; n + 1];
        for e in edges {
            offsets[ends(e).0 as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut next: Vec<u32> = offsets[..n].to_vec();
        let mut targets = vec![0u32; edges.len()];
        for e in edges {
            let (row, neighbour) = ends(e);
            let slot = &mut next[row as usize];
            targets[*slot as usize] = neighbour;
            *slot += 1;
        }
        Csr { offsets, targets }
    }

    /// Row `n`'s nodes (none for a node out of range).
    fn targets_of(&self, n: NodeIndex) -> &[u32] {
        match (self.offsets.get(n), self.offsets.get(n + 1)) {
            (Some(&a), Some(&b)) => self.targets.get(a as usize..b as usize).unwrap_or_default(),
            _ => &[],
        }
    }

    fn row(&self, n: NodeIndex) -> impl Iterator<Item = NodeIndex> + '_ {
        self.targets_of(n).iter().map(|&x| x as usize)
    }

    /// The `k`-th node of row `n`.
    fn at(&self, n: NodeIndex, k: usize) -> Option<NodeIndex> {
        self.targets_of(n).get(k).map(|&x| x as usize)
    }
}

/// On a large plan, every dependency's job, looked up at once in the table's order (see
/// `Producers::find_all`): job `i`'s dependencies are at `starts[i]` on in the list returned
/// with `starts`. `None` for a smaller plan, whose dependencies are looked up where they are
/// listed (the two passes over the jobs here cost more than the order saves).
fn dependency_jobs(
    spec: &PlanSpec,
    by_producer: &producers::Producers,
) -> Option<(Vec<usize>, Vec<Option<u32>>)> {
    if !by_producer.orders_lookups() {
        return None;
    }
    let mut starts = Vec::with_capacity(spec.jobs.len());
    let mut count = 0;
    for job in &spec.jobs {
        starts.push(count);
        count += job.dependencies.len();
    }
    let dependency = |k: usize| {
        // The last job whose dependencies start at or before `k` (jobs without any start
        // where the next one does).
        let i = starts
            .partition_point(|&start| start <= k)
            .saturating_sub(1);
        let at = |start: &usize| spec.jobs.get(i)?.dependencies.get(k.checked_sub(*start)?);
        starts.get(i).and_then(at).map_or("", String::as_str)
    };
    let all = spec.jobs.iter().flat_map(|job| &job.dependencies);
    let found = by_producer.find_all(count, all.map(String::as_str), dependency);
    Some((starts, found))
}

/// A topological order by Kahn's algorithm over the compressed rows (iterative, linear, and
/// cache-friendly on 1M-node plans); `None` when a cycle leaves nodes unordered. Among nodes
/// ready at the same time, plan order is kept.
fn kahn(dependents: &Csr, dependencies: &Csr) -> Option<Vec<NodeIndex>> {
    let n = dependencies.offsets.len().saturating_sub(1);
    let mut waiting: Vec<u32> = (0..n).map(|i| dependencies.row(i).count() as u32).collect();
    let mut order: Vec<NodeIndex> = (0..n).filter(|&i| waiting[i] == 0).collect();
    order.reserve(n - order.len());
    let mut next = 0;
    while next < order.len() {
        let x = order[next];
        next += 1;
        for d in dependents.row(x) {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                order.push(d);
            }
        }
    }
    (order.len() == n).then_some(order)
}

/// One validation error per cycle, printed as a path `a -> b -> c -> a` ("a depends on b ...").
/// Only a plan with a cycle gets here: the petgraph graph is built for it alone.
fn cycles(nodes: usize, edges: &[(u32, u32)], spec: &PlanSpec) -> Vec<ValidationError> {
    let mut graph = DiGraph::<(), (), u32>::with_capacity(nodes, edges.len());
    for _ in 0..nodes {
        graph.add_node(());
    }
    for &(from, to) in edges {
        graph.add_edge(PgIndex::new(from as usize), PgIndex::new(to as usize), ());
    }
    let graph = &graph;
    let mut out = Vec::new();
    // Kosaraju's algorithm in petgraph is iterative: a 100k-job ring must not overflow the stack.
    for scc in kosaraju_scc(graph) {
        if scc.len() < 2 {
            continue;
        }
        let members: std::collections::HashSet<PgIndex<u32>> = scc.iter().copied().collect();
        // Walk inside the component from its smallest member until a node repeats.
        let start = scc.iter().copied().min().unwrap_or(scc[0]);
        let mut path = vec![start];
        let mut pos: HashMap<PgIndex<u32>, usize> = HashMap::from([(start, 0)]);
        let mut cur = start;
        let cycle = loop {
            let next = graph
                .neighbors_directed(cur, Direction::Incoming)
                .filter(|n| members.contains(n))
                .min();
            let Some(next) = next else { break path.clone() };
            if let Some(&i) = pos.get(&next) {
                let mut c = path[i..].to_vec();
                c.push(next);
                break c;
            }
            pos.insert(next, path.len());
            path.push(next);
            cur = next;
        };
        let names: Vec<&str> = cycle
            .iter()
            .filter_map(|i| spec.jobs.get(i.index()).map(|j| j.producer_id.as_str()))
            .collect();
        let first = cycle.first().and_then(|i| spec.jobs.get(i.index()));
        out.push(ValidationError::new(
            first,
            "dependencies",
            names.join(" -> "),
            "dependency cycle: each job depends on the next one in this path, so none can ever \
             start; remove one of these dependencies",
        ));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::{JobSpec, WorkSpec};

    /// A small seeded random number generator (xorshift) for property tests of graphs.
    pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut rng = seed | 1;
        move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        }
    }

    fn job(id: String, deps: Vec<String>) -> JobSpec {
        JobSpec::new(id, "t", WorkSpec::shell("true")).depends_on(deps)
    }

    #[test]
    fn a_long_ring_is_reported_without_overflowing_the_stack() {
        let n = 50_000;
        let mut spec = PlanSpec::new("ring").isolation(Isolation::None);
        for i in 0..n {
            spec = spec.job(job(
                format!("j{i:06}"),
                vec![format!("j{:06}", (i + 1) % n)],
            ));
        }
        let errors = PlanGraph::build(&spec).expect_err("cycle");
        assert_eq!(errors.0.len(), 1);
        let path = &errors.0[0].value;
        assert!(
            path.starts_with("j000000 -> j000001 -> "),
            "{}",
            &path[..40]
        );
        assert!(path.ends_with(" -> j000000"));
    }

    #[test]
    fn wide_fan_out_and_duplicate_dependencies_stay_linear() {
        let n = 40_000;
        let mut spec = PlanSpec::new("fan").isolation(Isolation::None);
        spec = spec.job(job("root".into(), vec![]));
        for i in 0..n {
            spec = spec.job(job(format!("j{i:06}"), vec!["root".into(), "root".into()]));
        }
        let started = std::time::Instant::now();
        let g = PlanGraph::build(&spec).expect("valid");
        assert_eq!(g.dependents(0).count(), n, "duplicates add one edge");
        assert_eq!(g.priority(0).dependents as usize, n);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    /// A plan large enough for its dependencies to be looked up in the table's order (not
    /// plan order): each job's edges, and each problem at the dependency it is about.
    #[test]
    fn a_large_plans_dependencies_are_found_whatever_order_they_are_looked_up_in() {
        let n = producers::IN_ORDER_BELOW + 10_000;
        let name = |i: usize| format!("job-with-a-long-name-{i}");
        let mut next = xorshift(7);
        let mut expected = Vec::new();
        let mut spec = PlanSpec::new("large").isolation(Isolation::None);
        for i in 0..n {
            let deps: Vec<usize> = (0..(i % 3).min(i))
                .map(|_| (next() % i as u64) as usize)
                .collect();
            let mut names: Vec<String> = deps.iter().map(|&d| name(d)).collect();
            if i % 99_999 == 5 {
                names.push(format!("missing-{i}"));
            }
            for (k, &d) in deps.iter().enumerate() {
                if !deps[..k].contains(&d) {
                    expected.push((d, i));
                }
            }
            spec = spec.job(job(
                if i % 2 == 0 { name(i) } else { format!("j{i}") },
                names,
            ));
        }
        // Odd jobs are named `j<i>`: a dependency on `job-with-a-long-name-<odd>` is unknown.
        let errors = PlanGraph::build(&spec).expect_err("unknown dependencies");
        let unknown: Vec<(Option<String>, String, String)> = (errors.0.into_iter())
            .map(|e| (e.job, e.field, e.value))
            .collect();
        let odd = |d: &str| {
            d.rsplit('-')
                .next()
                .is_some_and(|i| i.parse::<usize>().is_ok_and(|i| i % 2 == 1))
        };
        // In plan order, as the errors come.
        let want: Vec<(Option<String>, String, String)> = (spec.jobs.iter())
            .flat_map(|j| {
                let job = &j.producer_id;
                (j.dependencies.iter().enumerate())
                    .filter(|(_, d)| d.starts_with("missing-") || odd(d))
                    .map(move |(k, d)| (Some(job.clone()), format!("dependencies[{k}]"), d.clone()))
            })
            .collect();
        assert!(want.len() > 10_000);
        assert_eq!(unknown, want);
        // Every job named alike: the graph holds each listed dependency, once.
        for (i, job) in spec.jobs.iter_mut().enumerate() {
            job.producer_id = name(i);
            job.dependencies.retain(|d| !d.starts_with("missing-"));
        }
        let g = PlanGraph::build(&spec).expect("valid");
        let mut edges: Vec<(usize, usize)> = (0..n)
            .flat_map(|i| g.dependencies(i).map(move |d| (d, i)))
            .collect();
        edges.sort();
        expected.sort();
        assert_eq!(edges, expected);
        assert_eq!(g.index_of(&name(n - 1)), Some(n - 1));
    }

    #[test]
    fn plan_order_is_the_topological_order_when_dependencies_come_first() {
        let spec = PlanSpec::new("p")
            .job(job("aaa".into(), vec![]))
            .job(job("bbb".into(), vec!["aaa".into()]))
            .job(job("ccc".into(), vec![]))
            .job(job("ddd".into(), vec!["ccc".into(), "bbb".into()]));
        let g = PlanGraph::build(&spec).expect("valid");
        assert_eq!(g.topological_order(), [0, 1, 2, 3, 4]);
        assert!((0..5).all(|n| g.topological_position(n) == n));
        assert_eq!(g.topological_position(9), 0, "no such node");
        assert_eq!(
            g.priority(0).critical_path,
            4,
            "aaa -> bbb -> ddd -> snapshot"
        );
    }

    #[test]
    fn a_dependency_later_in_the_plan_is_ordered_before_its_dependent() {
        let spec = PlanSpec::new("p")
            .job(job("aaa".into(), vec!["ddd".into()]))
            .job(job("bbb".into(), vec!["aaa".into()]))
            .job(job("ccc".into(), vec![]))
            .job(job("ddd".into(), vec!["ccc".into()]));
        let g = PlanGraph::build(&spec).expect("valid");
        assert_eq!(g.topological_order(), [2, 3, 0, 1, 4]);
        let positions: Vec<usize> = (0..5).map(|n| g.topological_position(n)).collect();
        assert_eq!(positions, [2, 3, 0, 1, 4]);
        assert_eq!(
            g.priority(2).critical_path,
            5,
            "ccc -> ddd -> aaa -> bbb -> snapshot"
        );
    }

    #[test]
    fn parents_and_sub_agents_are_found_wherever_they_are_listed() {
        let mut child = job("aaa/one".into(), vec![]);
        child.extra.make_mut().parent = Some("aaa".into());
        let mut agent = job("bbb".into(), vec![]);
        agent.extra.make_mut().sub_agent = Some(Default::default());
        let spec = PlanSpec::new("p")
            .job(child)
            .job(job("ccc".into(), vec![]))
            .job(agent)
            .job(job("aaa".into(), vec![]));
        let g = PlanGraph::build(&spec).expect("valid");
        assert!(g.has_sub_jobs(3) && !g.has_sub_jobs(0) && !g.has_sub_jobs(1));
        assert!(g.is_sub_agent(2) && !g.is_sub_agent(0) && !g.is_sub_agent(3));
    }

    proptest::proptest! {
        /// The same random DAG listed in plan order (dependencies first) and shuffled: both
        /// orders are topological, positions match them, and priorities do not depend on
        /// where a job is listed.
        #[test]
        fn both_orders_are_topological_and_priorities_match(
            nodes in 1usize..300,
            seed in proptest::prelude::any::<u64>(),
        ) {
            let mut next = xorshift(seed);
            let id = |i: usize| format!("j{i:04}");
            let jobs: Vec<JobSpec> = (0..nodes)
                .map(|i| {
                    let deps = (0..next() % 4)
                        .filter(|_| i > 0)
                        .map(|_| id((next() % i as u64) as usize))
                        .collect();
                    job(id(i), deps)
                })
                .collect();
            let mut shuffled = jobs.clone();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            let mut priorities = Vec::new();
            for list in [jobs, shuffled] {
                let mut spec = PlanSpec::new("p");
                spec.jobs = list;
                let g = PlanGraph::build(&spec).expect("a DAG");
                let order = g.topological_order();
                proptest::prop_assert_eq!(order.len(), g.node_count());
                for (place, &n) in order.iter().enumerate() {
                    proptest::prop_assert_eq!(g.topological_position(n), place);
                    for d in g.dependencies(n) {
                        proptest::prop_assert!(g.topological_position(d) < place);
                    }
                }
                let mut by_id: Vec<(String, Priority)> = (0..g.job_count())
                    .map(|n| (spec.jobs[n].producer_id.clone(), g.priority(n)))
                    .collect();
                by_id.sort();
                priorities.push(by_id);
            }
            proptest::prop_assert_eq!(&priorities[0], &priorities[1]);
        }
    }

    #[test]
    fn snapshot_node_follows_every_user_leaf() {
        let spec = PlanSpec::new("p")
            .job(job("aaa".into(), vec![]))
            .job(job("bbb".into(), vec!["aaa".into()]))
            .job(job("ccc".into(), vec!["aaa".into()]));
        let g = PlanGraph::build(&spec).expect("valid");
        let sv = g.snapshot().expect("worktree isolation injects it");
        let mut deps: Vec<_> = g.dependencies(sv).collect();
        deps.sort_unstable();
        assert_eq!(deps, vec![1, 2]);
        assert_eq!(g.user_leaves(), vec![1, 2]);
        assert_eq!(*g.topological_order().last().expect("order"), sv);
        assert_eq!(g.priority(0).critical_path, 3, "aaa -> bbb -> snapshot");
        assert!(g.is_user_leaf(1) && !g.is_user_leaf(0) && !g.is_user_leaf(sv));
    }
}
