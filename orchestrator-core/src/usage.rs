//! Usage adding up per plan (SPEC §12): tokens in, out and cached, cost and premium requests,
//! from the metrics runners report on attempts, and the plan's `budget` against it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::state::{NodeState, PlanRecord};

/// Usage totals: the sum of what runners reported (agents' `inputTokens`, `outputTokens`,
/// `cachedTokens`, `costUsd`, `premiumRequests`; other metrics are not counted).
///
/// ```
/// use orchestrator_core::usage::Usage;
/// let mut total = Usage::default();
/// total.add_metrics(&serde_json::json!({"inputTokens": 1200, "outputTokens": 300, "costUsd": 0.02}));
/// total.add_metrics(&serde_json::json!({"inputTokens": 800, "turns": 3}));
/// assert_eq!(total.tokens(), 2300);
/// assert_eq!(total.cost_usd, 0.02);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Input tokens served from a cache.
    pub cached_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// Premium requests (Copilot).
    pub premium_requests: f64,
}

impl Usage {
    /// Adds one metrics report (free-form JSON; missing or non-numeric fields count 0).
    pub fn add_metrics(&mut self, metrics: &Value) {
        let count = |key: &str| {
            metrics.get(key).and_then(|v| {
                v.as_u64()
                    .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            })
        };
        let number = |key: &str| {
            metrics
                .get(key)
                .and_then(Value::as_f64)
                .filter(|f| f.is_finite() && *f >= 0.0)
        };
        self.input_tokens += count("inputTokens").unwrap_or(0);
        self.output_tokens += count("outputTokens").unwrap_or(0);
        self.cached_tokens += count("cachedTokens").unwrap_or(0);
        self.cost_usd += number("costUsd").unwrap_or(0.0);
        self.premium_requests += number("premiumRequests").unwrap_or(0.0);
    }

    /// Tokens in and out (what a token budget counts).
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Everything the attempts of `record` reported.
    pub fn of_plan(record: &PlanRecord) -> Usage {
        let mut total = Usage::default();
        for node in &record.state.nodes {
            total.add_node(node);
        }
        total
    }

    /// What every attempt of one node (a job) used.
    ///
    /// ```
    /// use orchestrator_core::state::NodeState;
    /// use orchestrator_core::usage::Usage;
    /// let node = NodeState::new("n1".into());
    /// assert_eq!(Usage::of_node(&node).tokens(), 0); // it never ran
    /// ```
    pub fn of_node(node: &NodeState) -> Usage {
        let mut total = Usage::default();
        total.add_node(node);
        total
    }

    fn add_node(&mut self, node: &NodeState) {
        for metrics in node
            .attempts
            .iter()
            .filter_map(|a| a.extra.metrics.as_deref())
        {
            self.add_metrics(metrics);
        }
    }
}

/// A plan's budget (`"budget": {"costUsd": X, "tokens": N}`): when a finished attempt takes
/// the plan's usage to or past a limit, the plan is paused (nothing running is stopped) and
/// [`crate::OrchestratorEvent::BudgetReached`] says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// Cost limit in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Token limit (input plus output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

impl Budget {
    /// Whether `usage` is at or past a limit.
    ///
    /// ```
    /// use orchestrator_core::usage::{Budget, Usage};
    /// let budget = Budget { cost_usd: Some(1.0), tokens: None };
    /// assert!(!budget.reached_by(&Usage { cost_usd: 0.5, ..Usage::default() }));
    /// assert!(budget.reached_by(&Usage { cost_usd: 1.0, ..Usage::default() }));
    /// ```
    pub fn reached_by(&self, usage: &Usage) -> bool {
        self.cost_usd.is_some_and(|limit| usage.cost_usd >= limit)
            || self.tokens.is_some_and(|limit| usage.tokens() >= limit)
    }
}
