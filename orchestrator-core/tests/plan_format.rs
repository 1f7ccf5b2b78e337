//! The plan format (SPEC §2) through the public API: parsing JSON and YAML, then validation.

use std::path::Path;

use orchestrator_core::plan::{
    load_plan_file, parse_plan, validate, AgentSpec, Effort, Isolation, ModelTier, PlanFormat,
    PlanSpec, ShellKind, ValidationContext, ValidationError, WorkSpec,
};
use orchestrator_core::{Error, Phase};

// ---- helpers ----------------------------------------------------------------------------------

#[track_caller]
fn parse_json(text: &str) -> PlanSpec {
    parse_plan(text, PlanFormat::Json, "plan.json").unwrap_or_else(|e| panic!("{e}"))
}

#[track_caller]
fn parse_yaml(text: &str) -> PlanSpec {
    parse_plan(text, PlanFormat::Yaml, "plan.yaml").unwrap_or_else(|e| panic!("{e}"))
}

/// The path and message of a parse error.
#[track_caller]
fn parse_error(text: &str, format: PlanFormat) -> (Option<String>, String) {
    match parse_plan(text, format, "plan") {
        Ok(plan) => panic!("expected a parse error, got {plan:?}"),
        Err(Error::Parse { path, message, .. }) => (path, message),
        Err(other) => panic!("expected a parse error, got {other}"),
    }
}

/// Asserts the text fails to parse (as JSON and as YAML, which reads JSON too) with an error
/// at `path` whose message mentions every one of `mentions`.
#[track_caller]
fn assert_parse_error(json: &str, path: &str, mentions: &[&str]) {
    for format in [PlanFormat::Json, PlanFormat::Yaml] {
        let (got_path, message) = parse_error(json, format);
        assert_eq!(got_path.as_deref(), Some(path), "{format:?}: {message}");
        for m in mentions {
            assert!(message.contains(m), "{format:?}: {message:?} lacks {m:?}");
        }
    }
}

/// A JSON plan with one job whose `work` is the given JSON value.
fn json_with_work(work: &str) -> String {
    format!(
        r#"{{"name":"p","jobs":[{{"producerId":"aaa","task":"t","dependencies":[],"work":{work}}}]}}"#
    )
}

fn problems(plan: &PlanSpec) -> Vec<ValidationError> {
    match validate(plan, ValidationContext::default()) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.errors().to_vec(),
    }
}

fn triples(found: &[ValidationError]) -> Vec<(String, String, String)> {
    found
        .iter()
        .map(|e| {
            let job = e.job.clone().unwrap_or_else(|| "<plan>".into());
            (job, e.field.clone(), e.value.clone())
        })
        .collect()
}

fn agent_of(work: &WorkSpec) -> &AgentSpec {
    match work {
        WorkSpec::Agent(a) => a,
        other => panic!("expected agent work, got {other:?}"),
    }
}

// ---- every field, camelCase and snake_case ----------------------------------------------------

const FULL_JSON: &str = r#"{
  "name": "Full plan",
  "baseBranch": "v1.2.3",
  "targetBranch": "feature/full",
  "maxParallel": 4,
  "cleanUpSuccessfulWork": false,
  "additionalSymlinkDirs": ["node_modules"],
  "startPaused": true,
  "verifyRi": {"type": "shell", "command": "make check", "onFailure": {"message": "fix it"}},
  "env": {"CI": "1"},
  "resumeAfterPlan": "plan-0001",
  "worktreeInit": ["npm ci", {"type": "process", "executable": "make", "args": ["deps"]}],
  "isolation": "worktree",
  "jobs": [
    {
      "producerId": "build",
      "task": "Build",
      "work": {"type": "shell", "command": "make", "shell": "bash", "env": {"A": "1"},
               "cwd": "src", "timeout": 60000,
               "onFailure": {"noAutoHeal": true, "message": "see log", "resumeFromPhase": "work"}},
      "dependencies": [],
      "name": "Build it",
      "prechecks": {"type": "process", "executable": "cargo", "args": ["--version"],
                    "env": {"B": "2"}, "cwd": ".", "timeout": 1000,
                    "onFailure": {"noAutoHeal": false}},
      "postchecks": "make test",
      "instructions": "be careful",
      "baseBranch": "main",
      "expectsNoChanges": true,
      "autoHeal": false,
      "group": "backend/api",
      "env": {"C": "3"}
    },
    {
      "producerId": "review",
      "task": "Review",
      "work": {"type": "agent", "instructions": "review the build", "agent": "claude",
               "model": "sonnet", "modelTier": "premium", "effort": "xhigh", "maxTurns": 5,
               "resumeSession": false, "allowedFolders": ["docs"],
               "allowedUrls": ["https://docs.rs", "*.example.com"], "env": {"D": "4"},
               "timeout": 5000, "onFailure": {"resumeFromPhase": "prechecks"}},
      "dependencies": ["build"]
    }
  ]
}"#;

