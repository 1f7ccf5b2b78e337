//! Git through a shared remote (SPEC §16): in-memory merges of a job's dependencies, and
//! commits pushed to and fetched from a bare repository, checked with the `git` CLI.

mod common;

use orchestrator_core::git::{GitError, GitOperations};
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::git;

#[tokio::test]
async fn merge_commits_equals_the_cli_merge_and_moves_no_ref() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = common::fixture_repo(dir.path());
    let ops = Git2Operations::new();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let refs_before = git(&repo, &["for-each-ref"]);
    let a = common::commit_in(&ops, &repo, "a", &base, &[("a.txt", "a\n")]).await;
    let b = common::commit_in(&ops, &repo, "b", &base, &[("b.txt", "b\n")]).await;
    let c = common::commit_in(&ops, &repo, "c", &a, &[("c.txt", "c\n")]).await;

    // One commit: itself. A contained one adds nothing.
    assert_eq!(
        ops.merge_commits(&repo, std::slice::from_ref(&a), "m")
            .await
            .expect("merge"),
        a
    );
    assert_eq!(
        ops.merge_commits(&repo, &[c.clone(), a.clone()], "m")
            .await
            .expect("merge"),
        c
    );
    let merged = ops
        .merge_commits(&repo, &[c.clone(), b.clone()], "merge b")
        .await
        .expect("merge");
    let cli_tree = git(&repo, &["merge-tree", "--write-tree", &c, &b]);
    assert_eq!(
        git(&repo, &["rev-parse", &format!("{merged}^{{tree}}")]),
        cli_tree
    );
    assert_eq!(git(&repo, &["rev-parse", &format!("{merged}^1")]), c);
    assert_eq!(git(&repo, &["rev-parse", &format!("{merged}^2")]), b);
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%s", &merged]),
        "merge b"
    );
    assert_eq!(git(&repo, &["for-each-ref"]), refs_before, "no ref moved");

    // A conflict names its file; nothing is written anywhere.
    let x = common::commit_in(&ops, &repo, "x", &base, &[("same.txt", "x\n")]).await;
    let y = common::commit_in(&ops, &repo, "y", &base, &[("same.txt", "y\n")]).await;
    match ops.merge_commits(&repo, &[x, y], "m").await {
        Err(GitError::MergeConflict { paths, .. }) => assert_eq!(paths, vec!["same.txt"]),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(
        ops.merge_commits(&repo, &[], "m").await.is_err(),
        "nothing to merge"
    );
}

#[tokio::test]
async fn a_commit_travels_through_a_bare_remote_to_a_fresh_clone_and_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = common::fixture_repo(dir.path());
    let ops = Git2Operations::new();
    let remote = dir.path().join("remote.git");
    git(
        dir.path(),
        &[
            "init",
            "--quiet",
            "--bare",
            remote.to_str().expect("utf-8 path"),
        ],
    );
    let url = format!("file://{}", remote.display());
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let reference = "refs/orchestrator/jobs/p1/n1/1/base";

    ops.push(&repo, &url, &base, reference).await.expect("push");
    assert_eq!(git(&remote, &["rev-parse", reference]), base);

    // A worker's clone: empty at first, gets the commit and its history.
    let clone = dir.path().join("clone");
    git(
        dir.path(),
        &["init", "--quiet", clone.to_str().expect("utf-8 path")],
    );
    assert_eq!(
        ops.fetch(&clone, &url, reference).await.expect("fetch"),
        base
    );
    assert_eq!(
        git(&clone, &["rev-parse", reference]),
        base,
        "kept under the same ref"
    );
    let result = common::commit_in(
        &ops,
        &clone,
        "job",
        &base,
        &[("out.txt", "made remotely\n")],
    )
    .await;
    let back = "refs/orchestrator/jobs/p1/n1/1/result";
    ops.push(&clone, &url, &result, back)
        .await
        .expect("push result");
    // Pushing again over it (a retry of the same attempt) replaces it.
    ops.push(&clone, &url, &result, back)
        .await
        .expect("push again");

    assert_eq!(
        ops.fetch(&repo, &url, back).await.expect("fetch result"),
        result
    );
    assert_eq!(
        git(&repo, &["show", &format!("{result}:out.txt")]),
        "made remotely"
    );

    // Bad input names the problem.
    let e = ops
        .push(&repo, &url, &base, "not-a-ref")
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("not a full ref name"), "{e}");
    let e = ops
        .fetch(&repo, &url, "refs/orchestrator/jobs/none")
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("fetch"), "{e}");
    let gone = format!("file://{}", dir.path().join("nowhere.git").display());
    let e = ops
        .push(&repo, &gone, &base, reference)
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("nowhere.git"), "{e}");
}

#[tokio::test]
async fn a_plans_job_refs_are_deleted_together_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = common::fixture_repo(dir.path());
    let ops = Git2Operations::new();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    for name in [
        "refs/orchestrator/jobs/p1/a/1/result",
        "refs/orchestrator/jobs/p1/parent/child/2/result",
        "refs/orchestrator/jobs/p10/a/1/result",
    ] {
        ops.set_ref(&repo, name, &base).await.expect("set ref");
    }
    let n = ops
        .delete_refs_under(&repo, "refs/orchestrator/jobs/p1/")
        .await
        .expect("delete");
    assert_eq!(n, 2);
    assert_eq!(
        git(
            &repo,
            &["for-each-ref", "--format=%(refname)", "refs/orchestrator/"]
        ),
        "refs/orchestrator/jobs/p10/a/1/result",
        "another plan's refs (a longer id with the same start) stay"
    );
    assert!(
        ops.delete_refs_under(&repo, "refs/heads/").await.is_err(),
        "only the SDK's refs"
    );
}
