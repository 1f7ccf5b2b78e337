//! Plan leases: one `plan_leases` row per plan naming its owner (`host:pid:uuid`), a
//! generation that grows with every takeover, and an expiry that the holder's heartbeat
//! renews every third of [`PgOptions::lease_timeout`](super::PgOptions::lease_timeout).
//!
//! Expiry is computed by the database's clock (`now()`), so machines whose clocks disagree
//! still agree on who holds a plan. A holder that dies simply stops renewing; once its lease
//! has expired the next `acquire` takes it over with the next generation. Dropping a
//! [`PgLease`] stops the heartbeat and releases the row (in a spawned task: marked expired,
//! its generation kept).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orchestrator_core::repository::Lease;
use orchestrator_core::{PlanId, StoreError};

use super::error;
use super::plans::{is_missing_plan, lock, Inner, PgPlanRepository};

/// Who holds a plan's lease, as stored (see [`PgPlanRepository::lease_info`]).
///
/// ```no_run
/// # use orchestrator_core::PlanId;
/// # use orchestrator_storage::pg::{LeaseInfo, PgOptions, PgPlanRepository};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), orchestrator_core::StoreError> {
/// # let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
/// let info: Option<LeaseInfo> = store.lease_info(&PlanId::from("p")).await?;
/// let running_elsewhere = info.is_some_and(|i| i.held && i.owner != store.owner());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseInfo {
    /// The last owner, `host:pid:uuid`.
    pub owner: String,
    /// Incremented by every acquisition; a fencing token.
    pub generation: u64,
    /// Whether the lease is still in force (not expired nor released).
    pub held: bool,
}

/// An exclusive lease on a plan, renewed in the background while it lives; dropping it
/// releases the plan. Converts into the engine's [`Lease`].
///
/// ```no_run
/// use orchestrator_core::{PlanId, PlanRepository};
/// use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), orchestrator_core::StoreError> {
/// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
/// let plan = PlanId::from("an-existing-plan");
/// let lease = store.acquire_lease(&plan).await?;
/// println!("running {} as {} (generation {})", lease.plan(), lease.owner(), lease.generation());
/// let _engine_lease: orchestrator_core::repository::Lease = lease.into();
/// # Ok(())
/// # }
/// ```
pub struct PgLease {
    plan: PlanId,
    owner: String,
    generation: i64,
    lost: Arc<AtomicBool>,
    heartbeat: tokio::task::JoinHandle<()>,
    inner: Arc<Inner>,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for PgLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLease")
            .field("plan", &self.plan)
            .field("owner", &self.owner)
            .field("generation", &self.generation)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl PgLease {
    /// The plan.
    ///
    /// ```no_run
    /// # use orchestrator_core::PlanId;
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// # let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// let lease = store.acquire_lease(&PlanId::from("p")).await?;
    /// assert_eq!(lease.plan().as_str(), "p");
    /// # Ok(())
    /// # }
    /// ```
    pub fn plan(&self) -> &PlanId {
        &self.plan
    }

    /// The owner it is held under (the store's [`owner`](PgPlanRepository::owner)).
    ///
    /// ```no_run
    /// # use orchestrator_core::PlanId;
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// # let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// let lease = store.acquire_lease(&PlanId::from("p")).await?;
    /// assert_eq!(lease.owner(), store.owner());
    /// # Ok(())
    /// # }
    /// ```
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Its generation: greater than that of every earlier lease on the plan.
    ///
    /// ```no_run
    /// # use orchestrator_core::PlanId;
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// # let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// let lease = store.acquire_lease(&PlanId::from("p")).await?;
    /// assert!(lease.generation() >= 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn generation(&self) -> u64 {
        u64::try_from(self.generation).unwrap_or(0)
    }

