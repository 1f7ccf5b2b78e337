//! A session's CLI state folder as a gzipped tarball: [`pack_dir`] and [`unpack_into`].
//!
//! What an archive keeps: the relative paths, regular files with their bytes, modes and
//! modification times, folders with their modes, and symlinks as symlinks (their targets as
//! written). Sockets, pipes and devices (a CLI's live IPC endpoints) are left out. A symlink
//! that points outside the folder is refused on both sides, so every archive `pack_dir` makes
//! unpacks, and no archive can make `unpack_into` write or point outside its folder.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use tar::{Archive, Builder, EntryType, Header, HeaderMode};

use super::BlobError;

/// Packs the folder `dir` (not following symlinks) into a gzipped tarball whose entries are
/// relative to `dir`.
///
/// The folder should be quiescent (its CLI not running): a file changing while it is read is
/// archived as it was when read. Errors name the path that failed; a symlink whose target
/// lies outside `dir` (absolute, or climbing above it with `..`) is an
/// [`UnsafeEntry`](BlobError::UnsafeEntry) error.
///
/// ```
/// use orchestrator_storage::blob::{pack_dir, unpack_into};
///
/// let state = tempfile::tempdir()?;
/// std::fs::create_dir(state.path().join("sessions"))?;
/// std::fs::write(state.path().join("sessions/s1.json"), "{}")?;
/// let tarball = pack_dir(state.path())?;
///
/// let elsewhere = tempfile::tempdir()?;
/// let restored = elsewhere.path().join("state");
/// unpack_into(&tarball, &restored)?;
/// assert_eq!(std::fs::read_to_string(restored.join("sessions/s1.json"))?, "{}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn pack_dir(dir: &Path) -> Result<Vec<u8>, BlobError> {
    let meta = fs::metadata(dir).map_err(BlobError::io("read", dir))?;
    if !meta.is_dir() {
        return Err(BlobError::Archive {
            path: dir.to_path_buf(),
            message: "not a folder".into(),
        });
    }
    let mut builder = Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    builder.follow_symlinks(false);
    // `./`, the folder itself, for its mode (CLI state folders are often private).
    let mut header = Header::new_gnu();
    header.set_metadata_in_mode(&meta, HeaderMode::Complete);
    header.set_entry_type(EntryType::Directory);
    header.set_size(0);
    if let Some(gnu) = header.as_gnu_mut() {
        gnu.name[..2].copy_from_slice(b"./");
    }
    header.set_cksum();
    builder
        .append(&header, io::empty())
        .map_err(BlobError::io("write the archive of", dir))?;
    add_children(&mut builder, dir, Path::new(""), dir)?;
    let finished = builder
        .into_inner()
        .and_then(GzEncoder::finish)
        .map_err(BlobError::io("write the archive of", dir))?;
    Ok(finished)
}

/// Adds the entries below `root/rel` to `builder`, sorted by name (the same folder always
/// packs to the same entry order).
fn add_children(
    builder: &mut Builder<GzEncoder<Vec<u8>>>,
    root: &Path,
    rel: &Path,
    dir: &Path,
) -> Result<(), BlobError> {
    let mut children: Vec<fs::DirEntry> = fs::read_dir(dir)
        .and_then(|entries| entries.collect())
        .map_err(BlobError::io("list", dir))?;
    children.sort_by_key(fs::DirEntry::file_name);
    for child in children {
        let path = child.path();
        let rel = rel.join(child.file_name());
        let meta = fs::symlink_metadata(&path).map_err(BlobError::io("read", &path))?;
        let added = |e: io::Error| BlobError::Archive {
            path: root.to_path_buf(),
            message: format!("could not add {}: {e}", rel.display()),
        };
        let mut header = Header::new_gnu();
        header.set_metadata_in_mode(&meta, HeaderMode::Complete);
        let kind = meta.file_type();
        if kind.is_dir() {
            header.set_size(0);
            builder
                .append_data(&mut header, &rel, io::empty())
                .map_err(added)?;
            add_children(builder, root, &rel, &path)?;
        } else if kind.is_file() {
            let bytes = fs::read(&path).map_err(BlobError::io("read", &path))?;
            header.set_size(bytes.len() as u64);
            builder
                .append_data(&mut header, &rel, bytes.as_slice())
                .map_err(added)?;
        } else if kind.is_symlink() {
            let target = fs::read_link(&path).map_err(BlobError::io("read the link", &path))?;
            check_link(root, &rel, &target)?;
            header.set_size(0);
            builder
                .append_link(&mut header, &rel, &target)
                .map_err(added)?;
        } else {
            tracing::debug!(path = %path.display(), "left a socket, pipe or device out of an archive");
        }
    }
    Ok(())
}

