//! Keeping worktree paths inside their allowed roots, deleting folders, and marking the paths
//! this process is working on.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use orchestrator_core::git::GitError;

use crate::error;

/// What tells that a file changed without reading it: its device, inode and size, and its
/// modification and change times to the nanosecond (git's own stat check). A file replaced by
/// a rename has another inode; one written in place, another time (or size).
#[cfg(unix)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

#[cfg(unix)]
impl FileStamp {
    /// The stamp of the file `meta` describes.
    pub(crate) fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of the file at `path` (a symbolic link's own), if there is one.
    pub(crate) fn at(path: &Path) -> Option<FileStamp> {
        std::fs::symlink_metadata(path).ok().map(|m| Self::of(&m))
    }
}

/// Whether the file or folder at `path` (a symbolic link's own) was last modified more than
/// `age` ago; `false` when that cannot be told (it is gone, or its time is in the future).
pub(crate) fn older_than(path: &Path, age: std::time::Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|elapsed| elapsed > age)
}

/// Paths this process is working on: each is in the set while the [`Mark`] made for it lives,
/// so that other work in this process (a sweep, a removal) can tell it from a leftover.
pub(crate) struct Marks(Mutex<BTreeSet<PathBuf>>);

impl Marks {
    pub(crate) const fn new() -> Marks {
        Marks(Mutex::new(BTreeSet::new()))
    }

    fn set(&self) -> MutexGuard<'_, BTreeSet<PathBuf>> {
        // Inserts and removals only: a panic leaves a whole set.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Marks `path` until the returned mark is dropped.
    pub(crate) fn mark(&'static self, path: &Path) -> Mark {
        self.set().insert(path.to_path_buf());
        Mark {
            marks: self,
            path: path.to_path_buf(),
        }
    }

    /// Whether `path` is marked.
    pub(crate) fn contains(&self, path: &Path) -> bool {
        self.set().contains(path)
    }
}

/// A path's place in [`Marks`], given up when dropped.
pub(crate) struct Mark {
    marks: &'static Marks,
    path: PathBuf,
}

impl Drop for Mark {
    fn drop(&mut self) {
        self.marks.set().remove(&self.path);
    }
}

/// Resolves `path` physically: `..` and `.` are applied and every existing prefix has its
/// symbolic links resolved, so the result is where the path really points (its missing tail kept
/// as written).
pub(crate) fn resolve_physical(path: &Path) -> Result<PathBuf, GitError> {
    orchestrator_core::git::resolve_physical(path)
        .map_err(|(p, e)| error::io("resolve path", &p, e))
}

/// The physical form of `path` when it lies strictly inside one of `roots` (already canonical)
/// and outside `git_dir`; else [`GitError::PathOutsideRoot`] naming the first root.
pub(crate) fn confine(path: &Path, roots: &[PathBuf], git_dir: &Path) -> Result<PathBuf, GitError> {
    let outside = || GitError::PathOutsideRoot {
        path: path.to_path_buf(),
        root: roots.first().cloned().unwrap_or_default(),
    };
    if !path.is_absolute() {
        return Err(outside());
    }
    let resolved = resolve_physical(path)?;
    let inside = roots
        .iter()
        .any(|root| resolved.starts_with(root) && resolved != *root);
    if inside && !resolved.starts_with(git_dir) {
        Ok(resolved)
    } else {
        Err(outside())
    }
}

/// Whether `path` is a folder with nothing in it.
pub(crate) fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

/// Deletes the folder `dir`: first every symbolic link inside it is unlinked (so a linked
/// `node_modules` loses its link, never its content), then the rest.
pub(crate) fn remove_tree(dir: &Path) -> Result<(), GitError> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(error::io("remove worktree", dir, e)),
    };
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return std::fs::remove_file(dir).map_err(|e| error::io("remove worktree", dir, e));
    }
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries =
            std::fs::read_dir(&folder).map_err(|e| error::io("remove worktree", &folder, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| error::io("remove worktree", &folder, e))?;
            let kind = entry
                .file_type()
                .map_err(|e| error::io("remove worktree", &entry.path(), e))?;
            if kind.is_symlink() {
                std::fs::remove_file(entry.path())
                    .map_err(|e| error::io("remove worktree", &entry.path(), e))?;
            } else if kind.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    // No symbolic links are left, and `remove_dir_all` would not follow one anyway.
    std::fs::remove_dir_all(dir).map_err(|e| error::io("remove worktree", dir, e))
}

/// Writes `content` to `path` through a temporary file and a rename, so readers never see half.
pub(crate) fn write_atomically(path: &Path, content: &[u8]) -> Result<(), GitError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, content).map_err(|e| error::io("write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        error::io("write", path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confine_rejects_traversal_and_accepts_inside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let git_dir = root.join(".git");
        let roots = vec![root.clone()];
        assert!(confine(&root.join("a/b"), &roots, &git_dir).is_ok());
        assert!(confine(&root.join("a/../../x"), &roots, &git_dir).is_err());
        assert!(confine(&root, &roots, &git_dir).is_err());
        assert!(confine(&root.join(".git/worktrees/x"), &roots, &git_dir).is_err());
        assert!(confine(Path::new("relative"), &roots, &git_dir).is_err());
    }
}
