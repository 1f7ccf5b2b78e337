//! Unit tests of the providers file: parsing, refusals (each naming the file and the field),
//! filtering by credentials, resolution per CLI, and keys kept out of `Debug`.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::{json, Value};

use super::*;

const KEY: &str = "sk-very-secret-0123456789";

/// The environment of the tests: the variables named, each set to `KEY`
/// (`EMPTY_VAR` set but empty).
fn env_with(set: &'static [&'static str]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        if name == "EMPTY_VAR" {
            Some(String::new())
        } else {
            set.contains(&name).then(|| KEY.to_owned())
        }
    }
}

fn parse_value(
    v: &Value,
    env: impl Fn(&str) -> Option<String>,
) -> Result<ModelProviders, ProviderError> {
    ModelProviders::parse(
        Path::new("/repo/.model_providers.json"),
        &v.to_string(),
        env,
    )
}

/// A file with one provider of each type.
fn every_type() -> Value {
    json!({
        "providers": [
            {"id": "gh", "type": "github", "githubToken": "env:GH_KEY",
             "models": ["claude-sonnet-4.5", {"name": "gpt-5.4", "cost": "high"}]},
            {"id": "az", "type": "azure", "baseUrl": "https://r.openai.azure.com/openai/v1/",
             "apiKey": "env:AZ_KEY", "models": ["gpt-5.4"]},
            {"id": "azv", "type": "azure", "baseUrl": "https://r.openai.azure.com",
             "apiKey": "env:AZ_KEY", "apiVersion": "2025-04-01-preview", "models": ["gpt-5.4"]},
            {"id": "oai", "type": "openai", "baseUrl": "https://api.openai.com/v1",
             "apiKey": "env:OAI_KEY", "wireApi": "responses", "models": ["gpt-5.4"]},
            {"id": "ant", "type": "anthropic", "baseUrl": "https://api.anthropic.com",
             "apiKey": "env:ANT_KEY", "models": ["claude-sonnet-4-6"]},
            {"id": "local", "type": "ollama", "baseUrl": "http://localhost:11434",
             "models": ["qwen3-coder", "llama3:8b"]},
            {"id": "gem", "type": "gemini", "baseUrl": "https://generativelanguage.googleapis.com",
             "apiKey": "env:GEM_KEY", "models": ["gemini-2.5-pro"]}
        ],
        "defaultModel": "ant:claude-sonnet-4-6",
        "_defaultModel_other": "ignored, as in the seed's example"
    })
}

const ALL_KEYS: &[&str] = &["GH_KEY", "AZ_KEY", "OAI_KEY", "ANT_KEY", "GEM_KEY"];

fn all() -> ModelProviders {
    parse_value(&every_type(), env_with(ALL_KEYS)).unwrap()
}

/// The problems of a refused file (checking the message names the file and each field).
fn problems(v: Value) -> Vec<FieldProblem> {
    match parse_value(&v, env_with(ALL_KEYS)) {
        Err(e @ ProviderError::Invalid { .. }) => {
            let message = e.to_string();
            assert!(message.contains("/repo/.model_providers.json"), "{message}");
            let ProviderError::Invalid { problems, .. } = e else {
                unreachable!()
            };
            for p in &problems {
                assert!(message.contains(&p.field), "{message} lacks {}", p.field);
            }
            problems
        }
        other => panic!("not refused as invalid: {other:?}"),
    }
}

/// The one problem of a refused file: its field and message.
fn refused(v: Value) -> (String, String) {
    let mut all = problems(v);
    assert_eq!(all.len(), 1, "{all:?}");
    let p = all.remove(0);
    (p.field, p.message)
}

