//! [`GenericAgent`]: any agent CLI, from a command template.

use orchestrator_core::plan::Env;
use orchestrator_core::runner::{LogStream, WorkFailure};
use orchestrator_core::state::FailureReason;

use super::usage::{find_count, find_number, find_text};
use serde_json::Value;

use super::{event_type, json_event, AgentCommand, AgentRequest, AgentRunner, Transcript};

/// One piece of the template: arguments always passed, or a group dropped when one of its
/// placeholders has no value.
#[derive(Debug, Clone)]
enum Part {
    Always(String),
    Optional(Vec<String>),
}

/// A host-configured agent CLI: a program and an argument template with placeholders.
///
/// | placeholder      | value                                         |
/// |------------------|-----------------------------------------------|
/// | `{prompt}`       | the short prompt (points at the instructions) |
/// | `{prompt_file}`  | the instructions file                         |
/// | `{dir}`          | the worktree                                  |
/// | `{run_dir}`      | this run's directory                          |
/// | `{model}`        | the spec's `model` (tiers are not mapped)     |
/// | `{effort}`       | `low`, `medium`, `high`, `xhigh`              |
/// | `{max_turns}`    | the spec's `maxTurns`                         |
/// | `{session}`      | the session to resume                         |
///
/// Each argument is substituted and passed as one argument; nothing goes through a shell, so
/// a prompt with quotes or `$(...)` is just text. An [`GenericAgent::optional`] group is left
/// out whole when a placeholder in it has no value (`["--model", "{model}"]`). An argument of
/// [`GenericAgent::arg`] whose placeholder has no value is a startup failure.
///
/// Output is read tolerantly: any JSON line's `session_id`/`sessionId`/`thread_id` is the
/// session; token counts (`input_tokens`/`inputTokens`, `output_tokens`/`outputTokens`,
/// `cached_tokens`/`cachedTokens`), `cost_usd`/`total_cost_usd` and `num_turns`/`turns` are
/// taken from a `{"type":"result"}` line, which also ends the run (`is_error: true` fails it).
///
/// Reply ([`Transcript::reply`]): the last JSON line's `reply`, `result` or `message` text
/// (a string, or a `message` object's `content`: a string or text blocks), leaving out lines
/// that report an error (`is_error: true`, an `error`, or a `type`/`subtype`/`status`
/// naming an error or failure), log records (with a `level`) and other roles' messages.
/// A CLI that prints no such line replies in plain text: the reply is then its stdout lines
/// that are not JSON, newline-joined (the last
/// [`Transcript::PLAIN_REPLY_MAX`] bytes; stderr is left out).
///
/// ```
/// use orchestrator_agents::agent::{AgentRequest, AgentRunner, GenericAgent};
/// let agent = GenericAgent::new("my-agent")
///     .arg("run")
///     .arg("--instructions={prompt_file}")
///     .optional(["--model", "{model}"])
///     .optional(["--resume", "{session}"]);
/// let mut r = AgentRequest::new("/wt", "Do it");
/// r.resume = Some("s-1".into());
/// let args = agent.command(&r).unwrap().args_lossy();
/// assert_eq!(args, ["run", "--instructions=/wt/.orchestrator/agent/run/instructions.md", "--resume", "s-1"]);
/// ```
#[derive(Debug, Clone)]
pub struct GenericAgent {
    program: String,
    parts: Vec<Part>,
    env: Env,
}

impl GenericAgent {
    /// `program` (a bare name is looked up on the child's `PATH`) with no arguments yet.
    pub fn new(program: impl Into<String>) -> Self {
        GenericAgent {
            program: program.into(),
            parts: Vec::new(),
            env: Env::new(),
        }
    }

    /// Adds an argument (with placeholders).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.parts.push(Part::Always(arg.into()));
        self
    }

    /// Adds arguments (with placeholders).
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.parts
            .extend(args.into_iter().map(|a| Part::Always(a.into())));
        self
    }

    /// Adds a group of arguments left out whole when a placeholder in it has no value.
    pub fn optional<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.parts
            .push(Part::Optional(args.into_iter().map(Into::into).collect()));
        self
    }

    /// Adds an environment variable for the CLI: over the host environment, under the plan,
    /// job and spec `env`.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }
}