    /// Whether the heartbeat found the lease taken over by another owner (after it expired,
    /// e.g. while this process could not reach the database): the plan is no longer ours.
    ///
    /// ```no_run
    /// # use orchestrator_core::PlanId;
    /// # use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// # let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// let lease = store.acquire_lease(&PlanId::from("p")).await?;
    /// if lease.is_lost() {
    /// // stop running the plan: another owner has it
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

impl From<PgLease> for Lease {
    fn from(lease: PgLease) -> Lease {
        Lease::new(lease)
    }
}

impl Drop for PgLease {
    fn drop(&mut self) {
        self.heartbeat.abort();
        lock(&self.inner.held).remove(&self.plan);
        let (inner, plan, owner, generation) = (
            self.inner.clone(),
            self.plan.clone(),
            self.owner.clone(),
            self.generation,
        );
        // If the runtime is gone the task never runs, and the lease simply expires.
        self.runtime.spawn(async move {
            if let Err(e) = release(&inner, &plan, &owner, generation).await {
                tracing::warn!(plan = %plan, error = %e, "cannot release the plan's lease; it expires on its own");
            }
        });
    }
}

async fn release(
    inner: &Inner,
    plan: &PlanId,
    owner: &str,
    generation: i64,
) -> Result<(), StoreError> {
    let client = inner.db.client("release the lease").await?;
    client
        .execute(
            "UPDATE plan_leases SET expires_time = '-infinity'
             WHERE plan_id = $1 AND owner = $2 AND generation = $3",
            &[&plan.as_str(), &owner, &generation],
        )
        .await
        .map_err(|e| error::db("release the lease", &inner.plan_path(plan), e))?;
    Ok(())
}

/// Renews the lease; `false` when it is no longer ours.
async fn renew(inner: &Inner, plan: &PlanId, generation: i64) -> Result<bool, StoreError> {
    let client = inner.db.client("renew the lease").await?;
    let timeout = inner.options.lease_timeout.as_secs_f64();
    let n = client
        .execute(
            "UPDATE plan_leases SET expires_time = now() + $4::float8 * interval '1 second'
             WHERE plan_id = $1 AND owner = $2 AND generation = $3",
            &[&plan.as_str(), &inner.owner, &generation, &timeout],
        )
        .await
        .map_err(|e| error::db("renew the lease", &inner.plan_path(plan), e))?;
    Ok(n == 1)
}

async fn heartbeat(inner: Arc<Inner>, plan: PlanId, generation: i64, lost: Arc<AtomicBool>) {
    let every = inner.options.lease_timeout / 3;
    loop {
        tokio::time::sleep(every).await;
        match renew(&inner, &plan, generation).await {
            Ok(true) => {}
            Ok(false) => {
                lost.store(true, Ordering::Relaxed);
                tracing::warn!(plan = %plan, "the plan's lease was taken over by another owner");
                return;
            }
            // The next beat tries again; the lease lasts three beats.
            Err(e) => tracing::warn!(plan = %plan, error = %e, "cannot renew the plan's lease"),
        }
    }
}

/// Removes a plan from the handle's held set unless disarmed (an acquire that failed).
struct Holding<'a> {
    held: &'a Mutex<std::collections::HashSet<PlanId>>,
    plan: &'a PlanId,
    armed: bool,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(self.held).remove(self.plan);
        }
    }
}

/// How often an acquire retries when the holder released between its two statements.
const ACQUIRE_TRIES: usize = 3;

impl PgPlanRepository {
    /// Takes the plan's lease: [`StoreError::Locked`] naming the owner while another owner
    /// (another handle, process or machine) holds an unexpired one, [`StoreError::NotFound`]
    /// for a missing plan. An expired lease is taken over with the next generation.
    ///
    /// ```no_run
    /// use orchestrator_core::{PlanId, StoreError};
    /// use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), StoreError> {
    /// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// match store.acquire_lease(&PlanId::from("p")).await {
    ///     Ok(lease) => println!("generation {}", lease.generation()),
    ///     Err(StoreError::Locked { owner, .. }) => println!("run by {owner}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_lease(&self, plan: &PlanId) -> Result<PgLease, StoreError> {
        let inner = &self.inner;
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| {
            error::invalid("acquire the lease", &inner.plan_path(plan), e.to_string())
        })?;
        if !lock(&inner.held).insert(plan.clone()) {
            return Err(StoreError::Locked {
                plan: plan.clone(),
                owner: format!("{} (this handle)", inner.owner),
            });
        }
        let mut holding = Holding {
            held: &inner.held,
            plan,
            armed: true,
        };
        let generation = take(inner, plan).await?;
        holding.armed = false;
        let lost = Arc::new(AtomicBool::new(false));
        let heartbeat = runtime.spawn(heartbeat(
            inner.clone(),
            plan.clone(),
            generation,
            lost.clone(),
        ));
        Ok(PgLease {
            plan: plan.clone(),
            owner: inner.owner.clone(),
            generation,
            lost,
            heartbeat,
            inner: inner.clone(),
            runtime,
        })
    }

    /// The plan's lease as stored, `None` if it was never leased.
    ///
    /// ```no_run
    /// use orchestrator_core::PlanId;
    /// use orchestrator_storage::pg::{PgOptions, PgPlanRepository};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), orchestrator_core::StoreError> {
    /// let store = PgPlanRepository::connect("postgres://postgres@127.0.0.1/test", PgOptions::default()).await?;
    /// if let Some(info) = store.lease_info(&PlanId::from("p")).await? {
    ///     println!("{} (generation {}, held: {})", info.owner, info.generation, info.held);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lease_info(&self, plan: &PlanId) -> Result<Option<LeaseInfo>, StoreError> {
        let path = self.inner.plan_path(plan);
        let fail = |e| error::db("read the lease", &path, e);
        let client = self.inner.db.client("read the lease").await?;
        let row = client
            .query_opt(
                "SELECT owner, generation, expires_time > now() FROM plan_leases WHERE plan_id = $1",
                &[&plan.as_str()],
            )
            .await
            .map_err(fail)?;
        let Some(row) = row else { return Ok(None) };
        let generation: i64 = row.try_get(1).map_err(fail)?;
        Ok(Some(LeaseInfo {
            owner: row.try_get(0).map_err(fail)?,
            generation: u64::try_from(generation).unwrap_or(0),
            held: row.try_get(2).map_err(fail)?,
        }))
    }
}

