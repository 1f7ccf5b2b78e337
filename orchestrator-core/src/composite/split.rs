//! Context-pressure splitting (SPEC §12, the reference's `completed_split`): a job whose work
//! leaves a manifest `.orchestrator-split.json` in its worktree has committed what it has, and
//! the manifest's items become its sub-jobs.
//!
//! ```json
//! {"items": [{"name": "api-tests", "task": "Test the API", "instructions": "...",
//!             "dependsOn": ["api"]}]}
//! ```
//! At most [`super::MAX_SUB_JOBS`] items, each named like a producerId segment, depending only
//! on items of the same manifest. The job goes `running → completed_split`; once the items all
//! succeeded their commits are merged into its commit and it ends `succeeded`.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;

use super::{CompositeFacts, Controller, Decision, MAX_SUB_JOBS};
use crate::plan::{JobSpec, ShellSpec, WorkSpec};
use crate::state::NodeStatus;

/// The manifest's file name, at the root of the job's worktree (never committed).
pub const MANIFEST_FILE: &str = ".orchestrator-split.json";

/// A split manifest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct SplitManifest {
    /// The remaining work, one sub-job per item.
    pub items: Vec<SplitItem>,
}

/// One item of a split manifest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct SplitItem {
    /// Its name; the sub-job is `<parent>/<name>`.
    pub name: String,
    /// What it does (the sub-job's task).
    pub task: String,
    /// Its instructions (an agent's; for shell work, the command).
    pub instructions: String,
    /// Names of items of the same manifest it depends on.
    #[serde(default, alias = "depends_on")]
    pub depends_on: Vec<String>,
}

impl SplitManifest {
    /// Reads and checks a manifest; the error names the file and the field.
    ///
    /// ```
    /// use orchestrator_core::composite::SplitManifest;
    /// let m = SplitManifest::parse(r#"{"items":[
    ///     {"name":"api","task":"API","instructions":"write it"},
    ///     {"name":"docs","task":"Docs","instructions":"document it","dependsOn":["api"]}]}"#)
    ///     .unwrap();
    /// assert_eq!(m.items[1].depends_on, ["api"]);
    /// let err = SplitManifest::parse(r#"{"items":[{"name":"api","task":"","instructions":"x"}]}"#)
    ///     .unwrap_err();
    /// assert_eq!(err, ".orchestrator-split.json: items[0].task: must not be empty");
    /// ```
    pub fn parse(text: &str) -> Result<SplitManifest, String> {
        let at = |field: &str, message: &str| format!("{MANIFEST_FILE}: {field}: {message}");
        let manifest: SplitManifest =
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
                .map_err(|e| {
                    let path = e.path().to_string();
                    let field = if path == "." {
                        "(top)".to_owned()
                    } else {
                        path
                    };
                    at(&field, &e.inner().to_string())
                })?;
        if manifest.items.is_empty() {
            return Err(at("items", "must list at least one item"));
        }
        if manifest.items.len() > MAX_SUB_JOBS {
            return Err(at(
                "items",
                &format!(
                    "{} items; a split makes at most {MAX_SUB_JOBS}",
                    manifest.items.len()
                ),
            ));
        }
        let mut names: HashMap<&str, usize> = HashMap::new();
        for (i, item) in manifest.items.iter().enumerate() {
            let field = |f: &str| format!("items[{i}].{f}");
            if let Some(problem) = crate::plan::producer_id_problem(&item.name) {
                return Err(at(
                    &field("name"),
                    &format!("`{}` {problem} (3–64 of a-z, 0-9 and -)", item.name),
                ));
            }
            if let Some(first) = names.insert(&item.name, i) {
                return Err(at(
                    &field("name"),
                    &format!("`{}` is also the name of items[{first}]", item.name),
                ));
            }
            if item.task.trim().is_empty() {
                return Err(at(&field("task"), "must not be empty"));
            }
            if item.instructions.trim().is_empty() {
                return Err(at(&field("instructions"), "must not be empty"));
            }
        }
        for (i, item) in manifest.items.iter().enumerate() {
            for (d, dep) in item.depends_on.iter().enumerate() {
                let field = format!("items[{i}].dependsOn[{d}]");
                if dep == &item.name {
                    return Err(at(&field, "an item cannot depend on itself"));
                }
                if !names.contains_key(dep.as_str()) {
                    return Err(at(
                        &field,
                        &format!("`{dep}` names no item of this manifest"),
                    ));
                }
            }
        }
        if let Some(name) = first_in_cycle(&manifest.items) {
            return Err(at(
                "items",
                &format!("the dependencies make a cycle through `{name}`"),
            ));
        }
        Ok(manifest)
    }
}

