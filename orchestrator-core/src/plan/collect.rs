//! Reading a plan that does not parse, so that its report names every problem at once (SPEC §2).
//!
//! The typed parse (serde into [`PlanSpec`]) stops at the first problem: an unknown field, an
//! unknown work type or a value of the wrong type hides everything after it. When it fails, the
//! document is read again as a tree of its own format (JSON or YAML values), and the plan-level
//! fields and every job are parsed on their own. Each problem found is recorded and repaired in
//! the tree (an unknown field is dropped, a bad value is replaced by a placeholder) until the
//! piece parses, so the next problem shows; the repaired plan then goes through the ordinary
//! validation, whose findings about repaired fields are left out (they would be about the
//! placeholders, not about what the user wrote).
//!
//! This runs only for plans that fail to parse, and costs O(size of the plan) plus a parse per
//! problem of one job.

use std::collections::{HashMap, HashSet};

use serde::de::DeserializeOwned;

use crate::plan::validate::{self, ParseProblem};
use crate::plan::{
    GroupSpec, JobSpec, PlanFormat, PlanSpec, ValidationContext, ValidationErrors, WorkSpec,
};

/// Stands in for a value that could not be read: a string no producerId, command or path
/// check will mistake for a real one. Problems about it are never reported.
const PLACEHOLDER: &str = "<invalid>";

/// Repairs tried on one job (or the plan's own fields) before it is given up as a whole.
const MAX_REPAIRS: usize = 200;

/// The longest value a parse problem repeats.
const MAX_VALUE_CHARS: usize = 200;

/// Every problem of a plan text the typed parse refused, or `None` when the text is not even a
/// JSON or YAML document (a syntax error is one problem and says so itself).
///
/// `first` is the typed parse's own error (its path and message), always among the problems.
pub(crate) fn all_problems(
    text: &str,
    format: PlanFormat,
    ctx: ValidationContext<'_>,
    first: (Option<&str>, &str),
) -> Option<ValidationErrors> {
    match format {
        PlanFormat::Json => collect::<serde_json::Value>(text, ctx, first),
        PlanFormat::Yaml => collect::<serde_yaml_ng::Value>(text, ctx, first),
    }
}

fn collect<T: Tree>(
    text: &str,
    ctx: ValidationContext<'_>,
    first: (Option<&str>, &str),
) -> Option<ValidationErrors> {
    let mut root = T::parse_document(text)?;
    if !root.is_map() {
        return None;
    }
    // The jobs are read one by one below; the plan's own fields with an empty job list.
    let jobs = match root.get("jobs").map(|j| j.elements()) {
        Some(Some(jobs)) => {
            root.insert("jobs", T::sequence());
            jobs
        }
        _ => Vec::new(),
    };
    // Nested groups likewise, group by group and job by job (SPEC §2).
    let groups = take_sequence(&mut root, "groups");
    let mut found = Found::default();
    // Plan fields beyond repair leave the report to the typed parse's one problem.
    let mut spec = found.read::<T, PlanSpec>(0, root)?;
    spec.jobs = jobs
        .into_iter()
        .enumerate()
        .map(|(i, job)| {
            found
                .read::<T, JobSpec>(i + 1, job)
                .unwrap_or_else(|| placeholder_job(&mut found, i + 1))
        })
        .collect();
    let mut next_slot = spec.jobs.len() + 1;
    spec.groups = found.read_groups(groups, "", &mut next_slot);
    // The groups' jobs join `jobs` at the slots they were read into.
    let flat = crate::plan::groups::flatten(&mut spec);
    found.problems.extend(
        flat.problems
            .into_iter()
            // A group name the reading could not take is its own problem already.
            .filter(|p| p.value != PLACEHOLDER),
    );
    for (slot, fields) in flat.unread {
        found.unread.entry(slot).or_default().extend(fields);
    }
    found.include_first(&spec, first);
    let Found {
        problems, unread, ..
    } = found;
    let unread = |slot: usize, field: &str| {
        unread
            .get(&slot)
            .is_some_and(|fields| fields.iter().any(|f| covers(f, field)))
    };
    Some(validate::with_parse_problems(&spec, ctx, problems, &unread))
}

/// The elements of `key` of a map, which is left holding an empty sequence there; nothing
/// when `key` is absent or no sequence (the typed read of the map then reports it).
fn take_sequence<T: Tree>(map: &mut T, key: &str) -> Vec<T> {
    match map.get(key).map(|v| v.elements()) {
        Some(Some(items)) => {
            map.insert(key, T::sequence());
            items
        }
        _ => Vec::new(),
    }
}

