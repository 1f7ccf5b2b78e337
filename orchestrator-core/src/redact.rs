//! Keeping secrets out of what gets written down: phase logs, events, failure messages and the
//! documents hosts show.
//!
//! Two sources of secrets: the *values* of environment variables whose names look secret
//! ([`SecretNames`]: built-in rules plus a configurable list), and well-known token shapes
//! wherever they appear (`sk-…`, `ghp_…`, `Bearer …`, …). The engine gives every phase's
//! [`LogSink`](crate::runner::LogSink) a [`Redactor`] holding the secrets of the host's
//! environment and of the plan, job and spec `env`, so every runner and every host gets it.

use std::borrow::Cow;

use serde_json::Value;

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Environment variable holding more secret variable names, comma-separated; `*` matches any
/// run of characters (`ORCHESTRATOR_SECRET_ENV=DEPLOY_HOOK,MY_*_URL`). Read by
/// [`SecretNames::from_env`].
pub const SECRET_ENV_VAR: &str = "ORCHESTRATOR_SECRET_ENV";

/// Shortest value redacted from text: shorter values (`1`, `true`) would blank out ordinary
/// text everywhere.
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

/// Whether an environment variable of this name holds a secret, by the built-in rules: the
/// name contains `API_KEY`, `APIKEY`, `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD` or `CREDENTIAL`,
/// or ends in `_KEY` (any case).
///
/// ```
/// use orchestrator_core::redact::looks_secret;
/// assert!(looks_secret("OPENAI_API_KEY") && looks_secret("gh_token") && looks_secret("DB_PASSWORD"));
/// assert!(!looks_secret("PATH") && !looks_secret("KEYBOARD"));
/// ```
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

/// Which environment variables hold secrets: the built-in rules of [`looks_secret`] plus
/// configured names, each exact or with `*` wildcards, compared without regard to case.
///
/// ```
/// use orchestrator_core::redact::SecretNames;
/// let names = SecretNames::parse("DEPLOY_HOOK, MY_*_URL");
/// assert!(names.is_secret("deploy_hook") && names.is_secret("MY_DB_URL"));
/// assert!(names.is_secret("GH_TOKEN"), "the built-in rules still apply");
/// assert!(!names.is_secret("HOME"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretNames {
    /// Upper-cased patterns.
    patterns: Vec<String>,
}

impl SecretNames {
    /// The built-in rules only.
    pub fn new() -> Self {
        SecretNames::default()
    }

    /// Also treats variables matching `pattern` (exact, or with `*` wildcards) as secret. Blank
    /// patterns are ignored.
    pub fn with(mut self, pattern: impl AsRef<str>) -> Self {
        let pattern = pattern.as_ref().trim().to_ascii_uppercase();
        if !pattern.is_empty() && !self.patterns.contains(&pattern) {
            self.patterns.push(pattern);
        }
        self
    }

    /// The built-in rules plus the comma-separated patterns of `list`.
    pub fn parse(list: &str) -> Self {
        list.split(',').fold(SecretNames::new(), SecretNames::with)
    }

    /// The built-in rules plus the patterns in [`SECRET_ENV_VAR`] (`ORCHESTRATOR_SECRET_ENV`),
    /// if set.
    pub fn from_env() -> Self {
        std::env::var(SECRET_ENV_VAR)
            .map(|list| SecretNames::parse(&list))
            .unwrap_or_default()
    }

    /// The configured patterns (upper-cased), beyond the built-in rules.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether a variable of this name holds a secret.
    pub fn is_secret(&self, name: &str) -> bool {
        if looks_secret(name) {
            return true;
        }
        let upper = name.to_ascii_uppercase();
        self.patterns.iter().any(|p| wildcard_match(p, &upper))
    }

    /// Whether the variable `name=value` holds a secret: by its name, or because the value is
    /// a well-known token shape (an `sk-…` key stored under an innocent name).
    pub fn is_secret_var(&self, name: &str, value: &str) -> bool {
        self.is_secret(name) || matches!(Redactor::new().redact(value), Cow::Owned(_))
    }
}

/// `*` matches any run of characters, everything else itself.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the pattern is the whole name.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Replaces secrets in text by [`REDACTED`]: given secret values (6 characters or longer) and
/// the well-known token shapes (`sk-…`, `ghp_…` and the other GitHub prefixes, `github_pat_…`,
/// Google `AIza…` keys, Slack `xoxb-`/`xoxp-` tokens, `Bearer …` credentials).
///
/// ```
/// use orchestrator_core::redact::{Redactor, SecretNames};
/// let r = Redactor::new().with_vars([("MY_API_KEY", "hunter2-secret"), ("HOME", "/home/me")], &SecretNames::new());
/// assert_eq!(r.redact("key=hunter2-secret home=/home/me"), "key=[REDACTED] home=/home/me");
/// assert_eq!(r.redact("Authorization: Bearer abc.def-123456"), "Authorization: Bearer [REDACTED]");
/// assert!(matches!(r.redact("nothing here"), std::borrow::Cow::Borrowed(_)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Secret values, longest first (so a secret containing another is replaced whole).
    values: Vec<String>,
}

