//! The agents' own durable tools (SPEC §15): [`ToolServer`], one MCP server per engine on
//! loopback HTTP, serving every run of a job's agent the tools `wait`, `cron`, `cron_at`,
//! `ask_user`, the sub-agent tools ([`agents`]) and `list_available_models` through an
//! endpoint that names the job and a token only that run may use.
//!
//! A tool call never blocks the engine: a short `wait` sleeps inside the call; everything
//! durable is recorded on the run's grant and handed to the engine when the run ends
//! ([`AgentTools::close`]) — the engine then parks the job (`waiting(timer)` or
//! `waiting(input)`, holding no process) and resumes the agent's session when the wait ends.
//!
//! The pieces: [`grants`] (tokens and what each run asked for), [`http`] (the listener, the
//! token and Host checks in front of rmcp's streamable HTTP service) and [`handler`] (the
//! tools themselves). Each CLI runner registers the endpoint through the CLI's own MCP
//! configuration ([`crate::agent`]).

mod agents;
mod grants;
mod handler;
mod http;

use std::net::SocketAddr;
use std::sync::Arc;

use orchestrator_core::tools::{AgentTools, ToolEndpoint, ToolJob, ToolOutcome};
use tokio_util::sync::CancellationToken;

pub use handler::TOOL_NAMES;

use grants::Grants;

/// The name the tool server is registered under in every CLI's MCP configuration (so Claude
/// Code calls its tools `mcp__orchestrator__wait`, ...).
pub const SERVER_NAME: &str = "orchestrator";

/// The agents' tool server: MCP over streamable HTTP on `127.0.0.1`, an ephemeral port.
/// Register it with `OrchestratorBuilder::agent_tools`; it stops when the last clone is
/// dropped (or on [`ToolServer::shutdown`]).
///
/// ```no_run
/// # async fn f() -> Result<(), std::io::Error> {
/// use std::sync::Arc;
/// let tools = orchestrator_agents::tools::ToolServer::start()?;
/// let builder = orchestrator_core::Orchestrator::builder().agent_tools(Arc::new(tools));
/// # let _ = builder; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ToolServer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    addr: SocketAddr,
    grants: Arc<Grants>,
    stop: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl ToolServer {
    /// Binds `127.0.0.1` on an ephemeral port and serves, on the current tokio runtime, until
    /// dropped. Fails outside a runtime.
    pub fn start() -> std::io::Result<ToolServer> {
        let grants = Arc::new(Grants::default());
        let stop = CancellationToken::new();
        let addr = http::serve(grants.clone(), stop.clone())?;
        Ok(ToolServer {
            inner: Arc::new(Inner { addr, grants, stop }),
        })
    }

    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// Stops serving: every later call is refused.
    pub fn shutdown(&self) {
        self.inner.stop.cancel();
    }

    /// The tool calls refused so far for a wrong, revoked or another job's token (they are
    /// logged as warnings too).
    pub fn refused(&self) -> u64 {
        self.inner.grants.refused()
    }
}

impl AgentTools for ToolServer {
    fn open(&self, job: ToolJob) -> Result<ToolEndpoint, String> {
        if self.inner.stop.is_cancelled() {
            return Err("the agents' tool server has stopped".to_owned());
        }
        let url = format!(
            "http://{}{}",
            self.inner.addr,
            http::job_path(job.plan_id.as_str(), job.node_id.as_str())
        );
        let token = self.inner.grants.open(job);
        Ok(ToolEndpoint::new(url, token))
    }

    fn close(&self, endpoint: &ToolEndpoint) -> ToolOutcome {
        self.inner.grants.close(&endpoint.token)
    }
}
