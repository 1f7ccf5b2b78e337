//! How a tool answers: [`ToolResult`], the [`Failure`] a tool shows the model, and [`run`],
//! which parses a tool's arguments, runs its body and turns the outcome into an answer.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::args::{ArgError, Args};

/// What a tool answers: a result (structured JSON and a short text) or a tool-level error.
pub(crate) type ToolResult = Result<CallToolResult, rmcp::ErrorData>;

/// A tool failure shown to the model.
pub(crate) enum Failure {
    Arg(ArgError),
    /// The engine refused or failed: its error's kind ([`orchestrator_core::Error::kind`]),
    /// whether trying again may help, and the message.
    Engine {
        kind: &'static str,
        retryable: bool,
        message: String,
    },
}

impl From<ArgError> for Failure {
    fn from(e: ArgError) -> Self {
        Failure::Arg(e)
    }
}

impl From<orchestrator_core::Error> for Failure {
    fn from(e: orchestrator_core::Error) -> Self {
        Failure::engine(&e, e.to_string())
    }
}

impl From<orchestrator_core::StoreError> for Failure {
    fn from(e: orchestrator_core::StoreError) -> Self {
        orchestrator_core::Error::Store(e).into()
    }
}

impl Failure {
    /// A failure of the engine's kind `e`, told as `message`.
    pub(crate) fn engine(e: &orchestrator_core::Error, message: String) -> Self {
        Failure::Engine {
            kind: e.kind(),
            retryable: e.is_retryable(),
            message,
        }
    }

    /// A failure of this server's own (`kind` as [`orchestrator_core::Error::kind`] names
    /// kinds), not retryable.
    pub(crate) fn other(kind: &'static str, message: String) -> Self {
        Failure::Engine {
            kind,
            retryable: false,
            message,
        }
    }

    /// An argument error about another field: `field` maps the field it named.
    pub(crate) fn in_field(self, field: impl FnOnce(String) -> String) -> Self {
        match self {
            Failure::Arg(mut e) => {
                e.field = field(e.field);
                Failure::Arg(e)
            }
            f => f,
        }
    }
}

pub(crate) fn answer(result: Result<(Value, String), Failure>) -> ToolResult {
    Ok(match result {
        Ok((mut value, text)) => {
            // Job specs in answers carry their env: secret values are shown redacted (the
            // engine still runs with them).
            let names = orchestrator_core::redact::SecretNames::from_env();
            orchestrator_core::redact::redact_env_json(&mut value, &names);
            let mut r = CallToolResult::structured(value);
            r.content = vec![ContentBlock::text(text)];
            r
        }
        Err(Failure::Arg(e)) => {
            let mut r = CallToolResult::structured_error(e.to_json());
            r.content = vec![ContentBlock::text(e.text())];
            r
        }
        Err(Failure::Engine {
            kind,
            retryable,
            message,
        }) => {
            // The kind lets a client branch (`locked`: another process runs the plan;
            // `job_not_found`; `merge_conflict` ...); `retryable` says whether to try again.
            let mut r = CallToolResult::structured_error(json!({
                "error": kind,
                "retryable": retryable,
                "message": message,
            }));
            r.content = vec![ContentBlock::text(format!("error: {message}"))];
            r
        }
    })
}

/// Runs a tool: parses its arguments as `T`, runs `body` with them and answers.
pub(crate) async fn run<T: DeserializeOwned>(
    args: &Args<T>,
    body: impl AsyncFnOnce(T) -> Result<(Value, String), Failure>,
) -> ToolResult {
    answer(match args.parse() {
        Ok(a) => body(a).await,
        Err(e) => Err(e.into()),
    })
}
