//! Settings every built-in CLI runner shares: program, extra env, model endpoint, tier models.

use orchestrator_core::plan::{Env, ModelTier};

/// The kind of API a [`ModelEndpoint`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderKind {
    /// OpenAI-compatible (Responses / Chat Completions).
    OpenAi,
    /// Azure OpenAI.
    Azure,
    /// Anthropic Messages API.
    Anthropic,
    /// Google Gemini API.
    Gemini,
}

impl ProviderKind {
    /// `openai`, `azure`, `anthropic`, `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Azure => "azure",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
        }
    }
}

/// A custom model endpoint (a proxy, a gateway, a local scripted server in tests) for a
/// runner to use instead of its vendor's default. Each runner turns it into what its CLI
/// reads: see the runner's documentation.
///
/// The base URL is what the CLI's client expects: for [`ProviderKind::OpenAi`] it includes the
/// `/v1` path (`http://host:port/v1`), for Anthropic and Gemini it is the bare origin.
///
/// ```
/// use orchestrator_agents::agent::{ModelEndpoint, ProviderKind};
/// let e = ModelEndpoint::new("http://127.0.0.1:8080", ProviderKind::Anthropic)
///     .api_key("test-key")
///     .model("claude-sonnet-4.5");
/// assert_eq!(e.api_key.as_deref(), Some("test-key"));
/// assert_eq!(e.model.as_deref(), Some("claude-sonnet-4.5"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelEndpoint {
    /// Base URL of the API.
    pub base_url: String,
    /// API key to send, if any (redacted from logs like every secret-looking env value).
    pub api_key: Option<String>,
    /// What API it speaks.
    pub provider: ProviderKind,
    /// The model to ask for when a spec names none. CLIs that cannot work without a model
    /// they know (Codex, Copilot with a custom provider) fall back to their runner's own
    /// default for the endpoint when this is unset.
    pub model: Option<String>,
}

impl ModelEndpoint {
    /// An endpoint at `base_url` speaking `provider`, without a key.
    pub fn new(base_url: impl Into<String>, provider: ProviderKind) -> Self {
        ModelEndpoint {
            base_url: base_url.into(),
            api_key: None,
            provider,
            model: None,
        }
    }

    /// Sets the API key.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the model used when a spec names none.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }
}

/// What every built-in runner can be configured with.
#[derive(Debug, Clone)]
pub(crate) struct CliSettings {
    /// Program to start; a bare name is looked up on the child's `PATH`.
    pub(crate) program: String,
    /// Extra environment (over the host's, under plan/job/spec env).
    pub(crate) env: Env,
    /// Custom model endpoint.
    pub(crate) endpoint: Option<ModelEndpoint>,
    /// Models for `fast`, `standard`, `premium` when a spec names a tier but no model.
    pub(crate) tiers: [Option<String>; 3],
}

impl CliSettings {
    pub(crate) fn new(program: &str, tiers: [Option<&str>; 3]) -> Self {
        CliSettings {
            program: program.to_owned(),
            env: Env::new(),
            endpoint: None,
            tiers: tiers.map(|t| t.map(str::to_owned)),
        }
    }

    /// The spec's model, else the tier's model, else the endpoint's model, else none (the
    /// CLI's default).
    pub(crate) fn model(&self, request: &super::AgentRequest) -> Option<String> {
        request
            .model
            .clone()
            .or_else(|| {
                let tier = request.model_tier?;
                self.tiers[tier_slot(tier)].clone()
            })
            .or_else(|| self.endpoint.as_ref()?.model.clone())
    }

    /// `cmd` with the endpoint's base URL in `url_var` and its key (if any) in `key_var`,
    /// when there is an endpoint.
    pub(crate) fn endpoint_env(
        &self,
        mut cmd: super::AgentCommand,
        url_var: &str,
        key_var: &str,
    ) -> super::AgentCommand {
        if let Some(endpoint) = &self.endpoint {
            cmd = cmd.env(url_var, &endpoint.base_url);
            if let Some(key) = &endpoint.api_key {
                cmd = cmd.env(key_var, key);
            }
        }
        cmd
    }
}

/// The builder methods every built-in runner shares.
macro_rules! cli_builder {
    ($ty:ty) => {
        impl $ty {
            /// Sets the program to start (default: the CLI's usual name, looked up on the
            /// child's `PATH`).
            pub fn program(mut self, program: impl Into<String>) -> Self {
                self.cli.program = program.into();
                self
            }

            /// Adds an environment variable for the CLI: over the host environment, under
            /// the plan, job and spec `env`.
            pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
                self.cli.env.insert(name.into(), value.into());
                self
            }

            /// Sends requests to this endpoint instead of the vendor's default.
            pub fn endpoint(mut self, endpoint: $crate::agent::ModelEndpoint) -> Self {
                self.cli.endpoint = Some(endpoint);
                self
            }

            /// The model used for `tier` when a spec names a `modelTier` but no `model`.
            pub fn tier_model(
                mut self,
                tier: orchestrator_core::plan::ModelTier,
                model: impl Into<String>,
            ) -> Self {
                self.cli.tiers[$crate::agent::cli::tier_slot(tier)] = Some(model.into());
                self
            }
        }
    };
}
pub(crate) use cli_builder;

/// Index of `tier` in [`CliSettings::tiers`].
pub(crate) fn tier_slot(tier: ModelTier) -> usize {
    match tier {
        ModelTier::Fast => 0,
        ModelTier::Premium => 2,
        _ => 1,
    }
}
