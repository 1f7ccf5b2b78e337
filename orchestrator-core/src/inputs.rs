//! What a job is handed of the jobs it depends on (SPEC §12): their outputs and commits, as
//! the file [`INPUTS_VAR`] names and as a section of an agent's instructions.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

/// The environment variable naming a job's inputs file:
/// `{"<producerId>": {"output": "..." | null, "commit": "<sha>" | null}}`, one entry per
/// dependency.
pub const INPUTS_VAR: &str = "ORCHESTRATOR_INPUTS";

/// How much of each dependency's output an agent's instructions quote (16 KiB); the file has
/// all of it.
pub const SECTION_BYTES_PER_JOB: usize = 16 * 1024;

/// The heading of the instructions section with the dependencies' results.
pub const SECTION_HEADING: &str = "## Results of the jobs this one depends on";

/// One dependency's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInput {
    /// The dependency's producerId.
    pub producer_id: String,
    /// Its output (an agent's final reply, a shell or process job's stdout), if it had one.
    pub output: Option<String>,
    /// Its commit, if it made one (worktree isolation).
    pub commit: Option<String>,
}

/// The results of the jobs a job depends on, in the job's dependency order, and the file that
/// holds them once the engine has written it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inputs {
    /// One entry per dependency.
    pub jobs: Vec<JobInput>,
    /// The inputs file ([`INPUTS_VAR`]), once written.
    pub file: Option<PathBuf>,
}

impl Inputs {
    /// The inputs file's document.
    ///
    /// ```
    /// use orchestrator_core::inputs::{Inputs, JobInput};
    /// let inputs = Inputs {
    ///     jobs: vec![JobInput { producer_id: "count".into(), output: Some("42".into()), commit: None }],
    ///     file: None,
    /// };
    /// assert_eq!(inputs.to_json()["count"]["output"], "42");
    /// assert!(inputs.to_json()["count"]["commit"].is_null());
    /// ```
    pub fn to_json(&self) -> Value {
        let mut doc = Map::new();
        for job in &self.jobs {
            doc.insert(
                job.producer_id.clone(),
                json!({"output": job.output, "commit": job.commit}),
            );
        }
        Value::Object(doc)
    }

    /// Writes the inputs file for node `node_id` under `dir` (the job's worktree, or the
    /// plan's folder with `isolation: none`): `<dir>/.orchestrator/inputs/<node id>.json`,
    /// a folder git is told to ignore. Replaced whole (written aside, then renamed).
    pub fn write(&mut self, dir: &Path, node_id: &str) -> std::io::Result<&Path> {
        let folder = dir.join(".orchestrator").join("inputs");
        std::fs::create_dir_all(&folder)?;
        let file = folder.join(format!("{node_id}.json"));
        let aside = folder.join(format!(".{node_id}.json.tmp"));
        let text = serde_json::to_vec_pretty(&self.to_json()).map_err(std::io::Error::other)?;
        std::fs::write(&aside, text)?;
        std::fs::rename(&aside, &file)?;
        Ok(self.file.insert(file))
    }

    /// The section of an agent's instructions that quotes the dependencies' outputs (each cut
    /// to its first [`SECTION_BYTES_PER_JOB`], pointing at the file for the rest) and names
    /// their commits; `None` when no dependency has either.
    ///
    /// ```
    /// use orchestrator_core::inputs::{Inputs, JobInput};
    /// let inputs = Inputs {
    ///     jobs: vec![JobInput { producer_id: "count".into(), output: Some("42 files".into()), commit: Some("abc123".into()) }],
    ///     file: None,
    /// };
    /// let section = inputs.section().unwrap();
    /// assert!(section.starts_with("## Results of the jobs this one depends on"));
    /// assert!(section.contains("### `count` (commit abc123)\n\n42 files\n"));
    /// ```
    pub fn section(&self) -> Option<String> {
        if self
            .jobs
            .iter()
            .all(|j| j.output.is_none() && j.commit.is_none())
        {
            return None;
        }
        let mut text = format!("{SECTION_HEADING}\n");
        if let Some(file) = &self.file {
            text.push_str(&format!(
                "\nAll of them, whole, are in the JSON file {} (also named by ${INPUTS_VAR}).\n",
                file.display()
            ));
        }
        for job in &self.jobs {
            text.push_str(&format!("\n### `{}`", job.producer_id));
            if let Some(commit) = &job.commit {
                text.push_str(&format!(" (commit {commit})"));
            }
            text.push_str("\n\n");
            match job.output.as_deref() {
                None => text.push_str("(no output)\n"),
                Some(output) => {
                    let (quoted, cut) = head(output, SECTION_BYTES_PER_JOB);
                    text.push_str(quoted);
                    if !quoted.ends_with('\n') {
                        text.push('\n');
                    }
                    if cut > 0 {
                        text.push_str(&format!(
                            "[… {cut} more bytes: see the inputs file{}]\n",
                            self.file
                                .as_ref()
                                .map(|f| format!(" {}", f.display()))
                                .unwrap_or_default()
                        ));
                    }
                }
            }
        }
        Some(text)
    }
}

/// The first `max` bytes of `text` (cut at a character boundary) and how many bytes were cut.
pub(crate) fn head(text: &str, max: usize) -> (&str, usize) {
    if text.len() <= max {
        return (text, 0);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(id: &str, output: Option<&str>, commit: Option<&str>) -> JobInput {
        JobInput {
            producer_id: id.into(),
            output: output.map(Into::into),
            commit: commit.map(Into::into),
        }
    }

    #[test]
    fn long_outputs_are_cut_at_a_character_and_point_at_the_file() {
        let long = "é".repeat(SECTION_BYTES_PER_JOB); // 2 bytes each
        let mut inputs = Inputs {
            jobs: vec![
                input("big", Some(&long), None),
                input("none", None, Some("c1")),
            ],
            file: None,
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let file = inputs.write(dir.path(), "n1").expect("written").to_owned();
        let section = inputs.section().expect("a section");
        assert!(section.contains(&format!(
            "[… {} more bytes: see the inputs file {}]",
            SECTION_BYTES_PER_JOB,
            file.display()
        )));
        assert!(section.contains("### `none` (commit c1)\n\n(no output)\n"));
        let doc: Value =
            serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("json");
        assert_eq!(
            doc["big"]["output"].as_str().map(str::len),
            Some(long.len())
        );
        assert_eq!(doc["none"]["commit"], "c1");
    }

    #[test]
    fn nothing_to_say_is_no_section() {
        let inputs = Inputs {
            jobs: vec![input("a", None, None)],
            file: None,
        };
        assert_eq!(inputs.section(), None);
        assert_eq!(Inputs::default().section(), None);
    }
}
