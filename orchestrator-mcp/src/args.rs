//! Tool arguments: their JSON Schemas (what a model reads) and their parsing into errors that
//! name the field, the offending value and what is allowed.

use std::marker::PhantomData;

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

/// Raw tool arguments whose schema is `T`'s. Deserializing never fails, so that the tool parses
/// them itself ([`Args::parse`]) and answers a mistake with a precise, model-readable error.
#[derive(Debug)]
pub struct Args<T> {
    raw: JsonObject,
    _schema: PhantomData<fn() -> T>,
}

impl<'de, T> Deserialize<'de> for Args<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Option::<JsonObject>::deserialize(d)?.unwrap_or_default();
        Ok(Args {
            raw,
            _schema: PhantomData,
        })
    }
}

impl<T: JsonSchema> JsonSchema for Args<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<T: DeserializeOwned> Args<T> {
    /// The arguments as `T`, or an error naming the field, the value and what is allowed.
    pub fn parse(&self) -> Result<T, ArgError> {
        parse_value("", Value::Object(self.raw.clone()), None)
    }

    /// The raw arguments.
    pub fn raw(&self) -> &JsonObject {
        &self.raw
    }
}

/// An invalid argument.
#[derive(Debug, Clone)]
pub struct ArgError {
    /// The field (a path such as `jobs[2].work` for nested ones).
    pub field: String,
    /// The value given, when there was one.
    pub value: Option<Value>,
    /// What the field accepts.
    pub allowed: String,
    /// What is wrong.
    pub message: String,
}

impl ArgError {
    /// An error about `field`, which was given `value`.
    pub fn new(
        field: impl Into<String>,
        value: Option<Value>,
        message: impl Into<String>,
        allowed: impl Into<String>,
    ) -> Self {
        // A long value is repeated shortened, never whole: an oversized argument must not
        // come back (several times: text, message, value) in the answer.
        ArgError {
            field: field.into(),
            value: value.map(shortened),
            allowed: allowed.into(),
            message: shorten_quoted(&message.into()),
        }
    }

    /// The structured form.
    pub fn to_json(&self) -> Value {
        json!({
            "error": "invalid_argument",
            "field": self.field,
            "value": self.value,
            "allowed": self.allowed,
            "message": self.text(),
        })
    }

    /// One readable line.
    pub fn text(&self) -> String {
        let value = match &self.value {
            Some(v) => format!(" (got {v})"),
            None => String::new(),
        };
        format!(
            "invalid argument `{}`{value}: {}; allowed: {}",
            self.field, self.message, self.allowed
        )
    }
}

/// The longest value, as JSON text, an error repeats whole.
const MAX_ECHO_BYTES: usize = 200;

/// How much of a longer value (or quoted text) an error shows.
const ECHO_PREFIX_CHARS: usize = 80;

/// `value`, or for one whose JSON text is longer than [`MAX_ECHO_BYTES`] a string of its start
/// and its size.
fn shortened(value: Value) -> Value {
    let text = value.to_string();
    if text.len() <= MAX_ECHO_BYTES {
        return value;
    }
    let start: String = text.chars().take(ECHO_PREFIX_CHARS).collect();
    Value::String(format!("{start}… ({} bytes in all)", text.len()))
}

