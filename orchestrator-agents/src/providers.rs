//! Model providers (SPEC §15): `.model_providers.json` names the LLM endpoints a repository's
//! agents may use — each with its type, base URL, the environment variable holding its key,
//! and its models — and a spec's `model` may then be `provider:model`.
//!
//! The file follows PilotSwarm's (seed 001):
//!
//! ```json
//! {
//!   "providers": [
//!     { "id": "github-copilot", "type": "github", "githubToken": "env:GITHUB_TOKEN",
//!       "models": ["claude-sonnet-4.5", "gpt-5.4"] },
//!     { "id": "azure-openai", "type": "azure",
//!       "baseUrl": "https://my-resource.openai.azure.com/openai/v1",
//!       "apiKey": "env:AZURE_OPENAI_API_KEY", "models": [{ "name": "gpt-5.4", "cost": "high" }] },
//!     { "id": "anthropic", "type": "anthropic", "baseUrl": "https://api.anthropic.com",
//!       "apiKey": "env:ANTHROPIC_API_KEY", "models": ["claude-sonnet-4-6"] },
//!     { "id": "local", "type": "ollama", "baseUrl": "http://localhost:11434",
//!       "models": ["qwen3-coder"] }
//!   ],
//!   "defaultModel": "anthropic:claude-sonnet-4-6"
//! }
//! ```
//!
//! - `type`: `github` (the Copilot API; `baseUrl` optional), `azure` (Azure OpenAI; optional
//!   `apiVersion` selects the versioned route, else the v1 API), `openai` (any OpenAI-compatible
//!   API, `baseUrl` with its `/v1`), `anthropic` (the Messages API), `ollama` (`baseUrl` is the
//!   server, `http://localhost:11434`; no key needed) — and, beyond the seed, `gemini` (the Gemini
//!   API, the only one Gemini CLI speaks). Optional `wireApi` (`responses` or `completions`) for
//!   the OpenAI-speaking types.
//! - `apiKey` (`githubToken` for `github`): `env:NAME`, the variable holding the key. Keys are
//!   never written in the file, never printed, and redacted from every `Debug` output.
//! - `models`: names, or objects with a `name` (their other fields, the seed's catalog
//!   metadata, are ignored). A model name may contain `:` (`ollama:llama3:8b` is provider
//!   `ollama`, model `llama3:8b`).
//! - Other top-level keys are ignored, as in the seed's example.
//!
//! [`ModelProviders::load`] reads the file (none: no providers) and checks every field; a
//! provider whose key variable is unset or empty is left out, with the reason. A
//! `provider:model` then [resolves](ModelProviders::resolve) to a [`ResolvedModel`], which gives
//! each agent CLI the [`EndpointSettings`] pointing it at the provider.

mod cli;
mod parse;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

pub use cli::EndpointSettings;

/// The file's name, at the repository's root.
pub const FILE_NAME: &str = ".model_providers.json";

/// The agent CLIs [`ResolvedModel::settings_for`] knows.
pub const CLIS: [&str; 4] = ["claude", "codex", "copilot", "gemini"];

/// What API a provider serves.
///
/// ```
/// use orchestrator_agents::providers::ProviderType;
/// assert_eq!(ProviderType::parse("azure"), Some(ProviderType::Azure));
/// assert_eq!(ProviderType::Ollama.to_string(), "ollama");
/// assert!(!ProviderType::Ollama.needs_key());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProviderType {
    /// The GitHub Copilot API, with a GitHub token.
    Github,
    /// Azure OpenAI.
    Azure,
    /// An OpenAI-compatible API.
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
    /// An Ollama server (OpenAI- and Anthropic-compatible); no key needed.
    Ollama,
    /// The Google Gemini API.
    Gemini,
}

impl ProviderType {
    /// Every type, in the order of the documentation.
    pub const ALL: [ProviderType; 6] = [
        ProviderType::Github,
        ProviderType::Azure,
        ProviderType::OpenAi,
        ProviderType::Anthropic,
        ProviderType::Ollama,
        ProviderType::Gemini,
    ];

