//! The dashboard (`orchestrator ui`, SPEC §18) in a real browser: Debian's Chromium driven
//! through the DevTools protocol by `tests/ui/driver.cjs` (playwright-core, installed by
//! `scripts/install-browser.sh`), against the built binary on a real repository. Also the
//! guard's refusals over plain HTTP, and the 404 and wrong-state answers.
//!
//! Without Chromium or the driver the browser test says so and skips, except under CI
//! (`CI` set), where `.ci/run` installs both and their absence is a failure.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::Repo;
use orchestrator_testkit::fixtures::job;
use serde_json::{json, Value};

/// A running `orchestrator ui`, stopped when dropped.
struct Dashboard {
    child: Child,
    url: String,
    port: u16,
    token: String,
}

impl Dashboard {
    fn start(repo: &Repo) -> Dashboard {
        let mut child = repo
            .command(&["ui", "--no-open"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start orchestrator ui");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the URL line");
        let url = line.trim().to_owned();
        let rest = url
            .strip_prefix("http://127.0.0.1:")
            .unwrap_or_else(|| panic!("the first line is the URL: {url:?}"));
        let (port, token) = rest.split_once("/?token=").expect("port and token");
        Dashboard {
            port: port.parse().expect("port"),
            token: token.to_owned(),
            url: url.clone(),
            child,
        }
    }

    /// One raw HTTP/1.1 request; the status code and the body.
    fn request(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut request = format!("{method} {target} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            request.push_str(&format!("Host: 127.0.0.1:{}\r\n", self.port));
        }
        for (k, v) in headers {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let code = answer
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("an HTTP answer: {answer:?}"));
        let body = answer
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_owned();
        (code, body)
    }

    fn with_token(&self, path: &str) -> String {
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}token={}", self.token)
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn plan_id(repo: &Repo) -> String {
    repo.latest_plan().expect("a stored plan")
}

#[test]
fn the_guard_refuses_missing_tokens_foreign_hosts_and_origins() {
    let repo = Repo::new();
    let ui = Dashboard::start(&repo);
    let (code, body) = ui.request("GET", "/", &[], "");
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains("<html"), "a 401 shows nothing else: {body}");
    assert_eq!(ui.request("GET", "/?token=wrong", &[], "").0, 401);
    assert_eq!(ui.request("GET", "/events?live=plans", &[], "").0, 401);
    assert_eq!(ui.request("GET", "/assets/app.js", &[], "").0, 401);
    let good = ui.with_token("/");
    assert_eq!(ui.request("GET", &good, &[], "").0, 200);
    // DNS rebinding: the right token under a foreign name is still refused.
    assert_eq!(
        ui.request("GET", &good, &[("Host", "evil.example")], "").0,
        403
    );
    let origin = [("Origin", "http://evil.example")];
    assert_eq!(ui.request("GET", &good, &origin, "").0, 403);
    let bearer = format!("Bearer {}", ui.token);
    let (code, _) = ui.request(
        "POST",
        "/api/plans/x/pause",
        &[
            ("Origin", "http://evil.example"),
            ("Authorization", &bearer),
        ],
        "{}",
    );
    assert_eq!(code, 403);
    let huge = format!("{{\"job\":\"{}\"}}", "x".repeat(70_000));
    let (code, _) = ui.request(
        "POST",
        "/api/plans/x/approve",
        &[("Authorization", &bearer)],
        &huge,
    );
    assert_eq!(code, 413, "an oversized body is not read");
    let own = format!("http://127.0.0.1:{}", ui.port);
    assert_eq!(ui.request("GET", &good, &[("Origin", &own)], "").0, 200);
}

#[test]
fn unknown_plans_and_jobs_are_404_pages_and_wrong_states_answer_as_the_cli_does() {
    let repo = Repo::new();
    let plan = repo.gated_plan();
    repo.run(&[
        "run",
        plan.to_str().expect("utf-8"),
        "--until-waiting",
        "-q",
    ])
    .expect_code(4);
    let id = plan_id(&repo);
    let ui = Dashboard::start(&repo);
    let (code, body) = ui.request("GET", &ui.with_token("/plans/nope"), &[], "");
    assert_eq!(code, 404);
    assert!(
        body.contains("nope"),
        "the page names what was not found: {body}"
    );
    let (code, body) = ui.request(
        "GET",
        &ui.with_token(&format!("/plans/{id}/jobs/99")),
        &[],
        "",
    );
    assert_eq!(code, 404);
    assert!(body.contains("no job number 99"), "{body}");
    let bearer = format!("Bearer {}", ui.token);
    let auth = [("Authorization", bearer.as_str())];
    // Approving a job that does not wait: the CLI's own message (exit 2 there, 400 here).
    let cli = repo.run(&["approve", &id, "free"]);
    cli.expect_code(2);
    let (code, body) = ui.request(
        "POST",
        &format!("/api/plans/{id}/approve"),
        &auth,
        r#"{"job":"free"}"#,
    );
    assert_eq!(code, 400, "{body}");
    let doc: Value = serde_json::from_str(&body).expect("JSON");
    let message = doc["error"].as_str().expect("error");
    assert!(
        cli.stderr.contains(message),
        "CLI said {:?}, dashboard {message:?}",
        cli.stderr
    );
    let (code, body) = ui.request(
        "POST",
        &format!("/api/plans/{id}/reject"),
        &auth,
        r#"{"job":"deploy"}"#,
    );
    assert_eq!(code, 400);
    assert!(body.contains("reason"), "{body}");
    let (code, _) = ui.request("POST", &format!("/api/plans/{id}/explode"), &auth, "{}");
    assert_eq!(code, 400);
    // The right action works, and the plan then waits for nothing.
    let (code, body) = ui.request(
        "POST",
        &format!("/api/plans/{id}/reject"),
        &auth,
        r#"{"job":"deploy","reason":"not today"}"#,
    );
    assert_eq!(code, 200, "{body}");
    let doc = repo.status(Some(&id));
    let deploy = orchestrator_testkit::fixtures::job_doc(&doc, "deploy");
    assert_eq!(deploy["status"], "failed", "{doc:#}");
    assert!(
        deploy["error"].as_str().unwrap_or("").contains("not today"),
        "{doc:#}"
    );
}

#[test]
fn the_plans_page_is_paged() {
    let repo = Repo::new();
    let tiny = repo.plan(
        "tiny.json",
        &json!({"name": "tiny", "isolation": "none", "jobs": [job("one", "true", &[])]}),
    );
    for _ in 0..55 {
        repo.run(&["run", tiny.to_str().expect("utf-8"), "-q"])
            .expect_code(0);
    }
    let ui = Dashboard::start(&repo);
    let (code, first) = ui.request("GET", &ui.with_token("/"), &[], "");
    assert_eq!(code, 200);
    assert_eq!(first.matches("<tr data-plan=").count(), 50);
    assert!(first.contains("55 plan(s)"));
    let (_, second) = ui.request("GET", &ui.with_token("/?page=2"), &[], "");
    assert_eq!(second.matches("<tr data-plan=").count(), 5);
}

/// Where playwright-core is, or why the browser test cannot run.
fn driver() -> Result<(PathBuf, PathBuf), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let playwright = std::env::var_os("BROWSER_DRIVER_PREFIX")
        .map_or_else(|| root.join(".browser-driver"), PathBuf::from)
        .join("node_modules/playwright-core");
    if !playwright.join("package.json").is_file() {
        return Err(format!(
            "{} is missing (scripts/install-browser.sh)",
            playwright.display()
        ));
    }
    let chromium = PathBuf::from("/usr/bin/chromium");
    if !chromium.is_file() {
        return Err("Debian's chromium is not installed (scripts/install-browser.sh)".into());
    }
    Ok((playwright, chromium))
}

