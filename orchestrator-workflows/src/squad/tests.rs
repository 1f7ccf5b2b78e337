//! Tests of Squad folders: the seed's mapping, discovery, errors with their lines, and round trips.

use super::*;
use proptest::prelude::*;

fn put(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().expect("should succeed")).expect("should succeed");
    fs::write(path, text).expect("should succeed");
}

fn squad_parts(error: Error) -> (PathBuf, Option<usize>, String) {
    match error {
        Error::Squad {
            file,
            line,
            message,
        } => (file, line, message),
        other => panic!("not a Squad error: {other:?}"),
    }
}

fn load_error(team_md: &str) -> (PathBuf, Option<usize>, String) {
    let dir = tempfile::tempdir().expect("should succeed");
    put(dir.path(), "team.md", team_md);
    squad_parts(load(dir.path()).expect_err("should fail"))
}

fn worker(name: &str, prompt: Option<&str>) -> WorkerSpec {
    let mut w = WorkerSpec::new(name);
    w.system_prompt = prompt.map(str::to_string);
    w
}

const SEED_TEAM: &str = "# Code Review Team\n\nWe review code.\n\n## Members\n\n\
    | Member | Role |\n|--------|------|\n\
    | Alice | Security reviewer |\n| Bob | Performance reviewer |\n";

#[test]
fn seed_mapping_reads_roster_charters_routing_and_decisions() {
    let repo = tempfile::tempdir().expect("should succeed");
    let squad = repo.path().join(".squad");
    put(&squad, "team.md", SEED_TEAM);
    put(
        &squad,
        "agents/alice/charter.md",
        "\nYou are a security reviewer.\nLook for injection.\n\n",
    );
    put(&squad, "routing.md", "Security questions go to alice.\n");
    put(&squad, "decisions.md", "\nWe use Rust 2021.\n\n");
    let (dir, team) = discover(repo.path())
        .expect("should succeed")
        .expect("should succeed");
    assert_eq!(dir, squad);
    assert_eq!(team.name, "Code Review Team");
    assert_eq!(team.workers.len(), 2);
    assert_eq!(team.workers[0].name, "alice");
    assert_eq!(
        team.workers[0].system_prompt.as_deref(),
        Some("You are a security reviewer.\nLook for injection.")
    );
    assert_eq!(team.workers[1].name, "bob");
    assert_eq!(
        team.workers[1].system_prompt.as_deref(),
        Some("You are Performance reviewer.")
    );
    assert_eq!(
        team.routing.as_deref(),
        Some("Security questions go to alice.")
    );
    assert_eq!(team.decisions.as_deref(), Some("We use Rust 2021."));
    assert!(team.notes.is_empty());
}

#[test]
fn legacy_ai_team_is_discovered_when_squad_is_absent() {
    let repo = tempfile::tempdir().expect("should succeed");
    put(&repo.path().join(".ai-team"), "team.md", SEED_TEAM);
    let (dir, team) = discover(repo.path())
        .expect("should succeed")
        .expect("should succeed");
    assert_eq!(dir, repo.path().join(".ai-team"));
    assert_eq!(team.workers[0].name, "alice");
}

#[test]
fn squad_is_preferred_over_ai_team() {
    let repo = tempfile::tempdir().expect("should succeed");
    put(&repo.path().join(".ai-team"), "team.md", SEED_TEAM);
    put(
        &repo.path().join(".squad"),
        "team.md",
        "| Role | Member |\n|---|---|\n| lead | Carol |\n",
    );
    let (dir, team) = discover(repo.path())
        .expect("should succeed")
        .expect("should succeed");
    assert_eq!(dir, repo.path().join(".squad"));
    assert_eq!(team.workers.len(), 1);
    assert_eq!(team.workers[0].name, "carol");
}

#[test]
fn discover_answers_none_without_a_squad_folder() {
    let repo = tempfile::tempdir().expect("should succeed");
    assert!(discover(repo.path()).expect("should succeed").is_none());
}