impl Redactor {
    /// A redactor for the token shapes only.
    pub fn new() -> Self {
        Redactor::default()
    }

    /// Also redacts `value` (ignored when shorter than 6 characters).
    pub fn with_value(self, value: impl Into<String>) -> Self {
        self.with_values([value.into()])
    }

    /// Also redacts the values of the variables in `vars` that [`SecretNames::is_secret`] says
    /// hold secrets.
    pub fn with_vars<I, K, V>(self, vars: I, names: &SecretNames) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let secret: Vec<String> = vars
            .into_iter()
            .filter(|(name, _)| names.is_secret(name.as_ref()))
            .map(|(_, value)| value.as_ref().to_owned())
            .collect();
        self.with_values(secret)
    }

    fn with_values(mut self, values: impl IntoIterator<Item = String>) -> Self {
        let before = self.values.len();
        for value in values {
            if value.chars().count() >= MIN_SECRET_CHARS && !self.values.contains(&value) {
                self.values.push(value);
            }
        }
        if self.values.len() != before {
            self.values
                .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        }
        self
    }

    /// The secret values this redactor replaces (besides the token shapes).
    pub fn value_count(&self) -> usize {
        self.values.len()
    }

    /// `text` with every secret replaced by [`REDACTED`]; borrowed when there was none.
    ///
    /// Runs for every output line: a secret or token prefix the line does not contain costs a
    /// search, not a copy.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = Cow::Owned(out.replace(value.as_str(), REDACTED));
            }
        }
        let shapes = TOKEN_PREFIXES
            .iter()
            .map(|&(prefix, min)| (prefix, min, false))
            .chain(["Bearer ", "bearer "].map(|bearer| (bearer, 8, true)));
        for (prefix, min, keep_prefix) in shapes {
            if out.contains(prefix) {
                if let Some(replaced) = redact_tokens(&out, prefix, min, keep_prefix) {
                    out = Cow::Owned(replaced);
                }
            }
        }
        out
    }
}

fn token_char(c: char, bearer: bool) -> bool {
    c.is_ascii_alphanumeric()
        || c == '_'
        || c == '-'
        || (bearer && matches!(c, '.' | '~' | '+' | '/' | '='))
}

/// Replaces the token after each `prefix` (at a word start, followed by at least `min` token
/// characters). A `keep_prefix` keeps the prefix itself (`Bearer `). `None` when nothing was
/// replaced.
fn redact_tokens(text: &str, prefix: &str, min: usize, keep_prefix: bool) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut prev: Option<char> = None;
    let mut replaced = false;
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
            replaced = true;
        } else {
            out.push_str(prefix);
            rest = after;
        }
        prev = out.chars().next_back();
    }
    out.push_str(rest);
    replaced.then_some(out)
}

/// Replaces, in a JSON document about to be shown (a status report, an MCP answer), the values
/// of every `env` object's secret variables by [`REDACTED`], at any depth.
///
/// ```
/// use orchestrator_core::redact::{redact_env_json, SecretNames};
/// let mut doc = serde_json::json!({"work": {"type": "shell", "env": {"API_KEY": "sk-1", "MODE": "fast"}}});
/// redact_env_json(&mut doc, &SecretNames::new());
/// assert_eq!(doc["work"]["env"], serde_json::json!({"API_KEY": "[REDACTED]", "MODE": "fast"}));
/// ```
pub fn redact_env_json(doc: &mut Value, names: &SecretNames) {
    match doc {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if key == "env" {
                    if let Value::Object(env) = value {
                        for (name, v) in env.iter_mut() {
                            if let Value::String(s) = v {
                                if names.is_secret_var(name, s) {
                                    *v = Value::String(REDACTED.to_owned());
                                }
                            }
                        }
                        continue;
                    }
                }
                redact_env_json(value, names);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact_env_json(v, names)),
        _ => {}
    }
}

