//! [`AgentUsage`]: what one agent run cost and did, the same shape for every CLI.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Usage of one agent run, parsed from the CLI's output into one shape for every CLI and
/// stored as the attempt's metrics ([`WorkOutput::metrics`](orchestrator_core::runner::WorkOutput)).
///
/// Every field is optional: a CLI reports what it knows. Token counts follow one convention
/// whatever the CLI reports natively: `inputTokens` counts *all* prompt tokens, including the
/// ones served from a cache, and `cachedTokens` is that cached part. When the runner retried a
/// transient failure, counts are the sums over all tries.
///
/// ```
/// use orchestrator_agents::agent::AgentUsage;
/// let mut usage = AgentUsage::default();
/// usage.input_tokens = Some(1200);
/// usage.turns = Some(3);
/// let json = usage.to_json();
/// assert_eq!(json, serde_json::json!({"inputTokens": 1200, "turns": 3}));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AgentUsage {
    /// Prompt tokens, cached ones included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Prompt tokens read from a cache (part of `inputTokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Cost in US dollars, when the CLI reports it (Claude Code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Premium requests used, when the CLI reports them (Copilot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub premium_requests: Option<f64>,
    /// Model turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// Wall time in milliseconds (as the CLI reports it, else as measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Lines added to files, when the CLI reports it (Copilot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines_added: Option<u64>,
    /// Lines removed from files, when the CLI reports it (Copilot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines_removed: Option<u64>,
    /// Session id, to resume the conversation later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Agent name (`claude`, `codex`, ... or a host-registered name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl AgentUsage {
    /// Adds the usage of a later try of the same run: counts are summed, names and ids taken
    /// from `later` when it has them.
    pub fn absorb(&mut self, later: &AgentUsage) {
        add(&mut self.input_tokens, later.input_tokens);
        add(&mut self.output_tokens, later.output_tokens);
        add(&mut self.cached_tokens, later.cached_tokens);
        add(&mut self.duration_ms, later.duration_ms);
        add(&mut self.lines_added, later.lines_added);
        add(&mut self.lines_removed, later.lines_removed);
        add(&mut self.turns, later.turns);
        add(&mut self.cost_usd, later.cost_usd);
        add(&mut self.premium_requests, later.premium_requests);
        for (mine, theirs) in [
            (&mut self.session_id, &later.session_id),
            (&mut self.model, &later.model),
            (&mut self.agent, &later.agent),
        ] {
            if theirs.is_some() {
                mine.clone_from(theirs);
            }
        }
    }

    /// The usage as JSON (what [`WorkOutput::metrics`](orchestrator_core::runner::WorkOutput) holds).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Adds `more` to `into` when there is something to add (`None` + 5 is 5).
pub(crate) fn add<T: std::ops::Add<Output = T> + Copy>(into: &mut Option<T>, more: Option<T>) {
    if let Some(more) = more {
        *into = Some(into.map_or(more, |v| v + more));
    }
}

/// `value[key]` as an unsigned count (integers, or floats rounded down).
pub(crate) fn count(value: &Value, key: &str) -> Option<u64> {
    let v = value.get(key)?;
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
}

/// `value[key]` as a string.
pub(crate) fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key)?.as_str().map(str::to_owned)
}

/// The first string found under any of `keys`, searching the whole JSON tree (depth first).
pub(crate) fn find_text(value: &Value, keys: &[&str]) -> Option<String> {
    find(value, &|v| keys.iter().find_map(|k| text(v, k)))
}

/// The first count found under any of `keys`, searching the whole JSON tree.
pub(crate) fn find_count(value: &Value, keys: &[&str]) -> Option<u64> {
    find(value, &|v| keys.iter().find_map(|k| count(v, k)))
}

/// The first number found under any of `keys`, searching the whole JSON tree.
pub(crate) fn find_number(value: &Value, keys: &[&str]) -> Option<f64> {
    find(value, &|v| {
        keys.iter().find_map(|k| v.get(*k).and_then(Value::as_f64))
    })
}

fn find<T>(value: &Value, pick: &dyn Fn(&Value) -> Option<T>) -> Option<T> {
    if let Some(found) = pick(value) {
        return Some(found);
    }
    match value {
        Value::Object(map) => map.values().find_map(|v| find(v, pick)),
        Value::Array(items) => items.iter().find_map(|v| find(v, pick)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absorb_sums_counts_and_keeps_the_latest_ids() {
        let mut a = AgentUsage {
            input_tokens: Some(10),
            cost_usd: Some(0.5),
            session_id: Some("s1".into()),
            ..AgentUsage::default()
        };
        let b = AgentUsage {
            input_tokens: Some(5),
            output_tokens: Some(2),
            cost_usd: Some(0.25),
            session_id: Some("s2".into()),
            ..AgentUsage::default()
        };
        a.absorb(&b);
        assert_eq!(a.input_tokens, Some(15));
        assert_eq!(a.output_tokens, Some(2));
        assert_eq!(a.cost_usd, Some(0.75));
        assert_eq!(a.session_id.as_deref(), Some("s2"));
    }

    #[test]
    fn deep_search_finds_nested_fields() {
        let v = json!({"a": [1, {"b": {"sessionId": "x", "n": 4.0}}]});
        assert_eq!(
            find_text(&v, &["session_id", "sessionId"]).as_deref(),
            Some("x")
        );
        assert_eq!(find_count(&v, &["n"]), Some(4));
        assert_eq!(find_number(&v, &["missing"]), None);
    }

    #[test]
    fn serializes_camel_case() {
        let u = AgentUsage {
            cached_tokens: Some(1),
            cost_usd: Some(0.1),
            premium_requests: Some(1.0),
            duration_ms: Some(3),
            lines_added: Some(4),
            lines_removed: Some(5),
            session_id: Some("s".into()),
            ..AgentUsage::default()
        };
        let mut keys: Vec<String> = u
            .to_json()
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        assert_eq!(
            keys,
            [
                "cachedTokens",
                "costUsd",
                "durationMs",
                "linesAdded",
                "linesRemoved",
                "premiumRequests",
                "sessionId"
            ]
        );
    }
}
