//! Helpers of the CLI's tests: the built `orchestrator` binary run on a temporary repository,
//! and `orchestrator mcp` spoken to line by line. Every command gets its own HOME and git
//! identity, so no global configuration leaks in. The repository, git, process and plan JSON
//! helpers are shared: `orchestrator_testkit::fixtures`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub mod database;

use orchestrator_testkit::fixtures::{copy_repo, isolate, wait_child, Run, TempRepo};
use serde_json::Value;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_orchestrator");

/// A temporary repository on `main` with one commit, plus a scratch folder outside it, that
/// the orchestrator commands work on. Derefs to the shared [`TempRepo`] (folders, files, git).
pub struct Repo(TempRepo);

impl Deref for Repo {
    type Target = TempRepo;

    fn deref(&self) -> &TempRepo {
        &self.0
    }
}

/// Isolates an orchestrator command: git as in the fixtures, HOME the empty `home`, no stdin.
fn hermetic(cmd: &mut Command, home: &Path) {
    isolate(cmd)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .stdin(Stdio::null());
}

impl Repo {
    /// A repository holding `files` in one commit on `main`.
    pub fn with_files(files: &[(&str, &str)]) -> Repo {
        Repo(TempRepo::with_files(files))
    }

    /// A repository with a README and `shared.txt`.
    pub fn new() -> Repo {
        Repo::with_files(&[
            ("README.md", "hello\n"),
            ("shared.txt", "one\ntwo\nthree\n"),
        ])
    }

