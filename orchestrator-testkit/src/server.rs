//! The server: accepts connections on 127.0.0.1, serves HTTP/1.1 on each with hyper, routes
//! each request to its wire format, answers from the [`Script`] and records every request.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::conversation::{Conversation, Reply};
use crate::http::{find_header, HttpRequest, HttpResponse};
use crate::script::Script;
use crate::wire::{anthropic, chat, gemini, responses, EventStream};

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The method.
    pub method: String,
    /// The path without the query.
    pub path: String,
    /// The query string without `?`.
    pub query: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `Value::Null` when empty or not JSON.
    pub body: Value,
    /// The status the server answered with.
    pub status: u16,
    /// What the script answered: `tool:<name>`, `text` or empty for non-model requests.
    pub answer: String,
}

impl RecordedRequest {
    /// The first header with this (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// This request as one JSON object (for logs).
    pub fn to_json(&self) -> Value {
        json!({
            "method": self.method, "path": self.path, "query": self.query,
            "headers": self.headers, "body": self.body, "status": self.status, "answer": self.answer,
        })
    }
}

/// Largest request body accepted, in bytes (the CLIs send whole conversations, a few MB at most).
const MAX_BODY: usize = 64 * 1024 * 1024;

type Log = Arc<Mutex<Vec<RecordedRequest>>>;

fn lock(log: &Log) -> MutexGuard<'_, Vec<RecordedRequest>> {
    // A panicking writer cannot leave a half-pushed Vec behind: keep going.
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A scripted model server on `127.0.0.1:<ephemeral port>`; stops when dropped.
///
/// ```
/// # async fn demo() -> std::io::Result<()> {
/// use orchestrator_testkit::{ModelServer, Script};
/// let server = ModelServer::start(Script::new().write_file("notes.txt", "hi\n")).await?;
/// // ANTHROPIC_BASE_URL=server.url(), OPENAI base_url=server.openai_base_url(),
/// // GOOGLE_GEMINI_BASE_URL=server.url(), then run the CLI …
/// for request in server.requests() {
///     println!("{} {} -> {}", request.method, request.path, request.answer);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ModelServer {
    addr: SocketAddr,
    log: Log,
    accept: JoinHandle<()>,
}

