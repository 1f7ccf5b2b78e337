//! The pipeline controller's rules, driven without the engine ([`crate::testing::drive`]).

use orchestrator_core::composite::{Controller, Decision};
use orchestrator_core::plan::{Approval, JobSpec, WorkSpec};
use orchestrator_core::NodeStatus::{self, Succeeded};
use serde_json::json;

use super::PipelineController;
use crate::rules::Role;
use crate::testing::{drive, instructions};

fn signed(role: Role, extra: &str) -> String {
    format!(
        "done.\n\n### Orchestrator Contract\n- Status: success\n- Evidence: e\n- Next Steps: n\n\
         {extra}- Agent Signature: {}\n",
        role.signature()
    )
}

/// Signed replies; reviews give `verdicts` in turn.
fn stages(verdicts: Vec<&'static str>) -> impl FnMut(&JobSpec) -> (NodeStatus, String) {
    let mut verdicts = verdicts.into_iter();
    move |job| {
        let name = job.producer_id.rsplit('/').next().unwrap_or("");
        let role = super::role_of(name).expect("a role");
        let extra = match role {
            Role::Review => format!("- Verdict: {}\n", verdicts.next().unwrap_or("ship")),
            Role::Debugger => "- Attempt: 1\n- Attempts Remaining: 0\n".to_owned(),
            _ => String::new(),
        };
        (Succeeded, signed(role, &extra))
    }
}

fn pipeline(extra: serde_json::Value) -> serde_json::Value {
    let mut work = json!({"type": "pipeline", "task": "Add a login page"});
    if let (Some(w), Some(e)) = (work.as_object_mut(), extra.as_object()) {
        w.extend(e.clone());
    }
    work
}

#[test]
fn complexity_routes_the_stages() {
    for (complexity, ui, expected) in [
        ("simple", false, vec!["team/coder", "team/review"]),
        (
            "medium",
            false,
            vec!["team/architect", "team/coder", "team/review"],
        ),
        (
            "complex",
            false,
            vec!["team/architect", "team/coder", "team/review"],
        ),
        (
            "complex",
            true,
            vec![
                "team/architect",
                "team/designer",
                "team/coder",
                "team/review",
            ],
        ),
    ] {
        let d = drive(
            &PipelineController,
            pipeline(json!({"complexity": complexity, "ui": ui})),
            stages(vec!["ship"]),
        );
        assert_eq!(d.ids(), expected, "{complexity} ui={ui}");
        assert!(matches!(d.decision, Decision::Done { .. }));
        assert_eq!(d.output()["verdict"], "ship");
    }
}

#[test]
fn needs_work_loops_through_the_debugger_up_to_the_limit() {
    let d = drive(
        &PipelineController,
        pipeline(json!({"complexity": "simple"})),
        stages(vec!["needs_work", "needs_work", "ship"]),
    );
    assert_eq!(
        d.ids(),
        [
            "team/coder",
            "team/review",
            "team/debugger-1",
            "team/coder-2",
            "team/review-2",
            "team/debugger-2",
            "team/coder-3",
            "team/review-3"
        ]
    );
    assert_eq!(d.output()["debugAttempts"], 2);
    let debugger = instructions(&d.spawned[5]);
    assert!(
        debugger.contains("- Attempt: 2") && debugger.contains("- Attempts Remaining: 0"),
        "{debugger}"
    );
    let out = drive(
        &PipelineController,
        pipeline(json!({"complexity": "simple", "maxDebugAttempts": 1})),
        stages(vec!["needs_work", "needs_work"]),
    );
    assert!(
        out.reason().contains("needs_work after 1 debug attempt"),
        "{}",
        out.reason()
    );
}

#[test]
fn minor_fixes_fails_the_pipeline() {
    let d = drive(
        &PipelineController,
        pipeline(json!({})),
        stages(vec!["minor_fixes"]),
    );
    assert!(d.reason().contains("minor_fixes"), "{}", d.reason());
}

