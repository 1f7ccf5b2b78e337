//! The plan store's files through the real binary: damaged state is refused rather than taken
//! for a new plan; secrets are written nowhere in the clear, and the store is private.

mod common;
mod mcp_client;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Repo;
use orchestrator_testkit::fixtures::{job, wait_child, Run};
use serde_json::json;

/// The journal of a stored plan (the one file `journal-<generation>.log` in its folder).
fn journal_of(repo: &Repo, plan: &str) -> PathBuf {
    let dir = repo.dir.join(".orchestrator/plans").join(plan);
    let journals: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("plan folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("journal-") && n.ends_with(".log"))
        })
        .collect();
    assert_eq!(journals.len(), 1, "one journal in {}", dir.display());
    journals[0].clone()
}

/// A plan that ran to its end, its target branch and the commit the target is at.
fn finished_plan(repo: &Repo) -> (String, String, String) {
    let file = repo.plan(
        "plan.json",
        &json!({
            "name": "damage",
            "jobs": [
                job("first", "echo one > one.txt", &[]),
                job("second", "echo two > two.txt", &["first"]),
            ],
        }),
    );
    let run = repo.run(&["run", file.to_str().expect("utf-8"), "--json"]);
    run.expect_code(0);
    let doc = run.json();
    let plan = doc["planId"].as_str().expect("planId").to_owned();
    let target = doc["targetBranch"].as_str().expect("target").to_owned();
    let tip = repo.git(&["rev-parse", &target]).trim().to_owned();
    (plan, target, tip)
}

/// `resume` of a plan whose journal was damaged (`damage` does it) exits 3 naming the journal,
/// runs nothing and leaves the target branch where it was.
fn resume_refuses(damage: impl FnOnce(&std::path::Path)) {
    let repo = Repo::new();
    let (plan, target, tip) = finished_plan(&repo);
    let journal = journal_of(&repo, &plan);
    damage(&journal);
    let resume = repo.run(&["resume", &plan]);
    resume.expect_code(3);
    let name = journal.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(
        resume.stderr.contains(name) && resume.stderr.contains(&plan),
        "the message names the file: {}",
        resume.stderr
    );
    assert_eq!(
        repo.git(&["rev-parse", &target]).trim(),
        tip,
        "the target branch is unchanged"
    );
    assert!(repo.extra_worktrees().is_empty(), "no worktree was made");
    // `status` says the same instead of showing a fresh plan.
    let status = repo.run(&["status", &plan, "--json"]);
    status.expect_code(3);
    assert!(status.stderr.contains(name), "{}", status.stderr);
}

#[test]
fn resume_of_a_plan_with_a_truncated_journal_is_refused() {
    resume_refuses(|journal| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(journal)
            .expect("open journal");
        file.set_len(0).expect("truncate");
    });
}

#[test]
fn resume_of_a_plan_without_its_journal_is_refused() {
    resume_refuses(|journal| std::fs::remove_file(journal).expect("remove journal"));
}

const API_KEY: &str = "sk-test0123456789abcdefghijklmnop";
const MY_TOKEN: &str = "tok-9f8e7d6c5b4a39281706";
const DB_PASSWORD: &str = "correct horse battery staple";
const DEPLOY_HOOK: &str = "https://hooks.example.invalid/T0123/B4567";

fn secret_values() -> [&'static str; 4] {
    [API_KEY, MY_TOKEN, DB_PASSWORD, DEPLOY_HOOK]
}

/// A shell check that the job got the real values, without writing them into the command
/// (which is stored, and not an env value): their SHA-256 must match.
fn check_command(file: &str) -> String {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("printf %s \"$V\" | sha256sum | cut -c1-64")
        .env("V", secret_values().concat())
        .output()
        .expect("sha256sum");
    let hash = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(hash.len(), 64, "sha256sum works");
    format!(
        "H=$(printf %s \"$API_KEY$MY_TOKEN$DB_PASSWORD$DEPLOY_HOOK\" | sha256sum | cut -c1-64); \
         [ \"$H\" = {hash} ] || {{ echo 'wrong values' >&2; exit 7; }}; echo ok > {file}; \
         echo \"key=$API_KEY token=$MY_TOKEN password=$DB_PASSWORD hook=$DEPLOY_HOOK\"; \
         echo \"Authorization: Bearer $MY_TOKEN\" >&2"
    )
}

