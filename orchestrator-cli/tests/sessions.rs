//! `orchestrator session ...` (SPEC §14) through the built binary, with a stand-in `claude`
//! first on PATH (`ORCHESTRATOR_AGENT=claude`) that prints Claude Code's stream-json lines,
//! keeps its conversation in its `HOME` (the session's CLI state folder, copied at every
//! checkpoint), honours `-p PROMPT` and `--resume ID`, and does what the prompt (or a plan
//! job's `instructions.md`) says: `write FILE TEXT`, `sleep N`, `fail`, several separated by
//! `;`. Its reply is the whole conversation so far, prompts joined by `|`.

#![cfg(unix)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Repo;
use orchestrator_testkit::fixtures::{alive, git, kill, wait_child, Run};
use serde_json::{json, Value};

/// The stand-in Claude Code.
const FAKE_CLAUDE: &str = r#"#!/usr/bin/env bash
# Like Claude Code: `-p PROMPT`, or with `--input-format stream-json` the prompt as a user
# message on stdin, then more messages while it works (an `interrupt` control request cuts
# the current step short and reports a result; a user message is a new step), until stdin
# closes.
set -f
prompt=""; resume=""; live=""
while [ $# -gt 0 ]; do
  case "$1" in
    -p) shift; if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then prompt="$1"; shift; fi ;;
    --input-format) live=1; shift 2 ;;
    --resume) resume="$2"; shift 2 ;;
    --model|--effort|--max-turns|--add-dir|--output-format|--permission-prompt-tool) shift 2 ;;
    *) shift ;;
  esac
done
[ -n "$FAKE_CLAUDE_PIDS" ] && echo $$ >> "$FAKE_CLAUDE_PIDS"
text_of() { printf '%s' "$1" | sed -n 's/.*"text":"\([^"]*\)".*/\1/p'; }
if [ -n "$live" ]; then IFS= read -r first; prompt=$(text_of "$first"); fi
conv="$HOME/conversation"
if [ -n "$resume" ]; then
  if [ "$(cat "$HOME/session" 2>/dev/null)" != "$resume" ]; then
    echo "No conversation found with session ID: $resume" >&2; exit 1
  fi
  session="$resume"
else
  session="fake-$$"; echo "$session" > "$HOME/session"; : > "$conv"
fi
echo '{"type":"system","subtype":"init","session_id":"'"$session"'","model":"fake-model"}'
# Sleeps N seconds; in live mode an interrupt on stdin ends it early.
nap() {
  sleep "$1" & local sp=$!
  while [ -n "$live" ] && kill -0 $sp 2>/dev/null; do
    if IFS= read -r -t 0.2 line; then
      case "$line" in *'"interrupt"'*) kill $sp; interrupted=1; return ;; esac
    elif [ $? -le 128 ]; then break; fi
  done
  wait $sp 2>/dev/null
}
step() {
  local text="$1"
  local file=$(printf '%s' "$text" | grep -o '/[^ ]*instructions\.md' | head -n 1)
  if [ -n "$file" ] && [ -f "$file" ]; then text=$(cat "$file"); fi
  printf '%s' "$text" | tr '\n\t' '  ' >> "$conv"; echo >> "$conv"
  echo '{"type":"assistant","message":{"content":[{"type":"text","text":"working on it"}]},"session_id":"'"$session"'"}'
  local cmds=$(printf '%s\n' "$text" | tr ';' '\n' | sed 's/^ *//' | grep -E '^(write|ask|sleep|fail)( |$)')
  local c
  # The commands on fd 3: stdin stays the CLI's input.
  while IFS= read -r -u 3 c; do
    [ -z "$c" ] && continue
    set -- $c
    case "$1" in
      write) printf '%s\n' "$3" > "$2" ;;
      ask)
        echo '{"type":"control_request","request_id":"req-1","request":{"subtype":"can_use_tool","tool_name":"Write","input":{"file_path":"'"$PWD/$2"'","content":"x"}}}'
        IFS= read -r answer
        case "$answer" in *'"behavior":"allow"'*) printf 'x\n' > "$2" ;; esac ;;
      sleep) nap "$2"; [ -n "$interrupted" ] && return ;;
      fail) echo "failing as asked" >&2; exit 1 ;;
    esac
  done 3<<< "$cmds"
}
result() {
  local history=$(tr '\n' '|' < "$conv" | sed 's/\\/\\\\/g; s/"/\\"/g')
  echo '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"'"$history"'","session_id":"'"$session"'","usage":{"input_tokens":10,"output_tokens":5}}'
}
interrupted=""
step "$prompt"; result
if [ -n "$live" ]; then
  while IFS= read -r line; do
    case "$line" in *'"type":"user"'*) interrupted=""; step "$(text_of "$line")"; result ;; esac
  done