#[test]
fn byte_order_mark_and_crlf_are_accepted() {
    let dir = tempfile::tempdir().expect("should succeed");
    put(
        dir.path(),
        "team.md",
        "\u{feff}# Ops\r\n\r\n| Member | Role |\r\n|---|---|\r\n| alice | on call |\r\n",
    );
    let team = load(dir.path()).expect("should succeed");
    assert_eq!(team.name, "Ops");
    assert_eq!(
        team.workers[0].system_prompt.as_deref(),
        Some("You are on call.")
    );
}

#[test]
fn team_name_defaults_to_the_repository_folder() {
    let repo = tempfile::tempdir().expect("should succeed");
    let root = repo.path().join("my-repo");
    put(
        &root.join(".squad"),
        "team.md",
        "| Member | Role |\n|-|-|\n| bob | |\n",
    );
    let team = load(&root.join(".squad")).expect("should succeed");
    assert_eq!(team.name, "my-repo");
    assert_eq!(team.workers[0].system_prompt, None);
    assert_eq!(default_name(Path::new(".squad")), "squad");
}

#[test]
fn member_names_are_sanitized() {
    assert_eq!(sanitize_name("Code Reviewer"), "code-reviewer");
    assert_eq!(sanitize_name("  **Dr. Ops__Bot!** "), "dr-ops-bot");
    assert_eq!(sanitize_name("Zoë"), "zo");
    let dir = tempfile::tempdir().expect("should succeed");
    put(
        dir.path(),
        "team.md",
        "| Member | Role |\n|---|---|\n| Code Reviewer | reviews code |\n",
    );
    put(dir.path(), "agents/code-reviewer/charter.md", "Review it.");
    let team = load(dir.path()).expect("should succeed");
    assert_eq!(team.workers[0].name, "code-reviewer");
    assert_eq!(team.workers[0].system_prompt.as_deref(), Some("Review it."));
}

#[test]
fn invalid_member_name_names_its_line() {
    let (file, line, message) =
        load_error("# T\n| Member | Role |\n|---|---|\n| alice | a |\n| Al | b |\n");
    assert!(file.ends_with("team.md"));
    assert_eq!(line, Some(5));
    assert!(message.contains("`al`"), "{message}");
    assert!(message.contains("fewer than 3"), "{message}");
}

#[test]
fn extra_columns_are_read_in_any_order_and_case() {
    let dir = tempfile::tempdir().expect("should succeed");
    put(
        dir.path(),
        "team.md",
        "| EFFORT | model | Member | Notes | Role | Agent |\n\
         |:--|:-:|--|--|--|--:|\n\
         | High | sonnet | alice | x | lead | claude |\n\
         |  |  | bob | y | helper |  |\n",
    );
    let team = load(dir.path()).expect("should succeed");
    let alice = &team.workers[0];
    assert_eq!(alice.effort, Some(Effort::High));
    assert_eq!(alice.model.as_deref(), Some("sonnet"));
    assert_eq!(alice.agent.as_deref(), Some("claude"));
    let bob = &team.workers[1];
    assert_eq!(
        (bob.effort, bob.model.as_deref(), bob.agent.as_deref()),
        (None, None, None)
    );
}

#[test]
fn unknown_effort_names_its_line() {
    let (_, line, message) =
        load_error("| Member | Role | Effort |\n|---|---|---|\n| alice | a | max |\n");
    assert_eq!(line, Some(3));
    assert!(message.contains("unknown effort `max`"), "{message}");
}

