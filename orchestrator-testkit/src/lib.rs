//! Test utilities for the orchestrator.
//!
//! [`fixtures`] holds the helpers the integration tests of the workspace share: temporary git
//! repositories made with the `git` CLI, checks against it, processes and waits.
//!
//! [`ModelServer`] is a scripted model endpoint on 127.0.0.1 that the real agent CLIs (Claude
//! Code, Codex, Copilot CLI, Gemini CLI) talk to instead of a provider. It speaks the wire
//! formats exactly — Anthropic Messages, OpenAI Responses, OpenAI Chat Completions and Gemini
//! `generateContent`, streamed (SSE) or not — and answers from a [`Script`]: which files to
//! write and which commands to run through the CLI's own tools, then a final text. Every reply
//! is computed from the request alone, so retries, side calls and resumed sessions need no
//! server state.
//!
//! ```
//! # async fn demo() -> std::io::Result<()> {
//! use orchestrator_testkit::{ModelServer, Script};
//! let server = ModelServer::start(
//!     Script::new().write_file("notes.txt", "hello\n").final_text("Wrote notes.txt."),
//! )
//! .await?;
//! // e.g. ANTHROPIC_BASE_URL=<server.url()> claude -p "write notes" …
//! assert!(server.requests().is_empty());
//! # Ok(()) }
//! ```

pub mod conversation;
pub mod fixtures;
pub mod http;
pub mod script;
mod server;
pub mod tools;
pub mod wire;

pub use conversation::{Conversation, Reply, ToolCall, ToolInput, ToolSpec};
pub use script::{Script, Step, Turn};
pub use server::{handle, ModelServer, RecordedRequest};
