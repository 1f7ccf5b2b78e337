//! Team presets: built-in ones, the user's (`presets.json`) and the repository's Squad team,
//! merged so that a later tier shadows an earlier one of the same name (SPEC §13):
//! built-in < user (`~/.config/orchestrator/presets.json`) < repository (`.squad/`).
//!
//! ```
//! use orchestrator_workflows::preset::{self, Presets};
//! let presets = Presets::merged(preset::builtin(), Vec::new(), Vec::new());
//! let review = presets.find("Review-Squad").unwrap();
//! assert_eq!(review.workers.len(), 3);
//! assert!(presets.find("nope").is_err());
//! ```
//!
//! The user file is a JSON array of presets, or an object `{"presets": [...]}`:
//!
//! ```json
//! [{"name": "duo", "description": "Two reviewers", "mode": "broadcast",
//!   "workers": [{"name": "alice", "model": "sonnet"}, {"name": "bob"}],
//!   "evaluator": {"threshold": 0.8}}]
//! ```

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use orchestrator_core::plan::{TeamAgent, TeamMode, TeamSelect, WorkerSpec};
use serde::{Deserialize, Serialize};

use crate::squad::{name_problem, sanitize_name, SquadTeam};
use crate::{Error, Result};

/// The name of a repository team whose own name does not make a valid preset name.
const SQUAD_PRESET_NAME: &str = "squad";

/// Where a preset comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PresetSource {
    /// Built into the orchestrator.
    BuiltIn,
    /// The user's `presets.json`.
    User,
    /// The repository's Squad folder.
    Repository,
}

/// A named team: its mode, workers and, optionally, orchestrator, evaluator and context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Preset {
    /// Its name (a producerId segment); looked up case-insensitively.
    pub name: String,
    /// What it is for.
    #[serde(default)]
    pub description: String,
    /// How the team works (default `reflect`).
    #[serde(default)]
    pub mode: TeamMode,
    /// Its workers.
    pub workers: Vec<WorkerSpec>,
    /// The orchestrator's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestrator: Option<TeamAgent>,
    /// An independent evaluator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<TeamAgent>,
    /// Which workers' commits a broadcast merges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<TeamSelect>,
    /// Context for the orchestrator when it plans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<String>,
    /// Shared knowledge prepended to every worker's prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions: Option<String>,
    /// Where it comes from (not part of the file format).
    #[serde(skip, default = "user_source")]
    pub source: PresetSource,
}

fn user_source() -> PresetSource {
    PresetSource::User
}

/// The built-in presets.
pub fn builtin() -> Vec<Preset> {
    vec![review_squad(), best_of_three(), docs_team(), pair()]
}

fn review_squad() -> Preset {
    built_in(
        "review-squad",
        "An implementer, a reviewer and a tester iterating until the change is right.",
        TeamMode::Reflect,
        vec![
            worker(
                "implementer",
                "You are an implementer. You make the change the task asks for, in small, \
                 focused commits that follow the conventions already in the code base. Read the \
                 surrounding code before you edit it, keep the diff minimal, and finish by saying \
                 what you changed and why. When the reviewer or the tester reports a problem, fix \
                 it rather than explain it away.",
            ),
            worker(
                "reviewer",
                "You are a code reviewer. You read the changes made so far and look for bugs, \
                 missing error handling, unclear names, duplicated logic and departures from the \
                 project's conventions. Report each finding with its file, its line and a \
                 concrete fix, most serious first, and say plainly when the change is ready. Do \
                 not rewrite the change yourself.",
            ),
            worker(
                "tester",
                "You are a tester. You write and run tests for the change: the behaviour it \
                 promises, its edge cases (empty input, limits, errors) and regressions in what \
                 it touches. Commit the tests you add, report every failure with the command \
                 that reproduces it, and never weaken a test to make it pass.",
            ),
        ],
    )
}

