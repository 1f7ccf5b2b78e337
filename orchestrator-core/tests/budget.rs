//! Budgets (SPEC §12) through the engine: usage adds up per plan (`"usage"` in the plan
//! JSON), and a finished attempt that takes it to the plan's `budget` pauses the plan with a
//! `BudgetReached` event, leaving running jobs alone; resuming goes on without pausing again.

use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, ValidationContext, WorkSpec};
use orchestrator_core::usage::Budget;
use orchestrator_core::{
    report, FnRunner, Orchestrator, OrchestratorEvent, PlanStatus, WorkOutput,
};
use serde_json::json;

/// Every job reports 1,000 tokens in and 0.25 USD.
fn orchestrator() -> Orchestrator {
    Orchestrator::builder()
        .runner(
            "shell",
            FnRunner::sync(|_, _| {
                let mut out = WorkOutput::default();
                out.metrics = Some(json!({"inputTokens": 1000, "costUsd": 0.25, "turns": 2}));
                Ok(out)
            }),
        )
        .build()
        .expect("build")
}

/// a -> b -> c -> d: one job at a time.
fn chain(budget: Option<Budget>) -> PlanSpec {
    let mut plan = PlanSpec::new("budgeted")
        .isolation(Isolation::None)
        .job(JobSpec::new("job-a", "A", WorkSpec::shell("a")))
        .job(JobSpec::new("job-b", "B", WorkSpec::shell("b")).depends_on(["job-a"]))
        .job(JobSpec::new("job-c", "C", WorkSpec::shell("c")).depends_on(["job-b"]))
        .job(JobSpec::new("job-d", "D", WorkSpec::shell("d")).depends_on(["job-c"]));
    plan.budget = budget;
    plan
}

#[tokio::test]
async fn usage_adds_up_in_the_plan_json() {
    let o = orchestrator();
    let dir = tempfile::tempdir().expect("tempdir");
    let id = o.run(chain(None), dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let doc = report::plan_json(&o.status(&id).await.expect("status"));
    assert_eq!(doc["usage"]["inputTokens"], 4000);
    assert_eq!(doc["usage"]["costUsd"], 1.0);
    assert_eq!(doc["usage"]["outputTokens"], 0);
}

#[tokio::test]
async fn reaching_the_budget_pauses_the_plan_once() {
    let o = orchestrator();
    let mut events = o.subscribe();
    let dir = tempfile::tempdir().expect("tempdir");
    let budget = Budget {
        cost_usd: Some(0.5),
        tokens: None,
    };
    let id = o.run(chain(Some(budget)), dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Paused);
    let record = o.status(&id).await.expect("status");
    let statuses: Vec<&str> = record
        .state
        .nodes
        .iter()
        .map(|n| n.status.as_str())
        .collect();
    assert_eq!(
        statuses,
        ["succeeded", "succeeded", "ready", "pending"],
        "paused at 0.50 USD"
    );
    let mut reached = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let OrchestratorEvent::BudgetReached { usage, budget, .. } = e {
            reached.push((usage.cost_usd, budget.cost_usd));
        }
    }
    assert_eq!(reached, [(0.5, Some(0.5))]);

    // A person looked and goes on: the rest runs without another pause.
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    while let Ok(e) = events.try_recv() {
        assert!(
            !matches!(e, OrchestratorEvent::BudgetReached { .. }),
            "paused once: {e:?}"
        );
    }
}

#[tokio::test]
async fn a_token_budget_counts_tokens_in_and_out() {
    let o = orchestrator();
    let dir = tempfile::tempdir().expect("tempdir");
    let budget = Budget {
        cost_usd: None,
        tokens: Some(3000),
    };
    let id = o.run(chain(Some(budget)), dir.path()).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Paused);
    let record = o.status(&id).await.expect("status");
    assert_eq!(record.state.counts().succeeded, 3, "paused at 3,000 tokens");
}

#[test]
fn bad_budgets_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (budget, field) in [
        (
            Budget {
                cost_usd: Some(-1.0),
                tokens: None,
            },
            "budget.costUsd",
        ),
        (
            Budget {
                cost_usd: None,
                tokens: Some(0),
            },
            "budget.tokens",
        ),
        (Budget::default(), "budget"),
    ] {
        let problems = orchestrator_core::plan::validate(
            &chain(Some(budget)),
            ValidationContext {
                repo: Some(dir.path()),
                scaffolding: false,
            },
        )
        .expect_err("refused");
        assert!(problems.to_string().contains(field), "{field}: {problems}");
    }
}