#[test]
fn charter_over_the_cap_is_cut_with_a_note() {
    let dir = tempfile::tempdir().expect("should succeed");
    put(
        dir.path(),
        "team.md",
        "| Member | Role |\n|---|---|\n| bob | b |\n",
    );
    let long = "é".repeat(CHARTER_CAP + 10);
    put(dir.path(), "agents/bob/charter.md", &long);
    let team = load(dir.path()).expect("should succeed");
    let prompt = team.workers[0]
        .system_prompt
        .as_deref()
        .expect("should succeed");
    assert_eq!(prompt.chars().count(), CHARTER_CAP);
    assert_eq!(
        team.notes,
        vec![format!(
            "agents/bob/charter.md: cut to 4000 characters (it has {})",
            CHARTER_CAP + 10
        )]
    );
}

#[test]
fn charter_at_the_cap_is_kept_whole() {
    let dir = tempfile::tempdir().expect("should succeed");
    put(
        dir.path(),
        "team.md",
        "| Member | Role |\n|---|---|\n| bob | b |\n",
    );
    put(
        dir.path(),
        "agents/bob/charter.md",
        &"x".repeat(CHARTER_CAP),
    );
    let team = load(dir.path()).expect("should succeed");
    assert_eq!(
        team.workers[0]
            .system_prompt
            .as_ref()
            .expect("should succeed")
            .len(),
        CHARTER_CAP
    );
    assert!(team.notes.is_empty());
}

#[test]
fn malformed_row_names_its_line() {
    let (file, line, message) =
        load_error("# Team\n\n| Member | Role |\n|---|---|\n| alice | a |\n| bob | b | extra |\n");
    assert!(file.ends_with("team.md"));
    assert_eq!(line, Some(6));
    assert!(message.contains("3 cells"), "{message}");
    let shown = load(Path::new("/nowhere"))
        .expect_err("should fail")
        .to_string();
    assert!(shown.contains("no Squad folder here"), "{shown}");
}

#[test]
fn error_display_shows_file_and_line() {
    let dir = tempfile::tempdir().expect("should succeed");
    put(
        dir.path(),
        "team.md",
        "| Member | Role |\n|---|---|\n| a | b | c |\n",
    );
    let shown = load(dir.path()).expect_err("should fail").to_string();
    assert!(shown.contains("team.md:3: "), "{shown}");
}

#[test]
fn header_without_separator_names_the_next_line() {
    let (_, line, message) = load_error("| Member | Role |\n| alice | a |\n");
    assert_eq!(line, Some(2));
    assert!(message.contains("separator"), "{message}");
}

#[test]
fn missing_team_md_names_the_file() {
    let dir = tempfile::tempdir().expect("should succeed");
    let (file, line, _) = squad_parts(load(dir.path()).expect_err("should fail"));
    assert_eq!(file, dir.path().join("team.md"));
    assert_eq!(line, None);
}

#[test]
fn missing_folder_is_an_error() {
    let dir = tempfile::tempdir().expect("should succeed");
    let gone = dir.path().join(".squad");
    let (file, line, message) = squad_parts(load(&gone).expect_err("should fail"));
    assert_eq!((file, line), (gone, None));
    assert_eq!(message, "no Squad folder here");
}

#[test]
fn no_roster_table_is_an_error() {
    let (file, line, message) = load_error("# Team\n\n| Name | Charter |\n|---|---|\n| x | y |\n");
    assert!(file.ends_with("team.md"));
    assert_eq!(line, None);
    assert!(message.contains("no roster table"), "{message}");
}

#[test]
fn table_in_a_code_fence_is_not_the_roster() {
    let (_, _, message) = load_error("```\n| Member | Role |\n|---|---|\n| alice | a |\n```\n");
    assert!(message.contains("no roster table"), "{message}");
}

#[test]
fn empty_roster_is_an_error() {
    let (_, line, message) = load_error("\n| Member | Role |\n|---|---|\n\n| alice | a |\n");
    assert_eq!(line, Some(2));
    assert!(message.contains("no members"), "{message}");
}

#[test]
fn duplicate_member_names_its_line() {
    let (_, line, message) =
        load_error("| Member | Role |\n|---|---|\n| Alice | a |\n| bob | b |\n| ALICE | c |\n");
    assert_eq!(line, Some(5));
    assert!(
        message.contains("`alice` is listed twice (first on line 3)"),
        "{message}"
    );
}

