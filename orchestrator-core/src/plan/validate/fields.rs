//! Checks of the plan's own fields and of each job's fields other than its work: producerIds,
//! names, groups, environment, revisions and branches.

use crate::plan::graph::producers::Producers;
use crate::plan::{Env, JobSpec, PlanSpec};

use super::names::{is_env_name, producer_id_problem, ref_name_problem, MAX_NAME_CHARS};
use super::{Current, Field, Section, Validator};

impl<'a> Validator<'a> {
    pub(super) fn plan(&mut self, spec: &'a PlanSpec) {
        self.display_name("name", &spec.name, true);
        if !spec.groups.is_empty() {
            // The graph and every job problem are about `jobs`; nested groups are judged when
            // they are flattened (parsing and plan creation do it).
            self.report(
                "groups",
                &format!("{} group(s)", spec.groups.len()),
                "nested groups must be flattened into `jobs` before validation: call \
                 PlanSpec::flatten_groups (parse_plan and plan creation do)",
            );
        }
        if spec.jobs.is_empty() && !self.scaffolding {
            self.report("jobs", "[]", "a plan needs at least one job");
        }
        if let Some(base) = &spec.base_branch {
            self.revision("baseBranch", base);
        }
        if let Some(target) = &spec.target_branch {
            self.branch("targetBranch", target);
        }
        for (i, dir) in spec.additional_symlink_dirs.iter().enumerate() {
            self.symlink_dir(&format!("additionalSymlinkDirs[{i}]"), dir);
        }
        if let Some(verify) = &spec.verify_ri {
            self.check("verifyRi", verify);
        }
        self.env(Field::top("env"), &spec.env);
        if let Some(after) = &spec.resume_after_plan {
            if after.trim().is_empty() {
                self.report(
                    "resumeAfterPlan",
                    after,
                    "must name the plan to wait for (its id); omit the field to start at once",
                );
            }
        }
        for (i, init) in spec.worktree_init.iter().enumerate() {
            self.check(&format!("worktreeInit[{i}]"), init);
        }
        if let Some(budget) = &spec.budget {
            if let Some(cost) = budget.cost_usd {
                if !(cost.is_finite() && cost > 0.0) {
                    self.report(
                        "budget.costUsd",
                        &cost.to_string(),
                        "must be a positive number of US dollars",
                    );
                }
            }
            if budget.tokens == Some(0) {
                self.report("budget.tokens", "0", "must be a positive number of tokens");
            }
            if budget.cost_usd.is_none() && budget.tokens.is_none() {
                self.report(
                    "budget",
                    "{}",
                    "give costUsd, tokens or both (omit the field for no budget)",
                );
            }
        }
    }

    // ---- jobs -----------------------------------------------------------------------------

    /// Checks every job; returns the index of the first job with each producerId.
    ///
    /// A large plan's producerId index is built on a thread of its own while the jobs' fields
    /// are checked here (neither reads what the other writes): on a 1M-job plan each took
    /// about 50 ms. The duplicates it finds are reported afterwards, in the section that sorts
    /// them right after their job's own producerId problems.
    pub(super) fn jobs(&mut self, spec: &'a PlanSpec) -> Producers {
        let ids = || spec.jobs.iter().map(|j| j.producer_id.as_str());
        let large = spec.jobs.len() >= crate::parallel::LARGE_PLAN;
        let (indexed, ()) = crate::parallel::both(
            "orchestrator-validate",
            large,
            || Producers::of(ids()),
            || self.job_fields(spec),
        );
        // The index panicked (it does not): built again, here.
        let (producers, repeated) = indexed.unwrap_or_else(|_| Producers::of(ids()));
        for (index, first) in repeated {
            let Some(job) = spec.jobs.get(index) else {
                continue;
            };
            self.current = Some(Current { index, job });
            self.section = Section::ProducerId;
            self.report(
                "producerId",
                &job.producer_id,
                format!(
                    "duplicate producerId: jobs[{first}] and jobs[{index}] both use it; \
                     every job needs its own producerId"
                ),
            );
        }
        self.current = None;
        producers
    }