const FULL_YAML_SNAKE: &str = r#"
name: Full plan
base_branch: v1.2.3
target_branch: feature/full
max_parallel: 4
clean_up_successful_work: false
additional_symlink_dirs: [node_modules]
start_paused: true
verify_ri:
  type: shell
  command: make check
  on_failure: {message: fix it}
env: {CI: "1"}
resume_after_plan: plan-0001
worktree_init:
  - npm ci
  - {type: process, executable: make, args: [deps]}
isolation: worktree
jobs:
  - producer_id: build
    task: Build
    work:
      type: shell
      command: make
      shell: bash
      env: {A: "1"}
      cwd: src
      timeout: 60000
      on_failure: {no_auto_heal: true, message: see log, resume_from_phase: work}
    dependencies: []
    name: Build it
    prechecks:
      type: process
      executable: cargo
      args: [--version]
      env: {B: "2"}
      cwd: .
      timeout: 1000
      on_failure: {no_auto_heal: false}
    postchecks: make test
    instructions: be careful
    base_branch: main
    expects_no_changes: true
    auto_heal: false
    group: backend/api
    env: {C: "3"}
  - producer_id: review
    task: Review
    work:
      type: agent
      instructions: review the build
      agent: claude
      model: sonnet
      model_tier: premium
      effort: xhigh
      max_turns: 5
      resume_session: false
      allowed_folders: [docs]
      allowed_urls: ["https://docs.rs", "*.example.com"]
      env: {D: "4"}
      timeout: 5000
      on_failure: {resume_from_phase: prechecks}
    dependencies: [build]
"#;

#[test]
fn every_field_parses_in_json_camel_case() {
    let plan = parse_json(FULL_JSON);
    assert_eq!(plan.name, "Full plan");
    assert_eq!(plan.base_branch.as_deref(), Some("v1.2.3"));
    assert_eq!(plan.target_branch.as_deref(), Some("feature/full"));
    assert_eq!(plan.max_parallel, Some(4));
    assert!(!plan.cleans_up());
    assert_eq!(plan.additional_symlink_dirs, ["node_modules"]);
    assert!(plan.start_paused);
    assert_eq!(plan.resume_after_plan.as_deref(), Some("plan-0001"));
    assert_eq!(plan.worktree_init.len(), 2);
    assert_eq!(plan.isolation, Isolation::Worktree);
    assert_eq!(plan.env.get("CI").map(String::as_str), Some("1"));

    let build = &plan.jobs[0];
    assert!(build.extra.expects_no_changes);
    assert_eq!(build.extra.auto_heal, Some(false));
    assert_eq!(build.extra.group.as_deref(), Some("backend/api"));
    assert_eq!(build.display_name(), "Build it");
    match &build.work {
        WorkSpec::Shell(s) => {
            assert_eq!(s.extra.shell, Some(ShellKind::Bash));
            assert_eq!(s.extra.timeout, Some(60_000));
            assert_eq!(s.extra.cwd.as_deref(), Some("src"));
        }
        other => panic!("expected shell work, got {other:?}"),
    }
    let on_failure = build.work.on_failure().cloned().unwrap_or_default();
    assert_eq!(on_failure.no_auto_heal, Some(true));
    assert_eq!(on_failure.message.as_deref(), Some("see log"));
    assert_eq!(on_failure.resume_from_phase, Some(Phase::Work));
    assert!(
        matches!(build.extra.prechecks.as_deref(), Some(WorkSpec::Process(p)) if p.args == ["--version"])
    );
    assert_eq!(
        build.extra.postchecks.as_deref(),
        Some(&WorkSpec::shell("make test"))
    );

    let review = agent_of(&plan.jobs[1].work);
    assert_eq!(review.model_tier, Some(ModelTier::Premium));
    assert_eq!(review.effort, Some(Effort::Xhigh));
    assert_eq!(review.max_turns, Some(5));
    assert_eq!(review.resume_session, Some(false));
    assert_eq!(
        plan.jobs[1]
            .work
            .on_failure()
            .and_then(|f| f.resume_from_phase),
        Some(Phase::Prechecks)
    );

    let graph = validate(&plan, ValidationContext::default());
    assert!(
        graph.is_ok_and(|g| g.job_count() == 2),
        "{:?}",
        problems(&plan)
    );
}