/// Unpacks a tarball made by [`pack_dir`] into `dir`, which must be missing or empty (its
/// parent is created if missing).
///
/// All or nothing: the entries are unpacked into a fresh folder beside `dir` and renamed
/// onto it at the end, so on any error (a damaged or truncated archive, a refused entry)
/// `dir` is left as it was and the scratch folder is removed. Refused, as
/// [`UnsafeEntry`](BlobError::UnsafeEntry) errors: absolute paths, `..` components, entries
/// below a symlink of the archive, symlinks pointing outside `dir`, hard links and special
/// files.
///
/// ```
/// use orchestrator_storage::blob::{pack_dir, unpack_into};
///
/// let state = tempfile::tempdir()?;
/// std::fs::write(state.path().join("config"), "x")?;
/// let tarball = pack_dir(state.path())?;
///
/// let target = tempfile::tempdir()?;
/// let restored = target.path().join("state");
/// assert!(unpack_into(&tarball[..tarball.len() / 2], &restored).is_err());
/// assert!(!restored.exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn unpack_into(bytes: &[u8], dir: &Path) -> Result<(), BlobError> {
    let refuse_target = |message: &str| BlobError::Archive {
        path: dir.to_path_buf(),
        message: message.into(),
    };
    let name = dir
        .file_name()
        .ok_or_else(|| refuse_target("the target names no folder"))?;
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(refuse_target(
                    "the target folder is not empty (remove it first)",
                ));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(BlobError::io("read", dir)(e)),
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(BlobError::io("create", &parent))?;
    let scratch = parent.join(format!(
        ".{}.unpack-{}",
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    create_private_dir(&scratch)?;
    let result = unpack_all(bytes, dir, &scratch).and_then(|()| {
        fs::rename(&scratch, dir).map_err(BlobError::io("move the unpacked archive to", dir))
    });
    if result.is_err() {
        // `remove_dir_all` does not follow symlinks: it removes only the scratch folder.
        if let Err(e) = fs::remove_dir_all(&scratch) {
            tracing::warn!(path = %scratch.display(), error = %e, "could not remove a scratch folder");
        }
    }
    result
}

/// Unpacks every entry into `scratch`, checking each; `dir` is only named in errors.
fn unpack_all(bytes: &[u8], dir: &Path, scratch: &Path) -> Result<(), BlobError> {
    let damaged = |e: io::Error| BlobError::Archive {
        path: dir.to_path_buf(),
        message: format!("damaged or truncated archive: {e}"),
    };
    let mut archive = Archive::new(GzDecoder::new(bytes));
    archive.set_overwrite(false);
    archive.set_preserve_permissions(false);
    archive.set_preserve_ownerships(false);
    let mut links: HashSet<PathBuf> = HashSet::new();
    let mut folders: Vec<(PathBuf, u32)> = Vec::new();
    for entry in archive.entries().map_err(damaged)? {
        let mut entry = entry.map_err(damaged)?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let refuse = |reason: &str| BlobError::UnsafeEntry {
            path: dir.to_path_buf(),
            entry: raw.clone(),
            reason: reason.into(),
        };
        let rel = relative(&entry.path().map_err(damaged)?)
            .ok_or_else(|| refuse("an absolute path or a '..' component would leave the folder"))?;
        let kind = entry.header().entry_type();
        if rel.as_os_str().is_empty() {
            // `./`: the folder itself, whose mode is applied last.
            if kind == EntryType::Directory {
                folders.push((
                    scratch.to_path_buf(),
                    entry.header().mode().unwrap_or(0o700),
                ));
            }
            continue;
        }
        if rel.ancestors().skip(1).any(|a| links.contains(a)) {
            return Err(refuse("it lies below a symlink of the archive"));
        }
        match kind {
            EntryType::Directory => {
                let path = scratch.join(&rel);
                fs::create_dir_all(&path).map_err(BlobError::io("create", &path))?;
                // Applied at the end: a read-only folder must still take its files.
                folders.push((path, entry.header().mode().unwrap_or(0o755)));
                continue;
            }
            EntryType::Regular | EntryType::Continuous => {}
            EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(damaged)?
                    .ok_or_else(|| refuse("a symlink without a target"))?;
                check_link(dir, &rel, &target)?;
                links.insert(rel.clone());
            }
            EntryType::Link => return Err(refuse("hard links are not supported")),
            _ => return Err(refuse("only files, folders and symlinks are supported")),
        }
        let unpacked = entry.unpack_in(scratch).map_err(|e| BlobError::Archive {
            path: dir.to_path_buf(),
            message: format!("could not unpack {raw:?}: {e}"),
        })?;
        if !unpacked {
            return Err(refuse("it would leave the folder"));
        }
    }
    // Read to the end, so that the gzip trailer's checksum and length are checked too.
    io::copy(&mut archive.into_inner(), &mut io::sink()).map_err(damaged)?;
    // Deepest first, the folder itself last: a read-only folder still takes its files.
    for (path, mode) in folders.iter().rev() {
        set_mode(path, *mode)?;
    }
    Ok(())
}

