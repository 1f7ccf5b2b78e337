//! What each agent CLI needs to use a provider: environment variables and, for Codex, `-c`
//! config overrides. Each mapping follows the CLI's own documentation:
//!
//! - Claude Code (`code.claude.com/docs/en/env-vars`): `ANTHROPIC_BASE_URL`, and the key in
//!   `ANTHROPIC_API_KEY` (sent as `X-Api-Key`). An Ollama server speaks the Messages API too
//!   (`docs.ollama.com/api/anthropic-compatibility`): `ANTHROPIC_AUTH_TOKEN` (required, ignored
//!   locally) and `ANTHROPIC_API_KEY` empty. Claude Code speaks nothing else.
//! - Codex (`openai/codex` `docs/config.md`, "model_providers"): a provider of its own,
//!   `-c model_provider=<id>` and `-c model_providers.<id>.{name,base_url,env_key,wire_api}`,
//!   Azure's `api-version` in `query_params`. Codex 0.171 refuses `wire_api = "chat"` and
//!   built-in provider ids (`openai`, `ollama`, ...), so the id is `orchestrator-<provider>` and
//!   the wire API `responses`.
//! - Copilot CLI (`copilot help providers`, `copilot help environment`, 1.0.102): a `github`
//!   provider's token in `COPILOT_GITHUB_TOKEN`; any other through BYOK:
//!   `COPILOT_PROVIDER_BASE_URL`, `COPILOT_PROVIDER_TYPE` (`openai`, `azure`, `anthropic`),
//!   `COPILOT_PROVIDER_API_KEY`, `COPILOT_PROVIDER_AZURE_API_VERSION`,
//!   `COPILOT_PROVIDER_WIRE_API` and `COPILOT_MODEL` (BYOK requires a model).
//! - Gemini CLI (its `docs/reference/configuration.md`): `GOOGLE_GEMINI_BASE_URL` and
//!   `GEMINI_API_KEY`; it speaks only the Gemini API.

use std::fmt;

use super::parse::PLAIN_VARS;
use super::{ProviderError, ProviderType, ResolvedModel, WireApi};

/// How one agent CLI reaches a provider: the model to give its model option, the environment
/// variables to add to its environment, arguments to add to its command line (Codex's `-c`
/// overrides), and notes worth logging. Plain data; `Debug` shows the variables that carry a
/// key as `<redacted>`.
///
/// ```
/// use std::path::Path;
/// use orchestrator_agents::providers::ModelProviders;
///
/// let text = r#"{"providers": [{"id": "anthropic", "type": "anthropic",
///   "baseUrl": "https://api.anthropic.com", "apiKey": "env:MY_KEY",
///   "models": ["claude-sonnet-4-6"]}]}"#;
/// let env = |_: &str| Some("sk-ant-test".to_owned());
/// let providers = ModelProviders::parse(Path::new("p.json"), text, env)?;
/// let resolved = providers.resolve("anthropic:claude-sonnet-4-6")?.unwrap();
/// let claude = resolved.settings_for("claude")?;
/// assert_eq!(claude.model, "claude-sonnet-4-6");
/// assert!(claude.env.contains(&("ANTHROPIC_BASE_URL".into(), "https://api.anthropic.com".into())));
/// assert!(claude.env.contains(&("ANTHROPIC_API_KEY".into(), "sk-ant-test".into())));
/// assert!(!format!("{claude:?}").contains("sk-ant-test"));
/// assert!(resolved.settings_for("codex").is_err()); // Codex speaks no Anthropic API
/// # Ok::<(), orchestrator_agents::providers::ProviderError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Default)]
pub struct EndpointSettings {
    /// The bare model, for the CLI's model option (`--model`).
    pub model: String,
    /// Environment variables for the CLI (over the host's).
    pub env: Vec<(String, String)>,
    /// Arguments for the CLI's command line (Codex: `-c key=value` pairs).
    pub args: Vec<String>,
    /// What the settings cannot do, or assume, worth a line in the log.
    pub notes: Vec<String>,
}

impl fmt::Debug for EndpointSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Env<'a>(&'a [(String, String)]);
        impl fmt::Debug for Env<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list()
                    .entries(self.0.iter().map(|(name, value)| {
                        let shown = if value.is_empty() || PLAIN_VARS.contains(&name.as_str()) {
                            value.as_str()
                        } else {
                            "<redacted>"
                        };
                        (name.as_str(), shown)
                    }))
                    .finish()
            }
        }
        f.debug_struct("EndpointSettings")
            .field("model", &self.model)
            .field("env", &Env(&self.env))
            .field("args", &self.args)
            .field("notes", &self.notes)
            .finish()
    }
}

