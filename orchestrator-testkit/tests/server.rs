//! The server over real TCP with a tiny hand-written client: routing, keep-alive, chunked
//! bodies, `Expect: 100-continue`, malformed requests, SSE framing, the stateless script across
//! a whole tool loop, recording.

use std::io;

use orchestrator_testkit::{ModelServer, Script, Turn};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One keep-alive connection.
struct Client {
    stream: BufReader<TcpStream>,
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The `data:` payloads of an SSE body.
    fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).unwrap_or(Value::Null))
            .collect()
    }
}

impl Client {
    async fn connect(server: &ModelServer) -> io::Result<Self> {
        Ok(Self {
            stream: BufReader::new(TcpStream::connect(server.addr()).await?),
        })
    }

    async fn send_raw(&mut self, raw: &[u8]) -> io::Result<Response> {
        self.stream.get_mut().write_all(raw).await?;
        self.read_response().await
    }

    /// Reads one response (or an interim `100 Continue`, which has no body).
    async fn read_response(&mut self) -> io::Result<Response> {
        let mut line = String::new();
        self.stream.read_line(&mut line).await?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.stream.read_line(&mut line).await?;
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some((name, value)) = trimmed.split_once(':') {
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
        let length = headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await?;
        Ok(Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    async fn post(&mut self, path: &str, body: &Value) -> io::Result<Response> {
        let body = body.to_string();
        let raw = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.send_raw(raw.as_bytes()).await
    }
}

fn script() -> Script {
    Script::new()
        .write_file("notes.txt", "hello\n")
        .shell("echo ran >> notes.txt")
        .final_text("All done.")
        .on_prompt(
            Turn::when("append")
                .shell("echo more >> notes.txt")
                .final_text("Appended."),
        )
}

fn first_of(events: &[Value], kind: &str) -> Value {
    events
        .iter()
        .find(|event| event["type"] == kind)
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn anthropic_tool_loop_is_stateless_and_recorded() -> io::Result<()> {
    let server = ModelServer::start(script()).await?;
    let mut client = Client::connect(&server).await?;
    let tools = json!([
        {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
        {"name": "Write", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}, "required": ["file_path", "content"]}}
    ]);
    let system = "<env>\nWorking directory: /repo\n</env>";
    let mut messages = vec![json!({"role": "user", "content": "create notes"})];
    let mut calls = Vec::new();
    // Keep-alive: the whole loop on one connection.
    for _ in 0..3 {
        let request = json!({"model": "m", "stream": true, "system": system, "tools": tools, "messages": messages});
        let response = client.post("/v1/messages?beta=true", &request).await?;
        assert_eq!(response.status, 200);
        assert_eq!(response.header("content-type"), Some("text/event-stream"));
        let events = response.events();
        let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(types.first(), Some(&"message_start"));
        assert_eq!(types.last(), Some(&"message_stop"));
        let start = first_of(&events, "content_block_start");
        let delta = first_of(&events, "content_block_delta");
        let block = &start["content_block"];
        if block["type"] == "tool_use" {
            let partial = delta["delta"]["partial_json"].as_str().unwrap_or_default();
            let input: Value = serde_json::from_str(partial).unwrap_or_default();
            calls.push((block["name"].clone(), input));
            let id = block["id"].clone();
            messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": block["name"], "input": {}}]}));
            messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}));
        } else {
            assert_eq!(delta["delta"]["text"], "All done.");
        }
    }
    assert_eq!(
        calls,
        [
            (
                json!("Write"),
                json!({"file_path": "/repo/notes.txt", "content": "hello\n"})
            ),
            (json!("Bash"), json!({"command": "echo ran >> notes.txt"})),
        ]
    );
    // A resumed session's new prompt picks its own turn and starts from step 0.
    messages.push(json!({"role": "assistant", "content": "All done."}));
    messages.push(json!({"role": "user", "content": "now append"}));
    let request = json!({"model": "m", "tools": tools, "messages": messages});
    let response = client.post("/v1/messages", &request).await?.json();
    assert_eq!(
        response["content"][0]["input"],
        json!({"command": "echo more >> notes.txt"})
    );
    assert_eq!(response["stop_reason"], "tool_use");
    // Side calls without tools get the side text; count_tokens answers.
    let side_request = json!({"model": "h", "messages": [{"role": "user", "content": "title?"}]});
    let side = client.post("/v1/messages", &side_request).await?;
    assert_eq!(side.json()["content"][0]["text"], "OK");
    let count = client
        .post("/v1/messages/count_tokens", &json!({"messages": []}))
        .await?;
    assert!(count.json()["input_tokens"].as_u64().is_some());
    let recorded = server.requests();
    assert_eq!(recorded.len(), 6);
    assert_eq!(recorded[0].query, "beta=true");
    assert_eq!(recorded[0].answer, "tool:Write");
    assert_eq!(recorded[2].answer, "text");
    assert_eq!(server.requests_to("/count_tokens").len(), 1);
    Ok(())
}

