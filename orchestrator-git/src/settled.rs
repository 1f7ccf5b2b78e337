//! The index entries of the pool entries this process settled, kept in memory for the take
//! that reuses each one (`pool.rs`): it then neither reads nor parses the index file the settle
//! just checked or wrote. (libgit2 hashes the whole file at each parse; with the file walks,
//! it was one of the larger costs of a job on a 900-file repository.)
//!
//! The file stays the truth: a memo is used only while the file's stat data (device, inode,
//! size, modification and change times) is what the settle left, and at most [`KEPT`] are kept
//! (an entry trimmed, swept or taken by another process leaves its memo behind until then).

#![cfg(unix)]

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use git2::IndexEntry;

use crate::paths::FileStamp;

/// How many memos are kept: the default pool holds 8 entries.
const KEPT: usize = 8;

/// Memos by pool entry id, oldest first.
pub(crate) struct Settled {
    memos: Mutex<VecDeque<Memo>>,
}

struct Memo {
    id: String,
    stamp: FileStamp,
    entries: Vec<IndexEntry>,
}

impl Settled {
    pub(crate) const fn new() -> Self {
        Settled {
            memos: Mutex::new(VecDeque::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Memo>> {
        // A memo is inserted or removed whole: one a panicking thread left is still sound.
        self.memos.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers that the index file `index` of the pool entry `id` holds `entries` (in any
    /// order), as its stat data is now.
    pub(crate) fn put(&self, id: &str, index: &Path, entries: Vec<IndexEntry>) {
        let Some(stamp) = FileStamp::at(index) else {
            return;
        };
        let mut memos = self.lock();
        memos.retain(|m| m.id != id);
        if memos.len() >= KEPT {
            memos.pop_front();
        }
        memos.push_back(Memo {
            id: id.to_owned(),
            stamp,
            entries,
        });
    }

    /// The entries remembered for the pool entry `id`, if its index file `index` is unchanged
    /// since; the memo is forgotten either way.
    pub(crate) fn take(&self, id: &str, index: &Path) -> Option<Vec<IndexEntry>> {
        let memo = {
            let mut memos = self.lock();
            let at = memos.iter().position(|m| m.id == id)?;
            memos.remove(at)?
        };
        (FileStamp::at(index) == Some(memo.stamp)).then_some(memo.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git2::{IndexTime, Oid};

    fn entry(path: &str) -> IndexEntry {
        let t = IndexTime::new(0, 0);
        IndexEntry {
            ctime: t,
            mtime: t,
            dev: 0,
            ino: 0,
            mode: 0o100644,
            uid: 0,
            gid: 0,
            file_size: 0,
            id: Oid::zero(),
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_memo_serves_once_and_only_while_its_file_is_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index");
        std::fs::write(&index, "one").expect("write");
        let settled = Settled::new();
        settled.put("a", &index, vec![entry("f")]);
        let got = settled.take("a", &index).expect("unchanged");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, b"f");
        assert!(settled.take("a", &index).is_none(), "served once");

        settled.put("a", &index, vec![entry("f")]);
        // Replaced as git writes an index: another file renamed over it.
        let fresh = dir.path().join("index.lock");
        std::fs::write(&fresh, "two").expect("write");
        std::fs::rename(&fresh, &index).expect("rename");
        assert!(settled.take("a", &index).is_none(), "the file changed");
        assert!(settled.take("b", &index).is_none(), "never settled");
    }

    #[test]
    fn at_most_kept_memos_are_kept_the_oldest_going_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = dir.path().join("index");
        std::fs::write(&index, "x").expect("write");
        let settled = Settled::new();
        for i in 0..=KEPT {
            settled.put(&i.to_string(), &index, Vec::new());
        }
        assert!(settled.take("0", &index).is_none(), "the oldest went");
        for i in 1..=KEPT {
            assert!(settled.take(&i.to_string(), &index).is_some(), "{i}");
        }
    }
}