impl EndpointSettings {
    fn new(model: &str) -> Self {
        EndpointSettings {
            model: model.to_owned(),
            ..EndpointSettings::default()
        }
    }

    fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    fn env_opt(self, name: &str, value: Option<&str>) -> Self {
        match value {
            Some(v) => self.env(name, v),
            None => self,
        }
    }

    /// A Codex `-c key=value` override.
    fn config(mut self, key: &str, value: &str) -> Self {
        self.args.push("-c".to_owned());
        self.args.push(format!("{key}={value}"));
        self
    }

    fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

impl ResolvedModel {
    /// The settings that point `cli` (`claude`, `codex`, `copilot`, `gemini`) at this provider
    /// with its key. A CLI that cannot speak the provider's API is refused, naming both.
    ///
    /// ```
    /// use std::path::Path;
    /// use orchestrator_agents::providers::ModelProviders;
    ///
    /// let text = r#"{"providers": [{"id": "oai", "type": "openai",
    ///   "baseUrl": "https://api.openai.com/v1", "apiKey": "env:OPENAI_KEY",
    ///   "models": ["gpt-5.4"]}]}"#;
    /// let providers = ModelProviders::parse(Path::new("p.json"), text, |_| Some("sk-x".into()))?;
    /// let codex = providers.resolve("oai:gpt-5.4")?.unwrap().settings_for("codex")?;
    /// assert_eq!(codex.args[..2], ["-c", "model_provider=\"orchestrator-oai\""]);
    /// assert!(codex.args.contains(&"model_providers.orchestrator-oai.env_key=\"OPENAI_KEY\"".into()));
    /// # Ok::<(), orchestrator_agents::providers::ProviderError>(())
    /// ```
    pub fn settings_for(&self, cli: &str) -> Result<EndpointSettings, ProviderError> {
        match cli {
            "claude" => self.claude(),
            "codex" => self.codex(),
            "copilot" => self.copilot(),
            "gemini" => self.gemini(),
            _ => Err(ProviderError::UnknownCli {
                cli: cli.to_owned(),
            }),
        }
    }

    fn unsupported(&self, cli: &str, reason: &str) -> ProviderError {
        ProviderError::UnsupportedCli {
            cli: cli.to_owned(),
            provider: self.provider.name.clone(),
            provider_type: self.provider.provider_type,
            reason: reason.to_owned(),
        }
    }

    fn claude(&self) -> Result<EndpointSettings, ProviderError> {
        let s = EndpointSettings::new(&self.model);
        let base = &self.provider.base_url;
        match self.provider.provider_type {
            ProviderType::Anthropic => Ok(s
                .env("ANTHROPIC_BASE_URL", base)
                .env_opt("ANTHROPIC_API_KEY", self.key())),
            ProviderType::Ollama => Ok(s
                .env("ANTHROPIC_BASE_URL", ollama_origin(base))
                .env("ANTHROPIC_AUTH_TOKEN", self.key().unwrap_or("ollama"))
                .env("ANTHROPIC_API_KEY", "")
                .note("Claude Code reaches Ollama through its Anthropic Messages API (Ollama 0.14 or later)")),
            _ => Err(self.unsupported(
                "claude",
                "Claude Code speaks only the Anthropic Messages API (types `anthropic` and `ollama`)",
            )),
        }
    }

    fn codex(&self) -> Result<EndpointSettings, ProviderError> {
        let p = &self.provider;
        let base_url = match p.provider_type {
            ProviderType::OpenAi => p.base_url.clone(),
            ProviderType::Azure => azure_codex_url(&p.base_url, p.api_version.is_some()),
            ProviderType::Ollama => format!("{}/v1", ollama_origin(&p.base_url)),
            _ => return Err(self.unsupported(
                "codex",
                "Codex speaks only the OpenAI Responses API (types `openai`, `azure` and `ollama`)",
            )),
        };
        if p.wire_api == Some(WireApi::Completions) {
            return Err(self.unsupported(
                "codex",
                "the provider asks for `wireApi: completions` and Codex no longer supports Chat Completions",
            ));
        }
        let id = format!("orchestrator-{}", p.name);
        let key = |field: &str| format!("model_providers.{id}.{field}");
        let mut s = EndpointSettings::new(&self.model)
            .config("model_provider", &toml_string(&id))
            .config(&key("name"), &toml_string(&p.name))
            .config(&key("base_url"), &toml_string(&base_url))
            .config(&key("wire_api"), &toml_string(WireApi::Responses.as_str()));
        if let Some(version) = &p.api_version {
            s = s.config(
                &key("query_params"),
                &format!("{{ api-version = {} }}", toml_string(version)),
            );
        }
        if let (Some(var), Some(value)) = (&p.key_env, self.key()) {
            s = s.config(&key("env_key"), &toml_string(var)).env(var, value);
        }
        if p.provider_type == ProviderType::Ollama {
            s = s.note("Codex needs the Responses API (`/v1/responses`) of the Ollama server");
        }
        Ok(s)
    }

