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
    let dir_missing = |source| Error::CwdMissing {
        cwd: ".".to_owned(),
        path: dir.to_owned(),
        source,
    };
    let Some(cwd) = cwd.filter(|c| !c.is_empty()) else {
        // Only whether it exists: this runs for every job, and resolving the whole path
        // costs a system call per component.
        std::fs::metadata(dir).map_err(dir_missing)?;
        return Ok(dir.to_owned());
    };
    let real_dir = dir.canonicalize().map_err(dir_missing)?;
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

    #[test]
    fn a_missing_directory_or_cwd_is_named_and_escapes_are_refused(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("wt");
        std::fs::create_dir_all(dir.join("sub"))?;
        std::fs::write(dir.join("file"), "x")?;
        assert_eq!(resolve_cwd(&dir, None)?, dir);
        assert_eq!(resolve_cwd(&dir, Some("sub/../sub"))?, dir.join("sub"));

        let gone = tmp.path().join("gone");
        for cwd in [None, Some("sub")] {
            let err = resolve_cwd(&gone, cwd)
                .err()
                .ok_or("a missing directory is refused")?;
            assert!(
                matches!(&err, Error::CwdMissing { path, .. } if *path == gone),
                "{err}"
            );
        }
        let err = resolve_cwd(&dir, Some("file"))
            .err()
            .ok_or("a file is no cwd")?;
        assert!(matches!(err, Error::CwdMissing { .. }), "{err}");
        let err = resolve_cwd(&dir, Some("../")).err().ok_or("escapes")?;
        assert!(matches!(err, Error::CwdEscapes { .. }), "{err}");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(tmp.path(), dir.join("out"))?;
            let err = resolve_cwd(&dir, Some("out"))
                .err()
                .ok_or("escapes by a link")?;
            assert!(matches!(err, Error::CwdEscapes { .. }), "{err}");
        }
        Ok(())
    }
}
