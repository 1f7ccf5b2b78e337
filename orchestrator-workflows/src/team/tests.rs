//! The team controller's rules, driven without the engine ([`crate::testing::drive`]).

use orchestrator_core::composite::Decision;
use orchestrator_core::plan::{Approval, JobSpec, WorkSpec};
use orchestrator_core::NodeStatus::{self, Failed, Succeeded};
use serde_json::json;

use super::TeamController;
use crate::testing::{drive, instructions, Drive};

fn reflect(extra: serde_json::Value) -> serde_json::Value {
    let mut work = json!({"type": "team", "prompt": "Ship the feature",
                          "workers": [{"name": "alice"}, {"name": "bob"}]});
    if let (Some(w), Some(e)) = (work.as_object_mut(), extra.as_object()) {
        w.extend(e.clone());
    }
    work
}

fn step(job: &JobSpec) -> &str {
    job.producer_id.rsplit('/').next().unwrap_or("")
}

/// Plans assign both workers; syntheses differ per round unless `same`; the evaluator scores
/// from `scores` in turn.
fn answers(scores: Vec<&'static str>, same: bool) -> impl FnMut(&JobSpec) -> (NodeStatus, String) {
    let mut scores = scores.into_iter();
    let mut round = 0;
    move |job| {
        let out = match step(job) {
            "plan" => "@worker:alice part a\n@worker:bob part b".to_owned(),
            "synthesis" => {
                round += 1;
                if same {
                    "always the same words".to_owned()
                } else {
                    format!("round {round} distinct synthesis {}", "x ".repeat(round))
                }
            }
            "evaluate" => format!("Score: {}\nRationale: r", scores.next().unwrap_or("0.1")),
            _ => "did it".to_owned(),
        };
        (Succeeded, out)
    }
}

#[test]
fn reflect_rounds_plan_dispatch_synthesize_evaluate_and_meet_the_goal() {
    let d = drive(
        &TeamController,
        reflect(json!({"evaluator": {"threshold": 0.8}})),
        answers(vec!["0.5", "0.8"], false),
    );
    assert_eq!(
        d.ids(),
        [
            "team/1/plan",
            "team/1/alice",
            "team/1/bob",
            "team/1/synthesis",
            "team/1/evaluate",
            "team/2/plan",
            "team/2/alice",
            "team/2/bob",
            "team/2/synthesis",
            "team/2/evaluate"
        ]
    );
    let Decision::Keep { only, .. } = &d.decision else {
        panic!("{:?}", d.decision)
    };
    assert_eq!(only.len(), 10, "every round's sub-jobs are merged");
    let out = d.output();
    assert_eq!(out["exitReason"], "goal_met");
    assert_eq!(out["scores"], json!([0.5, 0.8]), "0.8 >= 0.8 meets it");
    // The git flow: workers after the plan, synthesis after the workers, the next plan after
    // the evaluation.
    let deps = |id: &str| {
        d.spawned
            .iter()
            .find(|j| j.producer_id == id)
            .map(|j| j.dependencies.clone())
    };
    assert_eq!(deps("team/1/alice"), Some(vec!["team/1/plan".to_owned()]));
    assert_eq!(
        deps("team/1/synthesis"),
        Some(vec!["team/1/alice".to_owned(), "team/1/bob".to_owned()])
    );
    assert_eq!(
        deps("team/2/plan"),
        Some(vec!["team/1/evaluate".to_owned()])
    );
    assert!(deps("team/1/plan").is_some_and(|d| d.is_empty()));
    // Progress shows the iteration while it runs.
    assert!(
        d.progress.iter().any(|p| p.contains("\"iterations\": 1")),
        "{:?}",
        d.progress
    );
}

#[test]
fn max_iterations_ends_the_loop_failing() {
    let d = drive(
        &TeamController,
        reflect(json!({"evaluator": {}, "maxIterations": 2})),
        answers(vec!["0.1", "0.2"], false),
    );
    assert!(d.reason().starts_with("max_iterations"), "{}", d.reason());
    assert!(d.reason().contains("scores 0.10, 0.20"), "{}", d.reason());
}

#[test]
fn self_evaluation_sentinels_decide_without_an_evaluator() {
    let mut n = 0;
    let d = drive(&TeamController, reflect(json!({})), |job| {
        let out = match step(job) {
            "plan" => "@worker:alice go".to_owned(),
            "synthesis" => {
                n += 1;
                if n == 1 {
                    "not yet, first words\n[[needs_iteration]]".to_owned()
                } else {
                    "all done with other words entirely\n  [[GROUP_REFLECT_COMPLETE]]".to_owned()
                }
            }
            _ => "ok".to_owned(),
        };
        (Succeeded, out)
    });
    assert_eq!(d.output()["exitReason"], "goal_met");
    assert_eq!(d.output()["scores"], json!([0.4, 1.0]));
    assert!(!d.ids().iter().any(|id| id.ends_with("/evaluate")));
    let synthesis = d
        .spawned
        .iter()
        .find(|j| j.producer_id == "team/1/synthesis")
        .expect("synthesis");
    assert!(instructions(synthesis).contains("[[GROUP_REFLECT_COMPLETE]]"));
}

