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
    WorkSpec::Agent(spec)
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
    WorkSpec::Process(spec)
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
        j.base_branch = Some(name.into());
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
        j.group = Some(group.into());
        let msg = single(&plan_of([j]), Some("aaa"), "group", group);
        assert!(msg.contains("backend/api"), "{msg}");
    }
    for group in ["backend", "backend/api", "a b/c"] {
        let mut j = job("aaa");
        j.group = Some(group.into());
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
    second.group = Some("a//b".into());
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

// ---- work specs -------------------------------------------------------------------------------

#[test]
fn shell_command_must_not_be_empty() {
    let msg = single(
        &with_work(WorkSpec::shell("")),
        Some("job"),
        "work.command",
        "",
    );
    assert!(msg.contains("command line"), "{msg}");
}

#[test]
fn process_executable_must_not_be_empty() {
    let plan = with_work(process(|p| p.executable = " ".into()));
    single(&plan, Some("job"), "work.executable", " ");
}

#[test]
fn timeout_must_be_positive_for_every_kind() {
    for work in [
        shell(|s| s.timeout = Some(0)),
        process(|p| p.timeout = Some(0)),
        agent(|a| a.timeout = Some(0)),
    ] {
        let msg = single(&with_work(work), Some("job"), "work.timeout", "0");
        assert!(msg.contains("at least 1"), "{msg}");
    }
    assert_valid(&with_work(shell(|s| s.timeout = Some(1))));
}

#[test]
fn cwd_must_stay_inside_the_worktree() {
    let cases = [
        ("", "must not be empty"),
        ("/tmp", "absolute"),
        ("\\\\server\\share", "absolute"),
        ("C:\\work", "absolute"),
        ("c:work", "absolute"),
        ("~/src", "absolute"),
        ("..", "climbs out"),
        ("../sibling", "climbs out"),
        ("sub/../../x", "climbs out"),
        ("sub\\..\\..\\x", "climbs out"),
    ];
    for (cwd, expected) in cases {
        for work in [
            shell(|s| s.cwd = Some(cwd.into())),
            process(|p| p.cwd = Some(cwd.into())),
        ] {
            let msg = single(&with_work(work), Some("job"), "work.cwd", cwd);
            assert!(msg.contains(expected), "{cwd:?}: {msg}");
        }
    }
}

#[test]
fn work_env_keys_must_be_variable_names() {
    let plan = with_work(shell(|s| {
        s.env.insert("BAD-KEY".into(), "1".into());
    }));
    single(&plan, Some("job"), "work.env", "BAD-KEY");
}

#[test]
fn agent_needs_exactly_one_of_instructions_and_instructions_file() {
    let both = agent(|a| a.instructions_file = Some("prompt.md".into()));
    let msg = single(
        &with_work(both),
        Some("job"),
        "work.instructionsFile",
        "prompt.md",
    );
    assert!(msg.contains("exactly one"), "{msg}");

    let neither = agent(|a| a.instructions = None);
    let msg = single(&with_work(neither), Some("job"), "work.instructions", "");
    assert!(
        msg.contains("`instructions` or `instructionsFile`"),
        "{msg}"
    );

    let empty = agent(|a| a.instructions = Some("\n".into()));
    single(&with_work(empty), Some("job"), "work.instructions", "\n");

    // The shorthand with no text is agent work with empty instructions.
    single(
        &with_work(WorkSpec::from_shorthand("@agent")),
        Some("job"),
        "work.instructions",
        "",
    );
}

#[test]
fn agent_max_turns_is_at_least_one() {
    let plan = with_work(agent(|a| a.max_turns = Some(0)));
    single(&plan, Some("job"), "work.maxTurns", "0");
    assert_valid(&with_work(agent(|a| a.max_turns = Some(1))));
}

#[test]
fn agent_name_is_lowercase_word() {
    for name in ["", "Claude", "my agent", "gpt.4", "claude/code"] {
        let plan = with_work(agent(|a| a.agent = Some(name.into())));
        let msg = single(&plan, Some("job"), "work.agent", name);
        assert!(msg.contains("copilot"), "{msg}");
    }
    for name in ["copilot", "claude", "my_agent-2"] {
        assert_valid(&with_work(agent(|a| a.agent = Some(name.into()))));
    }
}

#[test]
fn agent_model_if_given_is_not_empty() {
    let plan = with_work(agent(|a| a.model = Some(" ".into())));
    single(&plan, Some("job"), "work.model", " ");
}

#[test]
fn allowed_urls_are_http_urls_or_domain_patterns() {
    let cases = [
        ("", "must not be empty"),
        ("ftp://example.com", "`ftp:`"),
        ("file:///etc/passwd", "`file:`"),
        ("javascript:alert(1)", "`javascript:`"),
        ("https://exa mple.com", "spaces"),
        ("example .com", "spaces"),
        ("https://", "no valid host"),
        ("https://user@example.com", "no valid host"),
        ("http://example.com:99999", "no valid host"),
        ("exa_mple.com", "not a URL or domain pattern"),
        ("*", "not a URL or domain pattern"),
        ("**.example.com", "not a URL or domain pattern"),
        ("example..com", "not a URL or domain pattern"),
        ("-example.com", "not a URL or domain pattern"),
        ("example.com.", "not a URL or domain pattern"),
    ];
    for (url, expected) in cases {
        let plan = with_work(agent(|a| {
            a.allowed_urls = vec!["docs.rs".into(), url.into()]
        }));
        let msg = single(&plan, Some("job"), "work.allowedUrls[1]", url);
        assert!(msg.contains(expected), "{url:?}: {msg}");
        assert!(msg.contains("*.example.com"), "{msg}");
    }
}

#[test]
fn allowed_folders_and_instructions_file_stay_inside_the_repository() {
    let cases = [
        ("", "must not be empty"),
        ("/etc", "absolute"),
        ("C:\\Users", "absolute"),
        ("..", "climbs out"),
        ("docs/../../secrets", "climbs out"),
    ];
    for (path, expected) in cases {
        let plan = with_work(agent(|a| a.allowed_folders = vec![path.into()]));
        let msg = single(&plan, Some("job"), "work.allowedFolders[0]", path);
        assert!(msg.contains(expected), "{path:?}: {msg}");

        let plan = with_work(agent(|a| {
            a.instructions = None;
            a.instructions_file = Some(path.into());
        }));
        let msg = single(&plan, Some("job"), "work.instructionsFile", path);
        assert!(msg.contains(expected), "{path:?}: {msg}");
    }
    // The root is a folder, not a file.
    let plan = with_work(agent(|a| {
        a.instructions = None;
        a.instructions_file = Some("docs/..".into());
    }));
    single(&plan, Some("job"), "work.instructionsFile", "docs/..");
}

/// A repository with `docs/prompt.md` and an empty `src/` folder.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir: {e}"));
        }
        std::fs::write(path, text).unwrap_or_else(|e| panic!("write: {e}"));
    };
    write("docs/prompt.md", "Add tests.");
    std::fs::create_dir_all(dir.path().join("src")).unwrap_or_else(|e| panic!("mkdir: {e}"));
    dir
}

