//! The worktree pool: finished jobs' worktrees kept per repository, so that a new job's
//! worktree is made by touching only the files that differ instead of writing every file.
//!
//! The pool lives in `<common git dir>/orchestrator/worktree-pool/`, out of the worktree roots
//! (the orphan sweep and every check of a root's folders never see it) and unregistered from
//! git (`git worktree list` never shows it). An entry is a folder:
//!
//! ```text
//! <id>/files/   the working folder, without its `.git` file
//! <id>/index    an index of exactly the files in `files/`, with their stat data
//! <id>/bytes    the disk space `files/` takes, in decimal
//! ```
//!
//! Every change of an entry is a rename, so that no two processes ever hold the same one: an
//! entry being parked is `<id>.parking.<pid>`, one being taken `<id>.taking.<pid>`, one being
//! deleted `<id>.<op>.<pid>`; only a bare `<id>` is ready. A marker whose process is gone was
//! left by a crash: [`sweep`] deletes it.
//!
//! - [`park`] (worktree removal) moves the worktree in, drops its registration (the index is
//!   kept), and brings `files/` down to the index entries whose path still holds a file of the
//!   indexed kind (see `tidy.rs`, `tidy_names`): untracked and ignored files and folders are
//!   deleted, symbolic links only unlinked, so the entry holds only what its index names. Its
//!   files' content is not read here: the take checks it.
//! - [`take`] (worktree creation) claims the newest entry, moves `files/` to the new path,
//!   registers it as a fresh `git worktree add --detach` would, deletes the files whose path,
//!   mode or content differ from the commit's tree (content known from the stat data the
//!   entry's index recorded, or by hashing) and writes the missing ones. Only the
//!   claim and the registration hold the repository's lock; the files are brought to the
//!   commit without it ([`Taken::fill`]). Any failure deletes the entry, and the caller makes
//!   a fresh checkout.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use git2::{ErrorCode, Index, IndexEntry, IndexTime, Oid, Repository};
use orchestrator_core::git::GitError;

use crate::builder::PoolLimits;
use crate::checkout::{self, PlainEntry};
use crate::error::{self, Context};
use crate::paths::{Mark, Marks};
use crate::repos::Repos;
use crate::settled::Settled;
use crate::tidy::{tidy, tidy_names, Want, Wanted};
use crate::{paths, worktree};

/// The entries this process is changing right now (their marker paths), so that a sweep in
/// this process tells them from a crash's leftovers.
static BUSY: Marks = Marks::new();

/// The index entries of the entries this process settled, for the take (`settled.rs`).
static SETTLED: Settled = Settled::new();

/// A marker older than this whose owner's liveness cannot be checked is taken for a crash's.
const UNKNOWN_OWNER_AGE: Duration = Duration::from_secs(24 * 3600);

/// Index entry flags (`flags_extended`) of libgit2's `git_index_entry_extended_flag_t`.
const INTENT_TO_ADD: u16 = 1 << 13;
const SKIP_WORKTREE: u16 = 1 << 14;

/// The pool folder of `repo`.
pub(crate) fn pool_dir(repo: &Repository) -> PathBuf {
    repo.commondir().join("orchestrator").join("worktree-pool")
}

/// A new entry id: sortable by time, unique across processes.
fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{nanos:020}-{}-{n}", std::process::id())
}

/// The marker path of entry `id` while this process does `op` to it.
fn marker(dir: &Path, id: &str, op: &str) -> PathBuf {
    dir.join(format!("{id}.{op}.{}", std::process::id()))
}

/// Ready entries, oldest first.
fn ready(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| !name.contains('.'))
        .collect();
    ids.sort();
    ids
}

/// Whether `repo`'s pool has an entry ready to be taken.
pub(crate) fn has_ready(repo: &Repository) -> bool {
    !ready(&pool_dir(repo)).is_empty()
}

