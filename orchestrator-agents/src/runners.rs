//! The `shell` and `process` work runners: a [`WorkSpec`] and a [`WorkContext`] turned into a
//! supervised [`Invocation`].

use std::time::Duration;

use async_trait::async_trait;
use orchestrator_core::plan::{Env, ShellKind, WorkSpec};
use orchestrator_core::runner::{WorkContext, WorkFailure, WorkOutput, WorkResult, WorkRunner};
use orchestrator_core::state::FailureReason;
use orchestrator_core::Phase;

use crate::env::ChildEnv;
use crate::error::Error;
use crate::supervise::{Invocation, Outcome, Supervisor, SupervisorOptions};

mod direct;
use crate::workdir::resolve_cwd;

/// Longest command shown in a failure message, in characters.
const LABEL_CHARS: usize = 80;

/// Runs `shell` work: the spec's `command`, which only the shell it names interprets.
///
/// | `shell`             | runs                                                   |
/// |---------------------|--------------------------------------------------------|
/// | absent              | `sh -c` on Unix, `cmd /C` on Windows                   |
/// | `sh` / `bash`       | `sh -c` / `bash -c`                                    |
/// | `pwsh`/`powershell` | `pwsh` / `powershell -NoProfile -NonInteractive -Command` |
/// | `cmd`               | `cmd /C`                                               |
///
/// The command runs in the job directory (or the spec's `cwd` inside it) with the host
/// environment less [`REMOVED_ENV_VARS`](crate::REMOVED_ENV_VARS), then the plan/job env, then
/// the spec's `env` ([`ChildEnv::overlay`] explains `$VAR` expansion), under a [`Supervisor`]:
/// output goes to the context's log line by line, and a timeout or cancellation stops the whole
/// process tree.
///
/// ```
/// use orchestrator_agents::ShellRunner;
/// use orchestrator_core::plan::{Env, WorkSpec};
/// use orchestrator_core::runner::{LogSink, WorkContext, WorkRunner};
/// use orchestrator_core::{NodeId, Phase, PlanId};
/// use tokio_util::sync::CancellationToken;
///
/// # #[cfg(unix)]
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let ctx = WorkContext {
///     plan_id: PlanId::from("plan"),
///     node: 0,
///     node_id: NodeId::from("node"),
///     producer_id: "greet".into(),
///     task: "Say hi".into(),
///     phase: Phase::Work,
///     attempt: 1,
///     dir: std::env::temp_dir(),
///     env: Env::from([("WHO".to_string(), "world".to_string())]),
///     cancel: CancellationToken::new(),
///     log: LogSink::detached(),
///     session_id: None,
///     continues_unfinished: false,
///     inputs: None,
///     may_split: false,
///     tools: None,
///     wake: None,
/// };
/// let runner = ShellRunner::new();
/// runner.run(&WorkSpec::shell("echo hi $WHO"), &ctx).await.unwrap();
/// assert_eq!(ctx.log.take(), "hi world\n");
///
/// let failure = runner.run(&WorkSpec::shell("exit 3"), &ctx).await.unwrap_err();
/// assert_eq!(failure.message, "`exit 3`: exit code 3");
/// assert_eq!(failure.exit_code, Some(3));
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct ShellRunner {
    supervisor: Supervisor,
}

impl ShellRunner {
    /// A runner with default [`SupervisorOptions`].
    pub fn new() -> Self {
        ShellRunner::default()
    }

    /// A runner with these supervisor options.
    pub fn with_options(options: SupervisorOptions) -> Self {
        ShellRunner {
            supervisor: Supervisor::with_options(options),
        }
    }
}

#[async_trait]
impl WorkRunner for ShellRunner {
    async fn run(&self, spec: &WorkSpec, ctx: &WorkContext) -> WorkResult {
        let WorkSpec::Shell(shell) = spec else {
            return Err(wrong_kind("shell", spec));
        };
        let (program, flags) = shell_program(shell.extra.shell)?;
        let shell_invocation = prepare(program, spec, ctx)?;
        // A plain simple command runs without the shell (see `direct`): sh would exec it as is.
        let words = matches!(shell.extra.shell, None | Some(ShellKind::Sh))
            .then(|| direct::plain_words(&shell.command))
            .flatten();
        let direct = words.and_then(|words| {
            let env = shell_invocation.child_env();
            let file = direct::program_file(words[0], env, shell_invocation.dir())?;
            Some((words, file))
        });
        let invocation = match direct {
            // Named as typed (argv[0] is the word), the file found spawned as it is.
            Some((words, file)) => {
                // The shell would set PWD to the directory it starts in.
                let dir = shell_invocation.dir().to_owned();
                shell_invocation
                    .set_var("PWD", dir)
                    .with_program(words[0], file)
                    .args(&words[1..])
            }
            None => shell_invocation
                .args(flags.iter().copied())
                .arg(&shell.command),
        };
        let result = self
            .supervisor
            .run(&invocation, &ctx.cancel, &ctx.log)
            .await;
        finish(result, &label(&shell.command), |e| match e {
            Error::ProgramNotFound { program } => WorkFailure::new(format!(
                "shell `{program}` was not found on PATH; install it or choose another `shell` \
                 (sh, bash, pwsh, powershell, cmd)"
            ))
            .reason(FailureReason::StartupError),
            other => other.into(),
        })
    }
}

/// Runs `process` work: the spec's `executable` with its `args`, passed as they are; no shell
/// is involved, so no argument is ever interpreted.
///
/// A bare executable name is looked up on the child's `PATH` (after the env layers, so a spec
/// may extend it); a relative path such as `./build.sh` is relative to the spec's `cwd`.
/// Everything else is as for [`ShellRunner`].
///
/// ```
/// use orchestrator_agents::ProcessRunner;
/// use orchestrator_core::plan::{Env, WorkSpec};
/// use orchestrator_core::runner::{LogSink, WorkContext, WorkRunner};
/// use orchestrator_core::{NodeId, Phase, PlanId};
/// use tokio_util::sync::CancellationToken;
///
/// # #[cfg(unix)]
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let ctx = WorkContext {
///     plan_id: PlanId::from("plan"),
///     node: 0,
///     node_id: NodeId::from("node"),
///     producer_id: "list".into(),
///     task: "Print".into(),
///     phase: Phase::Work,
///     attempt: 1,
///     dir: std::env::temp_dir(),
///     env: Env::new(),
///     cancel: CancellationToken::new(),
///     log: LogSink::detached(),
///     session_id: None,
///     continues_unfinished: false,
///     inputs: None,
///     may_split: false,
///     tools: None,
///     wake: None,
/// };
/// // `$HOME; rm -rf x` is one literal argument: nothing expands or runs it.
/// let spec = WorkSpec::process("printf", ["%s\n", "$HOME; rm -rf x"]);
/// ProcessRunner::new().run(&spec, &ctx).await.unwrap();
/// assert_eq!(ctx.log.take(), "$HOME; rm -rf x\n");
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct ProcessRunner {
    supervisor: Supervisor,
}

impl ProcessRunner {
    /// A runner with default [`SupervisorOptions`].
    pub fn new() -> Self {
        ProcessRunner::default()
    }

    /// A runner with these supervisor options.
    pub fn with_options(options: SupervisorOptions) -> Self {
        ProcessRunner {
            supervisor: Supervisor::with_options(options),
        }
    }
}

#[async_trait]
impl WorkRunner for ProcessRunner {
    async fn run(&self, spec: &WorkSpec, ctx: &WorkContext) -> WorkResult {
        let WorkSpec::Process(process) = spec else {
            return Err(wrong_kind("process", spec));
        };
        if process.executable.trim().is_empty() {
            return Err(WorkFailure::new("process work has an empty `executable`")
                .reason(FailureReason::StartupError));
        }
        let invocation = prepare(&process.executable, spec, ctx)?.args(&process.args);
        let result = self
            .supervisor
            .run(&invocation, &ctx.cancel, &ctx.log)
            .await;
        let shown = std::iter::once(&process.executable)
            .chain(&process.args)
            .map(|a| quote_for_display(a))
            .collect::<Vec<_>>()
            .join(" ");
        finish(result, &label(&shown), WorkFailure::from)
    }
}

/// The program and flags that run a command string in `kind`.
fn shell_program(
    kind: Option<ShellKind>,
) -> Result<(&'static str, &'static [&'static str]), WorkFailure> {
    const POWERSHELL_FLAGS: &[&str] = &["-NoProfile", "-NonInteractive", "-Command"];
    Ok(match kind {
        None if cfg!(windows) => ("cmd", &["/C"]),
        None | Some(ShellKind::Sh) => ("sh", &["-c"]),
        Some(ShellKind::Bash) => ("bash", &["-c"]),
        Some(ShellKind::Pwsh) => ("pwsh", POWERSHELL_FLAGS),
        Some(ShellKind::Powershell) => ("powershell", POWERSHELL_FLAGS),
        Some(ShellKind::Cmd) => ("cmd", &["/C"]),
        Some(other) => {
            return Err(WorkFailure::new(format!(
                "the shell runner does not support shell {other:?}"
            ))
            .reason(FailureReason::StartupError))
        }
    })
}

/// The invocation of `program` for `spec` in `ctx`: directory, environment, timeout.
fn prepare(program: &str, spec: &WorkSpec, ctx: &WorkContext) -> Result<Invocation, WorkFailure> {
    if ctx.cancel.is_cancelled() {
        return Err(WorkFailure::canceled());
    }
    let dir = resolve_cwd(&ctx.dir, spec.cwd())?;
    check_env(&ctx.env, "plan/job")?;
    check_env(spec.env(), "spec")?;
    let mut env = ChildEnv::from_host();
    env.overlay(&ctx.env);
    env.overlay(spec.env());
    // A timeout of 0 is rejected by plan validation; here it means "none" rather than "at once".
    let timeout = spec
        .timeout_ms()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis);
    let invocation = Invocation::with_env(program, dir, env)
        .timeout(timeout)
        .job_token_prefix(ctx.job_token_prefix());
    // The work's stdout is the job's output (SPEC §12); checks and setup have none.
    Ok(if ctx.phase == Phase::Work {
        invocation.capture_stdout()
    } else {
        invocation
    })
}

/// Names and values the operating system cannot pass on, caught before anything starts.
pub(crate) fn check_env(layer: &Env, which: &str) -> Result<(), WorkFailure> {
    for (name, value) in layer {
        let problem = if name.is_empty() || name.contains(['=', '\0']) {
            format!("{which} env: `{name}` is not a valid variable name (empty, or contains `=` or a NUL byte)")
        } else if value.contains('\0') {
            format!("{which} env: the value of `{name}` contains a NUL byte")
        } else {
            continue;
        };
        return Err(WorkFailure::new(problem).reason(FailureReason::StartupError));
    }
    Ok(())
}

fn finish(
    result: Result<Outcome, Error>,
    label: &str,
    on_error: impl FnOnce(Error) -> WorkFailure,
) -> WorkResult {
    match result {
        Ok(outcome) => match outcome.failure(label) {
            None => Ok(match outcome.stdout {
                Some(text) if !text.is_empty() => WorkOutput::default().with_output(text),
                _ => WorkOutput::default(),
            }),
            Some(failure) => Err(failure),
        },
        Err(e) => Err(on_error(e)),
    }
}

pub(crate) fn wrong_kind(runner: &str, spec: &WorkSpec) -> WorkFailure {
    WorkFailure::new(format!(
        "the {runner} runner cannot run `{}` work; register a runner for it",
        spec.kind()
    ))
    .reason(FailureReason::StartupError)
}

/// The first line of `text`, at most [`LABEL_CHARS`] characters, `…` where cut.
fn label(text: &str) -> String {
    let first = text.trim().lines().next().unwrap_or("");
    let mut out: String = first.chars().take(LABEL_CHARS).collect();
    if out.len() < text.trim().len() {
        out.push('…');
    }
    out
}

/// An argument as a person would type it: quoted when empty or containing spaces or quotes.
fn quote_for_display(arg: &str) -> String {
    if !arg.is_empty() && !arg.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
        arg.to_owned()
    } else {
        format!("{arg:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short_single_lines() {
        assert_eq!(label("  make test "), "make test");
        assert_eq!(label("a\nb"), "a…");
        let long = "x".repeat(200);
        assert_eq!(label(&long).chars().count(), LABEL_CHARS + 1);
    }

    #[test]
    fn display_quoting() {
        assert_eq!(quote_for_display("plain"), "plain");
        assert_eq!(quote_for_display("two words"), "\"two words\"");
        assert_eq!(quote_for_display(""), "\"\"");
    }

    #[test]
    fn shells_per_kind() {
        let p = |k| shell_program(k).map(|(p, f)| (p, f.to_vec()));
        assert_eq!(p(Some(ShellKind::Bash)), Ok(("bash", vec!["-c"])));
        assert_eq!(p(Some(ShellKind::Cmd)), Ok(("cmd", vec!["/C"])));
        assert_eq!(
            p(Some(ShellKind::Pwsh)),
            Ok(("pwsh", vec!["-NoProfile", "-NonInteractive", "-Command"]))
        );
        #[cfg(unix)]
        assert_eq!(p(None), Ok(("sh", vec!["-c"])));
    }
}
