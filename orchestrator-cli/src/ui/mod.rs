//! `orchestrator ui`: a live dashboard of the repository's plans and sessions (SPEC §18).
//!
//! An HTTP/1.1 server on `127.0.0.1` (hyper, as the agents' tool server) whose pages are
//! rendered from what the SDK answers ([`pages`], [`draw`]); every request passes the
//! [`guard::Guard`] (token, Host, Origin). Pages stay current through a server-sent event
//! stream fed by the store's change notifications ([`feed`]); actions ([`actions`]) run the
//! commands' own code, so they answer with the commands' own errors. Assets are compiled in.

mod actions;
mod draw;
mod feed;
mod guard;
mod html;
mod pages;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use orchestrator_agents::session::Sessions;
use orchestrator_core::{PlanId, PlanStatus};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc, OnceCell};

use crate::cli::UiArgs;
use crate::error::{CliError, CliResult, Exit};
use crate::workspace::Workspace;
use feed::{Change, Feed};
use guard::{query_param, Guard, Refusal};
use html::{esc, page, Live};

const APP_CSS: &str = include_str!("assets/app.css");
const APP_JS: &str = include_str!("assets/app.js");

/// The largest action body read.
const MAX_BODY: usize = 64 * 1024;

/// How often an idle event stream says it is still there (proxies and browsers drop silent
/// connections).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The dashboard's shared state.
pub struct Ui {
    ws: Workspace,
    guard: Guard,
    feed: Feed,
    sessions: OnceCell<Sessions>,
    /// The last `plan` event of each plan with the change number it was loaded for, shared by
    /// the pages showing it ([`plan_event`]).
    payloads: tokio::sync::Mutex<std::collections::HashMap<PlanId, (u64, Bytes)>>,
}

impl Ui {
    fn token(&self) -> &str {
        self.guard.token()
    }

    async fn sessions(&self) -> CliResult<&Sessions> {
        self.sessions
            .get_or_try_init(|| crate::commands::session::sessions_of(&self.ws))
            .await
    }
}

/// `ui [--repo DIR] [--port N] [--no-open]`: serves until Ctrl-C or SIGTERM.
pub async fn serve(args: UiArgs) -> CliResult<Exit> {
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_database(&args.database)
        .await?;
    let listener = TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|e| {
            CliError::other(format!(
                "--port {}: cannot listen on 127.0.0.1: {e}",
                args.port
            ))
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| CliError::other(format!("cannot read the listening address: {e}")))?
        .port();
    let token = uuid::Uuid::new_v4().simple().to_string();
    let feed = if ws.database.is_some() {
        let plans = ws.plans.clone();
        Feed::tick(move || {
            let plans = plans.clone();
            async move {
                plans.list().await.map_or_else(
                    |_| Vec::new(),
                    |l| {
                        l.plans
                            .into_iter()
                            .filter(|p| !p.status.is_terminal())
                            .map(|p| p.plan_id)
                            .collect()
                    },
                )
            }
        })
    } else {
        Feed::watch_files(ws.store.root()).map_err(|e| {
            CliError::other(format!(
                "cannot watch {} for changes: {e}",
                ws.store.root().display()
            ))
        })?
    };
    let url = format!("http://127.0.0.1:{port}/?token={token}");
    outln!("{url}");
    eprintln!(
        "dashboard of {} at {url} (Ctrl-C stops it)",
        ws.plans_location()
    );
    if !args.no_open {
        open_browser(&url);
    }
    let ui = Arc::new(Ui {
        ws,
        guard: Guard::new(token, port),
        feed,
        sessions: OnceCell::new(),
        payloads: tokio::sync::Mutex::default(),
    });
    let stop = crate::commands::session::interrupted();
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else { continue };
        let ui = ui.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, ui.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
    Ok(Exit::Ok)
}

/// Opens `url` in the desktop's browser, if there is one; quietly does nothing otherwise.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|mut child| std::thread::spawn(move || child.wait()));
}

type Body = BoxBody<Bytes, Infallible>;