fn best_of_three() -> Preset {
    const BRIEF: &str = "You are one of three engineers solving the same task independently; \
        an evaluator compares the solutions and keeps the best. Solve the whole task on your \
        own, test it, and explain your approach in a few sentences.";
    let mut preset = built_in(
        "best-of-three",
        "Three independent attempts at the same task, judged by an evaluator.",
        TeamMode::Broadcast,
        vec![
            worker(
                "first",
                &format!("{BRIEF} Favour the simplest solution that fully works."),
            ),
            worker(
                "second",
                &format!("{BRIEF} Favour robustness: handle edge cases and errors thoroughly."),
            ),
            worker(
                "third",
                &format!("{BRIEF} Favour clarity: the solution a maintainer reads most easily."),
            ),
        ],
    );
    preset.evaluator = Some(TeamAgent::default());
    preset.select = Some(TeamSelect::Best);
    preset
}

fn docs_team() -> Preset {
    built_in(
        "docs-team",
        "A technical writer and an editor producing accurate documentation.",
        TeamMode::Orchestrator,
        vec![
            worker(
                "writer",
                "You are a technical writer. You write documentation from the code itself: read \
                 the sources, run the examples, and explain what a reader needs to use the \
                 feature — its purpose, a short working example, its options and defaults, its \
                 errors and how to fix them. Write plainly, in short sentences, and never \
                 document behaviour you have not confirmed in the code.",
            ),
            worker(
                "editor",
                "You are a documentation editor. You check what was written against the code \
                 for accuracy, then edit it for clarity, consistent terms, structure and \
                 brevity. Fix what you can directly, make every example runnable, and list \
                 anything you could not verify.",
            ),
        ],
    )
}

fn pair() -> Preset {
    built_in(
        "pair",
        "Pair programming: a driver writes the change, then a navigator checks and completes it.",
        TeamMode::Sequential,
        vec![
            worker(
                "driver",
                "You are the driver of a programming pair. You write the code for the task step \
                 by step, keeping each step small and working, and state your intent before each \
                 change so that your navigator can follow it.",
            ),
            worker(
                "navigator",
                "You are the navigator of a programming pair. You go over the driver's changes, \
                 catch mistakes and missed cases, keep the design and the task's goal in view, \
                 and make the corrections and follow-up changes the work still needs.",
            ),
        ],
    )
}

fn built_in(name: &str, description: &str, mode: TeamMode, workers: Vec<WorkerSpec>) -> Preset {
    Preset {
        name: name.to_string(),
        description: description.to_string(),
        mode,
        workers,
        orchestrator: None,
        evaluator: None,
        select: None,
        routing: None,
        decisions: None,
        source: PresetSource::BuiltIn,
    }
}

fn worker(name: &str, system_prompt: &str) -> WorkerSpec {
    let mut worker = WorkerSpec::new(name);
    worker.system_prompt = Some(system_prompt.to_string());
    worker
}

/// The user's preset file: `$XDG_CONFIG_HOME/orchestrator/presets.json`, else
/// `$HOME/.config/orchestrator/presets.json`; `None` when neither variable is set.
pub fn user_presets_path() -> Option<PathBuf> {
    presets_path_from(
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    )
}

fn presets_path_from(xdg_config_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let config = xdg_config_home
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            home.filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(config.join("orchestrator").join("presets.json"))
}

/// The presets of the user's file `path` (a JSON array of presets or `{"presets": [...]}`),
/// each with source [`PresetSource::User`]; none when the file is missing or blank.
///
/// Fails with [`Error::PresetFile`] naming the file (and, for malformed JSON, the line and
/// column) when the file is malformed or a preset has an invalid name, no workers, or
/// workers with invalid or repeated names.
pub fn load_user(path: &Path) -> Result<Vec<Preset>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::Io {
                path: path.to_path_buf(),
                source: e,
            })
        }
    };
    let mut presets = parse_user(&text).map_err(|e| preset_error(path, e.to_string()))?;
    for (i, preset) in presets.iter_mut().enumerate() {
        preset.source = PresetSource::User;
        if let Some(problem) = preset_problem(preset) {
            return Err(preset_error(
                path,
                format!("preset {} (`{}`): {problem}", i + 1, preset.name),
            ));
        }
    }
    Ok(presets)
}

/// `{"presets": [...]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetFile {
    presets: Vec<Preset>,
}

