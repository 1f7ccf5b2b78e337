//! The request and response that [`handle`](crate::handle) takes and gives: plain data, so the
//! wire formats can be tested without a socket. The HTTP/1.1 protocol itself (parsing, chunked
//! bodies, `Expect: 100-continue`, keep-alive) is hyper's; the server converts at its edge.

use hyper::body::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONNECTION, CONTENT_TYPE};
use hyper::StatusCode;

use crate::wire::EventStream;

/// One received HTTP request, its body complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The path without the query string, e.g. `/v1/messages`.
    pub path: String,
    /// The query string without the `?`, empty when there is none.
    pub query: String,
    /// Headers in arrival order (repeated names next to each other); names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// The request as received by hyper: `parts` and the collected `body`. Header values that
    /// are not UTF-8 are kept lossily (they are only recorded and compared as text).
    pub fn from_parts(parts: &hyper::http::request::Parts, body: Vec<u8>) -> Self {
        Self {
            method: parts.method.as_str().to_owned(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or_default().to_owned(),
            headers: parts
                .headers
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes());
                    (name.as_str().to_owned(), value.into_owned())
                })
                .collect(),
            body,
        }
    }

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

    /// A `text/event-stream` response carrying `events`.
    pub fn event_stream(events: &EventStream) -> Self {
        Self {
            status: 200,
            content_type: "text/event-stream".to_owned(),
            body: events.to_string().into_bytes(),
        }
    }

    /// This response for hyper; `close` adds `Connection: close` (and hyper then closes the
    /// connection after it), else `Connection: keep-alive`.
    pub fn into_hyper(self, close: bool) -> hyper::Response<http_body_util::Full<Bytes>> {
        let event_stream = self.content_type == "text/event-stream";
        let mut response = hyper::Response::new(http_body_util::Full::new(Bytes::from(self.body)));
        // Statuses are the server's own constants (200…503), never outside 100..=999.
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&self.content_type) {
            headers.insert(CONTENT_TYPE, value);
        }
        if event_stream {
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        }
        let connection = if close { "close" } else { "keep-alive" };
        headers.insert(CONNECTION, HeaderValue::from_static(connection));
        response
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_from_hyper_parts_splits_path_and_query() -> Result<(), hyper::http::Error> {
        let (parts, ()) = hyper::Request::post("/v1beta/models/m:streamGenerateContent?alt=sse")
            .header("Content-Type", "application/json")
            .header("Connection", "close")
            .body(())?
            .into_parts();
        let request = HttpRequest::from_parts(&parts, b"{}".to_vec());
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/v1beta/models/m:streamGenerateContent");
        assert_eq!(request.query, "alt=sse");
        assert_eq!(request.header("CONTENT-TYPE"), Some("application/json"));
        assert!(request.wants_close());
        assert_eq!(request.body, b"{}");
        Ok(())
    }

    #[test]
    fn response_headers_follow_the_content_type_and_close() {
        let response = HttpResponse::json(404, &serde_json::json!({"error": "x"})).into_hyper(true);
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
        assert_eq!(response.headers()[CONNECTION], "close");
        assert!(response.headers().get(CACHE_CONTROL).is_none());
        let mut events = EventStream::new();
        events.data(&serde_json::json!({"a": 1}));
        let response = HttpResponse::event_stream(&events).into_hyper(false);
        assert_eq!(response.headers()[CACHE_CONTROL], "no-cache");
        assert_eq!(response.headers()[CONNECTION], "keep-alive");
    }
}
