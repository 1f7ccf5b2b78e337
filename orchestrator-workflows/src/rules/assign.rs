//! The orchestrator's task assignments (seed 002): `@worker:<name> <task>`, the task running
//! to the next `@worker:`, an `@end` or the end of the reply — the seed's
//! `@worker:(\S+)\s*([\s\S]*?)(?:@end|(?=@worker:)|$)`.

/// One assignment as the orchestrator wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The worker's name as written (matched with [`match_worker`]).
    pub worker: String,
    /// The task, trimmed.
    pub task: String,
}

const TAG: &str = "@worker:";
const END: &str = "@end";

/// The assignments in `reply`, in order.
///
/// ```
/// use orchestrator_workflows::rules::parse_assignments;
/// let a = parse_assignments("Plan:\n@worker:alice Write the parser\nwith tests\n@worker:bob Docs @end ignored");
/// assert_eq!(a.len(), 2);
/// assert_eq!(a[0].task, "Write the parser\nwith tests");
/// assert_eq!((a[1].worker.as_str(), a[1].task.as_str()), ("bob", "Docs"));
/// ```
pub fn parse_assignments(reply: &str) -> Vec<Assignment> {
    let mut out = Vec::new();
    let mut rest = reply;
    while let Some(at) = rest.find(TAG) {
        let after = &rest[at + TAG.len()..];
        let name_len = after
            .find(|c: char| c.is_whitespace())
            .unwrap_or(after.len());
        if name_len == 0 {
            // `\S+` needs one character: this tag assigns nothing; look further on.
            rest = after;
            continue;
        }
        let worker = &after[..name_len];
        let body = &after[name_len..];
        // The lazy body stops at the first `@end` or `@worker:`, whichever comes first.
        let stop = [body.find(END), body.find(TAG)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(body.len());
        out.push(Assignment {
            worker: worker.to_owned(),
            task: body[..stop].trim().to_owned(),
        });
        rest = &body[stop..];
        if let Some(r) = rest.strip_prefix(END) {
            rest = r;
        }
    }
    out
}

/// The worker of `workers` that `written` names: case-insensitively, ignoring punctuation
/// around it (`Alice,`, `**bob**`), else the one worker whose name contains it or is
/// contained in it (fuzzy, as the seed); `None` when none or several match.
///
/// ```
/// use orchestrator_workflows::rules::match_worker;
/// let workers = ["tester", "code-reviewer"];
/// assert_eq!(match_worker("Tester", &workers), Some("tester"));
/// assert_eq!(match_worker("reviewer:", &workers), Some("code-reviewer"));
/// assert_eq!(match_worker("nobody", &workers), None);
/// ```
pub fn match_worker<'w>(written: &str, workers: &[&'w str]) -> Option<&'w str> {
    let wanted = normalize(written);
    if wanted.is_empty() {
        return None;
    }
    if let Some(w) = workers.iter().find(|w| normalize(w) == wanted) {
        return Some(w);
    }
    let mut fuzzy = workers.iter().filter(|w| {
        let name = normalize(w);
        name.contains(&wanted) || wanted.contains(&name)
    });
    match (fuzzy.next(), fuzzy.next()) {
        (Some(w), None) => Some(w),
        _ => None,
    }
}

/// Lowercase, with everything but letters, digits, `-` and `_` trimmed off both ends.
fn normalize(name: &str) -> String {
    name.trim_matches(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pairs(reply: &str) -> Vec<(String, String)> {
        parse_assignments(reply)
            .into_iter()
            .map(|a| (a.worker, a.task))
            .collect()
    }

    #[test]
    fn the_seeds_example() {
        let reply = "@worker:worker-1 Implement the auth module\n@worker:worker-2 Write tests for the auth module";
        assert_eq!(
            pairs(reply),
            [
                ("worker-1".into(), "Implement the auth module".into()),
                ("worker-2".into(), "Write tests for the auth module".into())
            ]
        );
    }

    #[test]
    fn multi_line_tasks_run_to_the_next_tag_or_end() {
        let reply = "Intro text.\n@worker:alice Step one\n  - detail a\n  - detail b\n\n@worker:bob Step two\n@end\nClosing words that belong to nobody.";
        assert_eq!(
            pairs(reply),
            [
                (
                    "alice".into(),
                    "Step one\n  - detail a\n  - detail b".into()
                ),
                ("bob".into(), "Step two".into())
            ]
        );
    }

    #[test]
    fn end_stops_a_task_and_text_after_it_is_nobodys() {
        assert_eq!(
            pairs("@worker:a fix it @end then @worker:b more"),
            [("a".into(), "fix it".into()), ("b".into(), "more".into())]
        );
        assert_eq!(pairs("@worker:a only @end"), [("a".into(), "only".into())]);
    }

    #[test]
    fn no_tags_no_assignments_and_a_bare_tag_assigns_nothing() {
        assert!(pairs("I did it myself.").is_empty());
        assert!(pairs("@worker: ").is_empty());
        assert_eq!(pairs("@worker:x"), [("x".into(), String::new())]);
    }

    #[test]
    fn matching_is_case_insensitive_and_fuzzy_but_never_ambiguous() {
        let workers = ["alice", "bob", "alice-two"];
        assert_eq!(match_worker("ALICE", &workers), Some("alice"));
        assert_eq!(match_worker("@bob.", &workers), Some("bob"));
        assert_eq!(match_worker("two", &workers), Some("alice-two"));
        assert_eq!(match_worker("ali", &workers), None, "alice and alice-two");
        assert_eq!(match_worker("carol", &workers), None);
        assert_eq!(match_worker("", &workers), None);
    }

    proptest! {
        #[test]
        fn every_written_assignment_is_found_in_order(
            tasks in proptest::collection::vec(("[a-z]{3,8}", "[a-zA-Z ,.\n]{0,40}"), 1..6)
        ) {
            let reply: String = tasks
                .iter()
                .map(|(w, t)| format!("@worker:{w} {t}\n"))
                .collect();
            let found = parse_assignments(&reply);
            prop_assert_eq!(found.len(), tasks.len());
            for (a, (w, t)) in found.iter().zip(&tasks) {
                prop_assert_eq!(&a.worker, w);
                prop_assert_eq!(&a.task, t.trim());
            }
        }
    }
}
