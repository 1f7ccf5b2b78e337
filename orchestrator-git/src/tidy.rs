//! Making a folder hold exactly a set of wanted files, keeping the ones already right: the core
//! of the worktree pool (`pool.rs`).
//!
//! [`tidy`] walks a folder without following symbolic links. A file stays when its path is
//! wanted, its kind and executable bit are the wanted mode and its content is the wanted blob —
//! known from the stat data an index recorded for it (as `git status` trusts it), or else by
//! hashing it. Everything else is deleted: other files, symbolic links (only unlinked), folders
//! no wanted file lies in, and folders left empty. Afterwards the folder holds the kept files
//! and their folders, nothing more.
//!
//! [`tidy_names`] is the same walk without reading any file's stat data: a file stays when its
//! path is wanted and its kind (file or symbolic link) is the wanted one. The pool settles a
//! parked worktree with it, since the take that reuses the worktree checks every kept file
//! with [`tidy`] anyway, right before use (a check at parking time would be repeated there).

#![cfg(unix)]

use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use git2::{IndexEntry, IndexTime, ObjectType, Oid};
use orchestrator_core::git::GitError;

use crate::checkout::stat_entry;
use crate::error;
use crate::paths;

/// A file [`tidy`] may keep.
pub(crate) struct Want {
    /// The blob it must hold.
    pub(crate) id: Oid,
    /// Its git mode (`0o100644`, `0o100755` or `0o120000`).
    pub(crate) mode: u32,
    /// The stat data an index recorded when the file last held `id`, if any (its `path` is
    /// not read: the file's path is the key it is wanted by).
    pub(crate) seen: Option<IndexEntry>,
}

/// The files [`tidy`] may keep, by relative `/`-separated path, sorted by it as a git index is:
/// looked up by binary search, and a folder is wanted when a wanted file's path starts with it.
/// The pool builds it from an index's entries or a tree's, which come in that order already,
/// so it costs no hashing and no rebuilding (a hash map of the paths and one of their folders
/// took about 7% of the git work of one-file jobs on a 900-file repository).
#[derive(Default)]
pub(crate) struct Wanted {
    files: Vec<(Vec<u8>, Want)>,
}

impl Wanted {
    /// Room for `files` files without growing.
    pub(crate) fn with_capacity(files: usize) -> Self {
        Wanted {
            files: Vec::with_capacity(files),
        }
    }

    /// Adds a file, or replaces the one wanted at its path. Adding in path order appends.
    pub(crate) fn insert(&mut self, path: Vec<u8>, want: Want) {
        match self.files.last() {
            Some((last, _)) if *last >= path => {
                match self.files.binary_search_by(|(p, _)| p.cmp(&path)) {
                    Ok(at) => self.files[at].1 = want,
                    Err(at) => self.files.insert(at, (path, want)),
                }
            }
            _ => self.files.push((path, want)),
        }
    }

    /// How many files are wanted.
    fn len(&self) -> usize {
        self.files.len()
    }

    /// The places of all wanted files, in path order.
    fn all(&self) -> Range<usize> {
        0..self.files.len()
    }

    /// The places of the wanted files in the folder `dir` (at any depth), found within
    /// `within`, the places of a folder that holds it. `dir` is given back as it came; a `/`
    /// is appended meanwhile.
    fn folder(&self, within: Range<usize>, dir: &mut Vec<u8>) -> Range<usize> {
        dir.push(b'/');
        let files = self.files.get(within.clone()).unwrap_or_default();
        let start = files.partition_point(|(p, _)| p.as_slice() < dir.as_slice());
        let len = files[start..].partition_point(|(p, _)| p.starts_with(dir));
        dir.pop();
        within.start + start..within.start + start + len
    }

    /// The file wanted at `path`, and its place, looked for among the places `within` of its
    /// folder, whose path with its `/` is `path`'s first `prefix` bytes (compared no more).
    fn get(&self, within: Range<usize>, prefix: usize, path: &[u8]) -> Option<(usize, &Want)> {
        let name = path.get(prefix..)?;
        let files = self.files.get(within.clone())?;
        let at = files
            .binary_search_by(|(p, _)| p.get(prefix..).unwrap_or_default().cmp(name))
            .ok()?;
        let (_, want) = &files[at];
        Some((within.start + at, want))
    }
}

/// What [`tidy`] left: the kept files' index entries (with their current stat data) and the
/// disk space they and their folders take.
pub(crate) struct Tidied {
    /// In path order.
    pub(crate) kept: Vec<IndexEntry>,
    pub(crate) bytes: u64,
    /// Every kept file has the stat data its `seen` entry recorded: the index that recorded
    /// them still describes them exactly.
    pub(crate) exact: bool,
}

