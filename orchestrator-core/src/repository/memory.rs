//! [`InMemoryPlanRepository`]: a real, complete store that keeps everything in memory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::{
    tail_lines, AttemptSpecs, Lease, LogKey, LogQuery, PlanListing, PlanRepository, PlanSummary,
    StoreError,
};
use crate::ids::{NodeId, PlanId};
use crate::state::{Phase, PlanRecord, StateChange};

/// Keeps plans, specs and logs in memory; the default store of tests and of hosts that persist
/// nothing. Cloning shares the same data.
///
/// ```
/// use orchestrator_core::{InMemoryPlanRepository, PlanRepository};
/// use orchestrator_core::ids::PlanId;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = InMemoryPlanRepository::new();
/// assert!(store.list().await.unwrap().plans.is_empty());
/// assert!(store.load(&PlanId::from("nope")).await.is_err());
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct InMemoryPlanRepository {
    inner: Arc<Mutex<Inner>>,
    leases: Arc<Mutex<HashSet<PlanId>>>,
}

#[derive(Debug, Default)]
struct Inner {
    plans: HashMap<PlanId, Stored>,
    next_seq: u64,
}

#[derive(Debug)]
struct Stored {
    record: PlanRecord,
    seq: u64,
    specs: HashMap<(NodeId, u32), AttemptSpecs>,
    /// (node, attempt, phase) -> log text
    logs: BTreeMap<(NodeId, u32, Phase), String>,
}

impl InMemoryPlanRepository {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means another thread panicked mid-call; the data is still whole
        // because every mutation below is a single insert or apply.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct LeaseGuard {
    plan: PlanId,
    leases: Arc<Mutex<HashSet<PlanId>>>,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.plan);
    }
}

#[async_trait]
impl PlanRepository for InMemoryPlanRepository {
    async fn create(&self, plan: &PlanRecord) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let id = plan.state.id.clone();
        if inner.plans.contains_key(&id) {
            return Err(StoreError::AlreadyExists(id));
        }
        inner.next_seq += 1;
        let seq = inner.next_seq;
        inner.plans.insert(
            id,
            Stored {
                record: plan.clone(),
                seq,
                specs: HashMap::new(),
                logs: BTreeMap::new(),
            },
        );
        Ok(())
    }

    async fn append(&self, plan: &PlanId, changes: &[StateChange]) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let stored = inner
            .plans
            .get_mut(plan)
            .ok_or_else(|| StoreError::NotFound(plan.clone()))?;
        for change in changes {
            stored
                .record
                .apply(change)
                .map_err(|e| StoreError::Rejected {
                    plan: plan.clone(),
                    message: e.to_string(),
                })?;
        }
        Ok(())
    }

    async fn load(&self, plan: &PlanId) -> Result<PlanRecord, StoreError> {
        self.lock()
            .plans
            .get(plan)
            .map(|s| s.record.clone())
            .ok_or_else(|| StoreError::NotFound(plan.clone()))
    }

    async fn list(&self) -> Result<PlanListing, StoreError> {
        let inner = self.lock();
        let mut plans: Vec<(u64, PlanSummary)> = inner
            .plans
            .values()
            .map(|s| (s.seq, PlanSummary::of(&s.record)))
            .collect();
        plans.sort_by_key(|(seq, s)| std::cmp::Reverse((s.created_at, *seq)));
        Ok(PlanListing {
            plans: plans.into_iter().map(|(_, s)| s).collect(),
            damaged: Vec::new(),
        })
    }

    async fn delete(&self, plan: &PlanId) -> Result<(), StoreError> {
        self.lock()
            .plans
            .remove(plan)
            .map(|_| ())
            .ok_or_else(|| StoreError::NotFound(plan.clone()))
    }

    async fn acquire(&self, plan: &PlanId) -> Result<Lease, StoreError> {
        if !self.lock().plans.contains_key(plan) {
            return Err(StoreError::NotFound(plan.clone()));
        }
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        if !leases.insert(plan.clone()) {
            return Err(StoreError::Locked {
                plan: plan.clone(),
                owner: format!("another handle in process {}", std::process::id()),
            });
        }
        Ok(Lease::new(LeaseGuard {
            plan: plan.clone(),
            leases: self.leases.clone(),
        }))
    }

    async fn save_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
        specs: &AttemptSpecs,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let stored = inner
            .plans
            .get_mut(plan)
            .ok_or_else(|| StoreError::NotFound(plan.clone()))?;
        stored.specs.insert((node.clone(), attempt), specs.clone());
        Ok(())
    }

    async fn load_attempt_specs(
        &self,
        plan: &PlanId,
        node: &NodeId,
        attempt: u32,
    ) -> Result<AttemptSpecs, StoreError> {
        let inner = self.lock();
        let stored = inner
            .plans
            .get(plan)
            .ok_or_else(|| StoreError::NotFound(plan.clone()))?;
        Ok(stored
            .specs
            .get(&(node.clone(), attempt))
            .cloned()
            .unwrap_or_default())
    }

    async fn append_log(&self, key: &LogKey, text: &str) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let stored = inner
            .plans
            .get_mut(&key.plan)
            .ok_or_else(|| StoreError::NotFound(key.plan.clone()))?;
        stored
            .logs
            .entry((key.node.clone(), key.attempt, key.phase))
            .or_default()
            .push_str(text);
        Ok(())
    }

    async fn read_log(
        &self,
        plan: &PlanId,
        node: &NodeId,
        query: LogQuery,
    ) -> Result<String, StoreError> {
        let inner = self.lock();
        let stored = inner
            .plans
            .get(plan)
            .ok_or_else(|| StoreError::NotFound(plan.clone()))?;
        let mine = stored.logs.iter().filter(|((n, _, _), _)| n == node);
        let attempt = match query.attempt {
            Some(a) => a,
            None => match mine.clone().map(|((_, a, _), _)| *a).max() {
                Some(a) => a,
                None => return Ok(String::new()),
            },
        };
        let mut out = String::new();
        for ((_, a, phase), text) in mine {
            if *a == attempt && query.phase.is_none_or(|p| p == *phase) {
                out.push_str(text);
            }
        }
        Ok(match query.tail {
            Some(n) => tail_lines(&out, n).to_owned(),
            None => out,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::InMemoryPlanRepository;

    #[tokio::test]
    async fn conformance() {
        crate::conformance::repository::run_all(|| async { InMemoryPlanRepository::new() }).await;
    }
}
