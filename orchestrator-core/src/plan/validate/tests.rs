use std::time::{Duration, Instant};

use super::names::{is_env_name, ref_name_problem};
use super::paths::{lexical_depth, PathProblem};
use super::*;
use crate::plan::{AgentSpec, Isolation, OnFailure, ProcessSpec, ShellSpec, WorkSpec};

// ---- helpers ----------------------------------------------------------------------------------

fn job(id: &str) -> JobSpec {
    JobSpec::new(id, "do it", WorkSpec::shell("true"))
}

fn plan_of(jobs: impl IntoIterator<Item = JobSpec>) -> PlanSpec {
    let mut plan = PlanSpec::new("plan");
    plan.jobs.extend(jobs);
    plan
}

/// A plan with one job `job` whose work is `work`.
fn with_work(work: WorkSpec) -> PlanSpec {
    plan_of([JobSpec::new("job", "do it", work)])
}

fn agent(edit: impl FnOnce(&mut AgentSpec)) -> WorkSpec {
    let mut spec = AgentSpec {
        instructions: Some("do it".into()),
        ..AgentSpec::default()
    };
    edit(&mut spec);
    WorkSpec::Agent(Box::new(spec))
}

fn shell(edit: impl FnOnce(&mut ShellSpec)) -> WorkSpec {
    let mut spec = ShellSpec {
        command: "true".into(),
        ..ShellSpec::default()
    };
    edit(&mut spec);
    WorkSpec::Shell(spec)
}

fn process(edit: impl FnOnce(&mut ProcessSpec)) -> WorkSpec {
    let mut spec = ProcessSpec {
        executable: "cargo".into(),
        ..ProcessSpec::default()
    };
    edit(&mut spec);
    WorkSpec::Process(Box::new(spec))
}

fn problems_in(plan: &PlanSpec, repo: Option<&Path>) -> Vec<ValidationError> {
    match validate(
        plan,
        ValidationContext {
            repo,
            ..Default::default()
        },
    ) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.0,
    }
}

fn problems(plan: &PlanSpec) -> Vec<ValidationError> {
    problems_in(plan, None)
}

#[track_caller]
fn assert_valid(plan: &PlanSpec) {
    let found = problems(plan);
    assert!(found.is_empty(), "expected no problems, got {found:#?}");
}

/// Asserts exactly one problem, at `job`/`field` with `value`; returns its message.
#[track_caller]
fn single_in(
    plan: &PlanSpec,
    repo: Option<&Path>,
    job: Option<&str>,
    field: &str,
    value: &str,
) -> String {
    let found = problems_in(plan, repo);
    assert_eq!(found.len(), 1, "expected one problem, got {found:#?}");
    let e = &found[0];
    assert_eq!(
        (e.job.as_deref(), e.field.as_str(), e.value.as_str()),
        (job, field, value),
        "{e}"
    );
    assert!(!e.message.is_empty());
    e.message.clone()
}

#[track_caller]
fn single(plan: &PlanSpec, job: Option<&str>, field: &str, value: &str) -> String {
    single_in(plan, None, job, field, value)
}

/// (job, field, value) of every problem, in order.
fn triples(found: &[ValidationError]) -> Vec<(String, String, String)> {
    found
        .iter()
        .map(|e| {
            (
                e.job.clone().unwrap_or_else(|| "<plan>".into()),
                e.field.clone(),
                e.value.clone(),
            )
        })
        .collect()
}

// ---- plan-level fields ------------------------------------------------------------------------

#[test]
fn plan_name_must_not_be_empty() {
    for name in ["", "   "] {
        let mut plan = plan_of([job("aaa")]);
        plan.name = name.into();
        let msg = single(&plan, None, "name", name);
        assert!(msg.contains("1–200"), "{msg}");
    }
}

#[test]
fn plan_name_is_at_most_200_characters() {
    let mut plan = plan_of([job("aaa")]);
    plan.name = "x".repeat(201);
    let msg = single(&plan, None, "name", &"x".repeat(201));
    assert!(
        msg.contains("201 characters") && msg.contains("200"),
        "{msg}"
    );

    // Characters, not bytes.
    plan.name = "é".repeat(200);
    assert_valid(&plan);
}

#[test]
fn plan_needs_a_job() {
    let msg = single(&PlanSpec::new("p"), None, "jobs", "[]");
    assert!(msg.contains("at least one job"), "{msg}");
}

