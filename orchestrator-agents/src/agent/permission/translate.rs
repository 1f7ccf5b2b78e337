//! A policy as rule lists ([`RuleSet`]) and their translation into a CLI's own terms
//! ([`Translated`]), with the one log note about what a CLI cannot enforce.

use super::*;

/// A policy as rule lists, each denial with its reason ([`PermissionPolicy::rule_set`]): what
/// the CLI runners translate into their own flags. Requests no rule matches are denied with
/// [`NOT_ALLOWED`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RuleSet {
    /// Allowed requests.
    pub allow: Vec<PermissionRule>,
    /// Denied requests and why.
    pub deny: Vec<(PermissionRule, String)>,
}

impl RuleSet {
    /// The allow rules of `kind`.
    pub fn allowed(&self, kind: ToolKind) -> impl Iterator<Item = &PermissionRule> {
        self.allow.iter().filter(move |r| r.kind == kind)
    }

    /// The deny rules of `kind`, with their reasons.
    pub fn denied(&self, kind: ToolKind) -> impl Iterator<Item = (&PermissionRule, &str)> {
        self.deny
            .iter()
            .filter(move |(r, _)| r.kind == kind)
            .map(|(r, reason)| (r, reason.as_str()))
    }

    /// Whether every request of `kind` is allowed: an allow rule without a glob, and no deny
    /// rule of the kind.
    pub fn allows_all(&self, kind: ToolKind) -> bool {
        self.allowed(kind).any(|r| r.glob.is_none()) && self.denied(kind).next().is_none()
    }

    /// Whether every request of `kind` is denied: a deny rule without a glob, or no allow rule
    /// of the kind (what no rule allows is denied). Its reason.
    pub fn denies_all(&self, kind: ToolKind) -> Option<&str> {
        if let Some((_, reason)) = self.denied(kind).find(|(r, _)| r.glob.is_none()) {
            return Some(reason);
        }
        self.allowed(kind).next().is_none().then_some(NOT_ALLOWED)
    }

    /// Whether some requests of `kind` match no rule (neither an allow nor a deny rule covers
    /// the whole kind): what the CLI's default denial must handle.
    pub fn falls_back(&self, kind: ToolKind) -> bool {
        !self.allowed(kind).any(|r| r.glob.is_none())
            && !self.denied(kind).any(|(r, _)| r.glob.is_none())
    }

    /// Whether any rule names `kind`.
    pub fn mentions(&self, kind: ToolKind) -> bool {
        self.allowed(kind).next().is_some() || self.denied(kind).next().is_some()
    }
}

/// A [`RuleSet`] in a CLI's own terms ([`RuleSet::translate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Translated<T> {
    /// What the CLI is told to allow.
    pub allow: Vec<T>,
    /// What it is told to deny, each with the reason of its rule.
    pub deny: Vec<(T, String)>,
    /// What it cannot enforce as written, for the [`policy_note`].
    pub gaps: Vec<String>,
}

impl RuleSet {
    /// Translates the rules for a CLI (named `cli` in the gaps). `exact(rule, is_deny)` is
    /// the CLI's patterns matching exactly what `rule` matches (for a rule without a glob,
    /// every request of its kind), `None` when it has none; `whole(kind)` its patterns
    /// denying every request of `kind` (empty when its default denial covers the kind once
    /// nothing allows it), `None` when it cannot deny them.
    ///
    /// A deny rule without exact patterns is widened to its whole kind; allow rules of a
    /// kind denied as a whole are dropped (deny wins); allow rules without exact patterns
    /// are left out (their requests are then denied). Each such case is a gap.
    pub fn translate<T>(
        &self,
        cli: &str,
        exact: impl Fn(&PermissionRule, bool) -> Option<Vec<T>>,
        whole: impl Fn(ToolKind) -> Option<Vec<T>>,
    ) -> Translated<T> {
        let mut out = Translated {
            allow: Vec::new(),
            deny: Vec::new(),
            gaps: Vec::new(),
        };
        let mut denied_kinds = Vec::new();
        for (rule, reason) in &self.deny {
            let patterns = match rule.glob {
                None => whole(rule.kind),
                Some(_) => exact(rule, true),
            };
            let patterns = match patterns {
                Some(patterns) => {
                    if rule.glob.is_none() {
                        denied_kinds.push(rule.kind);
                    }
                    patterns
                }
                None => {
                    denied_kinds.push(rule.kind);
                    match whole(rule.kind) {
                        Some(patterns) => {
                            out.gaps.push(format!(
                                "the deny rule `{rule}` is widened to every {} request ({cli} has no pattern for it)",
                                rule.kind
                            ));
                            patterns
                        }
                        None => {
                            out.gaps.push(format!(
                                "the deny rule `{rule}` ({cli} cannot deny {} requests)",
                                rule.kind
                            ));
                            Vec::new()
                        }
                    }
                }
            };
            out.deny
                .extend(patterns.into_iter().map(|p| (p, reason.clone())));
        }
        for rule in &self.allow {
            if denied_kinds.contains(&rule.kind) {
                continue;
            }
            match exact(rule, false) {
                Some(patterns) => out.allow.extend(patterns),
                None => out.gaps.push(format!(
                    "the allow rule `{rule}` is left out ({cli} has no pattern for it), so those requests are denied"
                )),
            }
        }
        out
    }
}

/// The one log note of a CLI about a policy: that it cannot ask the host (for `ask` and rules,
/// whose unmatched requests it denies), and what it does not enforce (`gaps`). `None` when
/// there is nothing to say.
pub(crate) fn policy_note(cli: &str, policy: &PermissionPolicy, gaps: &[String]) -> Option<String> {
    policy_note_for(cli, policy, gaps, false)
}

/// [`policy_note`] for a CLI that puts the requests no rule decides to the host when
/// `host_answers` (a session that [asks the host](super::AgentRequest::ask_host)).
pub(crate) fn policy_note_for(
    cli: &str,
    policy: &PermissionPolicy,
    gaps: &[String],
    host_answers: bool,
) -> Option<String> {
    let asks = matches!(
        policy,
        PermissionPolicy::Ask | PermissionPolicy::Rules { .. }
    );
    if !asks && gaps.is_empty() {
        return None;
    }
    let mut note = format!("permission policy `{}`: ", policy.name());
    if asks && host_answers {
        note.push_str(&format!(
            "{cli} puts the tool requests no rule decides to the host"
        ));
    } else if asks {
        note.push_str(&format!(
            "{cli} cannot ask the host about tool requests here; requests not allowed by a rule are denied"
        ));
    }
    if !gaps.is_empty() {
        if asks {
            note.push_str(". ");
        }
        note.push_str(&format!(
            "Not enforced as written by {cli}: {}",
            gaps.join("; ")
        ));
    }
    Some(note)
}