#[test]
fn a_sentinel_not_on_its_own_line_does_not_end_the_loop() {
    let d = drive(
        &TeamController,
        reflect(json!({"maxIterations": 2})),
        |job| {
            let out = match step(job) {
                "plan" => "@worker:alice go".to_owned(),
                "synthesis" => {
                    format!("I would say [[GROUP_REFLECT_COMPLETE]] {}", job.producer_id)
                }
                _ => "ok".to_owned(),
            };
            (Succeeded, out)
        },
    );
    assert!(d.reason().starts_with("max_iterations"), "{}", d.reason());
}

#[test]
fn the_second_stall_in_a_row_ends_the_loop() {
    let d = drive(
        &TeamController,
        reflect(json!({"evaluator": {}})),
        answers(vec![], true),
    );
    assert!(d.reason().starts_with("stalled"), "{}", d.reason());
    let syntheses = d
        .ids()
        .iter()
        .filter(|id| id.ends_with("/synthesis"))
        .count();
    assert_eq!(
        syntheses, 3,
        "first, a repeat (warned), a second repeat (stop)"
    );
}

#[test]
fn nothing_assigned_after_the_first_iteration_means_done() {
    let mut plans = 0;
    let d = drive(&TeamController, reflect(json!({"evaluator": {}})), |job| {
        let out = match step(job) {
            "plan" => {
                plans += 1;
                if plans == 1 {
                    "@worker:bob do it"
                } else {
                    "Everything is done."
                }
                .to_owned()
            }
            "evaluate" => "Score: 0.3".to_owned(),
            "synthesis" => "synth".to_owned(),
            _ => "ok".to_owned(),
        };
        (Succeeded, out)
    });
    assert_eq!(d.output()["exitReason"], "goal_met");
    assert_eq!(d.ids().last().copied(), Some("team/2/plan"));
}

#[test]
fn unusable_rounds_are_run_again_after_a_back_off_job_and_three_in_a_row_end_it() {
    // The first iteration's plans assign nothing: an unusable round each time.
    let d = drive(
        &TeamController,
        reflect(json!({"evaluator": {}})),
        |job| match step(job) {
            "plan" => (Succeeded, "no tags".into()),
            _ => (Succeeded, String::new()),
        },
    );
    assert_eq!(
        d.ids(),
        [
            "team/1/plan",
            "team/2/backoff",
            "team/2/plan",
            "team/3/backoff",
            "team/3/plan"
        ]
    );
    assert!(d.reason().starts_with("errors"), "{}", d.reason());
    let backoff = d
        .spawned
        .iter()
        .find(|j| j.producer_id == "team/2/backoff")
        .expect("backoff");
    assert!(matches!(&backoff.work, WorkSpec::Timer(t) if t.seconds == Some(2.0)));
    let plan = d
        .spawned
        .iter()
        .find(|j| j.producer_id == "team/2/plan")
        .expect("plan");
    assert_eq!(plan.dependencies, ["team/2/backoff"]);
}

#[test]
fn a_failed_sub_job_is_run_again_and_three_failures_in_a_row_end_the_loop() {
    let d = drive(
        &TeamController,
        reflect(json!({"evaluator": {}})),
        |job| match step(job) {
            "plan" => (Succeeded, "@worker:alice x".into()),
            _ => (Failed, "crashed".into()),
        },
    );
    assert_eq!(d.ids(), ["team/1/plan", "team/1/alice"], "no new sub-jobs");
    assert_eq!(d.retried, ["team/1/alice", "team/1/alice"]);
    assert!(d.reason().starts_with("errors"), "{}", d.reason());
    assert!(
        d.reason().contains("`1/alice` failed 3 times in a row"),
        "{}",
        d.reason()
    );
}

#[test]
fn a_retried_sub_job_that_succeeds_lets_the_loop_go_on() {
    let mut alice = 0;
    let d = drive(
        &TeamController,
        reflect(json!({"evaluator": {}})),
        |job| match step(job) {
            "plan" => (Succeeded, "@worker:alice x".into()),
            "alice" => {
                alice += 1;
                // Fails twice in round 1 (then succeeds), and once in round 2.
                if matches!(alice, 1 | 2 | 4) {
                    (Failed, "x".into())
                } else {
                    (Succeeded, "ok".into())
                }
            }
            "synthesis" => (Succeeded, format!("synthesis of {}", job.producer_id)),
            "evaluate" => (
                Succeeded,
                if alice < 5 {
                    "Score: 0.2"
                } else {
                    "Score: 0.95"
                }
                .into(),
            ),
            _ => (Succeeded, String::new()),
        },
    );
    assert_eq!(d.output()["exitReason"], "goal_met", "{:?}", d.ids());
    assert_eq!(d.output()["iterations"], 2);
    assert_eq!(d.retried, ["team/1/alice", "team/1/alice", "team/2/alice"]);
    let Decision::Keep { only, .. } = &d.decision else {
        panic!()
    };
    assert!(only.iter().any(|id| id == "team/1/alice"));
}

