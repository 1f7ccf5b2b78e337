//! Test helpers: temporary repositories made with the `git` CLI, and the built `orchestrator`
//! binary run on them. Every command gets its own HOME and git identity, so no global
//! configuration leaks in.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_orchestrator");

/// A temporary repository on `main` with one commit, plus a scratch folder outside it.
pub struct Repo {
    _tmp: tempfile::TempDir,
    /// The repository.
    pub dir: PathBuf,
    /// HOME of every command (empty: no global git configuration).
    pub home: PathBuf,
    /// A folder outside the repository (plan files, counters, markers).
    pub scratch: PathBuf,
}

fn hermetic(cmd: &mut Command, home: &Path) {
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Test User")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test User")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null());
}

impl Repo {
    /// A repository holding `files` in one commit on `main`.
    pub fn with_files(files: &[(&str, &str)]) -> Repo {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("repo");
        let home = tmp.path().join("home");
        let scratch = tmp.path().join("scratch");
        for d in [&dir, &home, &scratch] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let repo = Repo {
            _tmp: tmp,
            dir,
            home,
            scratch,
        };
        repo.git(&["init", "-q", "-b", "main"]);
        for (name, text) in files {
            repo.write(name, text);
        }
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "initial"]);
        repo
    }

    /// A repository with a README and `shared.txt`.
    pub fn new() -> Repo {
        Repo::with_files(&[
            ("README.md", "hello\n"),
            ("shared.txt", "one\ntwo\nthree\n"),
        ])
    }

    /// Writes a file of the checkout.
    pub fn write(&self, name: &str, text: &str) {
        let path = self.dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, text).expect("write");
    }

    /// Reads a file of the checkout.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).expect("read")
    }

    /// Runs git in the repository; panics unless it succeeds; returns stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let out = self.git_output(args);
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs git in the repository.
    pub fn git_output(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(&self.dir).args(args);
        hermetic(&mut cmd, &self.home);
        cmd.output().expect("run git")
    }

    /// A plan file (outside the repository) with this JSON text.
    pub fn plan(&self, name: &str, json: &Value) -> PathBuf {
        let path = self.scratch.join(name);
        std::fs::write(&path, serde_json::to_string_pretty(json).expect("json")).expect("write");
        path
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

    /// Waits until `status --json` of the latest plan satisfies `ok`.
    pub fn wait_for(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let r = self.run(&["status", "--json"]);
            if r.code == 0 {
                let doc = r.json();
                if ok(&doc) {
                    return doc;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "timed out waiting for {what}: {doc:#}"
                );
            } else {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "timed out waiting for {what}: {}",
                    r.stderr
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `git worktree list --porcelain` entries other than the main checkout.
    pub fn extra_worktrees(&self) -> Vec<String> {
        self.git(&["worktree", "list", "--porcelain"])
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .filter(|p| Path::new(p) != self.dir.canonicalize().expect("canonical"))
            .map(str::to_owned)
            .collect()
    }

    /// Local branches.
    pub fn branches(&self) -> Vec<String> {
        self.git(&["branch", "--format=%(refname:short)"])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Files of a revision, sorted.
    pub fn files_at(&self, rev: &str) -> Vec<String> {
        self.git(&["ls-tree", "-r", "--name-only", rev])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// A file of a revision.
    pub fn show(&self, rev: &str, file: &str) -> String {
        self.git(&["show", &format!("{rev}:{file}")])
    }

    /// What the user sees of their checkout: HEAD, branch, status and file contents.
    pub fn checkout_state(&self) -> (String, String, String, Vec<(String, String)>) {
        let head = self.git(&["rev-parse", "HEAD"]);
        let branch = self.git(&["symbolic-ref", "--short", "HEAD"]);
        let status = self.git(&["status", "--porcelain"]);
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.dir).expect("read dir") {
            let entry = entry.expect("entry");
            if entry.path().is_file() {
                files.push((
                    entry.file_name().to_string_lossy().into_owned(),
                    std::fs::read_to_string(entry.path()).unwrap_or_default(),
                ));
            }
        }
        files.sort();
        (head, branch, status, files)
    }
}

/// The outcome of one orchestrator command.
#[derive(Debug)]
pub struct Run {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Stdout as the JSON document it must be (nothing else on stdout).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts the exit code, showing the output when it differs.
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code, code,
            "unexpected exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// A job of a plan.
pub fn job(id: &str, work: &str, deps: &[&str]) -> Value {
    serde_json::json!({
        "producerId": id,
        "task": format!("task {id}"),
        "work": work,
        "dependencies": deps,
    })
}

/// A job's entry in a status document.
pub fn job_doc<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["producerId"] == id)
        .unwrap_or_else(|| panic!("no job {id} in {doc:#}"))
}

/// The status of each job, in plan order.
pub fn job_statuses(doc: &Value) -> Vec<(String, String)> {
    doc["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| {
            (
                j["producerId"].as_str().expect("id").to_owned(),
                j["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect()
}

/// Waits for a child, at most `limit`, collecting its output meanwhile.
pub fn wait_child(mut child: Child, limit: Duration) -> Run {
    use std::io::Read;
    let pid = child.id();
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait().expect("try_wait") {
            Some(status) => break status,
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "process {pid} did not exit within {limit:?}\nstderr:\n{}",
                    err.join().unwrap_or_default()
                );
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Sends SIGTERM to a process.
pub fn terminate(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// A small deterministic generator (no dependency needed for test randomness): crash trials
/// draw their moments from a printed seed, so a seed replays a run.
pub struct Lcg(pub u64);

impl Lcg {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Copies a folder with everything in it (`cp -a`).
pub fn copy_repo(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp");
    assert!(status.success());
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

/// The seed of a crash trial: `CRASH_SEED` when set (to replay a run), else the clock. It is
/// printed, so a failing run can be replayed.
pub fn crash_seed() -> u64 {
    let seed = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("CRASH_SEED={seed}");
    seed
}

impl Repo {
    /// The id of the most recent plan, if one was stored.
    pub fn latest_plan(&self) -> Option<String> {
        let list = self.run(&["list", "--json"]);
        list.expect_code(0);
        list.json()["plans"][0]["planId"]
            .as_str()
            .map(str::to_owned)
    }

    /// A copy of `template` (a repository folder) with scratch and home of its own.
    pub fn copy_of(template: &Path) -> Repo {
        let repo = Repo::new();
        std::fs::remove_dir_all(&repo.dir).expect("clear");
        copy_repo(template, &repo.dir);
        repo
    }
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