/// Moves the valid worktree at `path` (physical), registered in `admin`, into the pool, within
/// `limits`. `index` is its index's entries when a kept handle has them loaded (read just now,
/// so they are its file's), sparing the settling a read of that file. `Ok(None)`: nothing was
/// changed, the caller removes the worktree itself; `Ok(Some(_))`: the worktree is gone from
/// `path` and from git, and [`Parked::settle`] finishes the parking (it needs no lock: the
/// entry is this process's).
pub(crate) fn park(
    repo: &Repository,
    path: &Path,
    admin: &Path,
    limits: &PoolLimits,
    index: Option<Vec<IndexEntry>>,
) -> Result<Option<Parked>, GitError> {
    if !limits.enabled() || !checkout::plain_config(repo)? {
        return Ok(None);
    }
    let dir = pool_dir(repo);
    let id = new_id();
    let parking = marker(&dir, &id, "parking");
    let busy = BUSY.mark(&parking);
    if std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::create_dir(&parking))
        .is_err()
    {
        return Ok(None);
    }
    // One rename takes the worktree away from its path (another file system refuses it).
    if std::fs::rename(path, parking.join("files")).is_err() {
        let _ = std::fs::remove_dir(&parking);
        return Ok(None);
    }
    // From here the worktree has left its path: whatever happens next, it is removed.
    let _ = std::fs::rename(admin.join("index"), parking.join("index"));
    if let Err(e) = paths::remove_tree(admin) {
        paths::remove_tree(&parking)?;
        return Err(e);
    }
    Ok(Some(Parked {
        dir,
        id,
        parking,
        limits: *limits,
        index,
        _busy: busy,
    }))
}

/// A worktree moved into the pool, not settled yet (see [`park`]).
pub(crate) struct Parked {
    dir: PathBuf,
    id: String,
    parking: PathBuf,
    limits: PoolLimits,
    /// The entries of the index moved in with it, if known (see [`park`]).
    index: Option<Vec<IndexEntry>>,
    _busy: Mark,
}

impl Parked {
    /// Brings the entry down to what its index says and makes it ready (or deletes it when it
    /// is not worth keeping), then trims the pool to its limits.
    pub(crate) fn settle(self) -> Result<(), GitError> {
        match settle(&self.parking, self.index, &self.limits) {
            Ok(Some(entries)) => {
                SETTLED.put(&self.id, &self.parking.join("index"), entries);
                match std::fs::rename(&self.parking, self.dir.join(&self.id)) {
                    Ok(()) => {
                        if let Err(e) = trim(&self.dir, &self.limits) {
                            tracing::warn!(error = %e, "could not trim the worktree pool");
                        }
                    }
                    Err(_) => paths::remove_tree(&self.parking)?,
                }
            }
            Ok(None) => paths::remove_tree(&self.parking)?,
            Err(e) => {
                tracing::warn!(entry = %self.parking.display(), error = %e, "could not pool a worktree; deleting it");
                paths::remove_tree(&self.parking)?;
            }
        }
        Ok(())
    }
}

