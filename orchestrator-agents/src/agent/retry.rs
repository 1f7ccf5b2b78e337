//! Failure classification ([`FailureClass`]) and the retry policy ([`RetryPolicy`]).

use std::time::Duration;

/// Whether a failed agent run is worth trying again unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureClass {
    /// The model service was busy or unreachable (rate limit, 5xx, overloaded, connection
    /// reset or refused, API timeout): retried with backoff.
    Transient,
    /// Anything else (bad model name, authentication, the agent gave up, a crash): reported
    /// at once.
    Permanent,
}

/// How transient failures are retried: up to `attempts` tries in all, waiting `base_delay`,
/// then twice that, and so on, capped at `max_delay`.
///
/// ```
/// use std::time::Duration;
/// use orchestrator_agents::agent::RetryPolicy;
/// let p = RetryPolicy::default();
/// assert_eq!(p.attempts, 3);
/// assert_eq!(p.delay_before(2), Duration::from_secs(2));
/// assert_eq!(p.delay_before(3), Duration::from_secs(4));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Tries in all, the first included (at least 1). Default: 3.
    pub attempts: u32,
    /// Wait before the second try. Default: 2 s.
    pub base_delay: Duration,
    /// Longest wait. Default: 60 s.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// `attempts` tries in all, starting at `base_delay`.
    pub fn new(attempts: u32, base_delay: Duration) -> Self {
        RetryPolicy {
            attempts: attempts.max(1),
            base_delay,
            ..RetryPolicy::default()
        }
    }

    /// No retries.
    pub fn never() -> Self {
        RetryPolicy::new(1, Duration::ZERO)
    }

    /// Sets [`RetryPolicy::max_delay`].
    pub fn max_delay(mut self, max: Duration) -> Self {
        self.max_delay = max;
        self
    }

    /// The wait before try number `attempt` (2 for the first retry).
    pub fn delay_before(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(2).min(30);
        self.base_delay
            .saturating_mul(1 << doublings)
            .min(self.max_delay)
    }
}

/// Phrases in an error that mean the service, not the request, was the problem.
const TRANSIENT_PHRASES: &[&str] = &[
    "rate limit",
    "rate_limit",
    "ratelimit",
    "too many requests",
    "overloaded",
    "service unavailable",
    "bad gateway",
    "gateway timeout",
    "internal server error",
    "server error",
    "econnreset",
    "econnrefused",
    "etimedout",
    "epipe",
    "connection reset",
    "connection refused",
    "connection closed",
    "connection error",
    "socket hang up",
    "network error",
    "fetch failed",
    "timed out",
    "temporarily unavailable",
    "try again later",
    // Codex's message for a 5xx answer: "We're currently experiencing high demand, ...".
    "high demand",
];

/// HTTP statuses that are worth a retry.
const TRANSIENT_STATUSES: &[&str] = &["429", "500", "502", "503", "504", "529"];

/// Classifies a failure from its exit code and what the CLI said (error events, stderr, plain
/// output lines). The shared rules every built-in CLI uses:
///
/// - an HTTP status worth retrying (`429`, `500`, `502`, `503`, `504`, `529`,
///   as a whole number) or a phrase such as "rate limit", "overloaded", "ECONNRESET",
///   "connection refused", "timed out" → [`FailureClass::Transient`];
/// - everything else → [`FailureClass::Permanent`].
///
/// ```
/// use orchestrator_agents::agent::{classify, FailureClass};
/// assert_eq!(classify(Some(1), ["API Error: 429 Too Many Requests"]), FailureClass::Transient);
/// assert_eq!(classify(Some(1), ["Invalid model: gpt-9"]), FailureClass::Permanent);
/// assert_eq!(classify(Some(1), ["took 1429 ms"]), FailureClass::Permanent);
/// ```
pub fn classify<'a>(
    _exit_code: Option<i32>,
    said: impl IntoIterator<Item = &'a str>,
) -> FailureClass {
    for text in said {
        let lower = text.to_ascii_lowercase();
        if TRANSIENT_PHRASES.iter().any(|p| lower.contains(p))
            || TRANSIENT_STATUSES.iter().any(|s| has_number(&lower, s))
        {
            return FailureClass::Transient;
        }
    }
    FailureClass::Permanent
}

/// What the built-in CLIs say when the session to resume does not exist.
const LOST_SESSION_PHRASES: &[&str] = &[
    // Claude Code
    "no conversation found with session id",
    // Codex
    "no rollout found for thread id",
    // Gemini CLI
    "error resuming session",
    "no previous sessions found",
];

/// Whether a CLI said the session it was asked to resume does not exist (Claude Code: "No
/// conversation found with session ID", Codex: "no rollout found for thread id", Gemini CLI:
/// "Error resuming session").
///
/// ```
/// use orchestrator_agents::agent::session_lost;
/// assert!(session_lost(["Error resuming session: No previous sessions found for this project."]));
/// assert!(!session_lost(["API Error: 500"]));
/// ```
pub fn session_lost<'a>(said: impl IntoIterator<Item = &'a str>) -> bool {
    said.into_iter().any(|text| {
        let lower = text.to_ascii_lowercase();
        LOST_SESSION_PHRASES.iter().any(|p| lower.contains(p))
    })
}

/// Whether `number` occurs in `text` as a whole number (not inside a longer one).
fn has_number(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + number.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit() || c == '.')
            && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_and_permanent() {
        let t = |s: &str| classify(Some(1), [s]);
        for s in [
            "Error: 429",
            "{\"type\":\"error\",\"message\":\"Overloaded\"}",
            "read ECONNRESET",
            "connect ECONNREFUSED 127.0.0.1:9",
            "request timed out",
            "status 503 Service Unavailable",
            "HTTP 529",
            "We’re currently experiencing high demand, which may cause temporary errors.",
        ] {
            assert_eq!(t(s), FailureClass::Transient, "{s}");
        }
        for s in ["401 Unauthorized", "model not found", "v1.429", "port 5000"] {
            assert_eq!(t(s), FailureClass::Permanent, "{s}");
        }
        assert_eq!(classify(None, []), FailureClass::Permanent);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy::new(10, Duration::from_secs(2)).max_delay(Duration::from_secs(10));
        let delays: Vec<u64> = (2..=6).map(|a| p.delay_before(a).as_secs()).collect();
        assert_eq!(delays, [2, 4, 8, 10, 10]);
        assert_eq!(RetryPolicy::never().attempts, 1);
        assert_eq!(RetryPolicy::new(0, Duration::ZERO).attempts, 1);
    }
}
