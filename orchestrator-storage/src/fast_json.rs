//! The JSON of a snapshot's spec and state ([`crate::snapshot`]), written directly for the
//! shapes most jobs and nodes have, compact, and read back.
//!
//! The plan must be on the disk before its first job starts (SPEC §5), so its creation writes
//! and flushes all of it: for a 10,000-job plan of no-op jobs, 1.85 MB as `serde_json` writes
//! it, whose writing and flushing were most of the file store's cost over the in-memory store.
//! Here, in the lists of jobs and nodes:
//!
//! - a job of the common shape (shell work with nothing but its command, no name, none of the
//!   rarer fields) is an array of strings, `["n0000007","noop","true","n0000001","n0000003"]`,
//!   instead of an object with its keys and the `work` object (a third of the bytes);
//! - nodes as a new plan makes them (pending, never run) whose ids are derived from the plan's
//!   at their index ([`DerivedIds`]) are counted, a run of them one JSON number: a new plan's
//!   state is a few hundred bytes whatever its size (its 10,000 ids were 390 KB);
//! - another node that has not run and is pending is its id alone, a JSON string (three
//!   fifths of its object);
//! - every other job and node is the object `serde_json` writes, and so are the plan's and the
//!   state's own fields. A snapshot of a build before this ([`crate::snapshot::VERSION`]) has
//!   only objects, and reads the same way.
//!
//! The common shapes are also written without `serde_json`'s generic machinery (maps for the
//! flattened `extra` fields, the tagged `work` enum, escaping every key), which took ~3.7 ms of
//! a 10,000-node plan's creation. The tests check that every shape comes back as it was, and
//! that the reader takes `serde_json`'s objects as well.

use std::fmt;

use orchestrator_core::ids::{DerivedIds, NodeId};
use orchestrator_core::plan::{JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::state::{NodeState, NodeStatus, PlanState};
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Error;

/// `spec` as compact JSON, in a buffer of `capacity` bytes to start with.
pub(crate) fn spec(spec: &PlanSpec, capacity: usize) -> Result<Vec<u8>, Error> {
    let items = |out: &mut Vec<u8>| {
        for (i, job) in spec.jobs.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if !write_job(out, job)? {
                serde_json::to_writer(&mut *out, job)?;
            }
        }
        Ok(())
    };
    spliced(spec, &without_jobs(spec), "jobs", capacity, items)
}

/// `state` as compact JSON, in a buffer of `capacity` bytes to start with.
pub(crate) fn state(state: &PlanState, capacity: usize) -> Result<Vec<u8>, Error> {
    // A plan's nodes share a handful of statuses: each is encoded once.
    let mut statuses: Vec<(NodeStatus, Vec<u8>)> = Vec::new();
    let derived = DerivedIds::of(&state.id);
    let nodes = &state.nodes;
    let derived_at = |i: usize| {
        derived
            .as_ref()
            .is_some_and(|ids| fresh(&nodes[i]) && ids.is(&nodes[i].id, i))
    };
    let items = |out: &mut Vec<u8>| {
        let mut i = 0;
        while i < nodes.len() {
            if i > 0 {
                out.push(b',');
            }
            // Fresh nodes whose ids are derived at their index, in a row: their count.
            let run = (i..nodes.len()).take_while(|&j| derived_at(j)).count();
            if run > 0 {
                out.extend_from_slice(run.to_string().as_bytes());
                i += run;
                continue;
            }
            if !write_node(out, &nodes[i], &mut statuses)? {
                serde_json::to_writer(&mut *out, &nodes[i])?;
            }
            i += 1;
        }
        Ok(())
    };
    spliced(state, &without_nodes(state), "nodes", capacity, items)
}

/// Whether `node` holds nothing but its id and status: never run, none of the rarer fields.
fn bare(node: &NodeState) -> bool {
    // Every field named, as in `write_job`: a field added to `NodeState` stops the build here
    // until this says what to do with it.
    let NodeState {
        id: _,
        status: _,
        attempts,
        extra,
    } = node;
    attempts.is_empty() && extra.is_empty()
}