/// `message` with every double-quoted text longer than [`MAX_ECHO_BYTES`] cut short (serde and
/// validation messages quote the offending value).
fn shorten_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4 * MAX_ECHO_BYTES));
    let mut rest = message;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        // The closing quote: the first one not escaped by a backslash.
        let mut escaped = false;
        let close = after.char_indices().find_map(|(i, c)| {
            let end = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            end.then_some(i)
        });
        let Some(close) = close else {
            rest = after;
            break;
        };
        let quoted = &after[..close];
        if quoted.len() > MAX_ECHO_BYTES {
            out.extend(quoted.chars().take(ECHO_PREFIX_CHARS));
            out.push_str(&format!("… ({} bytes in all)", quoted.len()));
        } else {
            out.push_str(quoted);
        }
        out.push('"');
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Parses `value` as `T`; a mistake is an error naming its field (under `base`, a path such
/// as `updates[2]`), the value found there and what is allowed (`allowed`, else what serde
/// expected).
pub fn parse_value<T: DeserializeOwned>(
    base: &str,
    value: Value,
    allowed: Option<&str>,
) -> Result<T, ArgError> {
    serde_path_to_error::deserialize::<_, T>(value.clone()).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        let inner = field_of(&path, &message);
        let whole = inner == WHOLE;
        let field = match (base.is_empty(), whole) {
            (true, _) => inner.clone(),
            (false, true) => base.to_owned(),
            (false, false) => format!("{base}.{inner}"),
        };
        let found = match &value {
            Value::Object(map) if !whole => lookup(map, &inner),
            _ => Some(value.clone()),
        };
        let allowed = allowed.map_or_else(|| allowed_of(&message), str::to_owned);
        ArgError::new(field, found, message, allowed)
    })
}

/// The field name of a mistake in the arguments as a whole.
const WHOLE: &str = "(arguments)";

/// The field an error is about: the path, or the field a missing/unknown-field message names.
fn field_of(path: &str, message: &str) -> String {
    let named = message
        .split('`')
        .nth(1)
        .filter(|_| message.starts_with("missing field") || message.starts_with("unknown field"));
    let base = if path.is_empty() || path == "." {
        String::new()
    } else {
        path.to_owned()
    };
    match named {
        Some(name) if message.starts_with("missing field") => {
            if base.is_empty() {
                name.to_owned()
            } else {
                format!("{base}.{name}")
            }
        }
        Some(name) => {
            // serde_path_to_error's path of an unknown field already ends with its name.
            if base.is_empty() {
                name.to_owned()
            } else if base.ends_with(name) {
                base
            } else {
                format!("{base}.{name}")
            }
        }
        None if base.is_empty() => WHOLE.to_owned(),
        None => base,
    }
}

/// What serde said is expected, as the allowed values.
fn allowed_of(message: &str) -> String {
    if let Some(rest) = message.split("expected one of ").nth(1) {
        return format!("one of {rest}");
    }
    if let Some(rest) = message.split(", expected ").nth(1) {
        return rest.to_owned();
    }
    if message.starts_with("unknown field") {
        return "only the fields of the tool's input schema".to_owned();
    }
    if message.starts_with("missing field") {
        return "the field is required".to_owned();
    }
    "see the tool's input schema".to_owned()
}

/// The value at a path like `jobs[2].work` or `planId` in the arguments.
pub fn value_at(root: &JsonObject, path: &str) -> Option<Value> {
    lookup(root, path)
}

fn lookup(root: &JsonObject, path: &str) -> Option<Value> {
    let mut current: Option<&Value> = None;
    let mut first = true;
    for part in path.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            current = if first {
                root.get(key)
            } else {
                current?.get(key)
            };
        }
        first = false;
        for index in indexes
            .split(['[', ']'])
            .filter(|s| !s.is_empty())
            .filter_map(|s| s.parse::<usize>().ok())
        {
            current = current?.get(index);
        }
    }
    current.cloned()
}

/// A plan by id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanArgs {
    /// The plan's id as returned by `create_copilot_plan` or `list_copilot_plans` (a unique
    /// prefix of it works too).
    #[serde(alias = "plan_id", alias = "id")]
    pub plan_id: String,
}

/// A plan to pause.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PauseArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id", alias = "id")]
    pub plan_id: String,
    /// Also stop the jobs running now (they resume from the phase they were in); default false:
    /// running jobs finish and nothing new starts.
    #[serde(default, alias = "stop_running")]
    pub stop_running: bool,
}

/// Listing plans.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListPlansArgs {
    /// Only plans with this status: scaffolding, pending, running, pausing, paused, succeeded,
    /// failed, canceled or archived.
    #[serde(default)]
    pub status: Option<String>,
}

