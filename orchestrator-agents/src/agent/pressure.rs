//! [`ContextPressure`]: when an agent's context is full enough to ask it for a checkpoint
//! (SPEC §12, seed 000's `completed_split`).

use std::path::{Path, PathBuf};

use orchestrator_core::composite::{MANIFEST_FILE, MAX_SUB_JOBS};

/// The environment variable that overrides the threshold of a run: a fraction in `(0, 1]`,
/// or `off` to ask for no checkpoint. Read from the environment the CLI runs in: the spec's
/// `env` over the plan/job `env` over the runner's extra env over the host's.
pub const THRESHOLD_VAR: &str = "ORCHESTRATOR_CONTEXT_THRESHOLD";

/// The words every checkpoint prompt starts with ([`checkpoint_prompt`]).
pub const CHECKPOINT_PREFIX: &str = "Context checkpoint:";

/// Context windows of the models the built-in CLIs run, by a part of the model name (first
/// match wins, case-insensitive). Claude Code's `[1m]` suffix selects the 1M-token beta.
const WINDOWS: &[(&str, u64)] = &[
    ("[1m]", 1_000_000),
    ("claude", 200_000),
    ("opus", 200_000),
    ("sonnet", 200_000),
    ("haiku", 200_000),
    ("gemini", 1_048_576),
    ("gpt-4.1", 1_047_576),
    // GPT-5's 400k window holds 272k of input and 128k of output.
    ("gpt-5", 272_000),
];

/// When an agent's context counts as full, and what the runner does then.
///
/// After each run of the work phase that ended well, the
/// [`AgentWorkRunner`](super::AgentWorkRunner) compares the largest context of the run's model
/// calls ([`Transcript::peak_context_tokens`](super::Transcript::peak_context_tokens): the
/// prompt tokens of one call, cached ones included, as the CLI reports them) with
/// [`threshold`](Self::threshold) × the model's context window
/// ([`window_for`](Self::window_for): a window set with [`window`](Self::window), else the
/// one the CLI reports, [`Transcript::context_window`](super::Transcript::context_window),
/// else the built-in table's). When the context crossed it, the job
/// [may split](orchestrator_core::WorkContext::may_split) and its worktree holds no
/// [`MANIFEST_FILE`] yet, the runner resumes the agent's session once more with a
/// [`checkpoint_prompt`]: stop, leave the work in the files (the engine commits them) and
/// write the remaining work to the manifest. Then it returns as usual, and the engine splits
/// the job into the manifest's items. A checkpoint run that fails is logged and leaves the job
/// unsplit (an invalid manifest it left is removed); so does a CLI that reported no session.
///
/// The check runs after the CLI exited, not mid-stream: stopping a CLI between two model
/// calls would cut a tool call in flight (its edits half done, its result never recorded in
/// the session), and Copilot's, Codex's and Gemini CLI's per-call usage is only read from
/// their session records once they exited. A run that
/// keeps going past the threshold may meet its CLI's own compaction first; the peak, not the
/// latest context, is compared, so a compacted run still checkpoints.
///
/// | CLI        | context of a call, from                                              | checkpoint |
/// |------------|----------------------------------------------------------------------|------------|
/// | Claude Code| each main-agent `assistant` event's `message.usage`: `input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens` | `--resume ID` |
/// | Copilot CLI| each `session.usage_record`'s `inputTokens` in the session's `events.jsonl` (after exit) | `--resume ID` |
/// | Codex      | each `token_count` event's `last_token_usage.input_tokens` in the session's rollout file (after exit; `--json` prints only usage summed over a turn's calls); window: its `model_context_window` | `exec resume ID` |
/// | Gemini CLI | each `gemini` message's `tokens.input` in the session's chat record (after exit; `stream-json` prints only totals) | `--resume ID` |
/// | generic    | not reported                                                         | none       |
///
/// ```
/// use orchestrator_agents::agent::{AgentWorkRunner, ContextPressure};
/// let pressure = ContextPressure::new()
///     .threshold(0.7)
///     .window("my-model", 64_000)
///     .default_window(100_000);
/// assert_eq!(pressure.window_for(Some("claude-sonnet-4-5"), None), 200_000);
/// assert_eq!(pressure.window_for(Some("claude-sonnet-4-5"), Some(1_000_000)), 1_000_000);
/// assert_eq!(pressure.window_for(Some("My-Model-2"), Some(1_000_000)), 64_000);
/// assert_eq!(pressure.window_for(None, None), 100_000);
/// assert_eq!(pressure.limit(Some("my-model"), None), Some(44_800));
/// let runner = AgentWorkRunner::new().context_pressure(pressure);
/// # let _ = runner;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ContextPressure {
    threshold: Option<f64>,
    windows: Vec<(String, u64)>,
    default_window: u64,
}