#[test]
fn a_browser_follows_a_running_plan_and_approves_its_gate() {
    let (playwright, chromium) = match driver() {
        Ok(found) => found,
        Err(why) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: {why}");
            return;
        }
        Err(why) => panic!("{why}"),
    };
    let repo = Repo::new();
    let done = repo.plan(
        "done.json",
        &json!({"name": "finished", "jobs": [job("lone", "echo l > lone.txt", &[])]}),
    );
    repo.run(&["run", done.to_str().expect("utf-8"), "-q"])
        .expect_code(0);
    let finished = plan_id(&repo);
    let go = repo.scratch.join("go");
    let wait_for_go = format!(
        "while [ ! -f '{}' ]; do sleep 0.05; done; echo s > slow.txt",
        go.display()
    );
    let running = repo.plan(
        "running.json",
        &json!({"name": "live", "jobs": [
            job("slow", &wait_for_go, &[]),
            job("left", "echo l > left.txt", &["slow"]),
            job("right", "echo r > right.txt", &["slow"]),
            {"producerId": "gate", "task": "Ship it", "work": "echo g > gate.txt",
             "dependencies": ["left", "right"], "approval": "before"},
        ]}),
    );
    let mut run = repo.spawn(&["run", running.to_str().expect("utf-8"), "-q"]);
    let running_id = loop {
        match repo.latest_plan() {
            Some(id) if id != finished => break id,
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let ui = Dashboard::start(&repo);
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let config = json!({
        "url": ui.url, "running": running_id, "finished": finished,
        "goFile": go, "screenshot": shot, "playwright": playwright,
        "chromium": chromium,
    });
    let driven = std::process::Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/driver.cjs"))
        .arg(config.to_string())
        .output()
        .expect("run node");
    let _ = run.kill();
    let _ = run.wait();
    let stdout = String::from_utf8_lossy(&driven.stdout);
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "driver output ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&driven.stderr)
        )
    });
    assert!(seen.get("error").is_none(), "the driver failed: {seen:#}");
    let listed: Vec<&str> = seen["plansListed"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        listed.contains(&finished.as_str()) && listed.contains(&running_id.as_str()),
        "{seen:#}"
    );
    // Every job and the snapshot validation, drawn.
    assert_eq!(
        seen["dagNodes"].as_array().map(Vec::len),
        Some(5),
        "{seen:#}"
    );
    // From the job's end (its last phase's, as stored) to the page showing it succeeded.
    let shown = seen["shownAt"].as_u64().expect("shownAt");
    let ended = seen["slowEndedAt"].as_u64().expect("slowEndedAt");
    let latency = shown.saturating_sub(ended);
    eprintln!(
        "the page showed `slow` succeeded {latency} ms after it was ({} ms after its go-file)",
        seen["updateMs"]
    );
    assert!(
        latency < 2000,
        "the page showed `slow` succeeded {latency} ms after it was"
    );
    assert_eq!(seen["reloaded"], 1, "no reload: {seen:#}");
    let waiting = seen["waitingRows"].as_array().expect("waiting rows");
    assert!(
        waiting
            .iter()
            .any(|r| r.as_str().is_some_and(|t| t.contains("gate"))),
        "{seen:#}"
    );
    assert!(
        seen["finalStatus"]
            .as_str()
            .is_some_and(|s| s.contains("succeeded")),
        "{seen:#}"
    );
    let bars = seen["bars"].as_array().expect("bars");
    let timeline = seen["timeline"].as_array().expect("timeline");
    assert!(!timeline.is_empty());
    assert_eq!(
        bars, timeline,
        "one bar per phase per job, as the stored phase records"
    );
    assert!(
        seen["jobHeading"]
            .as_str()
            .is_some_and(|h| h.contains("slow")),
        "{seen:#}"
    );
    assert!(
        seen["finishedStatus"]
            .as_str()
            .is_some_and(|s| s.contains("succeeded")),
        "{seen:#}"
    );
    assert_eq!(seen["failedRequests"], json!([]), "{seen:#}");
    assert_eq!(
        seen["outsideRequests"],
        json!([]),
        "nothing fetched from elsewhere: {seen:#}"
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    let colours = seen["colours"].as_u64().expect("colours");
    assert!(colours >= 8, "the screenshot has {colours} colours");
    // The plan really landed: the gate's work is on the target branch.
    let doc = repo.status(Some(&running_id));
    let target = doc["targetBranch"].as_str().expect("target");
    assert_eq!(repo.show(target, "gate.txt"), "g\n");
}

