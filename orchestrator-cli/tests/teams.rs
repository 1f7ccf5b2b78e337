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

/// A pipeline with `approval: between`, run by a stand-in `claude`: every stage after the
/// first waits for `orchestrator approve`, and the plan goes on from another command each time.
#[cfg(unix)]
#[test]
fn a_pipeline_with_approval_between_waits_for_each_stage_and_goes_on_when_approved() {
    let repo = Repo::new();
    let bin = repo.scratch.join("bin");
    common::stand_in_pipeline(&bin, "");
    let path = repo.scratch.join("pipeline.json");
    let plan = json!({"name": "gated", "targetBranch": "feature/gated", "jobs": [team_job(json!(
        {"type": "pipeline", "task": "Greet", "agent": "claude", "approval": "between"}))]});
    std::fs::write(&path, plan.to_string()).expect("write plan");
    let run = |args: &[&str]| {
        orchestrator_testkit::fixtures::Run::from(
            repo.command_with_agents(&bin, args).output().expect("run"),
        )
    };
    let first = run(&[
        "run",
        path.to_str().expect("utf-8"),
        "--until-waiting",
        "--json",
    ]);
    first.expect_code(4);
    let id = first.json()["planId"].as_str().expect("planId").to_owned();
    for stage in ["team/coder", "team/review"] {
        let status = repo.status(Some(&id));
        let waiting: Vec<&str> = status["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .filter(|j| j["status"] == "waiting")
            .filter_map(|j| j["producerId"].as_str())
            .collect();
        assert_eq!(waiting, [stage], "{status}");
        let job = status["jobs"]
            .as_array()
            .and_then(|jobs| jobs.iter().find(|j| j["producerId"] == stage))
            .expect("the stage");
        assert_eq!(job["waitingFor"], "approval", "{job}");
        run(&["approve", &id, stage]).expect_code(0);
        let next = run(&["resume", &id, "--until-waiting", "--json"]);
        let code = if stage == "team/review" { 0 } else { 4 };
        next.expect_code(code);
    }
    assert_eq!(repo.status(Some(&id))["status"], "succeeded");
    assert_eq!(repo.show("feature/gated", "greet.txt"), "hello\n");
}

#[test]
fn sub_jobs_show_by_their_parent_names_in_graph_and_status() {
    let repo = Repo::new();
    let run = run_plan(
        &repo,
        "shown",
        vec![team_job(
            json!({"type": "team", "prompt": "p", "workers": [{"name": "alice"}], "maxIterations": 1}),
        )],
    );
    assert_ne!(run.code, 2, "{}", run.stderr);
    let plan = repo.latest_plan().expect("plan");
    let graph = repo.run(&["graph", &plan]);
    graph.expect_code(0);
    assert!(graph.stdout.contains("team/1/plan"), "{}", graph.stdout);
    let list: Vec<String> = repo.status(Some(&plan))["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter_map(|j| j["producerId"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(list[0], "team");
    assert!(
        list[1..].iter().all(|id| id.starts_with("team/")),
        "{list:?}"
    );
}
