//! Synthetic plans for benchmarks and load tests: random DAGs and chains of no-op jobs.

use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};

/// xorshift64*: deterministic and dependency-free.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (0 is replaced by a fixed odd constant).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// producerId of synthetic job `i`.
pub fn job_id(i: usize) -> String {
    format!("n{i:07}")
}

/// `n` jobs running `command`, `isolation: "none"`; job `i >= 2` depends on two distinct random
/// earlier jobs, job 1 on job 0 — about two dependencies per node.
///
/// ```
/// let plan = orchestrator::synthetic::random_dag(100, 7, "true");
/// assert_eq!(plan.jobs.len(), 100);
/// assert!(orchestrator::core::plan::PlanGraph::build(&plan).is_ok());
/// ```
pub fn random_dag(n: usize, seed: u64, command: &str) -> PlanSpec {
    let mut rng = Rng::new(seed);
    let mut spec = PlanSpec::new("random-dag").isolation(Isolation::None);
    spec.jobs.reserve(n);
    for i in 0..n {
        let mut job = JobSpec::new(job_id(i), "noop", WorkSpec::shell(command));
        if i == 1 {
            job.dependencies.push(job_id(0));
        } else if i >= 2 {
            let a = rng.below(i);
            let mut b = rng.below(i);
            if b == a {
                b = (a + 1) % i;
            }
            job.dependencies.push(job_id(a));
            job.dependencies.push(job_id(b));
        }
        spec.jobs.push(job);
    }
    spec
}

/// `n` jobs running `command`, each depending on the previous one, `isolation: "none"`.
pub fn chain(n: usize, command: &str) -> PlanSpec {
    let mut spec = PlanSpec::new("chain").isolation(Isolation::None);
    spec.jobs.reserve(n);
    for i in 0..n {
        let mut job = JobSpec::new(job_id(i), "noop", WorkSpec::shell(command));
        if i > 0 {
            job.dependencies.push(job_id(i - 1));
        }
        spec.jobs.push(job);
    }
    spec
}

/// A complete binary tree of `n` jobs (job `i` depends on its parent `(i-1)/2`).
pub fn binary_tree(n: usize, command: &str) -> PlanSpec {
    let mut spec = PlanSpec::new("binary-tree").isolation(Isolation::None);
    spec.jobs.reserve(n);
    for i in 0..n {
        let mut job = JobSpec::new(job_id(i), "noop", WorkSpec::shell(command));
        if i > 0 {
            job.dependencies.push(job_id((i - 1) / 2));
        }
        spec.jobs.push(job);
    }
    spec
}
