//! `orchestrator mcp` fed raw bytes: every request line gets an answer, whatever it holds.

mod common;

use common::{tool_call, RawMcp, Repo};
use orchestrator_testkit::fixtures::job;
use serde_json::{json, Value};

#[test]
fn every_request_line_gets_an_answer() {
    let repo = Repo::new();
    let mut server = RawMcp::start(&repo);
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

#[test]
fn engine_errors_keep_their_kind() {
    let repo = Repo::new();
    let mut server = RawMcp::start(&repo);
    server.initialize();
    let plan = json!({"name": "kinds", "jobs": [job("only", "echo x > x.txt", &[])]});
    let (_, created) = server.ask("create", &tool_call(2, "create_copilot_plan", plan));
    let id = created["result"]["structuredContent"]["planId"]
        .as_str()
        .unwrap_or_else(|| panic!("no planId in {created}"))
        .to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, doc) = server.ask(
            "status",
            &tool_call(3, "get_copilot_plan_status", json!({"planId": id})),
        );
        if doc["result"]["structuredContent"]["status"] == "succeeded" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the plan never ended: {doc}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Force-failing a job that is not running is refused by the engine: the answer names the
    // kind of the refusal.
    let (_, doc) = server.ask(
        "force fail",
        &tool_call(
            4,
            "force_fail_copilot_job",
            json!({"planId": id, "jobId": "only"}),
        ),
    );
    let error = &doc["result"]["structuredContent"];
    assert_eq!(doc["result"]["isError"], true, "{doc}");
    assert_eq!(
        error["error"], "invalid_state",
        "a kind, not a bare `failed`: {doc}"
    );
    assert_eq!(error["retryable"], false, "{doc}");
    eprintln!("force-fail of a finished job: {error}");
}