/// The orchestrator with `ORCHESTRATOR_SECRET_ENV` naming one more secret variable.
fn command(repo: &Repo, args: &[&str]) -> std::process::Command {
    let mut cmd = repo.command(args);
    cmd.env("ORCHESTRATOR_SECRET_ENV", "DEPLOY_HOOK, OTHER_*");
    cmd
}

fn output(repo: &Repo, args: &[&str]) -> Run {
    Run::from(command(repo, args).output().expect("run orchestrator"))
}

/// Every file under `dir` with its bytes.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                out.push((path, bytes));
            }
        }
    }
    out
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in secret_values() {
        assert!(!text.contains(secret), "{secret} in {what}:\n{text}");
    }
}

#[test]
fn secrets_are_written_nowhere_in_the_clear_and_survive_a_crash() {
    let repo = Repo::new();
    let file = repo.plan(
        "secrets.json",
        &json!({
            "name": "secrets",
            "env": {"API_KEY": API_KEY, "MODE": "visible-mode"},
            "jobs": [
                {
                    "producerId": "check",
                    "task": "check the values",
                    "work": {
                        "type": "shell",
                        "command": check_command("check.txt"),
                        "env": {"DB_PASSWORD": DB_PASSWORD},
                    },
                    "dependencies": [],
                    "env": {"MY_TOKEN": MY_TOKEN, "DEPLOY_HOOK": DEPLOY_HOOK},
                },
                {
                    "producerId": "slow",
                    "task": "check them again after a crash",
                    "work": {
                        "type": "shell",
                        "command": format!("touch \"$MARK\"; sleep 2; {}", check_command("slow.txt")),
                        "env": {"DB_PASSWORD": DB_PASSWORD, "MARK": repo.scratch.join("started").to_str().expect("utf-8")},
                    },
                    "dependencies": ["check"],
                    "env": {"MY_TOKEN": MY_TOKEN, "DEPLOY_HOOK": DEPLOY_HOOK},
                },
            ],
        }),
    );
    // Run with -v (job output on stderr) and kill -9 it while `slow` sleeps, once the output
    // of `check` has been printed: the CLI prints events as they come, so a kill right when
    // `slow` starts may come before the printer got to them (it did once in CI).
    let mut child = command(&repo, &["run", file.to_str().expect("utf-8"), "-v"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = Arc::new(Mutex::new(String::new()));
    let reader = {
        let (pipe, stderr) = (child.stderr.take().expect("stderr"), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut text = stderr.lock().expect("stderr buffer");
                text.push_str(&line);
                text.push('\n');
            }
        })
    };
    let printed = || {
        stderr
            .lock()
            .expect("stderr buffer")
            .contains("key=[REDACTED]")
    };
    let start = Instant::now();
    while !(repo.scratch.join("started").exists() && printed()) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the slow job never started, or -v never showed the job's output, redacted:\n{}",
            stderr.lock().expect("stderr buffer")
        );
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "run ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let mut run = wait_child(child, Duration::from_secs(10));
    reader.join().expect("stderr reader");
    run.stderr = stderr.lock().expect("stderr buffer").clone();
    assert_no_secret("run -v stderr", &run.stderr);
    assert_no_secret("run -v stdout", &run.stdout);

    let list = output(&repo, &["list", "--json"]);
    list.expect_code(0);
    let plan = list.json()["plans"][0]["planId"]
        .as_str()
        .expect("planId")
        .to_owned();
    // The restarted owner reads the plan back with the real values: the job checks them.
    let resume = output(&repo, &["resume", &plan, "-v", "--json"]);
    resume.expect_code(0);
    assert_no_secret("resume -v stderr", &resume.stderr);
    assert_no_secret("resume --json", &resume.stdout);
    let target = resume.json()["targetBranch"]
        .as_str()
        .expect("target")
        .to_owned();
    assert_eq!(repo.show(&target, "check.txt"), "ok\n");
    assert_eq!(
        repo.show(&target, "slow.txt"),
        "ok\n",
        "the resumed job got the real values"
    );

    for (args, what) in [
        (vec!["logs", plan.as_str(), "check"], "logs check"),
        (vec!["logs", plan.as_str(), "slow"], "logs slow"),
        (vec!["status", plan.as_str(), "--json"], "status --json"),
        (vec!["status", plan.as_str()], "status"),
    ] {
        let out = output(&repo, &args);
        out.expect_code(0);
        assert_no_secret(what, &out.stdout);
        assert_no_secret(what, &out.stderr);
        if what.starts_with("logs") {
            assert!(
                out.stdout.contains("key=[REDACTED]"),
                "{what}: {}",
                out.stdout
            );
            assert!(
                out.stdout.contains("Bearer [REDACTED]"),
                "{what}: {}",
                out.stdout
            );
        }
    }
    // The MCP tools that show specs show the redacted form.
    mcp_answers_are_redacted(&repo, &plan);
    // Nothing in the repository's history either.
    let history = repo.git(&["log", "-p", "--all"]);
    assert_no_secret("git log -p --all", &history);

    // Every file of the store but the secrets table: no secret (nor its JSON-escaped form).
    let store = repo.dir.join(".orchestrator");
    let mut tables = 0;
    for (path, bytes) in files_under(&store) {
        let text = String::from_utf8_lossy(&bytes);
        if path.file_name().is_some_and(|n| n == "secrets.json") {
            tables += 1;
            for secret in secret_values() {
                assert!(text.contains(secret), "{secret} kept in {}", path.display());
            }
            continue;
        }
        assert_no_secret(&path.display().to_string(), &text);
    }
    assert_eq!(tables, 1, "one secrets table");
    let plan_json = std::fs::read_to_string(store.join("plans").join(&plan).join("plan.json"))
        .expect("plan.json");
    assert!(plan_json.contains("visible-mode"), "other env values stay");

    // Files 0600, folders 0700.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        let mut dirs = vec![store.clone()];
        let mut files = 0;
        while let Some(d) = dirs.pop() {
            assert_eq!(mode(&d), 0o700, "{}", d.display());
            for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    assert_eq!(mode(&path), 0o600, "{}", path.display());
                    files += 1;
                }
            }
        }
        assert!(files >= 8, "{files} files checked");
    }
}