#[test]
fn unknown_workers_are_skipped_and_names_match_loosely() {
    let d = drive(
        &TeamController,
        reflect(json!({"mode": "orchestrator"})),
        |job| match step(job) {
            "plan" => (
                Succeeded,
                "@worker:ALICE first\n@worker:nobody second\n@worker:alice again @end".into(),
            ),
            _ => (Succeeded, "ok".into()),
        },
    );
    assert_eq!(d.ids(), ["team/1/plan", "team/1/alice", "team/1/synthesis"]);
    let notes = d.output()["notes"].to_string();
    assert!(
        notes.contains("`nobody`, who is not on the team; skipped"),
        "{notes}"
    );
    let alice = &d.spawned[1];
    assert!(
        instructions(alice).contains("## Your task\nfirst"),
        "{}",
        instructions(alice)
    );
    assert!(
        instructions(alice).contains("Ship the feature"),
        "the original request"
    );
    assert_eq!(d.output()["exitReason"], "goal_met");
}

#[test]
fn broadcast_runs_everyone_at_once_and_best_keeps_only_the_pick() {
    let d = drive(
        &TeamController,
        json!({"type": "team", "mode": "broadcast", "select": "best", "prompt": "p",
               "workers": [{"name": "one"}, {"name": "two"}, {"name": "three"}]}),
        |job| match step(job) {
            "evaluate" => (Succeeded, "Best: **Two**\nRationale: r".into()),
            _ => (Succeeded, "mine".into()),
        },
    );
    assert_eq!(
        d.ids(),
        ["team/one", "team/two", "team/three", "team/evaluate"]
    );
    assert!(d.spawned[..3].iter().all(|j| j.dependencies.is_empty()));
    let Decision::Keep { only, .. } = &d.decision else {
        panic!()
    };
    assert_eq!(only, &["team/two"]);
    let all = drive(
        &TeamController,
        json!({"type": "team", "mode": "broadcast", "prompt": "p", "workers": [{"name": "one"}]}),
        |_| (Succeeded, "ok".into()),
    );
    assert!(matches!(all.decision, Decision::Done { .. }));
    let broken = drive(
        &TeamController,
        json!({"type": "team", "mode": "broadcast", "prompt": "p", "workers": [{"name": "one"}]}),
        |_| (Failed, String::new()),
    );
    assert!(broken.reason().starts_with("errors"));
}

#[test]
fn sequential_workers_follow_one_another_seeing_earlier_replies() {
    let d: Drive = drive(
        &TeamController,
        json!({"type": "team", "mode": "sequential", "prompt": "p", "decisions": "Use tabs.",
               "workers": [{"name": "one", "systemPrompt": "You draft."}, {"name": "two"}, {"name": "three"}]}),
        |job| (Succeeded, format!("reply of {}", job.producer_id)),
    );
    assert_eq!(d.ids(), ["team/one", "team/two", "team/three"]);
    assert_eq!(d.spawned[2].dependencies, ["team/two"]);
    let third = instructions(&d.spawned[2]);
    assert!(
        third.contains("reply of team/one") && third.contains("reply of team/two"),
        "{third}"
    );
    assert!(third.contains("## Team decisions\nUse tabs."), "{third}");
    assert!(instructions(&d.spawned[0]).starts_with("You draft."));
    assert!(matches!(d.decision, Decision::Done { .. }));
}

#[test]
fn worker_and_lead_settings_fall_back_to_the_team() {
    let d = drive(
        &TeamController,
        reflect(
            json!({"agent": "claude", "model": "m0", "mode": "orchestrator",
                       "orchestrator": {"model": "lead"},
                       "workers": [{"name": "alice", "model": "m1", "effort": "high"}, {"name": "bob"}]}),
        ),
        answers(vec![], false),
    );
    let runs = |id: &str| match &d
        .spawned
        .iter()
        .find(|j| j.producer_id == id)
        .expect(id)
        .work
    {
        WorkSpec::Agent(a) => (a.agent.clone(), a.model.clone()),
        _ => panic!(),
    };
    assert_eq!(
        runs("team/1/plan"),
        (Some("claude".into()), Some("lead".into()))
    );
    assert_eq!(
        runs("team/1/alice"),
        (Some("claude".into()), Some("m1".into()))
    );
    assert_eq!(
        runs("team/1/bob"),
        (Some("claude".into()), Some("m0".into()))
    );
    assert!(d
        .spawned
        .iter()
        .all(|j| j.extra.approval != Some(Approval::Before)));
}