#[test]
fn snake_case_aliases_parse_to_the_same_plan() {
    assert_eq!(parse_yaml(FULL_YAML_SNAKE), parse_json(FULL_JSON));
}

#[test]
fn snake_case_aliases_work_in_json_too() {
    let plan = parse_json(
        r#"{"name":"p","max_parallel":2,"jobs":[{"producer_id":"aaa","task":"t",
            "dependencies":[],"expects_no_changes":true,
            "work":{"type":"agent","instructions_file":"p.md","max_turns":3,
                    "on_failure":{"resume_from_phase":"merge-fi","no_auto_heal":true}}}]}"#,
    );
    assert_eq!(plan.max_parallel, Some(2));
    assert!(plan.jobs[0].extra.expects_no_changes);
    let a = agent_of(&plan.jobs[0].work);
    assert_eq!(a.instructions_file.as_deref(), Some("p.md"));
    assert_eq!(a.max_turns, Some(3));
    assert_eq!(
        a.on_failure.as_ref().and_then(|f| f.resume_from_phase),
        Some(Phase::MergeFi)
    );
}

#[test]
fn giving_a_field_in_both_spellings_is_an_error() {
    let (path, message) = parse_error(
        "name: p\njobs:\n  - producerId: aaa\n    producer_id: aaa\n    task: t\n    work: x\n    dependencies: []\n",
        PlanFormat::Yaml,
    );
    assert_eq!(path.as_deref(), Some("jobs[0]"));
    assert!(
        message.contains("duplicate field `producerId`"),
        "{message}"
    );
}

#[test]
fn the_serialized_form_parses_back_to_the_same_plan() {
    let plan = parse_json(FULL_JSON);
    let text = serde_json::to_string(&plan).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parse_json(&text), plan);
}

// ---- work specs -------------------------------------------------------------------------------

#[test]
fn string_shorthands() {
    let plan = parse_yaml(
        r#"
name: p
jobs:
  - {producerId: aaa, task: t, dependencies: [], work: "@agent add tests for the parser"}
  - {producerId: bbb, task: t, dependencies: [], work: "npm test -- --watch=false"}
  - {producerId: ccc, task: t, dependencies: [], work: "@agentic-tool run"}
  - {producerId: ddd, task: t, dependencies: [], work: "@agent\tmulti\nline"}
verifyRi: "make verify"
worktreeInit: ["npm ci", "@agent install what is missing"]
"#,
    );
    assert_eq!(
        plan.jobs[0].work,
        WorkSpec::agent("add tests for the parser")
    );
    assert_eq!(
        plan.jobs[1].work,
        WorkSpec::shell("npm test -- --watch=false")
    );
    // Only `@agent` followed by whitespace (or nothing) is the agent shorthand.
    assert_eq!(plan.jobs[2].work, WorkSpec::shell("@agentic-tool run"));
    assert_eq!(plan.jobs[3].work, WorkSpec::agent("multi\nline"));
    assert_eq!(plan.verify_ri, Some(WorkSpec::shell("make verify")));
    assert_eq!(plan.worktree_init[1].kind(), "agent");
    assert!(problems(&plan).is_empty(), "{:?}", problems(&plan));
}

