//! [`Transcript`]: what a parser learned from one run's output.

use std::collections::VecDeque;

use super::usage::AgentUsage;

/// Most error messages and plain lines kept for classification and failure messages.
const KEPT: usize = 20;

/// What an [`AgentRunner`](super::AgentRunner)'s parser learned from one run's output lines
/// (already redacted): usage, session id, whether the final result arrived and whether it
/// reported an error, the error messages seen and the agent's final reply.
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
    /// The agent's final reply: the last assistant text of the run, whole (a message streamed
    /// in chunks is joined up), as the CLI's parser reads it from its output — the work's
    /// output of an agent job (SPEC §12). `None` when the agent said nothing. Error messages
    /// are not replies: a failed run's reply is what the agent said before it failed, if
    /// anything.
    pub reply: Option<String>,
    /// The context size of the run's latest model call: the prompt tokens it sent, cached
    /// ones included, as the CLI reports them per call (not summed over calls). `None` when
    /// the CLI reports no per-call usage. See [`ContextPressure`](super::ContextPressure).
    pub context_tokens: Option<u64>,
    /// The largest [`context_tokens`](Self::context_tokens) of the run (the CLI may have
    /// compacted its context since).
    pub peak_context_tokens: Option<u64>,
    /// The model's context window in tokens, when the CLI reports it (Claude Code, Codex).
    pub context_window: Option<u64>,
    /// Tool calls and results seen since the last [`Transcript::take_tools`], when
    /// [`Transcript::record_tools`] is on (sessions turn them into events; plan jobs keep
    /// nothing).
    pub tools: Vec<ToolActivity>,
    /// Whether the parsers' [`Transcript::tool_call`] and [`Transcript::tool_result`] are
    /// kept in [`Transcript::tools`].
    pub record_tools: bool,
    /// Tool requests the CLI put to the host since the last
    /// [`Transcript::take_permission_requests`] (kept when [`Transcript::record_tools`] is on).
    pub permission_requests: Vec<super::PermissionRequest>,
    /// Whether `reply` is still coming in, and how.
    draft: Draft,
}

/// A tool call of the agent, or its result, as the CLI reported it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolActivity {
    /// The agent called a tool.
    Call {
        /// The tool's name as the CLI calls it (`Write`, `apply_patch`, `run_shell_command`,
        /// `command_execution`, ...).
        tool: String,
        /// Its arguments.
        input: serde_json::Value,
    },
    /// A tool call ended.
    Result {
        /// The tool, when the CLI names it in the result.
        tool: Option<String>,
        /// What it answered (its text, as far as the CLI prints it).
        output: String,
        /// It failed or was refused.
        is_error: bool,
    },
}

/// How the [`Transcript::reply`] is still being added to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Draft {
    /// Complete (or none yet): the next part starts a new reply.
    #[default]
    Closed,
    /// A message coming in parts; the id the CLI gave the message, if any.
    Message(Option<String>),
    /// Plain output lines, with this many blank lines held back (kept only when a line
    /// follows).
    Lines { blanks: usize },
}

impl Transcript {
    /// Notes a tool call (kept when [`Transcript::record_tools`] is on).
    pub fn tool_call(&mut self, tool: impl Into<String>, input: serde_json::Value) {
        if self.record_tools {
            self.tools.push(ToolActivity::Call {
                tool: tool.into(),
                input,
            });
        }
    }

    /// Notes a tool result (kept when [`Transcript::record_tools`] is on).
    pub fn tool_result(&mut self, tool: Option<String>, output: impl Into<String>, is_error: bool) {
        if self.record_tools {
            self.tools.push(ToolActivity::Result {
                tool,
                output: output.into(),
                is_error,
            });
        }
    }

    /// Notes a tool request the CLI puts to the host (kept when [`Transcript::record_tools`]
    /// is on).
    pub fn permission_request(&mut self, request: super::PermissionRequest) {
        if self.record_tools {
            self.permission_requests.push(request);
        }
    }

    /// The permission requests noted since the last call.
    pub fn take_permission_requests(&mut self) -> Vec<super::PermissionRequest> {
        std::mem::take(&mut self.permission_requests)
    }

    /// The tool activity noted since the last call.
    pub fn take_tools(&mut self) -> Vec<ToolActivity> {
        std::mem::take(&mut self.tools)
    }

    /// Most bytes of a reply made of plain output lines ([`Transcript::reply_line`]): the
    /// last ones are kept, in whole lines.
    pub const PLAIN_REPLY_MAX: usize = 1024 * 1024;

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

    /// Records the context size of a model call (its prompt tokens, cached ones included):
    /// the latest [`context_tokens`](Self::context_tokens), and the peak.
    pub fn context(&mut self, tokens: u64) {
        self.context_tokens = Some(tokens);
        self.peak_context_tokens = Some(self.peak_context_tokens.map_or(tokens, |p| p.max(tokens)));
    }

    /// Records a line that is not a JSON event.
    pub fn plain_line(&mut self, line: &str) {
        if !line.trim().is_empty() {
            push(&mut self.plain, line.to_owned());
        }
    }

