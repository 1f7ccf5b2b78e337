//! Many jobs at once on one repository: worktrees created and removed and commits merged into
//! one branch concurrently, with no lock error and no lost merge.

mod common;

use std::sync::Arc;

use orchestrator_core::conformance::git::write_files;
use orchestrator_core::git::{GitOperations, MergeStyle};
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::{self, git};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_jobs_at_once_lose_no_merge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = common::fixture_repo(dir.path());
    let _guard = fixtures::Checked {
        repo: repo.clone(),
        dir,
    };
    let ops = Arc::new(Git2Operations::new());
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let snap = "orchestrator/snapshot/concurrent";
    ops.update_branch(&repo, snap, &base, None)
        .await
        .expect("branch");

    let jobs = (0..16).map(|i| {
        let (ops, repo, base) = (Arc::clone(&ops), repo.clone(), base.clone());
        tokio::spawn(async move {
            let wt = repo.join(".worktrees").join(format!("job-{i}"));
            ops.create_worktree(&repo, &wt, &base).await?;
            write_files(&wt, &[(format!("out/job-{i}.txt").as_str(), "done\n")])
                .map_err(|e| orchestrator_core::GitError::other("write", e))?;
            let commit = ops.commit_all(&wt, &format!("[Plan] job {i}")).await?;
            let commit =
                commit.ok_or_else(|| orchestrator_core::GitError::other("commit", "no change"))?;
            ops.merge_into_branch(
                &repo,
                snap,
                &commit,
                &format!("merge job {i}"),
                MergeStyle::MergeCommit,
            )
            .await?;
            ops.remove_worktree(&repo, &wt).await?;
            Ok::<_, orchestrator_core::GitError>(commit)
        })
    });
    let mut commits = Vec::new();
    for (i, job) in futures::future::join_all(jobs)
        .await
        .into_iter()
        .enumerate()
    {
        match job {
            Ok(Ok(commit)) => commits.push(commit),
            Ok(Err(e)) => panic!("job {i} failed: {e:?}"),
            Err(e) => panic!("job {i} panicked: {e}"),
        }
    }
    let tip = ops
        .branch_tip(&repo, snap)
        .await
        .expect("tip")
        .expect("branch");
    for commit in &commits {
        assert!(
            ops.is_ancestor(&repo, commit, &tip)
                .await
                .expect("ancestor"),
            "lost merge of {commit}"
        );
    }
    let files = git(&repo, &["ls-tree", "-r", "--name-only", &tip, "out/"]);
    assert_eq!(
        files.lines().count(),
        16,
        "every job's file is in the snapshot: {files}"
    );
    assert_eq!(
        git(
            &repo,
            &["rev-list", "--count", "--merges", &format!("{base}..{tip}")]
        ),
        "16"
    );
    assert!(
        fixtures::cli_linked_worktrees(&repo).is_empty(),
        "all worktrees removed"
    );
    assert!(ops.list_worktrees(&repo).await.expect("list").is_empty());
}

/// Two processes creating the same branch at once (each its own `Git2Operations`, as two
/// `orchestrator` processes have): a create from "absent" succeeds for exactly one of them,
/// every time. libgit2 checks that a new reference is absent before taking its lock, so a
/// plain create lets the second writer overwrite the first's branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_branch_created_from_absent_by_racing_writers_has_one_winner() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = common::fixture_repo(dir.path());
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let writers: Vec<Arc<Git2Operations>> =
        (0..6).map(|_| Arc::new(Git2Operations::new())).collect();
    for round in 0..60 {
        let branch = format!("orchestrator/race-{round}");
        let tries = writers.iter().map(|ops| {
            let (ops, repo, base, branch) =
                (Arc::clone(ops), repo.clone(), base.clone(), branch.clone());
            tokio::spawn(async move { ops.update_branch(&repo, &branch, &base, None).await })
        });
        let won = futures::future::join_all(tries)
            .await
            .into_iter()
            .filter(|r| matches!(r, Ok(Ok(()))))
            .count();
        assert_eq!(won, 1, "round {round}: {won} writers created {branch}");
    }
}
