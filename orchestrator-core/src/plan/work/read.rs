//! The hand-written reading of work specs' plan-file forms: one flat struct read straight from
//! the map, then sorted into the work type named by `type`.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::*;
use crate::extra::Extra;
use crate::plan::workflow::{
    Complexity, RoleSpec, StageApproval, TeamAgent, TeamMode, TeamSelect, WorkerSpec,
};

/// Deserializes a work spec from a string shorthand or an object with `type`.
///
/// Written by hand rather than `#[serde(untagged)]` so that a bad object keeps its real error
/// ("unknown field `comand`") instead of "data did not match any variant".
fn deserialize_work<'de, D: Deserializer<'de>>(d: D) -> Result<WorkSpec, D::Error> {
    struct WorkVisitor;
    impl<'de> Visitor<'de> for WorkVisitor {
        type Value = WorkSpec;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a command string, \"@agent <instructions>\", or an object with \"type\": shell|process|agent|timer|team|pipeline")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<WorkSpec, E> {
            Ok(WorkSpec::from_shorthand(v))
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<WorkSpec, A::Error> {
            TaggedWork::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| t.0)
        }
    }
    d.deserialize_any(WorkVisitor)
}

/// The object form only; [`WorkSpec`]'s own `Deserialize` accepts both forms.
///
/// Read as one flat struct straight from the map (no buffering, unlike
/// `#[serde(tag = "type")]`), so error paths reach into the spec (`jobs[0].work.onFailure`) and
/// YAML scalars such as `PORT: 8080` still read as strings; fields of another work type are then
/// refused by name.
struct TaggedWork(WorkSpec);

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum WorkType {
    Shell,
    Process,
    Agent,
    Timer,
    Team,
    Pipeline,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawWork {
    #[serde(rename = "type")]
    kind: WorkType,
    command: Option<String>,
    shell: Option<ShellKind>,
    executable: Option<String>,
    args: Option<Vec<String>>,
    instructions: Option<String>,
    #[serde(alias = "instructions_file")]
    instructions_file: Option<String>,
    agent: Option<String>,
    model: Option<String>,
    #[serde(alias = "model_tier")]
    model_tier: Option<ModelTier>,
    effort: Option<Effort>,
    #[serde(alias = "max_turns")]
    max_turns: Option<u32>,
    #[serde(alias = "resume_session")]
    resume_session: Option<bool>,
    #[serde(alias = "allowed_folders")]
    allowed_folders: Option<Vec<String>>,
    #[serde(alias = "allowed_urls")]
    allowed_urls: Option<Vec<String>>,
    env: Option<Env>,
    cwd: Option<String>,
    timeout: Option<u64>,
    #[serde(alias = "on_failure")]
    on_failure: Option<Box<OnFailure>>,
    seconds: Option<f64>,
    until: Option<String>,
    // Team work (SPEC §13).
    prompt: Option<String>,
    mode: Option<TeamMode>,
    workers: Option<Vec<WorkerSpec>>,
    orchestrator: Option<TeamAgent>,
    evaluator: Option<TeamAgent>,
    #[serde(alias = "max_iterations")]
    max_iterations: Option<u32>,
    select: Option<TeamSelect>,
    squad: Option<String>,
    preset: Option<String>,
    routing: Option<String>,
    decisions: Option<String>,
    // Pipeline work (SPEC §13).
    task: Option<String>,
    objective: Option<String>,
    bootstrap: Option<bool>,
    complexity: Option<Complexity>,
    ui: Option<bool>,
    roles: Option<std::collections::BTreeMap<String, RoleSpec>>,
    #[serde(alias = "max_debug_attempts")]
    max_debug_attempts: Option<u32>,
    approval: Option<StageApproval>,
}

impl RawWork {
    /// The names of the fields set, in the plan format's spelling.
    fn set_fields(&self) -> Vec<&'static str> {
        let fields = [
            ("command", self.command.is_some()),
            ("shell", self.shell.is_some()),
            ("executable", self.executable.is_some()),
            ("args", self.args.is_some()),
            ("instructions", self.instructions.is_some()),
            ("instructionsFile", self.instructions_file.is_some()),
            ("agent", self.agent.is_some()),
            ("model", self.model.is_some()),
            ("modelTier", self.model_tier.is_some()),
            ("effort", self.effort.is_some()),
            ("maxTurns", self.max_turns.is_some()),
            ("resumeSession", self.resume_session.is_some()),
            ("allowedFolders", self.allowed_folders.is_some()),
            ("allowedUrls", self.allowed_urls.is_some()),
            ("cwd", self.cwd.is_some()),
            ("env", self.env.is_some()),
            ("timeout", self.timeout.is_some()),
            ("onFailure", self.on_failure.is_some()),
            ("seconds", self.seconds.is_some()),
            ("until", self.until.is_some()),
            ("prompt", self.prompt.is_some()),
            ("mode", self.mode.is_some()),
            ("workers", self.workers.is_some()),
            ("orchestrator", self.orchestrator.is_some()),
            ("evaluator", self.evaluator.is_some()),
            ("maxIterations", self.max_iterations.is_some()),
            ("select", self.select.is_some()),
            ("squad", self.squad.is_some()),
            ("preset", self.preset.is_some()),
            ("routing", self.routing.is_some()),
            ("decisions", self.decisions.is_some()),
            ("task", self.task.is_some()),
            ("objective", self.objective.is_some()),
            ("bootstrap", self.bootstrap.is_some()),
            ("complexity", self.complexity.is_some()),
            ("ui", self.ui.is_some()),
            ("roles", self.roles.is_some()),
            ("maxDebugAttempts", self.max_debug_attempts.is_some()),
            ("approval", self.approval.is_some()),
        ];
        fields
            .into_iter()
            .filter_map(|(name, set)| set.then_some(name))
            .collect()
    }

    fn into_spec<E: de::Error>(self) -> Result<WorkSpec, E> {
        const RUNS: &[&str] = &["env", "timeout", "onFailure"];
        const AGENT: &[&str] = &[
            "instructions",
            "instructionsFile",
            "agent",
            "model",
            "modelTier",
            "effort",
            "maxTurns",
            "resumeSession",
            "allowedFolders",
            "allowedUrls",
        ];
        let (kind, own): (&str, &[&str]) = match self.kind {
            WorkType::Shell => ("shell", &["command", "shell", "cwd"]),
            WorkType::Process => ("process", &["executable", "args", "cwd"]),
            WorkType::Agent => ("agent", AGENT),
            WorkType::Timer => ("timer", &["seconds", "until"]),
            WorkType::Team => (
                "team",
                &[
                    "prompt",
                    "mode",
                    "workers",
                    "agent",
                    "model",
                    "orchestrator",
                    "evaluator",
                    "maxIterations",
                    "select",
                    "squad",
                    "preset",
                    "routing",
                    "decisions",
                ],
            ),
            WorkType::Pipeline => (
                "pipeline",
                &[
                    "task",
                    "objective",
                    "bootstrap",
                    "complexity",
                    "ui",
                    "roles",
                    "agent",
                    "model",
                    "maxDebugAttempts",
                    "approval",
                ],
            ),
        };
        // Only shell, process and agent work run a process of their own.
        let runs = matches!(
            self.kind,
            WorkType::Shell | WorkType::Process | WorkType::Agent
        );
        let allowed = |f: &str| own.contains(&f) || (runs && RUNS.contains(&f));
        if let Some(field) = self.set_fields().into_iter().find(|f| !allowed(f)) {
            let mut all = own.to_vec();
            if runs {
                all.extend_from_slice(RUNS);
            }
            return Err(E::custom(format!(
                "field `{field}` does not belong to {kind} work (its fields: type, {})",
                all.join(", ")
            )));
        }
        Ok(match self.kind {
            WorkType::Shell => WorkSpec::Shell(ShellSpec {
                command: self.command.ok_or_else(|| E::missing_field("command"))?,
                extra: Extra::new(ShellExtra {
                    shell: self.shell,
                    env: self.env.unwrap_or_default(),
                    cwd: self.cwd,
                    timeout: self.timeout,
                    on_failure: self.on_failure,
                }),
            }),
            WorkType::Process => WorkSpec::Process(Box::new(ProcessSpec {
                executable: self
                    .executable
                    .ok_or_else(|| E::missing_field("executable"))?,
                args: self.args.unwrap_or_default(),
                env: self.env.unwrap_or_default(),
                cwd: self.cwd,
                timeout: self.timeout,
                on_failure: self.on_failure,
            })),
            WorkType::Agent => WorkSpec::Agent(Box::new(AgentSpec {
                instructions: self.instructions,
                instructions_file: self.instructions_file,
                agent: self.agent,
                model: self.model,
                model_tier: self.model_tier,
                effort: self.effort,
                max_turns: self.max_turns,
                resume_session: self.resume_session,
                allowed_folders: self.allowed_folders.unwrap_or_default(),
                allowed_urls: self.allowed_urls.unwrap_or_default(),
                env: self.env.unwrap_or_default(),
                timeout: self.timeout,
                on_failure: self.on_failure,
            })),
            WorkType::Timer => WorkSpec::Timer(TimerSpec {
                seconds: self.seconds,
                until: self.until,
            }),
            WorkType::Team => WorkSpec::Team(Box::new(TeamSpec {
                prompt: self.prompt.ok_or_else(|| E::missing_field("prompt"))?,
                mode: self.mode,
                workers: self.workers.unwrap_or_default(),
                agent: self.agent,
                model: self.model,
                orchestrator: self.orchestrator,
                evaluator: self.evaluator,
                max_iterations: self.max_iterations,
                select: self.select,
                squad: self.squad,
                preset: self.preset,
                routing: self.routing,
                decisions: self.decisions,
            })),
            WorkType::Pipeline => WorkSpec::Pipeline(Box::new(PipelineSpec {
                task: self.task,
                objective: self.objective,
                bootstrap: self.bootstrap.unwrap_or(false),
                complexity: self.complexity,
                ui: self.ui.unwrap_or(false),
                roles: self.roles.unwrap_or_default(),
                agent: self.agent,
                model: self.model,
                max_debug_attempts: self.max_debug_attempts,
                approval: self.approval,
            })),
        })
    }
}

impl<'de> Deserialize<'de> for TaggedWork {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawWork::deserialize(d)?.into_spec().map(TaggedWork)
    }
}

impl<'de> Deserialize<'de> for WorkSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_work(d)
    }
}