/// `get_copilot_job` (the job's spec with its env), the attempts, the failure context and the
/// plan's status, through the built `orchestrator mcp`: no secret, env values redacted.
fn mcp_answers_are_redacted(repo: &Repo, plan: &str) {
    use mcp_client::{call, ok, text};
    use rmcp::ServiceExt;
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mcp = tokio::process::Command::from(command(repo, &["mcp"]));
        let transport =
            rmcp::transport::TokioChildProcess::new(mcp).expect("spawn orchestrator mcp");
        let client = ().serve(transport).await.expect("client connects");
        let job = json!({"planId": plan, "producerId": "check"});
        for (tool, args) in [
            ("get_copilot_job", job.clone()),
            ("get_copilot_job_attempts", job.clone()),
            ("get_copilot_job_failure_context", job.clone()),
            ("get_copilot_plan_status", json!({"planId": plan})),
        ] {
            let r = call(&client, tool, args).await;
            let doc = ok(&r).clone();
            assert_no_secret(tool, &doc.to_string());
            assert_no_secret(tool, &text(&r));
            if tool == "get_copilot_job" {
                assert_eq!(doc["spec"]["env"]["MY_TOKEN"], "[REDACTED]", "{doc:#}");
                assert_eq!(doc["spec"]["env"]["DEPLOY_HOOK"], "[REDACTED]", "{doc:#}");
                assert_eq!(doc["spec"]["work"]["env"]["DB_PASSWORD"], "[REDACTED]");
            }
        }
        let _ = client.cancel().await;
    });
}