/// Brings the folder `root` down to the files of `wanted` it already holds (see the module
/// docs). `racy_from` is when the index that recorded the `seen` stat data was written: a file
/// modified in that instant or later may have changed without its stat data showing it (git's
/// "racily clean" entries), so it is hashed. A top-level `.git` is left alone.
pub(crate) fn tidy(
    root: &Path,
    wanted: &Wanted,
    racy_from: Option<IndexTime>,
) -> Result<Tidied, GitError> {
    Walk::new(wanted, Check::Content { racy_from }).run(root)
}

/// Brings the folder `root` down to the files of `wanted` whose path and kind it holds,
/// without reading any file's stat data (see the module docs). The kept entries are the
/// wanted ones' `seen` entries, as recorded (a file wanted without one is not kept), and
/// `bytes` counts each kept file as its recorded size rounded up to 4 KiB blocks.
pub(crate) fn tidy_names(root: &Path, wanted: &Wanted) -> Result<Tidied, GitError> {
    Walk::new(wanted, Check::Names).run(root)
}

/// What vouches for a wanted file's content.
#[derive(Clone, Copy)]
enum Check {
    /// Its path and kind alone: the content is checked later.
    Names,
    /// Its stat data as an index recorded it, or else its hash (see [`tidy`]).
    Content { racy_from: Option<IndexTime> },
}

struct Walk<'a> {
    wanted: &'a Wanted,
    check: Check,
    out: Tidied,
    /// The kept files' entries, each at its place in `wanted` (so `kept` comes out in path
    /// order without sorting).
    kept: Vec<Option<IndexEntry>>,
}

impl<'a> Walk<'a> {
    fn new(wanted: &'a Wanted, check: Check) -> Self {
        Walk {
            wanted,
            check,
            out: Tidied {
                kept: Vec::new(),
                bytes: 0,
                exact: true,
            },
            kept: std::iter::repeat_with(|| None).take(wanted.len()).collect(),
        }
    }

    fn run(mut self, root: &Path) -> Result<Tidied, GitError> {
        self.folder(root, &mut Vec::new(), self.wanted.all())?;
        self.out.kept = self.kept.into_iter().flatten().collect();
        Ok(self.out)
    }

