//! The reference's nested-groups plan form (SPEC §2) through the binary: a plan written with
//! `groups` runs with the dependencies the resolution rules give, and every command names its
//! jobs by their qualified producerIds.

mod common;
mod mcp_client;

use common::Repo;
use mcp_client::{call, failed, ok, text, wait_for};
use orchestrator_testkit::fixtures::job_doc;
use serde_json::{json, Value};

/// A job in the reference's spelling (`producer_id`) that appends its qualified id to the
/// order log, checks that the files of the jobs it must follow are in its worktree, and
/// writes its own file.
fn job(repo: &Repo, qualified: &str, deps: &[&str], needs: &[&str]) -> Value {
    let own = qualified.rsplit('/').next().unwrap_or(qualified);
    let file = format!("out/{}.txt", qualified.replace('/', "--"));
    let checks: String = needs
        .iter()
        .map(|n| format!("test -f out/{}.txt && ", n.replace('/', "--")))
        .collect();
    let log = repo.scratch.join("order.log");
    json!({
        "producer_id": own,
        "task": format!("task {qualified}"),
        "dependencies": deps,
        "work": format!(
            "{checks}mkdir -p out && echo {qualified} > {file} && echo {qualified} >> '{}' \
             && echo ran {qualified}",
            log.display()
        ),
    })
}

/// Three levels, `build` in two groups, relative (`count-files`, `collection/...`) and
/// qualified (`phase1/analysis/report`) dependencies, and a root job depending on a group's.
fn nested_plan(repo: &Repo) -> Value {
    json!({
        "name": "nested groups",
        "jobs": [
            job(repo, "final", &["phase2/build"], &["phase2/build"]),
        ],
        "groups": [
            {"name": "phase1", "groups": [
                {"name": "collection", "jobs": [
                    job(repo, "phase1/collection/count-files", &[], &[]),
                    job(repo, "phase1/collection/count-dirs", &["count-files"],
                        &["phase1/collection/count-files"]),
                    job(repo, "phase1/collection/build", &[], &[]),
                ]},
                {"name": "analysis", "jobs": [
                    job(repo, "phase1/analysis/report",
                        &["collection/count-files", "collection/count-dirs"],
                        &["phase1/collection/count-files", "phase1/collection/count-dirs"]),
                ], "groups": [
                    {"name": "summary", "jobs": [
                        job(repo, "phase1/analysis/summary/summarize",
                            &["collection/build"], &["phase1/collection/build"]),
                    ]},
                ]},
            ]},
            {"name": "phase2", "jobs": [
                job(repo, "phase2/build",
                    &["phase1/analysis/report", "phase1/analysis/summary/summarize"],
                    &["phase1/analysis/report", "phase1/analysis/summary/summarize"]),
            ]},
        ]
    })
}

/// The dependencies the rules give each job, by qualified producerId.
const EXPECTED: &[(&str, &[&str])] = &[
    ("final", &["phase2/build"]),
    ("phase1/collection/count-files", &[]),
    (
        "phase1/collection/count-dirs",
        &["phase1/collection/count-files"],
    ),
    ("phase1/collection/build", &[]),
    (
        "phase1/analysis/report",
        &[
            "phase1/collection/count-files",
            "phase1/collection/count-dirs",
        ],
    ),
    (
        "phase1/analysis/summary/summarize",
        &["phase1/collection/build"],
    ),
    (
        "phase2/build",
        &[
            "phase1/analysis/report",
            "phase1/analysis/summary/summarize",
        ],
    ),
];