#[test]
fn no_secret_value_reaches_a_page() {
    let repo = Repo::new();
    let secret = "hunter2-very-secret";
    let plan = repo.plan(
        "secret.json",
        &json!({"name": "secret", "env": {"DEPLOY_TOKEN": secret}, "jobs": [
            job("tell", "echo token is $DEPLOY_TOKEN; echo \"$DEPLOY_TOKEN\" > told.txt", &[]),
            job("fail", "echo failing with $DEPLOY_TOKEN >&2; exit 3", &[]),
        ]}),
    );
    repo.run(&["run", plan.to_str().expect("utf-8"), "-q"])
        .expect_code(1);
    let id = plan_id(&repo);
    let ui = Dashboard::start(&repo);
    let mut pages = vec![
        "/".to_owned(),
        "/waiting".to_owned(),
        format!("/plans/{id}"),
        format!("/plans/{id}/json"),
        format!("/plans/{id}/timeline"),
    ];
    pages.extend((0..3).map(|n| format!("/plans/{id}/jobs/{n}")));
    for page in pages {
        let (code, body) = ui.request("GET", &ui.with_token(&page), &[], "");
        assert_eq!(code, 200, "{page}: {body}");
        assert!(!body.contains(secret), "{page} shows the secret:\n{body}");
    }
    // The log is shown, redacted.
    let (_, job) = ui.request(
        "GET",
        &ui.with_token(&format!("/plans/{id}/jobs/0")),
        &[],
        "",
    );
    assert!(job.contains("token is"), "{job}");
}