    fn copilot(&self) -> Result<EndpointSettings, ProviderError> {
        let p = &self.provider;
        let s = EndpointSettings::new(&self.model);
        let (kind, base_url) =
            match p.provider_type {
                ProviderType::Github => {
                    let mut s = s.env_opt("COPILOT_GITHUB_TOKEN", self.key());
                    if Some(p.base_url.as_str()) != ProviderType::Github.default_base_url() {
                        s = s.note(format!(
                        "Copilot CLI finds the Copilot API from its GitHub host (COPILOT_GH_HOST); \
                         the base URL {} is not passed",
                        p.base_url
                    ));
                    }
                    return Ok(s);
                }
                ProviderType::OpenAi => ("openai", p.base_url.clone()),
                ProviderType::Azure => ("azure", azure_host_url(&p.base_url)),
                ProviderType::Anthropic => ("anthropic", p.base_url.clone()),
                ProviderType::Ollama => ("openai", format!("{}/v1", ollama_origin(&p.base_url))),
                _ => return Err(self.unsupported(
                    "copilot",
                    "Copilot CLI's own providers are GitHub Copilot and, bring-your-own-key, the \
                     OpenAI, Azure OpenAI and Anthropic APIs",
                )),
            };
        Ok(s.env("COPILOT_PROVIDER_BASE_URL", &base_url)
            .env("COPILOT_PROVIDER_TYPE", kind)
            .env_opt("COPILOT_PROVIDER_API_KEY", self.key())
            .env_opt(
                "COPILOT_PROVIDER_AZURE_API_VERSION",
                p.api_version.as_deref(),
            )
            .env_opt("COPILOT_PROVIDER_WIRE_API", p.wire_api.map(WireApi::as_str))
            .env("COPILOT_MODEL", &self.model))
    }

    fn gemini(&self) -> Result<EndpointSettings, ProviderError> {
        let p = &self.provider;
        if p.provider_type != ProviderType::Gemini {
            return Err(self.unsupported(
                "gemini",
                "Gemini CLI speaks only the Gemini API (type `gemini`)",
            ));
        }
        let mut s = EndpointSettings::new(&self.model)
            .env("GOOGLE_GEMINI_BASE_URL", &p.base_url)
            .env_opt("GEMINI_API_KEY", self.key());
        if p.base_url.starts_with("http://") && !is_loopback(&p.base_url) {
            s = s.note(format!(
                "Gemini CLI refuses a base URL without https unless it is localhost: {}",
                p.base_url
            ));
        }
        Ok(s)
    }
}

/// The part of `url` before its path (`https://host:port`) and the path (`/openai/v1`, or
/// empty).
pub(super) fn split_url(url: &str) -> (&str, &str) {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    match url[scheme_end..].find('/') {
        Some(i) => url.split_at(scheme_end + i),
        None => (url, ""),
    }
}

/// An Ollama server's URL without the `/v1` of its OpenAI-compatible API.
fn ollama_origin(url: &str) -> &str {
    url.strip_suffix("/v1").unwrap_or(url)
}

/// Azure OpenAI: the resource (`https://r.openai.azure.com`) of a base URL that is the
/// resource, `<resource>/openai` or `<resource>/openai/v1`; `None` for another path (an AI
/// Foundry project URL, used as it is).
fn azure_resource(url: &str) -> Option<&str> {
    let (origin, path) = split_url(url);
    matches!(path, "" | "/openai" | "/openai/v1").then_some(origin)
}

/// Copilot CLI wants the resource (it builds the API path itself) or a project URL.
fn azure_host_url(url: &str) -> String {
    azure_resource(url).unwrap_or(url).to_owned()
}

/// Codex wants the API's base: `<resource>/openai/v1` (the v1 API, no `api-version`), or with
/// an `apiVersion` the versioned `<resource>/openai` route.
fn azure_codex_url(url: &str, versioned: bool) -> String {
    match azure_resource(url) {
        Some(resource) if versioned => format!("{resource}/openai"),
        Some(resource) => format!("{resource}/openai/v1"),
        None => url.to_owned(),
    }
}

/// Whether an http URL points at this machine (Gemini CLI allows http only there).
pub(super) fn is_loopback(url: &str) -> bool {
    let (origin, _) = split_url(url);
    let host = origin
        .split("://")
        .nth(1)
        .unwrap_or_default()
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or_else(
            || origin.split("://").nth(1).unwrap_or_default(),
            |(h, _)| h,
        );
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// A TOML basic string.
pub(super) fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
