//! Resolving teams before a plan is stored: a team's `squad` folder or `preset` is read and
//! written into its spec (mode, workers, evaluator, routing, decisions), so the stored plan
//! says everything and every later decision is a pure function of it — a resume on another
//! machine, without the user's presets, runs the same team.
//!
//! Presets come from three tiers, later ones shadowing earlier ones of the same name:
//! built-in < user (`~/.config/orchestrator/presets.json`) < repository (its `.squad/`).

use std::path::Path;

use orchestrator_core::plan::{JobSpec, PlanSpec, TeamSpec, WorkSpec};

use crate::preset::{self, Preset, Presets};
use crate::squad;
use crate::Error;

/// A team that could not be resolved: which job, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The job's producerId.
    pub job: String,
    /// The field (`work.squad`, `work.preset`).
    pub field: &'static str,
    /// What is wrong, naming the file and line when one is to blame.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "job `{}`: {}: {}", self.job, self.field, self.message)
    }
}

/// Resolves every team of `plan` whose spec names a `squad` or a `preset`, reading the
/// repository at `repo` and the user's presets file `user_presets` (when given); returns the
/// notes for the user (a charter cut to the cap), or every problem found.
///
/// ```
/// use orchestrator_core::plan::{JobSpec, PlanSpec, WorkSpec};
/// let work: WorkSpec = serde_json::from_value(serde_json::json!(
///     {"type": "team", "prompt": "Fix the bug", "preset": "best-of-three"})).unwrap();
/// let mut plan = PlanSpec::new("p").job(JobSpec::new("fix", "fix it", work));
/// let dir = tempfile::tempdir().unwrap();
/// orchestrator_workflows::resolve::resolve_plan(&mut plan, dir.path(), None).unwrap();
/// let WorkSpec::Team(team) = &plan.jobs[0].work else { panic!() };
/// assert_eq!(team.workers.len(), 3);
/// ```
pub fn resolve_plan(
    plan: &mut PlanSpec,
    repo: &Path,
    user_presets: Option<&Path>,
) -> Result<Vec<String>, Vec<Problem>> {
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    let mut presets = None;
    for job in &mut plan.jobs {
        match resolve_job(job, repo, user_presets, &mut presets) {
            Ok(mut n) => notes.append(&mut n),
            Err(p) => problems.push(p),
        }
    }
    if problems.is_empty() {
        Ok(notes)
    } else {
        Err(problems)
    }
}

/// Resolves `job` when it is a team naming a `squad` or a `preset` (see [`resolve_plan`]);
/// `presets` caches the three tiers between the jobs of one plan.
pub(crate) fn resolve_job(
    job: &mut JobSpec,
    repo: &Path,
    user_presets: Option<&Path>,
    presets: &mut Option<Result<Tiers, Error>>,
) -> Result<Vec<String>, Problem> {
    let producer_id = job.producer_id.clone();
    let WorkSpec::Team(team) = &mut job.work else {
        return Ok(Vec::new());
    };
    let problem = |field, message: String| Problem {
        job: producer_id.clone(),
        field,
        message,
    };
    if let Some(dir) = team.squad.clone() {
        let loaded =
            squad::load(&repo.join(&dir)).map_err(|e| problem("work.squad", e.to_string()))?;
        apply(team, &preset::from_squad(&loaded));
        return Ok(loaded.notes.iter().map(|n| format!("{dir}/{n}")).collect());
    }
    if let Some(name) = team.preset.clone() {
        let all = presets.get_or_insert_with(|| three_tiers(repo, user_presets));
        let found = match all {
            Ok(tiers) => tiers.presets.find(&name).map_err(|e| {
                // A repository Squad folder that could not be read may be the one meant.
                let why = match &tiers.repo_problem {
                    Some(repo) => {
                        format!("{e} (the repository's Squad folder was skipped: {repo})")
                    }
                    None => e.to_string(),
                };
                problem("work.preset", why)
            })?,
            Err(e) => return Err(problem("work.preset", e.to_string())),
        };
        apply(team, found);
    }
    Ok(Vec::new())
}

/// The presets of the three tiers for a repository, and why its own tier is missing when
/// its Squad folder could not be read (a broken folder does not hide the other presets).
pub(crate) struct Tiers {
    presets: Presets,
    repo_problem: Option<Error>,
}

/// The presets of the three tiers for `repo`; a malformed user presets file is an error.
fn three_tiers(repo: &Path, user_presets: Option<&Path>) -> Result<Tiers, Error> {
    let user = match user_presets {
        Some(path) => preset::load_user(path)?,
        None => Vec::new(),
    };
    let (repo_tier, repo_problem) = match squad::discover(repo) {
        Ok(Some((_, team))) => (vec![preset::from_squad(&team)], None),
        Ok(None) => (Vec::new(), None),
        Err(e) => (Vec::new(), Some(e)),
    };
    Ok(Tiers {
        presets: Presets::merged(preset::builtin(), user, repo_tier),
        repo_problem,
    })
}

/// Fills what `team` leaves open from `preset`; what the plan says wins.
fn apply(team: &mut TeamSpec, preset: &Preset) {
    if team.workers.is_empty() {
        team.workers = preset.workers.clone();
    }
    team.mode = team.mode.or(Some(preset.mode));
    if team.orchestrator.is_none() {
        team.orchestrator = preset.orchestrator.clone();
    }
    if team.evaluator.is_none() {
        team.evaluator = preset.evaluator.clone();
    }
    if team.select.is_none() {
        team.select = preset.select;
    }
    if team.routing.is_none() {
        team.routing = preset.routing.clone();
    }
    if team.decisions.is_none() {
        team.decisions = preset.decisions.clone();
    }
}
