//! [`Redactor`]: keeps secrets out of logs.

use crate::env::ChildEnv;

/// What replaces a secret.
pub use orchestrator_core::redact::REDACTED;

/// Whether an environment variable of this name holds a secret (the built-in rules of
/// [`orchestrator_core::redact::looks_secret`]).
pub use orchestrator_core::redact::looks_secret;

/// Replaces secrets in output lines by [`REDACTED`] before they reach a log: the engine's
/// [`orchestrator_core::redact::Redactor`] built from a child's environment.
///
/// Two sources: the *values* of the child's environment variables whose names look secret
/// (containing `API_KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `CREDENTIAL`, or ending in `_KEY`;
/// values shorter than 6 characters are ignored), and well-known token shapes wherever they
/// appear: `sk-…`, `ghp_…` (and the other GitHub prefixes), `github_pat_…`, Google `AIza…`
/// keys, Slack `xoxb-`/`xoxp-` tokens and `Bearer …` credentials. (The engine also redacts
/// every phase's log with the names configured in `OrchestratorOptions::secret_env`.)
///
/// ```
/// use orchestrator_agents::agent::Redactor;
/// use orchestrator_agents::ChildEnv;
/// let env = ChildEnv::from_vars([("MY_API_KEY", "hunter2-secret"), ("HOME", "/home/me")]);
/// let r = Redactor::from_env(&env);
/// assert_eq!(r.redact("key=hunter2-secret home=/home/me"), "key=[REDACTED] home=/home/me");
/// assert_eq!(r.redact("Authorization: Bearer abc.def-123456"), "Authorization: Bearer [REDACTED]");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Redactor(orchestrator_core::redact::Redactor);

impl Redactor {
    /// A redactor for the secrets in `env` (and the token shapes).
    pub fn from_env(env: &ChildEnv) -> Self {
        let vars = env
            .iter()
            .map(|(name, value)| (name.to_string_lossy(), value.to_string_lossy()));
        Redactor(
            orchestrator_core::redact::Redactor::new()
                .with_vars(vars, &orchestrator_core::redact::SecretNames::new()),
        )
    }

    /// Also redacts `value` (ignored when shorter than 6 characters).
    pub fn with_value(self, value: impl Into<String>) -> Self {
        Redactor(self.0.with_value(value))
    }

    /// `line` with every secret replaced by [`REDACTED`].
    pub fn redact(&self, line: &str) -> String {
        self.0.redact(line).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_longest_first_and_short_ones_ignored() {
        let env = ChildEnv::from_vars([
            ("A_TOKEN", "abcdef"),
            ("B_TOKEN", "abcdef-longer"),
            ("C_TOKEN", "1"),
            ("HOME", "/home/someone"),
        ]);
        let r = Redactor::from_env(&env).with_value("extra-secret");
        assert_eq!(
            r.redact("abcdef-longer abcdef 1 extra-secret /home/someone"),
            "[REDACTED] [REDACTED] 1 [REDACTED] /home/someone"
        );
        assert_eq!(
            r.redact("key sk-zyxwvutsrqponmlkjihgfe end"),
            "key [REDACTED] end"
        );
    }
}
