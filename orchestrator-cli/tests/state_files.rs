//! The plan store's files through the real binary: damaged state is refused rather than taken
//! for a new plan.

mod common;

use std::path::PathBuf;

use common::{job, Repo};
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
