//! The full job pipeline through the built `orchestrator` binary on real git repositories:
//! worktrees, merges along the DAG, snapshot validation and the final merge; failures, retries,
//! conflicts, a dirty target; invalid plans; and the read-only commands.

mod common;

use common::Repo;
use orchestrator_testkit::fixtures::{job, job_doc, job_statuses};
use serde_json::{json, Value};

fn diamond() -> Value {
    json!({
        "name": "Diamond",
        "jobs": [
            job("fetch", "echo A > a.txt", &[]),
            job("left", "test -f a.txt && { cat a.txt; echo B; } > b.txt", &["fetch"]),
            job("right", "test -f a.txt && { cat a.txt; echo C; } > c.txt", &["fetch"]),
            job("join", "test -f b.txt && test -f c.txt && cat b.txt c.txt > d.txt", &["left", "right"]),
        ]
    })
}

#[test]
fn diamond_lands_on_the_target_branch_without_touching_the_checkout() {
    let repo = Repo::new();
    // The user has work in progress on their checkout: it must survive as it is.
    repo.write("shared.txt", "one\ntwo (edited)\nthree\n");
    repo.write("notes.txt", "untracked\n");
    let before = repo.checkout_state();
    let plan = repo.plan("diamond.json", &diamond());

    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json"]);
    run.expect_code(0);
    let doc = run.json();

    // The JSON document: exactly the documented fields, jobs in plan order.
    let id = doc["planId"].as_str().expect("planId").to_owned();
    assert_eq!(doc["name"], "Diamond");
    assert_eq!(doc["status"], "succeeded");
    assert_eq!(doc["targetBranch"], "orchestrator/diamond");
    let ids: Vec<&str> = doc["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["producerId"].as_str().expect("producerId"))
        .collect();
    assert_eq!(ids, ["fetch", "left", "right", "join"]);
    for j in doc["jobs"].as_array().expect("jobs") {
        for key in [
            "producerId",
            "name",
            "status",
            "attempts",
            "commit",
            "error",
        ] {
            assert!(j.get(key).is_some(), "job lacks `{key}`: {j}");
        }
        assert_eq!(j["status"], "succeeded");
        assert_eq!(j["attempts"], 1);
        assert_eq!(j["error"], Value::Null);
        let commit = j["commit"].as_str().expect("commit");
        assert_eq!(commit.len(), 40, "{commit}");
        assert!(commit.chars().all(|c| c.is_ascii_hexdigit()));
    }
    assert_eq!(doc["snapshotValidation"]["status"], "succeeded");

    // Every file is on the target branch, and downstream jobs saw upstream files.
    let files = repo.files_at("orchestrator/diamond");
    for f in [
        "README.md",
        "a.txt",
        "b.txt",
        "c.txt",
        "d.txt",
        "shared.txt",
    ] {
        assert!(files.contains(&f.to_owned()), "{f} missing from {files:?}");
    }
    assert_eq!(repo.show("orchestrator/diamond", "b.txt"), "A\nB\n");
    assert_eq!(repo.show("orchestrator/diamond", "d.txt"), "A\nB\nA\nC\n");
    assert_eq!(
        repo.show("orchestrator/diamond", "shared.txt"),
        "one\ntwo\nthree\n",
        "the user's uncommitted edit is not part of the plan"
    );
    let log = repo.git(&["log", "--format=%s", "orchestrator/diamond"]);
    assert!(log.contains("[Plan] task join"), "{log}");

    // The user's checkout is exactly as it was; no worktree or snapshot branch is left.
    assert_eq!(repo.checkout_state(), before);
    assert!(
        repo.extra_worktrees().is_empty(),
        "{:?}",
        repo.extra_worktrees()
    );
    assert_eq!(repo.branches(), ["main", "orchestrator/diamond"]);
    assert!(repo.git_output(&["fsck", "--full"]).status.success());

    // `status` of that plan reads the same from the store.
    let status = repo.status(Some(&id));
    assert_eq!(status["status"], "succeeded");
    assert_eq!(status["jobs"], doc["jobs"]);
}

#[test]
fn a_failed_job_blocks_only_its_dependents_and_retry_with_new_work_finishes() {
    let repo = Repo::new();
    let plan = repo.plan(
        "fail.json",
        &json!({
            "name": "failing",
            "jobs": [
                job("base", "echo base > base.txt", &[]),
                job("broken", "echo trying > junk.txt; exit 7", &["base"]),
                job("after", "echo after > after.txt", &["broken"]),
                job("alone", "echo alone > alone.txt", &[]),
            ]
        }),
    );
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json"]);
    run.expect_code(1);
    let doc = run.json();
    assert_eq!(doc["status"], "failed");
    assert_eq!(
        job_statuses(&doc),
        [
            ("base".into(), "succeeded".into()),
            ("broken".into(), "failed".into()),
            ("after".into(), "blocked".into()),
            ("alone".into(), "succeeded".into()),
        ]
    );
    let broken = job_doc(&doc, "broken");
    let error = broken["error"].as_str().expect("error");
    assert!(error.contains("exit code 7"), "{error}");
    assert_eq!(job_doc(&doc, "after")["blockedBy"], json!(["broken"]));
    assert_eq!(doc["snapshotValidation"]["status"], "blocked");
    let id = doc["planId"].as_str().expect("id");

    // The human form names the failure too.
    let status = repo.run(&["status", id]);
    status.expect_code(0);
    assert!(status.stdout.contains("exit code 7"), "{}", status.stdout);

    let retry = repo.run(&[
        "retry",
        id,
        "broken",
        "--work",
        "echo fixed > broken.txt",
        "--clear-worktree",
        "--json",
    ]);
    retry.expect_code(0);
    let doc = retry.json();
    assert_eq!(doc["status"], "succeeded");
    assert_eq!(job_doc(&doc, "broken")["attempts"], 2);
    assert_eq!(job_doc(&doc, "after")["attempts"], 1);
    let files = repo.files_at("orchestrator/failing");
    for f in ["base.txt", "broken.txt", "after.txt", "alone.txt"] {
        assert!(files.contains(&f.to_owned()), "{f} missing from {files:?}");
    }
    assert!(
        !files.contains(&"junk.txt".to_owned()),
        "--clear-worktree starts over"
    );
    assert!(repo.extra_worktrees().is_empty());
}

#[test]
fn a_postcheck_failure_retried_resumes_from_the_postchecks() {
    let repo = Repo::new();
    let counter = repo.scratch.join("work-runs");
    let gate = repo.scratch.join("checks-pass");
    let work = format!("echo run >> '{}'; echo P > p.txt", counter.display());
    let plan = repo.plan(
        "post.json",
        &json!({
            "name": "postchecks",
            "jobs": [{
                "producerId": "checked",
                "task": "work then check",
                "work": work,
                "postchecks": format!("test -f '{}'", gate.display()),
                "dependencies": [],
            }]
        }),
    );
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json"]);
    run.expect_code(1);
    let doc = run.json();
    let checked = job_doc(&doc, "checked");
    assert_eq!(checked["status"], "failed");
    assert_eq!(checked["failedPhase"], "postchecks");
    assert_eq!(std::fs::read_to_string(&counter).expect("counter"), "run\n");

    std::fs::write(&gate, "").expect("gate");
    let id = doc["planId"].as_str().expect("id");
    let retry = repo.run(&["retry", id, "--json"]);
    retry.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(&counter).expect("counter"),
        "run\n",
        "the work must not run again"
    );
    assert_eq!(repo.show("orchestrator/postchecks", "p.txt"), "P\n");
    let logs = repo.run(&["logs", id, "checked", "--phase", "postchecks"]);
    logs.expect_code(0);
}

