//! The front matter of `*.agent.md` and `SKILL.md` files: a small, strict subset of YAML
//! between two `---` lines, read by hand.
//!
//! Supported: `key: value` (plain, `"double-quoted"` with JSON escapes, or `'single-quoted'`
//! with `''` for a quote), `key: [a, b]` flow lists, `key:` followed by `- item` lines, and
//! `key: |` / `key: >` blocks of indented lines (kept as lines, or folded into one). Blank
//! lines and `# comments` are skipped. Anything else (nested mappings, anchors, tags, tabs for
//! indentation, a key given twice) is refused with its line.

use std::collections::BTreeMap;

/// A front matter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A scalar.
    Text(String),
    /// A list (`[a, b]` or `- item` lines).
    List(Vec<String>),
}

/// One field: its value and the line (1-based, in the whole file) it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) value: Value,
    pub(crate) line: usize,
}

/// A parse problem: the line, the field (when the problem is one field's), and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) line: usize,
    pub(crate) field: Option<String>,
    pub(crate) message: String,
}

impl Problem {
    fn new(line: usize, field: Option<&str>, message: impl Into<String>) -> Self {
        Problem {
            line,
            field: field.map(str::to_owned),
            message: message.into(),
        }
    }
}

/// A parsed file: its front matter fields and the body after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Document {
    pub(crate) fields: BTreeMap<String, Field>,
    pub(crate) body: String,
}

/// Splits `text` into its front matter (parsed) and body (trimmed).
pub(crate) fn parse(text: &str) -> Result<Document, Problem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.lines().collect();
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return Err(Problem::new(
            1,
            None,
            "the file must start with a `---` line opening its front matter",
        ));
    }
    let Some(end) = lines
        .iter()
        .skip(1)
        .position(|l| l.trim_end() == "---")
        .map(|i| i + 1)
    else {
        return Err(Problem::new(
            1,
            None,
            "the front matter opened on line 1 has no closing `---` line",
        ));
    };
    let fields = parse_fields(&lines[1..end], 2)?;
    let body = lines[end + 1..].join("\n").trim().to_owned();
    Ok(Document { fields, body })
}

/// Parses the front matter lines; `first` is the file line number of `lines[0]`.
fn parse_fields(lines: &[&str], first: usize) -> Result<BTreeMap<String, Field>, Problem> {
    let mut fields = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line_no = first + i;
        let line = lines[i];
        i += 1;
        if is_skipped(line) {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(Problem::new(
                line_no,
                None,
                "an indented line outside a list or block (nested mappings are not supported)",
            ));
        }
        let Some((key, rest)) = line.split_once(':') else {
            return Err(Problem::new(
                line_no,
                None,
                format!("expected `key: value`, found `{}`", line.trim()),
            ));
        };
        let key = key.trim_end();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(Problem::new(
                line_no,
                None,
                format!("`{key}` is not a field name (letters, digits, `_` and `-`)"),
            ));
        }
        if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
            return Err(Problem::new(
                line_no,
                Some(key),
                "a space must follow the `:`",
            ));
        }
        let rest = strip_comment(rest.trim());
        let value = match rest {
            "" => {
                let (items, used) = list_items(&lines[i..], first + i, key)?;
                i += used;
                if used == 0 {
                    return Err(Problem::new(line_no, Some(key), "has no value"));
                }
                Value::List(items)
            }
            "|" | "|-" | "|+" | ">" | ">-" | ">+" => {
                let (text, used) = block(&lines[i..], rest.starts_with('>'));
                i += used;
                Value::Text(text)
            }
            _ if rest.starts_with('[') => Value::List(flow_list(rest, line_no, key)?),
            _ => Value::Text(scalar(rest, line_no, key)?),
        };
        if fields.contains_key(key) {
            return Err(Problem::new(line_no, Some(key), "is given twice"));
        }
        fields.insert(
            key.to_owned(),
            Field {
                value,
                line: line_no,
            },
        );
    }
    Ok(fields)
}

