//! The wire-format-neutral view of one model request, and the model's reply.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// One tool the request offers.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// The JSON schema of its arguments (`Value::Null` for free-form tools).
    pub schema: Value,
    /// A free-form ("custom") tool taking raw text instead of a JSON object.
    pub freeform: bool,
}

/// What the scripted model needs to know about a request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// The requested model name.
    pub model: String,
    /// Whether the client asked for a streamed (SSE) answer.
    pub stream: bool,
    /// The tools offered.
    pub tools: Vec<ToolSpec>,
    /// The text of the latest user message that is not a tool result.
    pub prompt: String,
    /// Tool results after that message.
    pub results_since_prompt: usize,
    /// The working directory the CLI announces in its system prompt or context, if found.
    pub cwd: Option<String>,
    /// A rough token count of the request, reported as input usage.
    pub input_tokens: u64,
}

impl Conversation {
    /// The offered tool names, in order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|tool| tool.name.as_str()).collect()
    }

    /// The offered tool with this name.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|tool| tool.name == name)
    }
}

/// A tool call's input.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolInput {
    /// A JSON arguments object.
    Json(Value),
    /// Raw text for a free-form tool.
    Freeform(String),
}

/// One tool call the model makes.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// A fresh call id (unique across the server's life and across servers).
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The input.
    pub input: ToolInput,
}

impl ToolCall {
    /// The input as a JSON arguments string (free-form input as a JSON string).
    pub fn arguments_json(&self) -> String {
        match &self.input {
            ToolInput::Json(value) => value.to_string(),
            ToolInput::Freeform(text) => Value::String(text.clone()).to_string(),
        }
    }

    /// The input as a JSON value (free-form input as a string value).
    pub fn arguments_value(&self) -> Value {
        match &self.input {
            ToolInput::Json(value) => value.clone(),
            ToolInput::Freeform(text) => Value::String(text.clone()),
        }
    }
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Plain assistant text; ends the turn.
    Text(String),
    /// One tool call.
    ToolCall(ToolCall),
}

impl Reply {
    /// A rough output token count.
    pub fn output_tokens(&self) -> u64 {
        let len = match self {
            Reply::Text(text) => text.len(),
            Reply::ToolCall(call) => call.arguments_json().len(),
        };
        estimate_tokens(len)
    }
}

/// About four bytes a token, at least one.
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64 / 4).max(1)
}

/// A fresh id with this prefix, e.g. `toolu_…`, unique across servers in one process and
/// across processes (seeded by the clock).
pub fn fresh_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos() as u64)
        .unwrap_or_default();
    format!("{prefix}{nanos:x}{count:04}")
}

/// Seconds since the epoch, for `created` fields.
pub fn unix_time() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}

/// Phrases after which CLIs print their working directory.
const CWD_MARKERS: &[&str] = &[
    "<cwd>",
    "Primary working directory: ",
    "Working directory: ",
    "Current working directory: ",
    "current working directory: ",
    "current working directory is ",
    "I'm currently working in the directory: ",
    "working directory is ",
    "**Workspace Directories:**\n  - ",
];

/// Finds the working directory a CLI announces in any of these texts.
pub fn find_cwd<'a>(texts: impl IntoIterator<Item = &'a str>) -> Option<String> {
    for text in texts {
        for marker in CWD_MARKERS {
            for (at, _) in text.match_indices(marker) {
                let rest = text[at + marker.len()..].trim_start_matches(['`', '"', '\'', ' ']);
                let end = rest.find(['\n', '<', '`', '"', '\'']).unwrap_or(rest.len());
                let path = rest[..end].trim().trim_end_matches(['.', ',', ';', ')']);
                if path.starts_with('/') && !path.contains(' ') {
                    return Some(path.to_owned());
                }
            }
        }
    }
    None
}

/// Collects every string inside a JSON value (for scanning prompts).
pub fn all_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| all_strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| all_strings(item, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cwd_in_the_usual_phrasings() {
        assert_eq!(
            find_cwd(["<env>\nWorking directory: /tmp/repo\nIs a git repo: yes"]),
            Some("/tmp/repo".to_owned())
        );
        assert_eq!(
            find_cwd(["<environment_context>\n  <cwd>/w/x</cwd>"]),
            Some("/w/x".to_owned())
        );
        assert_eq!(
            find_cwd(["I'm currently working in the directory: /a/b."]),
            Some("/a/b".to_owned())
        );
        assert_eq!(find_cwd(["Working directory: relative"]), None);
    }

    #[test]
    fn fresh_ids_differ() {
        assert_ne!(fresh_id("toolu_"), fresh_id("toolu_"));
    }
}
