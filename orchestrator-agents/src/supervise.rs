//! The process supervisor every runner of this crate is built on.
//!
//! [`Supervisor::run`] starts an [`Invocation`] as the leader of its own process group, with no
//! stdin, streams its stdout and stderr line by line to a [`LogSink`] as they arrive, and ends
//! it on timeout or cancellation by stopping the *whole group*: SIGTERM, a grace period, then
//! SIGKILL, so grandchildren (`sh -c 'server & tests'`) die too. The child is always reaped. When
//! the main process exits, whatever it left running in its group is stopped the same way (unless
//! [`SupervisorOptions::kill_leftovers`] is off), and output still held open by a process that
//! left the group (a daemon) is abandoned after [`SupervisorOptions::drain_timeout`] instead of
//! blocking forever.
//!
//! Processes that leave the group (`setsid`, daemons) are stopped along with it: every process
//! of a run carries [`JOB_TOKEN_VAR`] in its environment, and on Linux the supervisor makes its
//! process the child subreaper of what it starts, so orphans are re-parented to it (and reaped
//! by it) instead of escaping to init. Elsewhere only the process group is reached.

use std::fmt;
use std::io;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::runner::{LogSink, LogStream, WorkFailure};
use orchestrator_core::state::FailureReason;
use tokio::process::Child;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::group::{Group, KillOnDrop};
use crate::lines::{pump, LineOut, Tail};
use crate::tree::{self, Tree};

mod invocation;
pub use invocation::Invocation;

/// Tunables of a [`Supervisor`]. Build from [`SupervisorOptions::default`] and the setters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SupervisorOptions {
    /// Time between SIGTERM and SIGKILL when stopping a process group. Default: 2 s.
    pub kill_grace: Duration,
    /// How long to keep reading output after the main process has ended (and its group was
    /// stopped), before abandoning pipes a detached process still holds open. Default: 1 s.
    pub drain_timeout: Duration,
    /// Longest line kept, in bytes; the rest of a longer line is dropped and counted. Default: 64 KiB.
    pub max_line_bytes: usize,
    /// How many of the last stderr lines a failure message quotes. Default: 5.
    pub stderr_tail_lines: usize,
    /// Stop processes the main process left running in its group when it exits, so a job's
    /// processes never outlive it. Default: true.
    pub kill_leftovers: bool,
}

impl Default for SupervisorOptions {
    fn default() -> Self {
        SupervisorOptions {
            kill_grace: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(1),
            max_line_bytes: 64 * 1024,
            stderr_tail_lines: 5,
            kill_leftovers: true,
        }
    }
}

impl SupervisorOptions {
    /// Sets [`SupervisorOptions::kill_grace`].
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }

    /// Sets [`SupervisorOptions::drain_timeout`].
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Sets [`SupervisorOptions::max_line_bytes`] (at least 1).
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes.max(1);
        self
    }

    /// Sets [`SupervisorOptions::stderr_tail_lines`].
    pub fn stderr_tail_lines(mut self, lines: usize) -> Self {
        self.stderr_tail_lines = lines;
        self
    }

    /// Sets [`SupervisorOptions::kill_leftovers`].
    pub fn kill_leftovers(mut self, kill: bool) -> Self {
        self.kill_leftovers = kill;
        self
    }
}

/// How a supervised process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending {
    /// It exited by itself with this code (0 is success).
    Exited(i32),
    /// It was killed by this signal, not by the supervisor.
    Signaled(i32),
    /// The timeout expired; its process group was stopped.
    TimedOut(Duration),
    /// The cancellation token fired; its process group was stopped.
    Canceled,
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Ending::Exited(code) => write!(f, "exit code {code}"),
            Ending::Signaled(sig) => match signal_name(sig) {
                Some(name) => write!(f, "killed by signal {sig} ({name})"),
                None => write!(f, "killed by signal {sig}"),
            },
            Ending::TimedOut(after) => write!(f, "timed out after {}", human_duration(after)),
            Ending::Canceled => f.write_str("canceled"),
        }
    }
}

/// `500 ms`, `3 s`, `1500 ms`: whole seconds when exact, else milliseconds.
fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

#[cfg(unix)]
fn signal_name(sig: i32) -> Option<&'static str> {
    nix::sys::signal::Signal::try_from(sig)
        .ok()
        .map(|s| s.as_str())
}

