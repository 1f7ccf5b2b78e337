//! Validation of work specs, of the paths they name, edge cases, and validation at scale.

use super::*;

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
        shell(|s| s.extra.make_mut().timeout = Some(0)),
        process(|p| p.timeout = Some(0)),
        agent(|a| a.timeout = Some(0)),
    ] {
        let msg = single(&with_work(work), Some("job"), "work.timeout", "0");
        assert!(msg.contains("at least 1"), "{msg}");
    }
    assert_valid(&with_work(shell(|s| s.extra.make_mut().timeout = Some(1))));
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
            shell(|s| s.extra.make_mut().cwd = Some(cwd.into())),
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
        s.extra.make_mut().env.insert("BAD-KEY".into(), "1".into());
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
    let bad = || shell(|s| s.extra.make_mut().cwd = Some("../out".into()));
    let mut j = job("aaa");
    j.work = bad();
    j.extra.make_mut().prechecks = Some(Box::new(bad()));
    j.extra.make_mut().postchecks = Some(Box::new(bad()));
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
            s.extra.make_mut().cwd = Some("sub/dir/..".into());
            s.extra.make_mut().timeout = Some(60_000);
            s.extra.make_mut().on_failure = Some(Box::new(on_failure.clone()));
            s.extra
                .make_mut()
                .env
                .insert("RUST_LOG".into(), "debug".into());
        }),
    );
    build.extra.make_mut().base_branch = Some("3f2a9c1e0b7d4c5a6f8e9d0c1b2a3f4e5d6c7b8a".into());
    build.extra.make_mut().group = Some("backend/api".into());
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
    a.extra.make_mut().group = Some("x//y".into());
    a.extra.make_mut().prechecks = Some(Box::new(agent(|x| {
        x.instructions_file = Some("../p.md".into());
        x.allowed_urls = vec!["ftp://x".into()];
    })));
    let b = JobSpec::new("B_B", "b", process(|p| p.timeout = Some(0))).env("9", "x");
    let c = JobSpec::new(
        "ccc",
        "c",
        shell(|s| s.extra.make_mut().cwd = Some("/abs".into())),
    )
    .depends_on(["ddd"]);
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
