//! The engine: [`Orchestrator`] (built by [`OrchestratorBuilder`]) runs plans.
//!
//! One actor task per plan owns its [`crate::state::PlanMachine`]; node tasks run the phase
//! pipeline and report back over a channel. A finished node releases its dependents in the same
//! actor turn (no polling), every turn's changes are appended to the store in one batch before
//! any newly scheduled node starts, and capacity is a plan's `maxParallel` plus the
//! [`crate::Capacity`] every plan of the engine shares (a semaphore of this process by default,
//! or slots shared by every process of the machine).

mod actor;
mod builder;
mod context;
pub(crate) mod messages;
mod options;
mod orchestrator;
mod pipeline;
mod queue;
mod repair;
mod writer;

pub use builder::OrchestratorBuilder;
pub use messages::{ArchiveReport, RetryRequest};
pub use options::OrchestratorOptions;
pub use orchestrator::Orchestrator;

use crate::ids::NodeIndex;
use crate::state::PlanRecord;

/// How the snapshot-validation node is shown (and may be named in job references).
pub const SNAPSHOT_LABEL: &str = "snapshot-validation";

/// `My Plan: v2!` -> `my-plan-v2`: a safe branch component (never empty, never a leading `-`).
pub(crate) fn sanitize_branch_part(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed: String = out.trim_matches('-').chars().take(60).collect();
    let trimmed = trimmed.trim_end_matches('-').to_owned();
    if trimmed.is_empty() {
        "plan".into()
    } else {
        trimmed
    }
}

/// The target branch a plan gets when it names none and the current branch is the default
/// one: `orchestrator/<sanitized name>` — or, when a branch of that name exists already,
/// the first free `orchestrator/<sanitized name>-<n>` (n = 2, 3, ...; see
/// `claim_generated_target_branch`), so that no two plans share one.
pub fn generated_target_branch(plan_name: &str) -> String {
    format!("orchestrator/{}", sanitize_branch_part(plan_name))
}

/// How many generated target branches of one name [`claim_generated_target_branch`] tries
/// (`orchestrator/<name>`, then `-2` up to this suffix) before asking for an explicit one.
const MAX_GENERATED_TARGETS: usize = 1000;

/// How often a candidate branch whose ref is locked (another process is writing it this
/// instant) is looked at again before moving on to the next suffix.
const LOCKED_REF_TRIES: u32 = 20;

