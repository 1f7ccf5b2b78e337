//! Teams and pipelines through the real engine, on real git repositories and worktrees, with
//! a scripted agent runner standing in for the CLIs (whose replies the real-CLI tests cover):
//! every sub-job runs in its own worktree, and what lands on the target branch is checked
//! with the `git` CLI.

use std::sync::{Arc, Mutex};

use orchestrator_core::plan::{JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::state::{FailureReason, PlanRecord};
use orchestrator_core::{FnRunner, NodeStatus, Orchestrator, PlanStatus, WorkOutput};
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::TempRepo;

/// What the scripted agent is asked (its instructions), in order.
type Asked = Arc<Mutex<Vec<(String, String)>>>;

/// An agent runner that answers with `answer(producerId, instructions)`, writing the files it
/// returns into the job's worktree.
fn agent(
    asked: &Asked,
    answer: impl Fn(&str, &str) -> (Vec<(String, String)>, String) + Send + Sync + 'static,
) -> FnRunner {
    let asked = asked.clone();
    let answer = Arc::new(answer);
    FnRunner::new(move |spec, ctx| {
        let asked = asked.clone();
        let answer = answer.clone();
        async move {
            let WorkSpec::Agent(a) = spec else {
                return Ok(WorkOutput::default());
            };
            let instructions = a.instructions.unwrap_or_default();
            asked
                .lock()
                .expect("lock")
                .push((ctx.producer_id.clone(), instructions.clone()));
            let (files, reply) = answer(&ctx.producer_id, &instructions);
            for (path, text) in files {
                std::fs::write(ctx.dir.join(path), text).expect("write");
            }
            Ok(WorkOutput::default().with_output(reply))
        }
    })
}

fn engine(runner: FnRunner) -> Orchestrator {
    orchestrator_workflows::register(Orchestrator::builder())
        .git(Git2Operations::new())
        .runner("agent", runner)
        .build()
        .expect("build")
}

fn team_plan(work: serde_json::Value) -> PlanSpec {
    let work: WorkSpec = serde_json::from_value(work).expect("work");
    PlanSpec::new("team")
        .target_branch("feature/team")
        .job(JobSpec::new("team", "the team", work))
}

async fn finish(o: &Orchestrator, plan: PlanSpec, repo: &TempRepo) -> PlanRecord {
    let id = o.run(plan, &repo.dir).await.expect("run");
    tokio::time::timeout(std::time::Duration::from_secs(60), o.wait(&id))
        .await
        .expect("in time")
        .expect("wait");
    o.status(&id).await.expect("status")
}

fn status_of(record: &PlanRecord, id: &str) -> NodeStatus {
    let i = record
        .spec
        .jobs
        .iter()
        .position(|j| j.producer_id == id)
        .unwrap_or_else(|| panic!("no job {id}"));
    record.state.nodes[i].status
}

fn output_of(record: &PlanRecord, id: &str) -> serde_json::Value {
    let i = record
        .spec
        .jobs
        .iter()
        .position(|j| j.producer_id == id)
        .expect("job");
    let text = record.state.nodes[i].output().expect("an output");
    serde_json::from_str(text).expect("JSON output")
}

fn ids(record: &PlanRecord) -> Vec<&str> {
    record
        .spec
        .jobs
        .iter()
        .map(|j| j.producer_id.as_str())
        .collect()
}

/// The reflect team of the issue: two workers on different files; the first synthesis
/// scores below the threshold, the second reaches it.
fn reflect_answer(id: &str, text: &str) -> (Vec<(String, String)>, String) {
    let round = id.split('/').nth(1).unwrap_or("0").to_owned();
    if id.ends_with("/plan") {
        return (
            vec![],
            "Plan:\n@worker:Alice write the parser\n@worker:bob write the docs\n@worker:carol nobody\n".into(),
        );
    }
    if id.ends_with("/synthesis") {
        return (
            vec![],
            format!("Iteration {round}: parser and docs in place, round {round} of review."),
        );
    }
    if id.ends_with("/evaluate") {
        let score = if round == "1" { "0.5" } else { "0.95" };
        return (vec![], format!("Score: {score}\nRationale: round {round}"));
    }
    let worker = id.rsplit('/').next().unwrap_or("x").to_owned();
    assert!(
        text.contains("Build the parser and its docs"),
        "the original request: {text}"
    );
    (
        vec![(
            format!("{worker}-{round}.txt"),
            format!("{worker} {round}\n"),
        )],
        format!("{worker} wrote {worker}-{round}.txt"),
    )
}

#[tokio::test]
async fn a_reflect_team_iterates_until_the_evaluator_is_satisfied_and_lands_every_workers_files() {
    let repo = TempRepo::new();
    let asked = Asked::default();
    let o = engine(agent(&asked, reflect_answer));
    let plan = team_plan(serde_json::json!({
        "type": "team",
        "prompt": "Build the parser and its docs",
        "workers": [{"name": "alice", "systemPrompt": "You are a parser expert."}, {"name": "bob"}],
        "evaluator": {"threshold": 0.9}
    }));
    let record = finish(&o, plan, &repo).await;
    assert_eq!(record.status(), PlanStatus::Succeeded, "{:?}", ids(&record));
    assert_eq!(
        ids(&record),
        [
            "team",
            "team/1/plan",
            "team/1/alice",
            "team/1/bob",
            "team/1/synthesis",
            "team/1/evaluate",
            "team/2/plan",
            "team/2/alice",
            "team/2/bob",
            "team/2/synthesis",
            "team/2/evaluate",
        ]
    );
    let out = output_of(&record, "team");
    assert_eq!(out["exitReason"], "goal_met");
    assert_eq!(out["iterations"], 2);
    assert_eq!(out["scores"], serde_json::json!([0.5, 0.95]));
    assert_eq!(out["trends"], serde_json::json!(["improving"]));
    // Every worker's file of both iterations is on the target branch.
    let files = repo.files_at("feature/team");
    for f in [
        "alice-1.txt",
        "bob-1.txt",
        "alice-2.txt",
        "bob-2.txt",
        "README.md",
    ] {
        assert!(files.iter().any(|x| x == f), "{f} in {files:?}");
    }
    // The worker's specialty leads its prompt; the re-plan shows the last score.
    let asked = asked.lock().expect("lock").clone();
    let alice = &asked
        .iter()
        .find(|(id, _)| id == "team/1/alice")
        .expect("alice")
        .1;
    assert!(alice.starts_with("You are a parser expert."), "{alice}");
    let replan = &asked
        .iter()
        .find(|(id, _)| id == "team/2/plan")
        .expect("replan")
        .1;
    assert!(
        replan.contains("0.50") && replan.contains("Iteration 1"),
        "{replan}"
    );
}

#[tokio::test]
async fn identical_syntheses_end_a_reflect_loop_as_stalled_on_the_second_repeat() {
    let repo = TempRepo::new();
    let asked = Asked::default();
    let o = engine(agent(&asked, |id, _| {
        if id.ends_with("/plan") {
            (vec![], "@worker:alice try again".into())
        } else if id.ends_with("/synthesis") {
            (
                vec![],
                "The same synthesis every time.\n[[NEEDS_ITERATION]]".into(),
            )
        } else {
            (vec![], "did something".into())
        }
    }));
    let plan = team_plan(serde_json::json!({
        "type": "team", "prompt": "Loop", "workers": [{"name": "alice"}], "maxIterations": 5
    }));
    let record = finish(&o, plan, &repo).await;
    assert_eq!(status_of(&record, "team"), NodeStatus::Failed);
    let node = &record.state.nodes[0];
    let reason = node
        .last_attempt()
        .and_then(|a| a.extra.error.clone())
        .unwrap_or_default();
    assert!(reason.starts_with("stalled"), "{reason}");
    assert!(reason.contains("after 3 iteration"), "{reason}");
    assert_eq!(
        record
            .spec
            .jobs
            .iter()
            .filter(|j| j.producer_id.ends_with("/synthesis"))
            .count(),
        3,
        "the second repeat (third synthesis) ends it"
    );
}

#[tokio::test]
async fn broadcast_best_of_three_merges_only_the_evaluators_pick() {
    let repo = TempRepo::new();
    let asked = Asked::default();
    let o = engine(agent(&asked, |id, _| {
        if id.ends_with("/evaluate") {
            return (vec![], "Best: Second\nRationale: the clearest".into());
        }
        let w = id.rsplit('/').next().unwrap_or("x").to_owned();
        (
            vec![("answer.txt".into(), format!("{w}'s version\n"))],
            format!("{w} answered"),
        )
    }));
    let plan = team_plan(serde_json::json!({
        "type": "team", "mode": "broadcast", "select": "best", "prompt": "Write answer.txt",
        "workers": [{"name": "first"}, {"name": "second"}, {"name": "third"}]
    }));
    let record = finish(&o, plan, &repo).await;
    assert_eq!(record.status(), PlanStatus::Succeeded);
    assert_eq!(
        repo.show("feature/team", "answer.txt"),
        "second's version\n"
    );
    assert_eq!(output_of(&record, "team")["picked"], "second");
}

fn contract(role: &str, signature: &str, extra: &str) -> String {
    format!(
        "{role} did its part.\n\n### Orchestrator Contract\n- Status: success\n- Evidence: done\n\
         - Next Steps: next\n{extra}- Agent Signature: {signature}\n"
    )
}

fn pipeline_answer(bad_signature: bool) -> impl Fn(&str, &str) -> (Vec<(String, String)>, String) {
    move |id, text| {
        let stage = id.rsplit('/').next().unwrap_or("");
        assert!(text.contains("Add a greeting"), "{text}");
        match stage {
            "architect" => (vec![], contract("architect", "CEDAR_COMPASS", "")),
            "coder" if bad_signature => (
                vec![("greet.txt".into(), "hello\n".into())],
                contract("coder", "SILVER_KITE", ""),
            ),
            "coder" => (
                vec![("greet.txt".into(), "helo\n".into())],
                contract("coder", "NOVA_CORE", ""),
            ),
            "review" => (
                vec![],
                contract(
                    "review",
                    "SILVER_KITE",
                    "- Verdict: needs_work\n- Failures: typo\n",
                ),
            ),
            "debugger-1" => (
                vec![],
                contract(
                    "debugger",
                    "EMBER_TRACE",
                    "- Attempt: 1\n- Attempts Remaining: 1\n",
                ),
            ),
            "coder-2" => (
                vec![("greet.txt".into(), "hello\n".into())],
                contract("coder", "NOVA_CORE", ""),
            ),
            "review-2" => (
                vec![],
                contract("review", "SILVER_KITE", "- Verdict: ship\n"),
            ),
            other => panic!("unexpected stage {other}"),
        }
    }
}

fn pipeline_plan() -> PlanSpec {
    team_plan(serde_json::json!({
        "type": "pipeline", "task": "Add a greeting", "complexity": "medium"
    }))
}

#[tokio::test]
async fn a_medium_pipeline_debugs_a_needs_work_review_and_ships() {
    let repo = TempRepo::new();
    let asked = Asked::default();
    let o = engine(agent(&asked, pipeline_answer(false)));
    let record = finish(&o, pipeline_plan(), &repo).await;
    assert_eq!(record.status(), PlanStatus::Succeeded);
    assert_eq!(
        ids(&record),
        [
            "team",
            "team/architect",
            "team/coder",
            "team/review",
            "team/debugger-1",
            "team/coder-2",
            "team/review-2"
        ]
    );
    assert_eq!(repo.show("feature/team", "greet.txt"), "hello\n");
    let out = output_of(&record, "team");
    assert_eq!(out["verdict"], "ship");
    assert_eq!(out["debugAttempts"], 1);
    // Each role's prompt names its own signature, and no other role's outside earlier replies.
    let asked = asked.lock().expect("lock").clone();
    let architect = &asked[0].1;
    assert!(architect.contains("CEDAR_COMPASS"));
    for other in [
        "NOVA_CORE",
        "SILVER_KITE",
        "EMBER_TRACE",
        "IRON_ATLAS",
        "AURORA_GRID",
    ] {
        assert!(
            !architect.contains(other),
            "{other} in the architect's prompt"
        );
    }
}

#[tokio::test]
async fn a_wrong_signature_fails_the_stage_with_reason_contract_and_blocks_the_rest() {
    let repo = TempRepo::new();
    let asked = Asked::default();
    let o = engine(agent(&asked, pipeline_answer(true)));
    let record = finish(&o, pipeline_plan(), &repo).await;
    assert_eq!(status_of(&record, "team/coder"), NodeStatus::Failed);
    let coder = &record.state.nodes[2];
    let attempt = coder.last_attempt().expect("attempt");
    assert_eq!(attempt.extra.failure_reason, Some(FailureReason::Contract));
    let message = attempt.extra.error.clone().unwrap_or_default();
    assert!(
        message.contains("wrong signature `SILVER_KITE`"),
        "{message}"
    );
    assert_eq!(status_of(&record, "team"), NodeStatus::Failed);
    assert_eq!(ids(&record).len(), 3, "no review ran: {:?}", ids(&record));
    assert!(repo.try_show("feature/team", "greet.txt").is_none());
}

#[tokio::test]
async fn a_failed_worker_is_run_again_after_the_back_off_and_the_plan_succeeds() {
    let repo = TempRepo::new();
    let asked = Asked::default();
    let failing = FnRunner::new({
        let inner = agent(&asked, reflect_answer);
        move |spec, ctx| {
            let inner = inner.clone();
            async move {
                if ctx.producer_id == "team/1/bob" && ctx.attempt == 1 {
                    return Err(orchestrator_core::runner::WorkFailure::new("bob crashed"));
                }
                orchestrator_core::WorkRunner::run(&inner, &spec, &ctx).await
            }
        }
    });
    let o = engine(failing);
    let plan = team_plan(serde_json::json!({
        "type": "team", "prompt": "Build the parser and its docs",
        "workers": [{"name": "alice"}, {"name": "bob"}], "evaluator": {"threshold": 0.9}
    }));
    let started = std::time::Instant::now();
    let record = finish(&o, plan, &repo).await;
    let out = output_of(&record, "team");
    assert_eq!(record.status(), PlanStatus::Succeeded, "{out}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(2),
        "the back-off"
    );
    let bob = record
        .spec
        .jobs
        .iter()
        .position(|j| j.producer_id == "team/1/bob")
        .expect("bob");
    assert_eq!(record.state.nodes[bob].status, NodeStatus::Succeeded);
    assert_eq!(
        record.state.nodes[bob].attempts.len(),
        2,
        "the same sub-job, run again"
    );
    assert_eq!(out["exitReason"], "goal_met");
    assert_eq!(out["iterations"], 2);
    let files = repo.files_at("feature/team");
    for f in ["alice-1.txt", "bob-1.txt", "alice-2.txt", "bob-2.txt"] {
        assert!(files.iter().any(|x| x == f), "{f} in {files:?}");
    }
}

#[tokio::test]
async fn the_engine_resolves_presets_and_squads_when_a_plan_is_created_for_every_host() {
    let repo = TempRepo::with_files(&[(".squad/team.md", "| Member | Role |\n|---|---|\n| x |\n")]);
    let asked = Asked::default();
    let o = engine(agent(&asked, |id, _| {
        if id.ends_with("/evaluate") {
            (vec![], "Best: first".into())
        } else {
            (vec![], "ok".into())
        }
    }));
    // A preset, straight through `Orchestrator::run` (no CLI in between).
    let plan =
        team_plan(serde_json::json!({"type": "team", "prompt": "p", "preset": "best-of-three"}));
    let record = finish(&o, plan, &repo).await;
    assert_eq!(record.status(), PlanStatus::Succeeded);
    let WorkSpec::Team(team) = &record.spec.jobs[0].work else {
        panic!()
    };
    assert_eq!(team.workers.len(), 3, "stored resolved");
    assert_eq!(
        ids(&record),
        [
            "team",
            "team/first",
            "team/second",
            "team/third",
            "team/evaluate"
        ]
    );
    // A malformed Squad folder is refused with the file and line; nothing is stored.
    let bad = team_plan(serde_json::json!({"type": "team", "prompt": "p", "squad": ".squad"}));
    let err = o.run(bad, &repo.dir).await.expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("work.squad") && text.contains(".squad/team.md:3"),
        "{text}"
    );
}