#[test]
fn plan_base_and_target_branch_follow_ref_rules() {
    let mut plan = plan_of([job("aaa")]);
    plan.base_branch = Some("main..dev".into());
    let msg = single(&plan, None, "baseBranch", "main..dev");
    assert!(msg.contains("`..`"), "{msg}");

    let mut plan = plan_of([job("aaa")]);
    plan.target_branch = Some("feature/".into());
    let msg = single(&plan, None, "targetBranch", "feature/");
    assert!(msg.contains("must not end with `/`"), "{msg}");
}

#[test]
fn every_ref_name_rule_is_enforced() {
    let cases = [
        ("", "must not be empty"),
        ("-main", "must not start with `-`"),
        ("a..b", "`..`"),
        ("a\u{1}b", "control character"),
        ("a\u{7f}b", "control character"),
        ("my branch", "a space"),
        ("a~1", "`~`"),
        ("a^", "`^`"),
        ("a:b", "`:`"),
        ("a?", "`?`"),
        ("a*", "`*`"),
        ("a[b", "`[`"),
        ("a\\b", "`\\`"),
        ("feature/", "must not end with `/`"),
        ("/feature", "must not start with `/`"),
        ("main.", "must not end with `.`"),
        ("a//b", "`//`"),
        (".hidden", "must not start with `.`"),
        ("feature/.x", "must not start with `.`"),
        ("main.lock", "`.lock`"),
        ("a.lock/b", "`.lock`"),
        ("@", "`@` alone"),
        ("a@{1}", "`@{`"),
    ];
    for (name, expected) in cases {
        let reason = ref_name_problem(name).unwrap_or_default();
        assert!(reason.contains(expected), "{name:?}: {reason:?}");
        // The same rules hold for the job's baseBranch.
        let mut j = job("aaa");
        j.extra.make_mut().base_branch = Some(name.into());
        let msg = single(&plan_of([j]), Some("aaa"), "baseBranch", name);
        assert!(msg.contains(expected), "{name:?}: {msg}");
    }
}

#[test]
fn additional_symlink_dirs_stay_inside_the_repository() {
    let cases = [
        ("", "must not be empty"),
        ("/opt/cache", "absolute"),
        ("..", "climbs out"),
        ("a/../../b", "climbs out"),
        (".", "repository root"),
        ("a/..", "repository root"),
    ];
    for (dir, expected) in cases {
        let mut plan = plan_of([job("aaa")]);
        plan.additional_symlink_dirs = vec!["node_modules".into(), dir.into()];
        let msg = single(&plan, None, "additionalSymlinkDirs[1]", dir);
        assert!(msg.contains(expected), "{dir:?}: {msg}");
    }
}

#[test]
fn verify_ri_is_checked_as_a_work_spec() {
    let mut plan = plan_of([job("aaa")]);
    plan.verify_ri = Some(WorkSpec::shell(" "));
    let msg = single(&plan, None, "verifyRi.command", " ");
    assert!(msg.contains("command line"), "{msg}");
}

#[test]
fn worktree_init_entries_are_checked_as_work_specs() {
    let mut plan = plan_of([job("aaa")]);
    plan.worktree_init = vec![
        WorkSpec::shell("npm ci"),
        process(|p| p.executable = String::new()),
    ];
    single(&plan, None, "worktreeInit[1].executable", "");
}

#[test]
fn plan_env_keys_must_be_variable_names() {
    let mut plan = plan_of([job("aaa")]);
    plan.env.insert("1ST".into(), "x".into());
    let msg = single(&plan, None, "env", "1ST");
    assert!(msg.contains("[A-Za-z_][A-Za-z0-9_]*"), "{msg}");
}

#[test]
fn resume_after_plan_must_not_be_empty() {
    let mut plan = plan_of([job("aaa")]);
    plan.resume_after_plan = Some(" ".into());
    single(&plan, None, "resumeAfterPlan", " ");
    plan.resume_after_plan = Some("plan-123".into());
    assert_valid(&plan);
}

// ---- job fields -------------------------------------------------------------------------------