#[test]
fn a_nested_groups_plan_runs_with_the_dependencies_the_rules_give() {
    let repo = Repo::new();
    let plan = repo.plan("nested.json", &nested_plan(&repo));
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json"]);
    run.expect_code(0);
    let doc = run.json();
    assert_eq!(doc["status"], "succeeded", "{doc:#}");
    let id = doc["planId"].as_str().expect("planId").to_owned();

    // Qualified producerIds, groups and dependencies, in the status document.
    let status = repo.status(Some(&id));
    let jobs = status["jobs"].as_array().expect("jobs");
    let found: Vec<(String, Vec<String>)> = jobs
        .iter()
        .map(|j| {
            let deps = j["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|d| d.as_str().expect("dep").to_owned())
                .collect();
            (j["producerId"].as_str().expect("id").to_owned(), deps)
        })
        .collect();
    let expected: Vec<(String, Vec<String>)> = EXPECTED
        .iter()
        .map(|(id, deps)| {
            (
                (*id).to_owned(),
                deps.iter().map(|d| (*d).to_owned()).collect(),
            )
        })
        .collect();
    assert_eq!(found, expected);
    assert_eq!(
        job_doc(&status, "phase1/analysis/summary/summarize")["group"],
        "phase1/analysis/summary"
    );
    assert_eq!(
        status["groups"],
        json!([
            {"path": "phase1", "status": "succeeded"},
            {"path": "phase1/analysis", "status": "succeeded"},
            {"path": "phase1/analysis/summary", "status": "succeeded"},
            {"path": "phase1/collection", "status": "succeeded"},
            {"path": "phase2", "status": "succeeded"},
        ])
    );

    // Every job ran after the jobs it depends on (and found their files merged in: its
    // `test -f` checks would have failed it otherwise).
    let order = std::fs::read_to_string(repo.scratch.join("order.log")).expect("order log");
    let order: Vec<&str> = order.lines().collect();
    assert_eq!(order.len(), EXPECTED.len(), "{order:?}");
    let at = |id: &str| {
        order
            .iter()
            .position(|o| *o == id)
            .unwrap_or_else(|| panic!("{id} never ran: {order:?}"))
    };
    for (id, deps) in EXPECTED {
        for dep in *deps {
            assert!(at(dep) < at(id), "{dep} ran after {id}: {order:?}");
        }
    }

    // The commits, read with git: each job's commit holds its own file and those of
    // everything it depends on, and nothing of the jobs it does not follow.
    let target = doc["targetBranch"].as_str().expect("targetBranch");
    let files = repo.files_at(target);
    for (id, _) in EXPECTED {
        let file = format!("out/{}.txt", id.replace('/', "--"));
        assert!(files.contains(&file), "{file} not on {target}: {files:?}");
    }
    let subjects = repo.git(&["log", "--format=%s", target]);
    for (id, _) in EXPECTED {
        assert!(
            subjects.lines().any(|s| s.ends_with(&format!("task {id}"))),
            "no commit for {id}:\n{subjects}"
        );
    }
    let commit_of = |id: &str| {
        job_doc(&status, id)["commit"]
            .as_str()
            .unwrap_or_else(|| panic!("{id} has no commit"))
            .to_owned()
    };
    let summarize = repo.files_at(&commit_of("phase1/analysis/summary/summarize"));
    assert!(summarize.contains(&"out/phase1--collection--build.txt".to_owned()));
    assert!(
        !summarize.contains(&"out/phase1--collection--count-files.txt".to_owned()),
        "summarize does not depend on count-files: {summarize:?}"
    );
    let phase2 = repo.files_at(&commit_of("phase2/build"));
    for file in [
        "out/phase1--analysis--report.txt",
        "out/phase1--collection--count-dirs.txt",
        "out/phase2--build.txt",
    ] {
        assert!(phase2.contains(&file.to_owned()), "{file}: {phase2:?}");
    }
    repo.git(&["fsck", "--no-progress"]);

    // Commands take qualified producerIds.
    let logs = repo.run(&["logs", &id, "phase1/collection/count-files"]);
    logs.expect_code(0);
    assert!(
        logs.stdout.contains("ran phase1/collection/count-files"),
        "{}",
        logs.stdout
    );
    let other = repo.run(&["logs", &id, "phase2/build"]);
    other.expect_code(0);
    assert!(
        other.stdout.contains("ran phase2/build"),
        "{}",
        other.stdout
    );
    assert!(!other.stdout.contains("ran phase1/collection/build"));

    // The graph nests the groups, each with its status.
    let graph = repo.run(&["graph", &id]);
    graph.expect_code(0);
    let lines: Vec<&str> = graph.stdout.lines().collect();
    let line = |needle: &str| {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not in\n{}", graph.stdout))
    };
    assert!(line("[\"phase1<br/>succeeded\"]").starts_with("  subgraph "));
    assert!(line("[\"analysis<br/>succeeded\"]").starts_with("    subgraph "));
    assert!(line("[\"summary<br/>succeeded\"]").starts_with("      subgraph "));
    assert!(line("phase1/analysis/summary/summarize<br/>").starts_with("        n"));
    let dot = repo.run(&["graph", &id, "--format", "dot"]);
    dot.expect_code(0);
    assert_eq!(dot.stdout.matches("subgraph cluster_").count(), 5);
    assert!(dot.stdout.contains("label=\"summary\\nsucceeded\""));
}

#[test]
fn a_failed_job_in_a_group_makes_it_partial_and_retry_takes_its_qualified_id() {
    let repo = Repo::new();
    let gate = repo.scratch.join("allow");
    let plan = json!({
        "name": "partial group",
        "jobs": [],
        "groups": [{"name": "checks", "jobs": [
            {"producer_id": "good", "task": "good", "dependencies": [],
             "work": "echo good > good.txt"},
            {"producer_id": "flaky", "task": "flaky", "dependencies": [],
             "auto_heal": false,
             "work": format!("test -f '{}' && echo flaky > flaky.txt", gate.display())},
        ]}]
    });
    let plan = repo.plan("partial.yaml", &plan);
    let run = repo.run(&["run", plan.to_str().expect("utf-8"), "--json"]);
    run.expect_code(1);
    let doc = run.json();
    let id = doc["planId"].as_str().expect("planId").to_owned();
    assert_eq!(job_doc(&doc, "checks/flaky")["status"], "failed");
    assert_eq!(
        doc["groups"],
        json!([{"path": "checks", "status": "partial"}])
    );
    let graph = repo.run(&["graph", &id]);
    assert!(
        graph.stdout.contains("[\"checks<br/>partial\"]"),
        "{}",
        graph.stdout
    );

    std::fs::write(&gate, "").expect("gate");
    let retry = repo.run(&["retry", &id, "checks/flaky", "--json"]);
    retry.expect_code(0);
    let doc = retry.json();
    assert_eq!(job_doc(&doc, "checks/flaky")["status"], "succeeded");
    assert_eq!(
        doc["groups"],
        json!([{"path": "checks", "status": "succeeded"}])
    );
}

#[test]
fn a_dangling_reference_is_refused_naming_it_and_the_qualified_job() {
    let repo = Repo::new();
    let mut plan = nested_plan(&repo);
    // `report` names a sibling group's job that does not exist, and `count-dirs` names a
    // job of its own group that does not exist.
    plan["groups"][0]["groups"][1]["jobs"][0]["dependencies"] = json!(["collection/count-filez"]);
    plan["groups"][0]["groups"][0]["jobs"][1]["dependencies"] = json!(["count-file"]);
    let plan = repo.plan("dangling.json", &plan);
    let run = repo.run(&["run", plan.to_str().expect("utf-8")]);
    run.expect_code(2);
    for needle in [
        "job `phase1/analysis/report`, field `dependencies[0]` = \"collection/count-filez\"",
        "`phase1/collection/count-filez`",
        "job `phase1/collection/count-dirs`, field `dependencies[0]` = \"count-file\"",
    ] {
        assert!(
            run.stderr.contains(needle),
            "{needle} not in:\n{}",
            run.stderr
        );
    }
    // Nothing was stored or started.
    assert_eq!(repo.run(&["list", "--json"]).json()["plans"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_creates_a_nested_groups_plan_and_finds_its_jobs_by_qualified_id() {
    let repo = Repo::new();
    let client = repo.mcp().await;

    let mut dangling = nested_plan(&repo);
    dangling["groups"][1]["jobs"][0]["dependencies"] = json!(["analysis/report"]);
    let r = call(&client, "create_copilot_plan", dangling).await;
    let message = text(&r);
    failed(&r);
    assert!(
        message.contains("phase2/build") && message.contains("analysis/report"),
        "{message}"
    );

    let r = call(&client, "create_copilot_plan", nested_plan(&repo)).await;
    let created = ok(&r).clone();
    let plan = created["planId"].as_str().expect("planId").to_owned();
    let mapping = created["jobMapping"].as_object().expect("jobMapping");
    assert!(
        mapping.contains_key("phase1/analysis/summary/summarize"),
        "{created}"
    );

    let done = wait_for(&client, &plan, &["succeeded", "failed", "canceled"]).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert!(done["groups"]
        .as_array()
        .expect("groups")
        .contains(&json!({"path": "phase1/analysis/summary", "status": "succeeded"})));

    let r = call(
        &client,
        "get_copilot_job",
        json!({"planId": plan, "producerId": "phase1/collection/count-dirs"}),
    )
    .await;
    let job = ok(&r);
    assert_eq!(job["status"], "succeeded");
    assert_eq!(
        job["dependencies"],
        json!(["phase1/collection/count-files"])
    );

    let r = call(
        &client,
        "get_copilot_job_logs",
        json!({"planId": plan, "jobId": "phase2/build", "phase": "work"}),
    )
    .await;
    assert_eq!(ok(&r)["producerId"], "phase2/build");

    let r = call(&client, "get_copilot_plan_graph", json!({"planId": plan})).await;
    let graph = ok(&r)["graph"].as_str().expect("graph").to_owned();
    assert!(graph.contains("[\"summary<br/>succeeded\"]"), "{graph}");
    let _ = client.cancel().await;
}