#[cfg(not(unix))]
fn signal_name(_sig: i32) -> Option<&'static str> {
    None
}

/// What [`Supervisor::run`] reports about a process that was started.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// How it ended.
    pub ending: Ending,
    /// Wall time from start until it ended and was reaped.
    pub elapsed: Duration,
    /// The last lines of its stderr (at most [`SupervisorOptions::stderr_tail_lines`]).
    pub stderr_tail: Vec<String>,
    /// Output was still held open by a process outside the group when the drain timeout
    /// passed; the rest of it was not read.
    pub output_abandoned: bool,
    /// The end of its stdout, when the invocation asked for it ([`Invocation::capture_stdout`]).
    pub stdout: Option<String>,
}

impl Outcome {
    /// Exited by itself with code 0.
    pub fn success(&self) -> bool {
        self.ending == Ending::Exited(0)
    }

    /// The failure to report for a run of `what` (a short description of the command), or
    /// `None` on success: `` `make test`: exit code 2 `` followed by the last stderr lines,
    /// with the reason ([`FailureReason::Timeout`], [`FailureReason::Canceled`], else
    /// [`FailureReason::PhaseFailed`]) and the exit code.
    pub fn failure(&self, what: &str) -> Option<WorkFailure> {
        if self.success() {
            return None;
        }
        let mut message = format!("`{what}`: {}", self.ending);
        if !self.stderr_tail.is_empty() {
            message.push_str("\nlast lines of stderr:");
            for line in &self.stderr_tail {
                message.push_str("\n  ");
                message.push_str(line);
            }
        }
        let failure = WorkFailure::new(message);
        Some(match self.ending {
            Ending::Exited(code) => failure.exit_code(code),
            Ending::Signaled(_) => failure,
            Ending::TimedOut(_) => failure.reason(FailureReason::Timeout),
            Ending::Canceled => failure.reason(FailureReason::Canceled),
        })
    }
}

/// Runs [`Invocation`]s under supervision. Cheap to clone; holds only its options.
///
/// ```
/// use orchestrator_agents::{Invocation, Supervisor};
/// use orchestrator_core::runner::LogSink;
/// use tokio_util::sync::CancellationToken;
///
/// # #[cfg(unix)]
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let log = LogSink::detached();
/// let run = Invocation::new("sh", std::env::temp_dir()).args(["-c", "echo out; echo err >&2; exit 3"]);
/// let outcome = Supervisor::new().run(&run, &CancellationToken::new(), &log).await.unwrap();
/// assert_eq!(outcome.ending.to_string(), "exit code 3");
/// assert_eq!(outcome.stderr_tail, ["err"]);
/// assert!(log.take().contains("out\n"));
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct Supervisor {
    options: SupervisorOptions,
}

/// Why the supervisor stopped a process itself.
#[derive(Debug, Clone, Copy)]
enum Stop {
    TimedOut(Duration),
    Canceled,
}

impl Supervisor {
    /// A supervisor with default options.
    pub fn new() -> Self {
        Supervisor::default()
    }

    /// A supervisor with these options.
    pub fn with_options(options: SupervisorOptions) -> Self {
        Supervisor { options }
    }

    /// Its options.
    pub fn options(&self) -> &SupervisorOptions {
        &self.options
    }

