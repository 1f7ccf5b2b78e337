//! The four wire formats: each reads a request into a [`Conversation`]
//! and writes a [`Reply`](crate::Reply) back exactly as the real API would.

pub mod anthropic;
pub mod chat;
pub mod gemini;
pub mod responses;
mod sse;

pub use sse::EventStream;

use serde_json::Value;

use crate::conversation::{all_strings, estimate_tokens, find_cwd, Conversation, ToolSpec};

/// The text of a message content: a string, or the `text` of every part, newline-joined.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => text_of_parts(parts),
        _ => String::new(),
    }
}

/// The `text` of every part, newline-joined.
pub fn text_of_parts(parts: &[Value]) -> String {
    parts
        .iter()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The items of a JSON array field; empty when the field is missing or not an array.
pub fn items(value: Option<&Value>) -> &[Value] {
    value
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Whether a user message is injected context (`<environment_context>…`) rather than a prompt.
pub fn is_injected_context(text: &str) -> bool {
    let text = text.trim();
    text.starts_with('<') && text.ends_with('>') || text.starts_with("# AGENTS.md")
}

/// The parts of a [`Conversation`] every wire format reads alike: `model` and `stream` from the
/// body (Gemini, which has them in the URL, overrides them), the offered tools, the working
/// directory announced anywhere in `scanned`, and the input tokens. The caller adds the prompt.
pub fn conversation_basics(
    body: &Value,
    body_len: usize,
    tools: Vec<ToolSpec>,
    scanned: &[&Value],
) -> Conversation {
    let mut texts = Vec::new();
    for value in scanned {
        all_strings(value, &mut texts);
    }
    Conversation {
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        tools,
        cwd: find_cwd(texts.iter().map(String::as_str)),
        input_tokens: estimate_tokens(body_len),
        ..Conversation::default()
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use crate::conversation::{Conversation, Reply, ToolCall, ToolInput};

    /// A conversation with just a model name and an input token count.
    pub fn conversation(model: &str, input_tokens: u64) -> Conversation {
        Conversation {
            model: model.into(),
            input_tokens,
            ..Conversation::default()
        }
    }

    /// A tool-call reply.
    pub fn tool_call(id: &str, name: &str, input: ToolInput) -> Reply {
        Reply::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            input,
        })
    }
}