/// Brings a parked entry's files down to what its index names (see the module docs) and
/// writes its new index and size; returns the index's entries. `index`: those entries, when
/// known, else the index file is read. `Ok(None)` when the entry is not worth keeping.
fn settle(
    entry: &Path,
    index: Option<Vec<IndexEntry>>,
    limits: &PoolLimits,
) -> Result<Option<Vec<IndexEntry>>, GitError> {
    let files = entry.join("files");
    paths::remove_tree(&files.join(".git"))?;
    let index_file = entry.join("index");
    if !index_file.exists() {
        return Ok(None);
    }
    let index = match index {
        Some(entries) => entries,
        None => Index::open(&index_file).ctx("read index")?.iter().collect(),
    };
    let entries = index.len();
    let mut wanted = Wanted::with_capacity(entries);
    for mut e in index {
        let attributes = e.path == b".gitattributes" || e.path.ends_with(b"/.gitattributes");
        if attributes {
            // Its blobs may not be its files' bytes (filters): nothing in it can be trusted.
            return Ok(None);
        }
        let stage = stage(&e);
        let assume_valid = e.flags & 0x8000 != 0;
        let file = [0o100644, 0o100755, 0o120000].contains(&e.mode);
        // Intent-to-add and skip-worktree entries say nothing about the file on disk.
        let unusual = e.flags_extended & (INTENT_TO_ADD | SKIP_WORKTREE) != 0;
        if stage == 0 && !assume_valid && !unusual && file {
            // The key is the path, moved out of the entry (see `Want::seen`).
            let (path, id, mode) = (std::mem::take(&mut e.path), e.id, e.mode);
            let seen = Some(e);
            wanted.insert(path, Want { id, mode, seen });
        }
    }
    // By path and kind alone: the take that reuses the entry checks each kept file's stat
    // data (or content) against the index right before use, which also covers whatever
    // happened to the files in between.
    let tidied = tidy_names(&files, &wanted)?;
    if tidied.bytes > limits.bytes {
        return Ok(None);
    }
    // Most often every entry is still there (the job committed what it changed): then the
    // index is already the entry's, and is not written again. (The kept files are among the
    // wanted, which are among the entries.)
    if tidied.kept.len() != entries {
        // The new index keeps the old one's time: the take tells racily clean entries by it
        // (stat data recorded as late as the index was written is not trusted), and the
        // entries' stat data is the old index's.
        let written = std::fs::metadata(&index_file)
            .and_then(|m| m.modified())
            .ok();
        keep_only(&index_file, &tidied.kept, written)?;
    }
    let bytes = entry.join("bytes");
    std::fs::write(&bytes, tidied.bytes.to_string()).map_err(|e| error::io("pool", &bytes, e))?;
    Ok(Some(tidied.kept))
}

/// The merge stage of an index entry (0 unless it is a side of a conflict).
fn stage(entry: &IndexEntry) -> i32 {
    i32::from((entry.flags >> 12) & 3)
}

/// Replaces the index file `file` by itself without its entries other than `kept` (stage-0
/// entries it holds), modified at `time` when given (set before it takes `file`'s place, so
/// that no crash leaves it there with a later time). The other entries are removed from a copy,
/// rather than the kept ones added to an empty index, so that the tree cache stays valid for
/// every folder no removal touched: the take changes the index in place (`update_index`) and
/// keeps its cache for the job's commit.
fn keep_only(file: &Path, kept: &[IndexEntry], time: Option<SystemTime>) -> Result<(), GitError> {
    let fresh = file.with_extension("new");
    let _ = std::fs::remove_file(&fresh);
    std::fs::copy(file, &fresh).map_err(|e| error::io("pool", &fresh, e))?;
    let mut index = Index::open(&fresh).ctx("write index")?;
    // (`kept` is in path order.)
    let keep = |path: &[u8]| {
        kept.binary_search_by(|e| e.path.as_slice().cmp(path))
            .is_ok()
    };
    let gone: Vec<(Vec<u8>, i32)> = index
        .iter()
        .filter(|e| stage(e) != 0 || !keep(&e.path))
        .map(|e| {
            let stage = stage(&e);
            (e.path, stage)
        })
        .collect();
    for (path, stage) in gone {
        index
            .remove(Path::new(OsStr::from_bytes(&path)), stage)
            .ctx("write index")?;
    }
    index.write().ctx("write index")?;
    if let Some(time) = time {
        std::fs::File::options()
            .write(true)
            .open(&fresh)
            .and_then(|f| f.set_modified(time))
            .map_err(|e| error::io("pool", &fresh, e))?;
    }
    std::fs::rename(&fresh, file).map_err(|e| error::io("pool", file, e))
}

/// When the file at `path` was last modified, as an index time.
fn modified(path: &Path) -> Option<IndexTime> {
    let meta = std::fs::metadata(path).ok()?;
    Some(IndexTime::new(
        meta.mtime() as i32,
        meta.mtime_nsec() as u32,
    ))
}

