//! Anthropic Messages API: `POST /v1/messages` (SSE or JSON) and `/v1/messages/count_tokens`.

use serde_json::{json, Value};

use super::{conversation_basics, items, text_of, EventStream};
use crate::conversation::{estimate_tokens, fresh_id, Conversation, Reply, ToolSpec};

/// Reads a Messages request.
pub fn conversation(body: &Value, body_len: usize) -> Conversation {
    let tools = items(body.get("tools"))
        .iter()
        .filter_map(|tool| {
            // Server tools (web search, …) carry a `type` and no schema.
            let schema = tool.get("input_schema")?;
            Some(ToolSpec {
                name: tool.get("name")?.as_str()?.to_owned(),
                schema: schema.clone(),
                freeform: false,
            })
        })
        .collect();
    let messages = items(body.get("messages"));
    let mut prompt = String::new();
    let mut results = 0;
    for message in messages {
        if message.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        let content = message.get("content").unwrap_or(&Value::Null);
        let tool_results = items(Some(content))
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"))
            .count();
        if tool_results == 0 {
            prompt = text_of(content);
            results = 0;
        } else {
            results += tool_results;
        }
    }
    let system = body.get("system").unwrap_or(&Value::Null);
    // Only a `messages` array is scanned for the working directory.
    let messages = body
        .get("messages")
        .filter(|messages| messages.is_array())
        .unwrap_or(&Value::Null);
    Conversation {
        prompt,
        results_since_prompt: results,
        ..conversation_basics(body, body_len, tools, &[system, messages])
    }
}

fn usage(conversation: &Conversation, output_tokens: u64) -> Value {
    json!({
        "input_tokens": conversation.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    })
}

fn stop_reason(reply: &Reply) -> &'static str {
    match reply {
        Reply::Text(_) => "end_turn",
        Reply::ToolCall(_) => "tool_use",
    }
}

/// The non-streamed message.
pub fn message(conversation: &Conversation, reply: &Reply) -> Value {
    let block = match reply {
        Reply::Text(text) => json!({"type": "text", "text": text}),
        Reply::ToolCall(call) => json!({
            "type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments_value()
        }),
    };
    json!({
        "id": fresh_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": conversation.model,
        "content": [block],
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": usage(conversation, reply.output_tokens()),
    })
}

/// The streamed message as SSE events.
pub fn stream(conversation: &Conversation, reply: &Reply) -> EventStream {
    let mut start = message(conversation, reply);
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"] = usage(conversation, 1);
    let mut out = EventStream::new();
    out.event(
        "message_start",
        &json!({"type": "message_start", "message": start}),
    );
    let (block, delta) = match reply {
        Reply::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
        ),
        Reply::ToolCall(call) => (
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": call.arguments_value().to_string()}),
        ),
    };
    out.event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0, "content_block": block}),
    )
    .event("ping", &json!({"type": "ping"}))
    .event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    )
    .event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    )
    .event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
            "usage": usage(conversation, reply.output_tokens()),
        }),
    )
    .event("message_stop", &json!({"type": "message_stop"}));
    out
}

/// The `count_tokens` answer.
pub fn count_tokens(body_len: usize) -> Value {
    json!({ "input_tokens": estimate_tokens(body_len) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::ToolInput;
    use crate::wire::test_support::{conversation as with_model, tool_call};

    #[test]
    fn counts_tool_results_after_the_last_prompt() {
        let body = json!({
            "model": "claude-x", "stream": true,
            "system": [{"type": "text", "text": "<env>\nWorking directory: /r\n</env>"}],
            "tools": [{"name": "Write", "input_schema": {"type": "object"}}, {"type": "web_search_20250305", "name": "web_search"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"}, {"type": "text", "text": "make notes"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
            ]
        });
        let conversation = conversation(&body, 400);
        assert_eq!(conversation.tool_names(), ["Write"]);
        assert!(conversation.prompt.contains("make notes"));
        assert_eq!(conversation.results_since_prompt, 1);
        assert_eq!(conversation.cwd.as_deref(), Some("/r"));
        assert!(conversation.stream);
        assert_eq!(conversation.input_tokens, 100);
    }

    #[test]
    fn streams_a_tool_use_block() {
        let conversation = with_model("m", 0);
        let reply = tool_call("toolu_1", "Bash", ToolInput::Json(json!({"command": "ls"})));
        let events = stream(&conversation, &reply).to_string();
        let names: Vec<&str> = events
            .lines()
            .filter_map(|line| line.strip_prefix("event: "))
            .collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert!(events.contains(r#""partial_json":"{\"command\":\"ls\"}""#));
        assert!(events.contains(r#""stop_reason":"tool_use""#));
        let plain = message(&conversation, &Reply::Text("hi".into()));
        assert_eq!(plain["content"][0]["text"], "hi");
        assert_eq!(plain["stop_reason"], "end_turn");
    }
}
