//! OpenAI Responses API: `POST /v1/responses` (SSE or JSON), with `function_call` items for
//! function tools and `custom_tool_call` items for free-form tools (Codex `apply_patch`).

use serde_json::{json, Value};

use super::{conversation_basics, is_injected_context, items, text_of, EventStream};
use crate::conversation::{fresh_id, unix_time, Conversation, Reply, ToolInput, ToolSpec};

/// Reads a Responses request.
pub fn conversation(body: &Value, body_len: usize) -> Conversation {
    let tools = items(body.get("tools"))
        .iter()
        .filter_map(|tool| {
            let name = tool.get("name")?.as_str()?.to_owned();
            let freeform = tool.get("type").and_then(Value::as_str) == Some("custom");
            Some(ToolSpec {
                name,
                schema: tool.get("parameters").cloned().unwrap_or(Value::Null),
                freeform,
            })
        })
        .collect();
    let input = body.get("input").unwrap_or(&Value::Null);
    let mut prompt = String::new();
    let mut results = 0;
    match input {
        Value::String(text) => prompt = text.clone(),
        Value::Array(items) => {
            for item in items {
                let kind = item
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("message");
                if kind.ends_with("_output") {
                    results += 1;
                } else if kind == "message"
                    && item.get("role").and_then(Value::as_str) == Some("user")
                {
                    let text = text_of(item.get("content").unwrap_or(&Value::Null));
                    if !is_injected_context(&text) {
                        prompt = text;
                        results = 0;
                    }
                }
            }
        }
        _ => {}
    }
    let instructions = body.get("instructions").unwrap_or(&Value::Null);
    Conversation {
        prompt,
        results_since_prompt: results,
        ..conversation_basics(body, body_len, tools, &[instructions, input])
    }
}

/// The output item for a reply, in its final (`completed`) state.
fn output_item(reply: &Reply) -> Value {
    match reply {
        Reply::Text(text) => json!({
            "id": fresh_id("msg_"),
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        }),
        Reply::ToolCall(call) => match &call.input {
            ToolInput::Freeform(input) => json!({
                "id": fresh_id("ctc_"),
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": call.id,
                "name": call.name,
                "input": input,
            }),
            ToolInput::Json(arguments) => json!({
                "id": fresh_id("fc_"),
                "type": "function_call",
                "status": "completed",
                "call_id": call.id,
                "name": call.name,
                "arguments": arguments.to_string(),
            }),
        },
    }
}

fn response_object(
    conversation: &Conversation,
    reply: &Reply,
    id: &str,
    item: Option<&Value>,
) -> Value {
    let output_tokens = reply.output_tokens();
    json!({
        "id": id,
        "object": "response",
        "created_at": unix_time(),
        "status": if item.is_some() { "completed" } else { "in_progress" },
        "model": conversation.model,
        "output": item.map(|item| vec![item.clone()]).unwrap_or_default(),
        "parallel_tool_calls": false,
        "tool_choice": "auto",
        "tools": [],
        "usage": item.map(|_| json!({
            "input_tokens": conversation.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": conversation.input_tokens + output_tokens,
        })),
    })
}

/// The non-streamed response object.
pub fn response(conversation: &Conversation, reply: &Reply) -> Value {
    let item = output_item(reply);
    response_object(conversation, reply, &fresh_id("resp_"), Some(&item))
}

/// The streamed response as SSE events.
pub fn stream(conversation: &Conversation, reply: &Reply) -> EventStream {
    let id = fresh_id("resp_");
    let done = output_item(reply);
    let item_id = done["id"].clone();
    let mut sequence = 0u64;
    let mut out = EventStream::new();
    let mut emit = |name: &str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(sequence);
        sequence += 1;
        out.event(name, &data);
    };
    let pending = response_object(conversation, reply, &id, None);
    emit("response.created", json!({"response": pending}));
    emit("response.in_progress", json!({"response": pending}));
    let mut added = done.clone();
    added["status"] = json!("in_progress");
    match reply {
        Reply::Text(text) => {
            added["content"] = json!([]);
            emit(
                "response.output_item.added",
                json!({"output_index": 0, "item": added}),
            );
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            emit(
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "part": part}),
            );
            emit(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "delta": text, "logprobs": []}),
            );
            emit(
                "response.output_text.done",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "text": text, "logprobs": []}),
            );
            emit(
                "response.content_part.done",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "part": done["content"][0]}),
            );
        }
        Reply::ToolCall(call) => {
            let (field, event) = match call.input {
                ToolInput::Freeform(_) => ("input", "response.custom_tool_call_input"),
                ToolInput::Json(_) => ("arguments", "response.function_call_arguments"),
            };
            let full = done[field].clone();
            added[field] = json!("");
            emit(
                "response.output_item.added",
                json!({"output_index": 0, "item": added}),
            );
            emit(
                &format!("{event}.delta"),
                json!({"item_id": item_id, "output_index": 0, "delta": full}),
            );
            emit(
                &format!("{event}.done"),
                json!({"item_id": item_id, "output_index": 0, field: full}),
            );
        }
    }
    emit(
        "response.output_item.done",
        json!({"output_index": 0, "item": done}),
    );
    let completed = response_object(conversation, reply, &id, Some(&done));
    emit("response.completed", json!({"response": completed}));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::test_support::{conversation as with_model, tool_call};

    #[test]
    fn reads_codex_style_input() {
        let body = json!({
            "model": "gpt-x", "stream": true, "instructions": "You are Codex.",
            "tools": [
                {"type": "function", "name": "shell", "parameters": {"type": "object"}},
                {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
                {"type": "web_search"}
            ],
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "write notes"}]},
                {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "x"},
                {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>later</environment_context>"}]}
            ]
        });
        let conversation = conversation(&body, 8);
        assert_eq!(conversation.tool_names(), ["shell", "apply_patch"]);
        assert!(conversation.tools[1].freeform);
        assert_eq!(conversation.prompt, "write notes");
        assert_eq!(conversation.results_since_prompt, 1);
        assert_eq!(conversation.cwd.as_deref(), Some("/w"));
    }

    #[test]
    fn streams_function_and_custom_calls_and_text() {
        let conversation = with_model("m", 5);
        let call = |input| tool_call("call_1", "t", input);
        let function = stream(
            &conversation,
            &call(ToolInput::Json(json!({"command": ["ls"]}))),
        )
        .to_string();
        assert!(function.contains("event: response.function_call_arguments.delta"));
        assert!(function.contains(r#""type":"function_call""#));
        assert!(function.contains(r#""arguments":"{\"command\":[\"ls\"]}""#));
        let custom = stream(&conversation, &call(ToolInput::Freeform("patch".into()))).to_string();
        assert!(custom.contains(r#""type":"custom_tool_call""#));
        assert!(custom.contains(r#""input":"patch""#));
        let text = stream(&conversation, &Reply::Text("bye".into())).to_string();
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(names.first(), Some(&"response.created"));
        assert_eq!(names.last(), Some(&"response.completed"));
        assert!(names.contains(&"response.output_text.delta"));
        let last = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .unwrap_or_default();
        let completed: Value = serde_json::from_str(last).unwrap_or_default();
        assert_eq!(completed["response"]["usage"]["total_tokens"], 6);
        assert_eq!(
            completed["response"]["output"][0]["content"][0]["text"],
            "bye"
        );
    }
}
