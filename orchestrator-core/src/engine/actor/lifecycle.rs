//! A plan's lifecycle as hosts drive it: start (with plan chaining and the git facts pinned
//! on the first start), pause, resume, cancel, force-fail, retry, recover and archive.

use super::*;
use crate::error::StateProblem;
use crate::plan::{validate, ValidationContext};

impl PlanActor {
    pub(super) async fn start(&mut self) -> Result<()> {
        let state = &self.machine.record().state;
        if state.archived {
            return Err(self.invalid(StateProblem::Archived));
        }
        if state.scaffolding {
            return Err(self.invalid(StateProblem::Scaffolding));
        }
        if state.canceled {
            return Err(self.invalid(StateProblem::Canceled));
        }
        if let Some(other) = self.spec.resume_after_plan.clone() {
            let other = PlanId::from(other);
            if self.ctx.status_anywhere(&other).await? != PlanStatus::Succeeded {
                if !self.chain_pending {
                    self.chain_pending = true;
                    let (ctx, tx) = (self.ctx.clone(), self.tx.clone());
                    tokio::spawn(async move {
                        match ctx.wait_succeeded(&other).await {
                            Ok(()) => {
                                let _ = tx.send(Message::ChainSatisfied);
                            }
                            Err(e) => tracing::error!(
                                plan = %other, error = %e,
                                "the plan this one is chained to cannot be read; it stays pending"
                            ),
                        }
                    });
                }
                return Ok(());
            }
        }
        self.begin().await
    }

    /// Pins the git facts on first start and makes ready whatever can run.
    pub(super) async fn begin(&mut self) -> Result<()> {
        let at = self.clock;
        self.activated = true;
        let state = &self.machine.record().state;
        let first = state.started_at.is_none();
        let (base, target, snapshot) =
            if self.spec.isolation == Isolation::Worktree && state.base_commit.is_none() {
                let (b, t, s) = self.prepare_git().await?;
                (Some(b), Some(t), Some(s))
            } else {
                (None, None, None)
            };
        if first || base.is_some() {
            self.machine
                .start(at, base, target, snapshot)
                .map_err(|e| self.transition_error(e))?;
        }
        Ok(())
    }

    pub(super) async fn prepare_git(&self) -> Result<(String, String, String)> {
        let git = self
            .ctx
            .git
            .as_ref()
            .ok_or(Error::Config(crate::error::ConfigProblem::NoGitLayer))?;
        let repo = &self.machine.record().state.repo;
        crate::engine::exclude_own_folders(git.as_ref(), &self.ctx.options, &self.spec, repo)
            .await?;
        let current = git.current_branch(repo).await?;
        let default = git.default_branch(repo).await?;
        let base_rev = self
            .spec
            .base_branch
            .clone()
            .or_else(|| current.clone())
            // A detached checkout: the repository's default branch, as git names it.
            .unwrap_or_else(|| default.clone());
        let base = git.resolve(repo, &base_rev).await?;
        let target =
            match &self.spec.target_branch {
                Some(t) if *t == default => return Err(Error::Git(GitError::ProtectedBranch {
                    branch: t.clone(),
                    operation: "use as target".into(),
                    reason:
                        "plans never write the default branch directly; choose another targetBranch"
                            .into(),
                })),
                Some(t) => Some(t.clone()),
                None => match &current {
                    Some(c) if *c != default => Some(c.clone()),
                    _ => None,
                },
            };
        let target = match target {
            Some(target) => target,
            // Generated: a branch of this plan's own, created here (SPEC §2).
            None => {
                let store = self.ctx.repository.as_ref();
                crate::engine::claim_generated_target_branch(
                    git.as_ref(),
                    store,
                    &self.id,
                    repo,
                    &self.spec.name,
                    &base,
                )
                .await?
            }
        };
        match git.branch_tip(repo, &target).await? {
            None => git.update_branch(repo, &target, &base, None).await?,
            Some(tip) => {
                if !git.is_ancestor(repo, &base, &tip).await? {
                    return Err(Error::Git(GitError::Diverged {
                        branch: target,
                        base,
                        hint: "it does not contain the plan's base; pick another targetBranch or base the plan on it".into(),
                    }));
                }
            }
        }
        let snapshot = crate::engine::snapshot_branch_name(&self.id);
        if git.branch_tip(repo, &snapshot).await?.is_none() {
            git.update_branch(repo, &snapshot, &base, None).await?;
        }
        Ok((base, target, snapshot))
    }