/// `every_type()` with provider `i` changed by `f`.
fn with_provider(i: usize, f: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Value {
    let mut v = every_type();
    f(v["providers"][i].as_object_mut().unwrap());
    v
}

#[test]
fn parses_every_type_in_file_order() {
    let p = all();
    let names: Vec<&str> = p.providers().iter().map(Provider::name).collect();
    assert_eq!(names, ["gh", "az", "azv", "oai", "ant", "local", "gem"]);
    let types: Vec<ProviderType> = p.providers().iter().map(Provider::provider_type).collect();
    assert_eq!(
        types,
        ProviderType::ALL[..1]
            .iter()
            .copied()
            .chain([
                ProviderType::Azure,
                ProviderType::Azure,
                ProviderType::OpenAi,
                ProviderType::Anthropic,
                ProviderType::Ollama,
                ProviderType::Gemini
            ])
            .collect::<Vec<_>>()
    );
    let gh = p.provider("gh").unwrap();
    assert_eq!(gh.base_url(), "https://api.githubcopilot.com");
    assert_eq!(gh.key_env(), Some("GH_KEY"));
    assert_eq!(gh.models(), ["claude-sonnet-4.5", "gpt-5.4"]);
    assert_eq!(
        p.provider("az").unwrap().base_url(),
        "https://r.openai.azure.com/openai/v1"
    );
    assert_eq!(
        p.provider("azv").unwrap().api_version(),
        Some("2025-04-01-preview")
    );
    assert_eq!(
        p.provider("oai").unwrap().wire_api(),
        Some(WireApi::Responses)
    );
    assert_eq!(p.provider("local").unwrap().key_env(), None);
    assert_eq!(p.default_model(), Some("ant:claude-sonnet-4-6"));
    assert_eq!(p.file(), Some(Path::new("/repo/.model_providers.json")));
    assert!(p.models().contains(&"local:llama3:8b".to_owned()));
    assert_eq!(p.models().len(), 9);
}

#[test]
fn no_file_is_no_providers_and_an_explicit_missing_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = ModelProviders::load(dir.path(), |_| None).unwrap();
    assert!(p.is_empty() && p.file().is_none() && p.models().is_empty());
    assert!(p.resolve("plain-model").unwrap().is_none());
    let e = p.resolve("x:y").unwrap_err().to_string();
    assert!(e.contains("no provider `x`") && e.contains("none"), "{e}");

    let missing = dir.path().join("elsewhere.json");
    let e = ModelProviders::from_file(&missing, |_| None).unwrap_err();
    assert!(matches!(e, ProviderError::Read { .. }));
    assert!(e.to_string().contains("elsewhere.json"), "{e}");

    std::fs::write(dir.path().join(FILE_NAME), every_type().to_string()).unwrap();
    let p = ModelProviders::load(dir.path(), env_with(ALL_KEYS)).unwrap();
    assert_eq!(p.file(), Some(dir.path().join(FILE_NAME).as_path()));
    assert_eq!(p.providers().len(), 7);
    let p = ModelProviders::from_file(&dir.path().join(FILE_NAME), |_| None).unwrap();
    assert_eq!(p.usable().count(), 1, "only ollama needs no key");
}

#[test]
fn syntax_and_shape_errors_name_the_file() {
    let e = ModelProviders::parse(Path::new("/r/p.json"), "{\"providers\": [", |_| None)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/r/p.json: not valid JSON"), "{e}");
    assert_eq!(refused(json!([])).0, "");
    assert_eq!(refused(json!({})).0, "providers");
    assert_eq!(refused(json!({"providers": {}})).0, "providers");
    assert_eq!(refused(json!({"providers": [7]})).0, "providers[0]");
}

