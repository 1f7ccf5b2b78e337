//! What a run leaves in memory per node: a job, a node and an attempt keep their rarely set
//! fields behind one pointer (`extra`), and a run of no-op jobs must leave every one of them
//! unallocated — in the store's record as in the engine's, which apply the same changes. A node
//! or attempt that does hold one (a failure, an output) has it allocated and still reads flat.

use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::runner::WorkFailure;
use orchestrator_core::state::NodeState;
use orchestrator_core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, PlanRepository, PlanStatus, WorkOutput,
};

/// `count` jobs of `command` in a chain-and-fan shape (job `i` depends on job `i / 2`).
fn plan(count: usize, command: impl Fn(usize) -> String) -> PlanSpec {
    let mut spec = PlanSpec::new("memory").isolation(Isolation::None);
    for i in 0..count {
        let mut job = JobSpec::new(format!("job-{i:03}"), "t", WorkSpec::shell(command(i)));
        if i > 0 {
            job.dependencies.push(format!("job-{:03}", i / 2));
        }
        spec.jobs.push(job);
    }
    spec
}

/// Runs `spec`: `true` succeeds with nothing, `echo X` succeeds with output X, `false` fails.
async fn run(spec: PlanSpec) -> (PlanStatus, Vec<NodeState>) {
    let store = InMemoryPlanRepository::new();
    let orchestrator = Orchestrator::builder()
        .repository(store.clone())
        .runner(
            "shell",
            FnRunner::sync(|spec, _| match spec {
                WorkSpec::Shell(s) if s.command == "true" => Ok(WorkOutput::default()),
                WorkSpec::Shell(s) if s.command.starts_with("echo ") => {
                    Ok(WorkOutput::default().with_output(s.command[5..].to_owned()))
                }
                _ => Err(WorkFailure::new("failed on purpose").exit_code(1)),
            }),
        )
        .build()
        .expect("orchestrator");
    let id = orchestrator
        .create_plan(spec, std::env::temp_dir())
        .await
        .expect("plan");
    orchestrator.start(&id).await.expect("start");
    let status = orchestrator.wait(&id).await.expect("wait");
    let record = store.load(&id).await.expect("load");
    for job in &record.spec.jobs {
        assert!(
            !job.extra.is_allocated(),
            "{} keeps extra job fields it does not set",
            job.producer_id
        );
    }
    (status, record.state.nodes)
}

#[tokio::test]
async fn a_run_of_no_op_jobs_allocates_no_extra_fields() {
    let (status, nodes) = run(plan(64, |_| "true".into())).await;
    assert_eq!(status, PlanStatus::Succeeded);
    for node in &nodes {
        assert_eq!(node.attempts.len(), 1, "{}", node.id);
        assert!(!node.extra.is_allocated(), "{}: {:?}", node.id, node.extra);
        assert!(
            !node.attempts[0].extra.is_allocated(),
            "{}: {:?}",
            node.id,
            node.attempts[0].extra
        );
    }
}

#[tokio::test]
async fn what_a_node_or_attempt_does_hold_is_kept_and_reads_flat() {
    let (status, nodes) = run(plan(3, |i| match i {
        0 => "echo hello".into(),
        1 => "false".into(),
        _ => "true".into(),
    }))
    .await;
    assert_eq!(status, PlanStatus::Failed);
    let (echo, failed) = (&nodes[0], &nodes[1]);

    assert!(!echo.extra.is_allocated(), "{:?}", echo.extra);
    assert_eq!(echo.attempts[0].extra.output.as_deref(), Some("hello"));
    assert!(echo.attempts[0].extra.is_allocated());

    assert!(failed.extra.is_allocated());
    let error = failed.extra.error.as_deref().unwrap_or_default();
    assert!(error.contains("failed on purpose"), "{error}");
    assert!(failed.attempts[0].extra.failure_reason.is_some());

    // The JSON is flat, as it was before the fields moved: `error` sits next to `status`, and
    // `output` next to `number`; and it reads back to the same state.
    let json = serde_json::to_value(failed).expect("writes");
    assert_eq!(json["error"].as_str(), Some(error), "{json}");
    assert!(json.get("extra").is_none(), "{json}");
    let back: NodeState = serde_json::from_value(json).expect("reads");
    assert_eq!(&back, failed);
    let json = serde_json::to_value(echo).expect("writes");
    assert_eq!(
        json["attempts"][0]["output"].as_str(),
        Some("hello"),
        "{json}"
    );
    let back: NodeState = serde_json::from_value(json).expect("reads");
    assert_eq!(&back, echo);
    assert!(
        !back.extra.is_allocated(),
        "reading allocates what is set only"
    );
}