/// An item on a dependency cycle, if there is one.
fn first_in_cycle(items: &[SplitItem]) -> Option<&str> {
    let index: HashMap<&str, &SplitItem> = items.iter().map(|i| (i.name.as_str(), i)).collect();
    let mut done: HashSet<&str> = HashSet::new();
    for start in items {
        let mut path: Vec<&str> = Vec::new();
        if visit(&start.name, &index, &mut done, &mut path) {
            return path.last().copied();
        }
    }
    None
}

/// Depth-first search; true when `name` is reached again on the current `path`.
fn visit<'a>(
    name: &'a str,
    index: &HashMap<&'a str, &'a SplitItem>,
    done: &mut HashSet<&'a str>,
    path: &mut Vec<&'a str>,
) -> bool {
    if path.contains(&name) {
        path.push(name);
        return true;
    }
    if done.contains(name) {
        return false;
    }
    path.push(name);
    if let Some(item) = index.get(name) {
        for dep in &item.depends_on {
            if visit(dep, index, done, path) {
                return true;
            }
        }
    }
    path.pop();
    done.insert(name);
    false
}

/// The controller of split jobs: the manifest's items become sub-jobs that do the same kind of
/// work as the job (its agent and settings with the item's instructions; for shell or process
/// work, the item's instructions as a shell command), branch from its commit and inherit its
/// environment, group and split policy. Asked again when they ended: done when all succeeded
/// (its output lists them), failed naming the first that did not.
#[derive(Debug, Default, Clone, Copy)]
pub struct SplitController;

impl Controller for SplitController {
    fn decide(&self, facts: &CompositeFacts<'_>) -> Decision {
        let Some(text) = facts.request else {
            return ended(facts);
        };
        let manifest = match SplitManifest::parse(text) {
            Ok(m) => m,
            Err(reason) => return Decision::Failed { reason },
        };
        let parent = &facts.job.producer_id;
        let jobs = manifest
            .items
            .into_iter()
            .map(|item| {
                let work = match &facts.job.work {
                    WorkSpec::Agent(a) => {
                        let mut a = a.clone();
                        a.instructions = Some(item.instructions);
                        a.instructions_file = None;
                        WorkSpec::Agent(a)
                    }
                    WorkSpec::Shell(s) => WorkSpec::Shell(ShellSpec {
                        command: item.instructions,
                        ..s.clone()
                    }),
                    _ => WorkSpec::shell(item.instructions),
                };
                let mut job = facts.sub_job(
                    JobSpec::new(format!("{parent}/{}", item.name), item.task, work)
                        .depends_on(item.depends_on.iter().map(|d| format!("{parent}/{d}"))),
                );
                let (extra, own) = (job.extra.make_mut(), &facts.job.extra);
                extra.env = own.env.clone();
                extra.group = own.group.clone();
                extra.split = own.split;
                extra.auto_heal = own.auto_heal;
                job
            })
            .collect();
        Decision::Spawn(jobs)
    }
}