#[test]
fn every_refusal_names_its_field() {
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            with_provider(1, |p| {
                p.insert("type".into(), json!("bedrock"));
            }),
            "providers[1].type",
            "unknown provider type `bedrock`",
        ),
        (
            with_provider(1, |p| {
                p.remove("type");
            }),
            "providers[1].type",
            "missing",
        ),
        (
            with_provider(3, |p| {
                p.remove("baseUrl");
            }),
            "providers[3].baseUrl",
            "type `openai` needs the base URL",
        ),
        (
            with_provider(5, |p| {
                p.remove("baseUrl");
            }),
            "providers[5].baseUrl",
            "missing",
        ),
        (
            with_provider(4, |p| {
                p.insert("baseUrl".into(), json!("ftp://x"));
            }),
            "providers[4].baseUrl",
            "not an http:// or https:// URL",
        ),
        (
            with_provider(4, |p| {
                p.insert("baseUrl".into(), json!(7));
            }),
            "providers[4].baseUrl",
            "must be a string",
        ),
        (
            with_provider(2, |p| {
                p.insert("id".into(), json!("az"));
            }),
            "providers[2].id",
            "`az` is the id of providers[1] too",
        ),
        (
            with_provider(2, |p| {
                p.insert("id".into(), json!("a:b"));
            }),
            "providers[2].id",
            "not a provider id",
        ),
        (
            with_provider(2, |p| {
                p.remove("id");
            }),
            "providers[2].id",
            "missing",
        ),
        (
            with_provider(0, |p| {
                p.insert("models".into(), json!(["m", "n", "m"]));
            }),
            "providers[0].models[2]",
            "`m` is listed twice (also models[0])",
        ),
        (
            with_provider(0, |p| {
                p.insert("models".into(), json!([{"name": "m"}, {"name": "m"}]));
            }),
            "providers[0].models[1].name",
            "listed twice",
        ),
        (
            with_provider(0, |p| {
                p.insert("models".into(), json!([]));
            }),
            "providers[0].models",
            "lists no model",
        ),
        (
            with_provider(0, |p| {
                p.insert("models".into(), json!([{"cost": "low"}]));
            }),
            "providers[0].models[0].name",
            "missing",
        ),
        (
            with_provider(0, |p| {
                p.insert("models".into(), json!(["two words"]));
            }),
            "providers[0].models[0]",
            "not a model name",
        ),
        (
            with_provider(3, |p| {
                p.insert("apiKey".into(), json!("env:9LIVES"));
            }),
            "providers[3].apiKey",
            "not an environment variable name",
        ),
        (
            with_provider(3, |p| {
                p.insert("apiKey".into(), json!("env:"));
            }),
            "providers[3].apiKey",
            "not an environment variable name",
        ),
        (
            with_provider(3, |p| {
                p.insert("apiKey".into(), json!("env:COPILOT_MODEL"));
            }),
            "providers[3].apiKey",
            "keep the key in another variable",
        ),
        (
            with_provider(3, |p| {
                p.remove("apiKey");
            }),
            "providers[3].apiKey",
            "missing",
        ),
        (
            with_provider(0, |p| {
                p.remove("githubToken");
            }),
            "providers[0].githubToken",
            "missing",
        ),
        (
            with_provider(0, |p| {
                p.insert("apiKey".into(), json!("env:X"));
            }),
            "providers[0].apiKey",
            "once",
        ),
        (
            with_provider(3, |p| {
                p.insert("githubToken".into(), json!("env:X"));
            }),
            "providers[3].githubToken",
            "only for type `github`",
        ),
        (
            with_provider(3, |p| {
                p.insert("apiVersion".into(), json!("2024-10-21"));
            }),
            "providers[3].apiVersion",
            "only for type `azure`",
        ),
        (
            with_provider(3, |p| {
                p.insert("wireApi".into(), json!("chat"));
            }),
            "providers[3].wireApi",
            "no wire API",
        ),
        (
            with_provider(4, |p| {
                p.insert("wireApi".into(), json!("responses"));
            }),
            "providers[4].wireApi",
            "not `anthropic`",
        ),
        (
            with_provider(4, |p| {
                p.insert("baseURL".into(), json!("https://x"));
            }),
            "providers[4].baseURL",
            "unknown field",
        ),
        (
            json!({"providers": [], "defaultModel": "ant:claude"}),
            "defaultModel",
            "no provider `ant`",
        ),
        (
            json!({"providers": [], "defaultModel": 3}),
            "defaultModel",
            "must be a string",
        ),
    ];
    for (file, field, message) in cases {
        let (f, m) = refused(file);
        assert_eq!(f, field, "{m}");
        assert!(m.contains(message), "{field}: {m:?} lacks {message:?}");
    }
    let mut v = every_type();
    v["defaultModel"] = json!("ant:claude-opus");
    let (f, m) = refused(v);
    assert_eq!(f, "defaultModel");
    assert!(m.contains("lists no model `claude-opus`"), "{m}");
}