async fn handle(req: Request<Incoming>, ui: Arc<Ui>) -> Result<Response<Body>, Infallible> {
    let query = req.uri().query().map(str::to_owned);
    if let Err(refusal) = ui.guard.check(req.headers(), query.as_deref()) {
        return Ok(match refusal {
            Refusal::Token => text(
                StatusCode::UNAUTHORIZED,
                "401 unauthorized: the token is missing or wrong",
            ),
            Refusal::Host => text(
                StatusCode::FORBIDDEN,
                "403 forbidden: not this dashboard's Host",
            ),
            Refusal::Origin => text(
                StatusCode::FORBIDDEN,
                "403 forbidden: a request from another site",
            ),
        });
    }
    let path = req.uri().path().to_owned();
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let fragment = query_param(query.as_deref(), "fragment").is_some();
    let method = req.method().clone();
    let response = match (&method, parts.as_slice()) {
        (&Method::GET, []) => {
            let n = query_param(query.as_deref(), "page")
                .and_then(|p| p.parse().ok())
                .unwrap_or(1);
            shown(
                &ui,
                "Plans",
                Live::Plans,
                fragment,
                pages::plans(&ui, n).await,
            )
        }
        (&Method::GET, ["waiting"]) => shown(
            &ui,
            "Waiting",
            Live::Plans,
            fragment,
            pages::waiting(&ui).await,
        ),
        (&Method::GET, ["sessions"]) => shown(
            &ui,
            "Sessions",
            Live::Sessions,
            fragment,
            pages::sessions(&ui).await,
        ),
        (&Method::GET, ["sessions", id]) => shown(
            &ui,
            "Session",
            Live::Sessions,
            fragment,
            pages::session(&ui, id).await,
        ),
        (&Method::GET, ["plans", plan, rest @ ..]) => match ui.ws.resolve_plan(plan).await {
            Err(e) => not_found(&ui, &e.message),
            Ok(id) => plan_get(&ui, &id, rest, fragment).await,
        },
        (&Method::GET, ["events"]) => {
            events(ui.clone(), query_param(query.as_deref(), "live").as_deref())
        }
        (&Method::GET, ["assets", "app.css"]) => asset(APP_CSS, "text/css; charset=utf-8"),
        (&Method::GET, ["assets", "app.js"]) => asset(APP_JS, "text/javascript; charset=utf-8"),
        (&Method::POST, ["api", "plans", plan, action]) => {
            // An action's arguments are a few words; a larger body is not read.
            match http_body_util::Limited::new(req.into_body(), MAX_BODY)
                .collect()
                .await
            {
                Ok(body) => actions::post(&ui, plan, action, &body.to_bytes()).await,
                Err(_) => text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "413: an action's body is at most 64 KiB of JSON",
                ),
            }
        }
        (_, _) => not_found(&ui, &format!("no page at {path}")),
    };
    Ok(response)
}

/// The pages under `/plans/<id>`: the plan, its timeline alone, its JSON, a job.
async fn plan_get(ui: &Ui, id: &PlanId, rest: &[&str], fragment: bool) -> Response<Body> {
    match rest {
        [] => shown(
            ui,
            "Plan",
            Live::Plan(id.as_str()),
            fragment,
            pages::plan(ui, id).await,
        ),
        ["timeline"] => match ui.ws.load(id).await {
            Ok(record) => html_response(StatusCode::OK, pages::timeline(&record)),
            Err(e) => error_page(ui, &e),
        },
        ["json"] => match ui.ws.load(id).await {
            Ok(record) => json_response(StatusCode::OK, &crate::report::plan_json(&record)),
            Err(e) => error_page(ui, &e),
        },
        ["jobs", n] => {
            let Some(n) = n.parse::<usize>().ok() else {
                return not_found(
                    ui,
                    &format!("plan {id} has no job `{n}` (jobs are numbered)"),
                );
            };
            match pages::job(ui, id, n).await {
                Ok(Some(body)) => shown(ui, "Job", Live::Plan(id.as_str()), fragment, Ok(body)),
                Ok(None) => not_found(ui, &format!("plan {id} has no job number {n}")),
                Err(e) => error_page(ui, &e),
            }
        }
        _ => not_found(ui, &format!("no such page of plan {id}")),
    }
}

/// A page (or, for a live update, only its content).
fn shown(
    ui: &Ui,
    title: &str,
    live: Live<'_>,
    fragment: bool,
    body: CliResult<String>,
) -> Response<Body> {
    match body {
        Ok(body) if fragment => html_response(StatusCode::OK, body),
        Ok(body) => html_response(
            StatusCode::OK,
            page(
                title,
                ui.token(),
                live,
                &format!("<div id=\"content\">{body}</div>"),
            ),
        ),
        Err(e) => error_page(ui, &e),
    }
}

/// The page of an error: what the CLI calls invalid input (an unknown plan, job or session) is
/// not found (404), anything else 500.
fn error_page(ui: &Ui, e: &CliError) -> Response<Body> {
    if e.exit == Exit::Invalid {
        return not_found(ui, &e.message);
    }
    message_page(ui, StatusCode::INTERNAL_SERVER_ERROR, "Error", &e.message)
}

fn not_found(ui: &Ui, message: &str) -> Response<Body> {
    message_page(ui, StatusCode::NOT_FOUND, "Not found", message)
}

/// A page saying `message` under the heading `title`.
fn message_page(ui: &Ui, status: StatusCode, title: &str, message: &str) -> Response<Body> {
    let body = format!("<h1>{title}</h1><p class=\"err\">{}</p>", esc(message));
    html_response(status, page(title, ui.token(), Live::None, &body))
}