/// A job that could not be read at all (not an object, or beyond repair): it keeps its slot,
/// so later jobs keep their positions, and nothing about it but its parse problems is reported.
fn placeholder_job(found: &mut Found, slot: usize) -> JobSpec {
    found.unread.entry(slot).or_default().insert(String::new());
    JobSpec::new("", PLACEHOLDER, WorkSpec::shell(PLACEHOLDER))
}

/// Whether the unread field `unread` (a field path such as `work` or `dependencies[1]`; empty
/// for the whole job) covers the problem `field`.
fn covers(unread: &str, field: &str) -> bool {
    unread.is_empty()
        || field == unread
        || field
            .strip_prefix(unread)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// What the reading found: the parse problems, and per slot the fields it had to repair.
#[derive(Default)]
struct Found {
    problems: Vec<ParseProblem>,
    /// Slot (`0` the plan, `i + 1` job `i`) → repaired field paths, in the validator's
    /// spelling (camelCase).
    unread: HashMap<usize, HashSet<String>>,
    /// Where each job of a group is in the document (`groups[0].jobs[1]`) and its slot.
    places: Vec<(String, usize)>,
}

impl Found {
    /// Parses one piece (the plan's fields, slot 0, or a job), repairing it problem by problem;
    /// `None` when it cannot be repaired.
    fn read<T: Tree, S: DeserializeOwned>(&mut self, slot: usize, mut tree: T) -> Option<S> {
        // Fields removed by a repair: their "missing field" is the repair's doing, not news.
        let mut removed: HashSet<String> = HashSet::new();
        // Unknown fields dropped, by the object they were in: a required field missing there
        // under a near spelling (`comand` for `command`) is the same mistake, already named.
        let mut misspelled: Vec<(Vec<Segment>, String)> = Vec::new();
        for _ in 0..MAX_REPAIRS {
            let (path, message) = match tree.typed::<S>() {
                Ok(spec) => return Some(spec),
                Err(e) => e,
            };
            // In a work spec of an unknown type nothing else can be judged (which fields it
            // may have depends on the type), so that is its one problem, whatever serde met
            // first.
            if let Some((spec_path, kind)) = unknown_work_type(&tree, &path) {
                let type_field = join(&spec_path, "type");
                let message = format!(
                    "unknown variant `{kind}`, expected one of `shell`, `process`, `agent`"
                );
                self.report(slot, type_field, kind, &message);
                self.mark(slot, &display(&spec_path));
                tree.at_mut(&spec_path)?.replace(T::string(PLACEHOLDER));
                continue;
            }
            if let Some(name) = named_field(&message, "missing field") {
                let field = join(&path, name);
                let near = misspelled
                    .iter()
                    .any(|(at, unknown)| *at == path && near_spelling(unknown, name));
                if !near && !removed.contains(&camel_path(&field)) {
                    self.report(slot, field.clone(), String::new(), &message);
                }
                self.mark(slot, &field);
                if path.is_empty() {
                    // A required field of the plan or job itself.
                    tree.insert(name, required_placeholder::<T>(name)?);
                } else {
                    // A work spec object lacking `type`, `command` or `executable`.
                    let spec_path = display(&path);
                    self.mark(slot, &spec_path);
                    tree.at_mut(&path)?.replace(T::string(PLACEHOLDER));
                }
                continue;
            }
            let field = display(&path);
            let value = tree.at(&path).map(Tree::render).unwrap_or_default();
            self.report(slot, field.clone(), value, &message);
            let (last, parent) = path.split_last()?;
            match last {
                Segment::Key(key) if message.starts_with("unknown field") => {
                    tree.at_mut(parent)?.remove(key)?;
                    misspelled.push((parent.to_vec(), key.clone()));
                }
                // A work spec of an unknown type: nothing in it can be judged.
                Segment::Key(key) if key == "type" && !parent.is_empty() => {
                    self.mark(slot, &display(parent));
                    tree.at_mut(parent)?.replace(T::string(PLACEHOLDER));
                }
                Segment::Key(key) => {
                    self.mark(slot, &field);
                    removed.insert(camel_path(&field));
                    tree.at_mut(parent)?.remove(key)?;
                }
                Segment::Index(_) => {
                    self.mark(slot, &field);
                    tree.at_mut(&path)?.replace(T::string(PLACEHOLDER));
                }
            }
        }
        None
    }

    /// Reads nested groups (at document path `at`), each group's jobs into the next slots,
    /// in the order flattening gives them: a group's jobs, then its subgroups'.
    fn read_groups<T: Tree>(
        &mut self,
        groups: Vec<T>,
        at: &str,
        next_slot: &mut usize,
    ) -> Vec<GroupSpec> {
        let mut out = Vec::with_capacity(groups.len());
        for (i, mut tree) in groups.into_iter().enumerate() {
            let here = format!("{at}groups[{i}]");
            let jobs = take_sequence(&mut tree, "jobs");
            let subgroups = take_sequence(&mut tree, "groups");
            let mut group = self.read_group(&here, tree);
            for (j, job) in jobs.into_iter().enumerate() {
                let slot = *next_slot;
                *next_slot += 1;
                self.places.push((format!("{here}.jobs[{j}]"), slot));
                let job = self
                    .read::<T, JobSpec>(slot, job)
                    .unwrap_or_else(|| placeholder_job(self, slot));
                group.jobs.push(job);
            }
            group.groups = self.read_groups(subgroups, &format!("{here}."), next_slot);
            out.push(group);
        }
        out
    }

    /// A group's own fields (its jobs and subgroups taken out), its problems named by the
    /// group's document path.
    fn read_group<T: Tree>(&mut self, here: &str, tree: T) -> GroupSpec {
        let before = self.problems.len();
        // The group's repairs are not the plan's: its fields must not hide the plan's own.
        let plan_unread = self.unread.get(&0).cloned();
        let group = self.read::<T, GroupSpec>(0, tree);
        match plan_unread {
            Some(fields) => self.unread.insert(0, fields),
            None => self.unread.remove(&0),
        };
        for p in &mut self.problems[before..] {
            p.field = if p.field.is_empty() {
                here.to_owned()
            } else {
                format!("{here}.{}", p.field)
            };
        }
        group.unwrap_or_else(|| GroupSpec::new(PLACEHOLDER))
    }

    fn report(&mut self, slot: usize, field: String, value: String, message: &str) {
        self.problems.push(ParseProblem {
            slot,
            field,
            value,
            message: without_location(message).to_owned(),
        });
    }

    fn mark(&mut self, slot: usize, field: &str) {
        self.unread
            .entry(slot)
            .or_default()
            .insert(camel_path(field));
    }

    /// Adds the typed parse's own problem unless the reading found it too (it always should;
    /// this keeps the report complete if serde and the reading ever disagree).
    fn include_first(&mut self, spec: &PlanSpec, (path, message): (Option<&str>, &str)) {
        let (slot, field) = match path {
            Some(path) => self
                .group_job_path(path)
                .unwrap_or_else(|| split_job_path(path)),
            None => (0, String::new()),
        };
        let known = self.problems.iter().any(|p| {
            p.slot == slot && (p.field == field || field.is_empty() || p.field.starts_with(&field))
        });
        if !known && (slot == 0 || slot <= spec.jobs.len()) {
            self.problems.insert(
                0,
                ParseProblem {
                    slot,
                    field,
                    value: String::new(),
                    message: message.to_owned(),
                },
            );
        }
    }
}

impl Found {
    /// `groups[0].jobs[1].work` → (the slot of that job, `work`).
    fn group_job_path(&self, path: &str) -> Option<(usize, String)> {
        self.places.iter().find_map(|(at, slot)| {
            let rest = path.strip_prefix(at.as_str())?;
            match rest.strip_prefix('.') {
                Some(field) => Some((*slot, field.to_owned())),
                None => rest.is_empty().then(|| (*slot, String::new())),
            }
        })
    }
}

/// The work types a work spec object may name.
const WORK_TYPES: &[&str] = &["shell", "process", "agent"];

/// The innermost work spec object on `path` (an object with a `type`) whose `type` is not a
/// work type: its path and the type given.
fn unknown_work_type<T: Tree>(tree: &T, path: &[Segment]) -> Option<(Vec<Segment>, String)> {
    (0..=path.len()).rev().find_map(|n| {
        let at = &path[..n];
        // An `env` map may hold a variable called `type`; it is no work spec.
        if matches!(at.last(), Some(Segment::Key(k)) if k == "env") {
            return None;
        }
        let kind = tree.at(at)?.get("type")?.render();
        (!WORK_TYPES.contains(&kind.as_str())).then(|| (at.to_vec(), kind))
    })
}

/// Whether two field names are near spellings of each other: equal but for case, `_` and
/// `-`, or at most two letters apart (`comand`, `command`).
fn near_spelling(a: &str, b: &str) -> bool {
    let norm = |s: &str| -> Vec<char> {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let (a, b) = (norm(a), norm(b));
    // Levenshtein distance, one row at a time.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()] <= 2
}

/// `jobs[3].work.comand` → (4, `work.comand`); a plan field → (0, the path).
fn split_job_path(path: &str) -> (usize, String) {
    let Some(rest) = path.strip_prefix("jobs[") else {
        return (0, path.to_owned());
    };
    let Some((index, field)) = rest.split_once(']') else {
        return (0, path.to_owned());
    };
    match index.parse::<usize>() {
        Ok(i) => (i + 1, field.trim_start_matches('.').to_owned()),
        Err(_) => (0, path.to_owned()),
    }
}

/// The placeholder of a required field the plan or a job lacks.
fn required_placeholder<T: Tree>(name: &str) -> Option<T> {
    match name {
        "jobs" | "dependencies" => Some(T::sequence()),
        // An empty producerId makes the job `jobs[i]` in every report, as validation does.
        "producerId" | "producer_id" => Some(T::string("")),
        "name" | "task" | "work" => Some(T::string(PLACEHOLDER)),
        _ => None,
    }
}

/// The field a serde message names in backticks after `prefix` ("missing field `task`").
fn named_field<'m>(message: &'m str, prefix: &str) -> Option<&'m str> {
    message.strip_prefix(prefix)?.split('`').nth(1)
}

