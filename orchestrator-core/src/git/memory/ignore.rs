//! `.gitignore` and `.git/info/exclude` matching for [`MemoryGit`](super::MemoryGit): parsed
//! rules with `*`/`?` globs, `dir/` patterns, anchoring and negation.

/// One line of a `.gitignore`.
pub(super) struct IgnoreRule {
    pub(super) pattern: String,
    pub(super) negate: bool,
    pub(super) dir_only: bool,
    /// Matched against the whole path (it had a `/` before its end) instead of the file name.
    pub(super) anchored: bool,
    /// The folder (`/`-terminated, empty for the root) whose `.gitignore` holds the rule: it
    /// matches only below it, relative to it.
    pub(super) base: String,
}

impl IgnoreRule {
    pub(super) fn parse(line: &str) -> Option<Self> {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let (negate, line) = match line.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let (dir_only, line) = match line.strip_suffix('/') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let anchored = line.contains('/');
        let pattern = line.trim_start_matches('/').to_string();
        (!pattern.is_empty()).then_some(Self {
            pattern,
            negate,
            dir_only,
            anchored,
            base: String::new(),
        })
    }

    /// The rule as read from the `.gitignore` of folder `base` (`/`-terminated).
    pub(super) fn under(mut self, base: &str) -> Self {
        self.base = base.to_string();
        self
    }

    pub(super) fn matches(&self, rel: &str, is_dir: bool) -> bool {
        if self.dir_only && !is_dir {
            return false;
        }
        let Some(rel) = rel.strip_prefix(self.base.as_str()) else {
            return false;
        };
        let subject = if self.anchored {
            rel
        } else {
            rel.rsplit('/').next().unwrap_or(rel)
        };
        glob(self.pattern.as_bytes(), subject.as_bytes())
    }
}

pub(super) fn ignored(rules: &[IgnoreRule], rel: &str, is_dir: bool) -> bool {
    rules
        .iter()
        .rev()
        .find(|r| r.matches(rel, is_dir))
        .is_some_and(|r| !r.negate)
}

/// `*` (not crossing `/`) and `?` wildcards.
pub(super) fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len())
            .take_while(|&i| i == 0 || text[i - 1] != b'/')
            .any(|i| glob(rest, &text[i..])),
        Some((b'?', rest)) => text
            .split_first()
            .is_some_and(|(c, t)| *c != b'/' && glob(rest, t)),
        Some((p, rest)) => text
            .split_first()
            .is_some_and(|(c, t)| c == p && glob(rest, t)),
    }
}