    /// The orchestrator command with `args`, working on this repository.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args).arg("--repo").arg(&self.dir);
        hermetic(&mut cmd, &self.home);
        cmd
    }

    /// The built `orchestrator mcp` serving this repository on stdio, with an rmcp client
    /// connected to it.
    pub async fn mcp(&self) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        use rmcp::ServiceExt;
        let command = tokio::process::Command::from(self.command(&["mcp"]));
        let transport =
            rmcp::transport::TokioChildProcess::new(command).expect("spawn orchestrator mcp");
        ().serve(transport).await.expect("client connects")
    }

    /// Runs the orchestrator to its end.
    pub fn run(&self, args: &[&str]) -> Run {
        let out = self.command(args).output().expect("run orchestrator");
        Run::from(out)
    }

    /// Starts the orchestrator in the background.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn orchestrator")
    }

    /// `status --json` of a plan (or the latest).
    pub fn status(&self, plan: Option<&str>) -> Value {
        let mut args = vec!["status", "--json"];
        args.extend(plan);
        let r = self.run(&args);
        assert_eq!(r.code, 0, "status failed: {}", r.stderr);
        r.json()
    }

    /// Waits (up to 30 s) until `status --json` of the latest plan satisfies `ok`.
    pub fn wait_for(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        self.wait_for_within(what, Duration::from_secs(30), ok)
    }

    /// Waits until `status --json` of the latest plan satisfies `ok`, up to `within`; panics,
    /// naming `what`, when it does not in time.
    pub fn wait_for_within(
        &self,
        what: &str,
        within: Duration,
        ok: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = Instant::now();
        loop {
            let r = self.run(&["status", "--json"]);
            if r.code == 0 {
                let doc = r.json();
                if ok(&doc) {
                    return doc;
                }
                assert!(
                    start.elapsed() < within,
                    "timed out waiting for {what}: {doc:#}"
                );
            } else {
                assert!(
                    start.elapsed() < within,
                    "timed out waiting for {what}: {}",
                    r.stderr
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The id of the most recent plan, if one was stored.
    pub fn latest_plan(&self) -> Option<String> {
        let list = self.run(&["list", "--json"]);
        list.expect_code(0);
        list.json()["plans"][0]["planId"]
            .as_str()
            .map(str::to_owned)
    }

    /// The plan file `gated.json`: `deploy` waits for approval (`approval: before`), `after`
    /// depends on it, `free` runs meanwhile; each writes its own file.
    pub fn gated_plan(&self) -> PathBuf {
        self.plan(
            "gated.json",
            &serde_json::json!({"name": "gated", "jobs": [
                {"producerId": "deploy", "task": "Deploy", "work": "echo d > deploy.txt",
                 "dependencies": [], "approval": "before"},
                orchestrator_testkit::fixtures::job("after", "echo a > after.txt", &["deploy"]),
                orchestrator_testkit::fixtures::job("free", "echo f > free.txt", &[]),
            ]}),
        )
    }

    /// The tree of branch `target`'s tip.
    pub fn tree_of(&self, target: &str) -> String {
        self.git(&["rev-parse", &format!("{target}^{{tree}}")])
            .trim()
            .to_owned()
    }

    /// Asserts what every ended run must leave, `label` naming the run: no worktrees (none
    /// registered, no folder in `.worktrees`), `git fsck --full` clean and the checkout
    /// untouched.
    pub fn assert_clean(&self, label: &str) {
        assert!(
            self.extra_worktrees().is_empty(),
            "{label}: worktrees left: {:?}",
            self.extra_worktrees()
        );
        let leftovers: Vec<_> = std::fs::read_dir(self.dir.join(".worktrees"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            leftovers.is_empty(),
            "{label}: folders left in .worktrees: {leftovers:?}"
        );
        let fsck = self.git_output(&["fsck", "--full", "--no-dangling"]);
        assert!(
            fsck.status.success() && fsck.stdout.is_empty(),
            "{label}: git fsck: {}{}",
            String::from_utf8_lossy(&fsck.stdout),
            String::from_utf8_lossy(&fsck.stderr)
        );
        let status = self.git(&["status", "--porcelain"]);
        assert_eq!(status, "", "{label}: the checkout changed");
    }

    /// A copy of `template` (a repository folder) with scratch and home of its own.
    pub fn copy_of(template: &Path) -> Repo {
        let repo = Repo::new();
        std::fs::remove_dir_all(&repo.dir).expect("clear");
        copy_repo(template, &repo.dir);
        repo
    }
}

/// Runs `args` and kills it with SIGKILL after `after`, unless it ended first.
pub fn run_and_kill(repo: &Repo, args: &[&str], after: Duration) -> Option<Run> {
    let mut child = repo.spawn(args);
    let start = Instant::now();
    while start.elapsed() < after {
        if child.try_wait().expect("try_wait").is_some() {
            return Some(wait_child(child, Duration::from_secs(1)));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("kill -9");
    let _ = child.wait();
    None
}

/// Kill trials, `workers` at a time. Trial `n` gets `moments[n]`, drawn up front from the
/// test's seed, so a seed replays trial `n`'s kill whatever the threads do; it says whether
/// its kill landed mid-run and the run was resumed. A kill before the plan was stored or after
/// the run ended tests no resume, and how many do depends on how fast this machine runs the
/// trials against the reference run (the first, cold, run of the binary); so when fewer than
/// half of the first `trials` were resumed, more trials run, up to `moments.len()`, until half
/// as many are. Returns the trials run and those resumed.
pub fn kill_trials<M: Sync>(
    moments: &[M],
    trials: usize,
    workers: usize,
    trial: impl Fn(usize, &M) -> bool + Sync,
) -> (usize, usize) {
    let (next, ran, resumed) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    // A failed trial stops the other worker too, instead of it running out every moment.
    let failed = AtomicBool::new(false);
    struct OnPanic<'a>(&'a AtomicBool);
    impl Drop for OnPanic<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0.store(true, Ordering::SeqCst);
            }
        }
    }
    let worker = || loop {
        let n = next.fetch_add(1, Ordering::SeqCst);
        let enough = n >= trials && resumed.load(Ordering::SeqCst) >= trials / 2;
        if enough || n >= moments.len() || failed.load(Ordering::SeqCst) {
            break;
        }
        let _guard = OnPanic(&failed);
        ran.fetch_add(1, Ordering::SeqCst);
        if trial(n, &moments[n]) {
            resumed.fetch_add(1, Ordering::SeqCst);
        }
    };
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..workers).map(|_| s.spawn(worker)).collect();
        for w in workers {
            if let Err(panic) = w.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    (ran.into_inner(), resumed.into_inner())
}

/// The server, spoken to line by line.
pub struct RawMcp {
    /// The server process.
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl RawMcp {
    /// Starts `orchestrator mcp` on the repository.
    pub fn start(repo: &Repo) -> RawMcp {
        let mut child = repo
            .command(&["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn orchestrator mcp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        RawMcp {
            child,
            stdin,
            lines,
        }
    }

    /// Writes one line.
    pub fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.write_all(b"\n").expect("write newline");
        stdin.flush().expect("flush");
    }

    /// The next line the server writes, as text and as JSON.
    pub fn answer(&self, what: &str) -> (String, Value) {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no answer to {what}"));
        let doc = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("answer to {what} is not JSON ({e}): {line}"));
        (line, doc)
    }

    /// The MCP handshake: `initialize` (id 1) and the `initialized` notification.
    pub fn initialize(&mut self) {
        let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}});
        let (_, doc) = self.ask("initialize", init.to_string().as_bytes());
        assert_eq!(doc["id"], 1, "{doc}");
        self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    /// Sends a request line and returns its answer.
    pub fn ask(&mut self, what: &str, bytes: &[u8]) -> (String, Value) {
        self.send(bytes);
        self.answer(what)
    }
}

