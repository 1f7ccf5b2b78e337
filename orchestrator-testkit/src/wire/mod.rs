//! The four wire formats: each reads a request into a [`Conversation`](crate::Conversation)
//! and writes a [`Reply`](crate::Reply) back exactly as the real API would.

pub mod anthropic;
pub mod chat;
pub mod gemini;
pub mod responses;

use serde_json::Value;

/// One SSE event: an optional `event:` line, a `data:` line, a blank line.
pub fn sse_event(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// The text of a message content: a string, or the `text` of every part, newline-joined.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