/// Starts making the worktree of `repo` at `path` (physical, confined; missing or an empty
/// folder) from the newest pooled entry, detached at `commit`: the entry is claimed, the
/// worktree registered (as being created) and its files moved to `path`. `Ok(None)` when the
/// pool had nothing usable (a damaged entry is deleted) and nothing is at `path`, so the
/// caller makes a fresh checkout; else [`Taken::fill`] brings the files to the commit's,
/// without the repository's lock.
pub(crate) fn take(
    repo: &Repository,
    path: &Path,
    commit: Oid,
    limits: &PoolLimits,
) -> Result<Option<Taken>, GitError> {
    if !limits.enabled() {
        return Ok(None);
    }
    let dir = pool_dir(repo);
    let candidates = ready(&dir);
    if candidates.is_empty() {
        return Ok(None);
    }
    let tree = checkout::tree_of(repo, commit)?;
    let Some(target) = checkout::plain_entries(repo, &tree)? else {
        return Ok(None);
    };
    let parent = path.parent().unwrap_or(path);
    std::fs::create_dir_all(parent).map_err(|e| error::io("create worktree", parent, e))?;
    let device = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    if device(&dir).is_none() || device(&dir) != device(parent) {
        return Ok(None);
    }
    // The newest first; one another process renamed first is gone, the next one is tried.
    let Some((id, taking, busy)) = candidates.iter().rev().find_map(|id| {
        let taking = marker(&dir, id, "taking");
        let busy = BUSY.mark(&taking);
        std::fs::rename(dir.join(id), &taking)
            .is_ok()
            .then_some((id, taking, busy))
    }) else {
        return Ok(None);
    };
    match claim(
        repo,
        Claimed(id, taking, busy),
        path,
        commit,
        tree.id(),
        target,
    ) {
        Ok(taken) => Ok(Some(taken)),
        Err(e) => {
            unusable(path, &e)?;
            Ok(None)
        }
    }
}

/// A pooled worktree moved to its new path and registered, its files not yet brought to its
/// commit (see [`take`]).
pub(crate) struct Taken {
    entry: PathBuf,
    path: PathBuf,
    admin: PathBuf,
    tree: Oid,
    /// The commit's files.
    target: Arc<[PlainEntry]>,
    /// Those the entry's index says it holds as they are, with the index's stat data.
    wanted: Wanted,
    /// The paths of the entry's index that are not among them.
    stale: Vec<Vec<u8>>,
    /// When that index was written.
    racy_from: Option<IndexTime>,
    _busy: Mark,
}

/// A pool entry (its id) this process renamed to its `taking` marker.
struct Claimed<'a>(&'a str, PathBuf, Mark);

/// Registers the worktree and moves the claimed entry's files to `path`. On failure the entry
/// and the registration are deleted; the caller deletes `path`.
fn claim(
    repo: &Repository,
    claimed: Claimed<'_>,
    path: &Path,
    commit: Oid,
    tree: Oid,
    target: Arc<[PlainEntry]>,
) -> Result<Taken, GitError> {
    let Claimed(id, entry, busy) = claimed;
    let index_file = entry.join("index");
    let racy_from = modified(&index_file);
    let registered = wanted(id, &index_file, &target).and_then(|(wanted, stale)| {
        if path.exists() {
            std::fs::remove_dir(path).map_err(|e| error::io("create worktree", path, e))?;
        }
        // Registered first, moved second: a crash never leaves files at `path` that are not
        // recognisably an unfinished creation of ours.
        let files = entry.join("files");
        let admin = worktree::claim_admin_dir(repo, path)?;
        let moved = worktree::register_from(&admin, path, commit, &files).and_then(|()| {
            std::fs::rename(&files, path).map_err(|e| error::io("create worktree", &files, e))
        });
        match moved {
            Ok(()) => Ok((admin, wanted, stale)),
            Err(e) => {
                let _ = paths::remove_tree(&admin);
                Err(e)
            }
        }
    });
    match registered {
        Ok((admin, wanted, stale)) => Ok(Taken {
            entry,
            path: path.to_path_buf(),
            admin,
            tree,
            target,
            wanted,
            stale,
            racy_from,
            _busy: busy,
        }),
        Err(e) => {
            paths::remove_tree(&entry)?;
            Err(e)
        }
    }
}