    /// The name in the file: `github`, `azure`, `openai`, `anthropic`, `ollama`, `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderType::Github => "github",
            ProviderType::Azure => "azure",
            ProviderType::OpenAi => "openai",
            ProviderType::Anthropic => "anthropic",
            ProviderType::Ollama => "ollama",
            ProviderType::Gemini => "gemini",
        }
    }

    /// The type named `name` (as in the file), if any.
    pub fn parse(name: &str) -> Option<ProviderType> {
        ProviderType::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether a provider of this type must name its key's variable (all but `ollama`).
    pub fn needs_key(self) -> bool {
        self != ProviderType::Ollama
    }

    /// The base URL used when the file gives none (`github` only: the Copilot API's).
    pub fn default_base_url(self) -> Option<&'static str> {
        (self == ProviderType::Github).then_some("https://api.githubcopilot.com")
    }

    /// Whether it speaks the OpenAI API (`openai`, `azure`, `ollama`).
    fn speaks_openai(self) -> bool {
        matches!(
            self,
            ProviderType::OpenAi | ProviderType::Azure | ProviderType::Ollama
        )
    }
}

impl fmt::Display for ProviderType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which OpenAI API a provider's `wireApi` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireApi {
    /// The Responses API (`/responses`).
    Responses,
    /// Chat Completions (`/chat/completions`).
    Completions,
}

impl WireApi {
    /// `responses` or `completions`.
    pub fn as_str(self) -> &'static str {
        match self {
            WireApi::Responses => "responses",
            WireApi::Completions => "completions",
        }
    }

    fn parse(name: &str) -> Option<WireApi> {
        [WireApi::Responses, WireApi::Completions]
            .into_iter()
            .find(|w| w.as_str() == name)
    }
}

/// One problem of a providers file: the field's path (`providers[1].baseUrl`; empty for the
/// file as a whole) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// Path of the field, as `providers[0].models[2]`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// What went wrong reading providers or resolving a model. Messages name the file and field,
/// or the provider and model; never a key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The file exists but cannot be read.
    #[error("{}: cannot read it: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is malformed: every problem, each naming its field.
    #[error("{}", invalid_message(file, problems))]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The problems, in file order.
        problems: Vec<FieldProblem>,
    },
    /// `provider:model` with nothing before or after the `:`.
    #[error("model `{model}`: {reason}")]
    BadReference {
        /// The model as given.
        model: String,
        /// What is missing.
        reason: &'static str,
    },
    /// `provider:model` names no configured provider.
    #[error(
        "model `{model}`: no provider `{provider}` is configured ({}); a model with `:` is \
         read as `provider:model`",
        known_list(known)
    )]
    UnknownProvider {
        /// The model as given.
        model: String,
        /// The provider named.
        provider: String,
        /// The providers configured.
        known: Vec<String>,
    },
    /// The provider is configured but left out (no credentials).
    #[error("model `{model}`: provider `{provider}` is left out: {reason}")]
    Unusable {
        /// The model as given.
        model: String,
        /// The provider named.
        provider: String,
        /// Why it is left out.
        reason: String,
    },
    /// The provider does not list the model.
    #[error(
        "model `{model}`: provider `{provider}` lists no model `{name}` (it lists {})",
        listed.join(", ")
    )]
    UnknownModel {
        /// The model as given.
        model: String,
        /// The provider named.
        provider: String,
        /// The bare model asked for.
        name: String,
        /// The models the provider lists.
        listed: Vec<String>,
    },
    /// The CLI cannot talk to this type of provider.
    #[error(
        "{} cannot use provider `{provider}` (type `{provider_type}`): {reason}",
        cli_title(cli)
    )]
    UnsupportedCli {
        /// The CLI (`claude`, `codex`, `copilot`, `gemini`).
        cli: String,
        /// The provider.
        provider: String,
        /// Its type.
        provider_type: ProviderType,
        /// Why not.
        reason: String,
    },
    /// Not one of [`CLIS`].
    #[error("unknown agent CLI `{cli}` (known: {})", CLIS.join(", "))]
    UnknownCli {
        /// The name given.
        cli: String,
    },
}

fn invalid_message(file: &Path, problems: &[FieldProblem]) -> String {
    match problems {
        [one] => format!("{}: {one}", file.display()),
        many => {
            let mut s = format!("{}: {} problems:", file.display(), many.len());
            for p in many {
                s.push_str(&format!("\n  {p}"));
            }
            s
        }
    }
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        format!("none: no {FILE_NAME}, or it lists no provider")
    } else {
        format!("known: {}", known.join(", "))
    }
}

/// How messages name a CLI.
fn cli_title(cli: &str) -> &str {
    match cli {
        "claude" => "Claude Code",
        "codex" => "Codex",
        "copilot" => "Copilot CLI",
        "gemini" => "Gemini CLI",
        other => other,
    }
}

