//! The signed contract every pipeline role ends its reply with (seed 003, SPEC §13), checked
//! fail-closed: a missing block, a missing or wrong signature, a malformed field or
//! `Status: blocked` is a failure naming what was wrong — never healed.
//!
//! ```text
//! ### Orchestrator Contract
//! - Status: success | blocked
//! - Evidence: ...
//! - Next Steps: ...
//! - Agent Signature: <SIGNATURE>
//! ```

/// A pipeline role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Design constraints and architecture.
    Architect,
    /// The roadmap of a bootstrap pipeline.
    Planner,
    /// UI/UX specification.
    Designer,
    /// The implementation.
    Coder,
    /// The verification gate.
    Review,
    /// Root-cause isolation after `needs_work`.
    Debugger,
}

/// The heading that opens the contract block.
pub const HEADING: &str = "### Orchestrator Contract";

impl Role {
    /// Every role.
    pub const ALL: [Role; 6] = [
        Role::Architect,
        Role::Planner,
        Role::Designer,
        Role::Coder,
        Role::Review,
        Role::Debugger,
    ];

    /// Its name (as in a spec's `roles`).
    pub fn name(self) -> &'static str {
        match self {
            Role::Architect => "architect",
            Role::Planner => "planner",
            Role::Designer => "designer",
            Role::Coder => "coder",
            Role::Review => "review",
            Role::Debugger => "debugger",
        }
    }

    /// The role named `name`.
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The signature its replies must carry.
    pub fn signature(self) -> &'static str {
        match self {
            Role::Architect => "CEDAR_COMPASS",
            Role::Planner => "IRON_ATLAS",
            Role::Designer => "AURORA_GRID",
            Role::Coder => "NOVA_CORE",
            Role::Review => "SILVER_KITE",
            Role::Debugger => "EMBER_TRACE",
        }
    }

    /// The fields its contract carries beyond the common four.
    fn own_fields(self) -> &'static [&'static str] {
        match self {
            Role::Review => &["Verdict", "Failures"],
            Role::Debugger => &["Attempt", "Attempts Remaining"],
            _ => &[],
        }
    }
}

/// `Status:` of a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContractStatus {
    /// The role did its part.
    Success,
    /// The role could not.
    Blocked,
}

/// The review's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every check passes: the pipeline ends successfully.
    Ship,
    /// Non-critical issues remain: the pipeline fails.
    MinorFixes,
    /// Critical failures: debugger → coder → review once more.
    NeedsWork,
}

impl Verdict {
    /// Its name in the contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ship => "ship",
            Verdict::MinorFixes => "minor_fixes",
            Verdict::NeedsWork => "needs_work",
        }
    }
}

/// A contract that passed its checks.
#[derive(Debug, Clone, PartialEq)]
pub struct Contract {
    /// Always [`ContractStatus::Success`] once checked (a blocked one is refused).
    pub status: ContractStatus,
    /// `Evidence:`.
    pub evidence: String,
    /// `Next Steps:`.
    pub next_steps: String,
    /// The review's `Verdict:`.
    pub verdict: Option<Verdict>,
    /// The review's `Failures:`.
    pub failures: Option<String>,
    /// The debugger's `Attempt:`.
    pub attempt: Option<u32>,
    /// The debugger's `Attempts Remaining:`.
    pub attempts_remaining: Option<u32>,
}