impl Default for ContextPressure {
    fn default() -> Self {
        ContextPressure {
            threshold: Some(Self::DEFAULT_THRESHOLD),
            windows: Vec::new(),
            default_window: Self::DEFAULT_WINDOW,
        }
    }
}

/// A context that crossed the threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Pressure {
    /// The largest context of the run, in tokens.
    pub tokens: u64,
    /// The model's context window, in tokens.
    pub window: u64,
    /// The threshold crossed, a fraction of the window.
    pub threshold: f64,
}

impl ContextPressure {
    /// The fraction of the window past which a checkpoint is asked for: 0.8.
    pub const DEFAULT_THRESHOLD: f64 = 0.8;
    /// The window of a model the table does not know: 128k tokens.
    pub const DEFAULT_WINDOW: u64 = 128_000;

    /// Threshold 0.8, the built-in windows (Claude models 200k, Gemini about 1M, GPT-5 272k
    /// of input), 128k for other models.
    pub fn new() -> Self {
        ContextPressure::default()
    }

    /// Never asks for a checkpoint (unless [`THRESHOLD_VAR`] sets a threshold).
    pub fn off() -> Self {
        ContextPressure {
            threshold: None,
            ..ContextPressure::default()
        }
    }

    /// Asks for a checkpoint once the context passes `fraction` of the window. A fraction
    /// outside `(0, 1]` (or NaN) turns the checks off.
    pub fn threshold(mut self, fraction: f64) -> Self {
        self.threshold = valid_fraction(fraction);
        self
    }

    /// The window of models whose name contains `pattern` (case-insensitive), before the
    /// built-in table; the latest call wins over earlier ones.
    pub fn window(mut self, pattern: impl Into<String>, tokens: u64) -> Self {
        self.windows
            .insert(0, (pattern.into().to_ascii_lowercase(), tokens));
        self
    }

    /// The window of models no pattern matches. Default: [`Self::DEFAULT_WINDOW`].
    pub fn default_window(mut self, tokens: u64) -> Self {
        self.default_window = tokens;
        self
    }

    /// The threshold, `None` when the checks are off.
    pub fn threshold_fraction(&self) -> Option<f64> {
        self.threshold
    }

    /// The context window of `model`: a window set for it with [`window`](Self::window),
    /// else the one its CLI `reported`, else the built-in table's, else the default window.
    pub fn window_for(&self, model: Option<&str>, reported: Option<u64>) -> u64 {
        let model = model.map(str::to_ascii_lowercase);
        let matching = |pattern: &str| model.as_deref().is_some_and(|m| m.contains(pattern));
        let configured = self.windows.iter().find(|(p, _)| matching(p)).map(|e| e.1);
        let known = || WINDOWS.iter().find(|(p, _)| matching(p)).map(|e| e.1);
        configured
            .or(reported.filter(|&w| w > 0))
            .or_else(known)
            .unwrap_or(self.default_window)
    }

    /// The context size, in tokens, past which a run of `model` (whose CLI `reported` its
    /// window, or not) asks for a checkpoint; `None` when the checks are off.
    pub fn limit(&self, model: Option<&str>, reported: Option<u64>) -> Option<u64> {
        let threshold = self.threshold?;
        Some((self.window_for(model, reported) as f64 * threshold).round() as u64)
    }

    /// Whether a run of `model` whose largest context was `peak` crossed the threshold (the
    /// window as [`window_for`](Self::window_for) says).
    pub fn crossed(
        &self,
        model: Option<&str>,
        reported: Option<u64>,
        peak: Option<u64>,
    ) -> Option<Pressure> {
        let (tokens, threshold) = (peak?, self.threshold?);
        let limit = self.limit(model, reported)?;
        (tokens >= limit).then(|| Pressure {
            tokens,
            window: self.window_for(model, reported),
            threshold,
        })
    }