/// `path` without `.` components, `None` if it is absolute or has a `..` component.
fn relative(path: &Path) -> Option<PathBuf> {
    let mut rel = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => rel.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(rel)
}

/// Refuses the symlink at `rel` (relative to the folder `root`) unless `target` stays inside
/// the folder however the links on its way resolve: it must be relative, with its `..`
/// components all leading and not climbing above the folder. The leading `..` climb real
/// folders (no entry lies below a link), and every link it then passes through obeys the same
/// rule, so the whole chain stays inside. (`a/../b` is refused: `a` could be a link.)
fn check_link(root: &Path, rel: &Path, target: &Path) -> Result<(), BlobError> {
    let refuse = |reason: &str| BlobError::UnsafeEntry {
        path: root.to_path_buf(),
        entry: rel.display().to_string(),
        reason: format!("symlink to {:?}: {reason}", target.display().to_string()),
    };
    if target.as_os_str().is_empty() {
        return Err(refuse("an empty target"));
    }
    // How many folders the link's own folder lies below the root.
    let mut depth = rel.components().count().saturating_sub(1);
    let mut descended = false;
    for component in target.components() {
        match component {
            Component::Normal(_) => descended = true,
            Component::CurDir => {}
            Component::ParentDir if descended => {
                return Err(refuse("'..' after a name could climb out through a link"));
            }
            Component::ParentDir => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| refuse("it points outside the folder"))?;
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(refuse("absolute targets point outside the folder"));
            }
        }
    }
    Ok(())
}

/// Creates `dir` readable by its owner only (until the archive's own mode is applied).
fn create_private_dir(dir: &Path) -> Result<(), BlobError> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(BlobError::io("create", dir))
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<(), BlobError> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o777))
        .map_err(BlobError::io("set the mode of", path))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> Result<(), BlobError> {
    Ok(())
}
