//! The plan view through the built `orchestrator` binary: the gantt timeline of a run
//! (`graph --format gantt`, `status --json`'s `timeline`), and every form of job reference
//! (producerId, node id, its `<id8>`, unique name, `snapshot-validation`) with its errors.

mod common;

use common::Repo;
use orchestrator_testkit::fixtures::{job, job_doc};
use serde_json::{json, Value};

/// A plan whose `flaky` job fails its first attempt (and is retried to success), so the
/// timeline has a failed phase, a retried attempt and the snapshot validation.
fn run_with_a_retry(repo: &Repo) -> String {
    // Outside the worktree, which a retried phase starts from as it was.
    let marker = repo.scratch.join("flaky-ran");
    let work = format!(
        "test -f '{m}' || {{ touch '{m}'; exit 3; }}; echo flaky-out; echo f > f.txt",
        m = marker.display()
    );
    let plan = repo.plan(
        "view.json",
        &json!({"name": "view: demo", "jobs": [
            job("prep", "echo p > p.txt", &[]),
            {"producerId": "flaky", "name": "Flaky job", "task": "t",
             "work": work,
             "dependencies": ["prep"]},
        ]}),
    );
    let first = repo.run(&["run", plan.to_str().expect("utf-8"), "--json", "-q"]);
    first.expect_code(1);
    let id = first.json()["planId"].as_str().expect("planId").to_owned();
    repo.run(&["retry", &id, "flaky", "-q"]).expect_code(0);
    id
}

fn bars<'a>(chart: &'a str, section: &str) -> Vec<&'a str> {
    chart
        .split("\n  section ")
        .find(|s| s.starts_with(&format!("{section}\n")))
        .map(|s| s.lines().skip(1).map(str::trim).collect())
        .unwrap_or_default()
}

#[test]
fn gantt_and_timeline_after_a_run() {
    let repo = Repo::new();
    let id = run_with_a_retry(&repo);

    let gantt = repo.run(&["graph", &id[..8], "--format", "gantt"]);
    gantt.expect_code(0);
    let chart = &gantt.stdout;
    assert!(chart.starts_with("gantt\n"), "{chart}");
    assert!(chart.contains("\n  dateFormat x\n"), "{chart}");
    assert!(chart.contains("title view  demo (succeeded)"), "{chart}");
    let flaky = bars(chart, "flaky");
    assert!(
        flaky
            .iter()
            .any(|b| b.starts_with("work (attempt 1) :crit, ")),
        "{chart}"
    );
    assert!(
        flaky
            .iter()
            .any(|b| b.starts_with("work (attempt 2) :done, ")),
        "{chart}"
    );
    assert!(!bars(chart, "prep").is_empty(), "{chart}");
    assert!(!bars(chart, "snapshot-validation").is_empty(), "{chart}");
    // Every bar: `<name> :<tags>t<n>, <start ms>, <end ms>` with start < end.
    for line in chart.lines().filter(|l| l.contains(" :")) {
        let data: Vec<&str> = line.rsplit(", ").take(2).collect();
        let (end, start): (u64, u64) = (
            data[0].trim().parse().expect("end"),
            data[1].trim().parse().expect("start"),
        );
        assert!(start < end && start > 1_600_000_000_000, "{line}");
    }

    let status = repo.status(Some(&id));
    let timeline = status["timeline"].as_array().expect("timeline");
    let of = |producer: &str| -> Vec<&Value> {
        timeline
            .iter()
            .filter(|e| e["producerId"] == producer)
            .collect()
    };
    for e in timeline {
        for key in [
            "producerId",
            "attempt",
            "phase",
            "startedAt",
            "endedAt",
            "status",
        ] {
            assert!(e.get(key).is_some(), "{key} missing in {e}");
        }
    }
    assert!(of("flaky")
        .iter()
        .any(|e| e["attempt"] == 1 && e["phase"] == "work" && e["status"] == "failed"));
    assert!(of("flaky")
        .iter()
        .any(|e| e["attempt"] == 2 && e["phase"] == "work" && e["status"] == "succeeded"));
    assert!(!of("snapshot-validation").is_empty());
    // The SPEC §5 fields are all still there.
    for key in ["planId", "name", "status", "targetBranch", "jobs"] {
        assert!(status.get(key).is_some(), "{key} missing");
    }
    assert_eq!(job_doc(&status, "flaky")["attempts"], 2);
}

#[test]
fn every_job_reference_form_reaches_the_job() {
    let repo = Repo::new();
    let id = run_with_a_retry(&repo);
    let status = repo.status(Some(&id));
    let node = job_doc(&status, "flaky")["nodeId"]
        .as_str()
        .expect("nodeId")
        .to_owned();
    for reference in ["flaky", "Flaky job", node.as_str(), &node[..8]] {
        let logs = repo.run(&["logs", &id, reference, "--phase", "work", "--attempt", "2"]);
        logs.expect_code(0);
        assert!(
            logs.stdout.contains("flaky-out"),
            "{reference}: {}",
            logs.stderr
        );
    }
    let snapshot = repo.run(&["logs", &id, "snapshot-validation"]);
    snapshot.expect_code(0);

    let unknown = repo.run(&["logs", &id, "nobody"]);
    unknown.expect_code(2);
    assert!(
        unknown.stderr.contains("no job `nobody`"),
        "{}",
        unknown.stderr
    );
    assert!(unknown.stderr.contains(&id), "{}", unknown.stderr);
    // A short id prefix is not a reference (too easily a coincidence).
    repo.run(&["logs", &id, &node[..4]]).expect_code(2);
    // Unknown plans keep their message and exit code.
    let no_plan = repo.run(&["graph", "zzzz", "--format", "gantt"]);
    no_plan.expect_code(2);
    assert!(
        no_plan.stderr.contains("no plan `zzzz`"),
        "{}",
        no_plan.stderr
    );
}
