//! `orchestrator models` (SPEC §15) on temporary repositories: the usable providers' models
//! are listed (text and JSON) and the providers without credentials are left out with why; a
//! malformed `.model_providers.json` is exit 2 naming the file and the field; no file is an
//! empty list and exit 0. Keys are never printed.

mod common;

use common::Repo;
use orchestrator_testkit::fixtures::Run;
use serde_json::{json, Value};

/// The key variables of these tests (removed from the host's environment, so that a machine
/// that happens to set one changes nothing).
const ANTHROPIC_VAR: &str = "ORCH_MODELS_TEST_ANTHROPIC_KEY";
const AZURE_VAR: &str = "ORCH_MODELS_TEST_AZURE_KEY";
const KEY: &str = "sk-ant-test-never-printed-42";

fn providers_file() -> Value {
    json!({
        "providers": [
            {"id": "azure-openai", "type": "azure",
             "baseUrl": "https://my-resource.openai.azure.com/openai/v1",
             "apiKey": format!("env:{AZURE_VAR}"),
             "models": [{"name": "gpt-5.4", "cost": "high"}, "gpt-5.4-mini"]},
            {"id": "anthropic", "type": "anthropic", "baseUrl": "https://api.anthropic.com",
             "apiKey": format!("env:{ANTHROPIC_VAR}"),
             "models": ["claude-sonnet-4-6", "claude-opus-4-6"]}
        ],
        "defaultModel": "anthropic:claude-sonnet-4-6"
    })
}

/// `orchestrator models ARGS` on `repo` with only the Anthropic key set.
fn models(repo: &Repo, args: &[&str]) -> Run {
    let mut cmd = repo.command(&[&["models"], args].concat());
    cmd.env(ANTHROPIC_VAR, KEY).env_remove(AZURE_VAR);
    let run = Run::from(cmd.output().expect("run orchestrator models"));
    assert!(
        !run.stdout.contains(KEY) && !run.stderr.contains(KEY),
        "a key was printed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    run
}

fn repo_with(file: &Value) -> Repo {
    let repo = Repo::new();
    repo.write(".model_providers.json", &file.to_string());
    repo
}

#[test]
fn lists_the_models_of_the_providers_whose_key_is_set() {
    let repo = repo_with(&providers_file());
    let run = models(&repo, &[]);
    run.expect_code(0);
    assert_eq!(
        run.stdout,
        "anthropic:claude-sonnet-4-6\nanthropic:claude-opus-4-6\n"
    );
    assert!(
        run.stderr.contains("left out: azure-openai (azure)")
            && run.stderr.contains(&format!("`{AZURE_VAR}` is not set")),
        "{}",
        run.stderr
    );
    // An empty variable is no key either.
    let mut cmd = repo.command(&["models"]);
    cmd.env(ANTHROPIC_VAR, "").env(AZURE_VAR, KEY);
    let run = Run::from(cmd.output().expect("run orchestrator models"));
    run.expect_code(0);
    assert_eq!(
        run.stdout,
        "azure-openai:gpt-5.4\nazure-openai:gpt-5.4-mini\n"
    );
    assert!(
        run.stderr.contains(&format!(
            "left out: anthropic (anthropic): `{ANTHROPIC_VAR}` is empty"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn json_lists_every_provider_with_usable_and_why() {
    let repo = repo_with(&providers_file());
    let run = models(&repo, &["--json"]);
    run.expect_code(0);
    let doc = run.json();
    assert_eq!(
        doc["models"],
        json!(["anthropic:claude-sonnet-4-6", "anthropic:claude-opus-4-6"])
    );
    assert_eq!(doc["defaultModel"], "anthropic:claude-sonnet-4-6");
    let providers = doc["providers"].as_array().expect("providers");
    assert_eq!(providers.len(), 2);
    let azure = &providers[0];
    assert_eq!(azure["name"], "azure-openai");
    assert_eq!(azure["type"], "azure");
    assert_eq!(
        azure["baseUrl"],
        "https://my-resource.openai.azure.com/openai/v1"
    );
    assert_eq!(azure["keyEnv"], AZURE_VAR);
    assert_eq!(azure["models"], json!(["gpt-5.4", "gpt-5.4-mini"]));
    assert_eq!(azure["usable"], false);
    assert_eq!(azure["reason"], format!("`{AZURE_VAR}` is not set"));
    let anthropic = &providers[1];
    assert_eq!(anthropic["name"], "anthropic");
    assert_eq!(anthropic["usable"], true);
    assert!(anthropic.get("reason").is_none(), "{anthropic}");
    assert!(doc["file"]
        .as_str()
        .is_some_and(|f| f.ends_with(".model_providers.json")));
    assert_eq!(run.stderr, "", "--json: nothing but the document");
}

#[test]
fn a_malformed_file_is_exit_2_naming_the_file_and_the_field() {
    let mut file = providers_file();
    file["providers"][1]["type"] = json!("bedrock");
    file["providers"][0]
        .as_object_mut()
        .expect("provider")
        .remove("baseUrl");
    let repo = repo_with(&file);
    for args in [&[][..], &["--json"][..]] {
        let run = models(&repo, args);
        run.expect_code(2);
        assert_eq!(run.stdout, "");
        for needle in [
            ".model_providers.json",
            "providers[0].baseUrl",
            "providers[1].type",
            "unknown provider type `bedrock`",
        ] {
            assert!(run.stderr.contains(needle), "{needle}:\n{}", run.stderr);
        }
    }
    // Not JSON at all, and a key written in the file (refused, not echoed).
    let repo = Repo::new();
    repo.write(".model_providers.json", "{\"providers\": [");
    let run = models(&repo, &[]);
    run.expect_code(2);
    assert!(
        run.stderr.contains(".model_providers.json: not valid JSON"),
        "{}",
        run.stderr
    );
    let mut file = providers_file();
    file["providers"][1]["apiKey"] = json!(KEY);
    let run = models(&repo_with(&file), &[]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("providers[1].apiKey") && run.stderr.contains("env:NAME"),
        "{}",
        run.stderr
    );
}

#[test]
fn no_file_is_an_empty_list_and_exit_0() {
    let repo = Repo::new();
    let run = models(&repo, &[]);
    run.expect_code(0);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("no .model_providers.json"),
        "{}",
        run.stderr
    );
    let run = models(&repo, &["--json"]);
    run.expect_code(0);
    assert_eq!(
        run.json(),
        json!({"file": null, "providers": [], "models": [], "defaultModel": null})
    );
}

#[test]
fn the_file_is_found_at_the_repository_root_from_a_subfolder() {
    let repo = repo_with(&providers_file());
    std::fs::create_dir_all(repo.dir.join("src/deep")).expect("mkdir");
    let mut cmd = std::process::Command::new(common::BIN);
    orchestrator_testkit::fixtures::isolate(&mut cmd)
        .args(["models", "--repo"])
        .arg(repo.dir.join("src/deep"))
        .env(ANTHROPIC_VAR, KEY)
        .env("HOME", &repo.home);
    let run = Run::from(cmd.output().expect("run orchestrator models"));
    run.expect_code(0);
    assert_eq!(
        run.stdout,
        "anthropic:claude-sonnet-4-6\nanthropic:claude-opus-4-6\n"
    );
}