#[test]
fn an_agent_shorthand_without_instructions_is_invalid() {
    let plan = parse_json(&json_with_work(r#""@agent   ""#));
    assert_eq!(
        triples(&problems(&plan)),
        [("aaa".into(), "work.instructions".into(), "".into())]
    );
}

#[test]
fn every_work_type_parses() {
    for (work, kind) in [
        (r#"{"type":"shell","command":"ls"}"#, "shell"),
        (
            r#"{"type":"process","executable":"ls","args":["-l"]}"#,
            "process",
        ),
        (r#"{"type":"agent","instructions":"x"}"#, "agent"),
        (r#"{"type":"agent","instructionsFile":"x.md"}"#, "agent"),
    ] {
        let plan = parse_json(&json_with_work(work));
        assert_eq!(plan.jobs[0].work.kind(), kind, "{work}");
    }
    for shell in ["sh", "bash", "pwsh", "powershell", "cmd"] {
        let plan = parse_json(&json_with_work(&format!(
            r#"{{"type":"shell","command":"ls","shell":"{shell}"}}"#
        )));
        assert!(matches!(&plan.jobs[0].work, WorkSpec::Shell(s) if s.extra.shell.is_some()));
    }
}

#[test]
fn on_failure_is_accepted_on_every_work_type_and_location() {
    let on_failure = r#""onFailure":{"noAutoHeal":true,"message":"m","resumeFromPhase":"setup"}"#;
    let specs = [
        format!(r#"{{"type":"shell","command":"ls",{on_failure}}}"#),
        format!(r#"{{"type":"process","executable":"ls",{on_failure}}}"#),
        format!(r#"{{"type":"agent","instructions":"x",{on_failure}}}"#),
    ];
    for spec in &specs {
        let text = format!(
            r#"{{"name":"p","verifyRi":{spec},"worktreeInit":[{spec}],"jobs":[{{
                "producerId":"aaa","task":"t","dependencies":[],
                "work":{spec},"prechecks":{spec},"postchecks":{spec}}}]}}"#
        );
        let plan = parse_json(&text);
        let job = &plan.jobs[0];
        let all = [
            plan.verify_ri.as_ref(),
            plan.worktree_init.first(),
            Some(&job.work),
            job.extra.prechecks.as_deref(),
            job.extra.postchecks.as_deref(),
        ];
        for work in all {
            let f = work.and_then(WorkSpec::on_failure);
            assert_eq!(
                f.and_then(|f| f.resume_from_phase),
                Some(Phase::Setup),
                "{spec}"
            );
            assert_eq!(f.and_then(|f| f.message.as_deref()), Some("m"));
        }
        assert!(problems(&plan).is_empty());
    }
}

#[test]
fn isolation_modes() {
    let none = parse_json(r#"{"name":"p","isolation":"none","jobs":[]}"#);
    assert_eq!(none.isolation, Isolation::None);
    let worktree = parse_yaml("name: p\nisolation: worktree\njobs: []\n");
    assert_eq!(worktree.isolation, Isolation::Worktree);
    let default = parse_yaml("name: p\njobs: []\n");
    assert_eq!(default.isolation, Isolation::Worktree);
    assert_parse_error(
        r#"{"name":"p","isolation":"container","jobs":[]}"#,
        "isolation",
        &["unknown variant `container`", "worktree", "none"],
    );
}

// ---- unknown fields and values name their path ------------------------------------------------

#[test]
fn an_unknown_plan_field_is_named() {
    assert_parse_error(
        r#"{"name":"p","jobs":[],"maxParalel":2}"#,
        "maxParalel",
        &["unknown field `maxParalel`", "maxParallel"],
    );
}

#[test]
fn an_unknown_job_field_is_named_with_its_path() {
    let text = r#"{"name":"p","jobs":[
        {"producerId":"aaa","task":"t","work":"ls","dependencies":[]},
        {"producerId":"bbb","task":"t","work":"ls","dependencies":[],"dependsOn":["aaa"]}]}"#;
    assert_parse_error(
        text,
        "jobs[1].dependsOn",
        &["unknown field `dependsOn`", "dependencies"],
    );
}

#[test]
fn an_unknown_work_field_is_named_with_its_path() {
    let text = json_with_work(r#"{"type":"shell","comand":"ls"}"#);
    assert_parse_error(
        &text,
        "jobs[0].work.comand",
        &["unknown field `comand`", "`command`"],
    );

    let yaml = "name: p\njobs:\n  - producer_id: aaa\n    task: t\n    dependencies: []\n    work:\n      type: shell\n      comand: ls\n";
    let (path, message) = parse_error(yaml, PlanFormat::Yaml);
    assert_eq!(path.as_deref(), Some("jobs[0].work.comand"));
    assert!(message.contains("unknown field `comand`"), "{message}");
    // The display form carries source, path and field.
    let shown = parse_plan(yaml, PlanFormat::Yaml, "plan.yaml")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        shown.starts_with("cannot parse plan plan.yaml: at jobs[0].work.comand:")
            && shown.contains("comand"),
        "{shown}"
    );
}

#[test]
fn unknown_fields_in_checks_and_on_failure_are_named() {
    let text = r#"{"name":"p","jobs":[{"producerId":"aaa","task":"t","work":"ls","dependencies":[],
        "prechecks":{"type":"agent","instructions":"x","onFailure":{"mesage":"m"}}}]}"#;
    assert_parse_error(
        text,
        "jobs[0].prechecks.onFailure.mesage",
        &["unknown field `mesage`", "`message`"],
    );

    let text = r#"{"name":"p","jobs":[],"verifyRi":{"type":"process","executable":"x","argv":[]}}"#;
    assert_parse_error(text, "verifyRi.argv", &["unknown field `argv`", "`args`"]);

    let text =
        r#"{"name":"p","jobs":[],"worktreeInit":["ls",{"type":"shell","command":"x","cdw":"a"}]}"#;
    assert_parse_error(
        text,
        "worktreeInit[1].cdw",
        &["unknown field `cdw`", "`cwd`"],
    );
}