#[test]
fn a_port_in_use_is_an_error_naming_it() {
    let repo = Repo::new();
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let run = repo.run(&["ui", "--no-open", "--port", &port]);
    run.expect_code(3);
    assert!(
        run.stderr.contains(&format!("--port {port}")),
        "{}",
        run.stderr
    );
}

/// A contract-checked pipeline of stand-in Claude Code agents: its stages are sub-jobs of the
/// pipeline job, listed under it, each with its usage; then a session with one turn.
#[cfg(unix)]
#[test]
fn sub_jobs_sit_under_their_parent_and_sessions_show_their_turns() {
    let repo = Repo::new();
    let bin = repo.scratch.join("bin");
    common::stand_in_pipeline(&bin, "  *) reply='a session reply' ;;");
    let plan = repo.plan(
        "pipeline.json",
        &json!({"name": "piped", "jobs": [
            {"producerId": "team", "task": "the team", "dependencies": [],
             "work": {"type": "pipeline", "task": "Greet", "agent": "claude"}},
        ]}),
    );
    let run = repo
        .command_with_agents(&bin, &["run", plan.to_str().expect("utf-8"), "-q"])
        .output()
        .expect("run");
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let id = plan_id(&repo);
    let new = repo
        .command_with_agents(&bin, &["session", "new", "--json"])
        .env("ORCHESTRATOR_AGENT", "claude")
        .output()
        .expect("session new");
    let session: Value = serde_json::from_slice(&new.stdout).expect("session JSON");
    let sid = session["sessionId"].as_str().expect("sessionId").to_owned();
    let sent = repo
        .command_with_agents(&bin, &["session", "send", &sid, "say hello"])
        .env("ORCHESTRATOR_AGENT", "claude")
        .output()
        .expect("session send");
    assert_eq!(
        sent.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );

    let ui = Dashboard::start(&repo);
    let (code, page) = ui.request("GET", &ui.with_token(&format!("/plans/{id}")), &[], "");
    assert_eq!(code, 200);
    let jobs = &page[page.find("<table class=\"jobs\"").expect("jobs table")..];
    let rows: Vec<(&str, &str)> = jobs
        .split("<tr data-node=")
        .skip(1)
        .map(|row| {
            let depth = row
                .split("class=\"depth-")
                .nth(1)
                .and_then(|r| r.get(..1))
                .unwrap_or("?");
            let link = row.split("<a href=").nth(1).unwrap_or("");
            let label = link
                .split_once("\">")
                .and_then(|(_, r)| r.split('<').next())
                .unwrap_or("?");
            (label, depth)
        })
        .collect();
    let team = rows
        .iter()
        .position(|(l, _)| *l == "team")
        .expect("the pipeline job");
    let stages: Vec<&(&str, &str)> = rows
        .iter()
        .filter(|(l, _)| l.starts_with("team/"))
        .collect();
    assert!(stages.len() >= 3, "{rows:?}");
    for (n, stage) in stages.iter().enumerate() {
        assert_eq!(
            stage.1, "1",
            "a stage is indented under the pipeline: {rows:?}"
        );
        assert_eq!(
            rows[team + 1 + n],
            **stage,
            "stages follow their parent: {rows:?}"
        );
    }
    assert!(
        page.contains("$0.0010"),
        "usage per job and per plan: {jobs}"
    );
    assert!(
        page.contains("class=\"node st-succeeded sub\""),
        "sub-jobs are marked in the DAG"
    );

    let (code, list) = ui.request("GET", &ui.with_token("/sessions"), &[], "");
    assert_eq!(code, 200);
    assert!(list.contains(&sid), "{list}");
    let (code, one) = ui.request("GET", &ui.with_token(&format!("/sessions/{sid}")), &[], "");
    assert_eq!(code, 200, "{one}");
    assert!(
        one.contains("say hello") && one.contains("a session reply"),
        "{one}"
    );
    assert!(
        one.contains("refs/orchestrator/sessions/"),
        "the turn's checkpoint: {one}"
    );
    let (code, _) = ui.request("GET", &ui.with_token("/sessions/nosuch"), &[], "");
    assert_eq!(code, 404);
}
