//! Secrets never reach what the engine writes down (issue 12, item 3): the values of secret
//! variables of the plan's, job's and spec's `env`, of configured names and of the host's
//! environment, and known token shapes, are redacted from the phase log, the log events and
//! the failure message, whatever the runner printed. The job itself gets the real values.

use std::sync::{Arc, Mutex};

use orchestrator_core::plan::{Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::redact::{SecretNames, REDACTED};
use orchestrator_core::repository::LogQuery;
use orchestrator_core::runner::{LogStream, WorkFailure};
use orchestrator_core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, OrchestratorEvent, OrchestratorOptions,
    PlanRepository, PlanStatus, WorkContext, WorkOutput,
};

const PLAN_KEY: &str = "plan-level-secret-1";
const JOB_TOKEN: &str = "job-level-secret-2";
const SPEC_PASSWORD: &str = "spec-level-secret-3";
const CONFIGURED: &str = "configured-secret-4";
const SHAPED: &str = "sk-abcdefghijklmnopqrstuvwxyz012345";

fn spec() -> PlanSpec {
    let mut work = WorkSpec::shell("print");
    if let WorkSpec::Shell(s) = &mut work {
        s.extra
            .make_mut()
            .env
            .insert("DB_PASSWORD".into(), SPEC_PASSWORD.into());
    }
    let mut spec = PlanSpec::new("secrets")
        .isolation(Isolation::None)
        .job(JobSpec::new("print", "Print", work).env("MY_TOKEN", JOB_TOKEN))
        .job(
            JobSpec::new("fail", "Fail", WorkSpec::shell("fail"))
                .env("DEPLOY_HOOK", CONFIGURED)
                .depends_on(["print"]),
        );
    spec.env.insert("API_KEY".into(), PLAN_KEY.into());
    spec
}

/// Prints every variable it was given (and a token in prose); `fail` fails quoting them.
fn runner(seen: Arc<Mutex<Vec<String>>>) -> FnRunner {
    FnRunner::sync(move |spec, ctx: &WorkContext| {
        let WorkSpec::Shell(s) = spec else {
            return Err(WorkFailure::new("not shell"));
        };
        let mut env = ctx.env.clone();
        env.extend(s.extra.env.clone());
        let all: Vec<String> = env.values().cloned().collect();
        seen.lock().expect("seen").extend(all.iter().cloned());
        for value in &all {
            ctx.log.line(LogStream::Stdout, &format!("value={value}"));
        }
        ctx.log.line(
            LogStream::Stderr,
            &format!("curl -H 'Authorization: Bearer {SHAPED}'"),
        );
        if s.command == "fail" {
            return Err(WorkFailure::new(format!("exit 1: {}", all.join(" "))).exit_code(1));
        }
        Ok(WorkOutput::default())
    })
}

#[tokio::test]
async fn secrets_are_redacted_from_logs_events_and_failures() {
    let store = InMemoryPlanRepository::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let orchestrator = Orchestrator::builder()
        .repository(store.clone())
        .runner("shell", runner(seen.clone()))
        .options(OrchestratorOptions::default().secret_env(SecretNames::parse("DEPLOY_HOOK")))
        .build()
        .expect("builder");
    let mut events = orchestrator.subscribe();
    let id = orchestrator
        .run(spec(), std::env::temp_dir())
        .await
        .expect("run");
    assert_eq!(
        orchestrator.wait(&id).await.expect("wait"),
        PlanStatus::Failed
    );

    let secrets = [PLAN_KEY, JOB_TOKEN, SPEC_PASSWORD, CONFIGURED, SHAPED];
    // The jobs got the real values.
    let seen = seen.lock().expect("seen").clone();
    for secret in &secrets[..4] {
        assert!(
            seen.iter().any(|v| v == secret),
            "{secret} not given to the job"
        );
    }

    let record = orchestrator.status(&id).await.expect("status");
    let mut written = String::new();
    for node in &record.state.nodes {
        written += &store
            .read_log(&id, &node.id, LogQuery::new())
            .await
            .expect("log");
        written += &format!("{:?}", node.extra.error);
        for attempt in &node.attempts {
            written += &format!("{:?}", attempt.extra.error);
        }
    }
    while let Ok(event) = events.try_recv() {
        match event {
            OrchestratorEvent::Log { line, .. } => written += &line,
            other => written += &format!("{other:?}"),
        }
    }
    assert!(written.contains("value=[REDACTED]"), "{written}");
    assert!(written.contains(&format!("Bearer {REDACTED}")), "{written}");
    assert!(
        written.contains("exit 1: "),
        "the failure is there: {written}"
    );
    for secret in secrets {
        assert!(
            !written.contains(secret),
            "{secret} written down:\n{written}"
        );
    }
}

#[test]
fn an_env_var_configures_more_secret_names() {
    // The variable is read by hosts through SecretNames::from_env; here its parsing.
    let names = SecretNames::parse("DEPLOY_HOOK,MY_*_URL");
    assert!(names.is_secret("DEPLOY_HOOK") && names.is_secret("MY_DB_URL"));
    assert_eq!(
        orchestrator_core::redact::SECRET_ENV_VAR,
        "ORCHESTRATOR_SECRET_ENV"
    );
}