/// The files of `target` that the index `index_file` of the pool entry `id` records with the
/// same content and mode, with the stat data it recorded; and the paths of the index's other
/// entries.
fn wanted(
    id: &str,
    index_file: &Path,
    target: &[PlainEntry],
) -> Result<(Wanted, Vec<Vec<u8>>), GitError> {
    let pooled = match SETTLED.take(id, index_file) {
        Some(entries) => entries,
        None => Index::open(index_file)
            .ctx("read pooled index")?
            .iter()
            .collect(),
    };
    // The commit's files are in path order (`checkout::plain_entries`), as an index (and a
    // settled entry) holds its entries: each is found by binary search, and `wanted` grows by
    // appending.
    let mut wanted = Wanted::with_capacity(pooled.len());
    let mut stale = Vec::new();
    for mut seen in pooled {
        let found = target
            .binary_search_by(|t| t.path.as_bytes().cmp(&seen.path))
            .ok()
            .map(|at| &target[at]);
        match found {
            Some(t) if seen.id == t.id && seen.mode == t.mode as u32 => {
                // The path moves out of the entry into the key (see `Want::seen`).
                let path = std::mem::take(&mut seen.path);
                let (id, mode) = (t.id, t.mode as u32);
                wanted.insert(
                    path,
                    Want {
                        id,
                        mode,
                        seen: Some(seen),
                    },
                );
            }
            _ => stale.push(seen.path),
        }
    }
    Ok((wanted, stale))
}

impl Taken {
    /// Brings the files to the commit's: deletes what the entry's index does not vouch for
    /// (checked against the files' stat data, see `tidy.rs`), writes the missing files and
    /// the index, and ends the registration. `Ok(false)` when that failed: the worktree and
    /// its registration are deleted, and the caller makes a fresh checkout. `repo` is the
    /// repository as the operations name it, to read objects through its kept handle; the
    /// worktree's handle is kept in `worktrees` for the job's commit.
    pub(crate) fn fill(
        self,
        repos: &Repos,
        worktrees: &Repos,
        repo: &Path,
    ) -> Result<bool, GitError> {
        let path = &self.path;
        let filled = tidy(path, &self.wanted, self.racy_from).and_then(|tidied| {
            // (`kept` is in path order.)
            let is_kept = |t: &&PlainEntry| {
                let found = tidied
                    .kept
                    .binary_search_by(|e| e.path.as_slice().cmp(t.path.as_bytes()));
                found.is_ok()
            };
            let missing: Vec<PlainEntry> = self
                .target
                .iter()
                .filter(|t| !is_kept(t))
                .cloned()
                .collect();
            worktrees.with(path, |wt| {
                let written = checkout::write_entries(wt, path, &missing)?;
                // When the entry's index describes the kept files exactly, it becomes the
                // worktree's, changed only where the commit's files differ (adding every kept
                // file's entry again cost as much as the walk that checked them, and rebuilding
                // it from the commit's tree a third of that).
                let entries: Vec<IndexEntry> = if tidied.exact
                    && std::fs::rename(self.entry.join("index"), self.admin.join("index")).is_ok()
                {
                    if update_index(wt, &self.stale, &written, self.target.len())? {
                        return Ok(());
                    }
                    written
                } else {
                    tidied.kept.into_iter().chain(written).collect()
                };
                // The tree is read through the repository kept open for merges (`repos.rs`),
                // whose object cache holds the target's folders from earlier jobs; the
                // worktree's own handle, opened just now, would read each of them from disk.
                repos.with(repo, |main| {
                    let tree = main.find_tree(self.tree).ctx("read tree")?;
                    checkout::write_index(wt, &tree, &entries)
                })
            })?;
            worktree::finish_registration(&self.admin)
        });
        paths::remove_tree(&self.entry)?;
        match filled {
            Ok(()) => Ok(true),
            Err(e) => {
                unusable(path, &e)?;
                paths::remove_tree(&self.admin)?;
                Ok(false)
            }
        }
    }
}

