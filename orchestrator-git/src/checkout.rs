//! Bringing working folders to a tree: a fresh worktree, a worktree after a merge, the user's
//! clean checkout after a merge into its branch; and telling whether a checkout is dirty.

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use git2::build::CheckoutBuilder;
use git2::{Index, IndexEntry, IndexTime, Oid, Repository, Status, StatusOptions, Tree};
use orchestrator_core::git::GitError;

use crate::error::{self, Context};

/// How many changed files a [`GitError::DirtyCheckout`] names at most.
const DIRTY_FILES_SHOWN: usize = 20;

/// At most this many threads write a checkout's files.
const WRITER_THREADS: usize = 4;

/// Fewer files than this per thread are not worth another thread.
const FILES_PER_THREAD: usize = 128;

/// Fills a fresh worktree (HEAD already at the commit of `tree`, no index yet) with `tree`'s
/// files and writes its index.
///
/// The common case (no attributes or line-ending conversion, ordinary paths) writes the blobs
/// and the index directly, which costs about half of libgit2's general checkout; anything else
/// goes through libgit2's checkout.
pub(crate) fn populate(wt: &Repository, tree: &Tree<'_>) -> Result<(), GitError> {
    match plain_entries(wt, tree)? {
        Some(entries) => write_plain(wt, tree, &entries),
        None => {
            let mut opts = CheckoutBuilder::new();
            opts.force().recreate_missing(true);
            wt.checkout_tree(tree.as_object(), Some(&mut opts))
                .ctx("check out worktree")?;
            // The checkout staged every file with its stat data; add the tree cache.
            write_index(wt, tree, &[])
        }
    }
}

/// One file of a tree to write.
#[derive(Clone)]
pub(crate) struct PlainEntry {
    /// Relative, `/`-separated.
    pub(crate) path: String,
    pub(crate) id: Oid,
    pub(crate) mode: i32,
}