    /// This configuration with the threshold of a [`THRESHOLD_VAR`] value, if there is one:
    /// a fraction in `(0, 1]` or `off`. An invalid value leaves it as it is, and the error
    /// says why (for the log).
    pub fn overridden(&self, value: Option<&str>) -> Result<ContextPressure, String> {
        let Some(value) = value.map(str::trim) else {
            return Ok(self.clone());
        };
        if value.eq_ignore_ascii_case("off") {
            return Ok(ContextPressure {
                threshold: None,
                ..self.clone()
            });
        }
        match value.parse::<f64>().ok().and_then(valid_fraction) {
            Some(threshold) => Ok(ContextPressure {
                threshold: Some(threshold),
                ..self.clone()
            }),
            None => Err(format!(
                "{THRESHOLD_VAR}={value} is neither a fraction in (0, 1] nor `off`; ignored"
            )),
        }
    }

    /// Whether a run should be asked for a checkpoint: the job `may_split`, no manifest is in
    /// `dir` yet, and the run of `model` (its window `reported` by the CLI, or not) crossed
    /// the threshold with its largest context `peak`.
    pub fn checkpoint_wanted(
        &self,
        may_split: bool,
        dir: &Path,
        model: Option<&str>,
        reported: Option<u64>,
        peak: Option<u64>,
    ) -> Option<Pressure> {
        if !may_split || dir.join(MANIFEST_FILE).exists() {
            return None;
        }
        self.crossed(model, reported, peak)
    }
}

/// The first file below `dir` (at most `depth` folders down, in name order) whose name
/// `matches`: where a CLI keeps a session's own record.
pub(crate) fn find_file(
    dir: &Path,
    depth: usize,
    matches: &dyn Fn(&str) -> bool,
) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in &entries {
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir && entry.file_name().to_str().is_some_and(matches) {
            return Some(path);
        }
    }
    if depth == 0 {
        return None;
    }
    entries
        .iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| find_file(&e.path(), depth - 1, matches))
}

fn valid_fraction(fraction: f64) -> Option<f64> {
    (fraction > 0.0 && fraction <= 1.0).then_some(fraction)
}

