//! [`Redactor`]: keeps secrets out of logs.

use crate::env::ChildEnv;

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Shortest env value treated as a secret: shorter values (`1`, `true`) would blank out
/// ordinary text everywhere.
const MIN_SECRET_CHARS: usize = 6;

/// Token prefixes redacted wherever they appear, with the fewest token characters that must
/// follow (so `sk-` in prose is left alone).
const TOKEN_PREFIXES: &[(&str, usize)] = &[
    ("sk-", 16),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("github_pat_", 20),
    ("AIza", 30),
    ("xoxb-", 10),
    ("xoxp-", 10),
];

/// Replaces secrets in output lines by [`REDACTED`] before they reach a log.
///
/// Two sources: the *values* of the child's environment variables whose names look secret
/// (containing `API_KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `CREDENTIAL`, or ending in `_KEY`;
/// values shorter than 6 characters are ignored), and well-known token shapes wherever they
/// appear: `sk-…`, `ghp_…` (and the other GitHub prefixes), `github_pat_…`, Google `AIza…`
/// keys, Slack `xoxb-`/`xoxp-` tokens and `Bearer …` credentials.
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
pub struct Redactor {
    /// Secret values, longest first (so a secret containing another is replaced whole).
    values: Vec<String>,
}

impl Redactor {
    /// A redactor for the secrets in `env` (and the token shapes).
    pub fn from_env(env: &ChildEnv) -> Self {
        let mut values: Vec<String> = env
            .iter()
            .filter(|(name, _)| looks_secret(&name.to_string_lossy()))
            .map(|(_, value)| value.to_string_lossy().into_owned())
            .filter(|v| v.chars().count() >= MIN_SECRET_CHARS)
            .collect();
        longest_first(&mut values);
        values.dedup();
        Redactor { values }
    }

    /// Also redacts `value` (ignored when shorter than 6 characters).
    pub fn with_value(mut self, value: impl Into<String>) -> Self {
        let value = value.into();
        if value.chars().count() >= MIN_SECRET_CHARS && !self.values.contains(&value) {
            self.values.push(value);
            longest_first(&mut self.values);
        }
        self
    }

    /// `line` with every secret replaced by [`REDACTED`].
    ///
    /// Runs for every output line of an agent: a secret or token prefix the line does not
    /// contain costs a search, not a copy.
    pub fn redact(&self, line: &str) -> String {
        let mut out = line.to_owned();
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), REDACTED);
            }
        }
        let shapes = TOKEN_PREFIXES
            .iter()
            .map(|&(prefix, min)| (prefix, min, false))
            .chain(["Bearer ", "bearer "].map(|bearer| (bearer, 8, true)));
        for (prefix, min, keep_prefix) in shapes {
            if out.contains(prefix) {
                out = redact_tokens(&out, prefix, min, keep_prefix);
            }
        }
        out
    }
}

/// Sorts secret values longest first (ties in text order), so a secret containing another is
/// replaced whole.
fn longest_first(values: &mut [String]) {
    values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
}

/// Whether an environment variable of this name holds a secret.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "API_KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
    ]
    .iter()
    .any(|s| upper.contains(s))
        || upper.ends_with("_KEY")
}

fn token_char(c: char, bearer: bool) -> bool {
    c.is_ascii_alphanumeric()
        || c == '_'
        || c == '-'
        || (bearer && matches!(c, '.' | '~' | '+' | '/' | '='))
}

/// Replaces the token after each `prefix` (at a word start, followed by at least `min` token
/// characters). A `keep_prefix` keeps the prefix itself (`Bearer `).
fn redact_tokens(text: &str, prefix: &str, min: usize, keep_prefix: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut prev: Option<char> = None;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back().or(prev);
        let after = &rest[at + prefix.len()..];
        let token_len: usize = after
            .chars()
            .take_while(|&c| token_char(c, keep_prefix))
            .map(char::len_utf8)
            .sum();
        let token_chars = after[..token_len].chars().count();
        let at_word_start = before.is_none_or(|c| !c.is_ascii_alphanumeric());
        out.push_str(&rest[..at]);
        if at_word_start && token_chars >= min && after[..token_len] != *REDACTED {
            if keep_prefix {
                out.push_str(prefix);
            }
            out.push_str(REDACTED);
            rest = &after[token_len..];
        } else {
            out.push_str(prefix);
            rest = after;
        }
        prev = out.chars().next_back();
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for name in [
            "OPENAI_API_KEY",
            "GH_TOKEN",
            "client_secret",
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "SIGNING_KEY",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["HOME", "PATH", "KEYBOARD", "MONKEY_BUSINESS"] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn token_shapes() {
        let r = Redactor::default();
        assert_eq!(
            r.redact("key sk-abcdefghijklmnopqrstuvwx end"),
            "key [REDACTED] end"
        );
        assert_eq!(
            r.redact("t=ghp_0123456789abcdefghijABCDEFGHIJ"),
            "t=[REDACTED]"
        );
        assert_eq!(
            r.redact("github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
            "[REDACTED]"
        );
        assert_eq!(
            r.redact("-H 'Authorization: Bearer eyJhbGciOi.J9x'"),
            "-H 'Authorization: Bearer [REDACTED]'"
        );
        // Prose is left alone.
        assert_eq!(
            r.redact("risk-assessment-for-the-whole-project, task-sk-1"),
            "risk-assessment-for-the-whole-project, task-sk-1"
        );
        assert_eq!(r.redact("Bearer token"), "Bearer token");
        assert_eq!(r.redact("sk-short"), "sk-short");
    }

    #[test]
    fn env_values_longest_first_and_short_ones_ignored() {
        let env = ChildEnv::from_vars([
            ("A_TOKEN", "abcdef"),
            ("B_TOKEN", "abcdef-longer"),
            ("C_TOKEN", "1"),
        ]);
        let r = Redactor::from_env(&env).with_value("extra-secret");
        assert_eq!(
            r.redact("abcdef-longer abcdef 1 extra-secret"),
            "[REDACTED] [REDACTED] 1 [REDACTED]"
        );
    }
}
