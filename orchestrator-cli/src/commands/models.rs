//! `models`: the model providers of `.model_providers.json` whose credentials are set, and
//! their models (SPEC §15).

use orchestrator_agents::providers::{ModelProviders, Provider, ProviderError, FILE_NAME};
use serde_json::{json, Value};

use crate::cli::ModelsArgs;
use crate::error::{CliError, CliResult, Exit};
use crate::workspace::Workspace;

/// `models [--repo DIR] [--json]`: one usable `provider:model` a line on stdout and the
/// providers left out on stderr, or the JSON document. A malformed file is invalid input
/// (exit 2), naming the file and each field; a file that cannot be read is exit 3.
pub async fn models(args: ModelsArgs) -> CliResult<Exit> {
    let ws = Workspace::open(args.repo.repo.as_deref())?;
    let providers =
        ModelProviders::load(ws.root(), |name| std::env::var(name).ok()).map_err(|e| match e {
            ProviderError::Invalid { .. } => CliError::invalid(e.to_string()),
            other => CliError::other(other.to_string()),
        })?;
    if args.json {
        outln!("{}", document(&providers));
        return Ok(Exit::Ok);
    }
    for model in providers.models() {
        outln!("{model}");
    }
    if providers.file().is_none() {
        eprintln!(
            "no {FILE_NAME} in {}: no model providers",
            ws.root().display()
        );
    }
    for p in providers.left_out() {
        eprintln!(
            "left out: {} ({}): {}",
            p.name(),
            p.provider_type(),
            p.reason().unwrap_or_default()
        );
    }
    Ok(Exit::Ok)
}

/// `{"file", "providers": [{"name", "type", "baseUrl", "keyEnv", "models", "usable",
/// "reason"?}], "models": ["provider:model", ...], "defaultModel"}`.
fn document(providers: &ModelProviders) -> Value {
    json!({
        "file": providers.file().map(|f| f.display().to_string()),
        "providers": providers.providers().iter().map(provider).collect::<Vec<_>>(),
        "models": providers.models(),
        "defaultModel": providers.default_model(),
    })
}

fn provider(p: &Provider) -> Value {
    let mut v = json!({
        "name": p.name(),
        "type": p.provider_type().as_str(),
        "baseUrl": p.base_url(),
        "keyEnv": p.key_env(),
        "models": p.models(),
        "usable": p.is_usable(),
    });
    if let (Some(reason), Some(obj)) = (p.reason(), v.as_object_mut()) {
        obj.insert("reason".into(), json!(reason));
    }
    v
}
