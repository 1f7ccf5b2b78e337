//! The help texts tell the truth about this build (issue 11, item 9): every subcommand has a
//! help, none says it is missing from the build, the exit codes listed are the ones the binary
//! returns, the commands and flags the texts point to exist, and flags a command ignores are
//! not offered.

mod common;

use std::process::Command;

use common::{Repo, BIN};
use orchestrator_testkit::fixtures::job;
use serde_json::json;

/// `orchestrator ARGS` without a repository; exit code and stdout.
fn help(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("run orchestrator");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The subcommand names listed under `Commands:` of the top-level help (without `help`).
fn subcommands(top: &str) -> Vec<String> {
    top.lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every help text: the top level and each subcommand's long help.
fn all_helps() -> Vec<(String, String)> {
    let (code, top) = help(&["--help"]);
    assert_eq!(code, 0, "{top}");
    let mut helps = vec![("orchestrator".to_owned(), top.clone())];
    for name in subcommands(&top) {
        let (code, text) = help(&[&name, "--help"]);
        assert_eq!(code, 0, "{name} --help:\n{text}");
        helps.push((name, text));
    }
    helps
}

#[test]
fn every_subcommand_has_a_help_that_claims_nothing_missing() {
    let helps = all_helps();
    let names: Vec<&str> = helps[1..].iter().map(|(name, _)| name.as_str()).collect();
    for expected in [
        "run", "status", "list", "logs", "retry", "resume", "pause", "cancel", "recover",
        "archive", "graph", "mcp", "demo",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for (name, text) in &helps {
        let lower = text.to_lowercase();
        for stale in [
            "not part of this build",
            "not yet implemented",
            "not implemented",
            "todo",
        ] {
            assert!(
                !lower.contains(stale),
                "{name} --help says {stale:?}:\n{text}"
            );
        }
        // The short help is the first paragraph of the long one.
        if name != "orchestrator" {
            let (code, short) = help(&[name.as_str(), "-h"]);
            assert_eq!(code, 0);
            let first = short.lines().next().unwrap_or_default();
            assert!(
                text.starts_with(first.trim_end_matches('.')),
                "{name}: {first}"
            );
        }
    }
}

#[test]
fn help_texts_point_only_to_real_commands_and_flags() {
    let helps = all_helps();
    let names: Vec<String> = helps[1..].iter().map(|(name, _)| name.clone()).collect();
    for (name, text) in &helps {
        // Every `orchestrator <cmd> ...` quoted in the prose names a real command.
        for quoted in text.split('`').skip(1).step_by(2) {
            let mut words = quoted.split_whitespace();
            if words.next() != Some("orchestrator") {
                continue;
            }
            if let Some(command) = words.next() {
                assert!(
                    names.iter().any(|n| n == command),
                    "{name} --help mentions `{quoted}`"
                );
            }
        }
    }
    // The top level sends the reader to `run --worktree-root` and `run --help` for the slots.
    let run = &helps.iter().find(|(name, _)| name == "run").expect("run").1;
    for flag in [
        "--worktree-root",
        "--machine-slots",
        "--max-parallel",
        "--json",
    ] {
        assert!(run.contains(flag), "run --help lacks {flag}");
    }
    assert!(
        run.contains("Ctrl-C"),
        "run --help says what an interrupt does"
    );
    // mcp serves today: it says on what and names a tool.
    let mcp = &helps.iter().find(|(name, _)| name == "mcp").expect("mcp").1;
    assert!(
        mcp.contains("stdin/stdout") && mcp.contains("create_copilot_plan"),
        "{mcp}"
    );
    // Commands that print no job output do not offer --verbose (still accepted, hidden).
    for steer in ["pause", "cancel", "recover", "archive"] {
        let text = &helps.iter().find(|(name, _)| name == steer).expect(steer).1;
        assert!(
            !text.contains("--verbose"),
            "{steer} --help offers --verbose:\n{text}"
        );
    }
    for runs_jobs in ["run", "retry", "resume", "demo"] {
        let text = &helps
            .iter()
            .find(|(name, _)| name == runs_jobs)
            .expect(runs_jobs)
            .1;
        assert!(
            text.contains("--verbose"),
            "{runs_jobs} --help lacks --verbose"
        );
    }
    let (code, _) = help(&["pause", "-v", "--help"]);
    assert_eq!(code, 0, "pause still accepts -v");
}

/// The codes the top-level help lists, each with its text up to the next code.
fn listed_exit_codes(top: &str) -> Vec<(i32, String)> {
    let paragraph = top
        .split("\n\n")
        .find(|p| p.trim_start().starts_with("Exit codes:"))
        .expect("an `Exit codes:` paragraph");
    let body = paragraph.trim_start().trim_start_matches("Exit codes:");
    body.split(';')
        .filter_map(|part| {
            let part = part.trim();
            let (code, text) = part.split_once(' ')?;
            Some((code.parse().ok()?, text.to_owned()))
        })
        .collect()
}

#[test]
fn the_exit_codes_listed_are_the_ones_returned() {
    let (_, top) = help(&["--help"]);
    let listed = listed_exit_codes(&top);
    let codes: Vec<i32> = listed.iter().map(|(code, _)| *code).collect();
    assert_eq!(codes, [0, 1, 2, 3, 4], "{top}");
    let text = |code: i32| listed[code as usize].1.clone();
    assert!(
        text(1).contains("failed") && text(1).contains("paused"),
        "{}",
        text(1)
    );
    assert!(text(2).contains("invalid input"), "{}", text(2));

    let repo = Repo::new();
    // 0: the plan succeeded.
    let ok = repo.plan(
        "ok.json",
        &json!({"name": "ok", "jobs": [job("one", "echo ok > ok.txt", &[])]}),
    );
    repo.run(&["run", ok.to_str().expect("utf-8"), "-q"])
        .expect_code(0);
    // 1: the plan failed; `status` of it is still 0 ("whatever the plan's status").
    let bad = repo.plan(
        "bad.json",
        &json!({"name": "bad", "jobs": [job("one", "false", &[])]}),
    );
    repo.run(&["run", bad.to_str().expect("utf-8"), "-q"])
        .expect_code(1);
    repo.run(&["status"]).expect_code(0);
    // 2: invalid input — a bad plan file, an unknown plan id, a bad argument.
    let broken = repo.plan(
        "broken.json",
        &json!({"name": "broken", "jobs": [job("one", "true", &["nope"])]}),
    );
    repo.run(&["run", broken.to_str().expect("utf-8"), "-q"])
        .expect_code(2);
    repo.run(&["status", "no-such-plan"]).expect_code(2);
    repo.run(&["graph", "x", "--format", "png"]).expect_code(2);
    // 3: anything else, e.g. a store that cannot be read (`.orchestrator` is a file).
    let damaged = Repo::new();
    damaged.write(".orchestrator", "not a folder\n");
    let list = damaged.run(&["list"]);
    list.expect_code(3);
    assert!(list.stderr.contains(".orchestrator"), "{}", list.stderr);
    // 4: `--until-waiting` and a job waiting for approval.
    let gated = repo.plan(
        "gated.json",
        &json!({"name": "gated", "jobs": [
            {"producerId": "one", "task": "t", "work": "true", "dependencies": [],
             "approval": "before", "expectsNoChanges": true},
        ]}),
    );
    repo.run(&[
        "run",
        gated.to_str().expect("utf-8"),
        "-q",
        "--until-waiting",
    ])
    .expect_code(4);
}