/// The prompt that asks an agent working in `dir` to checkpoint: stop, leave its work in the
/// files and write the remaining work to `dir/.orchestrator-split.json`. Starts with
/// [`CHECKPOINT_PREFIX`].
///
/// ```
/// use orchestrator_agents::agent::{checkpoint_prompt, ContextPressure};
/// let pressure = ContextPressure::new()
///     .crossed(Some("claude-opus-4"), None, Some(170_000))
///     .unwrap();
/// let prompt = checkpoint_prompt(std::path::Path::new("/wt"), &pressure);
/// assert!(prompt.starts_with("Context checkpoint:"));
/// assert!(prompt.contains("/wt/.orchestrator-split.json"));
/// ```
pub fn checkpoint_prompt(dir: &Path, pressure: &Pressure) -> String {
    format!(
        "{CHECKPOINT_PREFIX} your context is nearly full ({} of {} tokens). Stop working on \
         the task now. Leave what you have done so far in the files of the current directory \
         ({}) as it is; do not commit, the orchestrator commits it. Then write the work that \
         remains to the file {} as JSON: {{\"items\": [{{\"name\": \"...\", \"task\": \"...\", \
         \"instructions\": \"...\", \"dependsOn\": [\"...\"]}}]}}. Each item becomes a job of \
         its own that starts from your files and sees only its instructions: `name` is 3 to \
         64 characters of a-z, 0-9 and `-`, unique; `task` is a one-line title; \
         `instructions` say completely what to do; `dependsOn` names the items that must be \
         done first (may be empty). At most {MAX_SUB_JOBS} items. When the file is written, \
         reply with one line saying what you did and what remains.",
        pressure.tokens,
        pressure.window,
        dir.display(),
        dir.join(MANIFEST_FILE).display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_by_model_name() {
        let p = ContextPressure::new();
        assert_eq!(
            p.window_for(Some("claude-sonnet-4-5-20250929"), None),
            200_000
        );
        assert_eq!(p.window_for(Some("claude-sonnet-4-5[1m]"), None), 1_000_000);
        assert_eq!(p.window_for(Some("opus"), None), 200_000);
        assert_eq!(p.window_for(Some("gemini-2.5-pro"), None), 1_048_576);
        assert_eq!(p.window_for(Some("gpt-5.5"), None), 272_000);
        assert_eq!(
            p.window_for(Some("llama-3"), None),
            ContextPressure::DEFAULT_WINDOW
        );
        let p = p.window("claude", 100_000).window("CLAUDE-X", 50_000);
        assert_eq!(
            p.window_for(Some("claude-x-1"), None),
            50_000,
            "the latest first"
        );
        assert_eq!(
            p.window_for(Some("claude-y"), None),
            100_000,
            "before the table"
        );
        assert_eq!(
            p.window_for(Some("claude-y"), Some(1_000_000)),
            100_000,
            "a window set wins over the reported one"
        );
        let p = ContextPressure::new();
        assert_eq!(
            p.window_for(Some("claude-y"), Some(1_000_000)),
            1_000_000,
            "reported"
        );
        assert_eq!(p.window_for(None, Some(0)), ContextPressure::DEFAULT_WINDOW);
    }

    #[test]
    fn the_threshold_is_a_fraction_of_the_window() {
        let p = ContextPressure::new();
        assert_eq!(p.limit(Some("claude-opus-4"), None), Some(160_000));
        assert_eq!(p.crossed(Some("claude-opus-4"), None, Some(159_999)), None);
        let crossed = p.crossed(Some("claude-opus-4"), None, Some(160_000));
        assert_eq!(
            crossed,
            Some(Pressure {
                tokens: 160_000,
                window: 200_000,
                threshold: 0.8
            })
        );
        assert_eq!(
            p.crossed(Some("claude-opus-4"), None, None),
            None,
            "not reported"
        );
        for bad in [0.0, -1.0, 1.5, f64::NAN] {
            assert_eq!(
                ContextPressure::new().threshold(bad).limit(None, None),
                None
            );
        }
        assert_eq!(
            ContextPressure::off().crossed(None, None, Some(u64::MAX)),
            None
        );
    }

    #[test]
    fn the_environment_overrides_the_threshold() {
        let p = ContextPressure::new();
        assert_eq!(p.overridden(None), Ok(p.clone()));
        let half = p.overridden(Some(" 0.5 ")).map(|p| p.threshold_fraction());
        assert_eq!(half, Ok(Some(0.5)));
        let off = p.overridden(Some("OFF")).map(|p| p.threshold_fraction());
        assert_eq!(off, Ok(None));
        let on = ContextPressure::off().overridden(Some("1"));
        assert_eq!(on.map(|p| p.threshold_fraction()), Ok(Some(1.0)));
        for bad in ["80%", "2", "", "x"] {
            let err = p.overridden(Some(bad)).err().unwrap_or_default();
            assert!(err.contains(THRESHOLD_VAR), "{bad}: {err}");
        }
    }

    #[test]
    fn usage_under_the_threshold_asks_for_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = ContextPressure::new();
        let model = Some("claude-sonnet-4-5");
        assert_eq!(
            p.checkpoint_wanted(true, dir.path(), model, None, Some(159_000)),
            None
        );
        assert_eq!(
            p.checkpoint_wanted(true, dir.path(), model, None, None),
            None
        );
        assert!(p
            .checkpoint_wanted(true, dir.path(), model, None, Some(170_000))
            .is_some());
    }

    #[test]
    fn a_job_that_may_not_split_is_asked_for_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = ContextPressure::new();
        let model = Some("claude-sonnet-4-5");
        assert_eq!(
            p.checkpoint_wanted(false, dir.path(), model, None, Some(199_000)),
            None
        );
    }

    #[test]
    fn a_job_that_left_a_manifest_is_asked_for_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(MANIFEST_FILE), "{}").expect("write");
        let p = ContextPressure::new();
        assert_eq!(
            p.checkpoint_wanted(true, dir.path(), Some("claude"), None, Some(199_000)),
            None
        );
    }
}