    /// Runs `invocation` to its end, streaming its output to `log` (stderr lines as
    /// [`LogStream::Stderr`]; the supervisor's own notes as [`LogStream::System`]).
    ///
    /// Returns once the process has ended and been reaped, its group has been stopped if needed,
    /// and its output has been read (or abandoned). A timeout or `cancel` firing is an
    /// [`Outcome`] ([`Ending::TimedOut`], [`Ending::Canceled`]), not an error; errors are for
    /// processes that could not be started or waited for. If the returned future is dropped
    /// early, the process group is killed.
    pub async fn run(
        &self,
        invocation: &Invocation,
        cancel: &CancellationToken,
        log: &LogSink,
    ) -> Result<Outcome, Error> {
        let o = &self.options;
        check_cwd(invocation)?;
        // Before the child exists, so that none of its orphans can miss us.
        tree::become_subreaper();
        let token = Tree::token(invocation.token_prefix.as_deref());
        let started = Instant::now();
        let mut child = spawn(invocation, &token)
            .await
            .map_err(|e| spawn_error(invocation.program_name(), e))?;
        let group = Group::of(&child);
        let tree = Tree::new(token, child.id());
        let mut guard = KillOnDrop::new(group, tree.clone());
        // Recorded by the engine, so a later owner can stop the group if we die with it running.
        if let Some(pgid) = group.id() {
            log.process_started(pgid);
        }
        let tail = Arc::new(Tail::new(o.stderr_tail_lines));
        let stdout = invocation
            .capture_stdout
            .then(|| Arc::new(Tail::of_bytes(orchestrator_core::runner::MAX_OUTPUT_BYTES)));
        let mut readers = Readers::start(
            &mut child,
            invocation,
            log,
            &tail,
            stdout.as_ref(),
            o.max_line_bytes,
        );

        let deadline = invocation.timeout.map(|t| started + t);
        let waited = tokio::select! {
            biased;
            status = child.wait() => Ok(status),
            () = cancel.cancelled() => Err(Stop::Canceled),
            () = sleep_until(deadline) => Err(Stop::TimedOut(invocation.timeout.unwrap_or_default())),
        };
        // Whether the adopted orphans that ended have been reaped since the run's end.
        let mut reaped = false;
        let (status, stop) = match waited {
            Ok(status) => {
                let status = status.map_err(|source| Error::Wait {
                    program: invocation.program_name(),
                    source,
                })?;
                if o.kill_leftovers {
                    reaped = self.stop_leftovers(group, &tree, log).await;
                }
                (status, None)
            }
            Err(stop) => {
                log.line(LogStream::System, &self.stop_note(stop));
                let status = self
                    .stop_child(&mut child, group, &tree)
                    .await
                    .map_err(|source| Error::Wait {
                        program: invocation.program_name(),
                        source,
                    })?;
                (status, Some(stop))
            }
        };
        guard.disarm();
        if !reaped {
            tree::reap_adopted();
        }
        if let Some(pgid) = group.id() {
            log.process_ended(pgid);
        }

        let output_abandoned = self.finish_reading(&mut readers, log).await;
        let ending = match stop {
            Some(Stop::TimedOut(after)) => Ending::TimedOut(after),
            Some(Stop::Canceled) => Ending::Canceled,
            None => ending_of(status),
        };
        Ok(Outcome {
            ending,
            elapsed: started.elapsed(),
            stderr_tail: tail.snapshot(),
            output_abandoned,
            stdout: stdout.map(|s| s.text()),
        })
    }

    /// Stops the processes a command that exited left running, in its group or outside it
    /// (`kill_leftovers`), saying so in `log`. Returns true when nothing was left, the adopted
    /// orphans that ended having been reaped on the way (else whatever was stopped still
    /// needs reaping).
    async fn stop_leftovers(&self, group: Group, tree: &Tree, log: &LogSink) -> bool {
        let escaped = tree.processes_after_exit();
        let group_alive = group.is_alive();
        if !group_alive && escaped.is_empty() {
            // Nothing of the run is left that could start anything: the usual end of a job.
            return true;
        }
        if group_alive {
            log.line(
                LogStream::System,
                "stopping processes the command left running in its process group",
            );
        }
        if !escaped.is_empty() {
            log.line(
                LogStream::System,
                &format!(
                    "stopping {} process(es) the command left running outside its process group",
                    escaped.len()
                ),
            );
        }
        self.stop_group(group, tree, escaped).await;
        false
    }

    /// Reads the rest of the output, up to the drain timeout; returns whether it was abandoned
    /// (a background process still holds the pipes open), which `log` is told.
    async fn finish_reading(&self, readers: &mut Readers, log: &LogSink) -> bool {
        let drain_timeout = self.options.drain_timeout;
        let output_abandoned = !readers.drain(drain_timeout).await;
        if output_abandoned {
            log.line(
                LogStream::System,
                &format!(
                    "stopped reading output {} after the command ended: a background process still holds it open",
                    human_duration(drain_timeout)
                ),
            );
        }
        output_abandoned
    }