/// Whether `node` is as a new plan makes it: pending and [`bare`].
fn fresh(node: &NodeState) -> bool {
    node.status == NodeStatus::Pending && bare(node)
}

/// `whole` as compact JSON, made of the JSON of `shell` (`whole` with its list `key` empty)
/// with the list's items written by `items` (commas between them too). `whole` the usual way
/// if the shell's JSON has no `"<key>":[]`; its first one must be the list's (see
/// [`without_jobs`]).
fn spliced<T: serde::Serialize>(
    whole: &T,
    shell: &T,
    key: &str,
    capacity: usize,
    items: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(capacity);
    let shell = serde_json::to_vec(shell)?;
    let empty = format!("\"{key}\":[]");
    let Some(at) = memchr::memmem::find(&shell, empty.as_bytes()) else {
        serde_json::to_writer(&mut out, whole)?;
        return Ok(out);
    };
    // Up to the list's `[`, the items, then from its `]` on.
    let (head, tail) = shell.split_at(at + empty.len() - 1);
    out.extend_from_slice(head);
    items(&mut out)?;
    out.extend_from_slice(tail);
    Ok(out)
}

/// Writes `node` if it has the common shape: no attempts, none of the rarer fields (a node that
/// has not run). A pending one is its id alone, a JSON string. Returns whether it did (it
/// writes nothing otherwise).
fn write_node(
    out: &mut Vec<u8>,
    node: &NodeState,
    statuses: &mut Vec<(NodeStatus, Vec<u8>)>,
) -> Result<bool, Error> {
    if !bare(node) {
        return Ok(false);
    }
    let NodeState { id, status, .. } = node;
    if *status == NodeStatus::Pending {
        string(out, id.as_str())?;
        return Ok(true);
    }
    let json = match statuses.iter().position(|(s, _)| s == status) {
        Some(at) => &statuses[at].1,
        None => {
            statuses.push((*status, serde_json::to_vec(status)?));
            &statuses[statuses.len() - 1].1
        }
    };
    out.extend_from_slice(b"{\"id\":");
    string(out, id.as_str())?;
    out.extend_from_slice(b",\"status\":");
    out.extend_from_slice(json);
    out.push(b'}');
    Ok(true)
}

/// Writes `job` if it has the common shape: shell work with nothing but its command, no name,
/// none of the rarer fields. It is written as an array of strings, `[producerId, task,
/// command, dependency...]` (a third of the object's bytes). Returns whether it did (it writes
/// nothing otherwise).
fn write_job(out: &mut Vec<u8>, job: &JobSpec) -> Result<bool, Error> {
    // Every field named: a field added to `JobSpec` or `ShellSpec` stops the build here
    // until this shape says what to do with it.
    let JobSpec {
        producer_id,
        task,
        work,
        dependencies,
        name,
        extra,
    } = job;
    let WorkSpec::Shell(shell) = work else {
        return Ok(false);
    };
    let orchestrator_core::plan::ShellSpec {
        command,
        extra: shell_extra,
    } = shell;
    if name.is_some() || !extra.is_empty() || !shell_extra.is_empty() {
        return Ok(false);
    }
    out.push(b'[');
    for (i, s) in [producer_id, task, command]
        .into_iter()
        .chain(dependencies)
        .enumerate()
    {
        if i > 0 {
            out.push(b',');
        }
        string(out, s)?;
    }
    out.push(b']');
    Ok(true)
}

/// `s` as a JSON string: between quotes as it is when `serde_json` would not escape anything
/// in it (the common case, no call into serde), escaped by `serde_json` otherwise.
fn string(out: &mut Vec<u8>, s: &str) -> Result<(), Error> {
    if plain(s) {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        serde_json::to_writer(out, s)
    }
}

