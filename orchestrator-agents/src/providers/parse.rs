//! Reading `.model_providers.json`: the JSON walked field by field, every problem collected
//! with the path of its field (`providers[1].baseUrl`). Nothing here reads the environment or
//! runs anything; key values never appear in a message (only the variables' names do, and not
//! even those when they do not look like names).

use serde_json::{Map, Value};

use super::{FieldProblem, ProviderType, WireApi};

/// One provider as written in the file, checked.
#[derive(Debug, Clone)]
pub(super) struct RawProvider {
    pub(super) id: String,
    pub(super) kind: ProviderType,
    pub(super) base_url: String,
    pub(super) key_env: Option<String>,
    pub(super) api_version: Option<String>,
    pub(super) wire_api: Option<WireApi>,
    pub(super) models: Vec<String>,
}

/// The file, checked.
#[derive(Debug, Clone, Default)]
pub(super) struct RawFile {
    pub(super) providers: Vec<RawProvider>,
    pub(super) default_model: Option<String>,
}

/// The fields a provider object may have.
const PROVIDER_FIELDS: [&str; 8] = [
    "id",
    "type",
    "baseUrl",
    "apiKey",
    "githubToken",
    "apiVersion",
    "wireApi",
    "models",
];

/// Variables the CLIs' settings set to values that are not secrets
/// ([`EndpointSettings`](super::EndpointSettings)'s `Debug` shows them): a key may not live in one.
pub(super) const PLAIN_VARS: [&str; 7] = [
    "ANTHROPIC_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "COPILOT_PROVIDER_BASE_URL",
    "COPILOT_PROVIDER_TYPE",
    "COPILOT_PROVIDER_AZURE_API_VERSION",
    "COPILOT_PROVIDER_WIRE_API",
    "COPILOT_MODEL",
];

/// Collects problems as the walk goes.
#[derive(Default)]
struct Problems(Vec<FieldProblem>);

impl Problems {
    fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldProblem {
            field: field.into(),
            message: message.into(),
        });
    }
}

/// Parses and checks the file's text: the providers in file order, or every problem found.
pub(super) fn parse(text: &str) -> Result<RawFile, Vec<FieldProblem>> {
    let mut problems = Problems::default();
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            problems.add("", format!("not valid JSON: {e}"));
            return Err(problems.0);
        }
    };
    let Value::Object(root) = root else {
        problems.add(
            "",
            "must be a JSON object with a `providers` array (and optionally `defaultModel`)",
        );
        return Err(problems.0);
    };
    let mut file = RawFile::default();
    // The ids as written, of the providers with problems too.
    let mut written_ids: Vec<&str> = Vec::new();
    match root.get("providers") {
        None => problems.add("providers", "missing: the list of model providers"),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if let Some(p) = provider(&format!("providers[{i}]"), item, &mut problems) {
                    file.providers.push(p);
                }
            }
            duplicates(items, &mut problems);
            written_ids = items
                .iter()
                .filter_map(|item| item.get("id").and_then(Value::as_str))
                .collect();
        }
        Some(_) => problems.add("providers", "must be an array of provider objects"),
    }
    match root.get("defaultModel") {
        None | Some(Value::Null) => {}
        Some(Value::String(m)) => {
            if let Some(message) = default_model_problem(m, &file.providers, &written_ids) {
                problems.add("defaultModel", message);
            }
            file.default_model = Some(m.clone());
        }
        Some(_) => problems.add("defaultModel", "must be a string: `provider:model`"),
    }
    if problems.0.is_empty() {
        Ok(file)
    } else {
        Err(problems.0)
    }
}

/// The string at `key` of `obj`: `None` when absent (or null), a problem when not a string.
fn string<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    path: &str,
    problems: &mut Problems,
) -> Option<&'a str> {
    match obj.get(key)? {
        Value::String(s) => Some(s),
        Value::Null => None,
        _ => {
            problems.add(format!("{path}.{key}"), "must be a string");
            None
        }
    }
}

