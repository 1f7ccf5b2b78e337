//! The tools (SPEC §15, names and arguments exactly as there). Each call acts on the grant
//! the HTTP layer found for its token; a bad argument is a tool error naming it, and the
//! agent's turn goes on.

use std::sync::Arc;
use std::time::Duration;

use orchestrator_core::ids::now_millis;
use orchestrator_core::schedule::{Schedule, WallClock};
use orchestrator_core::tools::{Cron, CronChange, Park};
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;

use super::grants::Grant;

/// The tools the server offers, in the order they are listed.
pub const TOOL_NAMES: [&str; 13] = [
    "wait",
    "cron",
    "cron_at",
    "ask_user",
    "spawn_agent",
    "message_agent",
    "check_agents",
    "wait_for_agents",
    "complete_agent",
    "cancel_agent",
    "delete_agent",
    "list_sessions",
    "list_available_models",
];

/// What the agent is told after a call that ends its turn.
pub(super) const END_TURN: &str =
    "End your turn now: reply with one short sentence and make no more \
    tool calls. Your files are kept as they are.";

pub(super) type ToolResult = Result<CallToolResult, rmcp::ErrorData>;

/// The tool handler of one MCP session (rmcp makes one per session; the grant comes with
/// each call).
#[derive(Debug, Clone)]
pub(crate) struct ToolHandler {
    tool_router: ToolRouter<Self>,
}

impl ToolHandler {
    pub(crate) fn new() -> Self {
        ToolHandler {
            tool_router: Self::tool_router() + Self::agents_router() + Self::models_router(),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct WaitArgs {
    /// Seconds to wait.
    seconds: i64,
    /// Why (repeated to you when the wait ends).
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct CronArgs {
    /// Seconds from the end of each turn to the next firing.
    #[serde(default)]
    seconds: Option<i64>,
    /// Why (repeated to you at each firing).
    #[serde(default)]
    reason: Option<String>,
    /// `cancel` to stop the cron.
    #[serde(default)]
    action: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct CronAtArgs {
    /// Minute of the hour, 0-59.
    #[serde(default)]
    minute: Option<i64>,
    /// Hour of the day, 0-23 (absent: every hour).
    #[serde(default)]
    hour: Option<i64>,
    /// Day of the week, 0 (Sunday) - 6 (absent: every day).
    #[serde(default)]
    day_of_week: Option<i64>,
    /// Day of the month, 1-31 (absent: every day).
    #[serde(default)]
    day_of_month: Option<i64>,
    /// IANA time zone, e.g. `Europe/Berlin` or `UTC`.
    #[serde(default)]
    tz: Option<String>,
    /// Why (repeated to you at each firing).
    #[serde(default)]
    reason: Option<String>,
    /// `cancel` to stop the cron.
    #[serde(default)]
    action: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct AskArgs {
    /// The question for a person.
    question: String,
    /// Answers to choose from.
    #[serde(default)]
    choices: Vec<String>,
    /// Whether an answer outside `choices` is accepted (default: true).
    #[serde(default, alias = "allow_freeform")]
    allow_freeform: Option<bool>,
}

pub(super) fn text(result: Result<String, String>) -> ToolResult {
    Ok(match result {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(text) => CallToolResult::error(vec![ContentBlock::text(format!("error: {text}"))]),
    })
}

fn reason_of(reason: Option<String>) -> String {
    reason.unwrap_or_default().trim().to_owned()
}

/// `cancel` or nothing: anything else is a bad `action`.
fn cancels(action: Option<&str>) -> Result<bool, String> {
    match action.map(str::trim) {
        None | Some("") => Ok(false),
        Some("cancel") => Ok(true),
        Some(other) => Err(format!(
            "action: `{other}` is not an action; the only one is `cancel`"
        )),
    }
}

#[tool_router]
impl ToolHandler {
    #[tool(
        name = "wait",
        description = "Wait `seconds` before going on (e.g. for CI, a deploy, a rate limit). A \
            short wait returns when it is over; a long one saves your work, ends your turn and \
            resumes this conversation when the time is up (surviving restarts)."
    )]
    async fn wait(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<WaitArgs>,
    ) -> ToolResult {
        let Some(grant) = grant_of(&parts) else {
            return text(Err(NO_GRANT.to_owned()));
        };
        let Ok(seconds) = u64::try_from(args.seconds) else {
            return text(Err(format!(
                "seconds: must be 0 or more, not {}",
                args.seconds
            )));
        };
        let reason = reason_of(args.reason);
        if Duration::from_secs(seconds) <= grant.job.wait_threshold {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            return text(Ok(format!("Waited {seconds} s.")));
        }
        let park = Park::wait(now_millis(), seconds, &reason);
        text(grant.park(park).map(|()| {
            format!(
                "The wait of {seconds} s is scheduled; this conversation resumes when it is \
                 over. {END_TURN}"
            )
        }))
    }

    #[tool(
        name = "cron",
        description = "Wake every `seconds` after each turn you end, with `reason`, until you \
            call cron(action: \"cancel\"); then ending your turn finishes the job."
    )]
    async fn cron(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<CronArgs>,
    ) -> ToolResult {
        let Some(grant) = grant_of(&parts) else {
            return text(Err(NO_GRANT.to_owned()));
        };
        text(set_cron(&grant, args.action.as_deref(), || {
            let seconds = args
                .seconds
                .ok_or_else(|| "seconds: give the seconds between firings".to_owned())?;
            let schedule = Schedule::every(seconds).map_err(|e| e.to_string())?;
            Ok((schedule, reason_of(args.reason.clone())))
        }))
    }

    #[tool(
        name = "cron_at",
        description = "Wake at wall-clock times in time zone `tz` (minute, and optionally \
            hour, day_of_week 0=Sunday, day_of_month), with `reason`, after each turn you end, \
            until you call cron_at(action: \"cancel\")."
    )]
    async fn cron_at(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<CronAtArgs>,
    ) -> ToolResult {
        let Some(grant) = grant_of(&parts) else {
            return text(Err(NO_GRANT.to_owned()));
        };
        text(set_cron(&grant, args.action.as_deref(), || {
            let minute = args
                .minute
                .ok_or_else(|| "minute: give the minute of the hour (0-59)".to_owned())?;
            let tz = args.tz.as_deref().ok_or_else(|| {
                "tz: give an IANA time zone such as Europe/Berlin or UTC".to_owned()
            })?;
            let clock = WallClock::new(minute, args.hour, args.day_of_week, args.day_of_month, tz)
                .map_err(|e| e.to_string())?;
            Ok((Schedule::At(clock), reason_of(args.reason.clone())))
        }))
    }