/// Brings the index of the worktree `wt`, the one its pool entry held, to the files of its
/// commit (`files` of them) by changing only what differs: the `stale` entries are removed
/// and the `written` ones added; the others are the commit's files with their stat data.
/// libgit2 invalidates the tree cache of each folder a change touches, so the cache stays the
/// commit's wherever it is valid, as `checkout::write_index` would make it, without rebuilding
/// the index from the commit's tree. `Ok(false)` (nothing written) when the result would not
/// hold exactly `files` entries.
fn update_index(
    wt: &Repository,
    stale: &[Vec<u8>],
    written: &[IndexEntry],
    files: usize,
) -> Result<bool, GitError> {
    let mut index = crate::repos::current_index(wt)?;
    // Removed first: a written file may take the place of a stale folder, or the reverse.
    for path in stale {
        match index.remove(Path::new(OsStr::from_bytes(path)), 0) {
            Err(e) if e.code() == ErrorCode::NotFound => {}
            removed => removed.ctx("write index")?,
        }
    }
    checkout::add_in_order(&mut index, written)?;
    if index.len() != files {
        return Ok(false);
    }
    index.write().ctx("write index")?;
    Ok(true)
}

/// Reports that the pooled worktree moved to `path` was unusable, and deletes what is there.
fn unusable(path: &Path, e: &GitError) -> Result<(), GitError> {
    tracing::warn!(path = %path.display(), error = %e, "a pooled worktree was unusable; checking out afresh");
    paths::remove_tree(path)
}

/// Deletes the entries crashes left half-moved and the entries beyond `limits` (oldest
/// first). Returns how many were deleted.
pub(crate) fn sweep(repo: &Repository, limits: &PoolLimits) -> Result<usize, GitError> {
    let dir = pool_dir(repo);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.contains('.') {
            continue; // ready
        }
        let owner = name.rsplit('.').next().and_then(|p| p.parse::<u32>().ok());
        let path = entry.path();
        if owner.is_none_or(|pid| owner_gone(pid, &path)) {
            let id = name.split('.').next().unwrap_or_default();
            let claimed = marker(&dir, id, "sweeping");
            let _busy = BUSY.mark(&claimed);
            if std::fs::rename(&path, &claimed).is_ok() {
                paths::remove_tree(&claimed)?;
                removed += 1;
            }
        }
    }
    Ok(removed + trim(&dir, limits)?)
}

/// Deletes every ready entry and what crashes left. Returns how many entries were deleted.
pub(crate) fn clear(repo: &Repository) -> Result<usize, GitError> {
    sweep(repo, &PoolLimits::DISABLED)
}

/// Whether the process `pid` that named a marker at `path` is gone (or, when that cannot be
/// told, the marker is old).
fn owner_gone(pid: u32, path: &Path) -> bool {
    if pid == std::process::id() {
        return !BUSY.contains(path);
    }
    if Path::new("/proc/self").exists() {
        return !Path::new("/proc").join(pid.to_string()).exists();
    }
    paths::older_than(path, UNKNOWN_OWNER_AGE)
}

/// Deletes the oldest ready entries until the pool is within `limits`; an entry whose size is
/// unreadable is deleted. Returns how many were deleted.
fn trim(dir: &Path, limits: &PoolLimits) -> Result<usize, GitError> {
    let mut sized: Vec<(String, Option<u64>)> = ready(dir)
        .into_iter()
        .map(|id| {
            let bytes = std::fs::read_to_string(dir.join(&id).join("bytes"))
                .ok()
                .and_then(|t| t.trim().parse().ok());
            (id, bytes)
        })
        .collect();
    let mut total = sized
        .iter()
        .filter_map(|(_, b)| *b)
        .fold(0u64, u64::saturating_add);
    let mut count = sized.iter().filter(|(_, b)| b.is_some()).count();
    let mut removed = 0;
    // Oldest first; unreadable ones whatever their age.
    sized.sort_by_key(|(id, bytes)| (bytes.is_some(), id.clone()));
    for (id, bytes) in sized {
        let within = count <= limits.count && total <= limits.bytes;
        if bytes.is_some() && within {
            break;
        }
        let claimed = marker(dir, &id, "trimming");
        let _busy = BUSY.mark(&claimed);
        if std::fs::rename(dir.join(&id), &claimed).is_ok() {
            paths::remove_tree(&claimed)?;
            removed += 1;
        }
        if let Some(b) = bytes {
            total = total.saturating_sub(b);
            count = count.saturating_sub(1);
        }
    }
    Ok(removed)
}