#[test]
fn escaped_pipes_are_read_as_pipes() {
    assert_eq!(
        split_row(r"| a \| b | c |").expect("should succeed"),
        vec!["a | b".to_string(), "c".to_string()]
    );
    assert_eq!(
        split_row("| a |  |").expect("should succeed"),
        vec!["a", ""]
    );
    assert_eq!(split_row("not a row"), None);
}

#[cfg(unix)]
#[test]
fn symlinked_charter_is_refused() {
    let dir = tempfile::tempdir().expect("should succeed");
    put(dir.path(), "secret.txt", "secret");
    put(
        dir.path(),
        "squad/team.md",
        "| Member | Role |\n|---|---|\n| bob | b |\n",
    );
    fs::create_dir_all(dir.path().join("squad/agents/bob")).expect("should succeed");
    std::os::unix::fs::symlink(
        dir.path().join("secret.txt"),
        dir.path().join("squad/agents/bob/charter.md"),
    )
    .expect("should succeed");
    let (file, _, message) = squad_parts(load(&dir.path().join("squad")).expect_err("should fail"));
    assert!(file.ends_with("agents/bob/charter.md"));
    assert!(message.contains("symbolic link"), "{message}");
    let team = SquadTeam {
        name: "t".into(),
        workers: vec![worker("bob", Some("overwrite"))],
        ..SquadTeam::default()
    };
    assert!(save(&dir.path().join("squad"), &team).is_err());
    assert_eq!(
        fs::read_to_string(dir.path().join("secret.txt")).expect("should succeed"),
        "secret"
    );
}

#[test]
fn roles_are_derived_from_the_first_sentence() {
    assert_eq!(
        derive_role("You are a code reviewer. You look for bugs."),
        "code reviewer"
    );
    assert_eq!(derive_role("You are an architect."), "architect");
    assert_eq!(derive_role("you are Lead"), "Lead");
    assert_eq!(derive_role("\nWrites docs.\nMore."), "Writes docs");
    assert_eq!(derive_role("v1.2 expert. Yes."), "v1.2 expert");
}

#[test]
fn save_writes_the_seed_format() {
    let dir = tempfile::tempdir().expect("should succeed");
    let team = SquadTeam {
        name: "Docs".into(),
        workers: vec![
            worker("writer", Some("You are a technical writer. You write.")),
            worker("editor", None),
        ],
        routing: None,
        decisions: Some("Use British spelling.".into()),
        notes: vec![],
    };
    save(dir.path(), &team).expect("should succeed");
    assert_eq!(
        fs::read_to_string(dir.path().join("team.md")).expect("should succeed"),
        "# Docs\n\n| Member | Role |\n| --- | --- |\n| writer | technical writer |\n| editor |  |\n"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("agents/writer/charter.md")).expect("should succeed"),
        "You are a technical writer. You write.\n"
    );
    assert!(!dir.path().join("agents/editor").exists());
    assert!(!dir.path().join("routing.md").exists());
    assert!(load(dir.path()).expect("should succeed").same_team(&team));
}

#[test]
fn round_trip_with_extra_columns() {
    let dir = tempfile::tempdir().expect("should succeed");
    let mut alice = worker("alice", Some("You are a | pipe | lover.\nLine two."));
    alice.agent = Some("claude".into());
    alice.effort = Some(Effort::Xhigh);
    let mut bob = worker("bob-2", None);
    bob.model = Some("gpt-5".into());
    let team = SquadTeam {
        name: "Team X".into(),
        workers: vec![alice, bob],
        routing: Some("Route by topic.\n\nAlways.".into()),
        decisions: Some("Decided.".into()),
        notes: vec!["not compared".into()],
    };
    save(dir.path(), &team).expect("should succeed");
    let text = fs::read_to_string(dir.path().join("team.md")).expect("should succeed");
    assert!(
        text.contains("| Member | Role | Agent | Model | Effort |"),
        "{text}"
    );
    assert!(
        text.contains(r"| alice | \| pipe \| lover | claude |  | xhigh |"),
        "{text}"
    );
    let back = load(dir.path()).expect("should succeed");
    assert!(back.same_team(&team), "{back:?}");
    assert!(back.notes.is_empty());
    save(dir.path(), &back).expect("should succeed");
    assert!(load(dir.path()).expect("should succeed").same_team(&team));
}

