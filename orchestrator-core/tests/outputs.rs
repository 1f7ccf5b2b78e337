//! Outputs (SPEC §12) through the engine: the work's output is journaled with its attempt and
//! shown as the job's `output`; a dependent gets its dependencies' outputs and commits in the
//! `ORCHESTRATOR_INPUTS` file and in `WorkContext::inputs`; outputs are redacted and capped;
//! a retry resumed past the work keeps the output of the attempt that ran it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use orchestrator_core::git::memory::MemoryGit;
use orchestrator_core::inputs::INPUTS_VAR;
use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::runner::{WorkFailure, MAX_OUTPUT_BYTES};
use orchestrator_core::{
    report, FnRunner, InMemoryPlanRepository, Orchestrator, PlanStatus, RetryRequest, WorkOutput,
};
use serde_json::Value;

/// What each run saw: producerId, the inputs file's document (if the env named one) and the
/// producerIds in `ctx.inputs`.
type Seen = Arc<Mutex<Vec<(String, Option<Value>, Vec<String>)>>>;

/// A runner whose work's output is the shell command's text (also written to
/// `<producerId>.txt`), after recording what it saw.
fn echoing(seen: Seen) -> FnRunner {
    FnRunner::sync(move |spec, ctx| {
        let file = ctx.env.get(INPUTS_VAR).map(PathBuf::from);
        let doc = match &file {
            Some(file) => {
                let text = std::fs::read(file).map_err(|e| WorkFailure::new(e.to_string()))?;
                Some(serde_json::from_slice(&text).map_err(|e| WorkFailure::new(e.to_string()))?)
            }
            None => None,
        };
        let ids = ctx
            .inputs
            .iter()
            .flat_map(|i| i.jobs.iter().map(|j| j.producer_id.clone()))
            .collect();
        seen.lock()
            .map_err(|_| WorkFailure::new("poisoned"))?
            .push((ctx.producer_id.clone(), doc, ids));
        let WorkSpec::Shell(shell) = spec else {
            return Err(WorkFailure::new("shell only"));
        };
        if shell.command == "fail" {
            return Err(WorkFailure::new("failed on purpose"));
        }
        // A change to commit (worktree isolation).
        std::fs::write(
            ctx.dir.join(format!("{}.txt", ctx.producer_id)),
            &shell.command,
        )
        .map_err(|e| WorkFailure::new(e.to_string()))?;
        Ok(WorkOutput::default().with_output(shell.command.clone()))
    })
}

fn orchestrator(seen: &Seen) -> Orchestrator {
    Orchestrator::builder()
        .repository(InMemoryPlanRepository::new())
        .runner("shell", echoing(seen.clone()))
        .build()
        .expect("build")
}

fn seen_by(seen: &Seen, producer: &str) -> (Option<Value>, Vec<String>) {
    let calls = seen.lock().expect("lock");
    let (_, doc, ids) = calls
        .iter()
        .rev()
        .find(|(p, _, _)| p == producer)
        .unwrap_or_else(|| panic!("{producer} never ran"));
    (doc.clone(), ids.clone())
}

