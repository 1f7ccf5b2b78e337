//! `orchestrator mcp` fed raw bytes: every request line gets an answer, whatever it holds.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::Repo;
use serde_json::{json, Value};

/// The server, spoken to line by line.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Raw {
    fn start(repo: &Repo) -> Raw {
        let mut child = repo
            .command(&["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn orchestrator mcp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Raw {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.write_all(b"\n").expect("write newline");
        stdin.flush().expect("flush");
    }

    /// The next line the server writes, as text and as JSON.
    fn answer(&self, what: &str) -> (String, Value) {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no answer to {what}"));
        let doc = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("answer to {what} is not JSON ({e}): {line}"));
        (line, doc)
    }

    /// Sends a request line and returns its answer.
    fn ask(&mut self, what: &str, bytes: &[u8]) -> (String, Value) {
        self.send(bytes);
        self.answer(what)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_call(id: u64, tool: &str, arguments: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
    .to_string()
    .into_bytes()
}

#[test]
fn every_request_line_gets_an_answer() {
    let repo = Repo::new();
    let mut server = Raw::start(&repo);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let (_, doc) = server.ask("initialize", init.to_string().as_bytes());
    assert_eq!(doc["id"], 1, "{doc}");
    server.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    // Not JSON: a parse error, with a null id (none can be read).
    let (_, doc) = server.ask("a line that is not JSON", b"this is not json {");
    assert_eq!(doc["error"]["code"], -32700, "{doc}");
    assert_eq!(doc["id"], Value::Null, "{doc}");

    // Invalid UTF-8 inside an otherwise well-formed request: answered, with its id.
    let mut bad = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_copilot_plans","arguments":{"x":""#.to_vec();
    bad.extend_from_slice(b"\xff\xfe");
    bad.extend_from_slice(br#""}}}"#);
    let (_, doc) = server.ask("a request with invalid UTF-8", &bad);
    assert_eq!(doc["id"], 2, "{doc}");
    assert_eq!(doc["error"]["code"], -32700, "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("UTF-8"),
        "{doc}"
    );

    // `arguments` that are not an object: invalid params, naming the field.
    for (id, arguments) in [(3, json!("abc")), (4, json!([1, 2])), (5, json!(7))] {
        let (_, doc) = server.ask(
            &format!("arguments {arguments}"),
            &tool_call(id, "list_copilot_plans", arguments.clone()),
        );
        assert_eq!(doc["id"], id, "{doc}");
        assert_eq!(doc["error"]["code"], -32602, "{arguments}: {doc}");
        assert!(
            doc["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("arguments"),
            "{doc}"
        );
    }

    // An oversized argument comes back shortened, not whole (and not again and again).
    let huge = "x".repeat(100_000);
    let (line, doc) = server.ask(
        "an oversized argument",
        &tool_call(6, "get_copilot_plan_status", json!({"planId": huge})),
    );
    assert_eq!(doc["id"], 6, "{line:.300}");
    assert_eq!(doc["result"]["isError"], true, "{line:.300}");
    assert!(
        line.len() < 4_000,
        "{} bytes of answer: {line:.300}",
        line.len()
    );
    assert!(line.contains("100002 bytes in all"), "{line:.600}");

    // Through all of that the server kept serving, in order.
    let (_, doc) = server.ask("ping", br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    assert_eq!(doc["id"], 7, "{doc}");
    assert!(doc["result"].is_object(), "{doc}");
    let (_, doc) = server.ask(
        "a good tool call",
        &tool_call(8, "list_copilot_plans", json!({})),
    );
    assert_eq!(doc["id"], 8, "{doc}");
    assert_ne!(doc["result"]["isError"], true, "{doc}");
}