#[test]
fn every_problem_is_named_at_once() {
    let v = json!({"providers": [
        {"id": "a", "type": "nope", "models": ["m"]},
        {"id": "a", "type": "openai", "apiKey": "env:K", "models": ["m"]},
    ]});
    let fields: Vec<String> = problems(v).into_iter().map(|p| p.field).collect();
    assert_eq!(
        fields,
        [
            "providers[0].type",
            "providers[1].baseUrl",
            "providers[1].id"
        ]
    );
}

#[test]
fn a_key_written_in_the_file_is_refused_and_not_echoed() {
    let secret = "sk-ant-api03-literal-key";
    let v = with_provider(4, |p| {
        p.insert("apiKey".into(), json!(secret));
    });
    let (field, message) = refused(v.clone());
    assert_eq!(field, "providers[4].apiKey");
    assert!(message.contains("env:NAME"), "{message}");
    let e = parse_value(&v, |_| None).unwrap_err();
    assert!(!e.to_string().contains(secret) && !format!("{e:?}").contains(secret));
    // Nor after `env:`, nor in a URL's credentials.
    let v = with_provider(4, |p| {
        p.insert("apiKey".into(), json!(format!("env:{secret}")));
    });
    assert!(!parse_value(&v, |_| None)
        .unwrap_err()
        .to_string()
        .contains(secret));
    let v = with_provider(4, |p| {
        p.insert(
            "baseUrl".into(),
            json!(format!("https://u:{secret}@api.anthropic.com")),
        );
    });
    let e = parse_value(&v, |_| None).unwrap_err().to_string();
    assert!(e.contains("credentials") && !e.contains(secret), "{e}");
}

#[test]
fn providers_without_credentials_are_left_out_with_the_reason() {
    let p = parse_value(&every_type(), env_with(&["ANT_KEY"])).unwrap();
    let usable: Vec<&str> = p.usable().map(Provider::name).collect();
    assert_eq!(usable, ["ant", "local"], "ollama needs no key");
    assert_eq!(
        p.models(),
        [
            "ant:claude-sonnet-4-6",
            "local:qwen3-coder",
            "local:llama3:8b"
        ]
    );
    let left: Vec<(&str, Option<&str>)> = p.left_out().map(|p| (p.name(), p.reason())).collect();
    assert_eq!(left[0], ("gh", Some("`GH_KEY` is not set")));
    assert_eq!(left.len(), 5);
    // An empty variable is no key either; an ollama server with a key needs it.
    let v = json!({"providers": [
        {"id": "e", "type": "openai", "baseUrl": "https://x/v1", "apiKey": "env:EMPTY_VAR", "models": ["m"]},
        {"id": "cloud", "type": "ollama", "baseUrl": "https://ollama.com", "apiKey": "env:OLLAMA_KEY", "models": ["m"]},
    ]});
    let p = parse_value(&v, env_with(&[])).unwrap();
    assert_eq!(p.usable().count(), 0);
    assert_eq!(
        p.provider("e").unwrap().reason(),
        Some("`EMPTY_VAR` is empty")
    );
    assert_eq!(
        p.provider("cloud").unwrap().reason(),
        Some("`OLLAMA_KEY` is not set")
    );
}

