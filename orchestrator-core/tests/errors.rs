//! Errors a caller branches on are typed (issue 11): `InvalidState` carries a
//! [`StateProblem`], `Config` a [`ConfigProblem`]; their messages read as before.

use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::runner::WorkFailure;
use orchestrator_core::{
    ConfigProblem, Error, FnRunner, Orchestrator, OrchestratorOptions, PlanStatus, RetryRequest,
    StateProblem, WorkOutput,
};

#[tokio::test]
async fn state_problems_are_typed() {
    let o = Orchestrator::builder()
        .runner(
            "shell",
            FnRunner::sync(|spec, _| match spec {
                WorkSpec::Shell(s) if s.command == "false" => Err(WorkFailure::new("no")),
                _ => Ok(WorkOutput::default()),
            }),
        )
        .build()
        .expect("build");
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = PlanSpec::new("typed")
        .isolation(Isolation::None)
        .job(JobSpec::new("good", "Good", WorkSpec::shell("true")))
        .job(JobSpec::new("bad", "Bad", WorkSpec::shell("false")));
    let id = o.run(plan, dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);

    let e = o
        .retry(&id, RetryRequest::jobs(["good"]))
        .await
        .expect_err("good did not fail");
    match &e {
        Error::InvalidState {
            problem: StateProblem::NotFailed { job, status },
            ..
        } => {
            assert_eq!(job, "good");
            assert_eq!(status.as_str(), "succeeded");
        }
        other => panic!("not a typed problem: {other:?}"),
    }
    assert!(e
        .to_string()
        .ends_with("job `good` is succeeded; only failed jobs can be retried"));
    assert_eq!(e.kind(), "invalid_state");

    let e = o.force_fail(&id, "good").await.expect_err("not running");
    assert!(
        matches!(
            &e,
            Error::InvalidState {
                problem: StateProblem::NotRunning { .. },
                ..
            }
        ),
        "{e:?}"
    );
    let e = o.cancel(&id).await.expect_err("the plan has ended");
    assert!(
        matches!(
            &e,
            Error::InvalidState {
                problem: StateProblem::Ended {
                    status: PlanStatus::Failed
                },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .ends_with("the plan has already ended (failed)"),
        "{e}"
    );
}

#[test]
fn config_problems_are_typed() {
    let e = Orchestrator::builder()
        .options(OrchestratorOptions::default().global_capacity(0))
        .build()
        .expect_err("no capacity");
    assert!(
        matches!(e, Error::Config(ConfigProblem::NoCapacity)),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "invalid orchestrator configuration: global_capacity must be at least 1 (it bounds how \
         many jobs run at once)"
    );
    assert_eq!(e.kind(), "config");
}