    #[tool(
        name = "ask_user",
        description = "Ask a person a question and wait for the answer: your turn ends, and \
            this conversation resumes with the answer (however long it takes)."
    )]
    async fn ask_user(
        &self,
        Extension(parts): Extension<http::request::Parts>,
        Parameters(args): Parameters<AskArgs>,
    ) -> ToolResult {
        let Some(grant) = grant_of(&parts) else {
            return text(Err(NO_GRANT.to_owned()));
        };
        let question = args.question.trim().to_owned();
        if question.is_empty() {
            return text(Err("question: must not be empty".to_owned()));
        }
        let choices: Vec<String> = args
            .choices
            .iter()
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty())
            .collect();
        let allow_freeform = args.allow_freeform.unwrap_or(true);
        if !allow_freeform && choices.is_empty() {
            return text(Err(
                "allowFreeform: false needs choices to pick from".to_owned()
            ));
        }
        let park = Park::Input {
            question,
            choices,
            allow_freeform,
        };
        text(grant.park(park).map(|()| {
            format!("Your question is sent to a person; the answer comes as the next message. {END_TURN}")
        }))
    }
}

#[tool_router(router = models_router, vis = "pub(crate)")]
impl ToolHandler {
    #[tool(
        name = "list_available_models",
        description = "The models you may name for sub-work, as provider:model, from the \
            repository's .model_providers.json (providers without credentials are left out)."
    )]
    async fn list_available_models(
        &self,
        Extension(parts): Extension<http::request::Parts>,
    ) -> ToolResult {
        let Some(grant) = grant_of(&parts) else {
            return text(Err(NO_GRANT.to_owned()));
        };
        let loaded =
            crate::providers::ModelProviders::load(&grant.job.dir, |var| std::env::var(var).ok());
        text(match loaded {
            Ok(providers) => {
                let models = providers.models();
                Ok(if models.is_empty() {
                    "No provider models are configured; use the CLI's own models.".to_owned()
                } else {
                    models.join("\n")
                })
            }
            Err(e) => Err(e.to_string()),
        })
    }
}

/// Sets the grant's cron from `make`, or cancels it when `action` is `cancel`.
fn set_cron(
    grant: &Grant,
    action: Option<&str>,
    make: impl FnOnce() -> Result<(Schedule, String), String>,
) -> Result<String, String> {
    if cancels(action)? {
        if !grant.has_cron() {
            return Err("action: there is no cron to cancel".to_owned());
        }
        grant.cron(CronChange::Cancel);
        return Ok("The cron is canceled: when you end this turn, the job finishes.".to_owned());
    }
    let (schedule, reason) = make()?;
    let cron = Cron::new(schedule, reason);
    let next = cron.next_after(now_millis()).map_err(|e| e.to_string())?;
    grant.cron(CronChange::Set(cron));
    let at = jiff::Timestamp::from_millisecond(next as i64)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{next} ms after the epoch"));
    Ok(format!(
        "The cron is set. When you end this turn, the job waits and wakes you at the next \
         firing (if you ended it now: {at}), and again after each turn, until you cancel it."
    ))
}

pub(super) const NO_GRANT: &str = "this call carries no valid grant";

pub(super) fn grant_of(parts: &http::request::Parts) -> Option<Arc<Grant>> {
    parts.extensions.get::<Arc<Grant>>().cloned()
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for ToolHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                super::SERVER_NAME,
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Durable tools of the orchestrator running this job: wait, cron, cron_at, \
                 ask_user, the sub-agent tools (spawn_agent, message_agent, check_agents, \
                 wait_for_agents, complete_agent, cancel_agent, delete_agent, list_sessions) \
                 and list_available_models. A long wait, a cron, a question and every \
                 sub-agent tool end your turn; the conversation resumes with the result.",
            )
    }
}
