//! What one agent run is given: its [`AgentRequest`] — the run's directories, its
//! instructions file, its environment — from a work spec and the job's context
//! ([`prepare`]) or from a session's turn ([`base_request`]).

use std::io;
use std::path::{Component, Path, PathBuf};

use orchestrator_core::plan::AgentSpec;
use orchestrator_core::runner::{WorkContext, WorkFailure};
use orchestrator_core::state::FailureReason;

use super::{AgentRequest, AgentRunner};
use crate::env::ChildEnv;
use crate::plugins::{Plugin, PluginAgent, Plugins};
use crate::runners::check_env;

/// What a run takes from the loaded plugins (SPEC §15): their MCP servers, and, when the
/// spec's `agent` names a plugin agent, that agent with its plugin.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PluginUse<'a> {
    pub(crate) plugins: &'a Plugins,
    pub(crate) agent: Option<(&'a Plugin, &'a PluginAgent)>,
}

impl PluginUse<'static> {
    /// No plugins.
    #[cfg(test)]
    pub(crate) fn none() -> Self {
        static NO_PLUGINS: Plugins = Plugins::empty();
        PluginUse {
            plugins: &NO_PLUGINS,
            agent: None,
        }
    }
}

impl PluginUse<'_> {
    /// `instructions` with the plugin agent's system prompt at the top and the skills it uses
    /// as a "## Skills" section after them.
    fn instructions(&self, instructions: String) -> String {
        let Some((plugin, agent)) = self.agent else {
            return instructions;
        };
        let mut text = instructions;
        let prompt = agent.system_prompt();
        if !prompt.is_empty() {
            text = format!("{prompt}\n\n{}", text.trim_start());
        }
        let skills = self.plugins.skills_of(plugin, agent);
        if !skills.is_empty() {
            text = format!(
                "{}\n\n{}",
                text.trim_end(),
                Plugins::skills_section(&skills)
            );
        }
        text
    }

    /// The plugin agent's model, unless the spec names a model or a tier of its own.
    fn model(&self, spec: &AgentSpec) -> Option<String> {
        if spec.model.is_some() || spec.model_tier.is_some() {
            return spec.model.clone();
        }
        self.agent
            .and_then(|(_, agent)| agent.model())
            .map(str::to_owned)
    }
}

/// A failure to start the agent (not retried).
pub(crate) fn startup(message: String) -> WorkFailure {
    WorkFailure::new(message).reason(FailureReason::StartupError)
}

pub(crate) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

pub(crate) fn resume_wanted(spec: &AgentSpec) -> bool {
    spec.resume_session != Some(false)
}

/// The request for one run: directories created, instructions written, environment built.
pub(crate) fn prepare(
    name: &str,
    spec: &AgentSpec,
    runner: &dyn AgentRunner,
    ctx: &WorkContext,
    plugins: PluginUse<'_>,
) -> Result<AgentRequest, WorkFailure> {
    let mut instructions = plugins.instructions(instructions(spec, &ctx.dir)?);
    // What the jobs this one depends on produced (SPEC §12), after the job's own instructions.
    if let Some(section) = ctx.inputs.as_ref().and_then(|i| i.section()) {
        instructions = format!("{}\n\n{section}", instructions.trim_end());
    }
    if ctx.tools.is_some() {
        instructions = format!(
            "{}\n\n{}",
            instructions.trim_end(),
            super::mcp::INSTRUCTIONS
        );
    }
    check_env(&ctx.env, "plan/job")?;
    check_env(&spec.env, "spec")?;
    // The CLI keeps its sessions under its state folder: without it (a new or cleared
    // worktree, a job now run by another agent) there is nothing to resume.
    let resumable = state_dir_of(&ctx.dir, name).is_dir();
    let run_name = format!("{}-{}", ctx.phase, ctx.attempt);
    let mut request = base_request(
        name,
        runner,
        &ctx.dir,
        &run_name,
        &[&ctx.env, &spec.env],
        instructions,
    )?;
    let mut allowed_folders = Vec::with_capacity(spec.allowed_folders.len());
    for folder in &spec.allowed_folders {
        let path = ctx.dir.join(folder);
        allowed_folders.push(path.canonicalize().unwrap_or(path));
    }
    // With its own tools an agent may ask a person, through `ask_user` only.
    let questions = match ctx.tools {
        Some(_) => "ask a person only through the ask_user tool",
        None => "do not ask questions",
    };
    request.prompt = format!(
        "Read the file {} and carry out the instructions in it completely. They are job \
         `{}`: {}. Work in the current directory ({}); {questions}.",
        request.instructions_file.display(),
        ctx.producer_id,
        first_line(&ctx.task),
        ctx.dir.display()
    );
    request.tools = ctx.tools.clone();
    let (servers, notes) =
        crate::plugins::expand_servers(plugins.plugins, |var| request.env.get_str(var));
    for note in &notes {
        ctx.log
            .line(orchestrator_core::runner::LogStream::System, note);
    }
    request.mcp_servers = servers;
    if let Some((_, agent)) = plugins.agent {
        request.allowed_tools = agent.tools().to_vec();
    }
    request.model = plugins.model(spec);
    apply_provider(name, &mut request, ctx)?;
    request.model_tier = spec.model_tier;
    request.effort = spec.effort;
    request.max_turns = spec.max_turns;
    request.allowed_folders = allowed_folders;
    request.allowed_urls = spec.allowed_urls.clone();
    request.resume = ctx
        .session_id
        .clone()
        .filter(|_| resume_wanted(spec) && resumable);
    if let Some(wake) = &ctx.wake {
        // The job waited (SPEC §15) and its wait is over: the conversation goes on with why;
        // without a session to resume, the agent starts again knowing it.
        request.prompt = match request.resume {
            Some(_) => wake.clone(),
            None => format!("{}\n\n{wake}", request.prompt),
        };
    } else if ctx.continues_unfinished && request.resume.is_some() {
        // The worktree was kept as the unfinished run left it (see the engine's merge-fi):
        // the agent must pick its work up, not redo edits it already made.
        request.prompt = format!(
            "Your previous run of this job stopped before it finished (it was interrupted); \
             the files in the current directory are as you left them. Check what is already \
             done and continue from there. {}",
            request.prompt
        );
    }
    Ok(request)
}

