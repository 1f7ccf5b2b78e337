//! A minimal HTTP/1.1 server side: request parsing (Content-Length and chunked bodies,
//! `Expect: 100-continue`, keep-alive) and response writing. Only what the agent CLIs need.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest request line or header line accepted, in bytes.
const MAX_LINE: usize = 64 * 1024;
/// Most headers accepted in one request.
const MAX_HEADERS: usize = 200;
/// Largest request body accepted, in bytes.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One parsed HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The path without the query string, e.g. `/v1/messages`.
    pub path: String,
    /// The query string without the `?`, empty when there is none.
    pub query: String,
    /// Headers in arrival order; names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// The first header with this (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// Whether the client asked to close the connection after this request.
    pub fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|value| value.eq_ignore_ascii_case("close"))
    }
}

/// One HTTP response; the body is sent with a Content-Length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The Content-Type header.
    pub content_type: String,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// A JSON response.
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Self {
            status,
            content_type: "application/json".to_owned(),
            body: value.to_string().into_bytes(),
        }
    }

    /// A `text/event-stream` response carrying already formatted events.
    pub fn event_stream(body: String) -> Self {
        Self {
            status: 200,
            content_type: "text/event-stream".to_owned(),
            body: body.into_bytes(),
        }
    }
}

/// The first of `headers` (names lower-cased) with this (case-insensitive) name.
pub(crate) fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    headers
        .iter()
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.as_str())
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// Reads one line ending in CRLF (or LF), without the line ending. `None` on a clean EOF.
async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let read = (&mut *reader)
        .take(MAX_LINE as u64 + 2)
        .read_until(b'\n', &mut line)
        .await?;
    if read == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(invalid("line too long or truncated"));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| invalid("line is not UTF-8"))
}

async fn require_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<String> {
    read_line(reader)
        .await?
        .ok_or_else(|| invalid("connection closed mid-request"))
}

/// Reads one request. `Ok(None)` when the peer closed the connection between requests.
/// `interim` receives `100 Continue` when the client sent `Expect: 100-continue`.
pub async fn read_request<R, W>(reader: &mut R, interim: &mut W) -> io::Result<Option<HttpRequest>>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Tolerate stray empty lines between keep-alive requests (RFC 9112 §2.2).
    let request_line = loop {
        match read_line(reader).await? {
            None => return Ok(None),
            Some(line) if line.is_empty() => continue,
            Some(line) => break line,
        }
    };
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid(format!("bad request line: {request_line}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(invalid(format!("unsupported version: {version}")));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut request = HttpRequest {
        method: method.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    loop {
        let line = require_line(reader).await?;
        if line.is_empty() {
            break;
        }
        if request.headers.len() >= MAX_HEADERS {
            return Err(invalid("too many headers"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid(format!("bad header line: {line}")))?;
        request
            .headers
            .push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    if request
        .header("expect")
        .is_some_and(|value| value.eq_ignore_ascii_case("100-continue"))
    {
        interim.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        interim.flush().await?;
    }
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
    if chunked {
        request.body = read_chunked(reader).await?;
    } else if let Some(length) = request.header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| invalid(format!("bad content-length: {length}")))?;
        if length > MAX_BODY {
            return Err(invalid("body too large"));
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        request.body = body;
    }
    Ok(Some(request))
}

async fn read_chunked<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = require_line(reader).await?;
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| invalid(format!("bad chunk size: {line}")))?;
        if size == 0 {
            // Trailers, then the final empty line.
            while !require_line(reader).await?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(invalid("body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).await?;
        if !require_line(reader).await?.is_empty() {
            return Err(invalid("chunk not followed by CRLF"));
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Writes a response with a Content-Length; `close` adds `Connection: close`.
pub async fn write_response<W: AsyncWrite + Unpin>(
    writer: &mut W,
    response: &HttpResponse,
    close: bool,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    if response.content_type == "text/event-stream" {
        head.push_str("cache-control: no-cache\r\n");
    }
    head.push_str(if close {
        "connection: close\r\n\r\n"
    } else {
        "connection: keep-alive\r\n\r\n"
    });
    writer.write_all(head.as_bytes()).await?;
    writer.write_all(&response.body).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(raw: &[u8]) -> io::Result<Option<HttpRequest>> {
        let mut reader = tokio::io::BufReader::new(raw);
        read_request(&mut reader, &mut tokio::io::sink()).await
    }

    #[tokio::test]
    async fn parses_content_length_body_and_query() -> io::Result<()> {
        let raw = b"POST /v1beta/models/m:streamGenerateContent?alt=sse HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        let request = parse(raw).await?.ok_or_else(|| invalid("none"))?;
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/v1beta/models/m:streamGenerateContent");
        assert_eq!(request.query, "alt=sse");
        assert_eq!(request.header("CONTENT-TYPE"), Some("application/json"));
        assert_eq!(request.body, b"{\"a\":1}");
        Ok(())
    }

    #[tokio::test]
    async fn parses_chunked_body_with_extensions_and_trailers() -> io::Result<()> {
        let raw = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nX-Trailer: y\r\n\r\n";
        let request = parse(raw).await?.ok_or_else(|| invalid("none"))?;
        assert_eq!(request.body, b"Wikipedia");
        Ok(())
    }

    #[tokio::test]
    async fn reads_several_requests_on_one_connection() -> io::Result<()> {
        let raw: &[u8] =
            b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\ncontent-length: 2\r\nConnection: close\r\n\r\nhi";
        let mut reader = tokio::io::BufReader::new(raw);
        let mut sink = tokio::io::sink();
        let first = read_request(&mut reader, &mut sink).await?;
        let second = read_request(&mut reader, &mut sink).await?;
        let third = read_request(&mut reader, &mut sink).await?;
        assert_eq!(first.map(|r| r.path), Some("/a".to_owned()));
        let second = second.ok_or_else(|| invalid("none"))?;
        assert_eq!(
            (second.path.as_str(), second.body.as_slice()),
            ("/b", &b"hi"[..])
        );
        assert!(second.wants_close());
        assert_eq!(third, None);
        Ok(())
    }

    #[tokio::test]
    async fn answers_expect_continue() -> io::Result<()> {
        let raw: &[u8] = b"POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz";
        let mut reader = tokio::io::BufReader::new(raw);
        let mut interim = Vec::new();
        let request = read_request(&mut reader, &mut interim).await?;
        assert_eq!(interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        assert_eq!(request.map(|r| r.body), Some(b"z".to_vec()));
        Ok(())
    }

    #[tokio::test]
    async fn rejects_garbage_and_truncation() {
        assert!(parse(b"NONSENSE\r\n\r\n").await.is_err());
        assert!(parse(b"GET / SPDY/3\r\n\r\n").await.is_err());
        assert!(parse(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
            .await
            .is_err());
        assert!(
            parse(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn writes_content_length_and_connection() -> io::Result<()> {
        let mut out = Vec::new();
        let response = HttpResponse::json(404, &serde_json::json!({"error": "x"}));
        write_response(&mut out, &response, true).await?;
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"));
        assert!(text.contains("content-length: 13\r\n"));
        assert!(text.contains("connection: close\r\n\r\n{\"error\":\"x\"}"));
        Ok(())
    }
}
