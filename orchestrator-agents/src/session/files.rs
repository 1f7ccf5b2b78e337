//! A session's own files outside its worktree, `<files>/<id>/`: the turn logs and the
//! conversation state after each turn (`turns/<n>/`, a copy of the CLI's state folder), which
//! `revert` and `fork` restore.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The files of one session.
#[derive(Debug, Clone)]
pub(crate) struct SessionFiles {
    dir: PathBuf,
}

impl SessionFiles {
    pub(crate) fn new(root: &Path, id: &str) -> Self {
        SessionFiles { dir: root.join(id) }
    }

    /// The log of turn `n`.
    pub(crate) fn turn_log(&self, n: u32) -> PathBuf {
        self.dir.join(format!("turn-{n}.log"))
    }

    fn conversation(&self, n: u32) -> PathBuf {
        self.dir.join("turns").join(n.to_string())
    }

    /// Keeps a copy of the CLI's `state` folder as the conversation after turn `n`.
    pub(crate) fn save_conversation(&self, n: u32, state: &Path) -> Result<(), Error> {
        let to = self.conversation(n);
        remove_dir(&to)?;
        if state.is_dir() {
            copy_dir(state, &to).map_err(|e| store(&to, e))?;
        }
        Ok(())
    }

    /// Makes the CLI's `state` folder what it was after turn `n` (turn 0: no state, a new
    /// conversation).
    pub(crate) fn restore_conversation(&self, n: u32, state: &Path) -> Result<(), Error> {
        remove_dir(state)?;
        let from = self.conversation(n);
        if n > 0 && from.is_dir() {
            copy_dir(&from, state).map_err(|e| store(state, e))?;
        }
        Ok(())
    }

    /// Copies the conversation after turn `n` to `other`'s turn `n` (a fork).
    pub(crate) fn copy_conversation(&self, n: u32, other: &SessionFiles) -> Result<(), Error> {
        let from = self.conversation(n);
        let to = other.conversation(n);
        if from.is_dir() {
            copy_dir(&from, &to).map_err(|e| store(&to, e))?;
        }
        Ok(())
    }

    /// Forgets the conversations after turn `n` (a revert).
    pub(crate) fn drop_after(&self, n: u32) -> Result<(), Error> {
        let turns = self.dir.join("turns");
        let Ok(entries) = std::fs::read_dir(&turns) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let later = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<u32>().ok())
                .is_some_and(|k| k > n);
            if later {
                remove_dir(&entry.path())?;
            }
        }
        Ok(())
    }
}

fn store(path: &Path, source: io::Error) -> Error {
    Error::SessionStore {
        path: path.to_path_buf(),
        source,
    }
}

fn remove_dir(dir: &Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(store(dir, e)),
    }
}

/// Makes a CLI state folder copied from a session in worktree `from` usable in worktree `to`
/// (a fork): the CLIs file sessions under their working directory and record it in them
/// (Claude Code: `projects/<the path, every other character than a letter or digit as
/// `-`>/<session>.jsonl` with `"cwd"` in each line), and resuming one filed under the old
/// path would work in the old worktree. Every file and folder name holding the old path in
/// either spelling is renamed, and every text file's mentions of it are rewritten.
pub(crate) fn relocate(state: &Path, from: &Path, to: &Path) -> io::Result<()> {
    let (from_text, to_text) = (from.display().to_string(), to.display().to_string());
    let (from_name, to_name) = (escaped(&from_text), escaped(&to_text));
    relocate_in(state, &[(&from_text, &to_text), (&from_name, &to_name)])
}

/// A path as Claude Code spells it in folder names.
fn escaped(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Files larger than this are not rewritten (no CLI keeps its session index that big).
const MAX_REWRITE: u64 = 64 * 1024 * 1024;

fn relocate_in(dir: &Path, pairs: &[(&str, &str); 2]) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let mut path = entry.path();
        if let Some(name) = entry.file_name().to_str() {
            let renamed = pairs
                .iter()
                .fold(name.to_owned(), |n, (old, new)| n.replace(old, new));
            if renamed != name {
                let target = dir.join(&renamed);
                std::fs::rename(&path, &target)?;
                path = target;
            }
        }
        if kind.is_dir() {
            relocate_in(&path, pairs)?;
        } else if kind.is_file() && entry.metadata()?.len() <= MAX_REWRITE {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue; // not text
            };
            if text.contains(pairs[0].0) {
                std::fs::write(&path, text.replace(pairs[0].0, pairs[0].1))?;
            }
        }
    }
    Ok(())
}

/// Copies the folder `from` to `to` (files, folders and symbolic links as links; sockets and
/// other special files are left out).
pub(crate) fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        } else if kind.is_symlink() {
            #[cfg(unix)]
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        }
    }
    Ok(())
}