fn is_skipped(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// `value` without a trailing ` # comment` (outside quotes; `''` inside single quotes is a
/// quote, not its end).
fn strip_comment(value: &str) -> &str {
    let mut quote = None;
    let mut prev = ' ';
    let mut chars = value.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match quote {
            Some('\'') if c == '\'' && chars.peek().is_some_and(|&(_, n)| n == '\'') => {
                chars.next();
            }
            Some('"') if c == '\\' => {
                chars.next();
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if (c == '"' || c == '\'') && " [,".contains(prev) => quote = Some(c),
            None if c == '#' && (prev == ' ' || prev == '\t') => return value[..at].trim_end(),
            None => {}
        }
        prev = c;
    }
    value
}

/// The `- item` lines at the start of `lines` (indented or not), and how many lines they
/// took (blank and comment lines between them included).
fn list_items(lines: &[&str], first: usize, key: &str) -> Result<(Vec<String>, usize), Problem> {
    let mut items = Vec::new();
    let mut used = 0;
    for (n, line) in lines.iter().enumerate() {
        if is_skipped(line) {
            continue;
        }
        let t = line.trim_start();
        let indent = &line[..line.len() - t.len()];
        if indent.contains('\t') {
            return Err(Problem::new(
                first + n,
                Some(key),
                "tabs cannot indent YAML",
            ));
        }
        let Some(item) = t
            .strip_prefix('-')
            .filter(|r| r.is_empty() || r.starts_with(' '))
        else {
            if indent.is_empty() {
                break;
            }
            return Err(Problem::new(
                first + n,
                Some(key),
                "expected a `- item` line (nested mappings are not supported)",
            ));
        };
        let item = strip_comment(item.trim());
        if item.starts_with('[') || item.is_empty() {
            return Err(Problem::new(
                first + n,
                Some(key),
                "a list item must be a single value",
            ));
        }
        items.push(scalar(item, first + n, key)?);
        used = n + 1;
    }
    Ok((items, used))
}

/// The indented lines at the start of `lines` as one text: lines kept (`|`) or folded into
/// one line with blank lines as line breaks (`>`); and how many lines they took.
fn block(lines: &[&str], fold: bool) -> (String, usize) {
    let used = lines
        .iter()
        .position(|l| !l.trim().is_empty() && !l.starts_with([' ', '\t']))
        .unwrap_or(lines.len());
    let taken = &lines[..used];
    let indent = taken
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let dedented: Vec<&str> = taken
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect();
    let text = if fold {
        let mut out = String::new();
        for line in dedented {
            if line.is_empty() {
                out.push('\n');
            } else {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push(' ');
                }
                out.push_str(line);
            }
        }
        out
    } else {
        dedented.join("\n")
    };
    (text.trim().to_owned(), used)
}

/// `[a, "b", 'c']`.
fn flow_list(value: &str, line: usize, key: &str) -> Result<Vec<String>, Problem> {
    let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) else {
        return Err(Problem::new(
            line,
            Some(key),
            "a `[` list must end with `]` on the same line",
        ));
    };
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    split_items(inner)
        .into_iter()
        .map(|item| {
            let item = item.trim();
            if item.is_empty() || item.starts_with(['[', '{']) {
                Err(Problem::new(
                    line,
                    Some(key),
                    "each list item must be a single value",
                ))
            } else {
                scalar(item, line, key)
            }
        })
        .collect()
}

/// `inner` split at the commas outside quotes.
fn split_items(inner: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut quote = None;
    let mut start = 0;
    for (at, c) in inner.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == ',' => {
                items.push(&inner[start..at]);
                start = at + 1;
            }
            None => {}
        }
    }
    items.push(&inner[start..]);
    items
}

/// A scalar: plain, `"double"` (JSON escapes) or `'single'` (`''` is a quote).
fn scalar(value: &str, line: usize, key: &str) -> Result<String, Problem> {
    if value.starts_with('"') {
        return serde_json::from_str::<String>(value).map_err(|_| {
            Problem::new(
                line,
                Some(key),
                "a double-quoted value must end with its quote (escapes as in JSON)",
            )
        });
    }
    if let Some(rest) = value.strip_prefix('\'') {
        let Some(inner) = rest.strip_suffix('\'') else {
            return Err(Problem::new(
                line,
                Some(key),
                "a single-quoted value must end with its quote",
            ));
        };
        if inner.replace("''", "").contains('\'') {
            return Err(Problem::new(
                line,
                Some(key),
                "a quote inside a single-quoted value is written `''`",
            ));
        }
        return Ok(inner.replace("''", "'"));
    }
    if let Some(c) = value.chars().next().filter(|c| "{&*!%@`|>".contains(*c)) {
        return Err(Problem::new(
            line,
            Some(key),
            format!("a value starting with `{c}` is not supported here; quote it"),
        ));
    }
    Ok(value.to_owned())
}