fi
"#;

/// A repository, the fake `claude` and the file where each of its runs leaves its pid.
struct Fixture {
    repo: Repo,
    bin: PathBuf,
    pids: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let repo = Repo::new();
        let bin = repo.scratch.join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir bin");
        let claude = bin.join("claude");
        std::fs::write(&claude, FAKE_CLAUDE).expect("write fake claude");
        std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let pids = repo.scratch.join("claude.pids");
        Fixture { repo, bin, pids }
    }

    /// `orchestrator ARGS --repo REPO` with the fake `claude` as the default agent.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.repo.command(args);
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", self.bin.display()))
            .env("ORCHESTRATOR_AGENT", "claude")
            .env("FAKE_CLAUDE_PIDS", &self.pids);
        cmd
    }

    fn run(&self, args: &[&str]) -> Run {
        Run::from(self.command(args).output().expect("run orchestrator"))
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn orchestrator")
    }

    /// `session new --json`: the id and the worktree.
    fn new_session(&self) -> (String, PathBuf) {
        let run = self.run(&["session", "new", "--json"]);
        run.expect_code(0);
        let doc = run.json();
        (
            doc["sessionId"].as_str().expect("sessionId").to_owned(),
            PathBuf::from(doc["worktree"].as_str().expect("worktree")),
        )
    }

    /// `session send ID PROMPT --json`, which must succeed.
    fn send(&self, id: &str, prompt: &str) -> Value {
        let run = self.run(&["session", "send", id, prompt, "--json"]);
        run.expect_code(0);
        run.json()
    }

    /// `session list --json`.
    fn list(&self) -> Vec<Value> {
        let run = self.run(&["session", "list", "--json"]);
        run.expect_code(0);
        run.json().as_array().expect("an array").clone()
    }

    /// Waits (up to 30 s) until `session list --json` has an entry that satisfies `ok`.
    fn wait_listed(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let list = self.list();
            if let Some(entry) = list.iter().find(|e| ok(e)) {
                return entry.clone();
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "timed out waiting for {what}: {list:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills what is left of the fake CLI's runs (a turn whose `orchestrator` was killed
    /// leaves its agent behind): each run's process group, and the run itself.
    fn kill_agents(&self) {
        let text = std::fs::read_to_string(&self.pids).unwrap_or_default();
        for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            if alive(pid) {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}")])
                    .stderr(Stdio::null())
                    .status();
                kill(pid);
            }
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.kill_agents();
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .trim()
        .to_owned()
}

/// The keys of a JSON object, sorted.
fn keys(doc: &Value) -> Vec<String> {
    let mut keys: Vec<String> = doc
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {doc}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

#[test]
fn turns_resume_the_conversation_and_checkpoint_the_worktree() {
    let f = Fixture::new();
    let new = f.run(&["session", "new", "--json"]);
    new.expect_code(0);
    let doc = new.json();
    assert_eq!(keys(&doc), ["sessionId", "worktree"], "{doc}");
    let id = doc["sessionId"].as_str().expect("id").to_owned();
    let worktree = PathBuf::from(doc["worktree"].as_str().expect("worktree"));
    assert!(worktree.is_dir(), "the session has its worktree");
    let base = f.repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    assert_eq!(
        git(
            &f.repo.dir,
            &[
                "rev-parse",
                &format!("refs/orchestrator/sessions/{id}/turn-0")
            ]
        ),
        base,
        "turn-0 is the base"
    );

    let t1 = f.send(&id, "write a.txt one");
    assert_eq!(
        keys(&t1),
        ["checkpoint", "reply", "sessionId", "turn", "usage"],
        "{t1}"
    );
    assert_eq!(t1["sessionId"], id.as_str());
    assert_eq!(t1["turn"], 1);
    assert_eq!(t1["reply"], "write a.txt one|");
    assert_eq!(t1["usage"]["outputTokens"], 5, "{t1}");
    let checkpoint = t1["checkpoint"].as_str().expect("checkpoint");
    assert_eq!(
        git(
            &f.repo.dir,
            &[
                "rev-parse",
                &format!("refs/orchestrator/sessions/{id}/turn-1")
            ]
        ),
        checkpoint
    );
    assert_eq!(read(&worktree.join("a.txt")), "one");

    // Without --json: the reply alone on stdout, progress on stderr; a prefix of the id does.
    let t2 = f.run(&["session", "send", &id[..8], "write b.txt two"]);
    t2.expect_code(0);
    assert_eq!(
        t2.stdout, "write a.txt one|write b.txt two|\n",
        "the second turn resumed the first one's conversation"
    );
    assert!(t2.stderr.contains("turn 2 started"), "{}", t2.stderr);
    assert!(t2.stderr.contains("turn 2 succeeded"), "{}", t2.stderr);
    let ref2 = format!("refs/orchestrator/sessions/{id}/turn-2");
    assert_eq!(f.repo.show(&ref2, "a.txt").trim(), "one");
    assert_eq!(f.repo.show(&ref2, "b.txt").trim(), "two");
    assert_eq!(
        f.repo.git(&["rev-parse", "HEAD"]).trim(),
        base,
        "no branch moved"
    );
    assert_eq!(
        f.repo.git(&["status", "--porcelain"]).trim(),
        "",
        "the user's checkout is untouched"
    );

    // Without --json `new` prints the id alone.
    let plain = f.run(&["session", "new"]);
    plain.expect_code(0);
    assert_eq!(plain.stdout.lines().count(), 1, "{}", plain.stdout);
    assert!(plain.stdout.starts_with("s-"), "{}", plain.stdout);

    let log = f.run(&["session", "log", &id, "--json"]);
    log.expect_code(0);
    let log = log.json();
    assert_eq!(keys(&log), ["sessionId", "turns"], "{log}");
    let turns = log["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 2, "{log}");
    assert_eq!(turns[0]["prompt"], "write a.txt one");
    assert_eq!(turns[0]["status"], "succeeded");
    assert_eq!(turns[0]["checkpoint"], checkpoint);
    assert_eq!(turns[1]["reply"], "write a.txt one|write b.txt two|");
    let text = f.run(&["session", "log", &id]);
    text.expect_code(0);
    assert!(
        text.stdout.contains("write b.txt two") && text.stdout.contains("succeeded"),
        "{}",
        text.stdout
    );
}

#[test]
fn revert_goes_back_to_a_turn_files_and_conversation() {
    let f = Fixture::new();
    let (id, worktree) = f.new_session();
    f.send(&id, "write a.txt one");
    f.send(&id, "write a.txt two; write b.txt new");
    assert_eq!(read(&worktree.join("a.txt")), "two");

    let revert = f.run(&["session", "revert", &id, "1"]);
    revert.expect_code(0);
    assert_eq!(read(&worktree.join("a.txt")), "one");
    assert!(!worktree.join("b.txt").exists(), "turn 2's file is gone");
    assert_eq!(git(&worktree, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&worktree, &["rev-parse", "HEAD"]),
        git(
            &f.repo.dir,
            &[
                "rev-parse",
                &format!("refs/orchestrator/sessions/{id}/turn-1")
            ]
        )
    );

    let t = f.send(&id, "write c.txt three");
    assert_eq!(t["turn"], 2);
    assert_eq!(
        t["reply"], "write a.txt one|write c.txt three|",
        "the conversation went on from turn 1"
    );

    let bad = f.run(&["session", "revert", &id, "9"]);
    bad.expect_code(2);
    assert!(
        bad.stderr.contains("turn 9") && bad.stderr.contains("0, 1, 2"),
        "{}",
        bad.stderr
    );
}

#[test]
fn fork_starts_a_new_session_at_a_turn() {
    let f = Fixture::new();
    let (id, worktree) = f.new_session();
    f.send(&id, "write a.txt one");
    f.send(&id, "write a.txt two");

    let fork = f.run(&["session", "fork", &id, "1", "--json"]);
    fork.expect_code(0);
    let doc = fork.json();
    assert_eq!(keys(&doc), ["sessionId", "worktree"], "{doc}");
    let forked = doc["sessionId"].as_str().expect("id").to_owned();
    assert_ne!(forked, id);
    let forked_dir = PathBuf::from(doc["worktree"].as_str().expect("worktree"));
    assert_ne!(forked_dir, worktree);
    assert_eq!(read(&forked_dir.join("a.txt")), "one");
    assert_eq!(git(&forked_dir, &["status", "--porcelain"]), "");
    assert_eq!(read(&worktree.join("a.txt")), "two", "the original goes on");

    let t = f.send(&forked, "write b.txt fork");
    assert_eq!(t["turn"], 2);
    assert_eq!(t["reply"], "write a.txt one|write b.txt fork|");
    let t = f.send(&id, "write c.txt orig");
    assert_eq!(
        t["reply"],
        "write a.txt one|write a.txt two|write c.txt orig|"
    );

    // Without --json the new id alone on stdout.
    let plain = f.run(&["session", "fork", &id]);
    plain.expect_code(0);
    let third = plain.stdout.trim();
    assert!(third.starts_with("s-") && third != id && third != forked);
    let listed = f.list();
    assert_eq!(listed.len(), 3, "{listed:?}");
}

#[test]
fn wrong_sessions_and_turns_are_invalid_input() {
    let f = Fixture::new();
    let unknown = f.run(&["session", "send", "s-nope", "hello"]);
    unknown.expect_code(2);
    assert!(
        unknown.stderr.contains("unknown session `s-nope`"),
        "{}",
        unknown.stderr
    );

    let (id, _) = f.new_session();
    let steer = f.run(&["session", "steer", &id, "hurry"]);
    steer.expect_code(2);
    assert!(steer.stderr.contains("not running"), "{}", steer.stderr);

    let failed = f.run(&["session", "send", &id, "fail"]);
    failed.expect_code(1);
    assert!(
        failed.stderr.contains("back at its last checkpoint"),
        "{}",
        failed.stderr
    );

    let job = f.run(&["session", "log", "some-plan/some-job"]);
    job.expect_code(2);
    assert!(job.stderr.contains("only be steered"), "{}", job.stderr);

    let policy = f.run(&["session", "new", "--permissions", "everything"]);
    policy.expect_code(2);
    assert!(policy.stderr.contains("everything"), "{}", policy.stderr);
    let rules = f.run(&["session", "new", "--permissions", "{\"allow\": 3}"]);
    rules.expect_code(2);
    assert!(rules.stderr.contains("--permissions"), "{}", rules.stderr);
    let no_shell = f.run(&["session", "new", "--permissions", "no-shell"]);
    no_shell.expect_code(0);
    f.send(no_shell.stdout.trim(), "write ok.txt fine");
    let agent = f.run(&["session", "new", "--agent", "nobody"]);
    agent.expect_code(2);
    assert!(
        agent.stderr.contains("nobody") && agent.stderr.contains("claude"),
        "{}",
        agent.stderr
    );

    let close = f.run(&["session", "close", &id]);
    close.expect_code(0);
    let closed = f.run(&["session", "send", &id, "hello"]);
    closed.expect_code(2);
    assert!(closed.stderr.contains("closed"), "{}", closed.stderr);
    let listed = f.list();
    assert_eq!(listed[0]["status"], "closed", "{listed:?}");

    // A session without a worktree has no checkpoints to go back to.
    let run = f.run(&["session", "new", "--no-worktree"]);
    run.expect_code(0);
    let plain = run.stdout.trim().to_owned();
    f.send(&plain, "write here.txt in-place");
    assert_eq!(f.repo.read("here.txt").trim(), "in-place");
    let revert = f.run(&["session", "revert", &plain, "0"]);
    revert.expect_code(2);
    assert!(
        revert.stderr.contains("no checkpoints"),
        "{}",
        revert.stderr
    );
}

#[test]
fn close_merges_the_session_onto_a_branch() {
    let f = Fixture::new();
    let (id, worktree) = f.new_session();
    f.send(&id, "write a.txt merged");
    let close = f.run(&["session", "close", &id, "--merge", "from-session"]);
    close.expect_code(0);
    assert_eq!(f.repo.show("from-session", "a.txt").trim(), "merged");
    assert!(!worktree.exists(), "the worktree is removed");
}

#[test]
fn steering_interrupts_a_running_turn_and_resumes_it_with_the_message() {
    let f = Fixture::new();
    let (id, _) = f.new_session();
    let started = Instant::now();
    let send = f.spawn(&["session", "send", &id, "sleep 60"]);
    let entry = f.wait_listed("the turn to run", |e| {
        e["sessionId"] == id.as_str() && e["status"] == "running"
    });
    assert_eq!(entry["kind"], "session", "{entry}");
    // One turn at a time: a second `send` is refused, naming the process running the turn.
    let busy = f.run(&["session", "send", &id, "hello"]);
    busy.expect_code(2);
    assert!(
        busy.stderr.contains("running a turn") && busy.stderr.contains("pid"),
        "{}",
        busy.stderr
    );
    let steer = f.run(&["session", "steer", &id, "use tabs please"]);
    steer.expect_code(0);
    let run = wait_child(send, Duration::from_secs(30));
    run.expect_code(0);
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "the turn ended early"
    );
    assert!(run.stdout.contains("use tabs please"), "{}", run.stdout);
    assert!(
        run.stdout.starts_with("sleep 60|"),
        "the same conversation: {}",
        run.stdout
    );
    assert!(
        run.stderr.contains("steered: use tabs please"),
        "{}",
        run.stderr
    );
    let log = f.run(&["session", "log", &id, "--json"]);
    log.expect_code(0);
    let turn = &log.json()["turns"][0];
    assert_eq!(turn["status"], "succeeded", "{turn}");
    assert_eq!(turn["steered"], json!(["use tabs please"]), "{turn}");
}

#[test]
fn a_turn_killed_with_its_process_fails_and_the_next_one_starts_from_the_checkpoint() {
    let f = Fixture::new();
    let (id, worktree) = f.new_session();
    let t1 = f.send(&id, "write a.txt one");
    let mut send = f.spawn(&["session", "send", &id, "write dirty.txt x; sleep 60"]);
    f.wait_listed("the turn to run", |e| {
        e["sessionId"] == id.as_str() && e["status"] == "running"
    });
    let start = Instant::now();
    while !worktree.join("dirty.txt").exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "no dirty.txt");
        std::thread::sleep(Duration::from_millis(20));
    }
    send.kill().expect("kill -9");
    let _ = send.wait();
    f.kill_agents();
    f.wait_listed("the turn to be seen as not running", |e| {
        e["sessionId"] == id.as_str() && e["status"] == "open"
    });

    let t3 = f.send(&id, "write b.txt two");
    assert_eq!(t3["turn"], 3);
    assert_eq!(
        t3["reply"], "write a.txt one|write b.txt two|",
        "the conversation is back at turn 1"
    );
    assert!(
        !worktree.join("dirty.txt").exists(),
        "the killed turn's file is gone"
    );
    assert_eq!(read(&worktree.join("b.txt")), "two");
    assert_eq!(git(&worktree, &["status", "--porcelain"]), "");
    let turn3 = t3["checkpoint"].as_str().expect("checkpoint");
    assert_eq!(
        git(&worktree, &["rev-parse", "HEAD^"]),
        t1["checkpoint"].as_str().expect("checkpoint"),
        "turn 3 was committed on turn 1's checkpoint"
    );
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), turn3);

    let log = f.run(&["session", "log", &id, "--json"]);
    log.expect_code(0);
    let turns = log.json()["turns"].clone();
    let statuses: Vec<&str> = turns
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["status"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(statuses, ["succeeded", "failed", "succeeded"], "{turns}");
    assert!(turns[1].get("checkpoint").is_none(), "{turns}");
}