/// Whether the repository's configuration and attribute files let a checkout write blobs byte
/// for byte: no line-ending conversion, no attributes file outside the tree, symbolic links on.
pub(crate) fn plain_config(repo: &Repository) -> Result<bool, GitError> {
    let config = repo.config().ctx("read config")?;
    let set = |key: &str| config.get_entry(key).is_ok();
    let converting = config
        .get_string("core.autocrlf")
        .is_ok_and(|v| !v.eq_ignore_ascii_case("false"));
    let symlinks = config.get_bool("core.symlinks").unwrap_or(true);
    if converting || set("core.eol") || set("core.attributesFile") || !symlinks {
        return Ok(false);
    }
    let global_attributes = std::env::var_os("XDG_CONFIG_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))
        .map(|dir| dir.join("git").join("attributes"));
    Ok(!repo.commondir().join("info").join("attributes").exists()
        && !global_attributes.is_some_and(|f| f.exists()))
}

/// The tree's files when writing them byte for byte is exactly what git's checkout would do:
/// a [`plain_config`], no `.gitattributes` in the tree, no submodules, and only ordinary path
/// components. `None` otherwise.
pub(crate) fn plain_entries(repo: &Repository, tree: &Tree<'_>) -> Result<Files, GitError> {
    if !plain_config(repo)? {
        return Ok(None);
    }
    LISTED.files(tree)
}

/// The files of the trees listed last, by tree id (see [`RecentTrees`]).
static LISTED: RecentTrees = RecentTrees::new();

/// A tree's files in path order (as an index holds its entries), or `None` when it is not
/// plain (see [`plain_entries`]).
type Files = Option<Arc<[PlainEntry]>>;

/// The files of the [`RecentTrees::KEPT`] trees listed last, by tree id, the newest last: a
/// tree never changes, and most jobs of a plan start from one of a few commits (its base, a
/// merge of the same dependencies), whose tree each new worktree would otherwise walk again.
pub(crate) struct RecentTrees(Mutex<VecDeque<(Oid, Files)>>);

impl RecentTrees {
    /// How many trees are kept (each ~100 bytes a file).
    const KEPT: usize = 4;

    pub(crate) const fn new() -> Self {
        RecentTrees(Mutex::new(VecDeque::new()))
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<(Oid, Files)>> {
        // A panic while holding it leaves whole entries: pushes and pops only.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The files of `tree`, listed now or kept from before.
    pub(crate) fn files(&self, tree: &Tree<'_>) -> Result<Files, GitError> {
        let kept = self.lock().iter().find(|(id, _)| *id == tree.id()).cloned();
        if let Some((_, files)) = kept {
            return Ok(files);
        }
        // Walked without the lock: other threads list other trees meanwhile.
        let files = tree_files(tree)?;
        let mut recent = self.lock();
        if !recent.iter().any(|(id, _)| *id == tree.id()) {
            if recent.len() == Self::KEPT {
                recent.pop_front();
            }
            recent.push_back((tree.id(), files.clone()));
        }
        Ok(files)
    }
}

/// The files of `tree` in path order if all its entries are ordinary (see [`plain_entries`]).
fn tree_files(tree: &Tree<'_>) -> Result<Files, GitError> {
    let mut entries = Vec::new();
    let mut plain = true;
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        let name = entry.name().unwrap_or_default();
        let ordinary = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.eq_ignore_ascii_case(".git")
            && !name.eq_ignore_ascii_case(".gitattributes")
            && !name.contains(['\\', '\0']);
        let mode = entry.filemode();
        let file = [0o100644, 0o100755, 0o120000].contains(&mode);
        if !ordinary || entry.name().is_none() || !(file || mode == 0o040000) {
            plain = false;
            return git2::TreeWalkResult::Abort;
        }
        if file {
            entries.push(PlainEntry {
                path: format!("{dir}{name}"),
                id: entry.id(),
                mode,
            });
        }
        git2::TreeWalkResult::Ok
    })
    .or_else(|e| if plain { Err(e) } else { Ok(()) })
    .ctx("read tree")?;
    // A walk of a well-formed tree is in path order already (git sorts a folder's entries as if
    // folder names ended in `/`); a malformed one is sorted here, once per listed tree.
    if !entries.is_sorted_by(|a, b| a.path <= b.path) {
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    }
    Ok(plain.then(|| entries.into()))
}

/// Writes `entries` into the worktree's folder and its index, with the files' stat data so git
/// sees them clean without re-reading them.
fn write_plain(wt: &Repository, tree: &Tree<'_>, entries: &[PlainEntry]) -> Result<(), GitError> {
    let root = wt
        .workdir()
        .ok_or_else(|| GitError::other("check out worktree", "no working folder"))?;
    let written = write_entries(wt, root, entries)?;
    write_index(wt, tree, &written)
}

/// Writes the index of the worktree `wt`, whose files are those of `tree`: `entries` (the
/// index entries of the files just written or checked, with their stat data) and `tree`'s
/// tree cache, so that the job's commit rebuilds only the folders it changed (without the
/// cache, every folder's tree is hashed again). `read_tree` keeps the stat data of each
/// entry whose path, mode and blob it matches: of `entries`, and of the entries the index
/// file already held (a pooled worktree's, moved in place, whose stat data is checked).
pub(crate) fn write_index(
    wt: &Repository,
    tree: &Tree<'_>,
    entries: &[IndexEntry],
) -> Result<(), GitError> {
    let mut index = crate::repos::current_index(wt)?;
    add_in_order(&mut index, entries)?;
    index.read_tree(tree).ctx("write index")?;
    index.write().ctx("write index")
}

/// Adds `entries` to `index` in path order. libgit2 keeps an index's entries sorted and
/// inserts each one where it belongs, moving the pointers of every entry after it: in the
/// order a folder walk finds them, each entry moves about half the index (for 10,000 files,
/// 5,000 pointers an entry); in path order, none.
pub(crate) fn add_in_order(index: &mut Index, entries: &[IndexEntry]) -> Result<(), GitError> {
    let mut sorted: Vec<&IndexEntry> = entries.iter().collect();
    sorted.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    for entry in sorted {
        index.add(entry).ctx("write index")?;
    }
    Ok(())
}

/// Writes `entries` (their folders may be missing; nothing else may be in their way) into the
/// worktree `wt` at `root` and returns their index entries. Large sets are written by several
/// threads (the cost is mostly the file system's, per file), each with a repository handle of
/// its own; a small set is read through `wt`, without opening the repository again.
pub(crate) fn write_entries(
    wt: &Repository,
    root: &Path,
    entries: &[PlainEntry],
) -> Result<Vec<IndexEntry>, GitError> {
    let folders: BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| e.path.rsplit_once('/').map(|(dir, _)| dir))
        .collect();
    for dir in folders {
        let folder = root.join(dir);
        std::fs::create_dir_all(&folder).map_err(|e| error::io("check out", &folder, e))?;
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, WRITER_THREADS)
        .min(entries.len().div_ceil(FILES_PER_THREAD).max(1));
    if threads == 1 {
        return write_files(wt, root, entries);
    }
    let open = || Repository::open(root).ctx("open worktree");
    let chunk = entries.len().div_ceil(threads);
    let written: Vec<Result<Vec<IndexEntry>, GitError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = entries
            .chunks(chunk)
            // A repository handle per thread: libgit2 objects are not shared.
            .map(|part| scope.spawn(move || write_files(&open()?, root, part)))
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(GitError::other("check out", "a writer thread failed")))
            })
            .collect()
    });
    let mut all = Vec::with_capacity(entries.len());
    for part in written {
        all.extend(part?);
    }
    Ok(all)
}

