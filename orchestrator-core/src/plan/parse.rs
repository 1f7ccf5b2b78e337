//! Reading plan files (JSON or YAML) with errors that name the path inside the document.

use std::path::Path;

use crate::error::{Error, Result};
use crate::plan::{PlanSpec, ValidationContext};

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
/// A plan that does not parse is reported with every problem it has (SPEC §2), not only the
/// first one serde meets: when there is more than one, the error is [`Error::Invalid`] listing
/// them all (unknown fields, unknown work types and values of the wrong type, each with its job
/// and field, and every validation problem of the rest of the plan); a single problem stays
/// [`Error::Parse`] with its path. A plan that parses is returned unvalidated, as before: call
/// [`crate::plan::validate`] on it. The report of a plan that does not parse leaves out the
/// checks that need a repository or a scaffolding context (see [`parse_plan_with`]), and does
/// not object to an empty job list (a scaffolded plan may have none).
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
///
/// // Two problems: both are named.
/// let err = parse_plan(r#"{"name":"p","maxParalel":2,"jobs":[
///     {"producerId":"aaa","task":"a","work":{"type":"docker"},"dependencies":[]}]}"#,
///     PlanFormat::Json, "plan.json").unwrap_err();
/// let text = err.to_string();
/// assert!(text.contains("maxParalel") && text.contains("docker"), "{text}");
/// ```
pub fn parse_plan(text: &str, format: PlanFormat, source_name: &str) -> Result<PlanSpec> {
    let ctx = ValidationContext {
        repo: None,
        scaffolding: true,
    };
    parse_plan_with(text, format, source_name, ctx)
}

/// [`parse_plan`], with the context a plan that does not parse is judged in: with
/// `ctx.repo` its report includes the checks of files and folders in the repository, and
/// without `ctx.scaffolding` an empty job list is one of its problems.
pub fn parse_plan_with(
    text: &str,
    format: PlanFormat,
    source_name: &str,
    ctx: ValidationContext<'_>,
) -> Result<PlanSpec> {
    let (path, message) = match typed(text, format) {
        Ok(spec) => return flattened(spec, ctx),
        Err(e) => e,
    };
    let first = (path.as_deref(), message.as_str());
    match crate::plan::collect::all_problems(text, format, ctx, first) {
        Some(all) if all.errors().len() > 1 => Err(Error::Invalid(all)),
        _ => Err(Error::Parse {
            source_name: source_name.to_owned(),
            path,
            message,
        }),
    }
}

/// A parsed plan with its nested groups (SPEC §2) flattened into `jobs`. When the groups have
/// problems (a reference that matches nothing, a bad group name, a producerId twice in a
/// group) the plan is reported with every problem it has, validation's included, as for a
/// plan that does not parse.
fn flattened(mut spec: PlanSpec, ctx: ValidationContext<'_>) -> Result<PlanSpec> {
    if spec.groups.is_empty() {
        return Ok(spec);
    }
    let found = crate::plan::groups::flatten(&mut spec);
    if found.problems.is_empty() {
        return Ok(spec);
    }
    let unread = |slot: usize, field: &str| found.covers(slot, field);
    let problems = found.problems.clone();
    Err(Error::Invalid(crate::plan::validate::with_parse_problems(
        &spec, ctx, problems, &unread,
    )))
}

/// The typed parse, or the path and message of its (first) problem.
fn typed(
    text: &str,
    format: PlanFormat,
) -> std::result::Result<PlanSpec, (Option<String>, String)> {
    let failure = |path: String, message: String| {
        ((!path.is_empty() && path != ".").then_some(path), message)
    };
    match format {
        PlanFormat::Json => {
            let de = &mut serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(de)
                .map_err(|e| failure(e.path().to_string(), with_path(&e)))
        }
        PlanFormat::Yaml => {
            let de = serde_yaml_ng::Deserializer::from_str(text);
            serde_path_to_error::deserialize(de)
                .map_err(|e| failure(e.path().to_string(), with_path(&e)))
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