#[test]
fn parallel_jobs_editing_the_same_line_fail_naming_the_file() {
    let repo = Repo::new();
    let plan = repo.plan(
        "conflict.json",
        &json!({
            "name": "conflict",
            "jobs": [
                job("left", "printf 'one\\nLEFT\\nthree\\n' > shared.txt", &[]),
                job("right", "printf 'one\\nRIGHT\\nthree\\n' > shared.txt", &[]),
            ]
        }),
    );
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json"]);
    run.expect_code(1);
    let doc = run.json();
    let failed: Vec<&Value> = doc["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter(|j| j["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{doc:#}");
    let error = failed[0]["error"].as_str().expect("error");
    assert!(
        error.contains("conflict") && error.contains("shared.txt"),
        "{error}"
    );
    assert_eq!(failed[0]["failureReason"], "merge_conflict");
    // People see it too.
    let human = repo.run(&["status"]);
    assert!(human.stdout.contains("shared.txt"), "{}", human.stdout);
    assert_eq!(repo.read("shared.txt"), "one\ntwo\nthree\n");
}

#[test]
fn a_dirty_checked_out_target_fails_cleanly_and_loses_nothing() {
    let repo = Repo::new();
    repo.git(&["checkout", "-q", "-b", "feature"]);
    let tip = repo.git(&["rev-parse", "feature"]);
    repo.write("README.md", "hello\nmy unsaved work\n");
    let plan = repo.plan(
        "dirty.json",
        &json!({
            "name": "dirty",
            "targetBranch": "feature",
            "jobs": [job("add", "echo new > new.txt", &[])]
        }),
    );
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json"]);
    run.expect_code(1);
    let doc = run.json();
    assert_eq!(job_doc(&doc, "add")["status"], "succeeded");
    let sv = &doc["snapshotValidation"];
    assert_eq!(sv["status"], "failed");
    let error = sv["error"].as_str().expect("error");
    assert!(
        error.contains("feature") && error.contains("uncommitted"),
        "{error}"
    );
    // Nothing lost: the edit is there, the branch did not move, nothing new in the checkout.
    assert_eq!(repo.read("README.md"), "hello\nmy unsaved work\n");
    assert_eq!(repo.git(&["rev-parse", "feature"]), tip);
    assert!(!repo.dir.join("new.txt").exists());

    // Once the user has put their work aside, a retry lands the result, checkout included.
    repo.git(&["stash", "-q"]);
    let id = doc["planId"].as_str().expect("id");
    repo.run(&["retry", id, "--json"]).expect_code(0);
    assert_eq!(repo.show("feature", "new.txt"), "new\n");
    assert_eq!(repo.read("new.txt"), "new\n");
    repo.git(&["stash", "pop", "-q"]);
    assert_eq!(repo.read("README.md"), "hello\nmy unsaved work\n");
    assert!(repo.extra_worktrees().is_empty());
}

#[test]
fn an_invalid_plan_exits_2_naming_every_problem() {
    let repo = Repo::new();
    let plan = repo.plan(
        "invalid.json",
        &json!({
            "name": "invalid",
            "jobs": [
                job("dup", "true", &[]),
                job("dup", "true", &[]),
                job("Bad_Id", "true", &[]),
                job("orphan", "true", &["nowhere"]),
                job("cyc-a", "true", &["cyc-b"]),
                job("cyc-b", "true", &["cyc-a"]),
            ]
        }),
    );
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json"]);
    run.expect_code(2);
    assert!(run.stdout.is_empty(), "stdout: {}", run.stdout);
    for needle in ["dup", "Bad_Id", "nowhere", "cyc-a", "cyc-b", "cycle"] {
        assert!(
            run.stderr.contains(needle),
            "`{needle}` not named: {}",
            run.stderr
        );
    }
    // Nothing was stored or created.
    assert!(!repo.dir.join(".orchestrator/plans").exists());
    assert_eq!(repo.git(&["status", "--porcelain"]), "");

    // A misspelt field is named with its path.
    let typo = repo.plan(
        "typo.json",
        &json!({"name": "t", "maxParalel": 2, "jobs": [job("aaa", "true", &[])]}),
    );
    let run = repo.run(&["run", typo.to_str().expect("utf-8")]);
    run.expect_code(2);
    assert!(run.stderr.contains("maxParalel"), "{}", run.stderr);

    // A missing file, a bad flag value: invalid input too.
    repo.run(&["run", "/nonexistent/plan.json"]).expect_code(2);
    repo.run(&["run", typo.to_str().expect("utf-8"), "--max-parallel", "x"])
        .expect_code(2);
    repo.run(&["status", "no-such-plan"]).expect_code(2);
}

#[test]
fn status_list_logs_and_graph() {
    let repo = Repo::new();
    let first = repo.plan(
        "first.json",
        &json!({"name": "first", "jobs": [job("one", "echo out-one; echo 1 > one.txt", &[])]}),
    );
    let second = repo.plan("second.yaml", &json!({"name": "second", "jobs": [
        {"producerId": "two", "name": "Second job", "task": "t", "work": "echo out-two; echo 2 > two.txt", "dependencies": []},
        job("three", "echo 3 > three.txt", &["two"]),
    ]}));
    let a = repo.run(&["run", first.to_str().expect("utf-8"), "--json"]);
    a.expect_code(0);
    let b = repo.run(&["run", second.to_str().expect("utf-8"), "--json", "-q"]);
    b.expect_code(0);
    let (a, b) = (a.json(), b.json());
    let (a_id, b_id) = (
        a["planId"].as_str().expect("id"),
        b["planId"].as_str().expect("id"),
    );

    let list = repo.run(&["list", "--json"]);
    list.expect_code(0);
    let list = list.json();
    let plans = list["plans"].as_array().expect("plans");
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[0]["planId"], b_id, "newest first");
    assert_eq!(plans[1]["planId"], a_id);
    for p in plans {
        for key in ["planId", "name", "status", "createdAt"] {
            assert!(p.get(key).is_some(), "{key} missing in {p}");
        }
        assert_eq!(p["status"], "succeeded");
    }
    let human = repo.run(&["list"]);
    assert!(human.stdout.contains("first") && human.stdout.contains("second"));

    // No id: the most recent plan; a unique prefix works too.
    assert_eq!(repo.status(None)["planId"], b_id);
    assert_eq!(repo.status(Some(&a_id[..8]))["planId"], a_id);
    let text = repo.run(&["status", a_id]);
    assert!(text.stdout.contains("succeeded") && text.stdout.contains("one"));

    // Logs by producerId, by name, per phase.
    let logs = repo.run(&["logs", a_id, "one", "--phase", "work"]);
    logs.expect_code(0);
    assert!(logs.stdout.contains("out-one"), "{}", logs.stdout);
    let by_name = repo.run(&["logs", b_id, "Second job"]);
    by_name.expect_code(0);
    assert!(by_name.stdout.contains("out-two") && by_name.stdout.contains("== work =="));
    repo.run(&["logs", a_id, "nobody"]).expect_code(2);
    repo.run(&["logs", a_id, "one", "--phase", "lunch"])
        .expect_code(2);

    let mermaid = repo.run(&["graph", b_id]);
    mermaid.expect_code(0);
    assert!(
        mermaid.stdout.starts_with("flowchart"),
        "{}",
        mermaid.stdout
    );
    assert!(mermaid.stdout.contains("n0 --> n1"));
    let dot = repo.run(&["graph", b_id, "--format", "dot"]);
    assert!(dot.stdout.starts_with("digraph"), "{}", dot.stdout);
}

#[test]
fn isolation_none_runs_jobs_in_the_folder_itself_and_max_parallel_is_obeyed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("work");
    std::fs::create_dir_all(&dir).expect("mkdir");
    // Each job holds a folder as a mutex while it runs: two at once would fail.
    let exclusive = |out: &str| format!("mkdir busy && sleep 0.1 && echo x > {out} && rmdir busy");
    let plan = tmp.path().join("plan.json");
    std::fs::write(
        &plan,
        json!({"name": "tasks", "isolation": "none", "maxParallel": 4, "jobs": [
            job("aaa", "echo a > a.out", &[]),
            job("bbb", "cat a.out > b.out", &["aaa"]),
            job("one", &exclusive("one.out"), &[]),
            job("two", &exclusive("two.out"), &[]),
            job("three", &exclusive("three.out"), &[]),
        ]})
        .to_string(),
    )
    .expect("write");
    let out = std::process::Command::new(common::BIN)
        .args([
            "run",
            plan.to_str().expect("utf-8"),
            "--json",
            "--max-parallel",
            "1",
        ])
        .arg("--repo")
        .arg(&dir)
        .env("HOME", tmp.path())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["status"], "succeeded");
    assert_eq!(doc["snapshotValidation"], Value::Null);
    assert_eq!(
        std::fs::read_to_string(dir.join("b.out")).expect("b"),
        "a\n"
    );
    assert!(dir.join(".orchestrator/plans").is_dir(), "state is stored");
}

#[test]
fn mcp_is_a_clear_error_and_demo_needs_nothing_configured() {
    let repo = Repo::new();
    let mcp = repo.run(&["mcp"]);
    mcp.expect_code(3);
    assert!(mcp.stderr.contains("MCP"), "{}", mcp.stderr);

    // The demo on a machine with no git identity anywhere (HOME is empty).
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(common::BIN)
        .args(["demo", "--dir"])
        .arg(tmp.path().join("demo"))
        .env("HOME", tmp.path())
        .env("PATH", "/usr/bin:/bin")
        .env_remove("GIT_AUTHOR_NAME")
        .env_remove("GIT_COMMITTER_NAME")
        .output()
        .expect("demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("orchestrator/demo"), "{stdout}");
    assert!(stdout.contains("git -C"), "{stdout}");
    assert!(stdout.contains("total: 242"), "{stdout}");
}
