//! A parent agent's sub-agents (SPEC §15) as one run of it sees them: what its tools are
//! told (its depth, its children's names), whether its turn's end must wait for children
//! still at work, and the merge of its finished children's commits into its worktree when
//! it resumes — a conflict is told to the agent, naming the files, not a failure.

use super::*;
use crate::git::GitError;
use crate::state::PlanState;

/// The sub-agents of one run's job, captured at launch.
#[derive(Debug, Default)]
pub(super) struct SubAgents {
    /// How deep the job is nested below a plan job.
    pub(super) depth: usize,
    /// Its sub-agents' names (`agent-<k>`), deleted ones left out.
    pub(super) names: Vec<String>,
    /// Whether one of them had not ended when the run started: the turn's end then waits for
    /// them (a job is not done before its sub-agents are).
    pub(super) unfinished: bool,
    /// The commits of those that succeeded (producerId, commit), merged into the worktree
    /// when the job's session resumes.
    commits: Vec<(String, String)>,
    /// What merging them found (conflicts), told to the agent with its wake-up message.
    notes: std::sync::Mutex<Vec<String>>,
}

/// Whether job `d` of `spec` is a sub-agent of the job `parent` (a producerId).
pub(crate) fn is_sub_agent_of(spec: &PlanSpec, d: NodeIndex, parent: &str) -> bool {
    spec.jobs
        .get(d)
        .is_some_and(|j| j.extra.sub_agent.is_some() && j.extra.parent.as_deref() == Some(parent))
}

impl SubAgents {
    /// The sub-agents of `node` in `state`, among its dependencies `deps` (in its order).
    /// Only an agent's work has tools to spawn them: any other job has none, found without
    /// reading its dependencies.
    pub(super) fn of(
        spec: &PlanSpec,
        state: &PlanState,
        node: NodeIndex,
        deps: &[NodeIndex],
    ) -> SubAgents {
        let Some(job) = spec
            .jobs
            .get(node)
            .filter(|j| matches!(j.work, WorkSpec::Agent(_)))
        else {
            return SubAgents::default();
        };
        let depth = crate::composite::depth_of(spec, job);
        let deleted = state.nodes[node]
            .extra
            .tools
            .as_ref()
            .map(|t| t.deleted.as_slice())
            .unwrap_or_default();
        let mut out = SubAgents {
            depth,
            ..SubAgents::default()
        };
        let prefix = format!("{}/", job.producer_id);
        for &d in deps {
            let Some(child) = spec.jobs.get(d) else {
                continue;
            };
            if !is_sub_agent_of(spec, d, &job.producer_id) || deleted.contains(&child.producer_id) {
                continue;
            }
            let name = child
                .producer_id
                .strip_prefix(&prefix)
                .unwrap_or(&child.producer_id);
            out.names.push(name.to_owned());
            let ns = &state.nodes[d];
            out.unfinished |= !ns.status.is_terminal();
            if ns.status == crate::state::NodeStatus::Succeeded {
                if let Some(commit) = &ns.extra.commit {
                    out.commits
                        .push((child.producer_id.clone(), commit.clone()));
                }
            }
        }
        out
    }

    /// Merges the finished children's commits into the kept worktree `wt` of a resumed
    /// session, one by one (those merged before are skipped by git). A conflict leaves the
    /// worktree as it was and is noted for the agent.
    pub(super) async fn merge_into(
        &self,
        git: &Arc<dyn GitOperations>,
        wt: &Path,
        prefix: &str,
        log: &LogSink,
    ) -> PhaseResult {
        for (id, commit) in &self.commits {
            let message = format!("{prefix} merge sub-agent {id}");
            match git
                .merge_into_worktree(wt, std::slice::from_ref(commit), &message, None)
                .await
            {
                Ok(head) => log.line(
                    LogStream::System,
                    &format!("merged sub-agent {id} ({commit}), head {head}"),
                ),
                Err(GitError::MergeConflict { paths, .. }) => {
                    let files = paths.join(", ");
                    log.line(
                        LogStream::System,
                        &format!("sub-agent {id} ({commit}) conflicts in {files}; told the agent"),
                    );
                    self.lock().push(format!(
                        "Merging sub-agent `{id}`'s commit {commit} into your worktree conflicted \
                         in {files}, so it is not merged and your files are as they were. Merge it \
                         yourself (`git merge {commit}`) and resolve the conflict, or do without it."
                    ));
                }
                Err(e) => return Err(NodeFailure::git(Phase::MergeFi, e)),
            }
        }
        Ok(())
    }

    /// `wake` with what the merge of the children found.
    pub(super) fn wake_message(&self, wake: Option<&str>) -> Option<String> {
        let notes = self.lock();
        match (wake, notes.is_empty()) {
            (None, _) => None,
            (Some(w), true) => Some(w.to_owned()),
            (Some(w), false) => Some(format!("{w}\n\n{}", notes.join("\n"))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner())
    }
}
