use super::*;
use crate::plan::{Isolation, PlanSpec, WorkSpec};
use crate::repository::PlanSummary;
use crate::state::{Attempt, AttemptStatus, NodeStatus, PhaseRecord, PhaseStatus};
use crate::{Phase, PlanStatus};

fn named(id: &str, name: Option<&str>, deps: &[&str]) -> JobSpec {
    let mut job = JobSpec::new(id, id, WorkSpec::shell("true")).depends_on(deps.iter().copied());
    job.name = name.map(str::to_owned);
    job
}

/// build -> test (named "check"), lint (named "check" too), phase1/nested (a qualified
/// producerId as nested groups write them); worktree isolation, so a snapshot node follows.
fn view() -> PlanView {
    let spec = PlanSpec::new("demo: plan")
        .job(named("build", Some("compile"), &[]))
        .job(named("test", Some("check"), &["build"]))
        .job(named("lint", Some("check"), &[]))
        .job(named("phase1/nested", None, &["build"]));
    let nodes = PlanGraph::build(&spec).expect("graph").node_count();
    PlanView::new(PlanRecord::new("plan-1".into(), spec, ".".into(), nodes, 0))
}

#[test]
fn every_reference_form_resolves() {
    let v = view();
    assert_eq!(v.resolve("test").expect("producerId"), 1);
    assert_eq!(v.resolve("phase1/nested").expect("qualified"), 3);
    assert_eq!(v.resolve("compile").expect("unique name"), 0);
    let id = v.state.nodes[2].id.clone();
    assert_eq!(v.resolve(id.as_str()).expect("node id"), 2);
    assert_eq!(v.resolve(id.short()).expect("id8"), 2);
    assert_eq!(v.resolve("snapshot-validation").expect("label"), 4);
    assert_eq!(v.resolve(SNAPSHOT_PRODUCER_ID).expect("internal id"), 4);
    // Answers do not change once the graph is built (the index replaces the scan).
    v.graph().expect("graph");
    assert_eq!(v.resolve("phase1/nested").expect("qualified"), 3);
}

