//! The stdio transport: one JSON-RPC message per line, and an answer to every request line.
//!
//! rmcp's own line transport drops a line that is not JSON or not UTF-8 without a word (so a
//! client waits forever for its answer), and hands a `tools/call` whose `arguments` is not an
//! object to the router as an unknown method (-32601). This transport reads the lines itself:
//! good messages go to rmcp unchanged, bad ones are answered here with the JSON-RPC error the
//! specification names (-32700 parse error, -32600 invalid request, -32602 invalid params),
//! carrying the request's id whenever one can be read.

use std::future::Future;
use std::io;

use rmcp::model::{ClientRequest, ErrorData, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The longest line read (one message); longer ones are answered, not buffered. The same cap
/// as rmcp's own transport, so that what it accepted is accepted here too.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The methods this server serves: a request for one of them whose params rmcp cannot read
/// has invalid params (-32602), not an unknown method.
const SERVED_METHODS: &[&str] = &["initialize", "ping", "tools/list", "tools/call"];

/// A line to write, and who waits for it to be written.
struct Frame {
    bytes: Vec<u8>,
    written: Option<oneshot::Sender<io::Result<()>>>,
}

/// A JSON-RPC-over-lines transport for rmcp's server that answers every request line.
pub(crate) struct LineTransport<R> {
    read: BufReader<R>,
    /// The line read so far. It lives here, not in `receive`, because rmcp polls `receive`
    /// inside a `select!` and drops it whenever another branch is ready: a partial line must
    /// survive that.
    line: Vec<u8>,
    /// Skipping the rest of an oversized line, until its newline.
    discarding: bool,
    /// Lines to the writer task, in order. `None` once closed.
    out: Option<mpsc::UnboundedSender<Frame>>,
}

/// What one bounded read gave.
enum Read {
    Line,
    Oversized,
    Eof,
    Failed,
}

/// What a line asks for.
enum Incoming {
    /// A message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// A mistake answered here (`id` when the line had a readable one).
    Answer(Option<RequestId>, ErrorData),
    /// Nothing to answer (a blank line, or a notification: those are never answered).
    Nothing,
}

impl<R: AsyncRead + Send + Unpin + 'static> LineTransport<R> {
    /// A transport reading `read` and writing `write` (a task of its own writes, so that an
    /// answer queued while rmcp cancels a read is still written whole).
    pub(crate) fn new<W: AsyncWrite + Send + Unpin + 'static>(read: R, write: W) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_frames(write, rx));
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            out: Some(tx),
        }
    }

    /// Reads one `\n`-terminated line into `self.line`, never holding more than
    /// [`MAX_LINE_BYTES`] of it. Cancel-safe: bytes are consumed only as they are copied.
    async fn read_line(&mut self) -> Read {
        loop {
            let (taken, done) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) => available,
                    Err(_) => return Read::Failed,
                };
                if available.is_empty() {
                    return Read::Eof;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |i| i + 1);
                if self.discarding {
                    if newline.is_some() {
                        self.discarding = false;
                    }
                    (take, None)
                } else if self.line.len().saturating_add(take) > MAX_LINE_BYTES {
                    self.line.clear();
                    // The rest of the line (if it has not ended here) is skipped unread.
                    self.discarding = newline.is_none();
                    (take, Some(Read::Oversized))
                } else {
                    self.line.extend_from_slice(&available[..take]);
                    (take, newline.map(|_| Read::Line))
                }
            };
            self.read.consume(taken);
            if let Some(done) = done {
                return done;
            }
        }
    }

    /// Queues an error answer. Synchronous, so a cancelled `receive` cannot cut it short.
    fn answer(&self, id: Option<RequestId>, error: ErrorData) {
        if let Some(out) = &self.out {
            if let Ok(mut bytes) =
                serde_json::to_vec(&TxJsonRpcMessage::<RoleServer>::error(error, id))
            {
                bytes.push(b'\n');
                let _ = out.send(Frame {
                    bytes,
                    written: None,
                });
            }
        }
    }

    /// Waits until every line queued so far is written.
    async fn drain(&mut self) {
        if let Some(out) = &self.out {
            let (tx, rx) = oneshot::channel();
            if out
                .send(Frame {
                    bytes: Vec::new(),
                    written: Some(tx),
                })
                .is_ok()
            {
                let _ = rx.await;
            }
        }
    }
}

