//! The phases of a user job on its own worktree: merge-fi (with the worktree laid out for a
//! first run or a re-run), setup, the commit, and merge-ri into the snapshot branch.

use super::*;

impl NodeRun {
    pub(super) fn worktree_root(&self) -> PathBuf {
        self.ctx.options.plan_worktree_root(&self.spec, &self.repo)
    }

    pub(super) async fn run_job(&self) -> PhaseResult<RunEnd> {
        if !self.on_worker {
            self.save_specs().await;
        }
        let git = self.git()?.clone();
        let Some(job) = self.job() else {
            return Ok(RunEnd::Finished);
        };
        let wt = self.worktree.clone().unwrap_or_else(|| {
            self.worktree_root()
                .join(crate::engine::job_worktree_name(&self.node_id))
        });

        // merge-fi always runs: it is idempotent, and skipping it once lost work in the reference.
        let start = self
            .phase(Phase::MergeFi, |log| self.merge_fi(&git, &wt, log))
            .await?;
        // When merge-fi laid the files out anew, every phase before the commit runs again on
        // them: what setup and prechecks left is gone with the reset (see `WorktreeStart`).
        let from = if start != WorktreeStart::Kept && self.resume_from <= Phase::Work {
            Phase::Setup
        } else {
            self.resume_from
        };
        if from <= Phase::Setup {
            self.phase(Phase::Setup, |log| self.setup(&wt, log)).await?;
        }
        self.checks_and_work(&wt, from).await?;
        if let Some(park) = self.take_park() {
            // The worktree stays as the agent left it (its session goes on there), saved as a
            // checkpoint commit its sub-agents branch from.
            self.phase(Phase::Commit, |log| {
                self.checkpoint(&git, job, &wt, &park, log)
            })
            .await?;
            return Ok(RunEnd::Held(Hold::Park(park)));
        }
        let split = self.take_split_manifest(&wt, from)?;
        // What a split job has so far, a composite job's merge of its sub-jobs and a timer
        // (its commit is its dependencies' merge) may change nothing.
        let may_be_empty = job.extra.expects_no_changes
            || split.is_some()
            || self.composite
            || job.work.is_job_only();
        let commit = if self.runs(Phase::Commit) {
            self.phase(Phase::Commit, |log| {
                self.commit(&git, job, &wt, may_be_empty, log)
            })
            .await?
        } else {
            match self.prev_commit.clone() {
                Some(c) => c,
                None => git
                    .head(&wt)
                    .await
                    .map_err(|e| NodeFailure::git(Phase::Commit, e))?,
            }
        };
        if let Some(manifest) = split {
            // The rest of the job is its sub-jobs'; its postchecks run once they are merged.
            return Ok(RunEnd::Held(Hold::Split(manifest)));
        }
        if self.composes() {
            return Ok(RunEnd::Held(Hold::Compose));
        }
        if let Some(post) = job
            .extra
            .postchecks
            .as_ref()
            .filter(|_| self.runs(Phase::Postchecks))
        {
            self.phase(Phase::Postchecks, |log| {
                self.run_spec(Phase::Postchecks, post, &wt, log)
            })
            .await?;
        }
        if let held @ RunEnd::Held(_) = self.after_the_phases() {
            return Ok(held);
        }
        // On a worker the coordinator merges the result (see `remote`).
        if self.graph.is_user_leaf(self.node) && !self.on_worker {
            self.phase(Phase::MergeRi, |log| self.merge_ri(&git, job, &commit, log))
                .await?;
        }
        Ok(RunEnd::Finished)
    }

    /// Whether this attempt continues the agent session of an earlier, unfinished run of its
    /// work phase: then the worktree is kept as that run left it, so that the files and the
    /// conversation go on together (the agent is told it was interrupted). Everything else that
    /// runs again starts from where its phase began.
    pub(super) fn continues_agent_session(&self) -> bool {
        let agent_work = self.job().and_then(|j| match &j.work {
            WorkSpec::Agent(a) => Some(a),
            _ => None,
        });
        self.resume_from == Phase::Work
            && self.session_id.is_some()
            && agent_work.is_some_and(|a| a.resume_session != Some(false))
    }

