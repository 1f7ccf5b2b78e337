//! Checks of work specs: shell, process and agent work, their `cwd` and symlinked folders.

use crate::plan::{AgentSpec, WorkSpec};

use super::names::{is_agent_name, url_problem};
use super::paths::{lexical_depth, PathKind, PathProblem};
use super::{Field, Validator};

impl<'a> Validator<'a> {
    pub(super) fn work(&mut self, prefix: &str, work: &'a WorkSpec) {
        match work {
            WorkSpec::Shell(s) => {
                if s.command.trim().is_empty() {
                    self.report(
                        Field::new(prefix, "command"),
                        &s.command,
                        "must not be empty: give the command line to run",
                    );
                }
            }
            WorkSpec::Process(p) => {
                if p.executable.trim().is_empty() {
                    self.report(
                        Field::new(prefix, "executable"),
                        &p.executable,
                        "must not be empty: give the program to run (a name on PATH or a path)",
                    );
                }
            }
            WorkSpec::Agent(a) => self.agent(prefix, a),
            WorkSpec::Team(t) => self.team(prefix, t),
            WorkSpec::Pipeline(p) => self.pipeline(prefix, p),
            WorkSpec::Timer(t) => {
                if let Err(message) = t.deadline(0) {
                    let (field, value) = match (t.seconds, &t.until) {
                        (Some(s), None) => (Field::new(prefix, "seconds"), s.to_string()),
                        (None, Some(u)) => (Field::new(prefix, "until"), u.clone()),
                        _ => (Field::new(prefix, "type"), "timer".to_owned()),
                    };
                    self.report(field, &value, message);
                }
            }
        }
        if let Some(cwd) = work.cwd() {
            self.cwd(prefix, cwd);
        }
        if work.timeout_ms() == Some(0) {
            self.report(
                Field::new(prefix, "timeout"),
                "0",
                "must be at least 1 (milliseconds); omit it for no timeout",
            );
        }
        self.env(Field::new(prefix, "env"), work.env());
    }

    /// A check or an initialization step (`prechecks`, `postchecks`, `verifyRi`,
    /// `worktreeInit`): any work but a timer or composite work, which only a job's `work`
    /// can be.
    pub(super) fn check(&mut self, prefix: &str, work: &'a WorkSpec) {
        if work.is_job_only() {
            let kind = work.kind();
            self.report(
                Field::new(prefix, "type"),
                kind,
                format!("a {kind} can only be a job's `work`; a check must run something"),
            );
            return;
        }
        self.work(prefix, work);
    }

    pub(super) fn agent(&mut self, prefix: &str, a: &'a AgentSpec) {
        match (&a.instructions, &a.instructions_file) {
            (Some(_), Some(file)) => self.report(
                Field::new(prefix, "instructionsFile"),
                file,
                "both `instructions` and `instructionsFile` are given; give exactly one of them",
            ),
            (None, None) => self.report(
                Field::new(prefix, "instructions"),
                "",
                "agent work needs `instructions` or `instructionsFile` (exactly one)",
            ),
            _ => {}
        }
        if let Some(text) = &a.instructions {
            if text.trim().is_empty() {
                self.report(
                    Field::new(prefix, "instructions"),
                    text,
                    "must not be empty: tell the agent what to do (or use `instructionsFile`)",
                );
            }
        }
        if let Some(file) = &a.instructions_file {
            self.repo_path(Field::new(prefix, "instructionsFile"), file, PathKind::File);
        }
        if let Some(agent) = &a.agent {
            if !is_agent_name(agent) {
                self.report(
                    Field::new(prefix, "agent"),
                    agent,
                    "not a valid agent name: use lowercase letters, digits, `-` and `_` \
                     (e.g. `copilot`, `claude`, `codex`, `gemini`, or a host-registered name)",
                );
            }
        }
        if let Some(model) = &a.model {
            if model.trim().is_empty() {
                self.report(
                    Field::new(prefix, "model"),
                    model,
                    "must not be empty: name a model or omit the field to use the default",
                );
            }
        }
        if a.max_turns == Some(0) {
            self.report(
                Field::new(prefix, "maxTurns"),
                "0",
                "must be at least 1; omit it for the agent's default",
            );
        }
        for (i, folder) in a.allowed_folders.iter().enumerate() {
            self.repo_path(
                Field::new(prefix, "allowedFolders").at(i),
                folder,
                PathKind::Folder,
            );
        }
        for (i, url) in a.allowed_urls.iter().enumerate() {
            if let Some(reason) = url_problem(url) {
                self.report(
                    Field::new(prefix, "allowedUrls").at(i),
                    url,
                    format!(
                        "{reason}; allowed are http:// or https:// URLs (e.g. \
                         `https://docs.rs/serde`) and domain patterns (`example.com`, \
                         `*.example.com`)"
                    ),
                );
            }
        }
    }

    pub(super) fn cwd(&mut self, prefix: &str, cwd: &str) {
        let problem = match lexical_depth(cwd) {
            Err(p) => p,
            Ok(_) => return,
        };
        let message = match problem {
            PathProblem::Empty => {
                "must not be empty: give a folder relative to the worktree, or omit it to run \
                 at the worktree root"
            }
            PathProblem::Absolute => {
                "must be relative to the job's worktree (e.g. `crates/api`); absolute paths \
                 are not allowed"
            }
            PathProblem::Escapes => {
                "climbs out of the job's worktree with `..`; the working directory must stay \
                 inside it"
            }
        };
        self.report(Field::new(prefix, "cwd"), cwd, message);
    }

    pub(super) fn symlink_dir(&mut self, field: &str, dir: &str) {
        let message = match lexical_depth(dir) {
            Ok(depth) if depth > 0 => return,
            Ok(_) => {
                "names the repository root itself; give a folder inside it (e.g. `node_modules`)"
            }
            Err(PathProblem::Empty) => {
                "must not be empty: give a folder of the repository (e.g. `node_modules`)"
            }
            Err(PathProblem::Absolute) => {
                "must be relative to the repository root (e.g. `node_modules`); absolute \
                 paths are not allowed"
            }
            Err(PathProblem::Escapes) => {
                "climbs out of the repository with `..`; give a folder inside it"
            }
        };
        self.report(field, dir, message);
    }
}
