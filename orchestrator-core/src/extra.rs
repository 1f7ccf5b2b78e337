//! [`Extra`]: the fields most values leave unset, behind one pointer allocated on first write.
//!
//! A plan of a million jobs holds a million [`crate::plan::JobSpec`]s and two million
//! [`crate::state::NodeState`]s (the engine's and the store's). Most of their fields (a job's
//! group, environment, checks; a node's commit, session, wait) are unset in most of them, yet
//! inline they cost their full size in every one. Behind an `Extra` they cost 8 bytes until one
//! of them is set.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A group of rarely set fields, read through `Deref` (the shared empty value when none is
/// set), written through [`Extra::make_mut`] (which allocates them) or [`Extra::set`] (which
/// allocates them only for a value that is not the default). There is no `DerefMut`: a write
/// that allocates should say so.
///
/// ```
/// use orchestrator_core::plan::{JobSpec, WorkSpec};
/// let mut job = JobSpec::new("build", "Build", WorkSpec::shell("make"));
/// assert_eq!(job.extra.group, None); // reads the shared empty value: nothing allocated
/// job.extra.set(|x| &mut x.base_branch, None); // clearing what is not set: still nothing
/// job.extra.make_mut().group = Some("backend".into()); // allocates the job's extra fields
/// assert_eq!(job.extra.group.as_deref(), Some("backend"));
/// job.extra.set(|x| &mut x.group, None); // every field back at its default: freed
/// assert!(job.extra.is_empty() && !job.extra.is_allocated());
/// ```
#[derive(Clone)]
pub struct Extra<T>(Option<Box<T>>);

/// A type whose default value exists as a `static`, for [`Extra`] to read when nothing is set.
pub trait Empty: Default + PartialEq + 'static {
    /// The default value, shared.
    fn empty() -> &'static Self;
}

impl<T: Empty> Extra<T> {
    /// Holds `value`, allocating only when it is not the empty value.
    pub fn new(value: T) -> Self {
        if value == *T::empty() {
            Extra(None)
        } else {
            Extra(Some(Box::new(value)))
        }
    }

    /// Whether every field is at its default.
    pub fn is_empty(&self) -> bool {
        self.0.as_deref().is_none_or(|v| v == T::empty())
    }

    /// The fields for writing, allocated if they are not yet.
    pub fn make_mut(&mut self) -> &mut T {
        self.0.get_or_insert_with(Box::default)
    }

    /// Sets the field `field` picks to `value`, allocating the fields only when `value` is
    /// not the field's default, and freeing them when that leaves every field at its default:
    /// clearing what a value does not hold is free, and a node whose process list emptied
    /// again costs 8 bytes again.
    pub fn set<V: Default + PartialEq>(&mut self, field: impl FnOnce(&mut T) -> &mut V, value: V) {
        let clearing = value == V::default();
        match &mut self.0 {
            Some(fields) => {
                *field(fields) = value;
                if clearing && **fields == *T::empty() {
                    self.0 = None;
                }
            }
            None if clearing => {}
            None => *field(self.make_mut()) = value,
        }
    }

    /// The fields for writing if they are allocated, else `None`: for clearing fields without
    /// allocating them (`make_mut` allocates, even to write a default).
    pub fn get_mut(&mut self) -> Option<&mut T> {
        self.0.as_deref_mut()
    }

    /// Whether the fields are allocated.
    pub fn is_allocated(&self) -> bool {
        self.0.is_some()
    }
}

impl<T> Default for Extra<T> {
    fn default() -> Self {
        Extra(None)
    }
}

impl<T: Empty> Deref for Extra<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.0 {
            Some(value) => value,
            None => T::empty(),
        }
    }
}

impl<T: Empty> PartialEq for Extra<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Empty + Eq> Eq for Extra<T> {}