    fn stop_note(&self, stop: Stop) -> String {
        let why = match stop {
            Stop::TimedOut(after) => format!("timed out after {}", human_duration(after)),
            Stop::Canceled => "canceled".to_owned(),
        };
        format!(
            "{why}: stopping the process group and every process it started (SIGTERM, then SIGKILL after {})",
            human_duration(self.options.kill_grace)
        )
    }

    /// Stops a running child, its group and the rest of its tree: SIGTERM, up to the grace
    /// period for all of them to exit, then SIGKILL for whatever is left; returns the child's
    /// reaped status.
    async fn stop_child(
        &self,
        child: &mut Child,
        group: Group,
        tree: &Tree,
    ) -> io::Result<ExitStatus> {
        let grace_end = Instant::now() + self.options.kill_grace;
        // Found while the child lives, so that its descendants by parent chain count too.
        let escaped = tree.processes();
        if !group.terminate() {
            // No group to signal (not Unix): the child itself is all that can be stopped.
            child.start_kill()?;
        }
        Tree::terminate(&escaped);
        if tokio::time::timeout_at(grace_end, child.wait())
            .await
            .is_ok()
        {
            group.wait_gone(grace_end).await;
            Tree::wait_gone(&escaped, grace_end).await;
        }
        // The child is not reaped yet: its descendants by parent chain still count.
        self.kill_rest(group, &escaped, tree.processes());
        // The leader may still run (SIGTERM ignored, or no group): make sure, then reap it.
        let _ = child.start_kill();
        child.wait().await
    }

    /// Stops what is left of a run whose main process has already exited: its group and the
    /// `escaped` processes of its tree.
    async fn stop_group(&self, group: Group, tree: &Tree, escaped: Vec<i32>) {
        let grace_end = Instant::now() + self.options.kill_grace;
        group.terminate();
        Tree::terminate(&escaped);
        group.wait_gone(grace_end).await;
        Tree::wait_gone(&escaped, grace_end).await;
        // The main process was reaped: its pid may be someone else's by now.
        self.kill_rest(group, &escaped, tree.processes_after_exit());
    }

    /// SIGKILL for whatever of the run still runs after the grace period: what is left of
    /// `escaped`, and `now`, the run's processes found by a second look (started since the
    /// first).
    fn kill_rest(&self, group: Group, escaped: &[i32], now: Vec<i32>) {
        Tree::kill(&Tree::alive(escaped));
        Tree::kill(&now);
        if group.is_alive() {
            group.kill();
        }
    }
}

/// Refuses an invocation whose working directory is missing (or not a directory) before
/// anything is spawned, so the error names the directory rather than the program.
fn check_cwd(invocation: &Invocation) -> Result<(), Error> {
    if let Err(source) = std::fs::metadata(&invocation.dir).and_then(require_dir) {
        return Err(Error::CwdMissing {
            cwd: invocation.dir.display().to_string(),
            path: invocation.dir.clone(),
            source,
        });
    }
    Ok(())
}

fn require_dir(meta: std::fs::Metadata) -> io::Result<()> {
    if meta.is_dir() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "not a directory",
        ))
    }
}

fn spawn_error(program: String, source: io::Error) -> Error {
    if source.kind() == io::ErrorKind::NotFound {
        Error::ProgramNotFound { program }
    } else {
        Error::Spawn { program, source }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn ending_of(status: ExitStatus) -> Ending {
    if let Some(code) = status.code() {
        return Ending::Exited(code);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return Ending::Signaled(sig);
        }
    }
    // Neither a code nor a signal (cannot happen on the platforms we know): a failure anyway.
    Ending::Exited(-1)
}

/// The tasks reading a child's stdout and stderr; aborted when dropped.
/// Writes `feed`'s lines to `stdin` until the feed closes (then stdin is closed) or the
/// process stops reading.
async fn feed_stdin(
    mut stdin: tokio::process::ChildStdin,
    mut feed: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    use tokio::io::AsyncWriteExt;
    while let Some(line) = feed.recv().await {
        let written = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await
        };
        if written.await.is_err() {
            return;
        }
    }
}

struct Readers {
    tasks: Vec<JoinHandle<()>>,
}