fn file_work(file: &str) -> WorkSpec {
    agent(|a| {
        a.instructions = None;
        a.instructions_file = Some(file.into());
    })
}

fn folders_work(folders: &[&str]) -> WorkSpec {
    agent(|a| a.allowed_folders = folders.iter().map(|f| f.to_string()).collect())
}

#[test]
fn with_a_repository_referenced_paths_must_exist() {
    let repo = repo();
    let root = Some(repo.path());
    let ok = plan_of([
        JobSpec::new("aaa", "a", file_work("docs/prompt.md")),
        JobSpec::new("bbb", "b", file_work("src/../docs/./prompt.md")),
        JobSpec::new("ccc", "c", folders_work(&["src", "docs", "."])),
    ]);
    assert!(problems_in(&ok, root).is_empty());

    let plan = with_work(file_work("docs/missing.md"));
    let msg = single_in(
        &plan,
        root,
        Some("job"),
        "work.instructionsFile",
        "docs/missing.md",
    );
    assert!(msg.contains("does not exist"), "{msg}");

    let plan = with_work(file_work("docs"));
    let msg = single_in(&plan, root, Some("job"), "work.instructionsFile", "docs");
    assert!(msg.contains("not a file"), "{msg}");

    let plan = with_work(folders_work(&["src", "lib"]));
    let msg = single_in(&plan, root, Some("job"), "work.allowedFolders[1]", "lib");
    assert!(msg.contains("does not exist"), "{msg}");

    let plan = with_work(folders_work(&["docs/prompt.md"]));
    let msg = single_in(
        &plan,
        root,
        Some("job"),
        "work.allowedFolders[0]",
        "docs/prompt.md",
    );
    assert!(msg.contains("not a folder"), "{msg}");

    // Without a repository nothing is looked up.
    assert!(problems(&with_work(file_work("docs/missing.md"))).is_empty());
}