impl<T: Empty + fmt::Debug> fmt::Debug for Extra<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: Empty> From<T> for Extra<T> {
    fn from(value: T) -> Self {
        Extra::new(value)
    }
}

impl<T: Empty + Serialize> Serialize for Extra<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de, T: Empty + Deserialize<'de>> Deserialize<'de> for Extra<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Extra::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Default, PartialEq)]
    struct Rare {
        a: Option<String>,
        b: Vec<u32>,
    }

    impl Empty for Rare {
        fn empty() -> &'static Self {
            static EMPTY: Rare = Rare {
                a: None,
                b: Vec::new(),
            };
            &EMPTY
        }
    }

    #[test]
    fn reads_allocate_nothing_and_writes_allocate_once() {
        let mut x: Extra<Rare> = Extra::default();
        assert_eq!(x.a, None);
        assert!(x.0.is_none(), "a read allocated");
        x.make_mut().b.push(7);
        assert!(x.0.is_some());
        assert_eq!(x.b, [7]);
        assert!(!x.is_empty());
        x.make_mut().b.clear();
        assert!(x.is_empty(), "fields back at their defaults are empty");
        assert_eq!(x, Extra::default(), "an allocated empty value equals none");
        assert!(Extra::new(Rare::default()).0.is_none());
        assert_eq!(
            Extra::new(Rare {
                a: Some("s".into()),
                b: vec![]
            })
            .a
            .as_deref(),
            Some("s")
        );
    }

    /// The plan format stays flat: every field of a job and of its shell work reads (with its
    /// snake_case alias), writes back in the same place, and a job that sets none of them
    /// allocates nothing.
    #[test]
    fn jobs_read_and_write_their_extra_fields_flat() {
        use crate::plan::{JobSpec, WorkSpec};
        let full = serde_json::json!({
            "producerId": "build", "task": "Build",
            "work": {"type": "shell", "command": "make", "shell": "bash", "env": {"A": "1"},
                     "cwd": "src", "timeout": 5, "onFailure": {"noAutoHeal": true}},
            "dependencies": ["gen"], "name": "Build it",
            "prechecks": {"type": "shell", "command": "true"},
            "postchecks": {"type": "shell", "command": "make test"},
            "instructions": "be brief", "baseBranch": "main", "expectsNoChanges": true,
            "autoHeal": false, "group": "backend", "env": {"B": "2"}, "approval": "before",
            "split": "never", "parent": "top"
        });
        let job: JobSpec = serde_json::from_value(full.clone()).expect("reads");
        assert_eq!(job.extra.group.as_deref(), Some("backend"));
        let WorkSpec::Shell(shell) = &job.work else {
            panic!("{:?}", job.work)
        };
        assert_eq!(shell.extra.cwd.as_deref(), Some("src"));
        assert_eq!(serde_json::to_value(&job).expect("writes"), full);

        let snake: JobSpec = serde_json::from_value(serde_json::json!({
            "producer_id": "build", "task": "Build", "work": "make", "dependencies": [],
            "base_branch": "dev", "expects_no_changes": true, "auto_heal": true
        }))
        .expect("reads");
        assert_eq!(snake.extra.base_branch.as_deref(), Some("dev"));
        assert!(snake.extra.expects_no_changes && snake.extra.auto_heal == Some(true));

        let bare: JobSpec = serde_json::from_value(serde_json::json!({
            "producerId": "noop", "task": "t", "work": "true", "dependencies": []
        }))
        .expect("reads");
        let WorkSpec::Shell(shell) = &bare.work else {
            panic!("{:?}", bare.work)
        };
        assert!(bare.extra.0.is_none() && shell.extra.0.is_none());

        let typo = serde_json::from_value::<JobSpec>(serde_json::json!({
            "producerId": "noop", "task": "t", "work": "true", "dependencies": [], "grup": "x"
        }));
        assert!(typo
            .expect_err("a typo is refused")
            .to_string()
            .contains("unknown field `grup`"));
    }
}