    pub(super) async fn merge_fi(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        log: LogSink,
    ) -> PhaseResult<WorktreeStart> {
        let p = Phase::MergeFi;
        let composite = self.composite && self.prev_commit.is_some();
        let start = match (
            self.resume_from > Phase::Commit || composite,
            &self.prev_commit,
        ) {
            // Resuming after the commit, or a composite job going on after its sub-jobs: the
            // worktree must hold the job's own commit.
            (true, Some(c)) => c.clone(),
            // A parked agent woken up goes on from its checkpoint.
            _ => match self.checkpoint.as_ref().or(self.dep_commits.first()) {
                Some(c) => c.clone(),
                None => self.own_base(git).await?,
            },
        };
        let keep = self.continues_agent_session();
        let laid_out = self.lay_out_worktree(git, wt, &start, keep, &log).await?;
        self.hydrate(wt, &log).await?;
        if self.wake.is_some() {
            let prefix = &self.ctx.options.commit_prefix;
            self.sub_agents.merge_into(git, wt, prefix, &log).await?;
        }
        // A composite job merges every dependency into its own commit: its sub-jobs' (and its
        // first dependencies', already in it: nothing to do for those).
        let skip = usize::from(!composite);
        let others: Vec<String> = self.dep_commits.iter().skip(skip).cloned().collect();
        if !others.is_empty() {
            let resolver = self.ctx.resolver.as_deref();
            let message = format!("{} forward integration", self.ctx.options.commit_prefix);
            let head = git
                .merge_into_worktree(wt, &others, &message, resolver)
                .await
                .map_err(|e| NodeFailure::git(p, e))?;
            log.line(
                LogStream::System,
                &format!("merged {} dependencies, head {head}", others.len()),
            );
        }
        Ok(laid_out)
    }

    /// The commit a job without dependency commits starts from: its `baseBranch`, else the
    /// plan's base.
    pub(super) async fn own_base(&self, git: &Arc<dyn GitOperations>) -> PhaseResult<String> {
        let p = Phase::MergeFi;
        match self.job().and_then(|j| j.extra.base_branch.as_deref()) {
            Some(rev) => git
                .resolve(&self.repo, rev)
                .await
                .map_err(|e| NodeFailure::git(p, e)),
            None => self.base_commit.clone().ok_or_else(|| {
                NodeFailure::new(
                    p,
                    FailureReason::StartupError,
                    "the plan has no base commit; was it started?",
                )
            }),
        }
    }

    /// Brings the node's worktree to `start` for the phases of this attempt (see
    /// [`WorktreeStart`]): created there if there is none; else, after a stopped or failed
    /// run, reset to it — or, with `keep` (an agent resuming its session), kept as it is.
    ///
    /// The worktree's path is the node's own, so a folder already there is an earlier run's
    /// even when a crash lost its record. A recorded one a job broke (its `.git` removed or
    /// pointed elsewhere) is replaced rather than refused.
    pub(super) async fn lay_out_worktree(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        start: &str,
        keep: bool,
        log: &LogSink,
    ) -> PhaseResult<WorktreeStart> {
        let p = Phase::MergeFi;
        let recorded = self.worktree.is_some();
        if recorded
            && git
                .remove_broken_worktree(&self.repo, wt)
                .await
                .map_err(|e| NodeFailure::git(p, e))?
        {
            log.line(
                LogStream::System,
                &format!(
                    "{} was no longer a git worktree (its .git was removed or changed); replacing it",
                    wt.display()
                ),
            );
        }
        let existed = wt.exists();
        git.create_worktree(&self.repo, wt, start)
            .await
            .map_err(|e| NodeFailure::git(p, e))?;
        let laid_out = if !existed {
            log.line(
                LogStream::System,
                &format!("worktree {} at {start}", wt.display()),
            );
            WorktreeStart::Created
        } else {
            // A branch an earlier run switched to goes before a reset detaches HEAD.
            self.release_job_branch(git, wt, log, p).await?;
            if keep {
                log.line(
                    LogStream::System,
                    "keeping the worktree as the interrupted run left it: the agent resumes its session",
                );
                WorktreeStart::Kept
            } else {
                // Not on the files a half-done run left (appending twice, or building on its
                // own uncommitted output).
                git.reset_worktree(wt, start)
                    .await
                    .map_err(|e| NodeFailure::git(p, e))?;
                log.line(
                    LogStream::System,
                    &format!("reset the worktree to {start}: the phases run again from there"),
                );
                WorktreeStart::Reset
            }
        };
        if !recorded {
            self.send(StateChange::Worktree {
                node: self.node,
                path: Some(wt.to_owned()),
                base_commit: Some(start.to_owned()),
            });
        }
        Ok(laid_out)
    }