/// Writes this handle's lease row; returns its generation.
async fn take(inner: &Inner, plan: &PlanId) -> Result<i64, StoreError> {
    let path = inner.plan_path(plan);
    let fail = |e| error::db("acquire the lease", &path, e);
    let timeout = inner.options.lease_timeout.as_secs_f64();
    let client = inner.db.client("acquire the lease").await?;
    for _ in 0..ACQUIRE_TRIES {
        // One statement: of two racing acquirers, exactly one inserts or updates the row.
        // This handle's own row (released, its release not yet written) is taken back.
        let taken = client
            .query_opt(
                "INSERT INTO plan_leases (plan_id, owner, generation, acquired_time, expires_time)
                 SELECT plan_id, $2, 1, now(), now() + $3::float8 * interval '1 second'
                 FROM plans WHERE plan_id = $1
                 ON CONFLICT (plan_id) DO UPDATE SET owner = EXCLUDED.owner,
                     generation = plan_leases.generation + 1,
                     acquired_time = EXCLUDED.acquired_time,
                     expires_time = EXCLUDED.expires_time
                 WHERE plan_leases.expires_time <= now() OR plan_leases.owner = EXCLUDED.owner
                 RETURNING generation",
                &[&plan.as_str(), &inner.owner, &timeout],
            )
            .await;
        match taken {
            Ok(Some(row)) => return row.try_get(0).map_err(fail),
            Ok(None) => {}
            Err(e) if is_missing_plan(&e) => return Err(StoreError::NotFound(plan.clone())),
            Err(e) => return Err(fail(e)),
        }
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM plans WHERE plan_id = $1),
                        (SELECT owner FROM plan_leases WHERE plan_id = $1 AND expires_time > now())",
                &[&plan.as_str()],
            )
            .await
            .map_err(fail)?;
        let exists: bool = row.try_get(0).map_err(fail)?;
        let holder: Option<String> = row.try_get(1).map_err(fail)?;
        match (exists, holder) {
            (false, _) => return Err(StoreError::NotFound(plan.clone())),
            // A process of this machine that is gone (it exited before its release landed,
            // or was killed) holds nothing: its lease is taken over now, not at its expiry.
            (true, Some(owner)) if died_here(&owner, &inner.owner) => {
                let stolen = client
                    .query_opt(
                        "UPDATE plan_leases SET owner = $2, generation = generation + 1,
                             acquired_time = now(),
                             expires_time = now() + $4::float8 * interval '1 second'
                         WHERE plan_id = $1 AND owner = $3
                         RETURNING generation",
                        &[&plan.as_str(), &inner.owner, &owner, &timeout],
                    )
                    .await
                    .map_err(fail)?;
                if let Some(row) = stolen {
                    tracing::info!(plan = %plan, dead = %owner, "took over the lease of a process that is gone");
                    return row.try_get(0).map_err(fail);
                }
            }
            (true, Some(owner)) => {
                return Err(StoreError::Locked {
                    plan: plan.clone(),
                    owner,
                })
            }
            // Released or expired in between: try again.
            (true, None) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    Err(StoreError::Locked {
        plan: plan.clone(),
        owner: "an owner that keeps taking and releasing it".into(),
    })
}

/// Whether lease owner `owner` (`host:pid:uuid`) is a process of this machine (the host of
/// `ours`) that no longer runs. Only where that can be told (`/proc`); elsewhere its lease
/// expires as any other. A reused pid counts as running: the lease then waits its expiry.
fn died_here(owner: &str, ours: &str) -> bool {
    let parts = |o: &'_ str| -> Option<(String, u32)> {
        let mut it = o.rsplitn(3, ':');
        let _uuid = it.next()?;
        let pid = it.next()?.parse().ok()?;
        Some((it.next()?.to_owned(), pid))
    };
    let (Some((host, pid)), Some((our_host, our_pid))) = (parts(owner), parts(ours)) else {
        return false;
    };
    host == our_host && pid != our_pid && cfg!(target_os = "linux") && {
        let proc = std::path::Path::new("/proc");
        proc.is_dir() && !proc.join(pid.to_string()).exists()
    }
}

#[cfg(test)]
mod tests {
    use super::died_here;

    #[test]
    fn only_a_gone_process_of_this_machine_is_dead() {
        let me = format!("box:{}:aaaa", std::process::id());
        // pid 0 is never a process's in /proc; the host must match and the pid differ.
        assert_eq!(died_here("box:0:bbbb", &me), cfg!(target_os = "linux"));
        assert!(!died_here("other:0:bbbb", &me));
        assert!(!died_here(&format!("box:{}:bbbb", std::process::id()), &me));
        assert!(!died_here("box:1:bbbb", &me), "pid 1 runs");
        assert!(!died_here("garbage", &me));
    }
}