#[test]
fn a_broken_contract_fails_the_stage_and_nothing_runs_after_it() {
    let d = drive(&PipelineController, pipeline(json!({})), |job| {
        if job.producer_id.ends_with("/coder") {
            (Succeeded, signed(Role::Review, ""))
        } else {
            stages(vec!["ship"])(job)
        }
    });
    assert_eq!(d.ids(), ["team/architect", "team/coder"]);
    assert!(
        d.reason().contains("stage `coder` is failed"),
        "{}",
        d.reason()
    );
    let parent = JobSpec::new(
        "team",
        "t",
        serde_json::from_value(pipeline(json!({}))).expect("work"),
    );
    let coder = &d.spawned[1];
    let why = PipelineController
        .check(&parent, coder, Some(&signed(Role::Review, "")))
        .expect_err("refused");
    assert!(
        why.starts_with("contract: wrong signature `SILVER_KITE`"),
        "{why}"
    );
    assert!(
        PipelineController.check(&parent, coder, None).is_err(),
        "no reply, no contract"
    );
}

#[test]
fn prompts_name_only_their_own_signature_and_show_earlier_replies() {
    let d = drive(
        &PipelineController,
        pipeline(json!({})),
        stages(vec!["ship"]),
    );
    let architect = instructions(&d.spawned[0]);
    assert!(architect.contains("You are the architect") && architect.contains("CEDAR_COMPASS"));
    for role in Role::ALL.into_iter().filter(|r| *r != Role::Architect) {
        assert!(
            !architect.contains(role.signature()),
            "{} in the architect's prompt",
            role.signature()
        );
    }
    let review = instructions(&d.spawned[2]);
    assert!(
        review.contains("### coder") && review.contains("NOVA_CORE"),
        "the coder's reply is shown"
    );
    assert!(review.contains("- Verdict: ship | minor_fixes | needs_work"));
}

#[test]
fn approval_between_holds_every_stage_after_the_first() {
    let d = drive(
        &PipelineController,
        pipeline(json!({"approval": "between"})),
        stages(vec!["ship"]),
    );
    let approvals: Vec<Option<Approval>> = d.spawned.iter().map(|j| j.extra.approval).collect();
    assert_eq!(
        approvals,
        [None, Some(Approval::Before), Some(Approval::Before)]
    );
}

#[test]
fn roles_are_overridable_and_only_the_coder_must_change_files() {
    let d = drive(
        &PipelineController,
        pipeline(
            json!({"agent": "claude", "roles": {"review": {"agent": "codex", "model": "o4"}}}),
        ),
        stages(vec!["ship"]),
    );
    let agent = |i: usize| match &d.spawned[i].work {
        WorkSpec::Agent(a) => (a.agent.clone(), a.model.clone()),
        _ => panic!(),
    };
    assert_eq!(agent(0), (Some("claude".into()), None));
    assert_eq!(agent(2), (Some("codex".into()), Some("o4".into())));
    let no_changes: Vec<bool> = d
        .spawned
        .iter()
        .map(|j| j.extra.expects_no_changes)
        .collect();
    assert_eq!(no_changes, [true, false, true]);
}

#[test]
fn bootstrap_turns_the_planners_roadmap_into_pipeline_sub_jobs() {
    let roadmap = "```json\n[{\"id\":\"api\",\"task\":\"Add the API\",\"complexity\":\"simple\"},\
                   {\"id\":\"ui-page\",\"task\":\"Add the page\",\"dependsOn\":[\"api\"]}]\n```\n";
    let d = drive(
        &PipelineController,
        json!({"type": "pipeline", "objective": "A login feature", "bootstrap": true, "approval": "between"}),
        |job| match job.producer_id.as_str() {
            "team/architect" => (Succeeded, signed(Role::Architect, "")),
            "team/planner" => (Succeeded, format!("{roadmap}{}", signed(Role::Planner, ""))),
            _ => (Succeeded, "pipeline done".into()),
        },
    );
    assert_eq!(
        d.ids(),
        ["team/architect", "team/planner", "team/api", "team/ui-page"]
    );
    let api = &d.spawned[2];
    let WorkSpec::Pipeline(p) = &api.work else {
        panic!("{:?}", api.work)
    };
    assert_eq!(p.task.as_deref(), Some("Add the API"));
    assert!(!p.bootstrap);
    assert_eq!(api.dependencies, ["team/planner"]);
    assert_eq!(d.spawned[3].dependencies, ["team/api"]);
    assert!(matches!(d.decision, Decision::Done { .. }));
    // A planner without a roadmap breaks its contract.
    let parent = JobSpec::new(
        "team",
        "t",
        serde_json::from_value(json!({"type": "pipeline", "objective": "o", "bootstrap": true}))
            .expect("work"),
    );
    let planner = &d.spawned[1];
    let why = PipelineController
        .check(&parent, planner, Some(&signed(Role::Planner, "")))
        .expect_err("refused");
    assert!(why.contains("roadmap"), "{why}");
}
