//! Quickstart: a small diamond-shaped plan run by the engine, with live output.
//!
//! ```text
//! cargo run --release --example quickstart
//! ```
//! Jobs are closures here (no git, no agent CLI needed), so it runs anywhere; every event the
//! engine publishes is printed as it happens.

use std::time::{Duration, Instant};

use futures::StreamExt;
use orchestrator::core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator::core::runner::{LogStream, WorkFailure};
use orchestrator::core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, OrchestratorEvent, PlanStatus, RetryRequest,
    WorkOutput,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A "shell" runner that pretends: sleeps for the number of ms in the command and logs.
    let runner = FnRunner::new(|spec: WorkSpec, ctx| async move {
        let WorkSpec::Shell(shell) = spec else {
            return Err(WorkFailure::new("only shell work in this demo"));
        };
        if shell.command == "exit 1" {
            return Err(WorkFailure::new("exit code 1").exit_code(1));
        }
        let ms: u64 = shell
            .command
            .trim_start_matches("sleep ")
            .parse()
            .unwrap_or(100);
        ctx.log.line(
            LogStream::Stdout,
            &format!("{} working for {ms} ms", ctx.producer_id),
        );
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(WorkOutput::default())
    });

    let orchestrator = Orchestrator::builder()
        .repository(InMemoryPlanRepository::new())
        .runner("shell", runner)
        .build()?;

    let plan = PlanSpec::new("quickstart")
        .isolation(Isolation::None)
        .max_parallel(2)
        .job(JobSpec::new(
            "fetch",
            "Fetch sources",
            WorkSpec::shell("sleep 150"),
        ))
        .job(JobSpec::new("lint", "Lint", WorkSpec::shell("sleep 200")).depends_on(["fetch"]))
        .job(JobSpec::new("build", "Build", WorkSpec::shell("exit 1")).depends_on(["fetch"]))
        .job(
            JobSpec::new("test", "Test", WorkSpec::shell("sleep 100"))
                .depends_on(["lint", "build"]),
        );

    // Live output: every event, as it happens.
    let names: Vec<String> = plan.jobs.iter().map(|j| j.producer_id.clone()).collect();
    let name = move |n: usize| names.get(n).cloned().unwrap_or_else(|| format!("#{n}"));
    let started = Instant::now();
    let mut events = Box::pin(orchestrator.events());
    let printer = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let t = started.elapsed().as_millis();
            match event {
                OrchestratorEvent::NodeTransition { node, from, to, .. } => {
                    println!("{t:>6} ms  {:<6} {from} -> {to}", name(node))
                }
                OrchestratorEvent::Log { node, line, .. } => {
                    println!("{t:>6} ms  {:<6} | {line}", name(node))
                }
                OrchestratorEvent::PlanStatusChanged { to, .. } => {
                    println!("{t:>6} ms  plan is {to}")
                }
                _ => {}
            }
        }
    });

    let id = orchestrator.run(plan, std::env::temp_dir()).await?;
    let status = orchestrator.wait(&id).await?;
    println!("\nfirst run: {status} (build failed, test is blocked, lint succeeded)");
    assert_eq!(status, PlanStatus::Failed);

    // Fix the failing job and retry it: its dependents are unblocked and run.
    orchestrator
        .retry(
            &id,
            RetryRequest::jobs(["build"]).with_work(WorkSpec::shell("sleep 120")),
        )
        .await?;
    let status = orchestrator.wait(&id).await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    printer.abort();

    let record = orchestrator.status(&id).await?;
    println!("\nafter retry: {status}");
    for (job, node) in record.spec.jobs.iter().zip(&record.state.nodes) {
        println!(
            "  {:<6} {:<10} attempts={}",
            job.producer_id,
            node.status.to_string(),
            node.attempts.len()
        );
    }
    Ok(())
}
