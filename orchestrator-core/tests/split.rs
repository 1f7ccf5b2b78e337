//! Plans that grow (SPEC §12) through the engine, on the in-memory store: a job whose work
//! leaves a split manifest becomes `completed_split`, its items run as sub-jobs
//! `<parent>/<name>` in their dependency order, and then the job goes on and succeeds, its
//! dependents after it. A bad manifest fails the job naming the file and the field; a failed
//! sub-job fails its parent (`composite_failed`); a restart in the middle goes on.

use std::sync::{Arc, Mutex};

use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, SplitPolicy, WorkSpec};
use orchestrator_core::state::{AttemptStatus, FailureReason, NodeStatus};
use orchestrator_core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, PlanStatus, RetryRequest, WorkOutput,
};

type Ran = Arc<Mutex<Vec<String>>>;

const MANIFEST: &str = r#"{"items": [
    {"name": "one", "task": "First part", "instructions": "one"},
    {"name": "two", "task": "Second part", "instructions": "two", "dependsOn": ["one"]},
    {"name": "three", "task": "Third part", "instructions": "three"}]}"#;

/// Shell jobs whose command is recorded; `big` writes `manifest` into its folder, and a
/// command `fail` fails the first time.
fn orchestrator(repo: &InMemoryPlanRepository, ran: &Ran, manifest: &'static str) -> Orchestrator {
    builder(repo, ran, manifest, false)
}

/// With `block`, the sub-jobs run until they are stopped.
fn builder(
    repo: &InMemoryPlanRepository,
    ran: &Ran,
    manifest: &'static str,
    block: bool,
) -> Orchestrator {
    Orchestrator::builder()
        .repository(repo.clone())
        .runner("shell", shell(ran, manifest, block))
        .build()
        .expect("build")
}

/// The shell runner of [`builder`].
fn shell(ran: &Ran, manifest: &'static str, block: bool) -> FnRunner {
    let ran = ran.clone();
    let failed = Arc::new(Mutex::new(false));
    FnRunner::new(move |spec, ctx| {
        let ran = ran.clone();
        let failed = failed.clone();
        async move {
            let WorkSpec::Shell(s) = spec else {
                return Ok(WorkOutput::default());
            };
            if block && ctx.producer_id.contains('/') {
                ctx.cancel.cancelled().await;
                return Err(orchestrator_core::runner::WorkFailure::canceled());
            }
            ran.lock().expect("lock").push(s.command.clone());
            if s.command == "big" {
                std::fs::write(ctx.dir.join(".orchestrator-split.json"), manifest)
                    .expect("write the manifest");
            }
            if s.command == "fail" {
                let mut f = failed.lock().expect("lock");
                if !*f {
                    *f = true;
                    return Err(orchestrator_core::runner::WorkFailure::new("it failed"));
                }
            }
            Ok(WorkOutput::default())
        }
    })
}

fn plan() -> PlanSpec {
    let mut big = JobSpec::new("big", "Do it all", WorkSpec::shell("big"));
    big.extra.make_mut().split = Some(SplitPolicy::Allow);
    PlanSpec::new("growing")
        .isolation(Isolation::None)
        .job(big)
        .job(JobSpec::new("after", "After", WorkSpec::shell("after")).depends_on(["big"]))
}

fn ran(r: &Ran) -> Vec<String> {
    r.lock().expect("lock").clone()
}

#[tokio::test]
async fn a_split_job_runs_its_items_as_sub_jobs_then_succeeds() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = orchestrator(&repo, &r, MANIFEST);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = o.run(plan(), dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);

    let order = ran(&r);
    assert_eq!(order.first().map(String::as_str), Some("big"));
    assert_eq!(order.last().map(String::as_str), Some("after"));
    let pos = |c: &str| order.iter().position(|x| x == c).expect(c);
    assert!(pos("one") < pos("two"), "{order:?}");
    assert_eq!(order.len(), 5, "big's own work ran once: {order:?}");
    assert!(
        !dir.path().join(".orchestrator-split.json").exists(),
        "taken"
    );

    let record = o.status(&id).await.expect("status");
    let ids: Vec<&str> = record
        .spec
        .jobs
        .iter()
        .map(|j| j.producer_id.as_str())
        .collect();
    assert_eq!(ids, ["big", "after", "big/one", "big/two", "big/three"]);
    let big = &record.state.nodes[0];
    assert_eq!(big.status, NodeStatus::Succeeded);
    assert_eq!(
        big.attempts.len(),
        2,
        "the split run, then the merge of its sub-jobs"
    );
    assert_eq!(big.attempts[0].status, AttemptStatus::Succeeded);
    assert_eq!(
        big.output(),
        Some("split into 3 sub-jobs: big/one, big/two, big/three")
    );
    let two = &record.spec.jobs[3];
    assert_eq!(two.extra.parent.as_deref(), Some("big"));
    assert_eq!(two.dependencies, ["big/one"]);
    assert_eq!(two.task, "Second part");
    for n in &record.state.nodes[2..5] {
        assert_eq!(n.status, NodeStatus::Succeeded);
    }
}

