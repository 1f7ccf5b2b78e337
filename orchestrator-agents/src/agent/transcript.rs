//! [`Transcript`]: what a parser learned from one run's output.

use std::collections::VecDeque;

use super::usage::AgentUsage;

/// Most error messages and plain lines kept for classification and failure messages.
const KEPT: usize = 20;

/// What an [`AgentRunner`](super::AgentRunner)'s parser learned from one run's output lines
/// (already redacted): usage, session id, whether the final result arrived and whether it
/// reported an error, and the error messages seen.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Transcript {
    /// Usage so far (session id and model included).
    pub usage: AgentUsage,
    /// The CLI printed its final result event: it should exit now (the hang guard starts).
    pub finished: bool,
    /// The final result reported a failure, with this message.
    pub result_error: Option<String>,
    /// Error messages from error events (the last 20).
    pub errors: VecDeque<String>,
    /// Output lines that were not JSON events, stderr included (the last 20).
    pub plain: VecDeque<String>,
}

impl Transcript {
    /// Records an error message of the CLI.
    pub fn error(&mut self, message: impl Into<String>) {
        push(&mut self.errors, message.into());
    }

    /// Records the final result: success, or a failure with its message.
    pub fn finish(&mut self, error: Option<String>) {
        self.finished = true;
        self.result_error = error;
    }

    /// Records the session id (the first one seen wins).
    pub fn session(&mut self, id: Option<String>) {
        if self.usage.session_id.is_none() {
            self.usage.session_id = id.filter(|s| !s.is_empty());
        }
    }

    /// Records a line that is not a JSON event.
    pub fn plain_line(&mut self, line: &str) {
        if !line.trim().is_empty() {
            push(&mut self.plain, line.to_owned());
        }
    }

    /// Everything the CLI said about a failure: the result error, error events, plain lines.
    pub fn said(&self) -> impl Iterator<Item = &str> {
        self.result_error
            .iter()
            .chain(&self.errors)
            .chain(&self.plain)
            .map(String::as_str)
    }
}

fn push(into: &mut VecDeque<String>, line: String) {
    if into.len() == KEPT {
        into.pop_front();
    }
    into.push_back(line);
}