/// The presets of either file shape, parsed directly so errors keep serde's line and column.
fn parse_user(text: &str) -> serde_json::Result<Vec<Preset>> {
    match text.trim_start().chars().next() {
        None => Ok(Vec::new()),
        Some('{') => serde_json::from_str::<PresetFile>(text).map(|f| f.presets),
        Some(_) => serde_json::from_str(text),
    }
}

/// What is wrong with a preset read from a file, if anything.
fn preset_problem(preset: &Preset) -> Option<String> {
    if let Some(problem) = name_problem(&preset.name) {
        return Some(format!("its name {problem}"));
    }
    if preset.workers.is_empty() {
        return Some("it has no workers".to_string());
    }
    for (i, worker) in preset.workers.iter().enumerate() {
        if let Some(problem) = name_problem(&worker.name) {
            return Some(format!("worker `{}`: its name {problem}", worker.name));
        }
        if preset.workers[..i].iter().any(|w| w.name == worker.name) {
            return Some(format!("two workers are named `{}`", worker.name));
        }
    }
    None
}

fn preset_error(path: &Path, message: String) -> Error {
    Error::PresetFile {
        file: path.to_path_buf(),
        message,
    }
}

/// The preset of a repository's Squad team: source [`PresetSource::Repository`], mode
/// `reflect` (Squad's iterative coordinator), named after the team (sanitized; `squad` when
/// that is not a valid name).
pub fn from_squad(team: &SquadTeam) -> Preset {
    let name = sanitize_name(&team.name);
    let name = match name_problem(&name) {
        None => name,
        Some(_) => SQUAD_PRESET_NAME.to_string(),
    };
    Preset {
        name,
        description: format!("The repository's Squad team “{}”.", team.name),
        mode: TeamMode::Reflect,
        workers: team.workers.clone(),
        orchestrator: None,
        evaluator: None,
        select: None,
        routing: team.routing.clone(),
        decisions: team.decisions.clone(),
        source: PresetSource::Repository,
    }
}

/// The presets of the three tiers, merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Presets(Vec<Preset>);

impl Presets {
    /// Merges the tiers: a preset of a later tier (user over built-in, repository over both)
    /// replaces, in place, an earlier one whose name is the same ignoring case.
    pub fn merged(builtin: Vec<Preset>, user: Vec<Preset>, repo: Vec<Preset>) -> Presets {
        let mut presets: Vec<Preset> = Vec::new();
        for preset in builtin.into_iter().chain(user).chain(repo) {
            match presets
                .iter_mut()
                .find(|p| p.name.eq_ignore_ascii_case(&preset.name))
            {
                Some(shadowed) => *shadowed = preset,
                None => presets.push(preset),
            }
        }
        Presets(presets)
    }

