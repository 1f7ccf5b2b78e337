//! Picks, among the tools a CLI offers, the one that carries out a scripted step, and builds
//! its arguments from the tool's own JSON schema.
//!
//! Known names (first match wins):
//! - write: Claude Code `Write`, Gemini `write_file`, Copilot `create`, editor tools taking a
//!   `create` command, Codex `apply_patch` (free-form or JSON `input`);
//! - shell: Claude Code `Bash`, Copilot `bash`, Gemini `run_shell_command`, Codex
//!   `shell`/`exec_command`/`shell_command`.
//!
//! A write step falls back to a shell heredoc when no write tool is offered.

use serde_json::{Map, Value};

use crate::conversation::{fresh_id, Conversation, ToolCall, ToolInput, ToolSpec};
use crate::script::Step;

/// File-writing tools, most preferred first.
pub const WRITE_TOOLS: &[&str] = &[
    "Write",
    "write_file",
    "create",
    "str_replace_editor",
    "str_replace_based_edit_tool",
    "apply_patch",
];

/// Shell tools, most preferred first.
pub const SHELL_TOOLS: &[&str] = &[
    "Bash",
    "bash",
    "run_shell_command",
    "shell",
    "shell_command",
    "exec_command",
];

/// The tool call carrying out `step` in this conversation, or `None` when no offered tool
/// fits.
pub fn call_for(step: &Step, conversation: &Conversation) -> Option<ToolCall> {
    let (name, input) = match step {
        Step::WriteFile { path, content } => write_call(path, content, conversation)
            .or_else(|| shell_call(&heredoc(path, content), conversation))?,
        Step::Shell { command } => shell_call(command, conversation)?,
        Step::Tool { name, arguments } => {
            let tool = conversation.tool(name)?;
            let input = match (tool.freeform, arguments) {
                (true, Value::String(text)) => ToolInput::Freeform(text.clone()),
                _ => ToolInput::Json(arguments.clone()),
            };
            (tool.name.clone(), input)
        }
    };
    Some(ToolCall {
        id: fresh_id("call_"),
        name,
        input,
    })
}

fn first_offered<'a>(names: &[&str], conversation: &'a Conversation) -> Option<&'a ToolSpec> {
    names.iter().find_map(|name| conversation.tool(name))
}

fn write_call(
    path: &str,
    content: &str,
    conversation: &Conversation,
) -> Option<(String, ToolInput)> {
    let tool = first_offered(WRITE_TOOLS, conversation)?;
    if tool.name == "apply_patch" {
        let patch = add_file_patch(path, content);
        let input = if tool.freeform {
            ToolInput::Freeform(patch)
        } else {
            ToolInput::Json(serde_json::json!({ "input": patch }))
        };
        return Some((tool.name.clone(), input));
    }
    let values = Values {
        path: Some(absolute(path, conversation.cwd.as_deref())),
        content: Some(content.to_owned()),
        command: None,
        editor_command: Some("create"),
    };
    Some((
        tool.name.clone(),
        ToolInput::Json(fill(&tool.schema, &values)),
    ))
}

fn shell_call(command: &str, conversation: &Conversation) -> Option<(String, ToolInput)> {
    let tool = first_offered(SHELL_TOOLS, conversation)?;
    let values = Values {
        path: None,
        content: None,
        command: Some(command.to_owned()),
        editor_command: None,
    };
    Some((
        tool.name.clone(),
        ToolInput::Json(fill(&tool.schema, &values)),
    ))
}

/// A path made absolute against `cwd` when it is relative and a cwd is known.
fn absolute(path: &str, cwd: Option<&str>) -> String {
    match cwd {
        Some(cwd) if !path.starts_with('/') => format!("{}/{path}", cwd.trim_end_matches('/')),
        _ => path.to_owned(),
    }
}

/// A Codex `apply_patch` patch adding one file.
pub fn add_file_patch(path: &str, content: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in content.lines() {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch\n");
    patch
}

/// A shell command writing `content` to `path` (for CLIs offering only a shell).
pub fn heredoc(path: &str, content: &str) -> String {
    let quoted = format!("'{}'", path.replace('\'', r"'\''"));
    let mut body = content.to_owned();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    format!("mkdir -p \"$(dirname {quoted})\" && cat > {quoted} <<'TESTKIT_EOF'\n{body}TESTKIT_EOF")
}

/// The semantic values a step provides.
struct Values {
    path: Option<String>,
    content: Option<String>,
    command: Option<String>,
    /// For editor tools with a `command` enum (`create`, `view`, …).
    editor_command: Option<&'static str>,
}

/// Builds an arguments object for `schema`: known properties get the step's values, other
/// required properties a harmless default.
fn fill(schema: &Value, values: &Values) -> Value {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut arguments = Map::new();
    for (name, property) in properties {
        let is_required = required.contains(&name.as_str());
        let value = match name.as_str() {
            "file_path" | "path" | "absolute_path" | "filepath" | "filename" | "file" => {
                values.path.clone().map(Value::String)
            }
            "content" | "file_text" | "contents" | "text" => {
                values.content.clone().map(Value::String)
            }
            "command" | "cmd" | "script" => match (&values.command, values.editor_command) {
                (Some(command), _) if is_type(property, "array") => {
                    Some(serde_json::json!(["bash", "-lc", command]))
                }
                (Some(command), _) => Some(Value::String(command.clone())),
                (None, Some(editor)) => Some(Value::String(editor.to_owned())),
                (None, None) => None,
            },
            "description" | "justification" | "explanation" if is_required => {
                Some(Value::String("Scripted step.".to_owned()))
            }
            _ => None,
        };
        match value {
            Some(value) => {
                arguments.insert(name.clone(), value);
            }
            None if is_required => {
                arguments.insert(name.clone(), default_for(property));
            }
            None => {}
        }
    }
    Value::Object(arguments)
}

fn is_type(schema: &Value, wanted: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(kind)) => kind.eq_ignore_ascii_case(wanted),
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| {
            kind.as_str()
                .is_some_and(|kind| kind.eq_ignore_ascii_case(wanted))
        }),
        _ => false,
    }
}