/// Points the CLI at the provider a `provider:model` in the spec's `model` names (SPEC §15):
/// the providers of `.model_providers.json` in the job's directory, their keys read from the
/// run's environment. A bare model is left to the CLI; a provider that is unknown, lacks its
/// key, does not list the model or cannot serve this CLI fails the run, naming why.
fn apply_provider(
    name: &str,
    request: &mut AgentRequest,
    ctx: &WorkContext,
) -> Result<(), WorkFailure> {
    let Some(model) = request.model.clone().filter(|m| m.contains(':')) else {
        return Ok(());
    };
    let env = &request.env;
    let resolved = crate::providers::ModelProviders::load(&ctx.dir, |var| env.get_str(var))
        .and_then(|providers| providers.resolve(&model))
        .and_then(|resolved| resolved.map(|r| r.settings_for(name)).transpose())
        .map_err(|e| startup(format!("model `{model}`: {e}")))?;
    let Some(settings) = resolved else {
        return Ok(());
    };
    for note in &settings.notes {
        ctx.log
            .line(orchestrator_core::runner::LogStream::System, note);
    }
    for (var, value) in &settings.env {
        request.env.set(var, value);
    }
    request.model = Some(settings.model);
    request.provider_args = settings.args;
    Ok(())
}

/// The request of one run of agent `name` in `dir`, named `run_name` (its run directory is
/// `<dir>/.orchestrator/agent/<run_name>[-n]`): the directories created, `instructions`
/// written to the run's `instructions.md` (the prompt is left for the caller), and the
/// environment built — the host's, the runner's extra env, then `overlays` in order, then the
/// agent's own `HOME`, `XDG_*_HOME` and `TMPDIR`.
pub(crate) fn base_request(
    name: &str,
    runner: &dyn AgentRunner,
    dir: &Path,
    run_name: &str,
    overlays: &[&orchestrator_core::plan::Env],
    instructions: String,
) -> Result<AgentRequest, WorkFailure> {
    let base = dir.join(".orchestrator").join("agent");
    let run_dir = unique_run_dir(&base, run_name).map_err(|e| {
        startup(format!(
            "could not create the agent's run directory under {}: {e}",
            base.display()
        ))
    })?;
    let state_dir = state_dir_of(dir, name);
    let home = state_dir.join("home");
    let tmp = run_dir.join("tmp");
    let xdg = [
        ("XDG_CONFIG_HOME", home.join(".config")),
        ("XDG_DATA_HOME", home.join(".local").join("share")),
        ("XDG_STATE_HOME", home.join(".local").join("state")),
        ("XDG_CACHE_HOME", home.join(".cache")),
    ];
    let dirs: Vec<PathBuf> = xdg
        .iter()
        .map(|(_, d)| d.clone())
        .chain([tmp.clone()])
        .collect();
    let instructions_file = run_dir.join("instructions.md");
    materialize(&dirs, &[(instructions_file.clone(), instructions)])?;

    let mut env = ChildEnv::from_host();
    env.overlay(&runner.extra_env());
    for overlay in overlays {
        env.overlay(overlay);
    }
    env.set("HOME", &home);
    for (var, dir) in &xdg {
        env.set(var, dir);
    }
    for var in ["TMPDIR", "TMP", "TEMP"] {
        env.set(var, &tmp);
    }
    let mut request = AgentRequest::new(dir, String::new());
    request.agent = name.to_owned();
    request.instructions_file = instructions_file;
    request.run_dir = run_dir;
    request.state_dir = state_dir;
    request.home_dir = home;
    request.env = env;
    Ok(request)
}