    /// Records a whole assistant message: it is the reply now (blank text is ignored) and
    /// ends a message coming in parts.
    pub fn set_reply(&mut self, text: impl Into<String>) {
        let text = text.into();
        if !text.trim().is_empty() {
            self.reply = Some(text);
        }
        self.draft = Draft::Closed;
    }

    /// Records a part of an assistant message: a streamed chunk, or one of the pieces a CLI
    /// split a message into. It is appended to the reply when the part before belonged to
    /// the same message (the same `message` id, or both without one and no
    /// [`end_reply`](Self::end_reply) between them); otherwise it starts a new reply. Empty
    /// text is ignored.
    pub fn reply_part(&mut self, message: Option<&str>, text: &str) {
        if text.is_empty() {
            return;
        }
        let message = message.map(str::to_owned);
        match (&self.draft, &mut self.reply) {
            (Draft::Message(open), Some(reply)) if *open == message => reply.push_str(text),
            _ => {
                self.reply = Some(text.to_owned());
                self.draft = Draft::Message(message);
            }
        }
    }

    /// Ends the message coming in parts (e.g. a tool call came between): the next part
    /// starts a new reply.
    pub fn end_reply(&mut self) {
        self.draft = Draft::Closed;
    }

    /// Records a plain output line of a CLI that prints its reply as text: while no other
    /// reply was recorded, the reply is these lines, newline-joined (leading and trailing
    /// blank lines left out, the last [`PLAIN_REPLY_MAX`](Self::PLAIN_REPLY_MAX) bytes kept).
    pub fn reply_line(&mut self, line: &str) {
        let blank = line.trim().is_empty();
        match (&mut self.draft, &mut self.reply) {
            (Draft::Lines { blanks }, _) if blank => *blanks += 1,
            (Draft::Lines { blanks }, Some(reply)) => {
                for _ in 0..=*blanks {
                    reply.push('\n');
                }
                reply.push_str(line);
                *blanks = 0;
                keep_tail(reply, Self::PLAIN_REPLY_MAX);
            }
            (Draft::Closed, None) if !blank => {
                let mut reply = line.to_owned();
                keep_tail(&mut reply, Self::PLAIN_REPLY_MAX);
                self.reply = Some(reply);
                self.draft = Draft::Lines { blanks: 0 };
            }
            _ => {}
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

/// Cuts `text` to its last `max` bytes, at a line start where there is one.
fn keep_tail(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut cut = text.len() - max;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    if text.as_bytes()[cut - 1] != b'\n' {
        cut = text[cut..].find('\n').map_or(cut, |n| cut + n + 1);
    }
    text.drain(..cut);
}

fn push(into: &mut VecDeque<String>, line: String) {
    if into.len() == KEPT {
        into.pop_front();
    }
    into.push_back(line);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_of_one_message_join_and_a_new_message_replaces() {
        let mut t = Transcript::default();
        t.reply_part(None, "Creat");
        t.reply_part(None, "ing notes.");
        assert_eq!(t.reply.as_deref(), Some("Creating notes."));
        t.end_reply();
        t.reply_part(None, "");
        assert_eq!(t.reply.as_deref(), Some("Creating notes."), "empty parts");
        t.reply_part(None, "Done.");
        assert_eq!(t.reply.as_deref(), Some("Done."));
        t.reply_part(Some("call-1"), "A");
        t.reply_part(Some("call-1"), "B");
        t.reply_part(Some("call-2"), "C");
        assert_eq!(t.reply.as_deref(), Some("C"));
        t.set_reply("  \n");
        assert_eq!(t.reply.as_deref(), Some("C"), "blank messages are no reply");
        t.set_reply("Whole.");
        t.reply_part(None, " more");
        assert_eq!(
            t.reply.as_deref(),
            Some(" more"),
            "a whole message is complete"
        );
    }

    #[test]
    fn plain_lines_are_a_reply_until_another_one_comes() {
        let mut t = Transcript::default();
        for line in ["", "Working...", "", "", "Done: 2 files.", "", " "] {
            t.reply_line(line);
        }
        assert_eq!(t.reply.as_deref(), Some("Working...\n\n\nDone: 2 files."));
        t.set_reply("The JSON reply.");
        t.reply_line("bye");
        assert_eq!(t.reply.as_deref(), Some("The JSON reply."));
    }

    #[test]
    fn a_long_plain_reply_keeps_its_last_whole_lines() {
        let mut t = Transcript::default();
        let line = "x".repeat(1000);
        for _ in 0..2000 {
            t.reply_line(&line);
        }
        t.reply_line("the end");
        let reply = t.reply.unwrap_or_default();
        assert!(
            reply.len() <= Transcript::PLAIN_REPLY_MAX,
            "{}",
            reply.len()
        );
        assert!(reply.len() > Transcript::PLAIN_REPLY_MAX - 1002);
        assert!(reply.starts_with(&line) && reply.ends_with("\nthe end"));
        assert!(reply.lines().all(|l| l == line || l == "the end"));

        let mut tail = "é".repeat(10);
        keep_tail(&mut tail, 5);
        assert_eq!(tail, "éé", "cut at a character boundary");
    }
}