/// A YAML message without its " at line L column C": the lines are those of the piece as
/// re-read, not of the user's file.
fn without_location(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i)
            if message[i + " at line ".len()..]
                .split(" column ")
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            &message[..i]
        }
        _ => message,
    }
}

/// `a.b[2]` with `name` appended (`a.b[2].name`, or just `name` at the top).
fn join(path: &[Segment], name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{}.{name}", display(path))
    }
}

/// A path as problems show it: `work.onFailure.message`, `dependencies[1]`.
fn display(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A field path in the validator's camelCase spelling: snake_case aliases (`producer_id`,
/// `work.on_failure`) become `producerId`, `work.onFailure`. Other keys (environment
/// variable names) stay as they are.
fn camel_path(path: &str) -> String {
    path.split('.')
        .map(|part| {
            let is_snake = part.contains('_')
                && part.bytes().all(|b| {
                    b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b == b'_'
                        || b == b'['
                        || b == b']'
                });
            if !is_snake {
                return part.to_owned();
            }
            let mut out = String::with_capacity(part.len());
            let mut upper = false;
            for c in part.chars() {
                if c == '_' {
                    upper = true;
                } else if upper {
                    out.push(c.to_ascii_uppercase());
                    upper = false;
                } else {
                    out.push(c);
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// A value shown in a problem: strings as they are, anything else as compact JSON; long ones
/// cut short.
fn shorten(text: String) -> String {
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text;
    }
    let start: String = text.chars().take(MAX_VALUE_CHARS).collect();
    format!("{start}… ({} bytes in all)", text.len())
}

/// One step of a path into a document.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// The path of a serde error, as segments; `None` for a step the reading cannot follow.
fn segments(path: &serde_path_to_error::Path) -> Vec<Segment> {
    use serde_path_to_error::Segment as S;
    path.iter()
        .filter_map(|s| match s {
            S::Seq { index } => Some(Segment::Index(*index)),
            S::Map { key } => Some(Segment::Key(key.clone())),
            S::Enum { .. } | S::Unknown => None,
        })
        .collect()
}

/// A document of one format, read and repaired piece by piece.
trait Tree: Sized {
    /// The document, or `None` when the text is not one.
    fn parse_document(text: &str) -> Option<Self>;
    /// This piece as `S`, or the path (inside the piece) and message of its first problem.
    fn typed<S: DeserializeOwned>(&self) -> Result<S, (Vec<Segment>, String)>;
    fn is_map(&self) -> bool;
    fn get(&self, key: &str) -> Option<&Self>;
    fn child_mut(&mut self, segment: &Segment) -> Option<&mut Self>;
    fn child(&self, segment: &Segment) -> Option<&Self>;
    /// Sets `key` of a map.
    fn insert(&mut self, key: &str, value: Self);
    /// Removes `key` of a map; `None` when this is no map or has no such key.
    fn remove(&mut self, key: &str) -> Option<Self>;
    /// The elements of a sequence.
    fn elements(&self) -> Option<Vec<Self>>;
    fn string(text: &str) -> Self;
    fn sequence() -> Self;
    /// The value as a problem shows it.
    fn render(&self) -> String;

    fn replace(&mut self, value: Self) {
        *self = value;
    }

    fn at(&self, path: &[Segment]) -> Option<&Self> {
        path.iter().try_fold(self, |node, s| node.child(s))
    }

    fn at_mut(&mut self, path: &[Segment]) -> Option<&mut Self> {
        path.iter().try_fold(self, |node, s| node.child_mut(s))
    }
}

impl Tree for serde_json::Value {
    fn parse_document(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    fn typed<S: DeserializeOwned>(&self) -> Result<S, (Vec<Segment>, String)> {
        serde_path_to_error::deserialize(self.clone())
            .map_err(|e| (segments(e.path()), e.inner().to_string()))
    }

    fn is_map(&self) -> bool {
        self.is_object()
    }

    fn get(&self, key: &str) -> Option<&Self> {
        self.as_object()?.get(key)
    }

    fn child_mut(&mut self, segment: &Segment) -> Option<&mut Self> {
        match segment {
            Segment::Key(key) => self.as_object_mut()?.get_mut(key),
            Segment::Index(i) => self.as_array_mut()?.get_mut(*i),
        }
    }

    fn child(&self, segment: &Segment) -> Option<&Self> {
        match segment {
            Segment::Key(key) => self.as_object()?.get(key),
            Segment::Index(i) => self.as_array()?.get(*i),
        }
    }

    fn insert(&mut self, key: &str, value: Self) {
        if let Some(map) = self.as_object_mut() {
            map.insert(key.to_owned(), value);
        }
    }

    fn remove(&mut self, key: &str) -> Option<Self> {
        self.as_object_mut()?.remove(key)
    }

    fn elements(&self) -> Option<Vec<Self>> {
        self.as_array().cloned()
    }

    fn string(text: &str) -> Self {
        serde_json::Value::String(text.to_owned())
    }

    fn sequence() -> Self {
        serde_json::Value::Array(Vec::new())
    }

    fn render(&self) -> String {
        shorten(match self {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

impl Tree for serde_yaml_ng::Value {
    fn parse_document(text: &str) -> Option<Self> {
        serde_yaml_ng::from_str(text).ok()
    }

    fn typed<S: DeserializeOwned>(&self) -> Result<S, (Vec<Segment>, String)> {
        // Re-read as text rather than from the value: YAML's untyped scalars (`PORT: 8080`)
        // read as strings only from text, as in the typed parse of the whole file.
        let text = serde_yaml_ng::to_string(self).map_err(|e| (Vec::new(), e.to_string()))?;
        serde_path_to_error::deserialize(serde_yaml_ng::Deserializer::from_str(&text)).map_err(
            |e| {
                // YAML messages lead with the path, which the problem names apart.
                let path = e.path().to_string();
                let message = e.inner().to_string();
                // (That of the innermost mapping: for an unknown field, its parent's path.)
                let message = match message.split_once(": ") {
                    Some((lead, rest)) if !lead.contains(' ') && path.starts_with(lead) => {
                        rest.to_owned()
                    }
                    _ => message,
                };
                (segments(e.path()), message)
            },
        )
    }

    fn is_map(&self) -> bool {
        self.is_mapping()
    }

    fn get(&self, key: &str) -> Option<&Self> {
        self.as_mapping()?.get(key)
    }

    fn child_mut(&mut self, segment: &Segment) -> Option<&mut Self> {
        match segment {
            Segment::Key(key) => self.as_mapping_mut()?.get_mut(key.as_str()),
            Segment::Index(i) => self.as_sequence_mut()?.get_mut(*i),
        }
    }

    fn child(&self, segment: &Segment) -> Option<&Self> {
        match segment {
            Segment::Key(key) => self.as_mapping()?.get(key.as_str()),
            Segment::Index(i) => self.as_sequence()?.get(*i),
        }
    }

    fn insert(&mut self, key: &str, value: Self) {
        if let Some(map) = self.as_mapping_mut() {
            map.insert(Self::string(key), value);
        }
    }

    fn remove(&mut self, key: &str) -> Option<Self> {
        self.as_mapping_mut()?.shift_remove(key)
    }

    fn elements(&self) -> Option<Vec<Self>> {
        self.as_sequence().cloned()
    }

    fn string(text: &str) -> Self {
        serde_yaml_ng::Value::String(text.to_owned())
    }

    fn sequence() -> Self {
        serde_yaml_ng::Value::Sequence(Vec::new())
    }

    fn render(&self) -> String {
        shorten(match self {
            serde_yaml_ng::Value::String(s) => s.clone(),
            other => serde_json::to_string(other).unwrap_or_else(|_| {
                serde_yaml_ng::to_string(other)
                    .map(|t| t.trim_end().to_owned())
                    .unwrap_or_default()
            }),
        })
    }
}