#[tokio::test]
async fn a_bad_manifest_fails_the_job_naming_the_file_and_the_field() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let bad = r#"{"items": [{"name": "one", "task": "", "instructions": "one"}]}"#;
    let o = orchestrator(&repo, &r, bad);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = o.run(plan(), dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let record = o.status(&id).await.expect("status");
    assert_eq!(record.spec.jobs.len(), 2, "nothing added");
    let big = &record.state.nodes[0];
    let last = big.last_attempt().expect("attempt");
    assert_eq!(
        last.extra.failure_reason,
        Some(FailureReason::CompositeFailed)
    );
    assert_eq!(
        last.extra.error.as_deref(),
        Some(".orchestrator-split.json: items[0].task: must not be empty")
    );
    assert_eq!(record.state.nodes[1].status, NodeStatus::Blocked);
    assert_eq!(ran(&r), ["big"]);
}

#[tokio::test]
async fn a_failed_sub_job_fails_its_parent_and_a_retry_goes_on() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let failing = r#"{"items": [
        {"name": "good", "task": "Good", "instructions": "good"},
        {"name": "flaky", "task": "Flaky", "instructions": "fail"},
        {"name": "later", "task": "Later", "instructions": "later", "dependsOn": ["flaky"]}]}"#;
    let o = orchestrator(&repo, &r, failing);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = o.run(plan(), dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let record = o.status(&id).await.expect("status");
    let status = |p: &str| {
        let i = record
            .spec
            .jobs
            .iter()
            .position(|j| j.producer_id == p)
            .expect(p);
        &record.state.nodes[i]
    };
    assert_eq!(status("big/flaky").status, NodeStatus::Failed);
    assert_eq!(status("big/later").status, NodeStatus::Blocked);
    assert_eq!(status("big/good").status, NodeStatus::Succeeded);
    let big = status("big");
    assert_eq!(big.status, NodeStatus::Failed);
    let last = big.last_attempt().expect("attempt");
    assert_eq!(
        last.extra.failure_reason,
        Some(FailureReason::CompositeFailed)
    );
    assert!(
        last.extra
            .error
            .as_deref()
            .is_some_and(|e| e.contains("big/flaky")),
        "{:?}",
        last.extra.error
    );
    assert_eq!(status("after").status, NodeStatus::Blocked);

    // Retrying what failed runs the sub-job again, then the parent goes on (no second split).
    o.retry(&id, RetryRequest::all_failed())
        .await
        .expect("retry");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let runs = ran(&r);
    assert_eq!(runs.iter().filter(|c| *c == "big").count(), 1, "{runs:?}");
    assert_eq!(runs.iter().filter(|c| *c == "fail").count(), 2, "{runs:?}");
}