/// Whether `serde_json` writes `s` as it is, between quotes: it escapes only control
/// characters, quotes and backslashes.
fn plain(s: &str) -> bool {
    // Every byte, without a branch to leave early: the loop compiles to vector compares. The
    // branching `all` it replaces was 60% of `string`'s time, the hottest part of encoding a
    // new plan's snapshot.
    !s.bytes().fold(false, |bad, b| {
        bad | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

/// `spec`'s own fields, with no jobs. The first `"jobs":[]` of its JSON is its own: `name`,
/// a string, is the only field before it (a string's quotes are escaped).
fn without_jobs(spec: &PlanSpec) -> PlanSpec {
    let PlanSpec {
        name,
        jobs: _,
        base_branch,
        target_branch,
        max_parallel,
        clean_up_successful_work,
        additional_symlink_dirs,
        start_paused,
        verify_ri,
        env,
        resume_after_plan,
        worktree_init,
        isolation,
        worktree_root,
        groups,
        budget,
        split,
        wait_threshold,
        dehydrate_after,
    } = spec;
    PlanSpec {
        name: name.clone(),
        jobs: Vec::new(),
        base_branch: base_branch.clone(),
        target_branch: target_branch.clone(),
        max_parallel: *max_parallel,
        clean_up_successful_work: *clean_up_successful_work,
        additional_symlink_dirs: additional_symlink_dirs.clone(),
        start_paused: *start_paused,
        verify_ri: verify_ri.clone(),
        env: env.clone(),
        resume_after_plan: resume_after_plan.clone(),
        worktree_init: worktree_init.clone(),
        isolation: *isolation,
        worktree_root: worktree_root.clone(),
        groups: groups.clone(),
        budget: *budget,
        split: *split,
        wait_threshold: *wait_threshold,
        dehydrate_after: *dehydrate_after,
    }
}

/// `state`'s own fields, with no nodes. The first `"nodes":[]` of its JSON is its own: the
/// fields before it are strings, numbers and booleans.
fn without_nodes(state: &PlanState) -> PlanState {
    let PlanState {
        id,
        repo,
        created_at,
        started_at,
        ended_at,
        scaffolding,
        paused,
        canceled,
        archived,
        base_commit,
        target_branch,
        snapshot_branch,
        nodes: _,
    } = state;
    PlanState {
        id: id.clone(),
        repo: repo.clone(),
        created_at: *created_at,
        started_at: *started_at,
        ended_at: *ended_at,
        scaffolding: *scaffolding,
        paused: *paused,
        canceled: *canceled,
        archived: *archived,
        base_commit: base_commit.clone(),
        target_branch: target_branch.clone(),
        snapshot_branch: snapshot_branch.clone(),
        nodes: Vec::new(),
    }
}

/// Reads a spec [`spec`] wrote: its jobs objects or common jobs' arrays.
pub(crate) fn read_spec(text: &str) -> Result<PlanSpec, Error> {
    let (mut spec, jobs) = unspliced::<PlanSpec, Item<JobSpec>>(text, "jobs")?;
    spec.jobs = jobs.into_iter().map(|j| j.0).collect();
    Ok(spec)
}

/// The most nodes a state's counts of fresh nodes may stand for: far beyond any plan (the
/// engine's goals stop at 1M), and a bound on what a damaged count makes this allocate.
const MOST_NODES: u64 = 1 << 26;

/// Reads a state [`state`] wrote: its nodes objects, pending nodes' ids, or counts of fresh
/// nodes whose ids are derived.
pub(crate) fn read_state(text: &str) -> Result<PlanState, Error> {
    let (mut state, entries) = unspliced::<PlanState, NodeEntry>(text, "nodes")?;
    let derived = DerivedIds::of(&state.id);
    let mut nodes = Vec::with_capacity(entries.len());
    for entry in entries {
        match entry {
            NodeEntry::Node(node) => nodes.push(node),
            NodeEntry::Fresh(count) => {
                let Some(ids) = &derived else {
                    return Err(de::Error::custom(format!(
                        "a count of nodes with derived ids in plan {}, whose id derives none",
                        state.id
                    )));
                };
                let total = nodes.len() as u64 + count;
                if total > MOST_NODES {
                    return Err(de::Error::custom(format!(
                        "{total} nodes, more than a plan can hold ({MOST_NODES})"
                    )));
                }
                nodes.extend((nodes.len()..total as usize).map(|i| NodeState::new(ids.id(i))));
            }
        }
    }
    state.nodes = nodes;
    Ok(state)
}

/// The object `text` read as a `T` with its list `key` empty, and that list's items read as
/// `I`: the undoing of [`spliced`]. One pass over the text: the list's items are read where
/// they stand, the object's other fields kept as raw text, then read again as a small object
/// of their own (found by key, wherever they are).
fn unspliced<T: DeserializeOwned, I: DeserializeOwned>(
    text: &str,
    key: &str,
) -> Result<(T, Vec<I>), Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let Split { items, fields } = de.deserialize_map(SplitVisitor::<I> {
        key,
        items: std::marker::PhantomData,
    })?;
    de.end()?;
    let mut shell = String::with_capacity(4096);
    shell.push('{');
    for (name, value) in &fields {
        shell.push_str(&serde_json::to_string(name)?);
        shell.push(':');
        shell.push_str(value.get());
        shell.push(',');
    }
    shell.push_str(&serde_json::to_string(key)?);
    shell.push_str(":[]}");
    Ok((serde_json::from_str(&shell)?, items))
}

/// An object split by [`SplitVisitor`]: the items of its list, and its other fields' text.
struct Split<'de, I> {
    items: Vec<I>,
    fields: Vec<(String, &'de RawValue)>,
}

/// Reads an object's list `key` as items `I` and keeps every other field as raw text.
struct SplitVisitor<'k, I> {
    key: &'k str,
    items: std::marker::PhantomData<I>,
}

impl<'de, I: Deserialize<'de>> Visitor<'de> for SplitVisitor<'_, I> {
    type Value = Split<'de, I>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an object with a list `{}`", self.key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Split<'de, I>, A::Error> {
        let (mut items, mut fields) = (None, Vec::new());
        while let Some(name) = map.next_key::<String>()? {
            if name == self.key {
                if items.is_some() {
                    return Err(de::Error::custom(format!("duplicate field `{}`", self.key)));
                }
                items = Some(map.next_value::<Vec<I>>()?);
            } else {
                fields.push((name, map.next_value::<&'de RawValue>()?));
            }
        }
        Ok(Split {
            items: items.unwrap_or_default(),
            fields,
        })
    }
}

/// An item of a compact list: its short form ([`Short`]) or the object `serde_json` writes.
struct Item<T>(T);

/// The short forms a list's items may take besides their object; each form an item does not
/// have is refused as `serde` refuses it (naming what was found and [`Short::EXPECTING`]).
trait Short: DeserializeOwned {
    /// What an item of the list is, for errors.
    const EXPECTING: &'static str;

    /// The item from an array.
    fn from_seq<'de, A: SeqAccess<'de>>(
        _seq: A,
        item: &ItemVisitor<Self>,
    ) -> Result<Self, A::Error> {
        Err(de::Error::invalid_type(de::Unexpected::Seq, item))
    }

    /// The item from a string.
    fn from_str<E: de::Error>(s: &str, item: &ItemVisitor<Self>) -> Result<Self, E> {
        Err(E::invalid_type(de::Unexpected::Str(s), item))
    }
}

impl<'de, T: Short> Deserialize<'de> for Item<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ItemVisitor(std::marker::PhantomData))
    }
}