    /// Detaches the worktree from a branch the job switched it to, deleting the branch if the
    /// job made it (it would be left in the user's repository), and says so in the log.
    pub(super) async fn release_job_branch(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        log: &LogSink,
        phase: Phase,
    ) -> PhaseResult {
        let released = git
            .release_job_branch(&self.repo, wt)
            .await
            .map_err(|e| NodeFailure::git(phase, e))?;
        if let Some(branch) = released {
            let what = if branch.deleted {
                "deleted it (its commits are in the job's)"
            } else {
                "it existed before the job and is left where the job put it"
            };
            log.line(
                LogStream::System,
                &format!(
                    "the job switched its worktree to branch `{}`; detached the worktree and {what}",
                    branch.name
                ),
            );
        }
        Ok(())
    }

    pub(super) async fn setup(&self, wt: &Path, log: LogSink) -> PhaseResult {
        let p = Phase::Setup;
        // The links are shared folders (node_modules ...), never part of a job's commit: they
        // are excluded like our own folders, here rather than at the plan's start because
        // `additionalSymlinkDirs` may change while the plan runs.
        if let (false, Some(git)) = (
            self.spec.additional_symlink_dirs.is_empty(),
            self.ctx.git.as_ref(),
        ) {
            let links: Vec<String> = self
                .spec
                .additional_symlink_dirs
                .iter()
                .map(|d| format!("/{}", d.trim_matches('/')))
                .collect();
            let patterns: Vec<&str> = links.iter().map(String::as_str).collect();
            git.exclude(&self.repo, &patterns)
                .await
                .map_err(|e| NodeFailure::git(p, e))?;
        }
        for dir in &self.spec.additional_symlink_dirs {
            let src = self.repo.join(dir);
            let dst = wt.join(dir);
            if !src.exists() || dst.symlink_metadata().is_ok() {
                continue;
            }
            if let Some(parent) = dst.parent() {
                tokio::fs::create_dir_all(parent).await.map_err(|e| {
                    NodeFailure::new(
                        p,
                        FailureReason::PhaseFailed,
                        format!("creating {}: {e}", parent.display()),
                    )
                })?;
            }
            symlink_dir(&src, &dst).map_err(|e| {
                NodeFailure::new(
                    p,
                    FailureReason::PhaseFailed,
                    format!("linking {} -> {}: {e}", dst.display(), src.display()),
                )
            })?;
            log.line(LogStream::System, &format!("linked {dir}"));
        }
        for spec in &self.spec.worktree_init {
            self.run_spec(p, spec, wt, log.clone()).await?;
        }
        Ok(())
    }

