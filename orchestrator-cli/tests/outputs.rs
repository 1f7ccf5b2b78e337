//! Outputs (SPEC §12) through the built `orchestrator` binary on real git: a shell job's stdout
//! is its `output` in `status --json`, and a dependent job reads its dependencies' outputs and
//! commits from the file `ORCHESTRATOR_INPUTS` names (checked in the committed result with the
//! `git` CLI); the inputs file itself is never committed.

mod common;

use common::Repo;
use orchestrator_testkit::fixtures::{job, job_doc};
use serde_json::{json, Value};

#[test]
fn stdout_is_the_output_and_dependents_read_it_from_their_inputs() {
    let repo = Repo::new();
    let plan = repo.plan(
        "outputs.json",
        &json!({"name": "outputs", "jobs": [
            job("count", "echo counting >&2; echo '42 files'; echo c > count.txt", &[]),
            job("list", "printf 'a.rs\\nb.rs\\n'; echo l > list.txt", &[]),
            job("report", "cp \"$ORCHESTRATOR_INPUTS\" inputs.json", &["count", "list"]),
            job("quiet", "echo q > quiet.txt", &[]),
        ]}),
    );
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json", "-q"]);
    run.expect_code(0);
    let id = run.json()["planId"].as_str().expect("planId").to_owned();

    let status = repo.status(Some(&id));
    assert_eq!(
        job_doc(&status, "count")["output"],
        "42 files\n",
        "stdout only, not stderr"
    );
    assert_eq!(job_doc(&status, "list")["output"], "a.rs\nb.rs\n");
    assert_eq!(
        job_doc(&status, "quiet")["output"],
        Value::Null,
        "printed nothing"
    );

    // What `report` saw, as it committed it.
    let target = status["targetBranch"].as_str().expect("targetBranch");
    let inputs: Value =
        serde_json::from_str(&repo.show(target, "inputs.json")).expect("the inputs file is JSON");
    assert_eq!(inputs["count"]["output"], "42 files\n");
    assert_eq!(inputs["list"]["output"], "a.rs\nb.rs\n");
    for dep in ["count", "list"] {
        assert_eq!(
            inputs[dep]["commit"],
            job_doc(&status, dep)["commit"],
            "{dep}'s commit is handed on"
        );
        let sha = inputs[dep]["commit"].as_str().expect("a commit");
        assert_eq!(repo.git(&["cat-file", "-t", sha]).trim(), "commit");
    }
    let files = repo.git(&["ls-tree", "-r", "--name-only", target]);
    assert!(
        !files.lines().any(|f| f.starts_with(".orchestrator")),
        "the inputs file stays out of commits: {files}"
    );
}