#[test]
fn resolution_refuses_naming_the_provider() {
    let p = parse_value(&every_type(), env_with(&["ANT_KEY"])).unwrap();
    assert!(p.resolve("gpt-5.4").unwrap().is_none());
    let m = p.resolve("ant:claude-sonnet-4-6").unwrap().unwrap();
    assert_eq!(
        (m.provider().name(), m.model()),
        ("ant", "claude-sonnet-4-6")
    );
    assert_eq!(m.qualified(), "ant:claude-sonnet-4-6");
    let m = p.resolve("local:llama3:8b").unwrap().unwrap();
    assert_eq!(m.model(), "llama3:8b");

    let e = p.resolve("nope:m").unwrap_err();
    assert!(matches!(&e, ProviderError::UnknownProvider { provider, .. } if provider == "nope"));
    assert!(e.to_string().contains("known: gh, az"), "{e}");
    let e = p.resolve("oai:gpt-5.4").unwrap_err();
    assert!(matches!(e, ProviderError::Unusable { .. }));
    assert!(
        e.to_string()
            .contains("provider `oai` is left out: `OAI_KEY` is not set"),
        "{e}"
    );
    let e = p.resolve("ant:claude-opus").unwrap_err().to_string();
    assert!(
        e.contains("provider `ant` lists no model `claude-opus`")
            && e.contains("claude-sonnet-4-6"),
        "{e}"
    );
    assert!(matches!(
        p.resolve(":m"),
        Err(ProviderError::BadReference { .. })
    ));
    assert!(matches!(
        p.resolve("ant:"),
        Err(ProviderError::BadReference { .. })
    ));
}

/// The settings of `cli` for `model` of [`all`], as (env map, args).
fn settings(model: &str, cli: &str) -> EndpointSettings {
    all()
        .resolve(model)
        .unwrap()
        .unwrap()
        .settings_for(cli)
        .unwrap()
}

fn env_of(s: &EndpointSettings) -> Vec<(&str, &str)> {
    s.env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[test]
fn claude_code_settings() {
    let s = settings("ant:claude-sonnet-4-6", "claude");
    assert_eq!(s.model, "claude-sonnet-4-6");
    assert_eq!(
        env_of(&s),
        [
            ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
            ("ANTHROPIC_API_KEY", KEY)
        ]
    );
    assert!(s.args.is_empty());
    let s = settings("local:qwen3-coder", "claude");
    assert_eq!(
        env_of(&s),
        [
            ("ANTHROPIC_BASE_URL", "http://localhost:11434"),
            ("ANTHROPIC_AUTH_TOKEN", "ollama"),
            ("ANTHROPIC_API_KEY", ""),
        ]
    );
    for other in [
        "gh:gpt-5.4",
        "az:gpt-5.4",
        "oai:gpt-5.4",
        "gem:gemini-2.5-pro",
    ] {
        let e = all()
            .resolve(other)
            .unwrap()
            .unwrap()
            .settings_for("claude")
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("Claude Code cannot use provider"),
            "{text}"
        );
        assert!(text.contains(other.split(':').next().unwrap()), "{text}");
    }
}