/// Checks the contract that ends `reply`, written by `role`.
///
/// ```
/// use orchestrator_workflows::rules::{parse_contract, Role, Verdict};
/// let reply = "Reviewed.\n\n### Orchestrator Contract\n- Status: success\n- Evidence: tests pass\n\
///              - Next Steps: none\n- Verdict: ship\n- Agent Signature: SILVER_KITE\n";
/// assert_eq!(parse_contract(reply, Role::Review).expect("accepted").verdict, Some(Verdict::Ship));
/// let wrong = reply.replace("SILVER_KITE", "NOVA_CORE");
/// assert!(parse_contract(&wrong, Role::Review).expect_err("refused").contains("signature"));
/// ```
pub fn parse_contract(reply: &str, role: Role) -> Result<Contract, String> {
    let block = contract_block(reply)?;
    let fields = fields_of(block)?;
    let get = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    };
    let required = |key: &str| match get(key) {
        Some(v) if !v.is_empty() => Ok(v),
        Some(_) => Err(format!("the contract's `{key}` is empty")),
        None => Err(format!("the contract has no `{key}` field")),
    };
    let signature = required("Agent Signature")?;
    if signature != role.signature() {
        return Err(format!(
            "wrong signature `{signature}`: the {} signs `{}`",
            role.name(),
            role.signature()
        ));
    }
    let status = match required("Status")?.to_ascii_lowercase().as_str() {
        "success" => ContractStatus::Success,
        "blocked" => ContractStatus::Blocked,
        other => {
            return Err(format!(
                "the contract's status `{other}` is neither `success` nor `blocked`"
            ))
        }
    };
    let evidence = required("Evidence")?.to_owned();
    let next_steps = required("Next Steps")?.to_owned();
    if status == ContractStatus::Blocked {
        return Err(format!(
            "the {} reports `Status: blocked` (evidence: {evidence}; next steps: {next_steps})",
            role.name()
        ));
    }
    let mut contract = Contract {
        status,
        evidence,
        next_steps,
        verdict: None,
        failures: get("Failures").filter(|f| !f.is_empty()).map(str::to_owned),
        attempt: None,
        attempts_remaining: None,
    };
    match role {
        Role::Review => {
            contract.verdict = Some(match required("Verdict")?.to_ascii_lowercase().as_str() {
                "ship" => Verdict::Ship,
                "minor_fixes" => Verdict::MinorFixes,
                "needs_work" => Verdict::NeedsWork,
                other => {
                    return Err(format!(
                        "the review's verdict `{other}` is none of ship, minor_fixes, needs_work"
                    ))
                }
            });
        }
        Role::Debugger => {
            let number = |key: &str| {
                let v = required(key)?;
                v.parse::<u32>()
                    .map_err(|_| format!("the debugger's `{key}` `{v}` is not a whole number"))
            };
            contract.attempt = Some(number("Attempt")?);
            contract.attempts_remaining = Some(number("Attempts Remaining")?);
        }
        _ => {}
    }
    Ok(contract)
}

/// The text after the last contract heading; what is wrong when there is none.
fn contract_block(reply: &str) -> Result<&str, String> {
    let mut start = None;
    let mut offset = 0;
    for line in reply.split_inclusive('\n') {
        if line.trim().eq_ignore_ascii_case(HEADING) {
            start = Some(offset + line.len());
        }
        offset += line.len();
    }
    start
        .map(|s| &reply[s..])
        .ok_or_else(|| format!("the reply does not end with the contract block (`{HEADING}`)"))
}

/// The block's `- Key: value` fields (continuation lines joined to the field before), or
/// the first line that is neither.
fn fields_of(block: &str) -> Result<Vec<(String, String)>, String> {
    const KEYS: [&str; 8] = [
        "Status",
        "Evidence",
        "Next Steps",
        "Agent Signature",
        "Verdict",
        "Failures",
        "Attempt",
        "Attempts Remaining",
    ];
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut in_fence = false;
    for (i, line) in block.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_fence = !in_fence;
        }
        if trimmed.is_empty() {
            continue;
        }
        let field = (!in_fence && !line.starts_with([' ', '\t']))
            .then(|| trimmed.strip_prefix(['-', '*']))
            .flatten()
            .and_then(|rest| rest.trim().split_once(':'))
            .map(|(k, v)| (k.trim().trim_matches('*').trim(), v))
            .filter(|(k, _)| KEYS.iter().any(|known| known.eq_ignore_ascii_case(k)));
        match (field, fields.last_mut()) {
            (Some((key, value)), _) => {
                if fields.iter().any(|(k, _)| k.eq_ignore_ascii_case(key)) {
                    return Err(format!("the contract gives `{key}` twice"));
                }
                fields.push((key.to_owned(), clean(value)));
            }
            (None, Some((_, value))) => {
                value.push('\n');
                value.push_str(line);
            }
            (None, None) => {
                return Err(format!(
                    "line {} of the contract block is not a `- Field: value` line: `{trimmed}`",
                    i + 1
                ))
            }
        }
    }
    Ok(fields)
}

/// A field's value without the backticks or emphasis a model may put around it.
fn clean(value: &str) -> String {
    value.trim().trim_matches(['`', '*']).trim().to_owned()
}

