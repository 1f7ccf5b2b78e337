//! The environment a child process gets: the host's, cleaned, with the plan/job and spec layers
//! on top and `$VAR` / `${VAR}` references in those layers expanded.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};

use orchestrator_core::plan::Env;

/// Host variables that are not passed on to child processes because they are known to break
/// the CLIs the orchestrator starts.
///
/// - `NODE_OPTIONS`: editors and debuggers (VS Code's JavaScript debugger, for one) set it to
///   preload their own scripts; every Node-based agent CLI would load them too, and fail or hang.
/// - `VSCODE_INSPECTOR_OPTIONS`: the companion of the above; it makes child Node processes try to
///   attach to the editor's debugger.
///
/// Only the *host's* values are removed: a plan, job or spec that sets one of these explicitly
/// gets what it asked for.
pub const REMOVED_ENV_VARS: &[&str] = &["NODE_OPTIONS", "VSCODE_INSPECTOR_OPTIONS"];

/// The complete environment of a child process, built layer by layer.
///
/// ```
/// use orchestrator_agents::ChildEnv;
/// use orchestrator_core::plan::Env;
///
/// let mut env = ChildEnv::from_vars([("PATH", "/usr/bin"), ("NODE_OPTIONS", "--require x")]);
/// assert_eq!(env.get("NODE_OPTIONS"), None, "removed from the host layer");
///
/// let job = Env::from([("PATH".to_string(), "/opt/tool/bin:$PATH".to_string())]);
/// env.overlay(&job);
/// assert_eq!(env.get_str("PATH").as_deref(), Some("/opt/tool/bin:/usr/bin"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    vars: BTreeMap<OsString, OsString>,
}

impl ChildEnv {
    /// No variables at all.
    pub fn empty() -> Self {
        ChildEnv::default()
    }

    /// The current process's environment without [`REMOVED_ENV_VARS`].
    pub fn from_host() -> Self {
        ChildEnv::from_vars(std::env::vars_os())
    }

    /// These variables, without [`REMOVED_ENV_VARS`]: a host layer given explicitly.
    pub fn from_vars<I, K, V>(vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let vars = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .filter(|(k, _)| !REMOVED_ENV_VARS.iter().any(|r| OsStr::new(r) == k))
            .collect();
        ChildEnv { vars }
    }

    /// Puts `layer` on top: its values replace existing ones, after expanding `$NAME` and
    /// `${NAME}` in them.
    ///
    /// A reference to a name the same layer defines gets that (expanded) value, so a job can use
    /// a plan variable; a reference to the variable being defined (`PATH=/x:$PATH`), or a
    /// reference cycle, gets the value from below this layer. Unknown names expand to nothing;
    /// `$$` is a literal `$`, and a `$` not followed by a name is kept as it is. Nothing else is
    /// interpreted: no shell ever sees these values.
    pub fn overlay(&mut self, layer: &Env) {
        let mut resolver = Resolver {
            below: self,
            layer,
            done: BTreeMap::new(),
            visiting: BTreeSet::new(),
        };
        for name in layer.keys() {
            resolver.resolve(name);
        }
        let done = resolver.done;
        for (k, v) in done {
            self.vars.insert(OsString::from(k), OsString::from(v));
        }
    }

    /// Sets one variable as it is, with no expansion.
    pub fn set(&mut self, name: impl Into<OsString>, value: impl Into<OsString>) {
        self.vars.insert(name.into(), value.into());
    }

    /// Removes one variable.
    pub fn remove(&mut self, name: impl AsRef<OsStr>) {
        self.vars.remove(name.as_ref());
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: impl AsRef<OsStr>) -> Option<&OsStr> {
        self.vars.get(name.as_ref()).map(OsString::as_os_str)
    }

    /// The value of `name` as text (invalid UTF-8 replaced), if set.
    pub fn get_str(&self, name: &str) -> Option<String> {
        self.get(name).map(|v| v.to_string_lossy().into_owned())
    }

    /// All variables, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// Whether there are no variables.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }
}

/// Expands one layer's values against the layer itself and what lies below it.
struct Resolver<'a> {
    below: &'a ChildEnv,
    layer: &'a Env,
    done: BTreeMap<String, String>,
    visiting: BTreeSet<String>,
}

impl<'a> Resolver<'a> {
    fn resolve(&mut self, name: &str) -> String {
        if let Some(v) = self.done.get(name) {
            return v.clone();
        }
        let layer: &'a Env = self.layer;
        let Some(raw) = layer.get(name) else {
            return self.below.get_str(name).unwrap_or_default();
        };
        self.visiting.insert(name.to_owned());
        let value = expand(raw, |reference| {
            if reference == name || self.visiting.contains(reference) {
                self.below.get_str(reference).unwrap_or_default()
            } else {
                self.resolve(reference)
            }
        });
        self.visiting.remove(name);
        self.done.insert(name.to_owned(), value.clone());
        value
    }
}

