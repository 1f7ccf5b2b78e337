//! Server-sent events framing (the WHATWG `text/event-stream` format), written in one place for
//! all four wire formats: each encoder only says which events to send.

use std::fmt;

use serde_json::Value;

/// The events of one streamed reply, each already framed: an optional `event:` line, one
/// `data:` line per line of the payload, and the blank line that ends the event.
///
/// ```
/// use orchestrator_testkit::wire::EventStream;
/// let mut events = EventStream::new();
/// events.event("ping", &serde_json::json!({"type": "ping"})).done();
/// assert_eq!(events.to_string(), "event: ping\ndata: {\"type\":\"ping\"}\n\ndata: [DONE]\n\n");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventStream {
    /// The framed events in order.
    frames: Vec<String>,
}

impl EventStream {
    /// No events yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A named event (`event: <name>`) carrying `data` as JSON.
    pub fn event(&mut self, name: &str, data: &Value) -> &mut Self {
        self.push(Some(name), &data.to_string())
    }

    /// An unnamed event carrying `data` as JSON (the OpenAI Chat Completions and Gemini style).
    pub fn data(&mut self, data: &Value) -> &mut Self {
        self.push(None, &data.to_string())
    }

    /// The `data: [DONE]` sentinel that ends an OpenAI Chat Completions stream.
    pub fn done(&mut self) -> &mut Self {
        self.push(None, "[DONE]")
    }

    /// The framed events, one string each.
    pub fn frames(&self) -> &[String] {
        &self.frames
    }

    fn push(&mut self, name: Option<&str>, payload: &str) -> &mut Self {
        let mut frame = String::with_capacity(payload.len() + 16);
        if let Some(name) = name {
            frame.push_str("event: ");
            frame.push_str(name);
            frame.push('\n');
        }
        // A payload line break would end the `data:` field early; each line gets its own
        // `data:` line and the client joins them back with `\n`. JSON from serde_json has none.
        for line in payload.split('\n') {
            frame.push_str("data: ");
            frame.push_str(line);
            frame.push('\n');
        }
        frame.push('\n');
        self.frames.push(frame);
        self
    }
}

/// The whole body: the frames one after another.
impl fmt::Display for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.frames.iter().try_for_each(|frame| f.write_str(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_named_unnamed_and_multi_line_events() {
        let mut events = EventStream::new();
        events
            .event("message_stop", &json!({"type": "message_stop"}))
            .data(&json!({"a": "x\ny"}));
        events.push(None, "one\ntwo");
        assert_eq!(
            events.frames(),
            [
                "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
                "data: {\"a\":\"x\\ny\"}\n\n",
                "data: one\ndata: two\n\n",
            ]
        );
        assert!(events.to_string().ends_with("data: two\n\n"));
    }
}