    /// The preset named `name`, ignoring case; [`Error::UnknownPreset`] with the sorted names
    /// of all presets when there is none.
    pub fn find(&self, name: &str) -> Result<&Preset> {
        let wanted = name.trim();
        self.0
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(wanted))
            .ok_or_else(|| {
                let mut known: Vec<String> = self.names().into_iter().map(str::to_string).collect();
                known.sort();
                Error::UnknownPreset {
                    name: name.to_string(),
                    known,
                }
            })
    }

    /// The presets' names, in merge order (built-in ones first, newcomers after).
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|p| p.name.as_str()).collect()
    }

    /// The presets, in merge order.
    pub fn iter(&self) -> std::slice::Iter<'_, Preset> {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a Presets {
    type Item = &'a Preset;
    type IntoIter = std::slice::Iter<'a, Preset>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, worker_name: &str) -> Preset {
        let mut preset = built_in(
            name,
            "",
            TeamMode::Broadcast,
            vec![WorkerSpec::new(worker_name)],
        );
        preset.source = PresetSource::User;
        preset
    }

    fn file_error(error: Error) -> (PathBuf, String) {
        match error {
            Error::PresetFile { file, message } => (file, message),
            other => panic!("not a preset file error: {other:?}"),
        }
    }

    fn write_presets(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("should succeed");
        let path = dir.path().join("presets.json");
        fs::write(&path, text).expect("should succeed");
        (dir, path)
    }

    #[test]
    fn later_tiers_shadow_earlier_ones() {
        let mut repo = user("Pair", "repo-worker");
        repo.source = PresetSource::Repository;
        let presets = Presets::merged(
            builtin(),
            vec![
                user("REVIEW-SQUAD", "mine"),
                user("pair", "user-worker"),
                user("extra", "xyz"),
            ],
            vec![repo],
        );
        let review = presets.find("review-squad").expect("should succeed");
        assert_eq!(review.source, PresetSource::User);
        assert_eq!(review.workers[0].name, "mine");
        let pair = presets.find("pair").expect("should succeed");
        assert_eq!(pair.source, PresetSource::Repository);
        assert_eq!(pair.workers[0].name, "repo-worker");
        assert_eq!(
            presets.find("docs-team").expect("should succeed").source,
            PresetSource::BuiltIn
        );
        assert_eq!(
            presets.names(),
            vec![
                "REVIEW-SQUAD",
                "best-of-three",
                "docs-team",
                "Pair",
                "extra"
            ]
        );
        assert_eq!(presets.iter().count(), 5);
        assert_eq!((&presets).into_iter().count(), 5);
    }

    #[test]
    fn find_ignores_case() {
        let presets = Presets::merged(builtin(), vec![], vec![]);
        assert_eq!(
            presets.find("Best-Of-Three").expect("should succeed").name,
            "best-of-three"
        );
        assert_eq!(
            presets.find(" DOCS-TEAM ").expect("should succeed").name,
            "docs-team"
        );
    }

    #[test]
    fn unknown_preset_lists_the_sorted_names() {
        let presets = Presets::merged(builtin(), vec![user("alpha", "abc")], vec![]);
        match presets.find("nope").expect_err("should fail") {
            Error::UnknownPreset { name, known } => {
                assert_eq!(name, "nope");
                assert_eq!(
                    known,
                    vec![
                        "alpha",
                        "best-of-three",
                        "docs-team",
                        "pair",
                        "review-squad"
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        let shown = presets.find("nope").expect_err("should fail").to_string();
        assert!(shown.contains("alpha, best-of-three"), "{shown}");
    }

    #[test]
    fn malformed_user_file_names_the_file_and_position() {
        let (_dir, path) = write_presets("[\n  {\"name\": \"duo\",\n   \"workers\": [}\n]");
        let error = load_user(&path).expect_err("should fail");
        let shown = error.to_string();
        let (file, message) = file_error(error);
        assert_eq!(file, path);
        assert!(message.contains("line 3"), "{message}");
        assert!(shown.contains("presets.json"), "{shown}");
    }

    #[test]
    fn unknown_fields_and_missing_workers_are_errors() {
        let (_dir, path) = write_presets(r#"[{"name":"duo","workers":[],"wokers":[]}]"#);
        let (_, message) = file_error(load_user(&path).expect_err("should fail"));
        assert!(message.contains("wokers"), "{message}");
        let (_dir, path) = write_presets(r#"[{"name":"duo"}]"#);
        let (_, message) = file_error(load_user(&path).expect_err("should fail"));
        assert!(message.contains("workers"), "{message}");
    }

    #[test]
    fn invalid_names_in_the_user_file_are_errors() {
        let (_dir, path) = write_presets(r#"[{"name":"Duo Team","workers":[{"name":"abc"}]}]"#);
        let (_, message) = file_error(load_user(&path).expect_err("should fail"));
        assert!(
            message.starts_with("preset 1 (`Duo Team`): its name"),
            "{message}"
        );
        let (_dir, path) =
            write_presets(r#"[{"name":"duo","workers":[{"name":"abc"},{"name":"abc"}]}]"#);
        let (_, message) = file_error(load_user(&path).expect_err("should fail"));
        assert!(message.contains("two workers are named `abc`"), "{message}");
        let (_dir, path) = write_presets(r#"[{"name":"duo","workers":[]}]"#);
        let (_, message) = file_error(load_user(&path).expect_err("should fail"));
        assert!(message.contains("no workers"), "{message}");
    }

    #[test]
    fn both_file_shapes_are_read() {
        let preset = r#"{"name":"duo","description":"Two","mode":"broadcast",
            "workers":[{"name":"alice","model":"sonnet"},{"name":"bob"}],
            "evaluator":{"threshold":0.8},"routing":"r","decisions":"d"}"#;
        let (_dir, array) = write_presets(&format!("[{preset}]"));
        let (_dir2, object) = write_presets(&format!("{{\"presets\": [{preset}]}}"));
        let from_array = load_user(&array).expect("should succeed");
        assert_eq!(from_array, load_user(&object).expect("should succeed"));
        let duo = &from_array[0];
        assert_eq!(duo.source, PresetSource::User);
        assert_eq!(duo.mode, TeamMode::Broadcast);
        assert_eq!(duo.workers[0].model.as_deref(), Some("sonnet"));
        assert_eq!(
            duo.evaluator.as_ref().expect("should succeed").threshold,
            Some(0.8)
        );
        assert_eq!(duo.routing.as_deref(), Some("r"));
        assert_eq!(duo.decisions.as_deref(), Some("d"));
    }

    #[test]
    fn defaults_apply_to_a_minimal_preset() {
        let (_dir, path) = write_presets(r#"[{"name":"solo","workers":[{"name":"one"}]}]"#);
        let solo = &load_user(&path).expect("should succeed")[0];
        assert_eq!(solo.mode, TeamMode::Reflect);
        assert_eq!(solo.description, "");
        assert_eq!(
            (solo.orchestrator.as_ref(), solo.evaluator.as_ref()),
            (None, None)
        );
    }

    #[test]
    fn missing_or_blank_file_is_empty() {
        let dir = tempfile::tempdir().expect("should succeed");
        assert!(load_user(&dir.path().join("none.json"))
            .expect("should succeed")
            .is_empty());
        let (_dir, path) = write_presets("  \n");
        assert!(load_user(&path).expect("should succeed").is_empty());
    }

    #[test]
    fn user_presets_path_prefers_xdg_config_home() {
        assert_eq!(
            presets_path_from(Some("/xdg".into()), Some("/home/u".into())),
            Some(PathBuf::from("/xdg/orchestrator/presets.json"))
        );
        assert_eq!(
            presets_path_from(Some("relative".into()), Some("/home/u".into())),
            Some(PathBuf::from("/home/u/.config/orchestrator/presets.json"))
        );
        assert_eq!(
            presets_path_from(None, Some("/home/u".into())),
            Some(PathBuf::from("/home/u/.config/orchestrator/presets.json"))
        );
        assert_eq!(presets_path_from(None, Some("".into())), None);
        assert_eq!(presets_path_from(None, None), None);
    }

    #[test]
    fn every_builtin_preset_is_valid() {
        let presets = builtin();
        assert!((3..=4).contains(&presets.len()));
        for (i, preset) in presets.iter().enumerate() {
            assert_eq!(preset_problem(preset), None, "{}", preset.name);
            assert_eq!(preset.source, PresetSource::BuiltIn);
            assert!(!preset.description.is_empty());
            assert!(preset.workers.iter().all(|w| w.system_prompt.is_some()));
            assert!(presets[..i].iter().all(|p| p.name != preset.name));
        }
        let best = presets
            .iter()
            .find(|p| p.name == "best-of-three")
            .expect("should succeed");
        assert_eq!(best.mode, TeamMode::Broadcast);
        assert!(best.evaluator.is_some());
    }

    #[test]
    fn squad_team_becomes_a_repository_preset() {
        let mut alice = WorkerSpec::new("alice");
        alice.system_prompt = Some("You are Lead.".into());
        let team = SquadTeam {
            name: "Code Review Team".into(),
            workers: vec![alice.clone()],
            routing: Some("route".into()),
            decisions: Some("decide".into()),
            notes: vec![],
        };
        let preset = from_squad(&team);
        assert_eq!(preset.name, "code-review-team");
        assert_eq!(preset.source, PresetSource::Repository);
        assert_eq!(preset.mode, TeamMode::Reflect);
        assert_eq!(preset.workers, vec![alice]);
        assert_eq!(preset.routing.as_deref(), Some("route"));
        assert_eq!(preset.decisions.as_deref(), Some("decide"));
        let odd = SquadTeam {
            name: "QA".into(),
            ..team
        };
        assert_eq!(from_squad(&odd).name, "squad");
    }
}