/// The spec's instructions, or the content of its `instructionsFile` (relative to `dir`).
fn instructions(spec: &AgentSpec, dir: &Path) -> Result<String, WorkFailure> {
    match (&spec.instructions, &spec.instructions_file) {
        (Some(text), _) => Ok(text.clone()),
        (None, Some(file)) => {
            let relative = Path::new(file);
            let escapes = relative.is_absolute()
                || relative
                    .components()
                    .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)));
            if escapes {
                return Err(startup(format!(
                    "instructionsFile `{file}` must be a path inside the repository"
                )));
            }
            std::fs::read_to_string(dir.join(relative))
                .map_err(|e| startup(format!("cannot read instructionsFile `{file}`: {e}")))
        }
        (None, None) => Err(startup(
            "agent work needs `instructions` or `instructionsFile`".into(),
        )),
    }
}

/// Creates `base/<name>`, or `base/<name>-2`, `-3`, ... when it exists (a heal in the same
/// phase and attempt).
fn unique_run_dir(base: &Path, name: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(base)?;
    for n in 1u32.. {
        let dir = if n == 1 {
            base.join(name)
        } else {
            base.join(format!("{name}-{n}"))
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free run directory name"))
}

/// Where agent `name` keeps its state (config home, sessions) for `dir`:
/// `<dir>/.orchestrator/agent/sessions/<name>`.
pub(crate) fn state_dir_of(dir: &Path, name: &str) -> PathBuf {
    dir.join(".orchestrator")
        .join("agent")
        .join("sessions")
        .join(safe_name(name))
}

/// An agent name usable as a directory name.
fn safe_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() || cleaned.starts_with('.') {
        format!("agent{cleaned}")
    } else {
        cleaned
    }
}

/// Creates `dirs` and writes `files` (creating their parents).
pub(crate) fn materialize(
    dirs: &[PathBuf],
    files: &[(PathBuf, String)],
) -> Result<(), WorkFailure> {
    let failed = |path: &Path, e: io::Error| {
        WorkFailure::new(format!("could not prepare {}: {e}", path.display()))
            .reason(FailureReason::StartupError)
    };
    for dir in dirs {
        std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
    }
    for (path, content) in files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| failed(parent, e))?;
        }
        std::fs::write(path, content).map_err(|e| failed(path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_run_dirs() {
        assert_eq!(safe_name("my/agent"), "my_agent");
        assert_eq!(safe_name(".."), "__");
        assert_eq!(safe_name(""), "agent");
        let dir = std::env::temp_dir().join(format!("agent-run-dirs-{}", std::process::id()));
        let a = unique_run_dir(&dir, "work-1").ok();
        let b = unique_run_dir(&dir, "work-1").ok();
        assert_eq!(a, Some(dir.join("work-1")));
        assert_eq!(b, Some(dir.join("work-1-2")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn spec_with_model(model: &str) -> AgentSpec {
        AgentSpec {
            instructions: Some("do it".into()),
            model: Some(model.into()),
            ..AgentSpec::default()
        }
    }

    const PROVIDERS: &str = r#"{"providers": [
        {"id": "corp", "type": "anthropic", "baseUrl": "https://llm.corp.example",
         "apiKey": "env:CORP_KEY", "models": ["claude-sonnet-4-6"]}
    ]}"#;

    #[test]
    fn a_provider_model_points_the_cli_at_its_provider() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(".model_providers.json"), PROVIDERS).expect("write");
        let mut ctx = WorkContext::detached(dir.path());
        ctx.env.insert("CORP_KEY".into(), "k-123".into());
        let runner = crate::agent::ClaudeCode::new();
        let spec = spec_with_model("corp:claude-sonnet-4-6");
        let request = prepare("claude", &spec, &runner, &ctx, PluginUse::none()).expect("prepared");
        assert_eq!(request.model.as_deref(), Some("claude-sonnet-4-6"));
        assert_eq!(
            request.env.get_str("ANTHROPIC_BASE_URL").as_deref(),
            Some("https://llm.corp.example")
        );
        assert_eq!(
            request.env.get_str("ANTHROPIC_API_KEY").as_deref(),
            Some("k-123")
        );

        // A bare model is the CLI's own; a provider without its key fails the run, naming it.
        let bare = prepare(
            "claude",
            &spec_with_model("sonnet"),
            &runner,
            &ctx,
            PluginUse::none(),
        )
        .expect("bare");
        assert_eq!(bare.model.as_deref(), Some("sonnet"));
        ctx.env.remove("CORP_KEY");
        let failure =
            prepare("claude", &spec, &runner, &ctx, PluginUse::none()).expect_err("no key");
        assert!(failure.message.contains("corp"), "{}", failure.message);
        assert_eq!(failure.reason, FailureReason::StartupError);
    }
}