/// One provider object, checked; `None` when it has a problem (recorded).
fn provider(path: &str, item: &Value, problems: &mut Problems) -> Option<RawProvider> {
    let Value::Object(obj) = item else {
        problems.add(path, "must be an object (`id`, `type`, `models`, ...)");
        return None;
    };
    let before = problems.0.len();
    for key in obj.keys() {
        if !PROVIDER_FIELDS.contains(&key.as_str()) {
            problems.add(
                format!("{path}.{key}"),
                format!("unknown field (known: {})", PROVIDER_FIELDS.join(", ")),
            );
        }
    }
    let id = match string(obj, "id", path, problems) {
        None if obj.get("id").is_none_or(Value::is_null) => {
            problems.add(
                format!("{path}.id"),
                "missing: the provider's id (the part before `:` in `provider:model`)",
            );
            None
        }
        None => None,
        Some(id) if !is_provider_id(id) => {
            problems.add(
                format!("{path}.id"),
                format!(
                    "`{id}` is not a provider id: letters, digits, `-` and `_`, starting with a \
                     letter or digit (it is the part before `:` in `provider:model`)"
                ),
            );
            None
        }
        Some(id) => Some(id.to_owned()),
    };
    let kind = match string(obj, "type", path, problems) {
        None if obj.get("type").is_none_or(Value::is_null) => {
            problems.add(
                format!("{path}.type"),
                format!("missing: one of {}", type_names()),
            );
            None
        }
        None => None,
        Some(t) => match ProviderType::parse(t) {
            Some(k) => Some(k),
            None => {
                problems.add(
                    format!("{path}.type"),
                    format!("unknown provider type `{t}` (known: {})", type_names()),
                );
                None
            }
        },
    };
    let base_url = base_url(obj, path, kind, problems);
    let key_env = key_env(obj, path, kind, problems);
    let api_version = match string(obj, "apiVersion", path, problems) {
        Some(_) if kind.is_some_and(|k| k != ProviderType::Azure) => {
            problems.add(
                format!("{path}.apiVersion"),
                "only for type `azure` (the Azure OpenAI API version)",
            );
            None
        }
        Some(v) if v.is_empty() || !v.chars().all(|c| c.is_ascii_graphic()) => {
            problems.add(
                format!("{path}.apiVersion"),
                format!("`{v}` is not an API version (e.g. `2025-04-01-preview`)"),
            );
            None
        }
        v => v.map(str::to_owned),
    };
    let wire_api = match string(obj, "wireApi", path, problems) {
        None => None,
        Some(w) => match (WireApi::parse(w), kind) {
            (None, _) => {
                problems.add(
                    format!("{path}.wireApi"),
                    format!("`{w}` is no wire API (known: responses, completions)"),
                );
                None
            }
            (Some(_), Some(k)) if !k.speaks_openai() => {
                problems.add(
                    format!("{path}.wireApi"),
                    format!("only for the types that speak the OpenAI API (openai, azure, ollama), not `{k}`"),
                );
                None
            }
            (w, _) => w,
        },
    };
    let models = models(obj, path, problems);
    if problems.0.len() > before {
        return None;
    }
    Some(RawProvider {
        id: id?,
        kind: kind?,
        base_url: base_url?,
        key_env,
        api_version,
        wire_api,
        models: models?,
    })
}

/// `type` names for messages.
fn type_names() -> String {
    ProviderType::ALL
        .iter()
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `baseUrl`: required but for `github`, an `http(s)://` URL without credentials; the
/// trailing `/` dropped. `github` without one gets the Copilot API's.
fn base_url(
    obj: &Map<String, Value>,
    path: &str,
    kind: Option<ProviderType>,
    problems: &mut Problems,
) -> Option<String> {
    let field = format!("{path}.baseUrl");
    let Some(url) = string(obj, "baseUrl", path, problems) else {
        if obj.get("baseUrl").is_some_and(|v| !v.is_null()) {
            return None; // not a string: recorded
        }
        let kind = kind?;
        return match kind.default_base_url() {
            Some(default) => Some(default.to_owned()),
            None => {
                problems.add(
                    field,
                    format!("missing: type `{kind}` needs the base URL of its API"),
                );
                None
            }
        };
    };
    match url_problem(url) {
        Some(message) => {
            problems.add(field, message);
            None
        }
        None => Some(url.trim_end_matches('/').to_owned()),
    }
}

/// What is wrong with a base URL, if anything. A URL with credentials is not echoed.
fn url_problem(url: &str) -> Option<String> {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return Some(format!("`{url}` is not an http:// or https:// URL"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Some(
            "a base URL must not carry credentials (`user:password@`): give the key through \
             `apiKey`"
                .to_owned(),
        );
    }
    if authority.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!("`{url}` is not a URL with a host"));
    }
    None
}

