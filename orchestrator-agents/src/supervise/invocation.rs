//! [`Invocation`]: one program for the [`super::Supervisor`] to run — what, where, with which
//! environment, for how long — and how it becomes a command.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::runner::{LogStream, JOB_TOKEN_VAR};
use tokio::process::Command;

use crate::env::ChildEnv;
use crate::lines::{LineObserver, LineRewrite};

/// One program to run: what, where, with which environment, for how long.
///
/// The program is never run through a shell; a bare name is looked up on the `PATH` of
/// [`Invocation::env`], and a relative path (`./build.sh`) is relative to its directory
/// ([`Invocation::dir`]).
#[derive(Clone)]
pub struct Invocation {
    pub(super) program: OsString,
    /// Where `program` was already found, so the spawn does not search `PATH` again.
    pub(super) file: Option<PathBuf>,
    pub(super) args: Vec<OsString>,
    pub(super) dir: PathBuf,
    pub(super) env: ChildEnv,
    pub(super) timeout: Option<Duration>,
    pub(super) observer: Option<LineObserver>,
    pub(super) rewrite: Option<LineRewrite>,
    pub(super) token_prefix: Option<String>,
    pub(super) capture_stdout: bool,
    pub(super) input: Option<Input>,
}

/// Lines for a process's stdin ([`Invocation::input`]): taken by the run that starts it.
pub(super) type Input = Arc<std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>>;

impl fmt::Debug for Invocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Invocation")
            .field("program", &self.program)
            .field("file", &self.file)
            .field("args", &self.args)
            .field("dir", &self.dir)
            .field("env_vars", &self.env.len())
            .field("timeout", &self.timeout)
            .field("observer", &self.observer.is_some())
            .field("rewrite", &self.rewrite.is_some())
            .field("token_prefix", &self.token_prefix)
            .field("capture_stdout", &self.capture_stdout)
            .field("input", &self.input.is_some())
            .finish()
    }
}

impl Invocation {
    /// `program` run in `dir` with the host environment ([`ChildEnv::from_host`]), no
    /// arguments and no timeout.
    pub fn new(program: impl Into<OsString>, dir: impl Into<PathBuf>) -> Self {
        Invocation::with_env(program, dir, ChildEnv::from_host())
    }

    /// [`Invocation::new`] with the environment `env` (the host's is not read).
    pub(crate) fn with_env(
        program: impl Into<OsString>,
        dir: impl Into<PathBuf>,
        env: ChildEnv,
    ) -> Self {
        Invocation {
            program: program.into(),
            file: None,
            args: Vec::new(),
            dir: dir.into(),
            env,
            timeout: None,
            observer: None,
            rewrite: None,
            token_prefix: None,
            capture_stdout: false,
            input: None,
        }
    }

    /// The same invocation running `program` instead, found at `file` (it is named
    /// `program`, as typed, and `file` is spawned without searching `PATH` again).
    pub(crate) fn with_program(mut self, program: impl Into<OsString>, file: PathBuf) -> Self {
        self.program = program.into();
        self.file = Some(file);
        self
    }

    /// Feeds the process's stdin: each line received (a newline is added) is written as it
    /// comes, and stdin is closed when every sender is dropped. Without it stdin is
    /// `/dev/null`. A clone of the invocation shares the feed: only the first run gets it.
    pub fn input(mut self, lines: tokio::sync::mpsc::UnboundedReceiver<String>) -> Self {
        self.input = Some(Arc::new(std::sync::Mutex::new(Some(lines))));
        self
    }

    /// Starts each run's [`JOB_TOKEN_VAR`] with `prefix`, the job's
    /// [`WorkContext::job_token_prefix`](orchestrator_core::WorkContext::job_token_prefix), so
    /// that whoever takes the plan over after a crash finds the processes the run left, even
    /// those outside its process group ([`crate::stop_leftovers`]).
    pub fn job_token_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.token_prefix = Some(prefix.into());
        self
    }

    /// Adds one argument, passed as it is.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments, passed as they are.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Replaces the whole environment of the child.
    pub fn env(mut self, env: ChildEnv) -> Self {
        self.env = env;
        self
    }

    /// Sets one variable of the child's environment.
    pub(crate) fn set_var(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.env.set(name, value);
        self
    }

    /// Ends the process (and its group) after `timeout`; `None` waits for ever.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Also hands every output line to `observer` (after it went to the log), e.g. to parse
    /// an agent CLI's JSON events. Called from the reading tasks: keep it quick.
    pub fn observe(mut self, observer: impl Fn(LogStream, &str) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Rewrites every output line before it reaches the log, the observer and the stderr tail
    /// quoted in failure messages (e.g. to redact secrets). Called from the reading tasks.
    pub fn rewrite(mut self, rewrite: impl Fn(String) -> String + Send + Sync + 'static) -> Self {
        self.rewrite = Some(Arc::new(rewrite));
        self
    }

    /// Keeps the end of the command's stdout, at most
    /// [`orchestrator_core::runner::MAX_OUTPUT_BYTES`] in whole lines, as
    /// [`Outcome::stdout`](crate::supervise::Outcome::stdout) (the shell and process runners' job output, SPEC §12).
    pub fn capture_stdout(mut self) -> Self {
        self.capture_stdout = true;
        self
    }

    /// The arguments.
    pub fn arguments(&self) -> &[OsString] {
        &self.args
    }

    /// The environment the child gets.
    pub fn child_env(&self) -> &ChildEnv {
        &self.env
    }

    /// The program.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The directory it runs in.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub(super) fn program_name(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }

    pub(super) fn command(&self, token: &str) -> Command {
        let mut cmd = Command::new(self.resolved_program());
        cmd.args(&self.args)
            .current_dir(&self.dir)
            .env_clear()
            .envs(self.env.iter())
            .env(JOB_TOKEN_VAR, token)
            .stdin(if self.input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // The program as it was named, not the path found for it: what a shell passes too.
        #[cfg(unix)]
        cmd.arg0(&self.program).process_group(0);
        cmd
    }
}

impl Invocation {
    /// The program as an absolute path found on the child's `PATH`, when it is a bare name.
    ///
    /// Handing std a bare name together with a cleared environment and a working directory
    /// makes it fall back from `posix_spawn` to fork + one `execve` per `PATH` entry; resolving
    /// first keeps every spawn on the fast path. A name not found stays as it is, so the spawn
    /// reports "not found" as before.
    fn resolved_program(&self) -> std::borrow::Cow<'_, OsStr> {
        if let Some(file) = &self.file {
            return std::borrow::Cow::Borrowed(file.as_os_str());
        }
        let program = Path::new(&self.program);
        if program.components().count() != 1 || program.is_absolute() {
            return std::borrow::Cow::Borrowed(self.program.as_os_str());
        }
        let Some(path) = self.env.get("PATH") else {
            return std::borrow::Cow::Borrowed(self.program.as_os_str());
        };
        for dir in std::env::split_paths(path) {
            if !dir.is_absolute() {
                continue;
            }
            let candidate = dir.join(program);
            if is_executable(&candidate) {
                return std::borrow::Cow::Owned(candidate.into_os_string());
            }
        }
        std::borrow::Cow::Borrowed(self.program.as_os_str())
    }
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}