/// Expands `$NAME`, `${NAME}` and `$$` in `text`, looking names up with `lookup`.
///
/// A name is an ASCII letter or `_` followed by letters, digits or `_`. A `$` that starts
/// neither a name, nor `{NAME}`, nor `$$` is kept literally, as is an unclosed `${`.
///
/// ```
/// use orchestrator_agents::env::expand;
/// let v = expand("${HOME}/bin:$MISSING:$$5:$1", |name| match name {
///     "HOME" => "/home/me".to_string(),
///     _ => String::new(),
/// });
/// assert_eq!(v, "/home/me/bin::$5:$1");
/// ```
pub fn expand(text: &str, mut lookup: impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = braced_name(after) {
            out.push_str(&lookup(name));
            rest = tail;
        } else if let Some((name, tail)) = bare_name(after) {
            out.push_str(&lookup(name));
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `{NAME}rest` → (`NAME`, `rest`).
fn braced_name(s: &str) -> Option<(&str, &str)> {
    let inner = s.strip_prefix('{')?;
    let (name, tail) = bare_name(inner)?;
    let tail = tail.strip_prefix('}')?;
    Some((name, tail))
}

/// `NAMErest` → (`NAME`, `rest`).
fn bare_name(s: &str) -> Option<(&str, &str)> {
    let first = s.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    Some(s.split_at(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn lookup(name: &str) -> String {
        match name {
            "A" => "1".into(),
            "LONG_NAME_2" => "two".into(),
            _ => String::new(),
        }
    }

    #[test]
    fn expansion_forms() {
        assert_eq!(expand("", lookup), "");
        assert_eq!(expand("plain", lookup), "plain");
        assert_eq!(expand("$A", lookup), "1");
        assert_eq!(expand("${A}x", lookup), "1x");
        assert_eq!(expand("$Ax", lookup), "", "the name is `Ax`, unknown");
        assert_eq!(expand("$A-$LONG_NAME_2.", lookup), "1-two.");
        assert_eq!(expand("$$A", lookup), "$A");
        assert_eq!(expand("$$$A", lookup), "$1");
        assert_eq!(expand("cost: 5$", lookup), "cost: 5$");
        assert_eq!(expand("$1 $- ${", lookup), "$1 $- ${");
        assert_eq!(expand("${A", lookup), "${A");
        assert_eq!(expand("${}", lookup), "${}");
        assert_eq!(expand("${A B}", lookup), "${A B}");
        assert_eq!(expand("é$Aé", lookup), "é1é");
    }

    #[test]
    fn host_layer_drops_variables_that_break_clis() {
        let e = ChildEnv::from_vars([("NODE_OPTIONS", "--inspect"), ("KEEP", "yes")]);
        assert_eq!(e.get("NODE_OPTIONS"), None);
        assert_eq!(e.get_str("KEEP").as_deref(), Some("yes"));
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn explicit_layers_may_set_removed_variables() {
        let mut e = ChildEnv::from_vars([("NODE_OPTIONS", "--inspect")]);
        e.overlay(&env(&[("NODE_OPTIONS", "--max-old-space-size=4096")]));
        assert_eq!(
            e.get_str("NODE_OPTIONS").as_deref(),
            Some("--max-old-space-size=4096")
        );
    }

    #[test]
    fn layers_override_and_expand_against_what_lies_below() {
        let mut e = ChildEnv::from_vars([("PATH", "/bin"), ("HOME", "/h")]);
        e.overlay(&env(&[
            ("PATH", "/job:$PATH"),
            ("X", "job"),
            ("TOOL", "${HOME}/tool"),
        ]));
        e.overlay(&env(&[
            ("PATH", "/spec:$PATH"),
            ("X", "spec-over-$X"),
            ("NONE", "[$NOPE]"),
        ]));
        assert_eq!(e.get_str("PATH").as_deref(), Some("/spec:/job:/bin"));
        assert_eq!(e.get_str("X").as_deref(), Some("spec-over-job"));
        assert_eq!(e.get_str("TOOL").as_deref(), Some("/h/tool"));
        assert_eq!(e.get_str("NONE").as_deref(), Some("[]"));
    }

    #[test]
    fn references_within_a_layer_do_not_depend_on_key_order() {
        let mut e = ChildEnv::from_vars([("Z", "host-z")]);
        // `A` sorts before `Z` yet sees the layer's `Z`.
        e.overlay(&env(&[("A", "$Z/a"), ("Z", "layer-z"), ("B", "$A/b")]));
        assert_eq!(e.get_str("A").as_deref(), Some("layer-z/a"));
        assert_eq!(e.get_str("B").as_deref(), Some("layer-z/a/b"));
    }

    #[test]
    fn reference_cycles_fall_back_to_the_layer_below() {
        let mut e = ChildEnv::from_vars([("A", "a0"), ("B", "b0")]);
        e.overlay(&env(&[("A", "$B"), ("B", "$A")]));
        // Resolving A (first in order) meets B, whose reference back to A is a cycle.
        assert_eq!(e.get_str("B").as_deref(), Some("a0"));
        assert_eq!(e.get_str("A").as_deref(), Some("a0"));
    }

    #[test]
    fn set_and_remove() {
        let mut e = ChildEnv::empty();
        assert!(e.is_empty());
        e.set("K", "$NOT_EXPANDED");
        assert_eq!(e.get_str("K").as_deref(), Some("$NOT_EXPANDED"));
        e.remove("K");
        assert!(e.is_empty());
        assert_eq!(e.iter().count(), 0);
    }
}