impl Drop for RawMcp {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `tools/call` request line.
pub fn tool_call(id: u64, tool: &str, arguments: Value) -> Vec<u8> {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
    .to_string()
    .into_bytes()
}

/// Writes a stand-in `claude` into `bin` that prints Claude Code's stream-json init and result
/// lines, its reply chosen by the job it is told it is: `cases` is the body of a shell `case
/// "$step" in ... esac` over the job's last name segment, with `$id` (the producerId) and
/// `$round` (its second segment) set; each case sets `reply` (JSON-escaped, `\n` for a line
/// break) and may write files in the current directory (the job's worktree).
#[cfg(unix)]
pub fn stand_in_claude(bin: &Path, cases: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin).expect("mkdir");
    let script = format!(
        r#"#!/bin/sh
id=$(printf '%s' "$*" | sed -n 's/.*They are job `\([^`]*\)`.*/\1/p')
round=$(echo "$id" | cut -d/ -f2)
step=${{id##*/}}
reply=
case "$step" in
{cases}
esac
echo '{{"type":"system","subtype":"init","cwd":"'"$PWD"'","session_id":"sess-1","model":"claude-test","tools":["Write"]}}'
printf '{{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"%s","session_id":"sess-1","total_cost_usd":0.001,"duration_ms":5,"usage":{{"input_tokens":10,"output_tokens":5}}}}\n' "$reply"
"#
    );
    let path = bin.join("claude");
    std::fs::write(&path, script).expect("write the stand-in");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A stand-in `claude` (see [`stand_in_claude`]) for the medium pipeline's stages — the
/// architect, a coder writing `greet.txt` and a reviewer saying ship — each replying with its
/// role's signed contract; `more_cases` answers any other job or prompt.
#[cfg(unix)]
pub fn stand_in_pipeline(bin: &Path, more_cases: &str) {
    let contract = |sig: &str, extra: &str| {
        format!(
            "done\\n\\n### Orchestrator Contract\\n- Status: success\\n- Evidence: e\\n- Next Steps: n\\n{extra}- Agent Signature: {sig}\\n"
        )
    };
    let cases = format!(
        "  architect) reply='{}' ;;\n  coder) echo hello > greet.txt; reply='{}' ;;\n  review) reply='{}' ;;\n{more_cases}",
        contract("CEDAR_COMPASS", ""),
        contract("NOVA_CORE", ""),
        contract("SILVER_KITE", "- Verdict: ship\\n"),
    );
    stand_in_claude(bin, &cases);
}

impl Repo {
    /// The orchestrator command with `args`, the agent CLIs of `bin` first on PATH.
    pub fn command_with_agents(&self, bin: &Path, args: &[&str]) -> Command {
        let mut cmd = self.command(args);
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", bin.display()));
        cmd
    }
}
