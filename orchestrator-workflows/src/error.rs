//! The crate's one error type.

use std::path::PathBuf;

/// What went wrong loading, resolving or saving a team.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A Squad folder is missing or one of its files is malformed.
    #[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Squad {
        /// The folder or file.
        file: PathBuf,
        /// The line (1-based) in the file, when one is to blame.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// A preset file is malformed.
    #[error("{}: {message}", file.display())]
    PresetFile {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No preset has this name.
    #[error("no preset is named `{name}`; the presets are: {}", known.join(", "))]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The presets there are.
        known: Vec<String>,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