#[test]
fn a_running_plan_jobs_agent_is_listed_and_steered() {
    let f = Fixture::new();
    let (id, worktree) = f.new_session();
    f.send(&id, "write a.txt one");
    let plan = f.repo.plan(
        "plan.json",
        &json!({"name": "steered job", "jobs": [
            {"producerId": "think", "task": "think it over",
             "work": {"type": "agent", "instructions": "sleep 60"},
             "dependencies": [], "expectsNoChanges": true}
        ]}),
    );
    let started = Instant::now();
    let run = f.spawn(&["run", plan.to_str().expect("utf-8"), "-q"]);
    let job = f.wait_listed("the plan job's agent to run", |e| {
        e["kind"] == "plan-job" && e["status"] == "running"
    });
    let job_ref = job["sessionId"].as_str().expect("sessionId").to_owned();
    let plan_id = f.repo.latest_plan().expect("a plan");
    assert_eq!(job_ref, format!("{plan_id}/think"));
    assert_eq!(job["agent"], "claude", "{job}");
    assert_eq!(job["turns"], 0, "{job}");
    assert_eq!(
        keys(&job),
        [
            "agent",
            "kind",
            "model",
            "sessionId",
            "status",
            "turns",
            "worktree"
        ]
    );
    let listed = f.list();
    assert!(
        listed
            .iter()
            .any(|e| e["sessionId"] == id.as_str() && e["kind"] == "session"),
        "{listed:?}"
    );

    // Plan jobs' sessions are steered only.
    f.run(&["session", "send", &job_ref, "hi"]).expect_code(2);

    let steer = f.run(&["session", "steer", &job_ref, "wrap it up"]);
    steer.expect_code(0);
    let ended = wait_child(run, Duration::from_secs(40));
    ended.expect_code(0);
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the job ended early"
    );
    let logs = f.run(&["logs", &plan_id, "think"]);
    logs.expect_code(0);
    assert!(
        logs.stdout.contains("steered: wrap it up"),
        "{}",
        logs.stdout
    );

    // Ended: nothing to steer, and the job is no longer listed.
    let again = f.run(&["session", "steer", &job_ref, "more"]);
    again.expect_code(2);
    assert!(
        again.stderr.contains("no agent running"),
        "{}",
        again.stderr
    );
    assert!(f.list().iter().all(|e| e["kind"] != "plan-job"));
    // The plan run's worktree sweep leaves the session's worktree alone.
    assert_eq!(read(&worktree.join("a.txt")), "one");
    f.send(&id, "write b.txt two");
}

