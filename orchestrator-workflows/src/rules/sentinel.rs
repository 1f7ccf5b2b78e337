//! Self-evaluation sentinels (seed 002): `[[GROUP_REFLECT_COMPLETE]]` ends a reflect loop,
//! `[[NEEDS_ITERATION]]` continues it; case-insensitive, and only on a line of their own.

/// A self-evaluation sentinel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sentinel {
    /// `[[GROUP_REFLECT_COMPLETE]]`: the goal is met.
    Complete,
    /// `[[NEEDS_ITERATION]]`: more work is needed (scored 0.4).
    NeedsIteration,
}

/// The text of the goal-met sentinel.
pub const COMPLETE: &str = "[[GROUP_REFLECT_COMPLETE]]";
/// The text of the continue sentinel.
pub const NEEDS_ITERATION: &str = "[[NEEDS_ITERATION]]";

impl Sentinel {
    /// The score a self-evaluation with this sentinel counts as.
    pub fn score(self) -> f64 {
        match self {
            Sentinel::Complete => 1.0,
            Sentinel::NeedsIteration => 0.4,
        }
    }
}

/// The sentinel of `reply`: a line that is exactly one (surrounding blanks aside, any case).
/// When both appear, the goal-met one wins, as in the seed's check order.
///
/// ```
/// use orchestrator_workflows::rules::{find_sentinel, Sentinel};
/// assert_eq!(find_sentinel("All done.\n  [[group_reflect_complete]]  \n"), Some(Sentinel::Complete));
/// assert_eq!(find_sentinel("I will print [[GROUP_REFLECT_COMPLETE]] when done"), None);
/// ```
pub fn find_sentinel(reply: &str) -> Option<Sentinel> {
    let on_a_line = |s: &str| reply.lines().any(|l| l.trim().eq_ignore_ascii_case(s));
    if on_a_line(COMPLETE) {
        Some(Sentinel::Complete)
    } else if on_a_line(NEEDS_ITERATION) {
        Some(Sentinel::NeedsIteration)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_and_placement() {
        assert_eq!(
            find_sentinel("[[GROUP_REFLECT_COMPLETE]]"),
            Some(Sentinel::Complete)
        );
        assert_eq!(
            find_sentinel("x\n[[Group_Reflect_Complete]]"),
            Some(Sentinel::Complete)
        );
        assert_eq!(
            find_sentinel("\t[[needs_iteration]]\r\nmore"),
            Some(Sentinel::NeedsIteration)
        );
        assert_eq!(
            find_sentinel("done [[GROUP_REFLECT_COMPLETE]]"),
            None,
            "not on its own line"
        );
        assert_eq!(
            find_sentinel("[[GROUP_REFLECT_COMPLETE]]."),
            None,
            "trailing text"
        );
        assert_eq!(find_sentinel("`[[NEEDS_ITERATION]]`"), None, "quoted");
        assert_eq!(find_sentinel(""), None);
    }

    #[test]
    fn goal_met_wins_and_scores() {
        let both = "[[NEEDS_ITERATION]]\n[[GROUP_REFLECT_COMPLETE]]";
        assert_eq!(find_sentinel(both), Some(Sentinel::Complete));
        assert_eq!(Sentinel::NeedsIteration.score(), 0.4);
        assert_eq!(Sentinel::Complete.score(), 1.0);
    }
}