/// Which extra fields `role`'s contract must carry, for its prompt.
pub fn role_fields(role: Role) -> &'static [&'static str] {
    role.own_fields()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(role: Role, extra: &str) -> String {
        format!(
            "Work done.\n\n### Orchestrator Contract\n- Status: success\n- Evidence: did it\n\
             - Next Steps: review\n{extra}- Agent Signature: {}\n",
            role.signature()
        )
    }

    #[test]
    fn every_role_signs_right() {
        for role in [Role::Architect, Role::Planner, Role::Designer, Role::Coder] {
            let c = parse_contract(&reply(role, ""), role).expect("accepted");
            assert_eq!(c.status, ContractStatus::Success);
            assert_eq!(c.evidence, "did it");
        }
        let debug = reply(Role::Debugger, "- Attempt: 1\n- Attempts Remaining: 1\n");
        let c = parse_contract(&debug, Role::Debugger).expect("accepted");
        assert_eq!((c.attempt, c.attempts_remaining), (Some(1), Some(1)));
    }

    #[test]
    fn signatures_wrong_or_missing() {
        for role in Role::ALL {
            for other in Role::ALL.into_iter().filter(|o| *o != role) {
                let text = reply(role, "").replace(role.signature(), other.signature());
                let err = parse_contract(&text, role).expect_err("refused");
                assert!(err.contains("wrong signature"), "{err}");
                assert!(err.contains(role.signature()), "{err}");
            }
        }
        let unsigned = reply(Role::Coder, "").replace("- Agent Signature: NOVA_CORE\n", "");
        assert!(parse_contract(&unsigned, Role::Coder)
            .expect_err("refused")
            .contains("no `Agent Signature`"));
        let lowercase = reply(Role::Coder, "").replace("NOVA_CORE", "nova_core");
        assert!(parse_contract(&lowercase, Role::Coder).is_err(), "exact");
    }

    #[test]
    fn each_verdict() {
        for (text, verdict) in [
            ("ship", Verdict::Ship),
            ("minor_fixes", Verdict::MinorFixes),
            ("needs_work", Verdict::NeedsWork),
            ("`NEEDS_WORK`", Verdict::NeedsWork),
        ] {
            let r = reply(Role::Review, &format!("- Verdict: {text}\n"));
            assert_eq!(
                parse_contract(&r, Role::Review).expect("accepted").verdict,
                Some(verdict)
            );
        }
        let r = reply(Role::Review, "- Verdict: maybe\n");
        assert!(parse_contract(&r, Role::Review)
            .expect_err("refused")
            .contains("`maybe`"));
        let r = reply(Role::Review, "");
        assert!(parse_contract(&r, Role::Review)
            .expect_err("refused")
            .contains("no `Verdict`"));
        let r = reply(
            Role::Review,
            "- Verdict: needs_work\n- Failures: test_login fails\n",
        );
        let c = parse_contract(&r, Role::Review).expect("accepted");
        assert_eq!(c.failures.as_deref(), Some("test_login fails"));
    }

    #[test]
    fn fail_closed() {
        let none = parse_contract("I did it, trust me.", Role::Coder).expect_err("refused");
        assert!(
            none.contains("does not end with the contract block"),
            "{none}"
        );
        let blocked = reply(Role::Coder, "").replace("Status: success", "Status: blocked");
        assert!(parse_contract(&blocked, Role::Coder)
            .expect_err("refused")
            .contains("blocked"));
        let odd = reply(Role::Coder, "").replace("Status: success", "Status: done");
        assert!(parse_contract(&odd, Role::Coder)
            .expect_err("refused")
            .contains("`done`"));
        let empty = reply(Role::Coder, "").replace("Evidence: did it", "Evidence:");
        assert!(parse_contract(&empty, Role::Coder)
            .expect_err("refused")
            .contains("empty"));
        let twice = reply(Role::Coder, "- Status: success\n");
        assert!(parse_contract(&twice, Role::Coder)
            .expect_err("refused")
            .contains("twice"));
        let debug = reply(Role::Debugger, "- Attempt: one\n- Attempts Remaining: 1\n");
        assert!(parse_contract(&debug, Role::Debugger)
            .expect_err("refused")
            .contains("whole number"));
        let junk = "### Orchestrator Contract\nrandom words\n- Status: success";
        assert!(parse_contract(junk, Role::Coder)
            .expect_err("refused")
            .contains("line 1"));
    }

    #[test]
    fn the_last_block_counts_and_fields_may_span_lines() {
        let quoted = format!(
            "Earlier I saw:\n### Orchestrator Contract\n- Status: blocked\n\nNow:\n{}",
            reply(Role::Coder, "").replace("- Evidence: did it", "- Evidence:\n  - a\n  - b")
        );
        let c = parse_contract(&quoted, Role::Coder).expect("accepted");
        assert_eq!(c.evidence.trim(), "- a\n  - b");
    }
}