    /// Commits the worktree; with `may_be_empty`, nothing to commit is the job's head, not a
    /// `no_changes` failure.
    pub(super) async fn commit(
        &self,
        git: &Arc<dyn GitOperations>,
        job: &JobSpec,
        wt: &Path,
        may_be_empty: bool,
        log: LogSink,
    ) -> PhaseResult<String> {
        let p = Phase::Commit;
        self.release_job_branch(git, wt, &log, p).await?;
        let message = format!("{} {}", self.ctx.options.commit_prefix, job.task);
        let commit = match git
            .commit_all(wt, &message)
            .await
            .map_err(|e| NodeFailure::git(p, e))?
        {
            Some(c) => c,
            None if may_be_empty => git.head(wt).await.map_err(|e| NodeFailure::git(p, e))?,
            None => {
                // Work committed by the job itself (an agent that commits) counts as changes.
                let head = git.head(wt).await.map_err(|e| NodeFailure::git(p, e))?;
                let base = self.dep_commits.first().or(self.base_commit.as_ref());
                if base.is_some_and(|b| *b != head) {
                    head
                } else {
                    return Err(NodeFailure::new(
                        p,
                        FailureReason::NoChanges,
                        "the work changed no files; set `expectsNoChanges: true` if that is intended",
                    ));
                }
            }
        };
        log.line(LogStream::System, &format!("commit {commit}"));
        self.send(StateChange::Commit {
            node: self.node,
            commit: commit.clone(),
        });
        Ok(commit)
    }

    /// Saves a parked agent's worktree as a checkpoint commit (SPEC §15; nothing to commit
    /// leaves its HEAD as the checkpoint), then dehydrates it when its wait is long: the job's
    /// own commit is made when its work is done.
    async fn checkpoint(
        &self,
        git: &Arc<dyn GitOperations>,
        job: &JobSpec,
        wt: &Path,
        park: &crate::tools::Park,
        log: LogSink,
    ) -> PhaseResult {
        let p = Phase::Commit;
        self.release_job_branch(git, wt, &log, p).await?;
        let message = format!(
            "{} checkpoint: {}",
            self.ctx.options.commit_prefix, job.task
        );
        let commit = match git
            .commit_all(wt, &message)
            .await
            .map_err(|e| NodeFailure::git(p, e))?
        {
            Some(c) => c,
            None => git.head(wt).await.map_err(|e| NodeFailure::git(p, e))?,
        };
        log.line(LogStream::System, &format!("checkpoint {commit}"));
        self.send(StateChange::Checkpoint {
            node: self.node,
            commit: commit.clone(),
        });
        self.dehydrate(git, wt, park, &commit, &log).await;
        Ok(())
    }

    pub(super) async fn merge_ri(
        &self,
        git: &Arc<dyn GitOperations>,
        job: &JobSpec,
        commit: &str,
        log: LogSink,
    ) -> PhaseResult {
        let p = Phase::MergeRi;
        let branch = self.snapshot_branch.as_deref().ok_or_else(|| {
            NodeFailure::new(
                p,
                FailureReason::StartupError,
                "the plan has no snapshot branch",
            )
        })?;
        let message = format!(
            "{} merge {} into snapshot",
            self.ctx.options.commit_prefix, job.producer_id
        );
        let tip = git
            .merge_into_branch(
                &self.repo,
                branch,
                commit,
                &message,
                MergeStyle::MergeCommit,
            )
            .await
            .map_err(|e| NodeFailure::git(p, e))?;
        log.line(LogStream::System, &format!("{branch} now at {tip}"));
        Ok(())
    }
}

/// How merge-fi left a job's worktree for the phases after it.
///
/// The rule for a phase that runs again (after Ctrl-C, a crash, a pause or a failure): it runs
/// on the worktree as it was when the phase began. Phases before the commit begin at the
/// merge-fi result, so the worktree is reset to the first dependency's commit (or the base),
/// the other dependencies are merged again and setup, prechecks and work run again (what the
/// earlier ones left is not committed anywhere, so it is made again); phases after the commit
/// begin at the job's commit, so the worktree is reset to that. A reset removes untracked files and
/// keeps ignored ones (installed dependencies, linked folders). The one exception is an agent's
/// work phase that resumes its session: the conversation remembers the edits, so the files are
/// kept and the agent is told its previous run was interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WorktreeStart {
    /// A new worktree.
    Created,
    /// An existing worktree reset to where the phases begin.
    Reset,
    /// An existing worktree kept as it was (an agent resuming its session).
    Kept,
}

#[cfg(unix)]
pub(super) fn symlink_dir(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(src, dst)
}

#[cfg(windows)]
pub(super) fn symlink_dir(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_dir(src, dst)
}