/// A key: never shown by `Debug` (nor `Display`, which it lacks).
#[derive(Clone, PartialEq, Eq)]
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// One configured provider (usable or left out). Its key, when read, is redacted from
/// `Debug`.
#[derive(Debug, Clone)]
pub struct Provider {
    name: String,
    provider_type: ProviderType,
    base_url: String,
    key_env: Option<String>,
    api_version: Option<String>,
    wire_api: Option<WireApi>,
    models: Vec<String>,
    key: Option<Secret>,
    left_out: Option<String>,
}

impl Provider {
    /// Its id (the part before `:` in `provider:model`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its type.
    pub fn provider_type(&self) -> ProviderType {
        self.provider_type
    }

    /// Its base URL (no trailing `/`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The environment variable holding its key (none: an `ollama` provider without one).
    pub fn key_env(&self) -> Option<&str> {
        self.key_env.as_deref()
    }

    /// The Azure API version (`azure` only).
    pub fn api_version(&self) -> Option<&str> {
        self.api_version.as_deref()
    }

    /// The OpenAI wire API asked for, if any.
    pub fn wire_api(&self) -> Option<WireApi> {
        self.wire_api
    }

    /// Its models, bare, in file order.
    pub fn models(&self) -> &[String] {
        &self.models
    }

    /// Whether its credentials are there.
    pub fn is_usable(&self) -> bool {
        self.left_out.is_none()
    }

    /// Why it is left out (`AZURE_KEY is not set`), when it is.
    pub fn reason(&self) -> Option<&str> {
        self.left_out.as_deref()
    }
}

/// The model providers of a repository: every provider of its `.model_providers.json`, each
/// usable or left out for lack of credentials.
///
/// ```
/// use std::path::Path;
/// use orchestrator_agents::providers::ModelProviders;
///
/// let text = r#"{"providers": [
///   {"id": "anthropic", "type": "anthropic", "baseUrl": "https://api.anthropic.com",
///    "apiKey": "env:MY_ANTHROPIC_KEY", "models": ["claude-sonnet-4-6"]},
///   {"id": "azure", "type": "azure", "baseUrl": "https://r.openai.azure.com",
///    "apiKey": "env:MY_AZURE_KEY", "models": ["gpt-5.4"]}
/// ]}"#;
/// let env = |name: &str| (name == "MY_ANTHROPIC_KEY").then(|| "sk-ant-test".to_owned());
/// let providers = ModelProviders::parse(Path::new(".model_providers.json"), text, env)?;
/// assert_eq!(providers.models(), ["anthropic:claude-sonnet-4-6"]);
/// let azure = providers.left_out().next().unwrap();
/// assert_eq!(azure.reason(), Some("`MY_AZURE_KEY` is not set"));
/// assert!(!format!("{providers:?}").contains("sk-ant-test"));
/// # Ok::<(), orchestrator_agents::providers::ProviderError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ModelProviders {
    file: Option<PathBuf>,
    providers: Vec<Provider>,
    default_model: Option<String>,
}

impl ModelProviders {
    /// `<repo_dir>/.model_providers.json`, each key read with `env` (`std::env::var(n).ok()`
    /// for the process environment). No file: no providers, no error.
    ///
    /// ```
    /// use orchestrator_agents::providers::ModelProviders;
    /// let dir = std::env::temp_dir().join("no-such-repo-for-providers-doc");
    /// let providers = ModelProviders::load(&dir, |_| None)?;
    /// assert!(providers.is_empty() && providers.file().is_none());
    /// # Ok::<(), orchestrator_agents::providers::ProviderError>(())
    /// ```
    pub fn load(
        repo_dir: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ModelProviders, ProviderError> {
        let file = repo_dir.join(FILE_NAME);
        match std::fs::read_to_string(&file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ModelProviders::default()),
            Err(source) => Err(ProviderError::Read { file, source }),
            Ok(text) => ModelProviders::parse(&file, &text, env),
        }
    }

