//! The prompts of a pipeline's roles (seed 003): each names its own role and signature only,
//! shows the task and the earlier stages' replies, and asks for the contract block with the
//! role's own fields.

use std::fmt::Write as _;

use crate::rules::contract::{role_fields, HEADING};
use crate::rules::Role;

/// An earlier stage's reply.
pub(crate) struct Earlier<'a> {
    pub(crate) stage: &'a str,
    pub(crate) reply: &'a str,
}

/// What the stage is to do, by role.
fn duty(role: Role, debug: Option<(u32, u32)>) -> String {
    match role {
        Role::Architect => "State the design constraints for the task: the modules it touches, \
            the interfaces to keep, the risks. Record them in the repository only if the task asks \
            for documents; otherwise reply with them."
            .to_owned(),
        Role::Planner => "Break the objective into a dependency-safe roadmap of items, each small \
            enough for one pipeline run. Put the roadmap in your reply as a fenced ```json block \
            holding a list of objects `{\"id\": \"<3-64 chars a-z 0-9 ->\", \"task\": \"...\", \
            \"complexity\": \"simple|medium|complex\", \"dependsOn\": [\"<id>\", ...]}` (at most 8 \
            items; ids unique; dependencies only on earlier ids)."
            .to_owned(),
        Role::Designer => "Specify the UI/UX of the task: screens, states, interactions and \
            accessibility, as concrete guidance for the coder."
            .to_owned(),
        Role::Coder => "Implement the task in this repository's files, following the earlier \
            stages' guidance. Keep the change focused; make it build and pass its tests."
            .to_owned(),
        Role::Review => "Verify the change in this repository: build, lint, type-check and run \
            the tests you can, and review quality and security. Do not edit files. Give your \
            verdict: `ship` (every required check passes, nothing critical unresolved), \
            `minor_fixes` (non-critical issues remain) or `needs_work` (critical failures), \
            and list the failures."
            .to_owned(),
        Role::Debugger => {
            let (attempt, remaining) = debug.unwrap_or((1, 0));
            format!(
                "The review found critical failures. Isolate their root cause and give the \
                 coder precise corrective guidance. Do not implement the fix yourself. This is \
                 debug attempt {attempt}; {remaining} remain after it."
            )
        }
    }
}

/// The prompt of a stage with `role`.
pub(crate) fn stage(
    role: Role,
    task: &str,
    earlier: &[Earlier<'_>],
    debug: Option<(u32, u32)>,
) -> String {
    let mut p = format!(
        "You are the {} of a contract-checked pipeline of AI coding agents.\n\n## Task\n{}\n\n\
         ## Your part\n{}\n",
        role.name(),
        task.trim(),
        duty(role, debug)
    );
    if !earlier.is_empty() {
        p.push_str("\n## The earlier stages' replies\n");
        for e in earlier {
            let _ = write!(p, "### {}\n{}\n\n", e.stage, e.reply.trim());
        }
    }
    let mut extra = String::new();
    for field in role_fields(role) {
        let hint = match *field {
            "Verdict" => "ship | minor_fixes | needs_work",
            "Failures" => "the failures found, or none",
            "Attempt" => "the number of this debug attempt",
            _ => "the debug attempts left after this one",
        };
        let value = match (*field, debug) {
            ("Attempt", Some((a, _))) => a.to_string(),
            ("Attempts Remaining", Some((_, r))) => r.to_string(),
            _ => hint.to_owned(),
        };
        let _ = writeln!(extra, "- {field}: {value}");
    }
    let _ = write!(
        p,
        "\nEnd your reply with this block, exactly these fields, filled in (the pipeline stops \
         if it is missing, malformed or signed otherwise):\n\n{HEADING}\n\
         - Status: success | blocked\n- Evidence: concise facts about what you did\n\
         - Next Steps: the recommended next stage or action\n{extra}\
         - Agent Signature: {}\n",
        role.signature()
    );
    p
}