#[test]
fn a_path_checked_once_is_reported_for_every_job_that_names_it() {
    let repo = repo();
    let plan = plan_of([
        JobSpec::new("aaa", "a", file_work("gone.md")),
        JobSpec::new("bbb", "b", file_work("gone.md")),
    ]);
    let found = problems_in(&plan, Some(repo.path()));
    assert_eq!(
        triples(&found),
        [
            (
                "aaa".into(),
                "work.instructionsFile".into(),
                "gone.md".into()
            ),
            (
                "bbb".into(),
                "work.instructionsFile".into(),
                "gone.md".into()
            ),
        ]
    );
}

#[cfg(unix)]
#[test]
fn symlinks_must_not_lead_out_of_the_repository() {
    let repo = repo();
    let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    std::fs::write(outside.path().join("secret.md"), "x").unwrap_or_else(|e| panic!("{e}"));
    let link = |target: &Path, name: &str| {
        std::os::unix::fs::symlink(target, repo.path().join(name))
            .unwrap_or_else(|e| panic!("symlink: {e}"));
    };
    link(outside.path(), "escape");
    link(&repo.path().join("docs"), "docs-link");
    let root = Some(repo.path());

    let plan = with_work(file_work("escape/secret.md"));
    let msg = single_in(
        &plan,
        root,
        Some("job"),
        "work.instructionsFile",
        "escape/secret.md",
    );
    assert!(msg.contains("outside the repository"), "{msg}");

    let plan = with_work(folders_work(&["escape"]));
    let msg = single_in(&plan, root, Some("job"), "work.allowedFolders[0]", "escape");
    assert!(msg.contains("outside the repository"), "{msg}");

    // A symlink that stays inside is fine.
    let plan = plan_of([
        JobSpec::new("aaa", "a", file_work("docs-link/prompt.md")),
        JobSpec::new("bbb", "b", folders_work(&["docs-link"])),
    ]);
    assert!(problems_in(&plan, root).is_empty());
}

#[test]
fn work_specs_are_checked_wherever_they_appear() {
    let bad = || shell(|s| s.cwd = Some("../out".into()));
    let mut j = job("aaa");
    j.work = bad();
    j.prechecks = Some(bad());
    j.postchecks = Some(bad());
    let mut plan = plan_of([j]);
    plan.verify_ri = Some(bad());
    plan.worktree_init = vec![WorkSpec::shell("npm ci"), bad()];
    assert_eq!(
        triples(&problems(&plan)),
        [
            ("<plan>".into(), "verifyRi.cwd".into(), "../out".into()),
            (
                "<plan>".into(),
                "worktreeInit[1].cwd".into(),
                "../out".into()
            ),
            ("aaa".into(), "work.cwd".into(), "../out".into()),
            ("aaa".into(), "prechecks.cwd".into(), "../out".into()),
            ("aaa".into(), "postchecks.cwd".into(), "../out".into()),
        ]
    );
}

// ---- accepted edge cases ----------------------------------------------------------------------