#[test]
fn producer_id_must_match_the_pattern() {
    let long = "a".repeat(65);
    let cases = [
        ("ab", "fewer than 3"),
        (long.as_str(), "more than 64"),
        ("Build", "use lowercase"),
        ("a_b", "'_'"),
        ("a b", "' '"),
        ("café", "'é'"),
    ];
    for (id, expected) in cases {
        let msg = single(&plan_of([job(id)]), Some(id), "producerId", id);
        assert!(
            msg.contains(expected) && msg.contains("3–64"),
            "{id:?}: {msg}"
        );
    }
    for id in ["abc", "a-1", "123", &"z".repeat(64)] {
        assert_valid(&plan_of([job(id)]));
    }
}

#[test]
fn a_job_without_producer_id_is_named_by_position() {
    let plan = plan_of([job("aaa"), job("")]);
    single(&plan, Some("jobs[1]"), "producerId", "");
}

#[test]
fn duplicate_producer_ids_are_reported_once_each_naming_both_positions() {
    let plan = plan_of([job("aaa"), job("bbb"), job("aaa"), job("aaa")]);
    let found = problems(&plan);
    assert_eq!(
        triples(&found),
        [
            ("aaa".into(), "producerId".into(), "aaa".into()),
            ("aaa".into(), "producerId".into(), "aaa".into()),
        ]
    );
    assert!(
        found[0].message.contains("jobs[0] and jobs[2]"),
        "{}",
        found[0]
    );
    assert!(
        found[1].message.contains("jobs[0] and jobs[3]"),
        "{}",
        found[1]
    );
}

#[test]
fn task_must_not_be_empty() {
    let plan = plan_of([JobSpec::new("aaa", "  ", WorkSpec::shell("true"))]);
    single(&plan, Some("aaa"), "task", "  ");
}

#[test]
fn job_name_if_given_is_1_to_200_characters() {
    let mut j = job("aaa");
    j.name = Some(String::new());
    single(&plan_of([j.clone()]), Some("aaa"), "name", "");
    j.name = Some("n".repeat(201));
    single(&plan_of([j.clone()]), Some("aaa"), "name", &"n".repeat(201));
    j.name = Some("n".repeat(200));
    assert_valid(&plan_of([j]));
}

#[test]
fn group_segments_must_not_be_empty() {
    for group in ["", "a//b", "/a", "a/", " / x"] {
        let mut j = job("aaa");
        j.extra.make_mut().group = Some(group.into());
        let msg = single(&plan_of([j]), Some("aaa"), "group", group);
        assert!(msg.contains("backend/api"), "{msg}");
    }
    for group in ["backend", "backend/api", "a b/c"] {
        let mut j = job("aaa");
        j.extra.make_mut().group = Some(group.into());
        assert_valid(&plan_of([j]));
    }
}

#[test]
fn job_env_keys_must_be_variable_names() {
    for key in ["", "1A", "A-B", "A B", "É"] {
        let plan = plan_of([job("aaa").env(key, "x")]);
        single(&plan, Some("aaa"), "env", key);
    }
    assert_valid(&plan_of([job("aaa").env("_A1", "x").env("path", "")]));
}

// ---- dependencies (from the graph) ------------------------------------------------------------

#[test]
fn unknown_dependency_names_the_entry() {
    let plan = plan_of([job("aaa"), job("bbb").depends_on(["aaa", "nope"])]);
    let msg = single(&plan, Some("bbb"), "dependencies[1]", "nope");
    assert!(msg.contains("unknown dependency"), "{msg}");
}

#[test]
fn self_dependency_is_reported() {
    let plan = plan_of([job("aaa").depends_on(["aaa"])]);
    let msg = single(&plan, Some("aaa"), "dependencies[0]", "aaa");
    assert!(msg.contains("itself"), "{msg}");
}