/// Claims a generated target branch for plan `plan` (stored in `store`), which names none:
/// creates `orchestrator/<sanitized name>` at `base`, or, when that branch already exists,
/// `orchestrator/<name>-2`, `-3`, ... — the first one that does not.
///
/// Each candidate is created with a compare-and-swap from "absent", so of two plans with the
/// same name starting at once (even in two processes) exactly one gets each branch: a generated
/// target is never shared, and neither plan fails because the other moved "its" branch. A
/// branch left by an earlier plan of the same name is never written either.
///
/// One existing branch is taken: this plan's own, created by a start that crashed before it
/// was recorded (see [`orphan_of`]), so that a resumed plan lands where it would have.
pub(crate) async fn claim_generated_target_branch(
    git: &dyn crate::git::GitOperations,
    store: &dyn crate::repository::PlanRepository,
    plan: &crate::ids::PlanId,
    repo: &std::path::Path,
    plan_name: &str,
    base: &str,
) -> Result<String, crate::git::GitError> {
    use crate::git::GitError;
    let stem = generated_target_branch(plan_name);
    for n in 1..=MAX_GENERATED_TARGETS {
        let candidate = if n == 1 {
            stem.clone()
        } else {
            format!("{stem}-{n}")
        };
        let mut tries = 0;
        loop {
            match git.update_branch(repo, &candidate, base, None).await {
                Ok(()) => return Ok(candidate),
                // Someone has it (a finished plan, one starting right now, or this one before a
                // crash): next suffix, unless it is this plan's own.
                Err(GitError::RefChanged { actual, .. }) => {
                    if actual.as_deref() == Some(base)
                        && orphan_of(store, plan, repo, &stem, &candidate).await
                    {
                        return Ok(candidate);
                    }
                    break;
                }
                // Its ref is locked: another process is creating it. Look again shortly; the
                // lock is held for milliseconds, so a lock that stays is stale and the branch
                // is left to whoever holds it.
                Err(e) if e.is_retryable() => {
                    tries += 1;
                    if tries >= LOCKED_REF_TRIES {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(5 * u64::from(tries)))
                        .await;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Err(GitError::Other {
        operation: "choose a target branch".into(),
        message: format!(
            "`{stem}` and its suffixed variants up to `-{MAX_GENERATED_TARGETS}` all exist; \
             name a targetBranch in the plan or archive old plans"
        ),
        retryable: false,
    })
}

/// Whether `branch` (existing, at the plan's base) can only be the claim of plan `plan` from a
/// start that crashed before recording it: no stored plan of this repository records it as
/// its target, and no other plan whose generated target would start from `stem` is without
/// a recorded target (such a plan may be claiming `branch` this very moment; its record was
/// stored before it started, so it is seen). When the store cannot tell, the answer is no:
/// taking the next suffix is always safe.
async fn orphan_of(
    store: &dyn crate::repository::PlanRepository,
    plan: &crate::ids::PlanId,
    repo: &std::path::Path,
    stem: &str,
    branch: &str,
) -> bool {
    let Ok(listing) = store.list().await else {
        return false;
    };
    if !listing.damaged.is_empty() {
        return false;
    }
    for summary in listing.plans.iter().filter(|s| s.plan_id != *plan) {
        // Only plans that could have written `branch` matter.
        let may_claim = generated_target_branch(&summary.name) == stem;
        let Ok(other) = store.load(&summary.plan_id).await else {
            return false;
        };
        if other.state.repo != repo {
            continue;
        }
        let target = other
            .state
            .target_branch
            .as_deref()
            .or(other.spec.target_branch.as_deref());
        match target {
            Some(t) if t == branch => return false,
            None if may_claim => return false,
            _ => {}
        }
    }
    true
}

/// The plan's snapshot branch (SPEC §4): `orchestrator/snapshot/<planId>`.
pub fn snapshot_branch_name(plan: &crate::ids::PlanId) -> String {
    format!("orchestrator/snapshot/{plan}")
}

/// The branches under `orchestrator/` a plan writes or may have started to write: its
/// snapshot branch and its target (as recorded, as named, or as it would be generated). Crash
/// repairs look for stale ref locks of exactly these.
pub fn own_branches(record: &PlanRecord) -> Vec<String> {
    let state = &record.state;
    let mut branches = vec![state
        .snapshot_branch
        .clone()
        .unwrap_or_else(|| snapshot_branch_name(&state.id))];
    match &state.target_branch {
        Some(target) => branches.push(target.clone()),
        // Not recorded yet: the one it would have claimed first. Once recorded, the
        // unsuffixed name may be another plan's (generated targets are never shared), and a
        // lock on it is that plan's, not stale.
        None => branches.push(generated_target_branch(&record.spec.name)),
    }
    branches.extend(record.spec.target_branch.clone());
    branches.retain(|b| b.starts_with("orchestrator/"));
    branches.sort();
    branches.dedup();
    branches
}
/// Keeps the engine's own folders out of `git status` in `repo` (through
/// `.git/info/exclude`): the store, the default worktree folder and the plan's worktree root
/// when it is inside the repository. Jobs' commits must never take them in, wherever the
/// jobs run (this process or a remote worker's clone).
pub(crate) async fn exclude_own_folders(
    git: &dyn crate::git::GitOperations,
    options: &OrchestratorOptions,
    spec: &crate::plan::PlanSpec,
    repo: &std::path::Path,
) -> Result<(), crate::git::GitError> {
    let root = options.plan_worktree_root(spec, repo);
    let own_root = root
        .strip_prefix(repo)
        .ok()
        .filter(|rel| !rel.as_os_str().is_empty())
        .map(|rel| format!("/{}/", rel.to_string_lossy().trim_end_matches('/')));
    let mut excluded = vec!["/.worktrees/", "/.orchestrator/"];
    excluded.extend(own_root.as_deref());
    git.exclude(repo, &excluded).await
}

/// Folder name of a job's worktree under the worktree root (SPEC §4: `<id8>`).
pub fn job_worktree_name(node: &crate::ids::NodeId) -> &str {
    node.short()
}

/// Folder name of a plan's snapshot worktree under the worktree root (SPEC §4).
pub fn snapshot_worktree_name(plan: &crate::ids::PlanId) -> String {
    format!("_snapshot-{}", plan.short())
}

/// Display label of a node: the job's display name, or `snapshot-validation`.
pub fn node_label(record: &PlanRecord, n: NodeIndex) -> &str {
    record
        .spec
        .jobs
        .get(n)
        .map(|j| j.display_name())
        .unwrap_or(SNAPSHOT_LABEL)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::git::memory::MemoryGit;
    use crate::git::GitOperations;
    use crate::ids::PlanId;
    use crate::plan::PlanSpec;
    use crate::repository::{InMemoryPlanRepository, PlanRepository};

    /// A stored plan named `name` on `repo` that has not recorded a target yet.
    async fn stored(store: &InMemoryPlanRepository, repo: &Path, name: &str) -> PlanId {
        let id = PlanId::random();
        let record = PlanRecord::new(id.clone(), PlanSpec::new(name), repo.to_path_buf(), 0, 0);
        store.create(&record).await.expect("store");
        id
    }

    #[tokio::test]
    async fn generated_targets_are_claimed_once_each() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("repo");
        let git = Arc::new(MemoryGit::new());
        let base = git
            .init_repo(&repo, "main", &[("README.md", "hello\n")])
            .expect("repo");
        let store = Arc::new(InMemoryPlanRepository::new());
        // A branch an earlier plan of the name left behind (with its work on it) is not taken
        // over.
        let wt = repo.join(".worktrees").join("earlier");
        git.create_worktree(&repo, &wt, &base)
            .await
            .expect("worktree");
        std::fs::write(wt.join("done.txt"), "done\n").expect("write");
        let done = git.commit_all(&wt, "earlier").await.expect("commit");
        let done = done.expect("a change");
        git.update_branch(&repo, "orchestrator/same", &done, None)
            .await
            .expect("earlier plan's branch");
        let plan = stored(&store, &repo, "Same").await;
        let claim = |plan: PlanId| {
            let (git, store, repo, base) = (git.clone(), store.clone(), repo.clone(), base.clone());
            async move {
                claim_generated_target_branch(
                    git.as_ref(),
                    store.as_ref(),
                    &plan,
                    &repo,
                    "same",
                    &base,
                )
                .await
                .expect("claim")
            }
        };
        assert_eq!(claim(plan.clone()).await, "orchestrator/same-2");
        // The same plan again, as after a crash before its target was recorded: its own.
        assert_eq!(claim(plan.clone()).await, "orchestrator/same-2");

        // Eight plans of one name starting at once: eight branches, none shared.
        let mut plans = Vec::new();
        for _ in 0..8 {
            plans.push(stored(&store, &repo, "same").await);
        }
        let claims: Vec<_> = plans.into_iter().map(|p| tokio::spawn(claim(p))).collect();
        let mut names = BTreeSet::new();
        for c in claims {
            let name = c.await.expect("join");
            assert_eq!(
                git.branch_tip(&repo, &name).await.expect("tip"),
                Some(base.clone())
            );
            assert!(names.insert(name.clone()), "{name} claimed twice");
        }
        let expected: BTreeSet<String> =
            (3..=10).map(|n| format!("orchestrator/same-{n}")).collect();
        assert_eq!(names, expected);
        // With other plans of the name still unrecorded, a re-claim cannot tell its branch
        // from theirs: it takes a new one rather than risk sharing.
        assert_eq!(claim(plan).await, "orchestrator/same-11");
    }
}