#[tokio::test]
async fn responses_chat_and_gemini_formats() -> io::Result<()> {
    let server = ModelServer::start(script()).await?;
    let mut client = Client::connect(&server).await?;
    let responses = json!({
        "model": "gpt", "stream": true,
        "tools": [{"type": "custom", "name": "apply_patch"}, {"type": "function", "name": "exec_command", "parameters": {"properties": {"cmd": {"type": "string"}}}}],
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]
    });
    let events = client.post("/v1/responses", &responses).await?.events();
    let done = first_of(&events, "response.output_item.done");
    assert_eq!(done["item"]["type"], "custom_tool_call");
    assert_eq!(
        done["item"]["input"],
        "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"
    );
    assert_eq!(
        events.last().map(|e| e["type"].clone()),
        Some(json!("response.completed"))
    );

    let chat = json!({
        "model": "gpt", "stream": true,
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"properties": {"command": {"type": "string"}}}}}],
        "messages": [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "1", "content": "ok"}]
    });
    let response = client.post("/v1/chat/completions", &chat).await?;
    assert!(response.body.ends_with("data: [DONE]\n\n"));
    let events = response.events();
    assert_eq!(
        events[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
        r#"{"command":"echo ran >> notes.txt"}"#
    );
    assert!(events.iter().any(|e| e["usage"]["total_tokens"].is_u64()));

    let gemini = json!({
        "contents": [{"role": "user", "parts": [{"text": "go"}]}],
        "tools": [{"functionDeclarations": [{"name": "write_file", "parametersJsonSchema": {"properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}}}]}]
    });
    let response = client
        .post(
            "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
            &gemini,
        )
        .await?;
    let part = &response.events()[0]["candidates"][0]["content"]["parts"][0];
    assert_eq!(part["functionCall"]["name"], "write_file");
    let structured = json!({"contents": [], "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {"type": "object", "properties": {"next_speaker": {"enum": ["user", "model"]}}}}});
    let plain = client
        .post("/v1beta/models/gemini-x:generateContent", &structured)
        .await?;
    let text = plain.json()["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap_or_default(),
        json!({"next_speaker": "user"})
    );
    let count = client
        .post("/v1beta/models/gemini-x:countTokens", &json!({}))
        .await?;
    assert!(count.json()["totalTokens"].is_u64());
    Ok(())
}

#[tokio::test]
async fn other_routes_chunked_bodies_errors_and_close() -> io::Result<()> {
    let server = ModelServer::start(Script::new()).await?;
    let mut client = Client::connect(&server).await?;
    let models = client
        .send_raw(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .await?;
    assert_eq!(models.status, 200);
    assert!(models.json()["data"]
        .as_array()
        .is_some_and(|models| !models.is_empty()));
    let missing = client.send_raw(b"GET /nope HTTP/1.1\r\n\r\n").await?;
    assert_eq!(missing.status, 404);
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let (first, second) = body.split_at(10);
    let raw = format!(
        "POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n{:x}\r\n{second}\r\n0\r\n\r\n",
        first.len(),
        second.len()
    );
    let chunked = client.send_raw(raw.as_bytes()).await?;
    assert_eq!(chunked.json()["content"][0]["text"], "OK");
    let compressed = client
        .send_raw(
            b"POST /v1/messages HTTP/1.1\r\nContent-Encoding: zstd\r\nContent-Length: 0\r\n\r\n",
        )
        .await?;
    assert_eq!(compressed.status, 415);
    let not_json = client
        .send_raw(
            b"POST /v1/responses HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
        )
        .await?;
    assert_eq!(
        (not_json.status, not_json.header("connection")),
        (400, Some("close"))
    );
    let mut rest = Vec::new();
    client.stream.read_to_end(&mut rest).await?;
    assert!(rest.is_empty(), "the server closes after Connection: close");
    assert_eq!(server.requests().len(), 5);

    let failing = ModelServer::start(Script::new().fail_with_status(429)).await?;
    let mut client = Client::connect(&failing).await?;
    let response = client
        .post("/v1/chat/completions", &json!({"messages": []}))
        .await?;
    assert_eq!(response.status, 429);
    assert_eq!(response.json()["error"]["type"], "rate_limit_error");
    Ok(())
}

/// curl-style clients wait for `100 Continue` before sending a large body; a request that is
/// not HTTP gets a 400 and the connection ends.
#[tokio::test]
async fn expect_continue_and_malformed_requests() -> io::Result<()> {
    let server = ModelServer::start(Script::new()).await?;
    let mut client = Client::connect(&server).await?;
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let interim = client.send_raw(head.as_bytes()).await?;
    assert_eq!(interim.status, 100);
    let answer = client.send_raw(body.as_bytes()).await?;
    assert_eq!(answer.json()["content"][0]["text"], "OK");
    assert_eq!(server.requests().len(), 1);

    let mut garbage = Client::connect(&server).await?;
    let refused = garbage.send_raw(b"NONSENSE\r\n\r\n").await?;
    assert_eq!(refused.status, 400);
    let mut rest = Vec::new();
    garbage.stream.read_to_end(&mut rest).await?;
    assert!(
        rest.is_empty(),
        "the server closes after a malformed request"
    );
    assert_eq!(server.requests().len(), 1, "nothing recorded for it");
    Ok(())
}

#[tokio::test]
async fn dropping_the_server_stops_it() -> io::Result<()> {
    let server = ModelServer::start(Script::new()).await?;
    let addr = server.addr();
    assert!(server.url().starts_with("http://127.0.0.1:"));
    assert_eq!(server.openai_base_url(), format!("{}/v1", server.url()));
    drop(server);
    let mut refused = false;
    for _ in 0..50 {
        if TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(refused);
    Ok(())
}