impl<R: AsyncRead + Send + Unpin + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        async move {
            let out = out.ok_or_else(|| closed("the transport is closed"))?;
            let mut bytes = serde_json::to_vec(&item)?;
            bytes.push(b'\n');
            let (tx, rx) = oneshot::channel();
            out.send(Frame {
                bytes,
                written: Some(tx),
            })
            .map_err(|_| closed("the output is closed"))?;
            rx.await.map_err(|_| closed("the output is closed"))?
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Read::Line => {}
                Read::Oversized => {
                    self.answer(
                        None,
                        ErrorData::invalid_request(
                            format!(
                                "the message is longer than {MAX_LINE_BYTES} bytes; it was \
                                 skipped unread"
                            ),
                            None,
                        ),
                    );
                    continue;
                }
                Read::Eof | Read::Failed => {
                    // Answers to the last lines go out before the server ends.
                    self.drain().await;
                    return None;
                }
            }
            let incoming = classify(&self.line);
            self.line.clear();
            match incoming {
                Incoming::Message(message) => return Some(*message),
                Incoming::Answer(id, error) => self.answer(id, error),
                Incoming::Nothing => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.drain().await;
        self.out = None;
        Ok(())
    }
}

fn closed(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, what.to_owned())
}

/// Writes frames in order until every sender is gone; a frame with a waiter learns how its
/// write went (an empty frame is a barrier: "everything before me is written").
async fn write_frames<W: AsyncWrite + Unpin>(
    mut write: W,
    mut frames: mpsc::UnboundedReceiver<Frame>,
) {
    let mut broken = false;
    while let Some(frame) = frames.recv().await {
        let result = if broken {
            Err(closed("the output is closed"))
        } else if frame.bytes.is_empty() {
            Ok(())
        } else {
            let written = async {
                write.write_all(&frame.bytes).await?;
                write.flush().await
            }
            .await;
            broken = written.is_err();
            written
        };
        if let Some(waiter) = frame.written {
            let _ = waiter.send(result);
        }
    }
}

/// What a line (with its newline) asks for.
fn classify(line: &[u8]) -> Incoming {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // RFC 8259 §8.1: a parser may ignore a leading byte order mark.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Incoming::Nothing;
    }
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(e) => return not_utf8(line, e.valid_up_to()),
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            return Incoming::Answer(
                None,
                ErrorData::parse_error(format!("the message is not JSON: {e}"), None),
            )
        }
    };
    let id = request_id(&value);
    let method = value
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let is_notification = id.is_none() && value.get("method").is_some();
    let served = method.as_deref().filter(|m| SERVED_METHODS.contains(m));
    if let (Some(id), Some(problem)) = (&id, tool_call_problem(&value)) {
        return Incoming::Answer(Some(id.clone()), ErrorData::invalid_params(problem, None));
    }
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(rmcp::model::JsonRpcMessage::Request(request)) => {
            let method = request.request.method();
            if matches!(request.request, ClientRequest::CustomRequest(_))
                && SERVED_METHODS.contains(&method)
            {
                let message = format!(
                    "the params of `{method}` do not have the shape the MCP specification gives"
                );
                return Incoming::Answer(
                    Some(request.id),
                    ErrorData::invalid_params(message, None),
                );
            }
            Incoming::Message(Box::new(rmcp::model::JsonRpcMessage::Request(request)))
        }
        Ok(message) => Incoming::Message(Box::new(message)),
        // Notifications are never answered; rmcp too ignores ones it does not know.
        Err(_) if is_notification => Incoming::Nothing,
        Err(e) if served.is_some() && id.is_some() => Incoming::Answer(
            id,
            ErrorData::invalid_params(
                format!(
                    "the params of `{}` do not have the shape the MCP specification gives: {e}",
                    served.unwrap_or_default()
                ),
                None,
            ),
        ),
        Err(e) => Incoming::Answer(
            id,
            ErrorData::invalid_request(format!("not a JSON-RPC 2.0 message: {e}"), None),
        ),
    }
}