#[test]
fn save_refuses_what_would_not_read_back() {
    let dir = tempfile::tempdir().expect("should succeed");
    let mut team = SquadTeam {
        name: "t".into(),
        workers: vec![worker("../evil", None)],
        ..SquadTeam::default()
    };
    let (_, _, message) = squad_parts(save(dir.path(), &team).expect_err("should fail"));
    assert!(message.contains("`../evil`"), "{message}");
    team.workers = vec![worker("a--b", None)];
    let (_, _, message) = squad_parts(save(dir.path(), &team).expect_err("should fail"));
    assert!(message.contains("read back as `a-b`"), "{message}");
    team.workers = vec![worker("abc", None), worker("abc", None)];
    assert!(save(dir.path(), &team).is_err());
    team.workers = vec![worker("abc", Some(&"x".repeat(CHARTER_CAP + 1)))];
    let (file, _, _) = squad_parts(save(dir.path(), &team).expect_err("should fail"));
    assert!(file.ends_with("agents/abc/charter.md"));
    team.workers = vec![];
    assert!(save(dir.path(), &team).is_err());
    assert!(fs::read_dir(dir.path())
        .expect("should succeed")
        .next()
        .is_none());
}

fn effort() -> impl Strategy<Value = Effort> {
    prop_oneof![
        Just(Effort::Low),
        Just(Effort::Medium),
        Just(Effort::High),
        Just(Effort::Xhigh),
    ]
}

fn text() -> impl Strategy<Value = String> {
    "[A-Za-z0-9]([A-Za-z0-9 .,:;!?'|\n-]{0,60}[A-Za-z0-9.])?"
}

fn arb_worker(name: String) -> impl Strategy<Value = WorkerSpec> {
    (
        proptest::option::of("[a-z]{3,8}"),
        proptest::option::of("[a-z0-9][a-z0-9.-]{0,10}"),
        proptest::option::of(effort()),
        proptest::option::of(text()),
    )
        .prop_map(move |(agent, model, effort, prompt)| {
            let mut w = WorkerSpec::new(name.clone());
            w.agent = agent;
            w.model = model;
            w.effort = effort;
            w.system_prompt = prompt;
            w
        })
}

fn arb_team() -> impl Strategy<Value = SquadTeam> {
    let names = proptest::collection::btree_set("[a-z][a-z0-9]{2,8}(-[a-z0-9]{1,4})?", 1..=6);
    let workers =
        names.prop_flat_map(|names| names.into_iter().map(arb_worker).collect::<Vec<_>>());
    (
        "[A-Za-z]([A-Za-z0-9 _-]{0,20}[A-Za-z0-9])?",
        workers,
        proptest::option::of(text()),
        proptest::option::of(text()),
    )
        .prop_map(|(name, workers, routing, decisions)| SquadTeam {
            name,
            workers,
            routing,
            decisions,
            notes: vec![],
        })
}

proptest! {
    #[test]
    fn save_then_load_is_the_same_team(team in arb_team()) {
        let dir = tempfile::tempdir().expect("should succeed");
        save(dir.path(), &team).expect("should succeed");
        let back = load(dir.path()).expect("should succeed");
        prop_assert!(back.same_team(&team), "{:?}\n!=\n{:?}", back, team);
        prop_assert!(back.notes.is_empty());
    }
}