#[tokio::test]
async fn outputs_reach_the_job_json_and_the_dependents_inputs() {
    let seen = Seen::default();
    let o = orchestrator(&seen);
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = PlanSpec::new("outputs")
        .isolation(Isolation::None)
        .job(JobSpec::new("count", "Count", WorkSpec::shell("42 files")))
        .job(JobSpec::new("list", "List", WorkSpec::shell("a.rs b.rs")))
        .job(
            JobSpec::new("report", "Report", WorkSpec::shell("done")).depends_on(["list", "count"]),
        )
        .job(JobSpec::new("alone", "Alone", WorkSpec::shell("solo")));
    let id = o.run(plan, dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);

    let record = o.status(&id).await.expect("status");
    let by_name = |name: &str| {
        record
            .spec
            .jobs
            .iter()
            .position(|j| j.producer_id == name)
            .unwrap_or_else(|| panic!("no job {name}"))
    };
    let count = by_name("count");
    assert_eq!(
        record.state.nodes[count]
            .last_attempt()
            .and_then(|a| a.extra.output.as_deref()),
        Some("42 files"),
        "the attempt records its work's output"
    );
    assert_eq!(report::job_json(&record, count)["output"], "42 files");

    let (doc, ids) = seen_by(&seen, "report");
    let doc = doc.expect("the dependent gets ORCHESTRATOR_INPUTS");
    assert_eq!(doc["count"]["output"], "42 files");
    assert_eq!(doc["list"]["output"], "a.rs b.rs");
    assert!(
        doc["count"]["commit"].is_null(),
        "isolation none: no commits"
    );
    assert_eq!(ids, ["list", "count"], "in the job's dependency order");
    let file = dir
        .path()
        .join(".orchestrator")
        .join("inputs")
        .join(format!("{}.json", record.state.nodes[by_name("report")].id));
    assert!(
        file.is_file(),
        "the inputs file is kept under .orchestrator/inputs"
    );

    let (doc, ids) = seen_by(&seen, "alone");
    assert!(
        doc.is_none() && ids.is_empty(),
        "no dependencies: no inputs"
    );
}

#[tokio::test]
async fn outputs_are_redacted_and_capped() {
    let seen = Seen::default();
    let o = orchestrator(&seen);
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = "s3cr3t-value-that-is-long-enough";
    let long = format!("{}\n{}", "x".repeat(100), "y".repeat(MAX_OUTPUT_BYTES + 10));
    let mut plan = PlanSpec::new("redacted")
        .isolation(Isolation::None)
        .job(JobSpec::new(
            "leak",
            "Leak",
            WorkSpec::shell(format!("token is {secret}")),
        ))
        .job(JobSpec::new("long", "Long", WorkSpec::shell(long)));
    plan.env.insert("DEPLOY_TOKEN".into(), secret.into());
    let id = o.run(plan, dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let record = o.status(&id).await.expect("status");
    assert_eq!(
        record.state.nodes[0].output(),
        Some("token is [REDACTED]"),
        "a secret never reaches the journal"
    );
    let kept = record.state.nodes[1].output().expect("output");
    assert!(
        kept.len() <= MAX_OUTPUT_BYTES,
        "capped: {} bytes",
        kept.len()
    );
    assert!(
        kept.starts_with('y') && kept.ends_with('y'),
        "the end is kept"
    );
}

#[tokio::test]
async fn a_failed_dependency_retried_hands_its_new_output_on() {
    let seen = Seen::default();
    let git = MemoryGit::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    git.init_repo(&repo, "main", &[("README.md", "hello\n")])
        .expect("init");
    let o = Orchestrator::builder()
        .git(git)
        .runner("shell", echoing(seen.clone()))
        .build()
        .expect("build");
    let plan = PlanSpec::new("retried")
        .job(JobSpec::new("first", "First", WorkSpec::shell("fail")))
        .job(JobSpec::new("second", "Second", WorkSpec::shell("second")).depends_on(["first"]));
    let id = o.run(plan, &repo).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let record = o.status(&id).await.expect("status");
    assert_eq!(report::job_json(&record, 0)["output"], Value::Null);

    let mut retry = RetryRequest::all_failed();
    retry.work = Some(WorkSpec::shell("fixed"));
    o.retry(&id, retry).await.expect("retry");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let record = o.status(&id).await.expect("status");
    let (doc, _) = seen_by(&seen, "second");
    let doc = doc.expect("inputs");
    assert_eq!(doc["first"]["output"], "fixed");
    assert_eq!(
        doc["first"]["commit"].as_str(),
        record.state.nodes[0].extra.commit.as_deref(),
        "worktree isolation: the dependency's commit is handed on"
    );
}
