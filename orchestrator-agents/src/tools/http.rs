//! The tool server's listener: HTTP/1.1 on `127.0.0.1`, each request checked before rmcp's
//! streamable HTTP service sees it — the path names the job (`/jobs/<planId>/<nodeId>/mcp`),
//! the `Authorization: Bearer` token must be open for that job, and the `Host` must be a
//! loopback one (no DNS rebinding).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use super::grants::Grants;
use super::handler::ToolHandler;

/// The endpoint path of job `node` of `plan`.
pub(crate) fn job_path(plan: &str, node: &str) -> String {
    format!("/jobs/{plan}/{node}/mcp")
}

/// The plan and node a request path names, if it is a job endpoint.
fn parse_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/jobs/")?.strip_suffix("/mcp")?;
    let (plan, node) = rest.split_once('/')?;
    (!plan.is_empty() && !node.is_empty() && !node.contains('/')).then_some((plan, node))
}

/// Binds the listener and serves on the current runtime until `stop`; returns the address.
pub(crate) fn serve(grants: Arc<Grants>, stop: CancellationToken) -> std::io::Result<SocketAddr> {
    let runtime = tokio::runtime::Handle::try_current().map_err(|e| {
        std::io::Error::other(format!("the tool server needs a tokio runtime: {e}"))
    })?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let listener = {
        let _entered = runtime.enter();
        TcpListener::from_std(listener)?
    };
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    let mcp = StreamableHttpService::new(
        || Ok(ToolHandler::new()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    runtime.spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = stop.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let (grants, mcp, stop) = (grants.clone(), mcp.clone(), stop.clone());
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req| handle(req, grants.clone(), mcp.clone()));
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    () = stop.cancelled() => {}
                    _ = conn => {}
                }
            });
        }
    });
    Ok(addr)
}

type Body = BoxBody<Bytes, Infallible>;

async fn handle(
    mut req: Request<Incoming>,
    grants: Arc<Grants>,
    mut mcp: StreamableHttpService<ToolHandler, LocalSessionManager>,
) -> Result<Response<Body>, Infallible> {
    if !loopback_host(&req) {
        return Ok(refusal(
            StatusCode::FORBIDDEN,
            "the Host must be a loopback address",
        ));
    }
    let Some((plan, node)) = parse_path(req.uri().path()) else {
        return Ok(refusal(StatusCode::NOT_FOUND, "no such endpoint"));
    };
    let token = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let Some(grant) = grants.check(token, plan, node) else {
        return Ok(refusal(
            StatusCode::UNAUTHORIZED,
            "this token is not valid for this job",
        ));
    };
    // The tools find the grant of the call in the request's extensions (rmcp hands the
    // request parts to each tool call).
    req.extensions_mut().insert(grant);
    mcp.call(req).await
}

/// Whether the request's Host is `127.0.0.1`, `localhost` or `[::1]` (with any port).
fn loopback_host<B>(req: &Request<B>) -> bool {
    let Some(host) = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "127.0.0.1" | "localhost" | "[::1]")
}

fn refusal(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(message.to_owned())).boxed());
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_paths_round_trip_and_nothing_else_parses() {
        assert_eq!(parse_path(&job_path("p1", "n1")), Some(("p1", "n1")));
        for bad in [
            "/jobs/p1/mcp",
            "/jobs//n1/mcp",
            "/jobs/p1/n1/x/mcp",
            "/mcp",
            "/jobs/p1/n1",
        ] {
            assert_eq!(parse_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_loopback_hosts_pass() {
        let with_host = |h: &str| {
            Request::builder()
                .header("host", h)
                .body(())
                .unwrap_or_default()
        };
        assert!(loopback_host(&with_host("127.0.0.1:4000")));
        assert!(loopback_host(&with_host("localhost:1")));
        assert!(loopback_host(&with_host("[::1]:80")));
        assert!(!loopback_host(&with_host("evil.example:4000")));
        assert!(!loopback_host(&with_host("127.0.0.1.evil.example")));
        assert!(!loopback_host(&Request::new(())));
    }
}
