//! Crash repairs and the orphan sweep live in the engine, so every host gets them: the MCP
//! server killed mid-plan continues it when it starts again, and a plan whose worktrees live
//! outside the repository (`worktreeRoot`) is repaired and swept there.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{tool_call, RawMcp, Repo};
use orchestrator_testkit::fixtures::{copy_repo, signal, wait_child, wait_for_line};
use serde_json::{json, Value};

const TARGET: &str = "orchestrator/repairs";

/// A chain and a fan of jobs that append to shared files, slow enough to be killed mid-run.
fn jobs() -> Value {
    let job = |id: &str, deps: &[&str], file: &str| {
        json!({
            "producerId": id,
            "task": format!("append {id}"),
            "work": format!("echo {id}1 >> {file}; sleep 0.3; echo {id}2 >> {file}"),
            "dependencies": deps,
        })
    };
    json!([
        job("a-root", &[], "log.txt"),
        job("b-left", &["a-root"], "left.txt"),
        job("c-right", &["a-root"], "right.txt"),
        job("d-chain", &["b-left"], "left.txt"),
        job("e-join", &["c-right", "d-chain"], "log.txt"),
    ])
}

/// The target branch's files with their contents (compared whole, so that a difference says
/// which file).
fn tree(repo: &Repo) -> Vec<(String, String)> {
    repo.files_at(TARGET)
        .into_iter()
        .map(|f| {
            let text = repo.show(TARGET, &f);
            (f, text)
        })
        .collect()
}

fn folders(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn assert_clean(repo: &Repo, root: &Path, label: &str) {
    assert!(
        repo.extra_worktrees().is_empty(),
        "{label}: worktrees left: {:?}",
        repo.extra_worktrees()
    );
    assert!(
        folders(root).is_empty(),
        "{label}: folders left in {}: {:?}",
        root.display(),
        folders(root)
    );
    let fsck = repo.git_output(&["fsck", "--full", "--no-dangling"]);
    assert!(
        fsck.status.success() && fsck.stdout.is_empty(),
        "{label}: git fsck: {}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
}

fn succeeded_jobs(doc: &Value) -> usize {
    doc["jobs"]
        .as_array()
        .map(|jobs| jobs.iter().filter(|j| j["status"] == "succeeded").count())
        .unwrap_or(0)
}

#[test]
fn a_killed_mcp_server_continues_its_plan_when_it_starts_again() {
    let pristine = Repo::new();
    let template = pristine.scratch.join("template");
    copy_repo(&pristine.dir, &template);
    // The reference: the same plan, uninterrupted.
    let file = pristine.plan("plan.json", &json!({"name": "repairs", "jobs": jobs()}));
    pristine
        .run(&["run", file.to_str().expect("utf-8"), "-q"])
        .expect_code(0);
    let reference = tree(&pristine);

    let repo = Repo::copy_of(&template);
    let mut server = RawMcp::start(&repo);
    server.initialize();
    let (_, created) = server.ask(
        "create_copilot_plan",
        &tool_call(
            2,
            "create_copilot_plan",
            json!({"name": "repairs", "jobs": jobs(), "maxParallel": 2}),
        ),
    );
    assert!(created.get("error").is_none(), "{created}");
    // Mid-plan: some jobs done, some not.
    repo.wait_for_within("a job to succeed", Duration::from_secs(60), |doc| {
        succeeded_jobs(doc) >= 1
    });
    server.child.kill().expect("kill -9 the server");
    let _ = server.child.wait();
    drop(server);
    let doc = repo.status(None);
    assert_ne!(
        doc["status"], "succeeded",
        "the kill landed mid-plan: {doc:#}"
    );

    // A new server takes the interrupted plan over and finishes it.
    let mut again = RawMcp::start(&repo);
    again.initialize();
    let doc = repo.wait_for_within("the plan to end", Duration::from_secs(60), |doc| {
        matches!(doc["status"].as_str(), Some("succeeded" | "failed"))
    });
    assert_eq!(doc["status"], "succeeded", "{doc:#}");
    drop(again);
    assert_eq!(
        tree(&repo),
        reference,
        "the same tree as an uninterrupted run"
    );
    assert_clean(&repo, &repo.dir.join(".worktrees"), "after the restart");
}

#[test]
fn worktrees_outside_the_repository_are_repaired_and_swept_there() {
    let repo = Repo::new();
    let root = repo.scratch.join("worktrees");
    let marker = repo.scratch.join("where.txt");
    let mut plan = json!({"name": "repairs", "worktreeRoot": root, "jobs": jobs()});
    // The root job says where it runs, then is slow enough to be killed.
    plan["jobs"][0]["work"] = json!(format!(
        "pwd >> '{}'; echo a-root1 >> log.txt; sleep 1; echo a-root2 >> log.txt",
        marker.display()
    ));
    let file = repo.plan("plan.json", &plan);
    let file = file.to_str().expect("utf-8");

    let child = repo.spawn(&["run", file, "-q"]);
    let ran_in = wait_for_line(&marker, Duration::from_secs(30), "the job to start");
    let root_real = root.canonicalize().expect("root");
    assert!(
        Path::new(ran_in.trim()).starts_with(&root_real),
        "the job ran in {ran_in}, not under {}",
        root_real.display()
    );
    assert!(
        !repo.dir.join(".worktrees").exists() || folders(&repo.dir.join(".worktrees")).is_empty(),
        "nothing in the repository's own folder"
    );
    // kill -9 mid-job: its worktree stays under the root.
    let pid = child.id();
    signal(pid, "KILL");
    let _ = wait_child(child, Duration::from_secs(10));
    assert!(
        !folders(&root).is_empty(),
        "the killed run left its worktree"
    );

    // A stray worktree of this repository in the root, that no plan knows: swept.
    let stray = root.join("deadbeef");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        stray.to_str().expect("utf-8"),
    ]);
    let id = repo.latest_plan().expect("a stored plan");
    let resumed = repo.run(&["resume", &id, "--json", "-q"]);
    resumed.expect_code(0);
    assert_eq!(resumed.json()["status"], "succeeded");
    assert!(!stray.exists(), "the stray worktree was swept");
    assert_eq!(
        repo.show(TARGET, "log.txt"),
        "a-root1\na-root2\ne-join1\ne-join2\n",
        "the killed job ran again from where it began"
    );
    assert_clean(&repo, &root, "after resume");
}
