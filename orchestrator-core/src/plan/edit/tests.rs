//! Tests of [`apply_edits`](super::apply_edits): rewiring, status rules and error texts.

use super::*;

fn job(id: &str, deps: &[&str]) -> JobSpec {
    JobSpec::new(id, id, WorkSpec::shell("true")).depends_on(deps.iter().copied())
}

fn plan() -> PlanSpec {
    PlanSpec::new("p")
        .job(job("aaa", &[]))
        .job(job("bbb", &["aaa"]))
        .job(job("ccc", &["bbb"]))
}

fn deps(spec: &PlanSpec) -> Vec<(String, Vec<String>)> {
    spec.jobs
        .iter()
        .map(|j| (j.producer_id.clone(), j.dependencies.clone()))
        .collect()
}

fn pending(_: &str) -> Option<NodeStatus> {
    Some(NodeStatus::Pending)
}

fn owned(v: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    v.iter()
        .map(|(j, d)| (j.to_string(), d.iter().map(|s| s.to_string()).collect()))
        .collect()
}

#[test]
fn remove_bridges_dependents() {
    let out = apply_edits(
        &plan(),
        &[PlanEdit::RemoveJob { job: "bbb".into() }],
        pending,
        false,
    )
    .expect("edit");
    assert_eq!(deps(&out), owned(&[("aaa", &[]), ("ccc", &["aaa"])]));
}

#[test]
fn add_before_and_after_rewire() {
    let out = apply_edits(
        &plan(),
        &[
            PlanEdit::AddBefore {
                job: Box::new(job("pre", &[])),
                before: "bbb".into(),
            },
            PlanEdit::AddAfter {
                job: Box::new(job("post", &[])),
                after: "bbb".into(),
            },
        ],
        pending,
        false,
    )
    .expect("edit");
    assert_eq!(
        deps(&out),
        owned(&[
            ("aaa", &[]),
            ("bbb", &["pre"]),
            ("ccc", &["post"]),
            ("pre", &["aaa"]),
            ("post", &["bbb"]),
        ])
    );
}

#[test]
fn started_jobs_keep_their_place() {
    let status = |p: &str| {
        Some(match p {
            "aaa" => NodeStatus::Succeeded,
            "bbb" => NodeStatus::Running,
            _ => NodeStatus::Failed,
        })
    };
    let refused = |edit: PlanEdit| {
        apply_edits(&plan(), &[edit], status, true)
            .expect_err("refused")
            .to_string()
    };
    assert!(refused(PlanEdit::RemoveJob { job: "bbb".into() }).contains("running"));
    assert!(refused(PlanEdit::UpdateDeps {
        job: "ccc".into(),
        dependencies: vec![]
    })
    .contains("failed"));
    assert!(refused(PlanEdit::AddBefore {
        job: Box::new(job("new", &[])),
        before: "bbb".into()
    })
    .contains("running"));
    let work = JobUpdate {
        work: Some(WorkSpec::shell("x")),
        ..JobUpdate::default()
    };
    assert!(refused(PlanEdit::UpdateJob {
        job: "aaa".into(),
        update: Box::new(work.clone())
    })
    .contains("succeeded"));
    // A failed job's work can change, and it can be removed.
    let ok = apply_edits(
        &plan(),
        &[
            PlanEdit::UpdateJob {
                job: "ccc".into(),
                update: Box::new(work),
            },
            PlanEdit::RemoveJob { job: "ccc".into() },
        ],
        status,
        true,
    );
    assert!(ok.is_ok(), "{ok:?}");
    // Cosmetic changes are always fine; branches are pinned once started.
    let name = JobUpdate {
        name: Some("Nice".into()),
        ..JobUpdate::default()
    };
    assert!(apply_edits(
        &plan(),
        &[PlanEdit::UpdateJob {
            job: "bbb".into(),
            update: Box::new(name)
        }],
        status,
        true
    )
    .is_ok());
    let branch = PlanUpdate {
        target_branch: Some("x".into()),
        ..PlanUpdate::default()
    };
    assert!(refused(PlanEdit::UpdatePlan {
        update: Box::new(branch)
    })
    .contains("pinned"));
}

#[test]
fn a_job_cannot_be_removed_and_added_again_in_one_call() {
    let e = apply_edits(
        &plan(),
        &[
            PlanEdit::RemoveJob { job: "ccc".into() },
            PlanEdit::AddJob {
                job: Box::new(job("ccc", &["aaa"])),
            },
        ],
        pending,
        false,
    )
    .expect_err("would inherit the removed job's state");
    assert_eq!((e.index, e.job.as_deref()), (1, Some("ccc")));
    assert!(e.message.contains("separate calls"), "{e}");
}

#[test]
fn errors_name_the_edit_and_job() {
    let e = apply_edits(
        &plan(),
        &[
            PlanEdit::AddJob {
                job: Box::new(job("ddd", &[])),
            },
            PlanEdit::AddJob {
                job: Box::new(job("ddd", &[])),
            },
        ],
        pending,
        false,
    )
    .expect_err("duplicate");
    assert_eq!(
        (e.index, e.op, e.job.as_deref()),
        (1, "add_job", Some("ddd"))
    );
    let e = apply_edits(
        &plan(),
        &[PlanEdit::RemoveJob { job: "zzz".into() }],
        pending,
        false,
    )
    .expect_err("unknown");
    assert_eq!(
        e.to_string(),
        "edit #0 (remove_job `zzz`): no job has this producerId"
    );
}
