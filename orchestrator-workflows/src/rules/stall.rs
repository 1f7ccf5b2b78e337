//! Stall detection (seed 002): a synthesis equal to one of the last 5, or with whitespace-token
//! Jaccard similarity above 0.9 to the previous one, is a stall; the second stall in a row
//! ends the loop.

use std::collections::HashSet;

/// How many earlier syntheses an exact repeat is looked for in.
pub const WINDOW: usize = 5;
/// Similarity above which a synthesis repeats the previous one.
pub const SIMILARITY: f64 = 0.9;
/// Stalls in a row that end the loop.
pub const STALLS_TO_STOP: u32 = 2;

/// Jaccard similarity of the whitespace-separated tokens of `a` and `b`: |A∩B| / |A∪B|
/// (1.0 for two texts without tokens).
///
/// ```
/// use orchestrator_workflows::rules::jaccard;
/// assert_eq!(jaccard("a b c", "a b d"), 0.5);
/// assert_eq!(jaccard("", ""), 1.0);
/// ```
pub fn jaccard(a: &str, b: &str) -> f64 {
    let a: HashSet<&str> = a.split_whitespace().collect();
    let b: HashSet<&str> = b.split_whitespace().collect();
    let union = a.union(&b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

/// The stall state of a loop, fed one synthesis per iteration.
#[derive(Debug, Clone, Default)]
pub struct StallCheck {
    history: Vec<String>,
    in_a_row: u32,
}

impl StallCheck {
    /// Records `synthesis`; whether it stalls (repeats one of the last [`WINDOW`] exactly, or
    /// is more than [`SIMILARITY`] like the previous one).
    pub fn record(&mut self, synthesis: &str) -> bool {
        let start = self.history.len().saturating_sub(WINDOW);
        let repeat = self.history[start..].iter().any(|h| h == synthesis);
        let similar = self
            .history
            .last()
            .is_some_and(|prev| jaccard(prev, synthesis) > SIMILARITY);
        let stall = repeat || similar;
        self.in_a_row = if stall { self.in_a_row + 1 } else { 0 };
        self.history.push(synthesis.to_owned());
        stall
    }

    /// Stalls in a row so far.
    pub fn in_a_row(&self) -> u32 {
        self.in_a_row
    }

    /// Whether the loop is to stop as stalled.
    pub fn stalled(&self) -> bool {
        self.in_a_row >= STALLS_TO_STOP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaccard_at_the_boundary() {
        // 9 shared of 10 distinct tokens: exactly 0.9 is no stall, just above it is.
        let ten: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
        let a = ten[..10].join(" ");
        let b = ten[..9].join(" ");
        assert_eq!(jaccard(&a, &b), 0.9);
        let mut check = StallCheck::default();
        assert!(!check.record(&a));
        assert!(!check.record(&b), "0.9 is not above 0.9");
        let twenty: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
        let c = twenty.join(" ");
        let d = twenty[..19].join(" ");
        assert!(jaccard(&c, &d) > 0.9);
        let mut check = StallCheck::default();
        check.record(&c);
        assert!(check.record(&d), "19/20 = 0.95");
    }

    #[test]
    fn exact_repeats_within_the_last_five() {
        let mut check = StallCheck::default();
        for s in ["one x", "two y", "three z", "four w", "five v", "six u"] {
            assert!(!check.record(s));
        }
        assert!(!check.record("one x"), "six back: out of the window");
        assert!(check.record("three z"), "within the last five");
    }

    #[test]
    fn second_stall_in_a_row_stops_and_a_fresh_reply_resets() {
        let mut check = StallCheck::default();
        check.record("same words here");
        assert!(check.record("same words here"));
        assert!(!check.stalled(), "first stall only warns");
        assert!(!check.record("something entirely different now"));
        assert_eq!(check.in_a_row(), 0);
        assert!(check.record("something entirely different now"));
        assert!(check.record("something entirely different now"));
        assert!(check.stalled());
    }
}