#[test]
fn an_unknown_work_type_is_rejected_with_the_allowed_ones() {
    let text = json_with_work(r#"{"type":"docker","image":"x"}"#);
    assert_parse_error(
        &text,
        "jobs[0].work.type",
        &[
            "unknown variant `docker`",
            "`shell`",
            "`process`",
            "`agent`",
        ],
    );
    let text = json_with_work(r#"{"command":"ls"}"#);
    assert_parse_error(&text, "jobs[0].work", &["missing field `type`"]);
    let text = json_with_work("42");
    assert_parse_error(&text, "jobs[0].work", &["@agent"]);
}

#[test]
fn unknown_enum_values_in_work_specs_are_rejected() {
    let cases = [
        (
            r#"{"type":"shell","command":"ls","shell":"fish"}"#,
            "jobs[0].work.shell",
            "`fish`",
        ),
        (
            r#"{"type":"agent","instructions":"x","effort":"max"}"#,
            "jobs[0].work.effort",
            "`max`",
        ),
        (
            r#"{"type":"agent","instructions":"x","modelTier":"huge"}"#,
            "jobs[0].work.modelTier",
            "`huge`",
        ),
        (
            r#"{"type":"shell","command":"ls","onFailure":{"resumeFromPhase":"deploy"}}"#,
            "jobs[0].work.onFailure.resumeFromPhase",
            "`deploy`",
        ),
        (
            r#"{"type":"shell","command":"ls","timeout":-1}"#,
            "jobs[0].work.timeout",
            "-1",
        ),
    ];
    for (work, path, mention) in cases {
        assert_parse_error(&json_with_work(work), path, &[mention]);
    }
}

#[test]
fn fields_of_another_work_type_are_refused_by_name() {
    let text = json_with_work(r#"{"type":"shell","command":"ls","executable":"x"}"#);
    assert_parse_error(
        &text,
        "jobs[0].work",
        &["field `executable` does not belong to shell work"],
    );
    let text = json_with_work(r#"{"type":"agent","instructions":"x","cwd":"sub"}"#);
    assert_parse_error(
        &text,
        "jobs[0].work",
        &["`cwd` does not belong to agent work"],
    );
    let text = json_with_work(r#"{"type":"process","args":["a"]}"#);
    assert_parse_error(&text, "jobs[0].work", &["missing field `executable`"]);
}

#[test]
fn yaml_scalars_in_work_specs_read_as_strings() {
    let yaml = "name: p\njobs:\n  - producerId: aaa\n    task: t\n    dependencies: []\n    work:\n      type: process\n      executable: server\n      args: [--port, 8080]\n      env: {PORT: 8080, DEBUG: true}\n";
    let plan = parse_plan(yaml, PlanFormat::Yaml, "plan.yaml").expect("valid YAML plan");
    let WorkSpec::Process(p) = &plan.jobs[0].work else {
        panic!("process work expected");
    };
    assert_eq!(p.args, ["--port", "8080"]);
    assert_eq!(p.env.get("PORT").map(String::as_str), Some("8080"));
    assert_eq!(p.env.get("DEBUG").map(String::as_str), Some("true"));
}

#[test]
fn required_fields_are_named() {
    let text = r#"{"name":"p","jobs":[{"producerId":"aaa","task":"t","work":"ls"}]}"#;
    assert_parse_error(text, "jobs[0]", &["missing field `dependencies`"]);
    let (_, message) = parse_error(r#"{"jobs":[]}"#, PlanFormat::Json);
    assert!(message.contains("missing field `name`"), "{message}");
}

// ---- parse, then validate ---------------------------------------------------------------------

#[test]
fn a_parsed_plan_reports_every_problem_with_job_field_and_value() {
    let plan = parse_yaml(
        r#"
name: "   "
baseBranch: "main~1"
jobs:
  - producerId: aaa
    task: t
    work: {type: shell, command: make, cwd: ../outside}
    dependencies: [ccc]
  - producerId: BBB
    task: ""
    work: {type: agent, instructions: x, instructionsFile: p.md, allowedUrls: ["file:///etc"]}
    dependencies: [nope]
  - producerId: ccc
    task: t
    work: "true"
    dependencies: [aaa]
    group: a//b
"#,
    );
    let errors = match validate(&plan, ValidationContext::default()) {
        Ok(_) => panic!("the plan is invalid"),
        Err(errors) => errors,
    };
    let expected = [
        ("<plan>", "name", "   "),
        ("<plan>", "baseBranch", "main~1"),
        ("aaa", "work.cwd", "../outside"),
        ("aaa", "dependencies", "aaa -> ccc -> aaa"),
        ("BBB", "producerId", "BBB"),
        ("BBB", "task", ""),
        ("BBB", "work.instructionsFile", "p.md"),
        ("BBB", "work.allowedUrls[0]", "file:///etc"),
        ("BBB", "dependencies[0]", "nope"),
        ("ccc", "group", "a//b"),
    ]
    .map(|(j, f, v)| (j.to_owned(), f.to_owned(), v.to_owned()));
    assert_eq!(triples(errors.errors()), expected, "{errors}");

    let shown = Error::from(errors).to_string();
    assert!(
        shown.starts_with("10 problems in the plan:\n  - plan field `name`"),
        "{shown}"
    );
    assert!(
        shown.contains("job `aaa`, field `dependencies` = \"aaa -> ccc -> aaa\": dependency cycle")
    );
}

#[test]
fn a_cycle_in_a_plan_file_is_printed_as_a_path() {
    let plan = parse_yaml(
        r#"
name: cyclic
jobs:
  - {producerId: aaa, task: t, work: "true", dependencies: [bbb]}
  - {producerId: bbb, task: t, work: "true", dependencies: [ccc]}
  - {producerId: ccc, task: t, work: "true", dependencies: [aaa]}
"#,
    );
    assert_eq!(
        triples(&problems(&plan)),
        [(
            "aaa".into(),
            "dependencies".into(),
            "aaa -> bbb -> ccc -> aaa".into()
        )]
    );
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir: {e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write: {e}"));
}

#[test]
fn plan_files_are_loaded_and_checked_against_the_repository() {
    let repo = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    write(repo.path(), "prompts/review.md", "Review the change.");
    write(repo.path(), "docs/readme.md", "docs");
    write(
        repo.path(),
        "plan.yaml",
        r#"
name: with files
jobs:
  - producerId: review
    task: Review
    dependencies: []
    work: {type: agent, instructionsFile: prompts/review.md, allowedFolders: [docs]}
  - producerId: missing
    task: Missing
    dependencies: [review]
    work: {type: agent, instructionsFile: prompts/gone.md, allowedFolders: [docs, ../..]}
"#,
    );
    write(
        repo.path(),
        "plan.json",
        r#"{"name":"json","jobs":[{"producerId":"aaa","task":"t","work":"ls","dependencies":[]}]}"#,
    );
    let ctx = ValidationContext {
        repo: Some(repo.path()),
        ..Default::default()
    };

    let json = load_plan_file(&repo.path().join("plan.json")).unwrap_or_else(|e| panic!("{e}"));
    assert!(validate(&json, ctx).is_ok());

    let yaml = load_plan_file(&repo.path().join("plan.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let found = match validate(&yaml, ctx) {
        Ok(_) => panic!("the plan is invalid"),
        Err(errors) => errors.errors().to_vec(),
    };
    assert_eq!(
        triples(&found),
        [
            (
                "missing".into(),
                "work.instructionsFile".into(),
                "prompts/gone.md".into()
            ),
            (
                "missing".into(),
                "work.allowedFolders[1]".into(),
                "../..".into()
            ),
        ]
    );
    assert!(found[0].message.contains("does not exist"), "{}", found[0]);
    assert!(found[1].message.contains("climbs out"), "{}", found[1]);

    // Without the repository, only what can be judged from the text is checked.
    assert_eq!(problems(&yaml).len(), 1);

    match load_plan_file(&repo.path().join("absent.yaml")) {
        Err(Error::Io { path, .. }) => assert!(path.ends_with("absent.yaml")),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn a_plan_with_no_jobs_parses_but_does_not_validate() {
    let plan = parse_json(r#"{"name":"empty","jobs":[]}"#);
    assert_eq!(
        triples(&problems(&plan)),
        [("<plan>".into(), "jobs".into(), "[]".into())]
    );
}

// ---- a plan that does not parse: every problem at once -----------------------------------------

/// Every problem of a plan text that does not parse, as (job, field, value) triples.
#[track_caller]
fn all_problems(text: &str, format: PlanFormat) -> Vec<ValidationError> {
    match parse_plan(text, format, "plan") {
        Ok(plan) => panic!("expected problems, got {plan:?}"),
        Err(Error::Invalid(errors)) => errors.errors().to_vec(),
        Err(other) => panic!("expected every problem, got {other}"),
    }
}

/// An unknown field in the first job, an unknown work type in the second, a cycle and a bad
/// producerId: four problems, none hiding another.
const FOUR_PROBLEMS: &str = r#"{"name":"four","jobs":[
    {"producerId":"aaa","task":"a","work":"ls","dependencies":["ccc"],"dependsOn":["x"]},
    {"producerId":"bbb","task":"b","work":{"type":"docker","image":"x"},"dependencies":[]},
    {"producerId":"ccc","task":"c","work":"ls","dependencies":["aaa"]},
    {"producerId":"Bad_Id","task":"d","work":"ls","dependencies":["bbb"]}]}"#;

#[test]
fn parse_problems_do_not_hide_the_other_problems() {
    let yaml = FOUR_PROBLEMS.replace('\n', " ");
    for (format, text) in [(PlanFormat::Json, FOUR_PROBLEMS), (PlanFormat::Yaml, &yaml)] {
        let found = all_problems(text, format);
        let t = triples(&found);
        assert_eq!(
            t,
            [
                // In the order of the plan format: `dependencies` before other fields.
                (
                    "aaa".into(),
                    "dependencies".into(),
                    "aaa -> ccc -> aaa".into()
                ),
                ("aaa".into(), "dependsOn".into(), r#"["x"]"#.into()),
                ("bbb".into(), "work.type".into(), "docker".into()),
                ("Bad_Id".into(), "producerId".into(), "Bad_Id".into()),
            ],
            "{format:?}: {found:#?}"
        );
        assert!(found[0].message.contains("cycle"), "{}", found[0]);
        assert!(
            found[1].message.contains("unknown field `dependsOn`"),
            "{}",
            found[1]
        );
        assert!(
            found[2].message.contains("unknown variant `docker`"),
            "{}",
            found[2]
        );
        assert!(
            found[2].message.contains("`shell`, `process`, `agent`"),
            "{}",
            found[2]
        );
        assert!(found[3].message.contains("contains 'B'"), "{}", found[3]);
        // The error's text names every one of them, as the CLI prints it.
        let text = parse_plan(text, format, "plan.json")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        for mention in [
            "dependsOn",
            "docker",
            "aaa -> ccc -> aaa",
            "Bad_Id",
            "4 problems",
        ] {
            assert!(text.contains(mention), "{format:?}: {text} lacks {mention}");
        }
    }
}

#[test]
fn wrong_types_missing_fields_and_bad_values_are_all_named() {
    let text = r#"{"name":"p","maxParalel":2,"startPaused":"yes","jobs":[
        {"producerId":"aaa","task":5,"work":{"type":"shell","command":"ls","timeout":-1},"dependencies":[]},
        {"producerId":"bbb","task":"b","dependencies":["aaa", 7]},
        "not a job",
        {"producerId":"ddd","task":"d","work":{"type":"shell","comand":"ls"},"dependencies":["nope"]}]}"#;
    for format in [PlanFormat::Json, PlanFormat::Yaml] {
        let found = all_problems(text, format);
        let t = triples(&found);
        let fields: Vec<(&str, &str)> =
            t.iter().map(|(j, f, _)| (j.as_str(), f.as_str())).collect();
        let expected = [
            ("<plan>", "maxParalel"),
            ("<plan>", "startPaused"),
            ("aaa", "task"),
            ("aaa", "work.timeout"),
            ("bbb", "work"),
            ("bbb", "dependencies[1]"),
            ("jobs[2]", ""),
            // `comand` for `command`: one mistake, named once.
            ("ddd", "work.comand"),
            ("ddd", "dependencies[0]"),
        ];
        // YAML reads the untyped scalar `5` as the string it may be, as its typed parse does.
        let yaml = format == PlanFormat::Yaml;
        let expected: Vec<(&str, &str)> = expected
            .into_iter()
            .filter(|f| !yaml || *f != ("aaa", "task"))
            .collect();
        assert_eq!(fields, expected, "{format:?}: {found:#?}");
        let value_of = |field: &str| {
            t.iter()
                .find(|(_, f, _)| f == field)
                .map(|(_, _, v)| v.clone())
                .unwrap_or_default()
        };
        if !yaml {
            assert_eq!(value_of("task"), "5");
        }
        assert_eq!(value_of("work.timeout"), "-1");
        assert_eq!(value_of("dependencies[1]"), "7");
        assert_eq!(value_of("dependencies[0]"), "nope");
        let message_of = |field: &str| {
            found
                .iter()
                .find(|e| e.field == field)
                .map(|e| e.message.clone())
                .unwrap_or_default()
        };
        assert!(message_of("work").contains("missing field `work`"));
        assert!(message_of("dependencies[0]").contains("unknown dependency"));
        assert!(message_of("work.comand").contains("unknown field `comand`"));
    }
}

#[test]
fn one_parse_problem_alone_keeps_its_parse_error() {
    // Nothing else is wrong: the error stays the parse error with its path.
    let text = r#"{"name":"p","jobs":[
        {"producerId":"aaa","task":"a","work":"ls","dependencies":[],"dependsOn":["x"]}]}"#;
    for format in [PlanFormat::Json, PlanFormat::Yaml] {
        let (path, message) = parse_error(text, format);
        assert_eq!(path.as_deref(), Some("jobs[0].dependsOn"), "{message}");
    }
}