    /// The providers file at `path` (which must exist).
    pub fn from_file(
        path: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ModelProviders, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProviderError::Read {
            file: path.to_owned(),
            source,
        })?;
        ModelProviders::parse(path, &text, env)
    }

    /// The providers of `text`, a providers file's content; `file` names it in messages.
    pub fn parse(
        file: &Path,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ModelProviders, ProviderError> {
        let raw = parse::parse(text).map_err(|problems| ProviderError::Invalid {
            file: file.to_owned(),
            problems,
        })?;
        let providers = raw
            .providers
            .into_iter()
            .map(|p| {
                let (key, left_out) = match &p.key_env {
                    None => (None, None),
                    Some(var) => match env(var) {
                        None => (None, Some(format!("`{var}` is not set"))),
                        Some(v) if v.is_empty() => (None, Some(format!("`{var}` is empty"))),
                        Some(v) => (Some(Secret(v)), None),
                    },
                };
                Provider {
                    name: p.id,
                    provider_type: p.kind,
                    base_url: p.base_url,
                    key_env: p.key_env,
                    api_version: p.api_version,
                    wire_api: p.wire_api,
                    models: p.models,
                    key,
                    left_out,
                }
            })
            .collect();
        Ok(ModelProviders {
            file: Some(file.to_owned()),
            providers,
            default_model: raw.default_model,
        })
    }

    /// The file read (none when there was none).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Whether no provider is configured.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    /// Every configured provider, in file order.
    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    /// The provider named `name`, usable or not.
    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// The providers whose credentials are there.
    pub fn usable(&self) -> impl Iterator<Item = &Provider> {
        self.providers.iter().filter(|p| p.is_usable())
    }

    /// The providers left out; [`Provider::reason`] says why.
    pub fn left_out(&self) -> impl Iterator<Item = &Provider> {
        self.providers.iter().filter(|p| !p.is_usable())
    }

    /// Every usable `provider:model`, in file order.
    pub fn models(&self) -> Vec<String> {
        self.usable()
            .flat_map(|p| p.models.iter().map(move |m| format!("{}:{m}", p.name)))
            .collect()
    }

    /// The file's `defaultModel` (`provider:model`; its provider may be left out).
    pub fn default_model(&self) -> Option<&str> {
        self.default_model.as_deref()
    }

    /// `provider:model` resolved to its provider and bare model; a model without `:` is not a
    /// provider's (`Ok(None)`: the CLI's own model). Refused, naming the provider: one not
    /// configured, left out for lack of credentials, or not listing the model.
    ///
    /// ```
    /// use std::path::Path;
    /// use orchestrator_agents::providers::{ModelProviders, ProviderError};
    ///
    /// let text = r#"{"providers": [{"id": "local", "type": "ollama",
    ///   "baseUrl": "http://localhost:11434", "models": ["qwen3-coder"]}]}"#;
    /// let providers = ModelProviders::parse(Path::new("p.json"), text, |_| None)?;
    /// let m = providers.resolve("local:qwen3-coder")?.unwrap();
    /// assert_eq!((m.provider().name(), m.model()), ("local", "qwen3-coder"));
    /// assert!(providers.resolve("gpt-5.4")?.is_none());
    /// assert!(matches!(providers.resolve("cloud:x"), Err(ProviderError::UnknownProvider { .. })));
    /// # Ok::<(), ProviderError>(())
    /// ```
    pub fn resolve(&self, model: &str) -> Result<Option<ResolvedModel>, ProviderError> {
        let Some((provider, name)) = model.split_once(':') else {
            return Ok(None);
        };
        let bad = |reason| ProviderError::BadReference {
            model: model.to_owned(),
            reason,
        };
        if provider.is_empty() {
            return Err(bad("no provider before `:` (`provider:model`)"));
        }
        if name.is_empty() {
            return Err(bad("no model after `:` (`provider:model`)"));
        }
        let Some(p) = self.provider(provider) else {
            return Err(ProviderError::UnknownProvider {
                model: model.to_owned(),
                provider: provider.to_owned(),
                known: self.providers.iter().map(|p| p.name.clone()).collect(),
            });
        };
        if !p.models.iter().any(|m| m == name) {
            return Err(ProviderError::UnknownModel {
                model: model.to_owned(),
                provider: provider.to_owned(),
                name: name.to_owned(),
                listed: p.models.clone(),
            });
        }
        if let Some(reason) = &p.left_out {
            return Err(ProviderError::Unusable {
                model: model.to_owned(),
                provider: provider.to_owned(),
                reason: reason.clone(),
            });
        }
        Ok(Some(ResolvedModel {
            provider: p.clone(),
            model: name.to_owned(),
        }))
    }
}

/// A `provider:model` resolved: the usable provider (with its key, redacted from `Debug`) and
/// the bare model. [`ResolvedModel::settings_for`] turns it into what a CLI needs.
#[derive(Debug, Clone)]
pub struct ResolvedModel {
    provider: Provider,
    model: String,
}

impl ResolvedModel {
    /// The provider.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// The bare model (what the CLI's model option gets).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// `provider:model`.
    pub fn qualified(&self) -> String {
        format!("{}:{}", self.provider.name, self.model)
    }

    /// The key, when the provider has one.
    fn key(&self) -> Option<&str> {
        self.provider.key.as_ref().map(|s| s.0.as_str())
    }
}