#[test]
fn an_ask_policy_without_a_terminal_denies_what_the_agent_asks() {
    let f = Fixture::new();
    let run = f.run(&["session", "new", "--permissions", "ask", "--json"]);
    run.expect_code(0);
    let doc: Value = serde_json::from_str(&run.stdout).expect("json");
    let id = doc["sessionId"].as_str().expect("id").to_owned();
    let worktree = PathBuf::from(doc["worktree"].as_str().expect("worktree"));
    let run = f.run(&["session", "send", &id, "ask asked.txt"]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("the agent asks to use Write ")
            && run.stderr.contains("denied (no terminal to ask at)"),
        "{}",
        run.stderr
    );
    assert!(
        !worktree.join("asked.txt").exists(),
        "the denied write did not happen"
    );
}

#[test]
fn ctrl_c_stops_the_turn_and_leaves_the_session_at_its_last_checkpoint() {
    let f = Fixture::new();
    let (id, worktree) = f.new_session();
    f.send(&id, "write a.txt one");
    let send = f.spawn(&["session", "send", &id, "write dirty.txt x; sleep 60"]);
    let start = Instant::now();
    while !worktree.join("dirty.txt").exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "no dirty.txt");
        std::thread::sleep(Duration::from_millis(20));
    }
    orchestrator_testkit::fixtures::signal(send.id(), "INT");
    let run = wait_child(send, Duration::from_secs(30));
    run.expect_code(1);
    assert!(
        run.stderr
            .contains("recorded as failed and the session is back at its last checkpoint"),
        "{}",
        run.stderr
    );
    assert!(
        !worktree.join("dirty.txt").exists(),
        "back at turn 1 at once"
    );
    let log = f.run(&["session", "log", &id, "--json"]);
    log.expect_code(0);
    let turns = log.json()["turns"].clone();
    assert_eq!(turns[1]["status"], "failed", "{turns}");
}
