//! OpenAI Chat Completions: `POST /v1/chat/completions` (SSE chunks ending in `[DONE]`, or JSON).

use serde_json::{json, Value};

use super::{conversation_basics, is_injected_context, items, text_of, EventStream};
use crate::conversation::{fresh_id, unix_time, Conversation, Reply, ToolInput, ToolSpec};

/// Reads a Chat Completions request.
pub fn conversation(body: &Value, body_len: usize) -> Conversation {
    let tools = items(body.get("tools"))
        .iter()
        .filter_map(|tool| {
            // `{"type":"function","function":{…}}` or `{"type":"custom","custom":{…}}`.
            let (definition, freeform) = match tool.get("custom") {
                Some(custom) => (custom, true),
                None => (tool.get("function")?, false),
            };
            Some(ToolSpec {
                name: definition.get("name")?.as_str()?.to_owned(),
                schema: definition.get("parameters").cloned().unwrap_or(Value::Null),
                freeform,
            })
        })
        .collect();
    let messages = body.get("messages").unwrap_or(&Value::Null);
    let mut prompt = String::new();
    let mut results = 0;
    for message in items(Some(messages)) {
        match message.get("role").and_then(Value::as_str) {
            Some("tool" | "function") => results += 1,
            Some("user") => {
                let text = text_of(message.get("content").unwrap_or(&Value::Null));
                if !is_injected_context(&text) {
                    prompt = text;
                    results = 0;
                }
            }
            _ => {}
        }
    }
    Conversation {
        prompt,
        results_since_prompt: results,
        ..conversation_basics(body, body_len, tools, &[messages])
    }
}

fn usage(conversation: &Conversation, reply: &Reply) -> Value {
    let output = reply.output_tokens();
    json!({
        "prompt_tokens": conversation.input_tokens,
        "completion_tokens": output,
        "total_tokens": conversation.input_tokens + output,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    })
}

fn finish_reason(reply: &Reply) -> &'static str {
    match reply {
        Reply::Text(_) => "stop",
        Reply::ToolCall(_) => "tool_calls",
    }
}

fn tool_calls(reply: &Reply) -> Value {
    match reply {
        Reply::Text(_) => Value::Null,
        Reply::ToolCall(call) => match &call.input {
            ToolInput::Freeform(input) => json!([{
                "index": 0,
                "id": call.id,
                "type": "custom",
                "custom": {"name": call.name, "input": input},
            }]),
            ToolInput::Json(_) => json!([{
                "index": 0,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }]),
        },
    }
}

/// The non-streamed completion.
pub fn completion(conversation: &Conversation, reply: &Reply) -> Value {
    let mut message = json!({"role": "assistant", "content": null});
    match reply {
        Reply::Text(text) => message["content"] = json!(text),
        Reply::ToolCall(_) => message["tool_calls"] = tool_calls(reply),
    }
    json!({
        "id": fresh_id("chatcmpl-"),
        "object": "chat.completion",
        "created": unix_time(),
        "model": conversation.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply)}],
        "usage": usage(conversation, reply),
    })
}

/// The streamed completion as SSE chunks.
pub fn stream(conversation: &Conversation, reply: &Reply) -> EventStream {
    let id = fresh_id("chatcmpl-");
    let created = unix_time();
    let mut out = EventStream::new();
    let mut chunk = |choices: Value, usage: Value| {
        let mut chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": created,
            "model": conversation.model, "choices": choices,
        });
        if !usage.is_null() {
            chunk["usage"] = usage;
        }
        out.data(&chunk);
    };
    let delta = match reply {
        Reply::Text(text) => json!({"role": "assistant", "content": text}),
        Reply::ToolCall(_) => {
            json!({"role": "assistant", "content": null, "tool_calls": tool_calls(reply)})
        }
    };
    chunk(
        json!([{"index": 0, "delta": delta, "finish_reason": null}]),
        Value::Null,
    );
    chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish_reason(reply)}]),
        Value::Null,
    );
    chunk(json!([]), usage(conversation, reply));
    out.done();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_support::tool_call;

    #[test]
    fn reads_tool_messages_and_streams_tool_calls() {
        let body = json!({
            "model": "gpt", "stream": true,
            "tools": [
                {"type": "function", "function": {"name": "bash", "parameters": {}}},
                {"type": "custom", "custom": {"name": "apply_patch", "format": {"type": "grammar"}}}
            ],
            "messages": [
                {"role": "system", "content": "Current working directory: /c"},
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": null, "tool_calls": []},
                {"role": "tool", "tool_call_id": "x", "content": "done"}
            ]
        });
        let conversation = conversation(&body, 4);
        assert_eq!(conversation.tool_names(), ["bash", "apply_patch"]);
        assert!(conversation.tools[1].freeform);
        assert_eq!(
            (
                conversation.prompt.as_str(),
                conversation.results_since_prompt
            ),
            ("go", 1)
        );
        assert_eq!(conversation.cwd.as_deref(), Some("/c"));
        let reply = tool_call("call_9", "bash", ToolInput::Json(json!({"command": "ls"})));
        let events = stream(&conversation, &reply).to_string();
        assert!(events.contains(r#""arguments":"{\"command\":\"ls\"}""#));
        assert!(events.contains(r#""id":"call_9""#));
        assert!(events.contains(r#""finish_reason":"tool_calls""#));
        assert!(events.contains(r#""usage":{"completion_tokens""#));
        assert!(events.ends_with("data: [DONE]\n\n"));
        let plain = completion(&conversation, &Reply::Text("hi".into()));
        assert_eq!(plain["choices"][0]["finish_reason"], "stop");
        let custom = tool_call(
            "call_2",
            "apply_patch",
            ToolInput::Freeform("*** Begin Patch".into()),
        );
        let events = stream(&conversation, &custom).to_string();
        assert!(
            events.contains(r#""custom":{"input":"*** Begin Patch","name":"apply_patch"}"#)
                || events.contains(r#""custom":{"name":"apply_patch","input":"*** Begin Patch"}"#)
        );
        assert_eq!(plain["choices"][0]["message"]["content"], "hi");
    }
}
