//! What the scripted "model" does: per prompt, a list of tool steps and a final text.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::conversation::{Conversation, Reply};
use crate::tools;

/// One scripted action, carried out through whichever tool of the requesting CLI fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Step {
    /// Create (or overwrite) a file. A relative path is made absolute against the working
    /// directory the CLI announces in its prompt, when it announces one.
    WriteFile {
        /// The file to write.
        path: String,
        /// Its full new content.
        content: String,
    },
    /// Run one shell command line.
    Shell {
        /// The command line, as for `bash -lc`.
        command: String,
    },
    /// Call a named tool with literal arguments (an escape hatch for CLI-specific tools).
    Tool {
        /// The tool name, exactly as the CLI offers it.
        name: String,
        /// The arguments object (or, for a free-form tool, a JSON string).
        arguments: Value,
    },
}

/// The steps and final text answering one kind of prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The turn applies when the latest user prompt contains this text; `None` matches any.
    #[serde(default)]
    pub when: Option<String>,
    /// Tool steps, in order; step `k` is emitted once the conversation holds `k` tool results
    /// after the prompt.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// The answer once every step has a result.
    #[serde(default = "default_final_text")]
    pub final_text: String,
    /// The prompt tokens every reply of this turn reports as its usage (e.g. to fill a
    /// CLI's context window); `None` reports an estimate from the request's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
}

fn default_final_text() -> String {
    "Done.".to_owned()
}

fn default_side_text() -> String {
    "OK".to_owned()
}

impl Default for Turn {
    fn default() -> Self {
        Self {
            when: None,
            steps: Vec::new(),
            final_text: default_final_text(),
            input_tokens: None,
        }
    }
}

impl Turn {
    /// A turn for prompts containing `text`.
    pub fn when(text: impl Into<String>) -> Self {
        Self {
            when: Some(text.into()),
            ..Self::default()
        }
    }

    /// Adds a file-writing step.
    pub fn write_file(mut self, path: impl Into<String>, content: impl Into<String>) -> Self {
        self.steps.push(Step::WriteFile {
            path: path.into(),
            content: content.into(),
        });
        self
    }

    /// Adds a shell step.
    pub fn shell(mut self, command: impl Into<String>) -> Self {
        self.steps.push(Step::Shell {
            command: command.into(),
        });
        self
    }

    /// Adds a literal tool call.
    pub fn tool(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.steps.push(Step::Tool {
            name: name.into(),
            arguments,
        });
        self
    }

    /// Sets the final text.
    pub fn final_text(mut self, text: impl Into<String>) -> Self {
        self.final_text = text.into();
        self
    }

    /// Makes every reply of this turn report `tokens` prompt tokens as its usage (in each
    /// wire format's usage fields), instead of an estimate from the request's size.
    ///
    /// ```
    /// use orchestrator_testkit::Turn;
    /// let turn = Turn::when("big job").write_file("a.txt", "a\n").input_tokens(170_000);
    /// assert_eq!(turn.input_tokens, Some(170_000));
    /// ```
    pub fn input_tokens(mut self, tokens: u64) -> Self {
        self.input_tokens = Some(tokens);
        self
    }
}

/// The whole behaviour of a [`ModelServer`](crate::ModelServer).
///
/// The server is stateless: every reply is computed from the request alone. A request that
/// offers no tools (titles, summaries, routing, quota probes) gets [`Script::side_text`]. A
/// request with tools is matched against the turns (first `when` found in the latest user
/// prompt, else the default turn); with `k` tool results after that prompt, the reply is
/// step `k`, or the final text when all steps are done.
///
/// ```
/// use orchestrator_testkit::{Script, Turn};
/// let script = Script::new()
///     .write_file("notes.txt", "hello\n")
///     .shell("git add -A")
///     .final_text("Wrote notes.txt.")
///     .on_prompt(Turn::when("append").shell("echo more >> notes.txt").final_text("Appended."));
/// # let _ = script;
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// Turns chosen by prompt text, tried in order before the default turn.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// The turn for prompts no other turn matches.
    #[serde(default, rename = "default")]
    pub default_turn: Turn,
    /// The answer to requests without tools.
    #[serde(default = "default_side_text")]
    pub side_text: String,
    /// When set, every model request fails with this HTTP status (to test error handling).
    #[serde(default)]
    pub error_status: Option<u16>,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            turns: Vec::new(),
            default_turn: Turn::default(),
            side_text: default_side_text(),
            error_status: None,
        }
    }
}

impl Script {
    /// A script that answers "Done." without using tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file-writing step to the default turn.
    pub fn write_file(mut self, path: impl Into<String>, content: impl Into<String>) -> Self {
        self.default_turn = self.default_turn.write_file(path, content);
        self
    }