/// `arg` with its placeholders replaced, or the first placeholder without a value.
fn substitute(arg: &str, r: &AgentRequest) -> Result<String, String> {
    let path = |p: &std::path::Path| Some(p.to_string_lossy().into_owned());
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        let name = &rest[open + 1..close];
        let value = match name {
            "prompt" => Some(r.prompt.clone()),
            "prompt_file" => path(&r.instructions_file),
            "dir" => path(&r.dir),
            "run_dir" => path(&r.run_dir),
            "model" => r.model.clone(),
            "effort" => r.effort_str().map(str::to_owned),
            "max_turns" => r.max_turns.map(|n| n.to_string()),
            "session" => r.resume.clone(),
            _ => {
                // Not a placeholder: keep the text as it is.
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
                continue;
            }
        };
        let value = value.ok_or_else(|| name.to_owned())?;
        out.push_str(&rest[..open]);
        out.push_str(&value);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl AgentRunner for GenericAgent {
    fn command(&self, r: &AgentRequest) -> Result<AgentCommand, WorkFailure> {
        let mut cmd = AgentCommand::new(&self.program);
        for part in &self.parts {
            match part {
                Part::Always(arg) => {
                    let value = substitute(arg, r).map_err(|name| {
                        WorkFailure::new(format!(
                            "agent `{}`: argument `{arg}` needs `{{{name}}}`, which this run has no value for",
                            r.agent
                        ))
                        .reason(FailureReason::StartupError)
                    })?;
                    cmd = cmd.arg(value);
                }
                Part::Optional(group) => {
                    let values: Result<Vec<String>, String> =
                        group.iter().map(|a| substitute(a, r)).collect();
                    if let Ok(values) = values {
                        cmd = cmd.args(values);
                    }
                }
            }
        }
        Ok(cmd)
    }

    fn parse_line(&self, stream: LogStream, line: &str, t: &mut Transcript) {
        if stream != LogStream::Stdout {
            return;
        }
        let Some(event) = json_event(line) else {
            t.reply_line(line);
            return;
        };
        t.session(find_text(&event, &["session_id", "sessionId", "thread_id"]));
        if let Some(reply) = reply_text(&event) {
            t.set_reply(reply);
        }
        if event_type(&event) == Some("result") {
            let u = &mut t.usage;
            u.input_tokens = find_count(&event, &["input_tokens", "inputTokens"]);
            u.output_tokens = find_count(&event, &["output_tokens", "outputTokens"]);
            u.cached_tokens = find_count(&event, &["cached_tokens", "cachedTokens"]);
            u.cost_usd = find_number(&event, &["cost_usd", "total_cost_usd", "costUsd"]);
            u.turns =
                find_count(&event, &["num_turns", "turns"]).and_then(|n| u32::try_from(n).ok());
            let failed = event.get("is_error").and_then(Value::as_bool) == Some(true);
            let error = failed.then(|| {
                find_text(&event, &["result", "message", "error"])
                    .unwrap_or_else(|| "the result reports an error".into())
            });
            t.finish(error);
        }
    }

    fn extra_env(&self) -> Env {
        self.env.clone()
    }
}

/// The reply text of a JSON line: its `reply`, `result` or `message` string (or the text of a
/// `message` object's `content`), unless the line reports an error, is a log record (has a
/// `level`) or is not the assistant's (a `role` other than `assistant`).
fn reply_text(event: &Value) -> Option<String> {
    let says = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let erroneous = ["type", "subtype", "status"].iter().any(|key| {
        says(event, key).is_some_and(|s| {
            let s = s.to_ascii_lowercase();
            s.contains("error") || s.contains("fail")
        })
    });
    let not_assistant = |v: &Value| says(v, "role").is_some_and(|r| r != "assistant");
    if erroneous
        || event.get("is_error").and_then(Value::as_bool) == Some(true)
        || event.get("error").is_some_and(|e| !e.is_null())
        || event.get("level").is_some()
        || not_assistant(event)
    {
        return None;
    }
    if let Some(text) = says(event, "reply").or_else(|| says(event, "result")) {
        return Some(text);
    }
    let message = event.get("message")?;
    if let Some(text) = message.as_str() {
        return Some(text.to_owned());
    }
    if not_assistant(message) {
        return None;
    }
    match message.get("content")? {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[(LogStream, &str)]) -> Transcript {
        let agent = GenericAgent::new("my-agent");
        let mut t = Transcript::default();
        for (stream, line) in lines {
            agent.parse_line(*stream, line, &mut t);
        }
        t
    }

    #[test]
    fn a_json_reply_result_or_message() {
        use LogStream::Stdout;
        let t = parse(&[
            (Stdout, "thinking..."),
            (Stdout, r#"{"type":"message","message":"First."}"#),
            (
                Stdout,
                r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Second,"},{"type":"tool_use","name":"x"},{"type":"text","text":"in two blocks."}]}}"#,
            ),
            (Stdout, r#"{"level":"info","message":"wrote 2 files"}"#),
            (
                Stdout,
                r#"{"type":"user","message":{"role":"user","content":"a tool result"}}"#,
            ),
            (Stdout, r#"{"type":"error","message":"retrying after 429"}"#),
            (Stdout, "plain text after a JSON reply"),
        ]);
        assert_eq!(t.reply.as_deref(), Some("Second,\nin two blocks."));
        let t = parse(&[
            (Stdout, r#"{"reply":"The whole\nreply."}"#),
            (
                Stdout,
                r#"{"type":"result","result":"All done.","session_id":"s-1","num_turns":2}"#,
            ),
        ]);
        assert!(t.finished);
        assert_eq!(t.reply.as_deref(), Some("All done."));
        let t = parse(&[(Stdout, r#"{"reply":"The whole\nreply."}"#)]);
        assert_eq!(t.reply.as_deref(), Some("The whole\nreply."));
    }

    #[test]
    fn an_error_result_is_no_reply() {
        use LogStream::Stdout;
        let t = parse(&[
            (Stdout, r#"{"type":"message","message":"Starting on it."}"#),
            (
                Stdout,
                r#"{"type":"result","is_error":true,"result":"API error 500"}"#,
            ),
        ]);
        assert_eq!(t.result_error.as_deref(), Some("API error 500"));
        assert_eq!(t.reply.as_deref(), Some("Starting on it."));
        let t = parse(&[(
            Stdout,
            r#"{"type":"result","status":"failed","message":"boom"}"#,
        )]);
        assert_eq!(t.reply, None);
    }

    #[test]
    fn a_plain_text_cli_replies_with_its_stdout() {
        use LogStream::{Stderr, Stdout};
        let t = parse(&[
            (Stdout, ""),
            (Stdout, "Reading the instructions."),
            (Stderr, "warning: no config"),
            (Stdout, ""),
            (Stdout, "Created notes.txt."),
            (Stdout, "[1, 2]"),
            (Stdout, ""),
        ]);
        assert_eq!(
            t.reply.as_deref(),
            Some("Reading the instructions.\n\nCreated notes.txt.\n[1, 2]")
        );
        let t = parse(&[(Stderr, "only stderr")]);
        assert_eq!(t.reply, None);
    }

    #[test]
    fn placeholders() {
        let mut r = AgentRequest::new("/wt", "say \"hi\" $(rm -rf /)");
        r.model = Some("m".into());
        assert_eq!(
            substitute("{prompt}", &r).as_deref(),
            Ok("say \"hi\" $(rm -rf /)")
        );
        assert_eq!(
            substitute("--m={model}:{dir}", &r).as_deref(),
            Ok("--m=m:/wt")
        );
        assert_eq!(substitute("{session}", &r), Err("session".to_owned()));
        assert_eq!(substitute("{json} {", &r).as_deref(), Ok("{json} {"));
        let failure = GenericAgent::new("x")
            .arg("{session}")
            .command(&r)
            .expect_err("no session to resume");
        assert!(
            failure.message.contains("`{session}`"),
            "{}",
            failure.message
        );
    }
}