impl Readers {
    fn start(
        child: &mut Child,
        invocation: &Invocation,
        log: &LogSink,
        stderr_tail: &Arc<Tail>,
        stdout_tail: Option<&Arc<Tail>>,
        max_line_bytes: usize,
    ) -> Self {
        let out = |stream, tail: Option<Arc<Tail>>| LineOut {
            stream,
            log: log.clone(),
            observer: invocation.observer.clone(),
            rewrite: invocation.rewrite.clone(),
            tail,
            max_line_bytes,
        };
        let mut tasks = Vec::with_capacity(2);
        let feed = invocation
            .input
            .as_ref()
            .and_then(|input| input.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let (Some(stdin), Some(feed)) = (child.stdin.take(), feed) {
            // Not waited for: it ends when the feed closes or the process is gone.
            tokio::spawn(feed_stdin(stdin, feed));
        }
        if let Some(stdout) = child.stdout.take() {
            tasks.push(tokio::spawn(pump(
                stdout,
                out(LogStream::Stdout, stdout_tail.cloned()),
            )));
        }
        if let Some(stderr) = child.stderr.take() {
            tasks.push(tokio::spawn(pump(
                stderr,
                out(LogStream::Stderr, Some(stderr_tail.clone())),
            )));
        }
        Readers { tasks }
    }

    /// Waits up to `timeout` for both streams to end; true when they did, false when the
    /// readers had to be abandoned.
    async fn drain(&mut self, timeout: Duration) -> bool {
        let all = async {
            for task in &mut self.tasks {
                let _ = task.await;
            }
        };
        let done = tokio::time::timeout(timeout, all).await.is_ok();
        for task in &self.tasks {
            task.abort();
        }
        done
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Spawns `invocation`'s command, trying again a few times while the program is "text file
/// busy": a script written just before it runs can still be open for writing in a child that
/// another thread of this process forked at that moment (until that child execs), which makes
/// exec fail with ETXTBSY for a few milliseconds.
async fn spawn(invocation: &Invocation, token: &str) -> io::Result<Child> {
    const TRIES: u32 = 5;
    let mut tries = 0;
    loop {
        match invocation.command(token).spawn() {
            Err(e) if is_text_file_busy(&e) && tries + 1 < TRIES => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(10 << tries)).await;
            }
            other => return other,
        }
    }
}

/// Whether `e` is ETXTBSY (Linux and the BSDs: 26).
fn is_text_file_busy(e: &io::Error) -> bool {
    cfg!(unix) && e.raw_os_error() == Some(26)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endings_read_well() {
        assert_eq!(Ending::Exited(3).to_string(), "exit code 3");
        assert_eq!(
            Ending::TimedOut(Duration::from_millis(500)).to_string(),
            "timed out after 500 ms"
        );
        assert_eq!(
            Ending::TimedOut(Duration::from_secs(90)).to_string(),
            "timed out after 90 s"
        );
        assert_eq!(Ending::Canceled.to_string(), "canceled");
        #[cfg(unix)]
        assert_eq!(
            Ending::Signaled(9).to_string(),
            "killed by signal 9 (SIGKILL)"
        );
    }

    #[test]
    fn failures_carry_reason_code_and_stderr() {
        let outcome = Outcome {
            ending: Ending::Exited(2),
            elapsed: Duration::ZERO,
            stderr_tail: vec!["a".into(), "b".into()],
            output_abandoned: false,
            stdout: None,
        };
        let f = outcome.failure("make").expect("a failure");
        assert_eq!(
            f.message,
            "`make`: exit code 2\nlast lines of stderr:\n  a\n  b"
        );
        assert_eq!(f.exit_code, Some(2));
        assert_eq!(f.reason, FailureReason::PhaseFailed);

        let ok = Outcome {
            ending: Ending::Exited(0),
            ..outcome.clone()
        };
        assert!(ok.success() && ok.failure("x").is_none());
        let t = Outcome {
            ending: Ending::TimedOut(Duration::from_millis(5)),
            stderr_tail: vec![],
            ..outcome.clone()
        };
        let f = t.failure("x").expect("a failure");
        assert_eq!((f.reason, f.exit_code), (FailureReason::Timeout, None));
        assert_eq!(f.message, "`x`: timed out after 5 ms");
        let c = Outcome {
            ending: Ending::Canceled,
            ..outcome
        };
        assert_eq!(
            c.failure("x").map(|f| f.reason),
            Some(FailureReason::Canceled)
        );
    }
}