    /// Checks each job's fields but the uniqueness of its producerId.
    fn job_fields(&mut self, spec: &'a PlanSpec) {
        for (index, job) in spec.jobs.iter().enumerate() {
            self.current = Some(Current { index, job });
            self.section = Section::ProducerId;
            self.producer_id(job);
            self.section = Section::Fields;
            if job.task.trim().is_empty() {
                self.report(
                    "task",
                    &job.task,
                    "must not be empty: give a short description of what the job does",
                );
            }
            self.work("work", &job.work);
            self.section = Section::AfterDependencies;
            if let Some(name) = &job.name {
                self.display_name("name", name, false);
            }
            if let Some(pre) = &job.extra.prechecks {
                self.check("prechecks", pre);
            }
            if let Some(post) = &job.extra.postchecks {
                self.check("postchecks", post);
            }
            if let Some(base) = &job.extra.base_branch {
                self.revision("baseBranch", base);
            }
            if let Some(group) = &job.extra.group {
                self.group(group);
            }
            self.env(Field::top("env"), &job.extra.env);
        }
        self.current = None;
    }

    pub(super) fn producer_id(&mut self, job: &JobSpec) {
        let id = job.producer_id.as_str();
        // A qualified producerId (a flattened group's job, SPEC §2, or a sub-job `<parent>/<name>`,
        // SPEC §12) is its group path or parent plus its own id; the pattern holds for every
        // segment. Anywhere else `/` is refused as before.
        // A sub-job of an iterating controller is `<parent>/<iteration>/<name>`: the
        // iteration is a number.
        let parent = job.extra.parent.as_deref().filter(|p| {
            id.strip_prefix(p)
                .and_then(|r| r.strip_prefix('/'))
                .is_some_and(crate::composite::is_sub_job_name)
        });
        if let Some(parent) = parent {
            if let Some(reason) = parent.split('/').find_map(producer_id_problem) {
                self.report("producerId", id, format!("its parent's name {reason}"));
            }
            return;
        }
        let qualified = id.rsplit_once('/').filter(|(prefix, _)| {
            job.extra.group.as_deref() == Some(*prefix)
                || job.extra.parent.as_deref() == Some(*prefix)
        });
        let problem = match qualified {
            Some(_) => id.split('/').find_map(|segment| {
                producer_id_problem(segment).map(|reason| format!("segment `{segment}` {reason}"))
            }),
            None => producer_id_problem(id),
        };
        if let Some(reason) = problem {
            self.report(
                "producerId",
                id,
                format!(
                    "{reason}; a producerId is 3–64 characters of lowercase letters `a-z`, \
                     digits and `-` (e.g. `build-api`)"
                ),
            );
        }
    }

    /// A plan or job display name: non-empty after trimming, at most 200 characters.
    pub(super) fn display_name(&mut self, field: &str, name: &str, required: bool) {
        let len = name.chars().count();
        if name.trim().is_empty() {
            let hint = if required {
                "the plan needs a name of 1–200 characters"
            } else {
                "give a name of 1–200 characters or omit the field"
            };
            self.report(field, name, format!("must not be empty: {hint}"));
        } else if len > MAX_NAME_CHARS {
            self.report(
                field,
                name,
                format!("is {len} characters long; at most {MAX_NAME_CHARS} are allowed"),
            );
        }
    }

    pub(super) fn group(&mut self, group: &str) {
        if group.split('/').any(|segment| segment.trim().is_empty()) {
            self.report(
                "group",
                group,
                "has an empty segment; a group is a path of non-empty names separated by \
                 single `/` (e.g. `backend/api`), with no leading or trailing `/`",
            );
        }
    }

    pub(super) fn env(&mut self, field: Field<'_>, env: &Env) {
        for key in env.keys() {
            if !is_env_name(key) {
                self.report(
                    field,
                    key,
                    "not a valid environment variable name: use letters, digits and `_`, \
                     not starting with a digit (`[A-Za-z_][A-Za-z0-9_]*`)",
                );
            }
        }
    }

    // ---- branches -------------------------------------------------------------------------

    pub(super) fn revision(&mut self, field: &str, rev: &str) {
        if let Some(reason) = ref_name_problem(rev) {
            self.report(
                field,
                rev,
                format!(
                    "not a usable revision: {reason}; give a branch, tag or commit sha that \
                     follows git's ref-name rules (e.g. `main`, `release/1.2`, `v1.2.0`, `3f2a9c1`)"
                ),
            );
        }
    }

    pub(super) fn branch(&mut self, field: &str, branch: &str) {
        if let Some(reason) = ref_name_problem(branch) {
            self.report(
                field,
                branch,
                format!(
                    "not a valid branch name: {reason}; branch names follow git's ref-name \
                     rules (e.g. `main`, `feature/login`, `orchestrator/my-plan`)"
                ),
            );
        }
    }
}