/// One job of a plan: give `jobId` or `producerId`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// The job's node id (from `jobMapping` or `list_copilot_jobs`), or its producerId or
    /// unique name.
    #[serde(default, alias = "job_id", alias = "nodeId", alias = "node_id")]
    pub job_id: Option<String>,
    /// The job's producerId (as written in the plan). Use this or `jobId`.
    #[serde(default, alias = "producer_id")]
    pub producer_id: Option<String>,
}

/// A job waiting for a person, and what the person says: `reason` (reject) or `answer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// The job's node id, or its producerId or unique name.
    #[serde(default, alias = "job_id", alias = "nodeId", alias = "node_id")]
    pub job_id: Option<String>,
    /// The job's producerId (as written in the plan). Use this or `jobId`.
    #[serde(default, alias = "producer_id")]
    pub producer_id: Option<String>,
    /// Why the job is rejected (`reject_copilot_job`; recorded as its error).
    #[serde(default)]
    pub reason: Option<String>,
    /// The answer to the job's question (`answer_copilot_job`).
    #[serde(default)]
    pub answer: Option<String>,
}

/// A job's logs.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogsArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// The job's node id, producerId or unique name. Use this or `producerId`.
    #[serde(default, alias = "job_id", alias = "nodeId", alias = "node_id")]
    pub job_id: Option<String>,
    /// The job's producerId. Use this or `jobId`.
    #[serde(default, alias = "producer_id")]
    pub producer_id: Option<String>,
    /// Only this phase: merge-fi, setup, prechecks, work, commit, postchecks or merge-ri.
    /// Default: every phase, each under a `== phase ==` header.
    #[serde(default)]
    pub phase: Option<String>,
    /// Only this attempt (1 = the first). Default: every attempt.
    #[serde(default)]
    pub attempt: Option<u32>,
    /// Only the last N lines of each phase's log.
    #[serde(default)]
    pub tail: Option<usize>,
}

/// Listing a plan's jobs.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListJobsArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// Only jobs with this status: pending, ready, scheduled, running, succeeded, failed,
    /// blocked, canceled or completed_split.
    #[serde(default)]
    pub status: Option<String>,
    /// Only jobs in this group or below it (e.g. `backend` matches `backend/api`).
    #[serde(default)]
    pub group: Option<String>,
}

/// Retrying failed jobs of a plan.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryPlanArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// Node ids (or producerIds) of the failed jobs to retry. Omit both `jobIds` and
    /// `producerIds` to retry every failed job.
    #[serde(default, alias = "job_ids")]
    pub job_ids: Vec<String>,
    /// producerIds of the failed jobs to retry.
    #[serde(default, alias = "producer_ids")]
    pub producer_ids: Vec<String>,
    /// Replacement work for the retried jobs: a shell command string, `"@agent <instructions>"`,
    /// or a work-spec object (`{"type":"shell","command":...}`, `{"type":"process",...}`,
    /// `{"type":"agent","instructions":...}`). The job then resumes from its work phase.
    #[serde(default, alias = "new_work")]
    #[schemars(with = "Option<Value>")]
    pub new_work: Option<Value>,
    /// Replacement prechecks (same forms as `newWork`).
    #[serde(default, alias = "new_prechecks")]
    #[schemars(with = "Option<Value>")]
    pub new_prechecks: Option<Value>,
    /// Replacement postchecks (same forms as `newWork`).
    #[serde(default, alias = "new_postchecks")]
    #[schemars(with = "Option<Value>")]
    pub new_postchecks: Option<Value>,
    /// Throw the worktree away and start over from merge-fi (default false: resume from the
    /// failed phase in the same worktree).
    #[serde(default, alias = "clear_worktree")]
    pub clear_worktree: bool,
}