#[test]
fn accepted_edge_cases() {
    let urls = [
        "example.com",
        "*.example.com",
        "localhost",
        "localhost:8080",
        "10.0.0.1",
        "api.example.com:443",
        "[::1]",
        "[::1]:8080",
        "https://x.y/path",
        "HTTPS://Example.COM/a?b=c#d",
        "http://localhost:3000",
        "https://*.example.com/docs",
        "https://[2001:db8::1]:8443/x",
        "bücher.de",
        "xn--bcher-kva.de",
    ];
    let on_failure = OnFailure {
        no_auto_heal: Some(true),
        message: Some(String::new()),
        resume_from_phase: Some(crate::state::Phase::Work),
    };
    let mut build = JobSpec::new(
        "build-1",
        "Build",
        shell(|s| {
            s.cwd = Some("sub/dir/..".into());
            s.timeout = Some(60_000);
            s.on_failure = Some(on_failure.clone());
            s.env.insert("RUST_LOG".into(), "debug".into());
        }),
    );
    build.base_branch = Some("3f2a9c1e0b7d4c5a6f8e9d0c1b2a3f4e5d6c7b8a".into());
    build.group = Some("backend/api".into());
    build.name = Some("Build everything".into());
    let review = JobSpec::new(
        "review",
        "Review",
        agent(|a| {
            a.allowed_urls = urls.iter().map(|u| u.to_string()).collect();
            a.allowed_folders = vec!["docs".into(), ".".into(), "a/./b".into()];
            a.agent = Some("claude".into());
            a.max_turns = Some(1);
        }),
    )
    .depends_on(["build-1", "build-1"]);
    let test = JobSpec::new(
        "test",
        "Test",
        process(|p| {
            p.cwd = Some(".".into());
            p.args = vec![String::new()];
        }),
    )
    .depends_on(["build-1"]);
    let mut plan = plan_of([build, review, test]);
    plan.base_branch = Some("v1.2.3".into());
    plan.target_branch = Some("orchestrator/my-plan_2.x".into());
    plan.additional_symlink_dirs = vec!["node_modules".into(), "web/node_modules".into()];
    plan.worktree_init = vec![WorkSpec::shell("npm ci")];
    plan.max_parallel = Some(0);
    assert_valid(&plan);

    for rev in [
        "main",
        "HEAD",
        "refs/heads/main",
        "feature/a.b",
        "release/1.2",
        "3f2a9c1",
        "user@host",
        "a.lockfile",
    ] {
        assert_eq!(ref_name_problem(rev), None, "{rev}");
    }
    // isolation: none has no snapshot node but is validated the same way.
    let plan = plan_of([job("aaa")]).isolation(Isolation::None);
    let graph = validate(&plan, ValidationContext::default());
    assert!(graph.is_ok_and(|g| g.snapshot().is_none()));
}

// ---- many problems, order, display ------------------------------------------------------------

#[test]
fn all_problems_are_reported_at_once_in_a_fixed_order() {
    let mut a = JobSpec::new("aaa", "", WorkSpec::shell("")).depends_on(["ccc", "nope"]);
    a.group = Some("x//y".into());
    a.prechecks = Some(agent(|x| {
        x.instructions_file = Some("../p.md".into());
        x.allowed_urls = vec!["ftp://x".into()];
    }));
    let b = JobSpec::new("B_B", "b", process(|p| p.timeout = Some(0))).env("9", "x");
    let c = JobSpec::new("ccc", "c", shell(|s| s.cwd = Some("/abs".into()))).depends_on(["ddd"]);
    let d = job("ddd").depends_on(["aaa", "ddd"]);
    let mut plan = plan_of([a, b, c, d, job("ddd")]);
    plan.name = String::new();
    plan.target_branch = Some("bad..branch".into());
    plan.worktree_init = vec![WorkSpec::shell(" ")];
    plan.env.insert("A=B".into(), "x".into());

    let errors = match validate(&plan, ValidationContext::default()) {
        Ok(_) => panic!("the plan is invalid"),
        Err(errors) => errors,
    };
    let expected: Vec<(String, String, String)> = [
        ("<plan>", "name", ""),
        ("<plan>", "targetBranch", "bad..branch"),
        ("<plan>", "env", "A=B"),
        ("<plan>", "worktreeInit[0].command", " "),
        ("aaa", "task", ""),
        ("aaa", "work.command", ""),
        ("aaa", "dependencies[1]", "nope"),
        ("aaa", "dependencies", "aaa -> ccc -> ddd -> aaa"),
        ("aaa", "prechecks.instructionsFile", "../p.md"),
        ("aaa", "prechecks.instructionsFile", "../p.md"),
        ("aaa", "prechecks.allowedUrls[0]", "ftp://x"),
        ("aaa", "group", "x//y"),
        ("B_B", "producerId", "B_B"),
        ("B_B", "work.timeout", "0"),
        ("B_B", "env", "9"),
        ("ccc", "work.cwd", "/abs"),
        ("ddd", "dependencies[1]", "ddd"),
        ("ddd", "producerId", "ddd"),
    ]
    .iter()
    .map(|(j, f, v)| (j.to_string(), f.to_string(), v.to_string()))
    .collect();
    let got = triples(errors.errors());
    // The duplicate `ddd` (jobs[4]) comes last; everything else as listed.
    assert_eq!(got, expected, "{errors}");

    let text = errors.to_string();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("18 problems in the plan:"));
    assert_eq!(lines.count(), 18);
    assert!(
        text.contains("\n  - plan field `name`: must not be empty"),
        "{text}"
    );
    assert!(
        text.contains("\n  - job `ccc`, field `work.cwd` = \"/abs\": must be relative"),
        "{text}"
    );
}

