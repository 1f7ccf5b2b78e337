//! Gemini API: `POST /v1beta/models/{model}:streamGenerateContent?alt=sse`, `:generateContent`
//! and `:countTokens`.

use serde_json::{json, Value};

use super::{conversation_basics, is_injected_context, items, text_of_parts, EventStream};
use crate::conversation::{estimate_tokens, fresh_id, Conversation, Reply, ToolSpec};

/// Reads a `generateContent` request; `model` and `stream` come from the URL.
pub fn conversation(body: &Value, body_len: usize, model: &str, stream: bool) -> Conversation {
    let tools = items(body.get("tools"))
        .iter()
        .flat_map(|tool| items(tool.get("functionDeclarations")))
        .filter_map(|function| {
            Some(ToolSpec {
                name: function.get("name")?.as_str()?.to_owned(),
                schema: function
                    .get("parametersJsonSchema")
                    .or_else(|| function.get("parameters"))
                    .cloned()
                    .unwrap_or(Value::Null),
                freeform: false,
            })
        })
        .collect();
    let contents = body.get("contents").unwrap_or(&Value::Null);
    let mut prompt = String::new();
    let mut results = 0;
    for content in items(Some(contents)) {
        if content.get("role").and_then(Value::as_str) == Some("model") {
            continue;
        }
        let parts = items(content.get("parts"));
        let responses = parts
            .iter()
            .filter(|part| part.get("functionResponse").is_some())
            .count();
        // A resumed session whose last call was cut short sends the call's (canceled)
        // response and the new prompt in one message: the text is the new prompt.
        let text = text_of_parts(parts);
        if !text.is_empty() && !is_injected_context(&text) {
            prompt = text;
            results = 0;
        } else {
            results += responses;
        }
    }
    let system = body.get("systemInstruction").unwrap_or(&Value::Null);
    Conversation {
        model: model.to_owned(),
        stream,
        prompt,
        results_since_prompt: results,
        ..conversation_basics(body, body_len, tools, &[system, contents])
    }
}

/// The JSON schema the request wants the answer to follow, if it asks for JSON.
pub fn response_schema(body: &Value) -> Option<&Value> {
    let config = body.get("generationConfig")?;
    if config.get("responseMimeType").and_then(Value::as_str) != Some("application/json") {
        return None;
    }
    config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"))
}

/// A minimal instance of a JSON schema (first enum value, empty strings, …): lets structured
/// side calls (Gemini's next-speaker check) parse.
pub fn instance_of(schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("object")
        .to_ascii_lowercase();
    match kind.as_str() {
        "object" => Value::Object(
            schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| {
                    properties
                        .iter()
                        .map(|(name, property)| (name.clone(), instance_of(property)))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        "array" => json!([]),
        "boolean" => json!(false),
        "integer" | "number" => json!(0),
        _ => json!("OK"),
    }
}

/// One `GenerateContentResponse` carrying the whole reply.
pub fn response(conversation: &Conversation, reply: &Reply) -> Value {
    let part = match reply {
        Reply::Text(text) => json!({"text": text}),
        Reply::ToolCall(call) => {
            json!({"functionCall": {"name": call.name, "args": call.arguments_value()}})
        }
    };
    let output = reply.output_tokens();
    json!({
        "candidates": [{
            "content": {"role": "model", "parts": [part]},
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": {
            "promptTokenCount": conversation.input_tokens,
            "candidatesTokenCount": output,
            "totalTokenCount": conversation.input_tokens + output,
        },
        "modelVersion": conversation.model,
        "responseId": fresh_id("gem_"),
    })
}

/// The streamed reply as SSE (`alt=sse`): one chunk.
pub fn stream(conversation: &Conversation, reply: &Reply) -> EventStream {
    let mut out = EventStream::new();
    out.data(&response(conversation, reply));
    out
}

/// The `countTokens` answer.
pub fn count_tokens(body_len: usize) -> Value {
    json!({"totalTokens": estimate_tokens(body_len)})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::ToolInput;
    use crate::wire::test_support::{conversation as with_model, tool_call};

    #[test]
    fn reads_function_declarations_and_responses() {
        let body = json!({
            "contents": [
                {"role": "user", "parts": [{"text": "I'm currently working in the directory: /g"}]},
                {"role": "model", "parts": [{"text": "Got it."}]},
                {"role": "user", "parts": [{"text": "make a file"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "write_file", "response": {}}}]}
            ],
            "tools": [{"functionDeclarations": [{"name": "write_file", "parametersJsonSchema": {"type": "object"}}, {"name": "run_shell_command", "parameters": {}}]}]
        });
        let conversation = conversation(&body, 40, "gemini-x", true);
        assert_eq!(
            conversation.tool_names(),
            ["write_file", "run_shell_command"]
        );
        assert_eq!(
            (
                conversation.prompt.as_str(),
                conversation.results_since_prompt
            ),
            ("make a file", 1)
        );
        assert_eq!(conversation.cwd.as_deref(), Some("/g"));
    }

    #[test]
    fn writes_function_calls_and_schema_instances() {
        let conversation = with_model("g", 3);
        let reply = tool_call(
            "x",
            "run_shell_command",
            ToolInput::Json(json!({"command": "ls"})),
        );
        let value = response(&conversation, &reply);
        assert_eq!(
            value["candidates"][0]["content"]["parts"][0]["functionCall"]["args"]["command"],
            "ls"
        );
        assert_eq!(value["usageMetadata"]["totalTokenCount"], 7);
        assert!(stream(&conversation, &reply)
            .to_string()
            .starts_with("data: {"));
        let schema = json!({"type": "object", "properties": {"reasoning": {"type": "string"}, "next_speaker": {"type": "string", "enum": ["user", "model"]}}});
        assert_eq!(
            instance_of(&schema),
            json!({"reasoning": "OK", "next_speaker": "user"})
        );
    }
}
