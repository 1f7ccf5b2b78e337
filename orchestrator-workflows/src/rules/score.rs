//! The evaluator's reply (seed 002): a score from 0.0 to 1.0 with a rationale, the pick of a
//! best-of-N evaluation, and the quality trend between iterations (±0.1).

/// An evaluator's judgement of one synthesis.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// 0.0–1.0.
    pub score: f64,
    /// Why, as the evaluator said.
    pub rationale: String,
}

/// The value of a `Key: value` line of `reply` (the last such line; key case-insensitive,
/// markdown emphasis and list bullets around it ignored).
pub(crate) fn field<'r>(reply: &'r str, key: &str) -> Option<&'r str> {
    reply.lines().rev().find_map(|line| {
        let line = line.trim().trim_start_matches(['-', '*', '>', ' ']);
        let line = line.trim_start_matches('*');
        let (k, v) = line.split_once(':')?;
        k.trim_matches(['*', '_', ' '])
            .eq_ignore_ascii_case(key)
            .then(|| v.trim().trim_matches(['*', '_', '`', ' ']))
    })
}

/// The evaluation in `reply`: a line `Score: <0.0–1.0>` (a fraction, or a percentage like
/// `85%`) and a line `Rationale: ...`; what is wrong otherwise.
///
/// ```
/// use orchestrator_workflows::rules::parse_score;
/// let e = parse_score("Looks fine.\nScore: 0.85\nRationale: tests pass").expect("accepted");
/// assert_eq!((e.score, e.rationale.as_str()), (0.85, "tests pass"));
/// assert!(parse_score("Score: 1.5").is_err());
/// ```
pub fn parse_score(reply: &str) -> Result<Evaluation, String> {
    let raw = field(reply, "score").ok_or("the evaluator's reply has no `Score:` line")?;
    let number = raw.split_whitespace().next().unwrap_or("");
    let score = match number.strip_suffix('%') {
        Some(pct) => pct.parse::<f64>().map(|p| p / 100.0),
        None => number.split('/').next().unwrap_or("").parse::<f64>(),
    }
    .map_err(|_| format!("the evaluator's score `{raw}` is not a number"))?;
    if !(0.0..=1.0).contains(&score) {
        return Err(format!(
            "the evaluator's score {score} is not between 0.0 and 1.0"
        ));
    }
    let rationale = field(reply, "rationale").unwrap_or("").to_owned();
    Ok(Evaluation { score, rationale })
}

/// The worker a best-of-N evaluator picked: its `Best: <name>` line, as written.
pub fn parse_best(reply: &str) -> Option<&str> {
    field(reply, "best").filter(|b| !b.is_empty())
}

/// How quality moved between two iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trend {
    /// More than 0.1 better.
    Improving,
    /// Within ±0.1.
    Stable,
    /// More than 0.1 worse.
    Degrading,
}

impl Trend {
    /// Its name in the team's output.
    pub fn as_str(self) -> &'static str {
        match self {
            Trend::Improving => "improving",
            Trend::Stable => "stable",
            Trend::Degrading => "degrading",
        }
    }
}

/// The trend from `previous` to `latest` (seed 002: improving above +0.1, degrading below
/// −0.1, stable within). Compared in hundredths, so that 0.5 → 0.6 is exactly +0.1, stable.
///
/// ```
/// use orchestrator_workflows::rules::{trend, Trend};
/// assert_eq!(trend(0.5, 0.6), Trend::Stable);
/// assert_eq!(trend(0.5, 0.61), Trend::Improving);
/// assert_eq!(trend(0.5, 0.39), Trend::Degrading);
/// ```
pub fn trend(previous: f64, latest: f64) -> Trend {
    // Scores have few digits; rounding to 1e-6 keeps 0.6 - 0.5 from being 0.09999999999999998.
    let delta = ((latest - previous) * 1e6).round() / 1e6;
    if delta > 0.1 {
        Trend::Improving
    } else if delta < -0.1 {
        Trend::Degrading
    } else {
        Trend::Stable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_in_their_forms() {
        assert_eq!(parse_score("**Score:** 0.9").map(|e| e.score), Ok(0.9));
        assert_eq!(parse_score("- score: 85%").map(|e| e.score), Ok(0.85));
        assert_eq!(parse_score("Score: 0.7/1.0").map(|e| e.score), Ok(0.7));
        assert_eq!(parse_score("SCORE: 1").map(|e| e.score), Ok(1.0));
        assert_eq!(parse_score("Score: 0").map(|e| e.score), Ok(0.0));
        assert!(parse_score("no score here")
            .expect_err("refused")
            .contains("no `Score:`"));
        assert!(parse_score("Score: high")
            .expect_err("refused")
            .contains("not a number"));
        assert!(parse_score("Score: -0.1")
            .expect_err("refused")
            .contains("between"));
    }

    #[test]
    fn the_last_score_line_counts() {
        let reply = "Score: 0.2 was my first thought\nRationale: a\nScore: 0.95\nRationale: b";
        assert_eq!(
            parse_score(reply),
            Ok(Evaluation {
                score: 0.95,
                rationale: "b".into()
            })
        );
    }

    #[test]
    fn trend_at_plus_and_minus_a_tenth() {
        assert_eq!(trend(0.4, 0.5), Trend::Stable);
        assert_eq!(trend(0.5, 0.4), Trend::Stable);
        assert_eq!(trend(0.4, 0.51), Trend::Improving);
        assert_eq!(trend(0.51, 0.4), Trend::Degrading);
        assert_eq!(trend(0.7, 0.7), Trend::Stable);
    }

    #[test]
    fn best_pick() {
        assert_eq!(
            parse_best("Best: Second\nRationale: clearer"),
            Some("Second")
        );
        assert_eq!(parse_best("Best:"), None);
        assert_eq!(parse_best("nothing"), None);
    }
}