/// The sub-jobs ended: done when all succeeded, else failed naming the first that did not.
fn ended(facts: &CompositeFacts<'_>) -> Decision {
    if let Some(child) = facts
        .children
        .iter()
        .find(|c| c.status != NodeStatus::Succeeded)
    {
        return Decision::Failed {
            reason: format!("sub-job `{}` is {}", child.producer_id, child.status),
        };
    }
    let names: Vec<&str> = facts.children.iter().map(|c| c.producer_id).collect();
    Decision::Done {
        output: Some(format!(
            "split into {} sub-jobs: {}",
            names.len(),
            names.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        SplitManifest::parse(text).expect_err("refused")
    }

    #[test]
    fn bad_manifests_name_the_file_and_the_field() {
        let item = |name: &str, deps: &str| {
            format!(r#"{{"name":"{name}","task":"t","instructions":"i","dependsOn":[{deps}]}}"#)
        };
        assert_eq!(
            err("not json"),
            ".orchestrator-split.json: (top): expected ident at line 1 column 2"
        );
        assert!(err(r#"{"items":[{"name":"aaa","task":"t"}]}"#)
            .starts_with(".orchestrator-split.json: items[0]: missing field `instructions`"));
        assert!(
            err(r#"{"items":[{"name":"aaa","task":"t","instructions":"i","extra":1}]}"#)
                .contains("items[0].extra: unknown field `extra`")
        );
        assert_eq!(
            err(r#"{"items":[]}"#),
            ".orchestrator-split.json: items: must list at least one item"
        );
        let nine: Vec<String> = (0..9).map(|i| item(&format!("item-{i}"), "")).collect();
        assert!(err(&format!(r#"{{"items":[{}]}}"#, nine.join(","))).contains("at most 8"));
        assert!(err(&format!(r#"{{"items":[{}]}}"#, item("A b", ""))).contains("items[0].name"));
        assert!(err(&format!(
            r#"{{"items":[{},{}]}}"#,
            item("aaa", ""),
            item("aaa", "")
        ))
        .contains("items[1].name: `aaa` is also the name of items[0]"));
        assert!(
            err(&format!(r#"{{"items":[{}]}}"#, item("aaa", r#""zzz""#)))
                .contains("items[0].dependsOn[0]: `zzz` names no item")
        );
        assert!(
            err(&format!(r#"{{"items":[{}]}}"#, item("aaa", r#""aaa""#)))
                .contains("cannot depend on itself")
        );
        assert!(err(&format!(
            r#"{{"items":[{},{},{}]}}"#,
            item("aaa", r#""ccc""#),
            item("bbb", r#""aaa""#),
            item("ccc", r#""bbb""#)
        ))
        .contains("make a cycle"));
    }

    #[test]
    fn items_become_sub_jobs_of_the_same_kind_of_work() {
        let plan = crate::plan::PlanSpec::new("p");
        let mut job = JobSpec::new("big", "Big", WorkSpec::agent("do it all"));
        job.extra.make_mut().env.insert("K".into(), "v".into());
        let facts = CompositeFacts {
            plan: &plan,
            job: &job,
            depth: 0,
            commit: Some("abc"),
            request: Some(
                r#"{"items":[{"name":"one","task":"One","instructions":"first half"},
                   {"name":"two","task":"Two","instructions":"second half","dependsOn":["one"]}]}"#,
            ),
            children: Vec::new(),
        };
        let Decision::Spawn(jobs) = SplitController.decide(&facts) else {
            panic!("spawns")
        };
        assert_eq!(jobs[0].producer_id, "big/one");
        assert_eq!(jobs[1].dependencies, ["big/one"]);
        assert_eq!(jobs[1].extra.parent.as_deref(), Some("big"));
        assert_eq!(jobs[0].extra.base_branch.as_deref(), Some("abc"));
        assert_eq!(jobs[0].extra.env.get("K").map(String::as_str), Some("v"));
        let WorkSpec::Agent(a) = &jobs[1].work else {
            panic!("agent work")
        };
        assert_eq!(a.instructions.as_deref(), Some("second half"));
        assert_eq!(super::super::spawn_problem(&facts, &jobs), None);
    }
}
