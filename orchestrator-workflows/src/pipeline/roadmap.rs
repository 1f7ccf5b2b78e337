//! The planner's roadmap (SPEC §13): a fenced JSON list `[{"id","task","complexity",
//! "dependsOn"}]` in its reply, each item a `pipeline` sub-job.

use std::collections::HashSet;

use orchestrator_core::composite::MAX_SUB_JOBS;
use orchestrator_core::plan::Complexity;
use serde::Deserialize;

/// One item of a roadmap.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoadmapItem {
    /// Its id: the sub-job's name.
    pub id: String,
    /// Its task.
    pub task: String,
    /// Its complexity (default `medium`).
    #[serde(default)]
    pub complexity: Complexity,
    /// Ids of earlier items it builds on.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// The roadmap in `reply`: its first fenced JSON block holding a list; what is wrong
/// otherwise (no block, bad JSON, bad or repeated ids, unknown or later dependencies).
///
/// ```
/// use orchestrator_workflows::pipeline::parse_roadmap;
/// let reply = "Roadmap:\n```json\n[{\"id\":\"api\",\"task\":\"Add the API\",\"complexity\":\"simple\"},\n \
///              {\"id\":\"docs\",\"task\":\"Document it\",\"dependsOn\":[\"api\"]}]\n```\n";
/// let items = parse_roadmap(reply).expect("accepted");
/// assert_eq!(items[1].depends_on, ["api"]);
/// ```
pub fn parse_roadmap(reply: &str) -> Result<Vec<RoadmapItem>, String> {
    let json = fenced_json(reply).ok_or("the planner's reply has no fenced ```json roadmap")?;
    let items: Vec<RoadmapItem> = serde_json::from_str(json)
        .map_err(|e| format!("the roadmap is not a list of items: {e}"))?;
    if items.is_empty() {
        return Err("the roadmap has no items".to_owned());
    }
    if items.len() > MAX_SUB_JOBS {
        return Err(format!(
            "the roadmap has {} items; at most {MAX_SUB_JOBS}",
            items.len()
        ));
    }
    let mut seen = HashSet::new();
    for item in &items {
        let id = item.id.as_str();
        let valid = id.len() >= 3
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid {
            return Err(format!(
                "roadmap item id `{id}` is not 3–64 characters of a-z, digits and `-`"
            ));
        }
        if super::role_of(id).is_some() {
            return Err(format!(
                "roadmap item id `{id}` is the name of a stage (`<role>` or `<role>-<n>`)"
            ));
        }
        if item.task.trim().is_empty() {
            return Err(format!("roadmap item `{id}` has no task"));
        }
        for dep in &item.depends_on {
            if !seen.contains(dep.as_str()) {
                return Err(format!(
                    "roadmap item `{id}` depends on `{dep}`, which is no earlier item"
                ));
            }
        }
        if !seen.insert(id) {
            return Err(format!("roadmap item id `{id}` is given twice"));
        }
    }
    Ok(items)
}

/// The body of the first fenced block of `text` tagged `json` (or untagged, holding a list).
fn fenced_json(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let line_end = after.find('\n')?;
        let tag = after[..line_end].trim();
        let body_start = &after[line_end + 1..];
        let close = body_start.find("```")?;
        let body = &body_start[..close];
        if tag.eq_ignore_ascii_case("json")
            || (tag.is_empty() && body.trim_start().starts_with('['))
        {
            return Some(body);
        }
        rest = &body_start[close + 3..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fenced(json: &str) -> String {
        format!("Here it is.\n```json\n{json}\n```\nDone.")
    }

    #[test]
    fn good_and_bad_roadmaps() {
        let ok = parse_roadmap(&fenced(
            r#"[{"id":"one","task":"a"},{"id":"two","task":"b","dependsOn":["one"]}]"#,
        ))
        .expect("accepted");
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[0].complexity, Complexity::Medium);
        let err = |json: &str| parse_roadmap(&fenced(json)).expect_err("refused");
        assert!(err("[]").contains("no items"));
        assert!(err(r#"[{"id":"One","task":"a"}]"#).contains("`One`"));
        assert!(err(r#"[{"id":"coder","task":"a"}]"#).contains("stage"));
        assert!(err(r#"[{"id":"review-2","task":"a"}]"#).contains("stage"));
        assert!(err(r#"[{"id":"one","task":" "}]"#).contains("no task"));
        assert!(
            err(r#"[{"id":"one","task":"a","dependsOn":["two"]},{"id":"two","task":"b"}]"#)
                .contains("no earlier item")
        );
        assert!(err(r#"[{"id":"one","task":"a"},{"id":"one","task":"b"}]"#).contains("twice"));
        assert!(err(r#"[{"id":"one","task":"a","complexity":"huge"}]"#).contains("huge"));
        assert!(parse_roadmap("no block")
            .expect_err("refused")
            .contains("fenced"));
        let nine: Vec<String> = (0..9)
            .map(|i| format!(r#"{{"id":"item{i}","task":"t"}}"#))
            .collect();
        assert!(err(&format!("[{}]", nine.join(","))).contains("at most 8"));
    }

    #[test]
    fn an_untagged_fence_with_a_list_counts_and_other_fences_are_skipped() {
        let reply = "```sh\ncargo test\n```\n```\n[{\"id\":\"one\",\"task\":\"a\"}]\n```";
        assert_eq!(parse_roadmap(reply).expect("accepted")[0].id, "one");
    }
}