/// The key's variable: `apiKey` (`githubToken` or `apiKey` for `github`) as `env:NAME`.
/// Required for every type but `ollama`.
fn key_env(
    obj: &Map<String, Value>,
    path: &str,
    kind: Option<ProviderType>,
    problems: &mut Problems,
) -> Option<String> {
    let api_key = string(obj, "apiKey", path, problems);
    let token = string(obj, "githubToken", path, problems);
    let (key, value) = match (kind, api_key, token) {
        (Some(ProviderType::Github), Some(_), Some(_)) => {
            problems.add(
                format!("{path}.apiKey"),
                "give the token's variable once: `githubToken` or `apiKey`",
            );
            return None;
        }
        (Some(k), _, Some(_)) if k != ProviderType::Github => {
            problems.add(
                format!("{path}.githubToken"),
                format!("only for type `github`; type `{k}` takes its key in `apiKey`"),
            );
            return None;
        }
        (_, Some(v), _) => ("apiKey", v),
        (_, None, Some(v)) => ("githubToken", v),
        (kind, None, None) => {
            let written = |k: &str| obj.get(k).is_some_and(|v| !v.is_null());
            if let Some(kind) = kind.filter(|k| k.needs_key()) {
                if !written("apiKey") && !written("githubToken") {
                    let key = if kind == ProviderType::Github {
                        "githubToken"
                    } else {
                        "apiKey"
                    };
                    problems.add(
                        format!("{path}.{key}"),
                        "missing: the environment variable holding the key, as `env:NAME`",
                    );
                }
            }
            return None;
        }
    };
    let field = format!("{path}.{key}");
    let Some(name) = value.strip_prefix("env:") else {
        problems.add(
            field,
            "must be `env:NAME`, naming the environment variable that holds the key (the key \
             itself is never written in this file)",
        );
        return None;
    };
    if !is_env_name(name) {
        problems.add(
            field,
            "what follows `env:` is not an environment variable name (letters, digits and `_`, \
             not starting with a digit)",
        );
        return None;
    }
    if PLAIN_VARS.contains(&name) {
        problems.add(
            field,
            format!("`{name}` is set by the orchestrator for the agent CLIs: keep the key in another variable"),
        );
        return None;
    }
    Some(name.to_owned())
}

/// `models`: a non-empty array of names or `{"name", ...}` objects (their other fields, such
/// as `description` or `cost`, are the catalog's and ignored here), none twice.
fn models(obj: &Map<String, Value>, path: &str, problems: &mut Problems) -> Option<Vec<String>> {
    let field = format!("{path}.models");
    let items = match obj.get("models") {
        None | Some(Value::Null) => {
            problems.add(field, "missing: the models this provider serves");
            return None;
        }
        Some(Value::Array(items)) if items.is_empty() => {
            problems.add(field, "lists no model");
            return None;
        }
        Some(Value::Array(items)) => items,
        Some(_) => {
            problems.add(field, "must be an array of model names");
            return None;
        }
    };
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    let mut ok = true;
    for (j, item) in items.iter().enumerate() {
        let at = format!("{field}[{j}]");
        let name = match item {
            Value::String(s) => s.as_str(),
            Value::Object(m) => match m.get("name") {
                Some(Value::String(s)) => s.as_str(),
                Some(_) => {
                    problems.add(format!("{at}.name"), "must be a string");
                    ok = false;
                    continue;
                }
                None => {
                    problems.add(format!("{at}.name"), "missing: the model's name");
                    ok = false;
                    continue;
                }
            },
            _ => {
                problems.add(at, "must be a model name or an object with a `name`");
                ok = false;
                continue;
            }
        };
        let at = if matches!(item, Value::Object(_)) {
            format!("{at}.name")
        } else {
            at
        };
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            problems.add(at, format!("`{name}` is not a model name"));
            ok = false;
        } else if let Some(k) = names.iter().position(|n| n == name) {
            problems.add(at, format!("`{name}` is listed twice (also models[{k}])"));
            ok = false;
        }
        names.push(name.to_owned());
    }
    ok.then_some(names)
}

/// Two providers with one id (as written, whatever else is wrong with them): the later one
/// is named.
fn duplicates(items: &[Value], problems: &mut Problems) {
    let ids: Vec<Option<&str>> = items
        .iter()
        .map(|item| item.get("id").and_then(Value::as_str))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        let Some(id) = id else { continue };
        if let Some(first) = ids[..i].iter().position(|other| other == &Some(*id)) {
            problems.add(
                format!("providers[{i}].id"),
                format!("`{id}` is the id of providers[{first}] too: ids must differ"),
            );
        }
    }
}

/// Why `model` cannot be the default, if it cannot. A provider with problems of its own
/// (`written` but not among the checked `providers`) is not blamed twice.
fn default_model_problem(
    model: &str,
    providers: &[RawProvider],
    written: &[&str],
) -> Option<String> {
    let Some((provider, name)) = model.split_once(':') else {
        return Some(format!("`{model}` is not `provider:model`"));
    };
    let Some(p) = providers.iter().find(|p| p.id == provider) else {
        return (!written.contains(&provider))
            .then(|| format!("`{model}`: no provider `{provider}` in this file"));
    };
    (!p.models.iter().any(|m| m == name))
        .then(|| format!("`{model}`: provider `{provider}` lists no model `{name}`"))
}

/// A provider id: ASCII letters, digits, `-`, `_`, starting with a letter or digit.
fn is_provider_id(id: &str) -> bool {
    id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A portable environment variable name.
pub(super) fn is_env_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
