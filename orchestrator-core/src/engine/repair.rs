//! Crash repairs and the orphan sweep, in the engine so that every host gets them: the CLI,
//! the MCP server and an embedding host open and create plans through the same
//! [`crate::Orchestrator`] calls, and those run these.
//!
//! - [`repair`] runs when a stored plan is opened, holding its lease and before its actor
//!   exists (nothing of the plan runs yet): it stops the processes a killed owner's jobs left
//!   running, removes the git lock files it left, puts back the snapshot branch when the crash
//!   came between the final merge and its record, and sweeps the plan's worktree root.
//! - [`sweep`] removes the worktrees under a root that no stored plan wants any more.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::engine::context::EngineCtx;
use crate::engine::{job_worktree_name, own_branches, snapshot_worktree_name};
use crate::error::Result;
use crate::plan::{Isolation, PlanGraph};
use crate::runner::Leftover;
use crate::state::{NodeStatus, PlanRecord, PlanStatus};

/// Crash repairs of a stored plan being opened (see the module docs). Each repair that fails is
/// logged and skipped: the plan can still run, and the failure shows again where it matters.
pub(crate) async fn repair(ctx: &EngineCtx, record: &PlanRecord, graph: &PlanGraph) {
    let id = &record.state.id;
    let leftovers = leftovers(ctx, record);
    if let (Some(reaper), false) = (ctx.reaper.clone(), leftovers.is_empty()) {
        match tokio::task::spawn_blocking(move || reaper.reap(&leftovers)).await {
            Ok(stopped) => {
                for pgid in stopped {
                    tracing::warn!(plan = %id, pgid, "stopped a process group a crashed owner left running");
                }
            }
            Err(e) => tracing::warn!(plan = %id, error = %e, "stopping leftover processes failed"),
        }
    }
    if record.spec.isolation != Isolation::Worktree {
        return;
    }
    let Some(git) = &ctx.git else { return };
    let repo = &record.state.repo;
    let root = ctx.options.plan_worktree_root(&record.spec, repo);
    let worktrees = repair_worktrees(record, &root);
    match git
        .remove_stale_locks(repo, &worktrees, &own_branches(record))
        .await
    {
        Ok(removed) => {
            for path in removed {
                tracing::warn!(plan = %id, path = %path.display(), "removed a lock file left by a crash");
            }
        }
        Err(e) => tracing::warn!(plan = %id, error = %e, "could not look for stale git locks"),
    }
    match restore_snapshot_branch(ctx, record, graph).await {
        Ok(Some(branch)) => tracing::warn!(
            plan = %id, %branch,
            "restored the snapshot branch: the final merge had landed just before a crash"
        ),
        Ok(None) => {}
        Err(e) => tracing::warn!(plan = %id, error = %e, "could not check the snapshot branch"),
    }
    sweep_once(ctx, repo, &root).await;
}

/// The worktrees of a plan to clear of stale locks: recorded ones, and where a running node's
/// would be (a kill can come between creating one and recording it), and the snapshot's.
fn repair_worktrees(record: &PlanRecord, root: &Path) -> Vec<PathBuf> {
    let mut worktrees: Vec<PathBuf> = record
        .state
        .nodes
        .iter()
        .flat_map(|n| {
            let expected = n
                .status
                .is_active()
                .then(|| root.join(job_worktree_name(&n.id)));
            n.extra.worktree.clone().into_iter().chain(expected)
        })
        .chain([root.join(snapshot_worktree_name(&record.state.id))])
        .collect();
    worktrees.sort();
    worktrees.dedup();
    worktrees
}

/// Puts the snapshot branch back when a crash came between the final merge and the record of
/// its success: the snapshot node had merged its commit into the target and deleted the
/// snapshot branch, but the store still has it unfinished, so its next run would fail on the
/// missing branch. With the branch back at that commit the run finds the target up to date
/// and finishes. Returns the branch restored.
async fn restore_snapshot_branch(
    ctx: &EngineCtx,
    record: &PlanRecord,
    graph: &PlanGraph,
) -> Result<Option<String>> {
    let (Some(git), Some(snapshot), Some(target)) = (
        &ctx.git,
        &record.state.snapshot_branch,
        &record.state.target_branch,
    ) else {
        return Ok(None);
    };
    let repo = &record.state.repo;
    let node = (0..graph.node_count())
        .find(|&n| graph.is_snapshot(n))
        .and_then(|n| record.state.nodes.get(n));
    let Some((node, commit)) = node.and_then(|n| n.extra.commit.as_ref().map(|c| (n, c))) else {
        return Ok(None);
    };
    if node.status == NodeStatus::Succeeded || git.branch_tip(repo, snapshot).await?.is_some() {
        return Ok(None);
    }
    let Some(tip) = git.branch_tip(repo, target).await? else {
        return Ok(None);
    };
    if !git.is_ancestor(repo, commit, &tip).await? {
        return Ok(None);
    }
    git.update_branch(repo, snapshot, commit, None).await?;
    Ok(Some(snapshot.clone()))
}

