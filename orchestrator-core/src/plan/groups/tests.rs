use super::*;
use crate::error::Error;
use crate::plan::{parse_plan, validate, PlanFormat, ValidationContext};

/// Three levels, a producerId (`build`) reused in two groups, a relative (`count-dirs`) and a
/// qualified cross-group dependency (`collection/count-files`, `phase1/analysis/report`),
/// `producer_id` spellings, and a root job depending on a group's job.
const NESTED_JSON: &str = r#"{
  "name": "nested",
  "jobs": [
    {"producerId": "final", "task": "final", "work": "true", "dependencies": ["phase2/build"]}
  ],
  "groups": [
    {"name": "phase1", "groups": [
      {"name": "collection", "jobs": [
        {"producer_id": "count-files", "task": "files", "work": "true", "dependencies": []},
        {"producer_id": "count-dirs", "task": "dirs", "work": "true", "dependencies": ["count-files"]},
        {"producer_id": "build", "task": "b", "work": "true", "dependencies": []}
      ]},
      {"name": "analysis", "jobs": [
        {"producer_id": "report", "task": "r", "work": "true",
         "dependencies": ["collection/count-files", "collection/count-dirs"]}
      ]}
    ]},
    {"name": "phase2", "jobs": [
      {"producer_id": "build", "task": "b2", "work": "true",
       "dependencies": ["phase1/analysis/report"]}
    ]}
  ]
}"#;

const NESTED_YAML: &str = "
name: nested
jobs:
  - {producerId: final, task: final, work: 'true', dependencies: [phase2/build]}
groups:
  - name: phase1
    groups:
      - name: collection
        jobs:
          - producer_id: count-files
            task: files
            work: 'true'
            dependencies: []
          - producer_id: count-dirs
            task: dirs
            work: 'true'
            dependencies: [count-files]
          - producer_id: build
            task: b
            work: 'true'
            dependencies: []
      - name: analysis
        jobs:
          - producer_id: report
            task: r
            work: 'true'
            dependencies: [collection/count-files, collection/count-dirs]
  - name: phase2
    jobs:
      - producer_id: build
        task: b2
        work: 'true'
        dependencies: [phase1/analysis/report]
";

fn ids_and_deps(spec: &PlanSpec) -> Vec<(String, Option<String>, Vec<String>)> {
    spec.jobs
        .iter()
        .map(|j| {
            (
                j.producer_id.clone(),
                j.extra.group.clone(),
                j.dependencies.clone(),
            )
        })
        .collect()
}

fn expected() -> Vec<(String, Option<String>, Vec<String>)> {
    let row = |id: &str, group: Option<&str>, deps: &[&str]| {
        (
            id.to_owned(),
            group.map(str::to_owned),
            deps.iter().map(|d| (*d).to_owned()).collect(),
        )
    };
    vec![
        row("final", None, &["phase2/build"]),
        row(
            "phase1/collection/count-files",
            Some("phase1/collection"),
            &[],
        ),
        row(
            "phase1/collection/count-dirs",
            Some("phase1/collection"),
            &["phase1/collection/count-files"],
        ),
        row("phase1/collection/build", Some("phase1/collection"), &[]),
        row(
            "phase1/analysis/report",
            Some("phase1/analysis"),
            &[
                "phase1/collection/count-files",
                "phase1/collection/count-dirs",
            ],
        ),
        row("phase2/build", Some("phase2"), &["phase1/analysis/report"]),
    ]
}

#[test]
fn nested_json_and_yaml_flatten_to_qualified_ids_with_resolved_dependencies() {
    for (text, format) in [
        (NESTED_JSON, PlanFormat::Json),
        (NESTED_YAML, PlanFormat::Yaml),
    ] {
        let spec = parse_plan(text, format, "plan").expect("expected success");
        assert!(spec.groups.is_empty());
        assert_eq!(ids_and_deps(&spec), expected(), "{format:?}");
        let graph = validate(&spec, ValidationContext::default()).expect("expected success");
        assert_eq!(graph.job_count(), 6);
        // The flattened plan is an ordinary flat plan: stored and read again, it is the same.
        let stored = serde_json::to_string(&spec).expect("expected success");
        assert!(!stored.contains("\"groups\""));
        let again = parse_plan(&stored, PlanFormat::Json, "stored").expect("expected success");
        assert_eq!(again, spec);
    }
}