    /// Adds a shell step to the default turn.
    pub fn shell(mut self, command: impl Into<String>) -> Self {
        self.default_turn = self.default_turn.shell(command);
        self
    }

    /// Adds a literal tool call to the default turn.
    pub fn tool(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.default_turn = self.default_turn.tool(name, arguments);
        self
    }

    /// Sets the default turn's final text.
    pub fn final_text(mut self, text: impl Into<String>) -> Self {
        self.default_turn = self.default_turn.final_text(text);
        self
    }

    /// Makes the default turn's replies report `tokens` prompt tokens (see
    /// [`Turn::input_tokens`]).
    pub fn input_tokens(mut self, tokens: u64) -> Self {
        self.default_turn = self.default_turn.input_tokens(tokens);
        self
    }

    /// Adds a turn chosen by prompt text (see [`Turn::when`]).
    pub fn on_prompt(mut self, turn: Turn) -> Self {
        self.turns.push(turn);
        self
    }

    /// Sets the answer to requests without tools.
    pub fn side_text(mut self, text: impl Into<String>) -> Self {
        self.side_text = text.into();
        self
    }

    /// Makes every model request fail with this HTTP status (e.g. 400, 500).
    pub fn fail_with_status(mut self, status: u16) -> Self {
        self.error_status = Some(status);
        self
    }

    /// The turn for this prompt.
    pub fn turn_for(&self, prompt: &str) -> &Turn {
        self.turns
            .iter()
            .find(|turn| {
                turn.when
                    .as_deref()
                    .is_none_or(|when| prompt.contains(when))
            })
            .unwrap_or(&self.default_turn)
    }

    /// The prompt tokens a reply to this conversation reports: its turn's
    /// [`Turn::input_tokens`] when set (requests without tools included, which belong to no
    /// turn: they report the estimate), else the conversation's estimate.
    pub fn reported_input_tokens(&self, conversation: &Conversation) -> u64 {
        if conversation.tools.is_empty() {
            return conversation.input_tokens;
        }
        self.turn_for(&conversation.prompt)
            .input_tokens
            .unwrap_or(conversation.input_tokens)
    }

    /// What the model answers to this conversation.
    pub fn reply(&self, conversation: &Conversation) -> Reply {
        if conversation.tools.is_empty() {
            return Reply::Text(self.side_text.clone());
        }
        let turn = self.turn_for(&conversation.prompt);
        match turn.steps.get(conversation.results_since_prompt) {
            None => Reply::Text(turn.final_text.clone()),
            Some(step) => match tools::call_for(step, conversation) {
                Some(call) => Reply::ToolCall(call),
                None => Reply::Text(format!(
                    "testkit: no offered tool fits step {} ({step:?}); offered: {}",
                    conversation.results_since_prompt,
                    conversation.tool_names().join(", ")
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_match_by_prompt_text_before_the_default() {
        let script = Script::new()
            .final_text("default")
            .on_prompt(Turn::when("append").final_text("appended"));
        assert_eq!(
            script.turn_for("please append a line").final_text,
            "appended"
        );
        assert_eq!(script.turn_for("create it").final_text, "default");
    }

    #[test]
    fn a_turn_can_report_its_prompt_tokens() {
        let script = Script::new().on_prompt(Turn::when("big").input_tokens(170_000));
        let offered = vec![crate::ToolSpec {
            name: "Write".into(),
            schema: Value::Null,
            freeform: false,
        }];
        let mut conversation = Conversation {
            prompt: "a big job".into(),
            tools: offered,
            input_tokens: 12,
            ..Conversation::default()
        };
        assert_eq!(script.reported_input_tokens(&conversation), 170_000);
        conversation.prompt = "a small job".into();
        assert_eq!(script.reported_input_tokens(&conversation), 12);
        conversation.prompt = "a big job".into();
        conversation.tools.clear();
        assert_eq!(
            script.reported_input_tokens(&conversation),
            12,
            "side calls keep the estimate"
        );
    }

    #[test]
    fn round_trips_through_json() -> Result<(), serde_json::Error> {
        let script = Script::new()
            .write_file("a.txt", "x")
            .shell("ls")
            .on_prompt(Turn::when("y").tool("Custom", serde_json::json!({"k": 1})));
        let text = serde_json::to_string(&script)?;
        assert_eq!(serde_json::from_str::<Script>(&text)?, script);
        let minimal: Script =
            serde_json::from_str(r#"{"default":{"steps":[{"kind":"shell","command":"ls"}]}}"#)?;
        assert_eq!(minimal.default_turn.final_text, "Done.");
        assert_eq!(minimal.side_text, "OK");
        Ok(())
    }
}