struct ItemVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Short> Visitor<'de> for ItemVisitor<T> {
    type Value = Item<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Item<T>, A::Error> {
        T::from_seq(seq, &self).map(Item)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Item<T>, E> {
        T::from_str(s, &self).map(Item)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Item<T>, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Item)
    }
}

/// A job: a common job's array (see [`write_job`]) or any job's object.
impl Short for JobSpec {
    const EXPECTING: &'static str =
        "a job: an object, or an array of producerId, task, command and dependencies";

    fn from_seq<'de, A: SeqAccess<'de>>(
        mut seq: A,
        item: &ItemVisitor<Self>,
    ) -> Result<Self, A::Error> {
        let mut next = |i| {
            seq.next_element::<String>()?
                .ok_or_else(|| de::Error::invalid_length(i, item))
        };
        let (producer_id, task, command) = (next(0)?, next(1)?, next(2)?);
        let mut dependencies = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(d) = seq.next_element::<String>()? {
            dependencies.push(d);
        }
        let mut job = JobSpec::new(producer_id, task, WorkSpec::shell(command));
        job.dependencies = dependencies;
        Ok(job)
    }
}

/// An entry of a state's list of nodes: a node (its object, or a pending fresh node's id, see
/// [`write_node`]), or a count of fresh nodes whose ids are derived at their index.
enum NodeEntry {
    Node(NodeState),
    Fresh(u64),
}