/// The redactor of one job's phases: `base` (the host's secrets) plus the secret values of the
/// plan's `env`, the job's `env`, and the `env` of every spec the job or the plan may run for
/// it (work, checks, `worktreeInit`, `verifyRi`); `None` when those hold no secret, so that the
/// caller goes on with `base` itself.
pub(crate) fn job_redactor(
    base: &Redactor,
    spec: &crate::plan::PlanSpec,
    job: Option<&crate::plan::JobSpec>,
    names: &SecretNames,
) -> Option<Redactor> {
    // Most jobs have no secret of their own: they share `base`, and this runs once a phase, so
    // it is plain loops that allocate nothing (nor clone `base`) unless there is one.
    let mut secrets = Vec::new();
    let mut add = |env: &crate::plan::Env| {
        for (name, value) in env {
            if names.is_secret_var(name, value) {
                secrets.push(value.clone());
            }
        }
    };
    add(&spec.env);
    spec.worktree_init.iter().for_each(|w| add(w.env()));
    spec.verify_ri.iter().for_each(|w| add(w.env()));
    if let Some(job) = job {
        add(&job.extra.env);
        add(job.work.env());
        job.extra.prechecks.iter().for_each(|w| add(w.env()));
        job.extra.postchecks.iter().for_each(|w| add(w.env()));
    }
    (!secrets.is_empty()).then(|| base.clone().with_values(secrets))
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
    fn configured_names_and_wildcards() {
        let names = SecretNames::parse(" deploy_hook ,, MY_*_URL,*_DSN,X*Y*Z");
        assert_eq!(
            names.patterns(),
            ["DEPLOY_HOOK", "MY_*_URL", "*_DSN", "X*Y*Z"]
        );
        for name in [
            "DEPLOY_HOOK",
            "my_db_url",
            "MY__URL",
            "SENTRY_DSN",
            "XYZ",
            "XaYbZ",
        ] {
            assert!(names.is_secret(name), "{name}");
        }
        for name in ["DEPLOY_HOOKS", "MY_URL", "MY_DB_URLS", "DSN", "XZY", "HOME"] {
            assert!(!names.is_secret(name), "{name}");
        }
        assert!(names.is_secret_var("INNOCENT", "sk-abcdefghijklmnopqrstuvwx"));
        assert!(!names.is_secret_var("INNOCENT", "plain"));
    }

    #[test]
    fn token_shapes() {
        let r = Redactor::new();
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
        // Prose is left alone, and not copied.
        for prose in [
            "risk-assessment-for-the-whole-project, task-sk-1",
            "Bearer token",
            "sk-short",
        ] {
            assert!(
                matches!(r.redact(prose), Cow::Borrowed(p) if p == prose),
                "{prose}"
            );
        }
    }

    #[test]
    fn values_longest_first_and_short_ones_ignored() {
        let names = SecretNames::new();
        let r = Redactor::new()
            .with_vars(
                [
                    ("A_TOKEN", "abcdef"),
                    ("B_TOKEN", "abcdef-longer"),
                    ("C_TOKEN", "1"),
                ],
                &names,
            )
            .with_value("extra-secret");
        assert_eq!(r.value_count(), 3);
        assert_eq!(
            r.redact("abcdef-longer abcdef 1 extra-secret"),
            "[REDACTED] [REDACTED] 1 [REDACTED]"
        );
    }

    #[test]
    fn env_objects_in_documents() {
        let mut doc = serde_json::json!({
            "env": {"GH_TOKEN": "t0ken-value", "HOME": "/h"},
            "jobs": [{"env": {"PLAIN": "sk-abcdefghijklmnopqrstuvwx"}, "note": {"GH_TOKEN": "kept"}}],
        });
        redact_env_json(&mut doc, &SecretNames::new());
        assert_eq!(doc["env"]["GH_TOKEN"], REDACTED);
        assert_eq!(doc["env"]["HOME"], "/h");
        assert_eq!(doc["jobs"][0]["env"]["PLAIN"], REDACTED);
        assert_eq!(
            doc["jobs"][0]["note"]["GH_TOKEN"], "kept",
            "only env objects"
        );
    }

    #[test]
    fn a_job_redactor_holds_every_env_of_the_job() {
        use crate::plan::{JobSpec, PlanSpec, WorkSpec};
        let mut spec = PlanSpec::new("p");
        spec.env.insert("PLAN_TOKEN".into(), "plan-secret".into());
        spec.env.insert("MODE".into(), "not-a-secret".into());
        let mut job =
            JobSpec::new("job", "t", WorkSpec::shell("true")).env("JOB_KEY", "job-secret");
        if let WorkSpec::Shell(s) = &mut job.work {
            s.extra
                .make_mut()
                .env
                .insert("DEPLOY_HOOK".into(), "hook-secret".into());
        }
        let names = SecretNames::new().with("DEPLOY_HOOK");
        let r = job_redactor(&Redactor::new(), &spec, Some(&job), &names).expect("job secrets");
        assert!(job_redactor(&Redactor::new(), &PlanSpec::new("p"), None, &names).is_none());
        assert_eq!(
            r.redact("plan-secret job-secret hook-secret not-a-secret"),
            "[REDACTED] [REDACTED] [REDACTED] not-a-secret"
        );
    }
}