fn asset(body: &'static str, kind: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed());
    r.headers_mut()
        .insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static(kind));
    r
}

fn with_type(status: StatusCode, body: String, kind: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static(kind));
    h.insert(
        CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    // Pages never run in another site's frame, and only this origin's scripts run in them.
    h.insert(
        "x-frame-options",
        hyper::header::HeaderValue::from_static("DENY"),
    );
    h.insert(
        "content-security-policy",
        hyper::header::HeaderValue::from_static(
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
        ),
    );
    r
}

fn html_response(status: StatusCode, body: String) -> Response<Body> {
    with_type(status, body, "text/html; charset=utf-8")
}

fn json_response(status: StatusCode, doc: &serde_json::Value) -> Response<Body> {
    with_type(status, doc.to_string(), "application/json")
}

fn text(status: StatusCode, message: &str) -> Response<Body> {
    with_type(status, format!("{message}\n"), "text/plain; charset=utf-8")
}

/// The event stream of a page: `live` is `plans`, `sessions` or `plan:<id>`. A plan's page gets
/// `plan` events with the status of the plan and of every node; the others a `change` event
/// naming what changed. Every stream starts with a `hello` event.
fn events(ui: Arc<Ui>, live: Option<&str>) -> Response<Body> {
    let live = live.unwrap_or("plans").to_owned();
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let mut changes = ui.feed.subscribe();
    tokio::spawn(async move {
        let plan = live.strip_prefix("plan:").map(PlanId::from);
        if let Some(id) = &plan {
            ui.feed.follow_logs(id);
        }
        if tx
            .send(Bytes::from_static(b"event: hello\ndata: {}\n\n"))
            .await
            .is_err()
        {
            return;
        }
        // The page was drawn before this stream listened: a change between the two would never
        // reach it, so a plan's page gets the plan's state as of now (the stream listens
        // already, so nothing after this load is missed either).
        if let Some(id) = &plan {
            if let Some(m) = plan_event(&ui, id).await {
                if tx.send(m).await.is_err() {
                    return;
                }
            }
        }
        loop {
            let change = tokio::select! {
                c = changes.recv() => c,
                () = tokio::time::sleep(KEEP_ALIVE) => {
                    if tx.send(Bytes::from_static(b": still here\n\n")).await.is_err() { return; }
                    continue;
                }
            };
            let message = match (change, &plan) {
                (Err(broadcast::error::RecvError::Closed), _) => return,
                // Missed some: whatever the page shows may have changed.
                (Err(broadcast::error::RecvError::Lagged(_)), Some(id)) => {
                    plan_event(&ui, id).await
                }
                (Err(broadcast::error::RecvError::Lagged(_)), None) => Some(change_event("*")),
                (Ok(Change::Plan(changed)), Some(id)) if &changed == id => {
                    plan_event(&ui, id).await
                }
                (Ok(Change::Plan(changed)), None) if live == "plans" => {
                    Some(change_event(changed.as_str()))
                }
                (Ok(Change::Sessions), None) if live == "sessions" => {
                    Some(change_event("sessions"))
                }
                _ => None,
            };
            if let Some(m) = message {
                if tx.send(m).await.is_err() {
                    return;
                }
            }
        }
    });
    let body = StreamBody::new(
        tokio_stream::wrappers::ReceiverStream::new(rx).map(|b| Ok(Frame::data(b))),
    );
    let mut r = Response::new(BodyExt::boxed(body));
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    r
}

fn change_event(what: &str) -> Bytes {
    Bytes::from(format!(
        "event: change\ndata: {}\n\n",
        json!({ "changed": what })
    ))
}

/// A plan's state for its page: its status, counts and every node's status, by node index.
/// Loaded once per announced change, whatever the number of pages showing the plan.
async fn plan_event(ui: &Ui, id: &PlanId) -> Option<Bytes> {
    let generation = ui.feed.generation(id);
    let mut payloads = ui.payloads.lock().await;
    if let Some((seen, payload)) = payloads.get(id) {
        if *seen >= generation {
            return Some(payload.clone());
        }
    }
    let record = ui.ws.plans.load(id).await.ok()?;
    let c = record.state.counts();
    let status = record.status();
    let doc = json!({
        "status": status.as_str(),
        "ended": status.is_terminal() || status == PlanStatus::Archived,
        "counts": {"succeeded": c.succeeded, "running": c.active, "failed": c.failed},
        "nodes": record.state.nodes.iter().map(|n| n.status.as_str()).collect::<Vec<_>>(),
    });
    let payload = Bytes::from(format!("event: plan\ndata: {doc}\n\n"));
    payloads.insert(id.clone(), (generation, payload.clone()));
    Some(payload)
}