    pub(super) fn pause(&mut self, stop_running: bool) -> Result<()> {
        self.machine
            .pause(self.clock)
            .map_err(|e| self.transition_error(e))?;
        if stop_running {
            self.stop_all(StopReason::Pause);
        }
        Ok(())
    }

    pub(super) async fn resume(&mut self) -> Result<()> {
        let state = &self.machine.record().state;
        if state.canceled {
            return Err(self.invalid(StateProblem::Canceled));
        }
        self.machine
            .resume(self.clock)
            .map_err(|e| self.transition_error(e))?;
        self.start().await
    }

    pub(super) fn cancel(&mut self) -> Result<()> {
        if self.machine.plan_status().is_terminal() && self.active == 0 {
            return Err(self.invalid(StateProblem::Ended {
                status: self.machine.plan_status(),
            }));
        }
        self.machine
            .cancel(self.clock)
            .map_err(|e| self.transition_error(e))?;
        // A split job waiting for its sub-jobs runs nothing itself: it is canceled with them.
        for n in 0..self.running.len() {
            if self.running[n].is_none() && self.machine.status_of(n) == NodeStatus::CompletedSplit
            {
                self.machine
                    .cancel_node(n, self.clock)
                    .map_err(|e| self.transition_error(e))?;
            }
        }
        self.composite_done.clear();
        self.queue.clear();
        self.stop_all(StopReason::Cancel);
        Ok(())
    }

    pub(super) fn stop_all(&mut self, reason: StopReason) {
        for r in self.running.iter_mut().flatten() {
            if r.stop != Some(StopReason::Cancel) {
                r.stop = Some(reason);
            }
            r.cancel.cancel();
        }
    }

    pub(super) fn force_fail(&mut self, job: &str) -> Result<()> {
        let n = resolve_job(self.machine.record(), Some(self.machine.graph()), job)?;
        if self.machine.status_of(n) == NodeStatus::Waiting {
            return self.force_fail_waiting(n);
        }
        match self.running[n].as_mut() {
            Some(r) => {
                r.stop = Some(StopReason::ForceFail);
                r.cancel.cancel();
                Ok(())
            }
            None => Err(self.invalid(StateProblem::NotRunning {
                job: job.to_owned(),
                status: self.machine.status_of(n),
            })),
        }
    }

    pub(super) async fn retry(&mut self, request: Box<RetryRequest>) -> Result<usize> {
        if self.machine.record().state.canceled {
            return Err(self.invalid(StateProblem::Canceled));
        }
        let graph = self.machine.graph().clone();
        let nodes: Vec<NodeIndex> = if request.jobs.is_empty() {
            (0..graph.node_count())
                .filter(|&n| self.machine.status_of(n) == NodeStatus::Failed)
                .collect()
        } else {
            let mut v = Vec::new();
            for job in &request.jobs {
                let n = resolve_job(self.machine.record(), Some(&graph), job)?;
                let s = self.machine.status_of(n);
                if s != NodeStatus::Failed {
                    return Err(self.invalid(StateProblem::NotFailed {
                        job: job.clone(),
                        status: s,
                    }));
                }
                v.push(n);
            }
            v
        };
        if nodes.is_empty() {
            return Err(self.invalid(StateProblem::NothingToRetry));
        }
        let replaces =
            request.work.is_some() || request.prechecks.is_some() || request.postchecks.is_some();
        if replaces {
            if nodes.iter().any(|&n| graph.is_snapshot(n)) {
                return Err(self.invalid(StateProblem::SnapshotWork));
            }
            self.check_replacement(&nodes, &request)?;
        }
        let at = self.clock;
        for &n in &nodes {
            let mut resume = self
                .machine
                .resume_phase_after_failure(n)
                .unwrap_or(Phase::MergeFi);
            // An edit of the job's specs since it failed rewinds it (see `edit`).
            if let Some(earlier) = self.machine.record().state.nodes[n].extra.resume_from {
                resume = resume.min(earlier);
            }
            if replaces {
                self.machine
                    .record_change(StateChange::SpecsReplaced {
                        node: n,
                        work: request.work.clone().map(Box::new),
                        prechecks: request.prechecks.clone().map(Box::new),
                        postchecks: request.postchecks.clone().map(Box::new),
                    })
                    .map_err(|e| self.transition_error(e))?;
                let earliest = if request.prechecks.is_some() {
                    Phase::Prechecks
                } else if request.work.is_some() {
                    Phase::Work
                } else {
                    Phase::Postchecks
                };
                resume = resume.min(earliest);
            }
            if request.clear_worktree {
                self.clear_worktree(n).await?;
                resume = Phase::MergeFi;
            }
            let resume = (resume != Phase::MergeFi).then_some(resume);
            self.machine
                .retry_anew(n, resume, at)
                .map_err(|e| self.transition_error(e))?;
        }
        if replaces {
            self.spec = self.machine.record().spec.clone();
        }
        Ok(nodes.len())
    }

