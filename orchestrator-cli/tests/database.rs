//! Plans kept in PostgreSQL (SPEC §16) through the CLI: `run --database URL` runs a plan with
//! its state in the database (nothing under `.orchestrator/plans`), and `list`, `status`,
//! `logs` and `graph` read it from there — with `--database` or `ORCHESTRATOR_DATABASE_URL`;
//! a plan stopped at `--until-waiting` is approved and resumed from the database. A malformed
//! URL is exit 2, a database that does not answer exit 3 naming it.
//!
//! Each test works in a database of its own, created and dropped through `tokio-postgres`;
//! without a server the tests say so and pass.
#![cfg(unix)]

mod common;

use common::database::Database;
use common::Repo;
use orchestrator_testkit::fixtures::job_doc;
use serde_json::json;

fn plan(repo: &Repo, jobs: serde_json::Value) -> String {
    let file = repo.dir.join("plan.json");
    let plan = json!({"name": "in the database", "targetBranch": "feature/db", "jobs": jobs});
    std::fs::write(&file, plan.to_string()).expect("write plan");
    file.to_str().expect("utf-8").to_owned()
}

#[test]
fn a_plan_runs_with_its_state_in_the_database_and_is_read_from_there() {
    let Some(db) = Database::create() else { return };
    let url = db.url();
    let repo = Repo::new();
    let file = plan(
        &repo,
        json!([
            {"producerId": "one", "task": "One", "dependencies": [],
             "work": "echo one-output; echo one > one.txt"},
            {"producerId": "two", "task": "Two", "dependencies": ["one"],
             "work": "cat one.txt > two.txt"}
        ]),
    );
    let run = repo.run(&["run", &file, "--database", &url, "--json", "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = run.json();
    assert_eq!(doc["status"], "succeeded", "{doc:#}");
    let id = doc["planId"].as_str().expect("planId").to_owned();
    assert_eq!(repo.git(&["show", "feature/db:two.txt"]), "one\n");
    assert!(
        !repo.dir.join(".orchestrator/plans").exists(),
        "no plan state in the repository's folder"
    );

    // Read back from the database, by flag and by environment.
    let list = repo.run(&["list", "--database", &url, "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert_eq!(list.json()["plans"][0]["planId"], id.as_str());
    let status = repo
        .command(&["status", &id[..8], "--json"])
        .env("ORCHESTRATOR_DATABASE_URL", &url)
        .output()
        .expect("status");
    assert!(status.status.success());
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).expect("json");
    assert_eq!(job_doc(&status, "two")["status"], "succeeded");
    let logs = repo.run(&["logs", &id, "one", "--phase", "work", "--database", &url]);
    assert_eq!(logs.code, 0, "{}", logs.stderr);
    assert!(logs.stdout.contains("one-output"), "{}", logs.stdout);
    let graph = repo.run(&["graph", &id, "--database", &url]);
    assert!(
        graph.code == 0 && graph.stdout.contains("two"),
        "{}",
        graph.stderr
    );

    // The repository's own store knows nothing of it.
    let local = repo.run(&["list", "--json"]);
    assert_eq!(local.json()["plans"], json!([]));
}

#[test]
fn resume_goes_on_with_a_plan_in_the_database() {
    let Some(db) = Database::create() else { return };
    let url = db.url();
    let repo = Repo::new();
    let file = plan(
        &repo,
        json!([
            {"producerId": "gate", "task": "Gate", "dependencies": [], "approval": "before",
             "work": "echo gate > gate.txt"}
        ]),
    );
    let run = repo.run(&[
        "run",
        &file,
        "--database",
        &url,
        "--until-waiting",
        "--json",
        "-q",
    ]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    let id = run.json()["planId"].as_str().expect("planId").to_owned();
    // Nobody runs the plan now: approve journals the approval straight into the database.
    let approve = repo
        .command(&["approve", &id, "gate", "-q"])
        .env("ORCHESTRATOR_DATABASE_URL", &url)
        .output()
        .expect("approve");
    assert!(
        approve.status.success(),
        "{}",
        String::from_utf8_lossy(&approve.stderr)
    );
    let resume = repo.run(&["resume", &id, "--database", &url, "--json", "-q"]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    assert_eq!(resume.json()["status"], "succeeded");
    assert_eq!(repo.git(&["show", "feature/db:gate.txt"]), "gate\n");
}

#[test]
fn a_bad_or_silent_database_is_refused_naming_it() {
    let repo = Repo::new();
    let file = plan(
        &repo,
        json!([{"producerId": "one", "task": "One", "dependencies": [], "work": "true"}]),
    );
    let bad = repo.run(&["run", &file, "--database", "mysql://nope", "-q"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("--database"), "{}", bad.stderr);
    let silent = repo.run(&["list", "--database", "postgres://postgres@127.0.0.1:1/none"]);
    assert_eq!(
        silent.code, 3,
        "an error that is no bad input: {}",
        silent.stderr
    );
    assert!(silent.stderr.contains("127.0.0.1:1"), "{}", silent.stderr);
}

#[test]
fn sessions_are_kept_in_the_database_the_environment_names() {
    let Some(db) = Database::create() else { return };
    let url = db.url();
    let repo = Repo::new();
    let in_db = |args: &[&str]| {
        let out = repo
            .command(args)
            .env("ORCHESTRATOR_DATABASE_URL", &url)
            .output()
            .expect("session command");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("json")
    };
    let id = in_db(&["session", "new", "--no-worktree", "--json"])["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_owned();
    let listed = in_db(&["session", "list", "--json"]);
    assert_eq!(listed[0]["sessionId"], id.as_str(), "{listed:#}");
    // The repository's own session store knows nothing of it.
    let local = repo.run(&["session", "list", "--json"]);
    assert_eq!(local.code, 0, "{}", local.stderr);
    assert_eq!(local.json(), json!([]));
    let close = repo
        .command(&["session", "close", &id])
        .env("ORCHESTRATOR_DATABASE_URL", &url)
        .output()
        .expect("close");
    assert!(
        close.status.success(),
        "{}",
        String::from_utf8_lossy(&close.stderr)
    );
}
