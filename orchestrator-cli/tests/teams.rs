//! Teams and pipelines at the command line (SPEC §13): bad team and pipeline specs, Squad
//! folders and presets are refused before anything is stored (exit 2, naming the job, the
//! field, and the file and line); a team loaded from the repository's `.squad/` is stored
//! resolved, and `orchestrator team save` writes it back so that loading it again gives the
//! same team.

mod common;

use common::Repo;
use orchestrator_workflows::squad;
use serde_json::{json, Value};

fn team_job(work: Value) -> Value {
    json!({"producerId": "team", "task": "the team", "dependencies": [], "work": work})
}

fn run_plan(repo: &Repo, name: &str, jobs: Vec<Value>) -> orchestrator_testkit::fixtures::Run {
    let path = repo.scratch.join(format!("{name}.json"));
    let plan = json!({"name": name, "jobs": jobs});
    std::fs::write(&path, plan.to_string()).expect("write plan");
    repo.run(&["run", path.to_str().expect("utf-8"), "--json"])
}

fn refused(repo: &Repo, work: Value, needles: &[&str]) {
    let run = run_plan(repo, "bad", vec![team_job(work.clone())]);
    run.expect_code(2);
    for needle in needles {
        assert!(
            run.stderr.contains(needle),
            "{work}: `{needle}` not named:\n{}",
            run.stderr
        );
    }
    assert!(
        !repo.dir.join(".orchestrator/plans").exists(),
        "nothing stored"
    );
}

const TEAM_MD: &str = "# Parser crew\n\n| Member | Role | Model |\n|---|---|---|\n| Ripley | Lead parser engineer | sonnet |\n| Dallas | Tester | |\n";

#[test]
fn bad_teams_and_pipelines_are_refused_naming_the_field_or_the_file_and_line() {
    let repo = Repo::with_files(&[
        (
            ".broken/team.md",
            "| Member | Role |\n|---|---|\n| ok-name | fine |\n| too | many | cells |\n",
        ),
        (".squad/team.md", TEAM_MD),
    ]);
    refused(
        &repo,
        json!({"type": "team", "prompt": "x"}),
        &["field `work.workers`", "needs workers"],
    );
    refused(
        &repo,
        json!({"type": "team", "prompt": "x", "workers": [{"name": "alice"}, {"name": "Alice"}]}),
        &["work.workers[1].name", "earlier worker"],
    );
    refused(
        &repo,
        json!({"type": "team", "prompt": "x", "preset": "no-such-preset"}),
        &[
            "job `team`: work.preset",
            "no preset is named `no-such-preset`",
            "best-of-three",
        ],
    );
    refused(
        &repo,
        json!({"type": "team", "prompt": "x", "squad": ".nowhere"}),
        &["work.squad", ".nowhere"],
    );
    refused(
        &repo,
        json!({"type": "team", "prompt": "x", "squad": ".broken"}),
        &["work.squad", ".broken/team.md:4"],
    );
    refused(
        &repo,
        json!({"type": "team", "prompt": "x", "workers": [{"name": "a"}], "select": "best"}),
        &["work.select", "broadcast"],
    );
    refused(
        &repo,
        json!({"type": "pipeline", "task": "x", "complexity": "huge"}),
        &["work.complexity", "unknown variant `huge`"],
    );
    refused(
        &repo,
        json!({"type": "pipeline", "task": "x", "roles": {"tester": {"model": "m"}}}),
        &["work.roles.tester", "is no role"],
    );
    refused(
        &repo,
        json!({"type": "pipeline"}),
        &["work.task", "needs a `task`"],
    );
}

#[test]
fn a_squad_team_is_stored_resolved_and_team_save_round_trips_it() {
    let repo = Repo::with_files(&[
        (".squad/team.md", TEAM_MD),
        (
            ".squad/agents/ripley/charter.md",
            "You are Ripley, who writes parsers.\nKeep them small.\n",
        ),
        (".squad/routing.md", "Parsing goes to ripley.\n"),
        (".squad/decisions.md", "We use nom.\n"),
    ]);
    // No agent CLI answers here: the team's first round fails, which does not matter — the
    // plan is stored with its team resolved.
    let run = run_plan(
        &repo,
        "squad",
        vec![team_job(
            json!({"type": "team", "prompt": "Write the parser", "squad": ".squad", "maxIterations": 1}),
        )],
    );
    assert_ne!(run.code, 2, "accepted: {}", run.stderr);
    let plan = repo.latest_plan().expect("a stored plan");
    let status = repo.status(Some(&plan));
    let team = &status["jobs"][0];
    assert_eq!(team["producerId"], "team");
    assert_eq!(team["failureReason"], "composite_failed", "{team}");
    assert!(
        team["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("errors:")),
        "{team}"
    );
    // While and after it runs, the team's progress is its output.
    let output: Value =
        serde_json::from_str(team["output"].as_str().expect("an output")).expect("JSON");
    assert_eq!(output["mode"], "reflect");
    let saved = repo.scratch.join("saved");
    let save = repo.run(&[
        "team",
        "save",
        &plan,
        "team",
        "--dir",
        saved.to_str().expect("utf-8"),
        "--name",
        "Parser crew",
    ]);
    save.expect_code(0);
    assert_eq!(save.stdout.trim(), saved.display().to_string());
    let original = squad::load(&repo.dir.join(".squad")).expect("original");
    let again = squad::load(&saved).expect("saved");
    assert!(original.same_team(&again), "{original:?}\n{again:?}");
    // A job that is no team is refused.
    let not_a_team = repo.run(&["team", "save", &plan, "team/1/plan"]);
    assert_ne!(not_a_team.code, 0);
}