#[test]
fn a_reference_with_slash_is_looked_up_from_the_innermost_group_outward_then_the_root() {
    let job = |id: &str| JobSpec::new(id, id, crate::plan::WorkSpec::shell("true"));
    let build = |inner: bool, middle: bool| {
        let mut analysis = GroupSpec::new("analysis").job(job("x").depends_on(["collection/aaa"]));
        if inner {
            analysis = analysis.group(GroupSpec::new("collection").job(job("aaa")));
        }
        let mut phase1 = GroupSpec::new("phase1").group(analysis);
        if middle {
            phase1 = phase1.group(GroupSpec::new("collection").job(job("aaa")));
        }
        let mut plan = PlanSpec::new("p")
            .group(phase1)
            .group(GroupSpec::new("collection").job(job("aaa")));
        plan.flatten_groups().expect("expected success");
        let x = plan
            .jobs
            .iter()
            .find(|j| j.producer_id == "phase1/analysis/x")
            .expect("expected success");
        x.dependencies[0].clone()
    };
    assert_eq!(build(true, true), "phase1/analysis/collection/aaa");
    assert_eq!(build(false, true), "phase1/collection/aaa");
    assert_eq!(build(false, false), "collection/aaa");
}

#[test]
fn a_reference_without_slash_names_only_the_same_group() {
    // `setup` is a root job, but from inside `phase1` a bare `setup` means `phase1/setup`.
    let text = r#"{"name":"p","jobs":[
        {"producerId":"setup","task":"s","work":"true","dependencies":[]}],
      "groups":[{"name":"phase1","jobs":[
        {"producerId":"build","task":"b","work":"true","dependencies":["setup"]}]}]}"#;
    let err = parse_plan(text, PlanFormat::Json, "plan").expect_err("expected an error");
    let Error::Invalid(errors) = err else {
        panic!("expected Invalid, got {err}");
    };
    assert_eq!(errors.errors().len(), 1, "{errors}");
    let e = &errors.errors()[0];
    assert_eq!(e.job.as_deref(), Some("phase1/build"));
    assert_eq!(e.field, "dependencies[0]");
    assert_eq!(e.value, "setup");
    assert!(e.message.contains("`phase1/setup`"), "{}", e.message);
}

#[test]
fn dangling_references_are_named_with_the_qualified_job_among_all_problems() {
    for format in [PlanFormat::Json, PlanFormat::Yaml] {
        let text = NESTED_JSON
            .replace("\"collection/count-dirs\"]", "\"collection/count-dirz\"]")
            .replace("\"task\": \"b2\"", "\"task\": \"\"");
        let err = parse_plan(&text, format, "plan").expect_err("expected an error");
        let Error::Invalid(errors) = err else {
            panic!("expected Invalid, got {err}");
        };
        let found: Vec<(Option<&str>, &str, &str)> = errors
            .errors()
            .iter()
            .map(|e| (e.job.as_deref(), e.field.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    Some("phase1/analysis/report"),
                    "dependencies[1]",
                    "collection/count-dirz"
                ),
                (Some("phase2/build"), "task", ""),
            ],
            "{errors}"
        );
        let text = errors.to_string();
        assert!(
            text.contains("`phase1/analysis/collection/count-dirz`")
                && text.contains("`phase1/collection/count-dirz`")
                && text.contains("`collection/count-dirz`"),
            "{text}"
        );
    }
}

#[test]
fn bad_group_names_and_duplicates_within_a_group_are_reported_once() {
    let text = r#"{"name":"p","jobs":[],"groups":[
        {"name":"Phase 1","jobs":[
          {"producerId":"aaa","task":"a","work":"true","dependencies":[]}]},
        {"name":"two","jobs":[
          {"producerId":"aaa","task":"a","work":"true","dependencies":[]},
          {"producerId":"aaa","task":"a","work":"true","dependencies":[]}]}]}"#;
    let Err(Error::Invalid(errors)) = parse_plan(text, PlanFormat::Json, "plan") else {
        panic!("expected Invalid");
    };
    let found: Vec<(Option<&str>, &str)> = errors
        .errors()
        .iter()
        .map(|e| (e.job.as_deref(), e.field.as_str()))
        .collect();
    assert_eq!(
        found,
        [(None, "groups[0].name"), (Some("two/aaa"), "producerId")],
        "{errors}"
    );
    let text = errors.to_string();
    assert!(text.contains("group `Phase 1`"), "{text}");
    assert!(
        text.contains("groups[1].jobs[0] and groups[1].jobs[1]"),
        "{text}"
    );
}