#[test]
fn a_cycle_is_printed_as_a_path() {
    let plan = plan_of([
        job("aaa").depends_on(["bbb"]),
        job("bbb").depends_on(["ccc"]),
        job("ccc").depends_on(["aaa"]),
        job("ddd").depends_on(["aaa"]),
    ]);
    let msg = single(
        &plan,
        Some("aaa"),
        "dependencies",
        "aaa -> bbb -> ccc -> aaa",
    );
    assert!(msg.contains("cycle"), "{msg}");
    let shown = validate(&plan, ValidationContext::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(shown.contains("\"aaa -> bbb -> ccc -> aaa\""), "{shown}");
}

#[test]
fn a_two_job_cycle_and_separate_cycles_are_each_reported() {
    let plan = plan_of([
        job("aaa").depends_on(["bbb"]),
        job("bbb").depends_on(["aaa"]),
        job("ccc").depends_on(["ddd"]),
        job("ddd").depends_on(["ccc"]),
    ]);
    let mut values: Vec<String> = problems(&plan).into_iter().map(|e| e.value).collect();
    values.sort();
    assert_eq!(values, ["aaa -> bbb -> aaa", "ccc -> ddd -> ccc"]);
}

#[test]
fn graph_problems_of_a_duplicated_job_are_reported_at_that_job() {
    // jobs[2] repeats `aaa`; its unknown dependency must sort at position 2, after jobs[1].
    let mut second = JobSpec::new("aaa", "", WorkSpec::shell("true")).depends_on(["zzz"]);
    second.extra.make_mut().group = Some("a//b".into());
    let plan = plan_of([
        job("aaa"),
        JobSpec::new("bbb", "", WorkSpec::shell("x")),
        second,
    ]);
    assert_eq!(
        triples(&problems(&plan)),
        [
            ("bbb".into(), "task".into(), "".into()),
            ("aaa".into(), "producerId".into(), "aaa".into()),
            ("aaa".into(), "task".into(), "".into()),
            ("aaa".into(), "dependencies[0]".into(), "zzz".into()),
            ("aaa".into(), "group".into(), "a//b".into()),
        ]
    );
}

#[test]
fn a_duplicate_sorts_between_its_jobs_own_producer_id_and_task_problems_in_any_plan_size() {
    // `AB` breaks the pattern and repeats jobs[0]; jobs[2] also has no task and a bad group.
    let mut third = JobSpec::new("AB", " ", WorkSpec::shell("true"));
    third.extra.make_mut().group = Some("a//b".into());
    let small = plan_of([job("AB"), job("bbb"), third]);
    let want: Vec<(String, String, String)> = [
        ("AB", "producerId", "AB"),
        ("AB", "producerId", "AB"),
        ("AB", "producerId", "AB"),
        ("AB", "task", " "),
        ("AB", "group", "a//b"),
    ]
    .map(|(j, f, v)| (j.into(), f.into(), v.into()))
    .into();
    let found = problems(&small);
    assert_eq!(triples(&found), want);
    assert!(
        found[2].message.contains("jobs[0] and jobs[2]"),
        "{}",
        found[2]
    );
    assert!(!found[1].message.contains("duplicate"), "{}", found[1]);
    // Large enough for the producerId index to be built on a thread of its own: the same
    // problems, in the same order (the jobs added are valid).
    let mut large = small.clone();
    large
        .jobs
        .extend((0..crate::parallel::LARGE_PLAN).map(|i| job(&format!("pad-{i}"))));
    assert_eq!(problems(&large), found);
}

#[test]
fn several_graph_problems_across_duplicated_jobs_each_land_at_their_job() {
    let plan = plan_of([
        job("aaa").depends_on(["x", "aaa"]),
        job("aaa").depends_on(["x", "aaa", "y"]),
        job("bbb").depends_on(["x"]),
        job("aaa").depends_on(["x"]),
    ]);
    let found = problems(&plan);
    let at: Vec<(&str, &str)> = found
        .iter()
        .map(|e| (e.field.as_str(), e.value.as_str()))
        .collect();
    assert_eq!(
        at,
        [
            // jobs[0]
            ("dependencies[0]", "x"),
            ("dependencies[1]", "aaa"),
            // jobs[1]: a duplicate; `aaa` there is the first job, not itself.
            ("producerId", "aaa"),
            ("dependencies[0]", "x"),
            ("dependencies[2]", "y"),
            // jobs[2]
            ("dependencies[0]", "x"),
            // jobs[3]
            ("producerId", "aaa"),
            ("dependencies[0]", "x"),
        ]
    );
    assert!(found[2].message.contains("jobs[0] and jobs[1]"));
    assert!(found[6].message.contains("jobs[0] and jobs[3]"));
}

#[test]
fn graph_problems_of_a_job_without_id_name_its_position() {
    let plan = plan_of([job("aaa"), job("").depends_on(["nope"])]);
    assert_eq!(
        triples(&problems(&plan)),
        [
            ("jobs[1]".into(), "producerId".into(), "".into()),
            ("jobs[1]".into(), "dependencies[0]".into(), "nope".into()),
        ]
    );
}

mod work;