/// [`sweep`] of `root`, the first time this orchestrator meets it (a process's plans share
/// their roots; sweeping once at the start is what catches a crash's leftovers). Failures are
/// logged: a plan runs without the sweep (another process may be removing the same folder).
pub(crate) async fn sweep_once(ctx: &EngineCtx, repo: &Path, root: &Path) {
    let first = ctx
        .swept
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(root.to_path_buf());
    if !first {
        return;
    }
    match sweep(ctx, repo, root).await {
        Ok(removed) => {
            for path in removed {
                tracing::warn!(path = %path.display(), "removed a worktree left by a crash");
            }
        }
        Err(e) => {
            tracing::warn!(root = %root.display(), error = %e, "could not remove worktrees left by crashes")
        }
    }
}

/// Removes the worktrees of `repo` directly under `root` that no stored plan wants: neither
/// recorded as a node's worktree nor belonging to a node that has not ended (it may be
/// created at any moment, in this or another process). A succeeded node whose removal a crash
/// cut short is recorded as gone, so its folder is an orphan. Nothing is removed while a
/// stored plan cannot be read. Stored plans are read only when the root holds something.
pub(crate) async fn sweep(ctx: &EngineCtx, repo: &Path, root: &Path) -> Result<Vec<PathBuf>> {
    let Some(git) = &ctx.git else {
        return Ok(Vec::new());
    };
    // The common case, nothing under the root, costs no plan loads.
    let occupied = std::fs::read_dir(root).is_ok_and(|mut d| d.next().is_some());
    if !occupied {
        return Ok(Vec::new());
    }
    let listing = ctx.repository.list().await?;
    if let Some((plan, e)) = listing.damaged.first() {
        tracing::warn!(%plan, error = %e, "not removing orphan worktrees: a plan cannot be read");
        return Ok(Vec::new());
    }
    let mut live: HashSet<PathBuf> = HashSet::new();
    // An archived plan has no worktrees left to want: its record need not be read.
    for summary in listing
        .plans
        .iter()
        .filter(|s| s.status != PlanStatus::Archived)
    {
        let record = match ctx.repository.load(&summary.plan_id).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(plan = %summary.plan_id, error = %e, "not removing orphan worktrees");
                return Ok(Vec::new());
            }
        };
        let plan_root = ctx.options.plan_worktree_root(&record.spec, repo);
        let jobs = record.spec.jobs.len();
        for (n, node) in record.state.nodes.iter().enumerate() {
            if let Some(path) = &node.extra.worktree {
                live.insert(path.clone());
            } else if !node.status.is_terminal() {
                live.insert(plan_root.join(if n < jobs {
                    job_worktree_name(&node.id).to_owned()
                } else {
                    snapshot_worktree_name(&record.state.id)
                }));
            }
        }
    }
    let live: Vec<PathBuf> = live.into_iter().collect();
    Ok(git.remove_orphaned_worktrees(repo, root, &live).await?)
}

/// The process groups a stored plan's running attempts had started, with the folder each ran in.
fn leftovers(ctx: &EngineCtx, record: &PlanRecord) -> Vec<Leftover> {
    let root = ctx
        .options
        .plan_worktree_root(&record.spec, &record.state.repo);
    record
        .state
        .nodes
        .iter()
        .filter(|n| n.status.is_active())
        .flat_map(|n| {
            let dir = match record.spec.isolation {
                Isolation::None => record.state.repo.clone(),
                _ => n
                    .extra
                    .worktree
                    .clone()
                    .unwrap_or_else(|| root.join(job_worktree_name(&n.id))),
            };
            // The token finds the processes that left the group (`setsid`, daemons).
            // A node that was running may have started processes whose group a crash kept from
            // the record: group 0 stands for those, found by the token alone.
            let prefix = crate::runner::job_token_prefix(&record.state.id, &n.id);
            let groups = if n.extra.processes.is_empty() {
                vec![0]
            } else {
                n.extra.processes.clone()
            };
            groups
                .into_iter()
                .map(move |pgid| Leftover::new(pgid, dir.clone()).token_prefix(prefix.clone()))
        })
        .collect()
}