#[test]
fn a_job_inside_a_group_may_not_name_another_group() {
    let text = r#"{"name":"p","jobs":[],"groups":[{"name":"one","jobs":[
        {"producerId":"aaa","task":"a","work":"true","dependencies":[],"group":"other"}]}]}"#;
    let Err(Error::Invalid(errors)) = parse_plan(text, PlanFormat::Json, "plan") else {
        panic!("expected Invalid");
    };
    assert_eq!(errors.errors().len(), 1, "{errors}");
    assert_eq!(errors.errors()[0].field, "group");
    assert_eq!(errors.errors()[0].job.as_deref(), Some("one/aaa"));
}

#[test]
fn flat_plans_keep_refusing_slashes_but_take_the_flattened_form() {
    let job = |id: &str, group: Option<&str>| {
        let mut j = JobSpec::new(id, "t", crate::plan::WorkSpec::shell("true"));
        j.extra.make_mut().group = group.map(str::to_owned);
        j
    };
    let refused = PlanSpec::new("p").job(job("abc/def", None));
    let errors = validate(&refused, ValidationContext::default()).expect_err("expected an error");
    assert_eq!(errors.errors()[0].field, "producerId");
    let other_group = PlanSpec::new("p").job(job("abc/def", Some("xyz")));
    assert!(validate(&other_group, ValidationContext::default()).is_err());
    let qualified = PlanSpec::new("p").job(job("abc/def", Some("abc")));
    validate(&qualified, ValidationContext::default()).expect("expected success");
    let bad_segment = PlanSpec::new("p").job(job("AB/def", Some("AB")));
    let errors =
        validate(&bad_segment, ValidationContext::default()).expect_err("expected an error");
    assert!(errors.to_string().contains("segment `AB`"), "{errors}");
}

#[test]
fn validation_refuses_groups_that_were_not_flattened() {
    let spec = PlanSpec::new("p").group(GroupSpec::new("one").job(JobSpec::new(
        "aaa",
        "a",
        crate::plan::WorkSpec::shell("true"),
    )));
    let errors = validate(&spec, ValidationContext::default()).expect_err("expected an error");
    assert_eq!(errors.errors()[0].field, "groups");
}

#[test]
fn problems_inside_groups_that_stop_the_typed_parse_are_all_named() {
    for format in [PlanFormat::Json, PlanFormat::Yaml] {
        let text = NESTED_JSON
            .replace(
                "\"task\": \"dirs\"",
                "\"task\": \"dirs\", \"expectsNoChangez\": true",
            )
            .replace("\"phase1/analysis/report\"", "\"phase1/analysis/nope\"");
        let err = parse_plan(&text, format, "plan").expect_err("expected an error");
        let Error::Invalid(errors) = err else {
            panic!("expected Invalid, got {err}");
        };
        let found: Vec<(Option<&str>, &str)> = errors
            .errors()
            .iter()
            .map(|e| (e.job.as_deref(), e.field.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (Some("phase1/collection/count-dirs"), "expectsNoChangez"),
                (Some("phase2/build"), "dependencies[0]"),
            ],
            "{errors}"
        );
    }
}

#[test]
fn group_status_is_derived_from_the_jobs_below() {
    use NodeStatus::*;
    assert_eq!(GroupStatus::of([]), GroupStatus::Pending);
    assert_eq!(GroupStatus::of([Pending, Ready]), GroupStatus::Pending);
    assert_eq!(GroupStatus::of([Running, Pending]), GroupStatus::Running);
    assert_eq!(GroupStatus::of([Scheduled]), GroupStatus::Running);
    assert_eq!(GroupStatus::of([Succeeded, Pending]), GroupStatus::Running);
    assert_eq!(
        GroupStatus::of([Succeeded, Succeeded]),
        GroupStatus::Succeeded
    );
    assert_eq!(GroupStatus::of([Failed, Blocked]), GroupStatus::Failed);
    assert_eq!(GroupStatus::of([Canceled]), GroupStatus::Failed);
    assert_eq!(GroupStatus::of([Succeeded, Failed]), GroupStatus::Partial);
    assert_eq!(GroupStatus::of([Succeeded, Blocked]), GroupStatus::Partial);
    assert_eq!(
        GroupStatus::of([Succeeded, Failed, Running]),
        GroupStatus::Running
    );

    let statuses = group_statuses([
        (Some("phase1/collection"), Succeeded),
        (Some("phase1/collection"), Succeeded),
        (Some("phase1/analysis"), Failed),
        (Some("phase2"), Pending),
        (None, Running),
    ]);
    let shown: Vec<(&str, &str)> = statuses
        .iter()
        .map(|(p, s)| (p.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        shown,
        [
            ("phase1", "partial"),
            ("phase1/analysis", "failed"),
            ("phase1/collection", "succeeded"),
            ("phase2", "pending"),
        ]
    );
}
