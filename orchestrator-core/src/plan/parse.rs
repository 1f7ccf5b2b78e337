//! Reading plan files (JSON or YAML) with errors that name the path inside the document.

use std::path::Path;

use crate::error::{Error, Result};
use crate::plan::PlanSpec;

/// Plan file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlanFormat {
    /// JSON.
    Json,
    /// YAML (a superset of JSON).
    Yaml,
}

impl PlanFormat {
    /// Guesses from a file name: `.json` is JSON, anything else YAML (which also reads JSON).
    pub fn from_path(path: &Path) -> PlanFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("json") => PlanFormat::Json,
            _ => PlanFormat::Yaml,
        }
    }
}

/// Parses a plan from text. `source_name` appears in errors (a file name, `<stdin>`...).
///
/// ```
/// use orchestrator_core::plan::{parse_plan, PlanFormat, WorkSpec};
/// let plan = parse_plan(r#"{"name":"p","jobs":[
///     {"producerId":"aaa","task":"a","work":"echo hi","dependencies":[]},
///     {"producer_id":"bbb","task":"b","work":"@agent add tests","dependencies":["aaa"]}]}"#,
///     PlanFormat::Json, "plan.json").unwrap();
/// assert!(matches!(plan.jobs[1].work, WorkSpec::Agent(_)));
///
/// let err = parse_plan("name: p\njobs: []\nmaxParalel: 2\n", PlanFormat::Yaml, "plan.yaml")
///     .unwrap_err();
/// assert!(err.to_string().contains("maxParalel"));
/// ```
pub fn parse_plan(text: &str, format: PlanFormat, source_name: &str) -> Result<PlanSpec> {
    let parse_error = |path: String, message: String| Error::Parse {
        source_name: source_name.to_owned(),
        path: (!path.is_empty() && path != ".").then_some(path),
        message,
    };
    match format {
        PlanFormat::Json => {
            let de = &mut serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(de)
                .map_err(|e| parse_error(e.path().to_string(), with_path(&e)))
        }
        PlanFormat::Yaml => {
            let de = serde_yaml_ng::Deserializer::from_str(text);
            serde_path_to_error::deserialize(de)
                .map_err(|e| parse_error(e.path().to_string(), with_path(&e)))
        }
    }
}

fn with_path<E: std::fmt::Display>(e: &serde_path_to_error::Error<E>) -> String {
    let path = e.path().to_string();
    let inner = e.inner().to_string();
    if path.is_empty() || path == "." {
        return inner;
    }
    // YAML errors already lead with the path; say it once, in the same form as JSON's.
    let message = inner
        .strip_prefix(path.as_str())
        .and_then(|rest| rest.strip_prefix(": "))
        .unwrap_or(&inner);
    format!("at {path}: {message}")
}

/// Reads and parses a plan file (format from its extension).
pub fn load_plan_file(path: &Path) -> Result<PlanSpec> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        operation: "reading plan file",
        path: path.to_owned(),
        source,
    })?;
    parse_plan(
        &text,
        PlanFormat::from_path(path),
        &path.display().to_string(),
    )
}