#[test]
fn codex_settings() {
    let s = settings("oai:gpt-5.4", "codex");
    assert_eq!(s.model, "gpt-5.4");
    assert_eq!(
        s.args,
        [
            "-c",
            "model_provider=\"orchestrator-oai\"",
            "-c",
            "model_providers.orchestrator-oai.name=\"oai\"",
            "-c",
            "model_providers.orchestrator-oai.base_url=\"https://api.openai.com/v1\"",
            "-c",
            "model_providers.orchestrator-oai.wire_api=\"responses\"",
            "-c",
            "model_providers.orchestrator-oai.env_key=\"OAI_KEY\"",
        ]
    );
    assert_eq!(env_of(&s), [("OAI_KEY", KEY)]);
    let s = settings("az:gpt-5.4", "codex");
    assert!(
        s.args.contains(
            &"model_providers.orchestrator-az.base_url=\"https://r.openai.azure.com/openai/v1\""
                .to_owned()
        ),
        "{:?}",
        s.args
    );
    assert!(!s.args.iter().any(|a| a.contains("query_params")));
    let s = settings("azv:gpt-5.4", "codex");
    assert!(
        s.args.contains(
            &"model_providers.orchestrator-azv.base_url=\"https://r.openai.azure.com/openai\""
                .to_owned()
        ),
        "{:?}",
        s.args
    );
    assert!(s.args.contains(&"model_providers.orchestrator-azv.query_params={ api-version = \"2025-04-01-preview\" }".to_owned()), "{:?}", s.args);
    let s = settings("local:llama3:8b", "codex");
    assert_eq!(s.model, "llama3:8b");
    assert!(s.args.contains(
        &"model_providers.orchestrator-local.base_url=\"http://localhost:11434/v1\"".to_owned()
    ));
    assert!(!s.args.iter().any(|a| a.contains("env_key")) && s.env.is_empty());
    assert!(!s.notes.is_empty());
    for other in ["gh:gpt-5.4", "ant:claude-sonnet-4-6", "gem:gemini-2.5-pro"] {
        let text = all()
            .resolve(other)
            .unwrap()
            .unwrap()
            .settings_for("codex")
            .unwrap_err()
            .to_string();
        assert!(text.starts_with("Codex cannot use provider"), "{text}");
    }
    let v = with_provider(3, |p| {
        p.insert("wireApi".into(), json!("completions"));
    });
    let p = parse_value(&v, env_with(ALL_KEYS)).unwrap();
    let e = p
        .resolve("oai:gpt-5.4")
        .unwrap()
        .unwrap()
        .settings_for("codex")
        .unwrap_err();
    assert!(e.to_string().contains("Chat Completions"), "{e}");
}

#[test]
fn copilot_cli_settings() {
    let s = settings("gh:claude-sonnet-4.5", "copilot");
    assert_eq!(env_of(&s), [("COPILOT_GITHUB_TOKEN", KEY)]);
    assert!(s.notes.is_empty());
    let s = settings("oai:gpt-5.4", "copilot");
    assert_eq!(
        env_of(&s),
        [
            ("COPILOT_PROVIDER_BASE_URL", "https://api.openai.com/v1"),
            ("COPILOT_PROVIDER_TYPE", "openai"),
            ("COPILOT_PROVIDER_API_KEY", KEY),
            ("COPILOT_PROVIDER_WIRE_API", "responses"),
            ("COPILOT_MODEL", "gpt-5.4"),
        ]
    );
    let s = settings("azv:gpt-5.4", "copilot");
    assert_eq!(
        env_of(&s)[..2],
        [
            ("COPILOT_PROVIDER_BASE_URL", "https://r.openai.azure.com"),
            ("COPILOT_PROVIDER_TYPE", "azure"),
        ]
    );
    assert!(env_of(&s).contains(&("COPILOT_PROVIDER_AZURE_API_VERSION", "2025-04-01-preview")));
    let s = settings("az:gpt-5.4", "copilot");
    assert_eq!(
        s.env[0].1, "https://r.openai.azure.com",
        "the resource, not its /openai/v1"
    );
    let s = settings("ant:claude-sonnet-4-6", "copilot");
    assert!(env_of(&s).contains(&("COPILOT_PROVIDER_TYPE", "anthropic")));
    let s = settings("local:qwen3-coder", "copilot");
    assert_eq!(
        env_of(&s),
        [
            ("COPILOT_PROVIDER_BASE_URL", "http://localhost:11434/v1"),
            ("COPILOT_PROVIDER_TYPE", "openai"),
            ("COPILOT_MODEL", "qwen3-coder"),
        ]
    );
    let e = all()
        .resolve("gem:gemini-2.5-pro")
        .unwrap()
        .unwrap()
        .settings_for("copilot")
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("Copilot CLI cannot use provider `gem` (type `gemini`)"),
        "{e}"
    );
    // A GitHub provider's own base URL cannot be passed: noted.
    let v = with_provider(0, |p| {
        p.insert("baseUrl".into(), json!("https://copilot.example.com"));
    });
    let p = parse_value(&v, env_with(ALL_KEYS)).unwrap();
    let s = p
        .resolve("gh:gpt-5.4")
        .unwrap()
        .unwrap()
        .settings_for("copilot")
        .unwrap();
    assert!(
        s.notes[0].contains("https://copilot.example.com"),
        "{:?}",
        s.notes
    );
}