impl ModelServer {
    /// Binds 127.0.0.1 on a free port and serves `script` on the current tokio runtime.
    pub async fn start(script: Script) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let log = Log::default();
        let script = Arc::new(script);
        let accept = tokio::spawn(accept_loop(listener, script, log.clone()));
        Ok(Self { addr, log, accept })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`: the base URL for Anthropic and Gemini clients.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:<port>/v1`: the base URL for OpenAI clients (Codex, Copilot).
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.log).clone()
    }

    /// Requests received so far whose path ends with `suffix` (e.g. `/v1/messages`).
    pub fn requests_to(&self, suffix: &str) -> Vec<RecordedRequest> {
        lock(&self.log)
            .iter()
            .filter(|request| request.path.ends_with(suffix))
            .cloned()
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        // Dropping the accept task drops its JoinSet, which aborts every connection.
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, script: Arc<Script>, log: Log) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    connections.spawn(serve_connection(stream, script.clone(), log.clone()));
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Serves one connection until the client closes it or asks to (keep-alive is hyper's
/// default); a request hyper cannot parse gets its `400` and ends the connection.
async fn serve_connection(stream: TcpStream, script: Arc<Script>, log: Log) {
    let service = service_fn(move |request| {
        let (script, log) = (script.clone(), log.clone());
        async move { Ok::<_, Infallible>(serve(request, &script, &log).await) }
    });
    // A connection that fails mid-request only ends itself: the client sees it and retries.
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Reads the whole body (hyper de-chunks it and answers `Expect: 100-continue` when it is
/// first read), answers and records the request.
async fn serve(
    request: hyper::Request<Incoming>,
    script: &Script,
    log: &Log,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(error) => {
            let body = json!({"error": {"message": format!("testkit: reading the request body: {error}"), "type": "invalid_request_error"}});
            return HttpResponse::json(400, &body).into_hyper(true);
        }
    };
    let request = HttpRequest::from_parts(&parts, body);
    let (response, record) = handle(&request, script);
    lock(log).push(record);
    response.into_hyper(request.wants_close())
}

/// The wire format a request speaks.
enum Route {
    AnthropicMessages,
    AnthropicCountTokens,
    Responses,
    ChatCompletions,
    Gemini { model: String, action: String },
    Models,
    Unknown,
}

fn route(request: &HttpRequest) -> Route {
    let path = request.path.trim_end_matches('/');
    if request.method == "GET" {
        return if path.ends_with("/models") {
            Route::Models
        } else {
            Route::Unknown
        };
    }
    if path.ends_with("/messages/count_tokens") {
        Route::AnthropicCountTokens
    } else if path.ends_with("/messages") {
        Route::AnthropicMessages
    } else if path.ends_with("/responses") {
        Route::Responses
    } else if path.ends_with("/chat/completions") {
        Route::ChatCompletions
    } else if let Some((model, action)) = path
        .rsplit_once("/models/")
        .and_then(|(_, rest)| rest.split_once(':'))
    {
        Route::Gemini {
            model: model.to_owned(),
            action: action.to_owned(),
        }
    } else {
        Route::Unknown
    }
}

/// Answers one request and describes it for the log.
pub fn handle(request: &HttpRequest, script: &Script) -> (HttpResponse, RecordedRequest) {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let (response, answer) = answer(request, &body, script);
    let record = RecordedRequest {
        method: request.method.clone(),
        path: request.path.clone(),
        query: request.query.clone(),
        headers: request.headers.clone(),
        body,
        status: response.status,
        answer,
    };
    (response, record)
}

fn answer(request: &HttpRequest, body: &Value, script: &Script) -> (HttpResponse, String) {
    let encoding = request.header("content-encoding").unwrap_or("identity");
    if !encoding.eq_ignore_ascii_case("identity") {
        let message = format!("testkit: compressed request bodies ({encoding}) are not supported");
        return (error_response(415, &message), String::new());
    }
    let len = request.body.len();
    let route = route(request);
    let is_model_call = matches!(
        route,
        Route::AnthropicMessages | Route::Responses | Route::ChatCompletions
    ) || matches!(&route, Route::Gemini { action, .. } if action != "countTokens");
    if is_model_call && body.is_null() {
        return (
            error_response(400, "testkit: request body is not JSON"),
            String::new(),
        );
    }
    if let (true, Some(status)) = (is_model_call, script.error_status) {
        return (
            error_response(status, "testkit: scripted failure"),
            "error".to_owned(),
        );
    }
    let respond = |mut conversation: Conversation,
                   sse: fn(&Conversation, &Reply) -> EventStream,
                   json: fn(&Conversation, &Reply) -> Value| {
        conversation.input_tokens = script.reported_input_tokens(&conversation);
        let reply = script.reply(&conversation);
        let answer = describe(&reply);
        let response = if conversation.stream {
            HttpResponse::event_stream(&sse(&conversation, &reply))
        } else {
            HttpResponse::json(200, &json(&conversation, &reply))
        };
        (response, answer)
    };
    match route {
        Route::AnthropicMessages => respond(
            anthropic::conversation(body, len),
            anthropic::stream,
            anthropic::message,
        ),
        Route::AnthropicCountTokens => (
            HttpResponse::json(200, &anthropic::count_tokens(len)),
            String::new(),
        ),
        Route::Responses => respond(
            responses::conversation(body, len),
            responses::stream,
            responses::response,
        ),
        Route::ChatCompletions => respond(
            chat::conversation(body, len),
            chat::stream,
            chat::completion,
        ),
        Route::Gemini { model, action } => {
            gemini_answer(body, len, &model, &action, request, script)
        }
        Route::Models => (HttpResponse::json(200, &model_list()), String::new()),
        Route::Unknown => (
            error_response(
                404,
                &format!("testkit: no route for {} {}", request.method, request.path),
            ),
            String::new(),
        ),
    }
}

fn gemini_answer(
    body: &Value,
    len: usize,
    model: &str,
    action: &str,
    request: &HttpRequest,
    script: &Script,
) -> (HttpResponse, String) {
    let stream = match action {
        "countTokens" => {
            return (
                HttpResponse::json(200, &gemini::count_tokens(len)),
                String::new(),
            )
        }
        "generateContent" => false,
        "streamGenerateContent" => true,
        _ => {
            return (
                error_response(404, &format!("testkit: unknown Gemini action {action}")),
                String::new(),
            )
        }
    };
    let mut conversation = gemini::conversation(body, len, model, stream);
    conversation.input_tokens = script.reported_input_tokens(&conversation);
    let mut reply = script.reply(&conversation);
    if let (Reply::Text(text), Some(schema)) = (&mut reply, gemini::response_schema(body)) {
        *text = gemini::instance_of(schema).to_string();
    }
    let answer = describe(&reply);
    let sse = request.query.split('&').any(|pair| pair == "alt=sse");
    let response = match (stream, sse) {
        (true, true) => HttpResponse::event_stream(&gemini::stream(&conversation, &reply)),
        // Without alt=sse the stream endpoint answers one JSON array.
        (true, false) => HttpResponse::json(200, &json!([gemini::response(&conversation, &reply)])),
        (false, _) => HttpResponse::json(200, &gemini::response(&conversation, &reply)),
    };
    (response, answer)
}

fn describe(reply: &Reply) -> String {
    match reply {
        Reply::Text(_) => "text".to_owned(),
        Reply::ToolCall(call) => format!("tool:{}", call.name),
    }
}

/// An error body every client family understands: OpenAI/Anthropic read `error.message` and
/// `error.type`, Gemini reads `error.code`/`error.status`.
fn error_response(status: u16, message: &str) -> HttpResponse {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        _ => "api_error",
    };
    HttpResponse::json(
        status,
        &json!({
            "type": "error",
            "error": {"type": kind, "message": message, "code": status, "status": kind},
        }),
    )
}

/// A model list in both the OpenAI/Anthropic (`data`) and Gemini (`models`) shapes.
fn model_list() -> Value {
    let ids = [
        "testkit-model",
        "claude-sonnet-4-5",
        "gpt-5",
        "gemini-2.5-pro",
    ];
    json!({
        "object": "list",
        "data": ids.iter().map(|id| json!({
            "id": id, "object": "model", "type": "model", "created": 0, "owned_by": "testkit",
            "display_name": id, "created_at": "2025-01-01T00:00:00Z",
        })).collect::<Vec<_>>(),
        "has_more": false,
        "models": ids.iter().map(|id| json!({
            "name": format!("models/{id}"), "displayName": id,
            "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
        })).collect::<Vec<_>>(),
    })
}