    /// Tidies the folder `dir` (relative path `rel`, holding the wanted files at `places`);
    /// returns whether anything is left in it.
    fn folder(
        &mut self,
        dir: &Path,
        rel: &mut Vec<u8>,
        places: Range<usize>,
    ) -> Result<bool, GitError> {
        // The length of the path every wanted file here starts with: `rel` and its `/`.
        let prefix = if rel.is_empty() { 0 } else { rel.len() + 1 };
        let io = |path: &Path, e| error::io("tidy worktree", path, e);
        let mut left = false;
        for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
            let entry = entry.map_err(|e| io(dir, e))?;
            let path = entry.path();
            let name = entry.file_name();
            if rel.is_empty() && name == ".git" {
                left = true;
                continue;
            }
            let len = rel.len();
            if len > 0 {
                rel.push(b'/');
            }
            rel.extend_from_slice(name.as_bytes());
            let kind = entry.file_type().map_err(|e| io(&path, e))?;
            let kept = if kind.is_dir() {
                // `file_type` does not follow symbolic links: this is a real folder.
                let inner = self.wanted.folder(places.clone(), rel);
                if !inner.is_empty() {
                    let nonempty = self.folder(&path, rel, inner)?;
                    if nonempty {
                        self.out.bytes += entry.metadata().map_or(0, |m| disk_bytes_of(&m));
                    } else {
                        std::fs::remove_dir(&path).map_err(|e| io(&path, e))?;
                    }
                    nonempty
                } else {
                    paths::remove_tree(&path)?;
                    false
                }
            } else {
                let wanted = self.wanted.get(places.clone(), prefix, rel);
                let keep = self.keep(&entry, &path, rel, wanted)?;
                if !keep {
                    std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
                }
                keep
            };
            left |= kept;
            rel.truncate(len);
        }
        Ok(left)
    }

    /// Whether the file (or symbolic link, or other non-folder) at `path` is wanted as it is
    /// (`wanted`: the file wanted at its path, and its place); if so its index entry is
    /// recorded.
    /// (`entry` is `path`'s folder entry: its metadata is read relative to the open folder, not
    /// by walking the whole path again, and does not follow a symbolic link.)
    fn keep(
        &mut self,
        entry: &std::fs::DirEntry,
        path: &Path,
        rel: &[u8],
        wanted: Option<(usize, &Want)>,
    ) -> Result<bool, GitError> {
        let Some((at, want)) = wanted else {
            return Ok(false);
        };
        let racy_from = match self.check {
            Check::Names => return Ok(self.keep_by_name(entry, rel, at, want)),
            Check::Content { racy_from } => racy_from,
        };
        let meta = entry
            .metadata()
            .map_err(|e| error::io("tidy worktree", path, e))?;
        let mode = if meta.file_type().is_symlink() {
            0o120000
        } else if meta.is_file() && meta.mode() & 0o100 != 0 {
            0o100755
        } else if meta.is_file() {
            0o100644
        } else {
            return Ok(false);
        };
        if mode != want.mode {
            return Ok(false);
        }
        let entry = stat_entry(rel, want.id, mode as i32, &meta);
        let unchanged = want
            .seen
            .as_ref()
            .is_some_and(|seen| same_stat(seen, &entry));
        let same = match &want.seen {
            Some(seen) if unchanged && !racy(seen, racy_from) => true,
            // A different size is a different content, unless the index smudged the entry
            // (size 0) as git does with racily clean ones.
            Some(seen) if seen.file_size != 0 && seen.file_size != entry.file_size => false,
            _ => content_id(path, mode)? == Some(want.id),
        };
        if same {
            self.out.bytes += disk_bytes_of(&meta);
            self.out.exact &= unchanged;
            self.kept[at] = Some(entry);
        }
        Ok(same)
    }

    /// [`keep`](Self::keep) by path and kind alone ([`Check::Names`]). The kind comes from the
    /// folder entry (no stat where the file system reports it).
    fn keep_by_name(
        &mut self,
        entry: &std::fs::DirEntry,
        rel: &[u8],
        at: usize,
        want: &Want,
    ) -> bool {
        let (Some(seen), Ok(kind)) = (&want.seen, entry.file_type()) else {
            return false;
        };
        let link = want.mode == 0o120000;
        if !(link && kind.is_symlink() || !link && kind.is_file()) {
            return false;
        }
        if !link {
            self.out.bytes = self
                .out
                .bytes
                .saturating_add(u64::from(seen.file_size).div_ceil(4096) * 4096);
        }
        // (`IndexEntry` is not `Clone`.)
        self.kept[at] = Some(IndexEntry {
            path: rel.to_vec(),
            ..*seen
        });
        true
    }
}

/// Whether `seen` was recorded too close to its index's writing (at `from`) to be trusted.
fn racy(seen: &IndexEntry, from: Option<IndexTime>) -> bool {
    let Some(from) = from else {
        return false;
    };
    let no_nanos = seen.mtime.nanoseconds() == 0 && seen.ctime.nanoseconds() == 0;
    if no_nanos {
        seen.mtime.seconds() >= from.seconds()
    } else {
        (seen.mtime.seconds(), seen.mtime.nanoseconds()) >= (from.seconds(), from.nanoseconds())
    }
}

/// Whether the stat data of `seen` (recorded by an index) matches `now` (just read): the file
/// has not been written, renamed over, or had its mode changed since. An index written without
/// nanoseconds is compared by seconds, and one without the device (libgit2 records 0 for the
/// files it stages; git does not compare it by default) without it.
fn same_stat(seen: &IndexEntry, now: &IndexEntry) -> bool {
    let no_nanos = seen.mtime.nanoseconds() == 0 && seen.ctime.nanoseconds() == 0;
    let time = |a: IndexTime, b: IndexTime| {
        a.seconds() == b.seconds() && (no_nanos || a.nanoseconds() == b.nanoseconds())
    };
    time(seen.mtime, now.mtime)
        && time(seen.ctime, now.ctime)
        && seen.ino == now.ino
        && (seen.dev == 0 || seen.dev == now.dev)
        && seen.uid == now.uid
        && seen.gid == now.gid
        && seen.file_size == now.file_size
        && seen.mode == now.mode
}

/// The blob id of the file (raw bytes) or symbolic link (its target) at `path`.
fn content_id(path: &Path, mode: u32) -> Result<Option<Oid>, GitError> {
    let io = |e| error::io("tidy worktree", path, e);
    if mode == 0o120000 {
        let target = std::fs::read_link(path).map_err(io)?;
        return Ok(Oid::hash_object(ObjectType::Blob, target.as_os_str().as_bytes()).ok());
    }
    Ok(Oid::hash_file(ObjectType::Blob, path).ok())
}