#[test]
fn gemini_cli_settings() {
    let s = settings("gem:gemini-2.5-pro", "gemini");
    assert_eq!(
        env_of(&s),
        [
            (
                "GOOGLE_GEMINI_BASE_URL",
                "https://generativelanguage.googleapis.com"
            ),
            ("GEMINI_API_KEY", KEY),
        ]
    );
    for other in [
        "gh:gpt-5.4",
        "az:gpt-5.4",
        "oai:gpt-5.4",
        "ant:claude-sonnet-4-6",
        "local:qwen3-coder",
    ] {
        let text = all()
            .resolve(other)
            .unwrap()
            .unwrap()
            .settings_for("gemini")
            .unwrap_err()
            .to_string();
        assert!(text.starts_with("Gemini CLI cannot use provider"), "{text}");
    }
    let e = all()
        .resolve("gem:gemini-2.5-pro")
        .unwrap()
        .unwrap()
        .settings_for("aider")
        .unwrap_err();
    assert!(matches!(e, ProviderError::UnknownCli { .. }));
    assert!(
        e.to_string().contains("claude, codex, copilot, gemini"),
        "{e}"
    );
}

#[test]
fn keys_never_show_in_debug_output() {
    let p = all();
    assert!(!format!("{p:?}").contains(KEY), "{p:?}");
    assert!(format!("{p:?}").contains("<redacted>"));
    for provider in p.providers() {
        assert!(!format!("{provider:?}").contains(KEY));
    }
    for model in [
        "gh:gpt-5.4",
        "az:gpt-5.4",
        "oai:gpt-5.4",
        "ant:claude-sonnet-4-6",
        "gem:gemini-2.5-pro",
        "local:qwen3-coder",
    ] {
        let m = p.resolve(model).unwrap().unwrap();
        assert!(!format!("{m:?}").contains(KEY), "{m:?}");
        for cli in CLIS {
            match m.settings_for(cli) {
                Ok(s) => {
                    let shown = format!("{s:?}");
                    assert!(!shown.contains(KEY), "{cli} {model}: {shown}");
                    // The URLs stay readable.
                    if let Some((_, url)) = s.env.iter().find(|(k, _)| k.ends_with("_BASE_URL")) {
                        assert!(shown.contains(url.as_str()), "{shown}");
                    }
                }
                Err(e) => assert!(!e.to_string().contains(KEY) && !format!("{e:?}").contains(KEY)),
            }
        }
    }
}

#[test]
fn helpers_split_urls_and_quote_toml() {
    assert_eq!(cli::split_url("https://h:1/a/b"), ("https://h:1", "/a/b"));
    assert_eq!(cli::split_url("http://h"), ("http://h", ""));
    assert!(cli::is_loopback("http://localhost:8080/x"));
    assert!(cli::is_loopback("http://127.0.0.1"));
    assert!(!cli::is_loopback("http://example.com:80"));
    assert_eq!(cli::toml_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
    let v = json!({"providers": [{"id": "g", "type": "gemini", "baseUrl": "http://proxy.example.com",
        "apiKey": "env:GEM_KEY", "models": ["m"]}]});
    let p = parse_value(&v, env_with(ALL_KEYS)).unwrap();
    let s = p
        .resolve("g:m")
        .unwrap()
        .unwrap()
        .settings_for("gemini")
        .unwrap();
    assert!(s.notes[0].contains("https"), "{:?}", s.notes);
}
