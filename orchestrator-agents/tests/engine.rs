//! End to end through the engine: an `isolation: none` plan whose jobs are real shell commands
//! and processes, files flowing along the DAG, and a failure blocking its dependent.
#![cfg(unix)]

mod common;

use common::node;
use orchestrator_agents::{ProcessRunner, ShellRunner};
use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::repository::LogQuery;
use orchestrator_core::state::FailureReason;
use orchestrator_core::{NodeStatus, Orchestrator, Phase, PlanStatus};

#[tokio::test]
async fn a_plan_of_shell_and_process_jobs_runs_in_dependency_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = Orchestrator::builder()
        .runner("shell", ShellRunner::new())
        .runner("process", ProcessRunner::new())
        .build()
        .expect("build");
    let mut plan = PlanSpec::new("agents e2e")
        .isolation(Isolation::None)
        .job(JobSpec::new(
            "write-a",
            "Write a",
            WorkSpec::shell("printf alpha > a.txt && echo wrote a"),
        ))
        .job(
            JobSpec::new(
                "copy-b",
                "Copy a to b",
                WorkSpec::process("cp", ["a.txt", "b.txt"]),
            )
            .depends_on(["write-a"]),
        )
        .job(
            JobSpec::new(
                "combine",
                "Combine",
                WorkSpec::shell(
                    "cat a.txt b.txt > both.txt && echo \"$GREETING\" >> both.txt && cat both.txt",
                ),
            )
            .depends_on(["write-a", "copy-b"])
            .env("GREETING", "hello from $PLAN_NAME"),
        )
        .job(JobSpec::new(
            "broken",
            "Fails",
            WorkSpec::shell("echo 'bad input on line 7' >&2; exit 4"),
        ))
        .job(
            JobSpec::new(
                "after-broken",
                "Never runs",
                WorkSpec::shell("touch must-not-exist"),
            )
            .depends_on(["broken"]),
        );
    plan.env.insert("PLAN_NAME".into(), "the plan".into());

    let id = o.run(plan, dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = o.status(&id).await.expect("status");

    for ok in ["write-a", "copy-b", "combine"] {
        assert_eq!(node(&r, ok).status, NodeStatus::Succeeded, "{ok}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("both.txt")).expect("combined"),
        "alphaalphahello from the plan\n"
    );

    let broken = node(&r, "broken");
    assert_eq!(broken.status, NodeStatus::Failed);
    let attempt = broken.last_attempt().expect("attempt");
    assert_eq!(
        attempt.extra.failure_reason,
        Some(FailureReason::PhaseFailed)
    );
    assert_eq!(attempt.extra.failed_phase, Some(Phase::Work));
    let error = attempt.extra.error.as_deref().unwrap_or("");
    assert!(error.contains("exit code 4"), "{error}");
    assert!(error.contains("bad input on line 7"), "{error}");
    assert_eq!(node(&r, "after-broken").status, NodeStatus::Blocked);
    assert!(!dir.path().join("must-not-exist").exists());

    let combine = node(&r, "combine");
    let log = o
        .repository()
        .read_log(&id, &combine.id, LogQuery::new().phase(Phase::Work))
        .await
        .expect("log");
    assert!(log.contains("alphaalphahello from the plan"), "{log}");
    let log = o
        .repository()
        .read_log(&id, &broken.id, LogQuery::new().phase(Phase::Work))
        .await
        .expect("log");
    assert!(log.contains("[stderr] bad input on line 7"), "{log}");
}