/// Retrying one failed job.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryJobArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// The failed job's node id, producerId or unique name. Use this or `producerId`.
    #[serde(default, alias = "job_id", alias = "nodeId", alias = "node_id")]
    pub job_id: Option<String>,
    /// The failed job's producerId. Use this or `jobId`.
    #[serde(default, alias = "producer_id")]
    pub producer_id: Option<String>,
    /// Replacement work: a shell command string, `"@agent <instructions>"` or a work-spec
    /// object. The job then resumes from its work phase.
    #[serde(default, alias = "new_work")]
    #[schemars(with = "Option<Value>")]
    pub new_work: Option<Value>,
    /// Replacement prechecks (same forms as `newWork`).
    #[serde(default, alias = "new_prechecks")]
    #[schemars(with = "Option<Value>")]
    pub new_prechecks: Option<Value>,
    /// Replacement postchecks (same forms as `newWork`).
    #[serde(default, alias = "new_postchecks")]
    #[schemars(with = "Option<Value>")]
    pub new_postchecks: Option<Value>,
    /// Start over from a fresh worktree (default false).
    #[serde(default, alias = "clear_worktree")]
    pub clear_worktree: bool,
}

/// A plan's graph.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GraphArgs {
    /// The plan's id (or a unique prefix).
    #[serde(alias = "plan_id")]
    pub plan_id: String,
    /// `mermaid` (default) or `dot`.
    #[serde(default)]
    pub format: Option<String>,
}

/// The input schema of `create_copilot_plan`: the plan object of the plan format.
#[derive(Debug)]
pub struct PlanInput;

impl JsonSchema for PlanInput {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CopilotPlan".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::plan_schema()
    }
}

impl<'de> Deserialize<'de> for PlanInput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(PlanInput)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args<T>(v: Value) -> Args<T> {
        match v {
            Value::Object(raw) => Args {
                raw,
                _schema: PhantomData,
            },
            _ => Args {
                raw: JsonObject::new(),
                _schema: PhantomData,
            },
        }
    }

    #[test]
    fn names_missing_and_unknown_fields() {
        let e = args::<PlanArgs>(json!({})).parse().expect_err("invalid");
        assert_eq!(e.field, "planId");
        let e = args::<PlanArgs>(json!({"planId": "x", "bogus": 1}))
            .parse()
            .expect_err("invalid");
        assert_eq!(e.field, "bogus");
        assert_eq!(e.value, Some(json!(1)));
        assert!(e.allowed.contains("planId"), "{}", e.allowed);
    }

    #[test]
    fn names_wrong_types_with_the_value() {
        let e = args::<PauseArgs>(json!({"planId": "x", "stopRunning": "yes"}))
            .parse()
            .expect_err("invalid");
        assert_eq!(e.field, "stopRunning");
        assert_eq!(e.value, Some(json!("yes")));
        assert!(e.allowed.contains("bool"), "{}", e.allowed);
    }

    #[test]
    fn a_long_value_is_repeated_shortened_once() {
        let long = "x".repeat(5000);
        let e = args::<PauseArgs>(json!({"planId": "p", "stopRunning": long}))
            .parse()
            .expect_err("invalid");
        let answer = format!("{}{}", e.text(), e.to_json());
        assert!(answer.len() < 2000, "{} bytes: {answer}", answer.len());
        assert!(answer.contains("5002 bytes in all"), "{answer}");
        // A short one is kept exactly.
        assert_eq!(shortened(json!("yes")), json!("yes"));
        assert_eq!(
            shorten_quoted(r#"got "a\"b" and "c""#),
            r#"got "a\"b" and "c""#
        );
    }

    #[test]
    fn accepts_snake_case() {
        let a = args::<RetryPlanArgs>(json!({"plan_id": "x", "producer_ids": ["abc"]}))
            .parse()
            .expect("valid");
        assert_eq!(a.producer_ids, vec!["abc".to_owned()]);
    }

    #[test]
    fn looks_up_nested_values() {
        let raw = json!({"jobs": [{"a": 1}, {"work": "x"}]});
        let Value::Object(raw) = raw else { return };
        assert_eq!(lookup(&raw, "jobs[1].work"), Some(json!("x")));
        assert_eq!(lookup(&raw, "jobs[3].work"), None);
    }
}
