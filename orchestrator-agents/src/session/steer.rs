//! The steering inbox of a working directory: `<dir>/.orchestrator/agent/steer/`.
//!
//! While an agent runs there (a session's turn, or a plan job's agent phase), the runner
//! holds a `running` marker with its pid and watches the folder; `steer` drops a message
//! file in it, and the runner interrupts the CLI and resumes its session with the message
//! first. Files, not a socket: the steering process may be another one (`orchestrator
//! session steer`), and nothing is lost if the runner dies in between.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Error;

/// How often a running turn looks for steering messages.
const POLL: Duration = Duration::from_millis(100);

/// The steering inbox of one working directory.
#[derive(Debug, Clone)]
pub struct SteerInbox {
    dir: PathBuf,
}

/// The `running` marker of an inbox: removed when dropped.
#[derive(Debug)]
pub(crate) struct Running {
    marker: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.marker);
    }
}

impl SteerInbox {
    /// The inbox of the agent working in `workdir`.
    ///
    /// ```
    /// let inbox = orchestrator_agents::session::SteerInbox::of("/wt");
    /// assert_eq!(inbox.dir(), std::path::Path::new("/wt/.orchestrator/agent/steer"));
    /// ```
    pub fn of(workdir: impl AsRef<Path>) -> Self {
        SteerInbox {
            dir: workdir
                .as_ref()
                .join(".orchestrator")
                .join("agent")
                .join("steer"),
        }
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn store_err(&self, source: io::Error) -> Error {
        Error::SessionStore {
            path: self.dir.clone(),
            source,
        }
    }

    /// The pid of the process running an agent here, if one is (its marker exists and the
    /// process is alive).
    pub fn runner_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.dir.join("running")).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        alive(pid).then_some(pid)
    }

    /// Hands `message` to the agent running here; [`Error::NotRunning`] (naming `who`) when
    /// no agent runs.
    pub fn post(&self, who: &str, message: &str) -> Result<(), Error> {
        if self.runner_pid().is_none() {
            return Err(Error::NotRunning { id: who.to_owned() });
        }
        let name = format!("{:032}-{}", stamp(), std::process::id());
        let tmp = self.dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, message).map_err(|e| self.store_err(e))?;
        std::fs::rename(&tmp, self.dir.join(format!("{name}.msg"))).map_err(|e| self.store_err(e))
    }

    /// Marks an agent as running here (this process), dropping messages left from an
    /// earlier run.
    pub(crate) fn start(&self) -> Result<Running, Error> {
        std::fs::create_dir_all(&self.dir).map_err(|e| self.store_err(e))?;
        let _ = self.take();
        let marker = self.dir.join("running");
        std::fs::write(&marker, std::process::id().to_string()).map_err(|e| self.store_err(e))?;
        Ok(Running { marker })
    }

    /// The messages waiting, oldest first; they are removed.
    pub(crate) fn take(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "msg"))
            .collect();
        files.sort();
        files
            .into_iter()
            .filter_map(|file| {
                let text = std::fs::read_to_string(&file).ok();
                let _ = std::fs::remove_file(&file);
                text
            })
            .collect()
    }

    /// Waits for messages; never returns when none come.
    pub(crate) async fn next(&self) -> Vec<String> {
        loop {
            let messages = self.take();
            if !messages.is_empty() {
                return messages;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Nanoseconds since the Unix epoch (message names that sort by time).
pub(crate) fn stamp() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Whether process `pid` exists.
#[cfg(unix)]
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

#[cfg(not(unix))]
fn alive(_pid: u32) -> bool {
    true
}

/// The text a resumed session gets for steering `messages`.
pub(crate) fn steering_prompt(messages: &[String]) -> String {
    let joined = messages.join("\n\n");
    format!(
        "The user interrupted you with a message while you were working:\n\n{joined}\n\n\
         Take it into account and carry on with the task from where you stopped; the files \
         are as you left them."
    )
}
