//! Path checks: lexical (relative, no `..` climbing out) and, when the repository is known,
//! on disk (the file or folder exists inside it, symlinks resolved).

use std::path::Path;

use super::{Field, Validator};

/// What a path field must name when the repository is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum PathKind {
    File,
    Folder,
}

impl<'a> Validator<'a> {
    /// `instructionsFile` and `allowedFolders`: relative, inside the repository, and existing
    /// there (symlinks resolved) when the repository is known.
    pub(super) fn repo_path(&mut self, field: Field<'_>, path: &'a str, kind: PathKind) {
        let what = match kind {
            PathKind::File => "file",
            PathKind::Folder => "folder",
        };
        let message = match lexical_depth(path) {
            Err(PathProblem::Empty) => Some(format!(
                "must not be empty: give a {what} relative to the repository root"
            )),
            Err(PathProblem::Absolute) => Some(format!(
                "must be a {what} relative to the repository root; absolute paths are not allowed"
            )),
            Err(PathProblem::Escapes) => Some(format!(
                "climbs out of the repository with `..`; the {what} must be inside it"
            )),
            Ok(0) if kind == PathKind::File => Some(
                "names the repository root, not a file; give a file relative to the repository root"
                    .to_owned(),
            ),
            Ok(_) => self.check_on_disk(path, kind),
        };
        if let Some(message) = message {
            self.report(field, path, message);
        }
    }

    pub(super) fn check_on_disk(&mut self, path: &'a str, kind: PathKind) -> Option<String> {
        let root = self.repo.as_deref()?;
        if let Some(known) = self.fs_cache.get(&(path, kind)) {
            return known.clone();
        }
        let result = on_disk_problem(root, path, kind);
        self.fs_cache.insert((path, kind), result.clone());
        result
    }
}

/// Why a relative path is unusable, found without touching the file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PathProblem {
    Empty,
    Absolute,
    Escapes,
}

/// Depth of a relative path after lexical normalization (`a/b/..` is 1, `.` is 0), or why it
/// is not a path that stays inside its root. Both `/` and `\` separate components, so a plan
/// written on Windows is judged the same way everywhere.
pub(super) fn lexical_depth(path: &str) -> Result<usize, PathProblem> {
    if path.trim().is_empty() {
        return Err(PathProblem::Empty);
    }
    if is_absolute_anywhere(path) {
        return Err(PathProblem::Absolute);
    }
    let mut depth = 0usize;
    for component in path.split(['/', '\\']) {
        match component {
            "" | "." => {}
            ".." => depth = depth.checked_sub(1).ok_or(PathProblem::Escapes)?,
            _ => depth += 1,
        }
    }
    Ok(depth)
}

/// Absolute on Unix or Windows (`/x`, `\x`, `\\server\share`, `C:\x`, `C:x`), or home-relative
/// (`~`, `~/x`), which a shell or agent would expand to somewhere outside.
pub(super) fn is_absolute_anywhere(path: &str) -> bool {
    let bytes = path.as_bytes();
    matches!(bytes.first(), Some(b'/' | b'\\'))
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
        || path == "~"
        || path.starts_with("~/")
        || path.starts_with("~\\")
}

/// Whether `path` (relative) exists under `root` as a `kind`, without leaving it through a
/// symlink.
pub(super) fn on_disk_problem(root: &Path, path: &str, kind: PathKind) -> Option<String> {
    let joined = root.join(path);
    let real = match joined.canonicalize() {
        Ok(real) => real,
        Err(_) => {
            return Some(format!(
                "does not exist in the repository (looked for {})",
                joined.display()
            ))
        }
    };
    if !real.starts_with(root) {
        return Some(format!(
            "resolves to {} through a symlink, outside the repository",
            real.display()
        ));
    }
    match kind {
        PathKind::File if !real.is_file() => Some("is not a file".to_owned()),
        PathKind::Folder if !real.is_dir() => Some("is not a folder".to_owned()),
        _ => None,
    }
}