impl<'de> Deserialize<'de> for NodeEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeEntryVisitor)
    }
}

struct NodeEntryVisitor;

impl<'de> Visitor<'de> for NodeEntryVisitor {
    type Value = NodeEntry;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a node: an object, the id of a pending node, or a count of fresh nodes")
    }

    fn visit_u64<E: de::Error>(self, count: u64) -> Result<NodeEntry, E> {
        Ok(NodeEntry::Fresh(count))
    }

    fn visit_str<E: de::Error>(self, id: &str) -> Result<NodeEntry, E> {
        Ok(NodeEntry::Node(NodeState::new(NodeId::from(id))))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<NodeEntry, A::Error> {
        NodeState::deserialize(de::value::MapAccessDeserializer::new(map)).map(NodeEntry::Node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orchestrator_core::ids::PlanId;
    use orchestrator_core::plan::{GroupSpec, Isolation};
    use orchestrator_core::state::PlanRecord;

    /// Strings with every kind of byte `serde_json` treats apart: control characters, quotes,
    /// backslashes, `/`, DEL, and characters beyond ASCII.
    fn strings() -> Vec<String> {
        let mut all: Vec<String> = [
            "n0000500",
            "noop",
            "true",
            "",
            "a b",
            "tab\there",
            "q\"uote",
        ]
        .map(String::from)
        .into();
        all.extend(
            [
                "back\\slash",
                "sl/ash",
                "del\u{7f}",
                "é ü 日本 🦀",
                "nl\n",
                "\u{1}\u{1f}",
            ]
            .map(String::from),
        );
        all
    }

    fn text(bytes: Result<Vec<u8>, Error>) -> String {
        String::from_utf8(bytes.expect("encodes")).expect("utf-8")
    }

    /// `spec` written and read back, and `serde_json`'s objects read by the same reader.
    fn assert_spec_round_trips(spec: &PlanSpec) {
        let written = text(super::spec(spec, 0));
        assert_eq!(read_spec(&written).expect("reads"), *spec, "{written}");
        let objects = serde_json::to_string(spec).expect("serde");
        assert_eq!(read_spec(&objects).expect("reads objects"), *spec);
    }

    /// The same for `state`.
    fn assert_state_round_trips(state: &PlanState) {
        let written = text(super::state(state, 0));
        assert_eq!(read_state(&written).expect("reads"), *state, "{written}");
        let objects = serde_json::to_string(state).expect("serde");
        assert_eq!(read_state(&objects).expect("reads objects"), *state);
    }

    /// Jobs of the common shape, with every kind of string in every place.
    fn common_jobs(spec: &mut PlanSpec) {
        let strings = strings();
        for (i, s) in strings.iter().enumerate() {
            let id = format!("job-{i}");
            let deps: Vec<String> = strings.iter().take(i % 4).cloned().collect();
            spec.jobs.push(
                JobSpec::new(id.clone(), s.clone(), WorkSpec::shell(s.clone())).depends_on(deps),
            );
            spec.jobs
                .push(JobSpec::new(s.clone(), "T", WorkSpec::shell("true")));
        }
    }

    /// Every ASCII byte and three wider characters, at every place of strings of 0 to 40
    /// bytes (before, inside and after the parts compared as vectors), are written as
    /// `serde_json` writes them.
    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let specials = (0u8..0x80).map(char::from).chain(['é', '\u{2028}', '🦀']);
        for c in specials {
            for len in 0..=40 {
                for at in 0..=len {
                    let s: String = (0..len).map(|i| if i == at { c } else { 'x' }).collect();
                    let mut out = Vec::new();
                    string(&mut out, &s).expect("a string is written");
                    let serde = serde_json::to_vec(&s).expect("serde writes it");
                    assert_eq!(out, serde, "{s:?}");
                    assert_eq!(plain(&s), serde.len() == s.len() + 2, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn common_jobs_come_back_whole() {
        let mut spec = PlanSpec::new("random-dag").isolation(Isolation::None);
        common_jobs(&mut spec);
        assert_spec_round_trips(&spec);
        // No jobs, and names that need escaping.
        for name in strings() {
            assert_spec_round_trips(&PlanSpec::new(name));
        }
    }

    #[test]
    fn other_jobs_and_plan_fields_come_back_whole() {
        // Each job differs from the common shape in one way, among common ones; the plan sets
        // fields before and after `jobs`, and groups holding jobs of their own.
        let mut named = JobSpec::new("named", "T", WorkSpec::shell("true"));
        named.name = Some("A name".into());
        let mut spec = PlanSpec::new("all \"kinds\"")
            .job(named)
            .job(JobSpec::new("env", "T", WorkSpec::shell("true")).env("K", "v"))
            .job(
                JobSpec::new("checks", "T", WorkSpec::shell("true"))
                    .prechecks(WorkSpec::shell("x")),
            )
            .job(JobSpec::new("agent", "T", WorkSpec::agent("do it")))
            .group(GroupSpec::new("grp").job(JobSpec::new("inner", "T", WorkSpec::shell("true"))));
        if let Some(WorkSpec::Shell(shell)) = spec.jobs.get_mut(0).map(|j| &mut j.work) {
            shell.extra.make_mut().cwd = Some("sub".into());
        }
        spec.env.insert("PLAN".into(), "env".into());
        spec.base_branch = Some("main".into());
        spec.max_parallel = Some(3);
        common_jobs(&mut spec);
        assert_spec_round_trips(&spec);
    }

    #[test]
    fn states_come_back_whole() {
        let mut spec = PlanSpec::new("p");
        common_jobs(&mut spec);
        let nodes = spec.jobs.len();
        let mut record = PlanRecord::new(PlanId::random(), spec, "/re\"po".into(), nodes, 7);
        assert_state_round_trips(&record.state);
        // Nodes that ran, failed or wait, beside fresh ones; the plan's own optional fields.
        let ran: NodeState = serde_json::from_str(
            r#"{"id":"ran","status":"succeeded","attempts":[{"number":1,"status":"succeeded","startedAt":5,"endedAt":9}],"commit":"abc"}"#,
        )
        .expect("a node that ran");
        record.state.nodes[1] = ran;
        record.state.nodes[2].status = NodeStatus::Failed;
        record.state.nodes[2].extra.make_mut().error = Some("it \"broke\"\n".into());
        record.state.nodes[3].status = NodeStatus::Ready;
        record.state.started_at = Some(8);
        record.state.target_branch = Some("out".into());
        record.state.paused = true;
        assert_state_round_trips(&record.state);
        // No nodes.
        record.state.nodes.clear();
        assert_state_round_trips(&record.state);
    }

    /// Jobs as `orchestrator::synthetic::random_dag` makes them: `n0000007` depends on two
    /// earlier jobs.
    fn synthetic_dag(n: usize) -> PlanSpec {
        let mut spec = PlanSpec::new("random-dag").isolation(Isolation::None);
        for i in 0..n {
            let deps: Vec<String> = [i / 2, i / 3]
                .into_iter()
                .filter(|&d| d < i)
                .map(|d| format!("n{d:07}"))
                .collect();
            spec.jobs.push(
                JobSpec::new(format!("n{i:07}"), "noop", WorkSpec::shell("true")).depends_on(deps),
            );
        }
        spec
    }

    #[test]
    fn the_common_shapes_are_written_compact() {
        // What makes the snapshot of a plan of no-op jobs fast: not a fallback to serde.
        let mut out = Vec::new();
        let common = JobSpec::new("n0000500", "noop", WorkSpec::shell("true"))
            .depends_on(["n0000078", "n0000348"]);
        assert_eq!(write_job(&mut out, &common).ok(), Some(true));
        assert_eq!(out, br#"["n0000500","noop","true","n0000078","n0000348"]"#);
        // Strings that need escaping keep the compact shape.
        out.clear();
        let quoted = JobSpec::new("quote", "a \"task\"", WorkSpec::shell("true"));
        assert_eq!(write_job(&mut out, &quoted).ok(), Some(true));
        assert_eq!(out, br#"["quote","a \"task\"","true"]"#);
        let unusual = [
            JobSpec::new("env", "T", WorkSpec::shell("true")).env("K", "v"),
            JobSpec::new("agent", "T", WorkSpec::agent("do it")),
            JobSpec::new("checks", "T", WorkSpec::shell("true")).prechecks(WorkSpec::shell("x")),
        ];
        for job in &unusual {
            let before = out.len();
            assert_eq!(
                write_job(&mut out, job).ok(),
                Some(false),
                "{}",
                job.producer_id
            );
            assert_eq!(out.len(), before, "nothing written for {}", job.producer_id);
        }
        let record = PlanRecord::new(PlanId::random(), PlanSpec::new("p"), "/r".into(), 1, 7);
        let mut statuses = Vec::new();
        out.clear();
        let fresh = &record.state.nodes[0];
        assert_eq!(write_node(&mut out, fresh, &mut statuses).ok(), Some(true));
        assert_eq!(out, format!("\"{}\"", fresh.id.as_str()).as_bytes());
        let mut waited = fresh.clone();
        waited.extra.make_mut().approved = true;
        assert_eq!(
            write_node(&mut out, &waited, &mut statuses).ok(),
            Some(false)
        );
        // A 10,000-job plan of no-op jobs: about a third of the objects' bytes for the spec,
        // and for the state of a new plan, whose ids are derived, a count.
        let spec = synthetic_dag(10_000);
        let objects = serde_json::to_vec(&spec).map(|v| v.len()).unwrap_or(0);
        let compact = super::spec(&spec, 0).map(|v| v.len()).unwrap_or(usize::MAX);
        assert!(compact * 2 < objects, "{compact} of {objects} bytes");
        let record = PlanRecord::new(PlanId::random(), spec, "/r".into(), 10_000, 7);
        let objects = serde_json::to_vec(&record.state)
            .map(|v| v.len())
            .unwrap_or(0);
        let written = text(state(&record.state, 0));
        assert!(written.contains(r#""nodes":[10000]"#), "{written}");
        assert!(written.len() < 400, "{} of {objects} bytes", written.len());
    }

    #[test]
    fn fresh_nodes_with_derived_ids_are_counted_in_runs_and_others_written_out() {
        let record = PlanRecord::new(PlanId::random(), PlanSpec::new("p"), "/r".into(), 9, 7);
        let mut state = record.state;
        let ids = DerivedIds::of(&state.id).expect("derived ids");
        // 0-1 fresh, 2 ready, 3-4 fresh, 5 fresh with a random id (added by a reshape), 6
        // fresh but at another index's id (a job removed before it), 7-8 fresh.
        state.nodes[2].status = NodeStatus::Ready;
        state.nodes[5].id = NodeId::random();
        state.nodes[6].id = ids.id(7);
        state.nodes.swap(7, 8);
        state.nodes[7].id = ids.id(7);
        state.nodes[8].id = ids.id(8);
        let written = text(super::state(&state, 0));
        let (id2, id5, id6) = (&state.nodes[2].id, &state.nodes[5].id, &state.nodes[6].id);
        let expected =
            format!(r#""nodes":[2,{{"id":"{id2}","status":"ready"}},2,"{id5}","{id6}",2]"#);
        assert!(written.contains(&expected), "{written}\n{expected}");
        assert_state_round_trips(&state);
        // A plan whose id derives none has its nodes' ids written out.
        let mut named = state.clone();
        named.id = PlanId::from("named-plan");
        let written = text(super::state(&named, 0));
        assert!(!written.contains("[2,"), "{written}");
        assert_state_round_trips(&named);
        // A count in a plan whose id derives none is damage, named.
        let wrong = text(super::state(&state, 0)).replacen(state.id.as_str(), "named-plan", 1);
        let error = read_state(&wrong).expect_err("a count without derived ids");
        assert!(error.to_string().contains("derives none"), "{error}");
    }

    /// Random plans of every shape, with random strings: each comes back as it was.
    #[test]
    fn random_plans_come_back_whole() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below.max(1)
        };
        let pool = strings();
        for round in 0..40 {
            let string = |next: &mut dyn FnMut(u64) -> u64| {
                let a = &pool[next(pool.len() as u64) as usize];
                let b = &pool[next(pool.len() as u64) as usize];
                format!("{a}{round}{b}")
            };
            let mut spec = PlanSpec::new(string(&mut next));
            let jobs = next(30);
            for i in 0..jobs {
                let deps: Vec<String> = (0..next(4)).map(|_| string(&mut next)).collect();
                let mut job = JobSpec::new(
                    format!("j{i}-{}", string(&mut next)),
                    string(&mut next),
                    WorkSpec::shell(string(&mut next)),
                )
                .depends_on(deps);
                match next(6) {
                    0 => job.name = Some(string(&mut next)),
                    1 => job = job.env(string(&mut next), string(&mut next)),
                    2 => job.work = WorkSpec::agent(string(&mut next)),
                    _ => {}
                }
                spec.jobs.push(job);
            }
            assert_spec_round_trips(&spec);
            let nodes = spec.jobs.len();
            let mut record =
                PlanRecord::new(PlanId::random(), spec, string(&mut next).into(), nodes, 7);
            let statuses = [NodeStatus::Pending, NodeStatus::Ready, NodeStatus::Failed];
            for node in &mut record.state.nodes {
                node.status = statuses[next(3) as usize];
                if next(4) == 0 {
                    node.extra.make_mut().error = Some(string(&mut next));
                }
            }
            assert_state_round_trips(&record.state);
        }
    }

    #[test]
    fn a_list_given_twice_is_refused() {
        let twice = r#"{"name":"p","jobs":[["a","T","true"]],"jobs":[]}"#;
        let err = read_spec(twice)
            .map(|s| s.jobs.len())
            .map_err(|e| e.to_string());
        assert!(
            err.as_ref()
                .is_err_and(|e| e.contains("duplicate field `jobs`")),
            "{err:?}"
        );
        let once = r#"{"name":"p","jobs":[["a","T","true"]]}"#;
        assert_eq!(read_spec(once).map(|s| s.jobs.len()).ok(), Some(1));
    }
}
