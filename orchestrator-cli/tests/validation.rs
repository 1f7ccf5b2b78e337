//! `orchestrator run` of a plan that does not parse: exit code 2 and every problem named at
//! once (SPEC §2, §5), not only the first one the parser met.

mod common;

use common::Repo;
use orchestrator_testkit::fixtures::job;
use serde_json::json;

#[test]
fn a_plan_that_does_not_parse_is_reported_with_every_problem() {
    let repo = Repo::new();
    let mut typo = job("first", "true", &["third"]);
    typo["dependsOn"] = json!(["second"]);
    let mut docker = job("second", "true", &[]);
    docker["work"] = json!({"type": "docker", "image": "alpine"});
    let mut missing = job("fourth", "true", &[]);
    missing["work"] = json!({"type": "agent", "instructionsFile": "prompts/absent.md"});
    let plan = json!({"name": "broken", "jobs": [
        typo,
        docker,
        job("third", "true", &["first"]),
        missing,
        job("Bad_Id", "true", &["second"]),
    ]});
    for (name, text) in [
        (
            "broken.json",
            serde_json::to_string_pretty(&plan).expect("json"),
        ),
        // YAML (which reads JSON) goes the same way.
        ("broken.yaml", plan.to_string()),
    ] {
        let path = repo.scratch.join(name);
        std::fs::write(&path, text).expect("write plan");
        let run = repo.run(&["run", path.to_str().expect("utf-8"), "--json"]);
        run.expect_code(2);
        assert!(run.stdout.is_empty(), "stdout: {}", run.stdout);
        let stderr = &run.stderr;
        for needle in [
            // The unknown field of job 1, with job, field and value.
            "job `first`, field `dependsOn`",
            "unknown field `dependsOn`",
            // The unknown work type of job 2.
            "job `second`, field `work.type` = \"docker\"",
            "unknown variant `docker`",
            // The cycle.
            "first -> third -> first",
            // The bad producerId.
            "job `Bad_Id`, field `producerId` = \"Bad_Id\"",
            // A file the plan names that the repository lacks.
            "job `fourth`, field `work.instructionsFile` = \"prompts/absent.md\"",
            "5 problems",
        ] {
            assert!(
                stderr.contains(needle),
                "{name}: `{needle}` not named:\n{stderr}"
            );
        }
        // Nothing was stored or created.
        assert!(!repo.dir.join(".orchestrator/plans").exists());
        assert_eq!(repo.branches(), ["main"]);
        assert_eq!(repo.git(&["status", "--porcelain"]), "");
    }
}
