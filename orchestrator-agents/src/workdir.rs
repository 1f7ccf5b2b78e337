//! Where a spec runs: its `cwd`, which must stay inside the job's directory.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::error::Error;

/// Resolves a spec's `cwd` (relative to the job directory `dir`) to the directory to run in.
///
/// `None` or an empty `cwd` is `dir` itself. The result must stay inside `dir` twice over:
/// lexically (`..` may not climb out, an absolute path must lie inside) and on disk (after
/// following symlinks), and it must be an existing directory. Errors name the `cwd`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use orchestrator_agents::resolve_cwd;
/// let dir = std::env::temp_dir();
/// assert_eq!(resolve_cwd(&dir, None)?, dir);
/// assert_eq!(resolve_cwd(&dir, Some("."))?, dir);
/// let err = resolve_cwd(&dir, Some("../elsewhere")).unwrap_err();
/// assert!(err.to_string().contains("`../elsewhere`"));
/// # Ok(()) }
/// ```
pub fn resolve_cwd(dir: &Path, cwd: Option<&str>) -> Result<PathBuf, Error> {
    let real_dir = dir.canonicalize().map_err(|source| Error::CwdMissing {
        cwd: ".".to_owned(),
        path: dir.to_owned(),
        source,
    })?;
    let Some(cwd) = cwd.filter(|c| !c.is_empty()) else {
        return Ok(dir.to_owned());
    };
    let escapes = || Error::CwdEscapes {
        cwd: cwd.to_owned(),
        dir: dir.to_owned(),
    };
    let base = normalize(dir);
    let target = normalize(&dir.join(cwd));
    if !target.starts_with(&base) {
        return Err(escapes());
    }
    let missing = |source| Error::CwdMissing {
        cwd: cwd.to_owned(),
        path: target.clone(),
        source,
    };
    let real = target.canonicalize().map_err(missing)?;
    if !real.starts_with(&real_dir) {
        return Err(escapes());
    }
    if !real.is_dir() {
        return Err(missing(io::Error::new(
            io::ErrorKind::NotADirectory,
            "not a directory",
        )));
    }
    Ok(target)
}

/// Removes `.` and resolves `..` without touching the disk (`..` at the root stays at the root).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                Some(Component::ParentDir | Component::CurDir) | None => out.push(part),
            },
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/a/../../x")), PathBuf::from("/x"));
        assert_eq!(normalize(Path::new("a/../../x")), PathBuf::from("../x"));
        assert_eq!(normalize(Path::new("../../x")), PathBuf::from("../../x"));
    }
}