    /// Refuses a retry whose replacement specs would make the plan invalid (an empty command,
    /// an unknown agent, a folder outside the repository...), naming every problem by its job
    /// as a bad plan file is, before anything is recorded: what `retry --work` checks in the
    /// CLI holds for every host.
    fn check_replacement(&self, nodes: &[NodeIndex], request: &RetryRequest) -> Result<()> {
        let record = self.machine.record();
        let mut spec = (*record.spec).clone();
        for &n in nodes {
            if let Some(job) = spec.jobs.get_mut(n) {
                job.replace_specs(
                    request.work.as_ref(),
                    request.prechecks.as_ref(),
                    request.postchecks.as_ref(),
                );
            }
        }
        validate(
            &spec,
            ValidationContext {
                repo: Some(&record.state.repo),
                scaffolding: record.state.scaffolding,
            },
        )?;
        Ok(())
    }

    /// SPEC §3 recovery: the target branch exists again (at the base if it was deleted), the
    /// worktrees of succeeded jobs whose commits are still to be consumed are recreated, and
    /// every failed, blocked or canceled job is pending again, with the plan paused.
    pub(super) async fn recover(&mut self) -> Result<()> {
        let status = self.machine.plan_status();
        if !matches!(status, PlanStatus::Failed | PlanStatus::Canceled) || self.active > 0 {
            return Err(self.invalid(StateProblem::NotRecoverable { status }));
        }
        if self.spec.isolation == Isolation::Worktree {
            if let Some(git) = self.ctx.git.clone() {
                let state = self.machine.record().state.clone();
                let repo = &state.repo;
                if let (Some(base), Some(target)) = (&state.base_commit, &state.target_branch) {
                    if git.branch_tip(repo, target).await?.is_none() {
                        git.update_branch(repo, target, base, None).await?;
                    }
                }
                if let (Some(base), Some(snapshot)) = (&state.base_commit, &state.snapshot_branch) {
                    if git.branch_tip(repo, snapshot).await?.is_none() {
                        git.update_branch(repo, snapshot, base, None).await?;
                    }
                }
                let graph = self.machine.graph().clone();
                let root = self.ctx.options.plan_worktree_root(&self.spec, repo);
                for (n, node) in state.nodes.iter().enumerate() {
                    let needed = node.status == NodeStatus::Succeeded
                        && !graph.is_snapshot(n)
                        && !graph.is_user_leaf(n)
                        && graph
                            .dependents(n)
                            .any(|d| state.nodes[d].status != NodeStatus::Succeeded);
                    if let (true, Some(commit)) = (needed, &node.extra.commit) {
                        let path = node.extra.worktree.clone().unwrap_or_else(|| {
                            root.join(crate::engine::job_worktree_name(&node.id))
                        });
                        git.create_worktree(repo, &path, commit).await?;
                        self.machine
                            .record_change(StateChange::Worktree {
                                node: n,
                                path: Some(path),
                                base_commit: Some(commit.clone()),
                            })
                            .map_err(|e| self.transition_error(e))?;
                    }
                }
            }
        }
        self.machine
            .recover(self.clock)
            .map_err(|e| self.transition_error(e))
    }

