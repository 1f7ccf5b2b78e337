//! Crash repair: lock files a killed process left in a plan's worktree and on its branches are
//! removed (and only those), after which commits and ref updates work again.

mod common;

use common::fixture_repo;
use orchestrator_core::GitOperations;
use orchestrator_git::Git2Operations;
use orchestrator_testkit::fixtures::{git, git_output};

#[tokio::test]
async fn stale_locks_of_the_plans_worktrees_and_branches_are_removed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = fixture_repo(tmp.path());
    let ops = Git2Operations::new();
    let base = ops.resolve(&repo, "HEAD").await.expect("head");
    let wt = repo.join(".worktrees").join("job1");
    ops.create_worktree(&repo, &wt, &base)
        .await
        .expect("worktree");
    ops.update_branch(&repo, "orchestrator/plan", &base, None)
        .await
        .expect("branch");

    // What a kill in the middle of a commit and of a ref update leaves behind.
    let admin = git(&wt, &["rev-parse", "--git-dir"]);
    let head_lock = std::path::Path::new(&admin).join("HEAD.lock");
    std::fs::write(&head_lock, "").expect("lock");
    let ref_lock = repo.join(".git/refs/heads/orchestrator/plan.lock");
    std::fs::write(&ref_lock, "").expect("lock");
    let other_lock = repo.join(".git/refs/heads/user-branch.lock");
    std::fs::write(&other_lock, "").expect("lock");
    std::fs::write(wt.join("new.txt"), "x").expect("write");
    assert!(
        ops.commit_all(&wt, "blocked").await.is_err(),
        "the lock blocks a commit"
    );

    let missing = repo.join(".worktrees").join("never-created");
    let removed = ops
        .remove_stale_locks(
            &repo,
            &[wt.clone(), missing],
            &[
                "orchestrator/plan".to_owned(),
                "orchestrator/absent".to_owned(),
            ],
        )
        .await
        .expect("repair");
    assert_eq!(removed.len(), 2, "{removed:?}");
    assert!(!head_lock.exists() && !ref_lock.exists());
    assert!(
        other_lock.exists(),
        "a branch the plan does not own is left alone"
    );
    std::fs::remove_file(&other_lock).expect("clean up");

    let commit = ops.commit_all(&wt, "works again").await.expect("commit");
    assert!(commit.is_some());
    ops.update_branch(
        &repo,
        "orchestrator/plan",
        &commit.unwrap_or_default(),
        Some(&base),
    )
    .await
    .expect("ref update works again");
    let fsck = git_output(&repo, &["fsck", "--full"]);
    assert!(fsck.status.success());
}

#[tokio::test]
async fn registrations_whose_folder_a_crash_removed_are_forgotten() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = fixture_repo(tmp.path());
    let ops = Git2Operations::new();
    let base = ops.resolve(&repo, "HEAD").await.expect("head");
    let root = repo.join(".worktrees");
    let (gone, locked, live) = (root.join("gone"), root.join("locked"), root.join("live"));
    for wt in [&gone, &locked, &live] {
        ops.create_worktree(&repo, wt, &base)
            .await
            .expect("worktree");
    }
    git(&repo, &["worktree", "lock", "--reason", "mine", "locked"]);
    // What a kill between deleting (or pooling) a finished job's folder and deleting its
    // registration leaves; the root is otherwise empty, so the orphan sweep sees nothing.
    std::fs::remove_dir_all(&gone).expect("delete");
    std::fs::remove_dir_all(&locked).expect("delete");
    let listed = |repo: &std::path::Path| {
        git(repo, &["worktree", "list", "--porcelain"])
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .map(std::path::PathBuf::from)
            .skip(1)
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(&repo).len(), 3, "git still lists the dangling ones");
    let removed = ops
        .remove_stale_locks(&repo, &[], &[])
        .await
        .expect("repair");
    assert!(removed.is_empty(), "no lock files: {removed:?}");
    let mut left: Vec<String> = listed(&repo)
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec!["live".to_owned(), "locked".to_owned()],
        "a registration whose folder is gone is forgotten unless it is locked, as git does"
    );
    assert!(
        live.join("README.md").exists(),
        "a live worktree is untouched"
    );
}

#[tokio::test]
async fn an_unfinished_creation_is_taken_for_one_under_way_until_it_is_old() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = fixture_repo(tmp.path());
    let ops = Git2Operations::new();
    let admins = repo.join(".git/worktrees");
    // What another process's creation looks like for a moment (and a crash's for ever): a
    // registration marked as being created whose folder has no `.git` file yet, and a
    // registration folder with nothing in it yet.
    let creating = admins.join("creating");
    std::fs::create_dir_all(&creating).expect("mkdir");
    std::fs::write(creating.join("locked"), "initializing\n").expect("lock");
    let missing = repo.join(".worktrees/creating/.git");
    std::fs::write(creating.join("gitdir"), format!("{}\n", missing.display())).expect("gitdir");
    let empty = admins.join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    ops.remove_stale_locks(&repo, &[], &[])
        .await
        .expect("repair");
    assert!(
        creating.exists() && empty.exists(),
        "a creation that may be under way is left alone"
    );
    // Old enough to be a crash's.
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for admin in [&creating, &empty] {
        std::fs::File::open(admin)
            .and_then(|f| f.set_modified(long_ago))
            .expect("age");
    }
    ops.remove_stale_locks(&repo, &[], &[])
        .await
        .expect("repair");
    assert!(
        !creating.exists(),
        "an old unfinished creation is forgotten"
    );
    assert!(!empty.exists(), "an old empty registration is forgotten");
}