/// The disk space a file or folder with this metadata takes.
fn disk_bytes_of(meta: &std::fs::Metadata) -> u64 {
    meta.blocks().saturating_mul(512)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(id: Oid, mode: u32) -> Want {
        Want {
            id,
            mode,
            seen: None,
        }
    }

    fn blob(text: &str) -> Oid {
        Oid::hash_object(ObjectType::Blob, text.as_bytes()).expect("hash")
    }

    #[test]
    fn wanted_files_are_found_whatever_order_they_came_in_and_kept_in_path_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        // Out of path order, with a replaced path, and names that sort around `a/`.
        let paths = ["b/x", "a", "a.txt", "a/b/c", "a-b", "b/x"];
        let mut wanted = Wanted::default();
        // `a` is wanted but missing (a folder of that name is there).
        for path in paths.iter().filter(|p| **p != "a") {
            let file = root.join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(&file, path).expect("write");
        }
        std::fs::create_dir_all(root.join("c")).expect("mkdir");
        std::fs::write(root.join("c/stray"), "x").expect("write");
        for path in paths {
            wanted.insert(path.as_bytes().to_vec(), want(blob(path), 0o100644));
        }
        assert_eq!(wanted.len(), 5);
        let all = wanted.all();
        assert!(wanted.get(all.clone(), 0, b"a/b/c").is_some());
        assert!(wanted.get(all.clone(), 0, b"a/b").is_none());
        let folder = |dir: &str| wanted.folder(all.clone(), &mut dir.as_bytes().to_vec());
        assert_eq!(
            (folder("a"), folder("a/b"), folder("b")),
            (3..4, 3..4, 4..5)
        );
        assert!(folder("a-b").is_empty() && folder("c").is_empty() && folder("a/b/c").is_empty());
        // Within a folder's places, by the name after its path.
        assert_eq!(
            wanted.get(folder("b"), 2, b"b/x").map(|(at, _)| at),
            Some(4)
        );
        let tidied = tidy(root, &wanted, None).expect("tidy");
        let kept: Vec<&[u8]> = tidied.kept.iter().map(|e| e.path.as_slice()).collect();
        let sorted: Vec<&[u8]> = vec![b"a-b", b"a.txt", b"a/b/c", b"b/x"];
        assert_eq!(kept, sorted);
        assert!(
            !root.join("c").exists(),
            "a folder no wanted file lies in is deleted"
        );
    }

    #[test]
    fn keeps_wanted_content_and_deletes_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
        std::fs::create_dir_all(root.join("empty")).expect("mkdir");
        std::fs::create_dir_all(root.join("other")).expect("mkdir");
        std::fs::write(root.join("a/b/keep"), "keep").expect("write");
        std::fs::write(root.join("a/b/changed"), "new").expect("write");
        std::fs::write(root.join("a/extra"), "x").expect("write");
        std::fs::write(root.join("other/file"), "x").expect("write");
        std::fs::write(root.join(".git"), "gitdir: x").expect("write");
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::write(outside.path().join("precious"), "p").expect("write");
        std::os::unix::fs::symlink(outside.path(), root.join("a/link")).expect("symlink");
        let mut wanted = Wanted::default();
        wanted.insert(b"a/b/keep".to_vec(), want(blob("keep"), 0o100644));
        wanted.insert(b"a/b/changed".to_vec(), want(blob("old"), 0o100644));
        wanted.insert(b"a/link/precious".to_vec(), want(blob("p"), 0o100644));
        wanted.insert(b"empty/gone".to_vec(), want(blob("g"), 0o100644));
        let tidied = tidy(root, &wanted, None).expect("tidy");
        let kept: Vec<&[u8]> = tidied.kept.iter().map(|e| e.path.as_slice()).collect();
        assert_eq!(kept, vec![b"a/b/keep".as_slice()]);
        assert!(root.join("a/b/keep").exists() && root.join(".git").exists());
        for gone in ["a/b/changed", "a/extra", "a/link", "other", "empty"] {
            assert!(
                std::fs::symlink_metadata(root.join(gone)).is_err(),
                "{gone}"
            );
        }
        assert!(
            outside.path().join("precious").exists(),
            "a link is never followed"
        );
    }

    #[test]
    fn stat_data_without_a_device_is_trusted_and_reported_exact() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("f");
        std::fs::write(&file, "x").expect("write");
        let meta = std::fs::symlink_metadata(&file).expect("stat");
        // The stat data libgit2 records for a file it stages has no device. Trusted, it keeps
        // the file without reading it: here the blob differs, which only hashing would see.
        let other = blob("y");
        let seen = || {
            let mut seen = stat_entry(b"f", other, 0o100644, &meta);
            seen.dev = 0;
            seen
        };
        let mut wanted = Wanted::default();
        let with = |seen: IndexEntry| Want {
            id: other,
            mode: 0o100644,
            seen: Some(seen),
        };
        wanted.insert(b"f".to_vec(), with(seen()));
        let tidied = tidy(dir.path(), &wanted, None).expect("tidy");
        assert_eq!(tidied.kept.len(), 1, "trusted by its stat data");
        assert!(tidied.exact);

        // Other stat data (a later write) is not trusted: the file is hashed, and goes.
        let mut later = seen();
        later.mtime = IndexTime::new(later.mtime.seconds() + 1, 0);
        let mut wanted = Wanted::default();
        wanted.insert(b"f".to_vec(), with(later));
        let tidied = tidy(dir.path(), &wanted, None).expect("tidy");
        assert!(tidied.kept.is_empty() && !file.exists());
    }

    #[test]
    fn a_file_kept_by_its_content_is_not_exact() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f"), "x").expect("write");
        let meta = std::fs::symlink_metadata(dir.path().join("f")).expect("stat");
        let mut seen = stat_entry(b"f", blob("x"), 0o100644, &meta);
        seen.ino += 1; // recorded for another file: the content decides
        let mut wanted = Wanted::default();
        wanted.insert(
            b"f".to_vec(),
            Want {
                id: blob("x"),
                mode: 0o100644,
                seen: Some(seen),
            },
        );
        let tidied = tidy(dir.path(), &wanted, None).expect("tidy");
        assert_eq!(tidied.kept.len(), 1);
        assert!(!tidied.exact, "its index entry no longer matches");
    }

    #[test]
    fn a_wrong_executable_bit_is_not_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("run");
        std::fs::write(&file, "x").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let mut wanted = Wanted::default();
        wanted.insert(b"run".to_vec(), want(blob("x"), 0o100644));
        assert!(tidy(dir.path(), &wanted, None)
            .expect("tidy")
            .kept
            .is_empty());
        assert!(!file.exists());
    }

    #[test]
    fn by_name_a_file_of_the_wanted_kind_stays_as_recorded_and_the_rest_goes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("d")).expect("mkdir");
        for (path, text) in [("d/edited", "not what was recorded"), ("plain", "p")] {
            std::fs::write(root.join(path), text).expect("write");
        }
        std::fs::write(root.join("untracked"), "u").expect("write");
        std::fs::write(root.join("no-record"), "n").expect("write");
        std::os::unix::fs::symlink("plain", root.join("link")).expect("link");
        std::os::unix::fs::symlink("plain", root.join("was-a-file")).expect("link");
        // Recorded stat data that matches nothing on disk: by name, it is not read.
        let meta = std::fs::symlink_metadata(root.join("plain")).expect("stat");
        let recorded = |size: u32| {
            let mut seen = stat_entry(b"", blob("recorded"), 0o100644, &meta);
            seen.ino = 7;
            seen.file_size = size;
            Some(seen)
        };
        let mut wanted = Wanted::default();
        let mut add = |path: &str, mode: u32, seen: Option<IndexEntry>| {
            let id = blob("recorded");
            wanted.insert(path.as_bytes().to_vec(), Want { id, mode, seen });
        };
        add("d/edited", 0o100644, recorded(5000));
        add("plain", 0o100755, recorded(1));
        add("link", 0o120000, recorded(5));
        add("was-a-file", 0o100644, recorded(1));
        add("no-record", 0o100644, None);
        let tidied = tidy_names(root, &wanted).expect("tidy");

        let mut kept: Vec<&[u8]> = tidied.kept.iter().map(|e| e.path.as_slice()).collect();
        kept.sort();
        assert_eq!(kept, [&b"d/edited"[..], b"link", b"plain"]);
        assert!(
            tidied.kept.iter().all(|e| e.ino == 7),
            "the recorded stat data"
        );
        assert!(tidied.exact);
        for gone in ["untracked", "no-record", "was-a-file"] {
            assert!(
                std::fs::symlink_metadata(root.join(gone)).is_err(),
                "{gone}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join("d/edited")).expect("read"),
            "not what was recorded",
            "kept unread: the take checks it"
        );
        // Files count as their recorded size in 4 KiB blocks, links as nothing, folders as
        // they take.
        let folder = std::fs::metadata(root.join("d")).expect("stat");
        assert_eq!(tidied.bytes, 8192 + 4096 + disk_bytes_of(&folder));
    }
}
