//! The agents' tool server (SPEC §15) refuses what it must, over a real socket: a call with
//! another job's token, with no token, with a token whose run has ended, or through a
//! non-loopback Host gets an HTTP refusal (and is counted) before any tool runs; the job's
//! own token reaches the MCP server.

use orchestrator_agents::tools::ToolServer;
use orchestrator_core::tools::{AgentTools, ToolJob};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#;

/// POSTs an MCP `initialize` to `url`'s path with `token` and `host`; the status code.
async fn post(server: &ToolServer, path: &str, token: Option<&str>, host: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(server.addr())
        .await
        .expect("connect");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{INITIALIZE}",
        INITIALIZE.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut head = vec![0u8; 12];
    stream.read_exact(&mut head).await.expect("status line");
    String::from_utf8_lossy(&head[9..12])
        .parse()
        .expect("status code")
}

fn path_of(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("http url");
    rest[rest.find('/').expect("a path")..].to_owned()
}

#[tokio::test]
async fn only_the_jobs_own_open_token_gets_through() {
    let server = ToolServer::start().expect("start");
    let host = server.addr().to_string();
    let a = server
        .open(ToolJob::new("plan".into(), "node-a".into(), "a"))
        .expect("open a");
    let b = server
        .open(ToolJob::new("plan".into(), "node-b".into(), "b"))
        .expect("open b");
    let path_a = path_of(&a.url);
    assert_ne!(a.token, b.token);

    assert_eq!(
        post(&server, &path_a, Some(&b.token), &host).await,
        401,
        "another job's token"
    );
    assert_eq!(post(&server, &path_a, None, &host).await, 401, "no token");
    assert_eq!(
        post(&server, &path_a, Some("guess"), &host).await,
        401,
        "a made-up token"
    );
    assert_eq!(
        post(&server, &path_a, Some(&a.token), "evil.example").await,
        403,
        "a foreign Host (DNS rebinding)"
    );
    assert_eq!(
        post(&server, &path_a, Some(&a.token), &host).await,
        200,
        "its own token"
    );
    assert_eq!(server.refused(), 3);

    // Once the run ends its token is worth nothing, and nothing was asked of the engine.
    let outcome = server.close(&a);
    assert!(outcome.park.is_none() && outcome.cron.is_none());
    assert_eq!(
        post(&server, &path_a, Some(&a.token), &host).await,
        401,
        "a closed run's token"
    );
    assert_eq!(server.refused(), 4);
}