/// A harmless value for a required property the script knows nothing about.
fn default_for(schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if is_type(schema, "boolean") {
        Value::Bool(false)
    } else if is_type(schema, "integer") || is_type(schema, "number") {
        Value::from(0)
    } else if is_type(schema, "array") {
        Value::Array(Vec::new())
    } else if is_type(schema, "object") {
        Value::Object(Map::new())
    } else {
        Value::String(String::new())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn offering(tools: &[(&str, Value, bool)]) -> Conversation {
        Conversation {
            tools: tools
                .iter()
                .map(|(name, schema, freeform)| ToolSpec {
                    name: (*name).to_owned(),
                    schema: schema.clone(),
                    freeform: *freeform,
                })
                .collect(),
            cwd: Some("/repo".to_owned()),
            ..Conversation::default()
        }
    }

    fn write_step() -> Step {
        Step::WriteFile {
            path: "notes.txt".to_owned(),
            content: "hi\n".to_owned(),
        }
    }

    #[test]
    fn claude_write_gets_an_absolute_file_path() {
        let schema = json!({"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]});
        let conversation = offering(&[("Bash", json!({}), false), ("Write", schema, false)]);
        let call = call_for(&write_step(), &conversation);
        assert_eq!(call.as_ref().map(|c| c.name.as_str()), Some("Write"));
        assert_eq!(
            call.map(|c| c.input),
            Some(ToolInput::Json(
                json!({"file_path":"/repo/notes.txt","content":"hi\n"})
            ))
        );
    }

    #[test]
    fn editor_tools_get_the_create_command() {
        let schema = json!({"properties":{"command":{"type":"string","enum":["view","create"]},"path":{"type":"string"},"file_text":{"type":"string"}},"required":["command","path"]});
        let conversation = offering(&[("str_replace_editor", schema, false)]);
        let call = call_for(&write_step(), &conversation).map(|c| c.input);
        assert_eq!(
            call,
            Some(ToolInput::Json(
                json!({"command":"create","path":"/repo/notes.txt","file_text":"hi\n"})
            ))
        );
    }

    #[test]
    fn codex_apply_patch_freeform_and_shell_array() {
        let conversation = offering(&[
            (
                "shell",
                json!({"properties":{"command":{"type":"array","items":{"type":"string"}},"workdir":{"type":"string"}},"required":["command"]}),
                false,
            ),
            ("apply_patch", Value::Null, true),
        ]);
        let call = call_for(&write_step(), &conversation).map(|c| c.input);
        assert_eq!(
            call,
            Some(ToolInput::Freeform(
                "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** End Patch\n".to_owned()
            ))
        );
        let shell = Step::Shell {
            command: "ls".to_owned(),
        };
        let call = call_for(&shell, &conversation).map(|c| c.input);
        assert_eq!(
            call,
            Some(ToolInput::Json(json!({"command":["bash","-lc","ls"]})))
        );
    }

    #[test]
    fn write_falls_back_to_a_shell_heredoc_and_required_fields_get_defaults() {
        let schema = json!({"properties":{"command":{"type":"string"},"description":{"type":"string"},"mode":{"enum":["sync","async"]},"timeout":{"type":"integer"}},"required":["command","description","mode"]});
        let conversation = offering(&[("bash", schema, false)]);
        let Some(ToolInput::Json(arguments)) =
            call_for(&write_step(), &conversation).map(|c| c.input)
        else {
            panic!("expected a JSON call");
        };
        assert_eq!(arguments["mode"], "sync");
        assert_eq!(arguments["description"], "Scripted step.");
        assert!(arguments.get("timeout").is_none());
        assert_eq!(
            arguments["command"],
            "mkdir -p \"$(dirname 'notes.txt')\" && cat > 'notes.txt' <<'TESTKIT_EOF'\nhi\nTESTKIT_EOF"
        );
    }

    #[test]
    fn no_fitting_tool_is_none() {
        let conversation = offering(&[("read_file", json!({}), false)]);
        assert_eq!(call_for(&write_step(), &conversation), None);
        let custom = Step::Tool {
            name: "read_file".to_owned(),
            arguments: json!({"p":1}),
        };
        assert_eq!(
            call_for(&custom, &conversation).map(|c| c.input),
            Some(ToolInput::Json(json!({"p":1})))
        );
    }
}