/// Writes the blobs of `entries` under `root` (folders exist) and returns their index entries.
fn write_files(
    repo: &Repository,
    root: &Path,
    entries: &[PlainEntry],
) -> Result<Vec<IndexEntry>, GitError> {
    let odb = repo.odb().ctx("open object database")?;
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let file = root.join(&entry.path);
        let blob = odb.read(entry.id).ctx("read blob")?;
        let meta = write_blob(&file, blob.data(), entry.mode)?;
        out.push(stat_entry(
            entry.path.as_bytes(),
            entry.id,
            entry.mode,
            &meta,
        ));
    }
    Ok(out)
}

/// An index entry for `path` with the stat data of the file just written.
pub(crate) fn stat_entry(path: &[u8], id: Oid, mode: i32, meta: &std::fs::Metadata) -> IndexEntry {
    #[cfg(unix)]
    let (ctime, mtime, dev, ino, uid, gid, size) = {
        use std::os::unix::fs::MetadataExt;
        (
            IndexTime::new(meta.ctime() as i32, meta.ctime_nsec() as u32),
            IndexTime::new(meta.mtime() as i32, meta.mtime_nsec() as u32),
            meta.dev() as u32,
            meta.ino() as u32,
            meta.uid(),
            meta.gid(),
            meta.size() as u32,
        )
    };
    #[cfg(not(unix))]
    let (ctime, mtime, dev, ino, uid, gid, size) = {
        let zero = IndexTime::new(0, 0);
        (zero, zero, 0, 0, 0, 0, meta.len() as u32)
    };
    IndexEntry {
        ctime,
        mtime,
        dev,
        ino,
        mode: mode as u32,
        uid,
        gid,
        file_size: size,
        id,
        flags: path.len().min(0xfff) as u16,
        flags_extended: 0,
        path: path.to_vec(),
    }
}

/// Moves the working folder and index of `wt` from its HEAD's tree to `tree`, refusing (before
/// changing anything) to overwrite local modifications or untracked files. HEAD is not moved.
pub(crate) fn switch_safely(wt: &Repository, tree: &Tree<'_>) -> Result<(), GitError> {
    let mut opts = CheckoutBuilder::new();
    opts.safe();
    wt.checkout_tree(tree.as_object(), Some(&mut opts))
        .ctx("check out")
}

/// Forces the working folder and index of `wt` to `tree` (after a resolver wrote the merge
/// result itself).
pub(crate) fn switch_forced(wt: &Repository, tree: &Tree<'_>) -> Result<(), GitError> {
    let mut opts = CheckoutBuilder::new();
    opts.force();
    wt.checkout_tree(tree.as_object(), Some(&mut opts))
        .ctx("check out")
}

/// Brings the worktree `wt` to exactly `commit` (as `git reset --hard` plus `git clean -fd`):
/// index and tracked files forced to the commit's tree, untracked files removed, ignored files
/// kept, HEAD detached at the commit.
pub(crate) fn reset_to(wt: &Repository, commit: Oid) -> Result<(), GitError> {
    let tree = tree_of(wt, commit)?;
    let mut opts = CheckoutBuilder::new();
    opts.force().remove_untracked(true).recreate_missing(true);
    wt.checkout_tree(tree.as_object(), Some(&mut opts))
        .ctx("reset worktree")?;
    wt.set_head_detached(commit).ctx("move HEAD")
}

/// Files that moving the checkout `wt` from `old` to `new` would lose or that make it dirty:
/// staged changes, modified or deleted tracked files, and untracked files at paths `new` adds.
/// Sorted, at most [`DIRTY_FILES_SHOWN`].
pub(crate) fn dirty_files(
    wt: &Repository,
    old: &Tree<'_>,
    new: &Tree<'_>,
) -> Result<Vec<String>, GitError> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(true)
        .renames_head_to_index(false);
    let statuses = wt.statuses(Some(&mut opts)).ctx("status")?;
    let mut dirty = BTreeSet::new();
    for entry in statuses.iter() {
        let Some(path) = entry.path() else { continue };
        let status = entry.status();
        let untracked = status == Status::WT_NEW;
        let counts = if untracked {
            let p = Path::new(path);
            new.get_path(p).is_ok() && old.get_path(p).is_err()
        } else {
            !status.is_empty() && !status.contains(Status::IGNORED)
        };
        if counts {
            dirty.insert(path.to_string());
        }
    }
    Ok(dirty.into_iter().take(DIRTY_FILES_SHOWN).collect())
}

