//! Tests of [`MemoryGit`](super::MemoryGit): the shared conformance suite, plus unit tests of
//! branch-name rules, ignore rules and line diffs.

use super::diff::line_changes;
use super::ignore::{ignored, IgnoreRule};
use super::refs::check_branch_name;
use super::*;
use crate::conformance::git::{run_all, GitFixture, INITIAL_FILES};

#[tokio::test]
async fn memory_git_passes_the_conformance_suite() {
    run_all(|| async {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = dir.path().join("repo");
        let git = MemoryGit::new();
        git.init_repo(&repo, "main", INITIAL_FILES)
            .expect("init repo");
        let switcher = git.clone();
        GitFixture {
            git: Arc::new(git),
            repo,
            default_branch: "main".to_string(),
            switch: Arc::new(move |repo: &Path, rev: &str| {
                switcher.switch(repo, rev).map_err(|e| e.to_string())
            }),
            guard: Box::new(dir),
        }
    })
    .await;
}

#[test]
fn branch_names_follow_git_rules() {
    for bad in [
        "", "-x", "a..b", "a b", "x.lock", "a/.b", "a~1", "a@{1}", "a/", "a//b", "x.",
    ] {
        assert!(
            check_branch_name(bad).is_err(),
            "{bad:?} should be rejected"
        );
    }
    for good in [
        "main",
        "orchestrator/snapshot/abc-123",
        "feature_x.y",
        "a@b",
    ] {
        assert!(
            check_branch_name(good).is_ok(),
            "{good:?} should be accepted"
        );
    }
}

#[test]
fn ignore_rules_match_like_git() {
    let rules: Vec<IgnoreRule> = ["target/", "*.log", "/only-top", "docs/tmp", "!keep.log"]
        .iter()
        .filter_map(|l| IgnoreRule::parse(l))
        .collect();
    assert!(ignored(&rules, "target", true));
    assert!(ignored(&rules, "a/target", true));
    assert!(!ignored(&rules, "target", false));
    assert!(ignored(&rules, "x/debug.log", false));
    assert!(!ignored(&rules, "keep.log", false));
    assert!(ignored(&rules, "only-top", false));
    assert!(!ignored(&rules, "a/only-top", false));
    assert!(ignored(&rules, "docs/tmp", false));
}

#[test]
fn line_changes_are_minimal() {
    assert_eq!(line_changes(b"a\nb\nc\n", b"a\nB\nc\nd\n"), (1, 2));
    assert_eq!(line_changes(b"", b"x\ny"), (0, 2));
    assert_eq!(line_changes(b"same\n", b"same\n"), (0, 0));
}