#[test]
fn a_single_problem_is_displayed_in_the_singular() {
    let errors = match validate(&plan_of([job("aaa").depends_on(["x"])]), Default::default()) {
        Ok(_) => panic!("the plan is invalid"),
        Err(errors) => errors,
    };
    assert!(errors
        .to_string()
        .starts_with("1 problem in the plan:\n  - job `aaa`"));
}

#[test]
fn the_same_plan_always_gives_the_same_report() {
    let plan = plan_of([
        job("aaa").depends_on(["bbb", "x"]),
        job("bbb").depends_on(["aaa", "y"]),
        job("a"),
    ]);
    let first = problems(&plan);
    for _ in 0..5 {
        assert_eq!(problems(&plan), first);
    }
}

// ---- helpers on their own ---------------------------------------------------------------------

#[test]
fn lexical_depth_normalizes_without_the_file_system() {
    assert_eq!(lexical_depth("."), Ok(0));
    assert_eq!(lexical_depth("./"), Ok(0));
    assert_eq!(lexical_depth("a/b/.."), Ok(1));
    assert_eq!(lexical_depth("a//b/"), Ok(2));
    assert_eq!(lexical_depth("a/../b/../c"), Ok(1));
    assert_eq!(lexical_depth("a/../.."), Err(PathProblem::Escapes));
    assert_eq!(lexical_depth("/a"), Err(PathProblem::Absolute));
    assert_eq!(lexical_depth(" "), Err(PathProblem::Empty));
    // A name that merely starts with dots is a name.
    assert_eq!(lexical_depth("..a/...b"), Ok(2));
}

#[test]
fn env_names_and_producer_ids() {
    assert!(is_env_name("A") && is_env_name("_") && is_env_name("a_1"));
    assert!(!is_env_name("") && !is_env_name("1") && !is_env_name("A.B"));
    assert_eq!(producer_id_problem("a-b"), None);
    assert_eq!(
        producer_id_problem("ab").as_deref(),
        Some("is 2 characters long, fewer than 3")
    );
}

// ---- scale ------------------------------------------------------------------------------------

/// 100k jobs in a layered DAG: each depends on the one before it and on one 1000 back.
fn big_plan(n: usize) -> PlanSpec {
    let ids: Vec<String> = (0..n).map(|i| format!("job-{i}")).collect();
    let jobs = (0..n).map(|i| {
        let mut j = JobSpec::new(ids[i].clone(), "step", WorkSpec::shell("true"));
        if i > 0 {
            j.dependencies.push(ids[i - 1].clone());
        }
        if i >= 1000 {
            j.dependencies.push(ids[i - 1000].clone());
        }
        j
    });
    plan_of(jobs)
}

#[test]
fn a_100k_job_plan_validates_quickly() {
    let plan = big_plan(100_000);
    let start = Instant::now();
    let graph = validate(&plan, ValidationContext::default());
    let took = start.elapsed();
    assert!(graph.is_ok_and(|g| g.job_count() == 100_000));
    // Debug build on a 2-core machine; release is far below this.
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn a_100k_job_plan_with_a_problem_in_every_job_validates_quickly() {
    let mut plan = big_plan(100_000);
    for j in &mut plan.jobs {
        j.task.clear();
    }
    plan.jobs[5].dependencies.push("missing".into());
    let start = Instant::now();
    let found = problems(&plan);
    let took = start.elapsed();
    assert_eq!(found.len(), 100_001);
    assert_eq!(found[6].field, "dependencies[1]");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn many_jobs_sharing_one_producer_id_stay_linear() {
    let n = 50_000;
    let plan = plan_of((0..n).map(|_| job("same").depends_on(["missing"])));
    let start = Instant::now();
    let found = problems(&plan);
    let took = start.elapsed();
    // n - 1 duplicates plus n unknown dependencies.
    assert_eq!(found.len(), 2 * n - 1);
    // Each unknown dependency sorts at its own job: after that job's duplicate report.
    assert_eq!(found[1].field, "producerId");
    assert_eq!(found[2].field, "dependencies[0]");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}