#[test]
fn unknown_and_ambiguous_references_are_typed_errors() {
    let v = view();
    match v.resolve("nope") {
        Err(Error::JobNotFound { plan, reference }) => {
            assert_eq!(plan.as_str(), "plan-1");
            assert_eq!(reference, "nope");
        }
        other => panic!("{other:?}"),
    }
    let e = v.resolve("check").expect_err("two jobs are named check");
    match &e {
        Error::AmbiguousJob {
            reference,
            by_name,
            matches,
            ..
        } => {
            assert_eq!(reference, "check");
            assert!(*by_name);
            assert_eq!(matches, &["test", "lint"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("name it by producerId"), "{e}");
    // A short prefix of an id is not taken for one.
    let id = v.state.nodes[2].id.clone();
    assert!(matches!(
        v.resolve(&id.as_str()[..4]),
        Err(Error::JobNotFound { .. })
    ));
    // Without worktree isolation there is no snapshot node to name.
    let spec = PlanSpec::new("p")
        .isolation(Isolation::None)
        .job(named("aaa", None, &[]));
    let flat = PlanView::new(PlanRecord::new("p".into(), spec, ".".into(), 1, 0));
    assert!(matches!(
        flat.resolve("snapshot-validation"),
        Err(Error::JobNotFound { .. })
    ));
    assert_eq!(flat.snapshot(), None);
}

#[test]
fn ambiguous_node_id_prefixes_name_their_jobs() {
    let mut v = view();
    v.record.state.nodes[0].id = "abcdefgh-1".into();
    v.record.state.nodes[1].id = "abcdefgh-2".into();
    match v.resolve("abcdefgh") {
        Err(Error::AmbiguousJob {
            by_name, matches, ..
        }) => {
            assert!(!by_name);
            assert_eq!(matches, ["build", "test"]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(v.resolve("abcdefgh-2").expect("whole id"), 1);
}

#[test]
fn the_snapshot_node_is_told_apart() {
    let v = view();
    assert_eq!(v.snapshot(), Some(4));
    assert!(v.is_snapshot(4));
    assert!(!(0..4).any(|n| v.is_snapshot(n)));
    assert_eq!(v.job_nodes(), 0..4);
    assert!(v.job(4).is_none());
    assert_eq!(
        v.labels(),
        [
            "build",
            "test",
            "lint",
            "phase1/nested",
            "snapshot-validation"
        ]
    );
    assert_eq!(v.display_name(0), "compile");
    assert_eq!(v.display_name(3), "phase1/nested");
    assert_eq!(v.display_name(4), "snapshot-validation");
}

#[test]
fn plan_ids_by_prefix() {
    let summary = |id: &str| PlanSummary {
        plan_id: id.into(),
        name: "p".into(),
        status: PlanStatus::Pending,
        created_at: 0,
    };
    let listing = PlanListing {
        plans: vec![summary("aa11"), summary("aa22"), summary("aa")],
        damaged: vec![("bb33".into(), crate::StoreError::NotFound("bb33".into()))],
    };
    assert_eq!(find_plan(&listing, "aa1").expect("prefix").as_str(), "aa11");
    // An exact id wins over being a prefix of others.
    assert_eq!(find_plan(&listing, "aa").expect("exact").as_str(), "aa");
    assert_eq!(find_plan(&listing, "bb").expect("damaged").as_str(), "bb33");
    match find_plan(&listing, "a") {
        Err(Error::AmbiguousPlan { reference, matches }) => {
            assert_eq!(reference, "a");
            assert_eq!(matches.len(), 3);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        find_plan(&listing, ""),
        Err(Error::PlanNotFound(_))
    ));
    assert!(matches!(
        find_plan(&listing, "cc"),
        Err(Error::PlanNotFound(_))
    ));
}

fn phase(phase: Phase, status: PhaseStatus, from: u64, to: Option<u64>) -> PhaseRecord {
    PhaseRecord {
        phase,
        status,
        started_at: from,
        ended_at: to,
        error: None,
    }
}

fn attempt(number: u32, status: AttemptStatus, phases: Vec<PhaseRecord>) -> Attempt {
    Attempt {
        number,
        status,
        started_at: phases.first().map_or(0, |p| p.started_at),
        ended_at: phases.last().and_then(|p| p.ended_at),
        resumed_from: None,
        phases,
        extra: Default::default(),
    }
}

/// `view()` after: build ran once; test failed its work, then passed on a second attempt;
/// lint is still running; nested never started.
fn recorded() -> PlanView {
    use PhaseStatus::{Failed, Running, Skipped, Succeeded};
    let mut v = view();
    v.record.state.started_at = Some(1000);
    let nodes = &mut v.record.state.nodes;
    nodes[0].status = NodeStatus::Succeeded;
    nodes[0].attempts = vec![attempt(
        1,
        AttemptStatus::Succeeded,
        vec![
            phase(Phase::MergeFi, Skipped, 1000, Some(1000)),
            phase(Phase::Work, Succeeded, 1000, Some(1500)),
            phase(Phase::Commit, Succeeded, 1500, Some(1500)),
        ],
    )];
    nodes[1].status = NodeStatus::Succeeded;
    nodes[1].attempts = vec![
        attempt(
            1,
            AttemptStatus::Failed,
            vec![phase(Phase::Work, Failed, 1600, Some(1900))],
        ),
        attempt(
            2,
            AttemptStatus::Succeeded,
            vec![phase(Phase::Work, Succeeded, 2000, Some(2300))],
        ),
    ];
    nodes[2].status = NodeStatus::Running;
    nodes[2].attempts = vec![attempt(
        1,
        AttemptStatus::Running,
        vec![phase(Phase::Work, Running, 1200, None)],
    )];
    v
}

#[test]
fn the_timeline_lists_every_phase_of_every_attempt() {
    let v = recorded();
    let t = timeline(&v);
    assert_eq!(t.len(), 6);
    assert_eq!(t[0].producer_id, "build");
    assert_eq!(t[0].phase, Phase::MergeFi);
    assert_eq!(
        (t[4].producer_id.as_str(), t[4].attempt, t[4].status),
        ("test", 2, PhaseStatus::Succeeded)
    );
    assert_eq!(t[5].ended_at, None);
    let doc = v.to_json();
    let first = &doc["timeline"][0];
    for field in [
        "producerId",
        "attempt",
        "phase",
        "startedAt",
        "endedAt",
        "status",
    ] {
        assert!(first.get(field).is_some(), "{field} in {first}");
    }
    assert_eq!(doc["timeline"][3]["status"], "failed");
    assert_eq!(doc["timeline"][3]["phase"], "work");
    assert_eq!(doc["timeline"][5]["endedAt"], Value::Null);
    // The status document is plan_json's, plus the timeline.
    let mut without = doc.clone();
    if let Some(map) = without.as_object_mut() {
        map.remove("timeline");
    }
    assert_eq!(without, crate::report::plan_json(&v));
}

#[test]
fn gantt_of_a_recorded_plan() {
    let chart = gantt(&recorded(), 2500);
    let expected = "\
gantt
  title demo  plan (running)
  dateFormat x
  axisFormat %H:%M:%S
  todayMarker off
  section build
    work (attempt 1) :done, t0, 1000, 1500
    commit (attempt 1) :done, t1, 1500, 1501
  section lint
    work (attempt 1) :active, t2, 1200, 2500
  section test
    work (attempt 1) :crit, t3, 1600, 1900
    work (attempt 2) :done, t4, 2000, 2300
";
    assert_eq!(chart, expected);
    assert_eq!(
        recorded()
            .render(GraphFormat::Gantt)
            .expect("gantt")
            .lines()
            .count(),
        expected.lines().count()
    );
}

#[test]
fn graph_renderings_go_through_the_view() {
    let v = view();
    let mermaid = v.render(GraphFormat::Mermaid).expect("mermaid");
    assert_eq!(
        mermaid,
        crate::render::mermaid(&v, v.graph().expect("graph"))
    );
    assert!(v
        .render(GraphFormat::Dot)
        .expect("dot")
        .starts_with("digraph plan {"));
    for f in GraphFormat::ALL {
        assert_eq!(GraphFormat::parse(f.as_str()), Some(f));
    }
}

#[test]
fn a_damaged_graph_is_a_typed_error() {
    let mut v = view();
    let mut spec = (*v.record.spec).clone();
    spec.jobs[0].dependencies = vec!["missing".into()];
    v.record.spec = std::sync::Arc::new(spec);
    match v.render(GraphFormat::Dot) {
        Err(Error::DamagedGraph { plan, .. }) => assert_eq!(plan.as_str(), "plan-1"),
        other => panic!("{other:?}"),
    }
    // Lookups and the timeline do not need the graph.
    assert_eq!(v.resolve("lint").expect("lint"), 2);
    assert!(v.render(GraphFormat::Gantt).is_ok());
}