    /// SPEC §3 archive: worktrees, the snapshot branch and the target branch (never the default
    /// branch) are removed; state and logs are kept; the plan is marked archived.
    pub(super) async fn archive(&mut self) -> Result<ArchiveReport> {
        let status = self.machine.plan_status();
        if !matches!(
            status,
            PlanStatus::Succeeded | PlanStatus::Failed | PlanStatus::Canceled
        ) || self.active > 0
        {
            return Err(self.invalid(StateProblem::NotArchivable { status }));
        }
        let mut report = ArchiveReport::default();
        if let Some(git) = self.ctx.git.clone() {
            let state = self.machine.record().state.clone();
            let repo = &state.repo;
            let root = self.ctx.options.plan_worktree_root(&self.spec, repo);
            let mut paths: Vec<PathBuf> = state
                .nodes
                .iter()
                .map(|n| root.join(crate::engine::job_worktree_name(&n.id)))
                .collect();
            paths.push(root.join(crate::engine::snapshot_worktree_name(&self.id)));
            paths.extend(state.nodes.iter().filter_map(|n| n.extra.worktree.clone()));
            paths.sort();
            paths.dedup();
            for (n, node) in state.nodes.iter().enumerate() {
                if node.extra.worktree.is_some() {
                    self.forget_worktree(n)?;
                }
            }
            for path in paths {
                if path.exists() {
                    match git.remove_worktree(repo, &path).await {
                        Ok(()) => report.worktrees_removed.push(path),
                        Err(e) => report.warnings.push(format!("{}: {e}", path.display())),
                    }
                }
            }
            // The refs remote execution fetched the plan's job results into (SPEC §16).
            let prefix = crate::remote::JobRefs::of_plan(&self.id);
            if let Err(e) = git.delete_refs_under(repo, &prefix).await {
                report.warnings.push(format!("kept {prefix}*: {e}"));
            }
            // Finished jobs' worktrees kept for reuse (SPEC §17): a cache, emptied with the
            // plan so that an archived repository holds no worktree of ours.
            if let Err(e) = git.clear_worktree_pool(repo).await {
                report.warnings.push(format!("kept the worktree pool: {e}"));
            }
            let default = git.default_branch(repo).await.ok();
            for branch in [&state.snapshot_branch, &state.target_branch]
                .into_iter()
                .flatten()
            {
                if Some(branch) == default.as_ref() {
                    report
                        .warnings
                        .push(format!("kept `{branch}`: it is the default branch"));
                    continue;
                }
                if git.branch_tip(repo, branch).await?.is_none() {
                    continue;
                }
                match git.delete_branch(repo, branch).await {
                    Ok(()) => report.branches_deleted.push(branch.clone()),
                    Err(e) => report.warnings.push(format!("kept `{branch}`: {e}")),
                }
            }
        }
        self.machine
            .record_change(StateChange::Archived { at: self.clock })
            .map_err(|e| self.transition_error(e))?;
        Ok(report)
    }

    pub(super) async fn clear_worktree(&mut self, n: NodeIndex) -> Result<()> {
        let node = &self.machine.record().state.nodes[n];
        if let (Some(path), Some(git)) = (node.extra.worktree.clone(), self.ctx.git.clone()) {
            let repo = &self.machine.record().state.repo;
            // The recorded folder is ours even when a job broke it (a removed `.git`): such a
            // folder goes first, a valid worktree after.
            git.remove_broken_worktree(repo, &path).await?;
            git.remove_worktree(repo, &path).await?;
            self.forget_worktree(n)?;
        }
        Ok(())
    }

    /// Records that node `n` has no worktree any more.
    pub(super) fn forget_worktree(&mut self, n: NodeIndex) -> Result<()> {
        self.machine
            .record_change(StateChange::Worktree {
                node: n,
                path: None,
                base_commit: None,
            })
            .map_err(|e| self.transition_error(e))
    }

    pub(super) fn progress(&mut self, changes: Vec<StateChange>) {
        for change in changes {
            if let StateChange::Metrics { metrics, .. } = &change {
                self.usage.add_metrics(metrics);
            }
            if let Err(e) = self.machine.record_change(change) {
                tracing::error!(error = %e, "node progress rejected");
            }
        }
    }
}
