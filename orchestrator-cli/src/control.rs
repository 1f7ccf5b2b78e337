//! Requests to the process that runs a plan, from another `orchestrator` process.
//!
//! A plan is run by one process at a time (it holds the plan's lease). `pause`, `cancel`,
//! `approve`, `reject` and `answer` from another process drop a small request file in `<store>/control/<planId>/<uuid>.json`
//! (written to a temporary name, then renamed, so it is never read half-written). The running
//! process looks there every [`POLL`], applies the request, deletes it, and answers with
//! `<uuid>.reply.json` once the effect is stored.

use std::path::{Path, PathBuf};
use std::time::Duration;

use orchestrator_core::ids::now_millis;
use orchestrator_core::{Orchestrator, PlanId};
use serde::{Deserialize, Serialize};

/// How often a running process looks for requests.
pub const POLL: Duration = Duration::from_millis(200);

/// What another process asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Pause the plan (running jobs finish, nothing new starts).
    Pause,
    /// Cancel the plan.
    Cancel,
    /// Approve a job waiting for approval (SPEC §12).
    Approve {
        /// The job, as the user named it.
        job: String,
    },
    /// Reject a job waiting for approval.
    Reject {
        /// The job, as the user named it.
        job: String,
        /// Why.
        reason: String,
    },
    /// Answer a job waiting for input.
    Answer {
        /// The job, as the user named it.
        job: String,
        /// The answer.
        answer: String,
    },
}

impl Action {
    /// The command's name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Cancel => "cancel",
            Action::Approve { .. } => "approve",
            Action::Reject { .. } => "reject",
            Action::Answer { .. } => "answer",
        }
    }

    /// Whether it is about one waiting job (and leaves the plan's pause state alone).
    pub fn is_about_a_job(&self) -> bool {
        matches!(
            self,
            Action::Approve { .. } | Action::Reject { .. } | Action::Answer { .. }
        )
    }

    /// Does it, on a plan `o` holds.
    pub async fn apply(&self, o: &Orchestrator, id: &PlanId) -> orchestrator_core::Result<()> {
        match self {
            Action::Pause => o.pause(id, false).await,
            Action::Cancel => o.cancel(id).await,
            Action::Approve { job } => o.approve(id, job).await,
            Action::Reject { job, reason } => o.reject(id, job, reason).await,
            Action::Answer { job, answer } => o.answer(id, job, answer).await,
        }
    }
}

/// A request file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// Unique id, also the file name.
    pub id: String,
    /// What to do.
    pub action: Action,
    /// When it was written (ms since the epoch).
    pub created_at: u64,
    /// Who asked.
    pub pid: u32,
}

/// The answer to a request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reply {
    /// Whether the action was applied.
    pub ok: bool,
    /// Why not, or what happened.
    pub message: String,
    /// The error's kind ([`orchestrator_core::Error::kind`]) when it was not applied, so that
    /// the asking process exits as if it had tried itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

impl Reply {
    /// The error of a reply that was not applied, with the exit code of that kind of error.
    pub fn error(&self, owner: &str) -> crate::error::CliError {
        let message = format!("{owner}: {}", self.message);
        match self.kind.as_deref() {
            Some("not_waiting" | "job_not_found" | "ambiguous") => {
                crate::error::CliError::invalid(message)
            }
            _ => crate::error::CliError::other(message),
        }
    }
}

/// The control folder of a plan.
pub fn control_dir(store_root: &Path, plan: &PlanId) -> PathBuf {
    store_root.join("control").join(plan.as_str())
}

fn request_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.json"))
}

fn reply_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.reply.json"))
}

/// Writes `bytes` to `path` atomically (temporary file in the same folder, then rename).
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The requesting side: one request sent, waiting for its reply.
#[derive(Debug)]
pub struct Sent {
    dir: PathBuf,
    id: String,
}

impl Sent {
    /// Sends `action` to whoever runs the plan.
    pub fn send(store_root: &Path, plan: &PlanId, action: Action) -> std::io::Result<Sent> {
        let dir = control_dir(store_root, plan);
        let id = uuid::Uuid::new_v4().to_string();
        let request = Request {
            id: id.clone(),
            action,
            created_at: now_millis(),
            pid: std::process::id(),
        };
        let bytes = serde_json::to_vec_pretty(&request).map_err(std::io::Error::other)?;
        write_atomic(&request_path(&dir, &id), &bytes)?;
        Ok(Sent { dir, id })
    }

    /// The reply, once there is one (it is then removed).
    pub fn reply(&self) -> Option<Reply> {
        let path = reply_path(&self.dir, &self.id);
        let text = std::fs::read_to_string(&path).ok()?;
        let reply = serde_json::from_str(&text).ok()?;
        let _ = std::fs::remove_file(&path);
        Some(reply)
    }

    /// Whether the request is still waiting to be picked up.
    #[cfg(test)]
    pub fn pending(&self) -> bool {
        request_path(&self.dir, &self.id).exists()
    }

    /// Takes the request back (and any late reply).
    pub fn withdraw(self) {
        let _ = std::fs::remove_file(request_path(&self.dir, &self.id));
        let _ = std::fs::remove_file(reply_path(&self.dir, &self.id));
    }
}

/// The running side: requests for one plan.
#[derive(Debug)]
pub struct Inbox {
    dir: PathBuf,
    since: u64,
}

impl Inbox {
    /// Requests for `plan` written at or after `since` (ms): older ones were meant for a process
    /// that ran the plan before this one, and are dropped.
    pub fn new(store_root: &Path, plan: &PlanId, since: u64) -> Inbox {
        Inbox {
            dir: control_dir(store_root, plan),
            since,
        }
    }

    /// The requests waiting, oldest first; each is removed from the folder.
    pub fn take(&self) -> Vec<Request> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !name.ends_with(".json") || name.ends_with(".reply.json") {
                continue;
            }
            let path = entry.path();
            let parsed = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<Request>(&t).ok());
            let _ = std::fs::remove_file(&path);
            match parsed {
                Some(r) if r.created_at >= self.since => out.push(r),
                _ => {}
            }
        }
        out.sort_by_key(|r| r.created_at);
        out
    }

    /// Answers a request.
    pub fn reply(&self, request: &Request, reply: &Reply) {
        if let Ok(bytes) = serde_json::to_vec_pretty(reply) {
            let _ = write_atomic(&reply_path(&self.dir, &request.id), &bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_travel_and_stale_ones_are_dropped() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let plan = PlanId::from("p1");
        let old = Sent::send(tmp.path(), &plan, Action::Pause).expect("send");
        std::thread::sleep(Duration::from_millis(5));
        let inbox = Inbox::new(tmp.path(), &plan, now_millis());
        let sent = Sent::send(tmp.path(), &plan, Action::Cancel).expect("send");
        assert!(sent.pending());
        let got = inbox.take();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].action, Action::Cancel);
        assert!(!sent.pending() && !old.pending());
        assert!(sent.reply().is_none());
        inbox.reply(
            &got[0],
            &Reply {
                ok: true,
                message: "canceled".into(),
                kind: None,
            },
        );
        let reply = sent.reply().expect("reply");
        assert!(reply.ok);
        assert!(sent.reply().is_none(), "a reply is read once");
        assert!(inbox.take().is_empty());
    }
}