/// Puts `path` (relative, `/`-separated) in the working folder `root` back to its state in
/// `tree`: the blob's content and mode, or no file when `tree` lacks it.
pub(crate) fn restore_path(
    repo: &Repository,
    root: &Path,
    tree: &Tree<'_>,
    path: &str,
) -> Result<(), GitError> {
    let file = root.join(path);
    match std::fs::symlink_metadata(&file) {
        Ok(meta) if meta.is_dir() && !meta.file_type().is_symlink() => {
            std::fs::remove_dir_all(&file).map_err(|e| error::io("restore", &file, e))?
        }
        Ok(_) => std::fs::remove_file(&file).map_err(|e| error::io("restore", &file, e))?,
        Err(_) => {}
    }
    let Ok(entry) = tree.get_path(Path::new(path)) else {
        return Ok(());
    };
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(|e| error::io("restore", parent, e))?;
    }
    let blob = repo.find_blob(entry.id()).ctx("read blob")?;
    write_blob(&file, blob.content(), entry.filemode()).map(|_| ())
}

/// Writes a blob as a file of git mode `mode` (regular, executable or symbolic link); returns
/// the stat data of what it wrote.
fn write_blob(file: &Path, content: &[u8], mode: i32) -> Result<std::fs::Metadata, GitError> {
    let io = |e| error::io("write file", file, e);
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::PermissionsExt;
        if mode == i32::from(git2::FileMode::Link) {
            let target = std::ffi::OsStr::from_bytes(content);
            std::os::unix::fs::symlink(target, file).map_err(io)?;
            return std::fs::symlink_metadata(file).map_err(io);
        }
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let executable = mode == i32::from(git2::FileMode::BlobExecutable);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(if executable { 0o777 } else { 0o666 })
            .open(file)
            .map_err(io)?;
        out.write_all(content).map_err(io)?;
        // The stat data comes from the open file, not by looking the whole path up again.
        let meta = out.metadata().map_err(io)?;
        let mode = meta.permissions().mode();
        if executable && mode & 0o111 == 0 {
            // An existing file keeps its mode on open: set it explicitly (which changes
            // its ctime, so the stat data is read again).
            out.set_permissions(std::fs::Permissions::from_mode(mode | 0o111))
                .map_err(io)?;
            return out.metadata().map_err(io);
        }
        Ok(meta)
    }
    #[cfg(not(unix))]
    {
        let _ = mode;
        std::fs::write(file, content).map_err(io)?;
        std::fs::symlink_metadata(file).map_err(io)
    }
}

/// The tree of a commit.
pub(crate) fn tree_of(repo: &Repository, commit: Oid) -> Result<Tree<'_>, GitError> {
    repo.find_commit(commit)
        .and_then(|c| c.tree())
        .ctx("read commit")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository whose one commit holds `files` (path, content).
    fn repo_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Repository, Oid) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        let mut index = repo.index().expect("index");
        for (path, content) in files {
            let blob = repo.blob(content.as_bytes()).expect("blob");
            let meta = dir.path().metadata().expect("stat");
            let entry = stat_entry(path.as_bytes(), blob, 0o100644, &meta);
            index.add(&entry).expect("add");
        }
        let tree = index.write_tree().expect("tree");
        (dir, repo, tree)
    }

    #[test]
    fn a_trees_files_are_kept_by_its_id() {
        let (_dir, repo, id) = repo_with(&[("a/b.txt", "b"), ("c.txt", "c")]);
        let tree = repo.find_tree(id).expect("tree");
        let first = plain_entries(&repo, &tree).expect("list").expect("plain");
        let paths: Vec<&str> = first.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a/b.txt", "c.txt"]);
        // Kept by its id (a store of the test's own: tests run side by side).
        let recent = RecentTrees::new();
        let kept = recent.files(&tree).expect("list").expect("plain");
        assert!(Arc::ptr_eq(
            &kept,
            &recent.files(&tree).expect("list").expect("plain")
        ));
        assert_eq!(kept.len(), first.len());

        // A tree that is not plain is remembered as such.
        let (_dir, repo, id) = repo_with(&[(".gitattributes", "* text"), ("d.txt", "d")]);
        let tree = repo.find_tree(id).expect("tree");
        assert!(plain_entries(&repo, &tree).expect("list").is_none());
        assert!(recent.files(&tree).expect("list").is_none());
        assert!(recent.files(&tree).expect("list").is_none());
        assert_eq!(recent.lock().len(), 2);
    }

    #[test]
    fn a_trees_files_are_listed_in_path_order() {
        // Names that sort around a folder's `/`: the walk's order must be the index's.
        let files = [
            ("a/b", "1"),
            ("a-b", "2"),
            ("a.txt", "3"),
            ("a0", "4"),
            ("ab/c", "5"),
        ];
        let (_dir, repo, id) = repo_with(&files);
        let tree = repo.find_tree(id).expect("tree");
        let listed = tree_files(&tree).expect("list").expect("plain");
        let paths: Vec<&str> = listed.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a-b", "a.txt", "a/b", "a0", "ab/c"]);
    }
}