/// A line that is not UTF-8 (so not JSON, RFC 8259 §8.1): a parse error, answered with the
/// request's id when the rest of the line shows one.
fn not_utf8(line: &[u8], valid_up_to: usize) -> Incoming {
    let lossy = String::from_utf8_lossy(line);
    let value = serde_json::from_str::<Value>(&lossy).ok();
    let id = value.as_ref().and_then(request_id);
    if id.is_none() && value.as_ref().is_some_and(|v| v.get("method").is_some()) {
        return Incoming::Nothing;
    }
    Incoming::Answer(
        id,
        ErrorData::parse_error(
            format!(
                "the message is not valid UTF-8 (the byte at offset {valid_up_to} is not); \
                 JSON-RPC messages are UTF-8 text"
            ),
            None,
        ),
    )
}

/// The id of a request (a string or an integer), if the message has one.
fn request_id(value: &Value) -> Option<RequestId> {
    let id = value.get("id")?;
    serde_json::from_value(id.clone()).ok()
}

/// What is wrong with the params of a `tools/call` request, if anything: a tool is called by
/// its `name` with an object of `arguments` (absent or null: none).
fn tool_call_problem(value: &Value) -> Option<String> {
    if value.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let Some(params) = value.get("params").and_then(Value::as_object) else {
        return Some(format!(
            "`params` of tools/call must be an object with the tool's `name` and `arguments` \
             (got {})",
            kind(value.get("params"))
        ));
    };
    if !params.get("name").is_some_and(Value::is_string) {
        return Some(format!(
            "`params.name` of tools/call must be the tool's name, a string (got {})",
            kind(params.get("name"))
        ));
    }
    match params.get("arguments") {
        None | Some(Value::Null) | Some(Value::Object(_)) => None,
        other => Some(format!(
            "`params.arguments` of tools/call must be an object of the tool's arguments \
             (got {})",
            kind(other)
        )),
    }
}

/// A JSON value's kind, for messages (never the value itself: it may be large).
fn kind(value: Option<&Value>) -> &'static str {
    match value {
        None => "nothing",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "a boolean",
        Some(Value::Number(_)) => "a number",
        Some(Value::String(_)) => "a string",
        Some(Value::Array(_)) => "an array",
        Some(Value::Object(_)) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer_of(line: &[u8]) -> (Option<RequestId>, i32) {
        match classify(line) {
            Incoming::Answer(id, e) => (id, e.code.0),
            Incoming::Message(m) => panic!("forwarded: {m:?}"),
            Incoming::Nothing => panic!("not answered"),
        }
    }

    #[test]
    fn bad_lines_get_the_error_the_specification_names() {
        assert_eq!(answer_of(b"this is not json\n"), (None, -32700));
        assert_eq!(
            answer_of(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"x\":\"\xff\"}\n"),
            (Some(RequestId::Number(7)), -32700)
        );
        for arguments in ["\"abc\"", "[1,2]", "3", "true"] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{{"name":"x","arguments":{arguments}}}}}"#
            );
            assert_eq!(
                answer_of(line.as_bytes()),
                (Some(RequestId::String("a".into())), -32602),
                "{arguments}"
            );
        }
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}"#;
        assert_eq!(answer_of(line), (Some(RequestId::Number(1)), -32602));
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":[]}"#;
        assert_eq!(answer_of(line), (Some(RequestId::Number(1)), -32602));
        assert_eq!(answer_of(b"[1]"), (None, -32600));
    }

    #[test]
    fn good_lines_and_notifications_are_not_answered() {
        assert!(matches!(
            classify(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n"),
            Incoming::Message(_)
        ));
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}"#;
        assert!(matches!(classify(call), Incoming::Message(_)));
        assert!(matches!(classify(b"  \n"), Incoming::Nothing));
        let unknown = br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}"#;
        assert!(matches!(
            classify(unknown),
            Incoming::Nothing | Incoming::Message(_)
        ));
        let bad = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":\"\xff\"}";
        assert!(matches!(classify(bad), Incoming::Nothing));
    }
}