#[tokio::test]
async fn a_restart_while_sub_jobs_wait_goes_on_without_repeating_the_split() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let id = {
        // The sub-jobs run until the release stops them.
        let o = builder(&repo, &r, MANIFEST, true);
        let id = o.run(plan(), dir.path()).await.expect("run");
        loop {
            let record = o.status(&id).await.expect("status");
            if record.state.nodes[0].status == NodeStatus::CompletedSplit {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        o.release(&id).await.expect("release");
        id
    };
    let o = orchestrator(&repo, &r, MANIFEST);
    o.open_plan(&id).await.expect("reopen");
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let runs = ran(&r);
    assert_eq!(runs.iter().filter(|c| *c == "big").count(), 1, "{runs:?}");
    for item in ["one", "two", "three", "after"] {
        assert_eq!(
            runs.iter().filter(|c| *c == item).count(),
            1,
            "{item}: {runs:?}"
        );
    }
}

/// A controller that answers the split with the sub-jobs it was made with.
#[derive(Debug)]
struct Answer(Vec<JobSpec>);

impl orchestrator_core::composite::Controller for Answer {
    fn decide(
        &self,
        facts: &orchestrator_core::composite::CompositeFacts<'_>,
    ) -> orchestrator_core::composite::Decision {
        use orchestrator_core::composite::Decision;
        match facts.request {
            Some(_) => Decision::Spawn(self.0.clone()),
            None => Decision::Done { output: None },
        }
    }
}

#[tokio::test]
async fn a_decision_that_cannot_be_applied_fails_the_job_with_nothing_half_applied() {
    let sub = |name: &str, deps: &[&str]| {
        JobSpec::new(format!("big/{name}"), name, WorkSpec::shell(name))
            .depends_on(deps.iter().map(|d| format!("big/{d}")))
    };
    let nine: Vec<JobSpec> = (0..9).map(|i| sub(&format!("part-{i}"), &[])).collect();
    let cases: Vec<(&str, Vec<JobSpec>, &str)> = vec![
        (
            "a cycle",
            vec![sub("aaa", &["bbb"]), sub("bbb", &["aaa"])],
            "cycle",
        ),
        (
            "a reused name",
            vec![sub("aaa", &[]), sub("aaa", &[])],
            "already exists",
        ),
        ("too many", nine, "at most 8"),
        (
            "a name outside the job",
            vec![JobSpec::new("elsewhere", "x", WorkSpec::shell("x"))],
            "is not named `big/<name>`",
        ),
        (
            "a dependency outside the job",
            vec![JobSpec::new("big/aaa", "x", WorkSpec::shell("x")).depends_on(["after"])],
            "no sub-job of `big`",
        ),
    ];
    for (label, jobs, words) in cases {
        let o = Orchestrator::builder()
            .controller("split", Answer(jobs))
            .runner("shell", shell(&Ran::default(), MANIFEST, false))
            .build()
            .expect("build");
        let dir = tempfile::tempdir().expect("tempdir");
        let id = o.run(plan(), dir.path()).await.expect("run");
        assert_eq!(
            o.wait(&id).await.expect("wait"),
            PlanStatus::Failed,
            "{label}"
        );
        let record = o.status(&id).await.expect("status");
        assert_eq!(record.spec.jobs.len(), 2, "{label}: nothing added");
        let big = &record.state.nodes[0];
        assert_eq!(big.status, NodeStatus::Failed, "{label}");
        let last = big.last_attempt().expect("attempt");
        assert_eq!(
            last.extra.failure_reason,
            Some(FailureReason::CompositeFailed),
            "{label}"
        );
        let error = last.extra.error.clone().unwrap_or_default();
        assert!(error.contains(words), "{label}: {error}");
        assert_eq!(record.state.nodes[1].status, NodeStatus::Blocked, "{label}");
    }
}

#[tokio::test]
async fn splits_nest_three_levels_deep_and_no_deeper() {
    const NEST: &str = r#"{"items": [{"name": "aaa", "task": "Deeper", "instructions": "nest"}]}"#;
    let o = Orchestrator::builder()
        .runner(
            "shell",
            FnRunner::sync(|_, ctx| {
                // Every job asks to split again.
                std::fs::write(ctx.dir.join(".orchestrator-split.json"), NEST)
                    .expect("write the manifest");
                Ok(WorkOutput::default())
            }),
        )
        .build()
        .expect("build");
    let dir = tempfile::tempdir().expect("tempdir");
    let id = o.run(plan(), dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let record = o.status(&id).await.expect("status");
    let ids: Vec<&str> = record
        .spec
        .jobs
        .iter()
        .map(|j| j.producer_id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["big", "after", "big/aaa", "big/aaa/aaa", "big/aaa/aaa/aaa"],
        "the job three levels down did not split"
    );
    assert!(
        dir.path().join(".orchestrator-split.json").exists(),
        "its manifest is left where it was"
    );
}

#[tokio::test]
async fn canceling_while_sub_jobs_run_cancels_the_split_job_too() {
    let (repo, r) = (InMemoryPlanRepository::new(), Ran::default());
    let o = builder(&repo, &r, MANIFEST, true);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = o.run(plan(), dir.path()).await.expect("run");
    while o.status(&id).await.expect("status").state.nodes[0].status != NodeStatus::CompletedSplit {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    o.cancel(&id).await.expect("cancel");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Canceled);
    let record = o.status(&id).await.expect("status");
    for (job, node) in record.spec.jobs.iter().zip(&record.state.nodes) {
        assert_eq!(node.status, NodeStatus::Canceled, "{}", job.producer_id);
    }
}
