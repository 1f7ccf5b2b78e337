//! Cases on commits ids and branch refs: resolving, branch tips, the default and current branch,
//! compare-and-swap updates, name validation, protected branches, deletion and ancestry.

use crate::git::GitError;

use super::case::{Case, UNKNOWN_COMMIT};

pub(super) async fn resolve_and_branch_tips(c: &Case<'_>) {
    let base = c.base().await;
    c.same(base.len(), 40, "a commit id is 40 hex digits");
    let git = c.git();
    c.same(
        c.ok("resolve(branch)", git.resolve(c.repo(), c.main()).await),
        base.clone(),
        "resolve(default branch)",
    );
    c.same(
        c.ok("resolve(HEAD)", git.resolve(c.repo(), "HEAD").await),
        base.clone(),
        "resolve(HEAD)",
    );
    c.same(
        c.ok("resolve(id)", git.resolve(c.repo(), &base).await),
        base.clone(),
        "resolve(commit id)",
    );
    let full = format!("refs/heads/{}", c.main());
    c.same(
        c.ok("resolve(refs/heads/..)", git.resolve(c.repo(), &full).await),
        base.clone(),
        "resolve(full ref)",
    );
    let e = c.err(
        "resolve(missing)",
        git.resolve(c.repo(), "no-such-branch").await,
    );
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("resolve(missing) is NotFound, got {e:?}"),
    );
    let e = c.err(
        "resolve(unknown id)",
        git.resolve(c.repo(), UNKNOWN_COMMIT).await,
    );
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("resolve(unknown id) is NotFound, got {e:?}"),
    );
    c.same(
        c.tip("no-such-branch").await,
        None,
        "branch_tip of a missing branch",
    );
}

pub(super) async fn default_and_current_branch(c: &Case<'_>) {
    let git = c.git();
    c.same(
        c.ok("default_branch", git.default_branch(c.repo()).await),
        c.main().to_string(),
        "default_branch",
    );
    c.same(
        c.ok("current_branch", git.current_branch(c.repo()).await),
        Some(c.main().to_string()),
        "current_branch of the fixture",
    );
    let base = c.base().await;
    c.switch(&base);
    c.same(
        c.ok("current_branch", git.current_branch(c.repo()).await),
        None,
        "current_branch when detached",
    );
    c.same(
        c.ok("resolve(HEAD)", git.resolve(c.repo(), "HEAD").await),
        base,
        "resolve(HEAD) when detached",
    );
    c.same(
        c.ok("default_branch", git.default_branch(c.repo()).await),
        c.main().to_string(),
        "default_branch when detached",
    );
}

pub(super) async fn update_branch_is_compare_and_swap(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, next) = c.commit_on("cas", &base, &[("cas.txt", "x\n")], &[]).await;
    let b = "feature/cas";
    c.ok(
        "create with expected None",
        git.update_branch(c.repo(), b, &base, None).await,
    );
    c.same(c.tip(b).await, Some(base.clone()), "created branch tip");

    let e = c.err(
        "create again with expected None",
        git.update_branch(c.repo(), b, &next, None).await,
    );
    match e {
        GitError::RefChanged {
            expected, actual, ..
        } => {
            c.same(expected, None, "RefChanged.expected when creating");
            c.same(
                actual,
                Some(base.clone()),
                "RefChanged.actual when creating",
            );
        }
        other => c.check(
            false,
            format!("expected RefChanged when the branch exists, got {other:?}"),
        ),
    }
    c.same(
        c.tip(b).await,
        Some(base.clone()),
        "tip unchanged after a failed create",
    );

    let e = c.err(
        "move with wrong expected",
        git.update_branch(c.repo(), b, &next, Some(&next)).await,
    );
    match e {
        GitError::RefChanged {
            expected, actual, ..
        } => {
            c.same(expected, Some(next.clone()), "RefChanged.expected");
            c.same(actual, Some(base.clone()), "RefChanged.actual");
        }
        other => c.check(
            false,
            format!("expected RefChanged for a wrong expected value, got {other:?}"),
        ),
    }
    c.same(
        c.tip(b).await,
        Some(base.clone()),
        "tip unchanged after a failed move",
    );

    c.ok(
        "move with right expected",
        git.update_branch(c.repo(), b, &next, Some(&base)).await,
    );
    c.same(c.tip(b).await, Some(next.clone()), "tip after a move");
    c.ok(
        "move to the same value",
        git.update_branch(c.repo(), b, &next, Some(&next)).await,
    );
    c.same(c.tip(b).await, Some(next.clone()), "tip after a no-op move");
    c.ok(
        "move backwards",
        git.update_branch(c.repo(), b, &base, Some(&next)).await,
    );
    c.same(
        c.tip(b).await,
        Some(base.clone()),
        "a branch may be reset to an ancestor",
    );

    let e = c.err(
        "missing branch, expected Some",
        git.update_branch(c.repo(), "feature/absent", &next, Some(&base))
            .await,
    );
    match e {
        GitError::RefChanged { actual, .. } => {
            c.same(actual, None, "RefChanged.actual of a missing branch")
        }
        other => c.check(
            false,
            format!("expected RefChanged for a missing branch, got {other:?}"),
        ),
    }
    c.same(
        c.tip("feature/absent").await,
        None,
        "a failed update creates nothing",
    );

    let e = c.err(
        "unknown new commit",
        git.update_branch(c.repo(), "feature/ghost", UNKNOWN_COMMIT, None)
            .await,
    );
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("unknown commit is NotFound, got {e:?}"),
    );
    c.same(
        c.tip("feature/ghost").await,
        None,
        "no branch for an unknown commit",
    );
}

pub(super) async fn branch_names_are_validated(c: &Case<'_>) {
    let base = c.base().await;
    let bad = [
        "",
        "-leading-dash",
        "a..b",
        "with space",
        "ends.lock",
        "a~b",
        "a^b",
        "a:b",
        "a?b",
        "a*b",
        "a[b",
        "trailing/",
        "/leading",
        "a//b",
        "dot.",
        ".hidden",
        "x/.hidden",
        "a@{b",
        "back\\slash",
        "HEAD",
        "tab\there",
    ];
    for name in bad {
        let e = c.err(
            &format!("update_branch({name:?})"),
            c.git().update_branch(c.repo(), name, &base, None).await,
        );
        c.check(
            matches!(&e, GitError::InvalidBranchName { name: n, .. } if n == name),
            format!("{name:?} is an InvalidBranchName, got {e:?}"),
        );
        let e = c.err(
            &format!("delete_branch({name:?})"),
            c.git().delete_branch(c.repo(), name).await,
        );
        c.check(
            matches!(e, GitError::InvalidBranchName { .. }),
            format!("delete_branch({name:?}) is an InvalidBranchName, got {e:?}"),
        );
    }
    for name in [
        "orchestrator/snapshot/0a1b2c3d-plan",
        "feature_x.y",
        "v1.2-rc",
        "a@b",
    ] {
        c.ok(
            &format!("update_branch({name:?})"),
            c.git().update_branch(c.repo(), name, &base, None).await,
        );
        c.same(c.tip(name).await, Some(base.clone()), "tip of a valid name");
    }
}

pub(super) async fn default_and_checked_out_branches_are_protected(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, next) = c
        .commit_on("protect", &base, &[("p.txt", "p\n")], &[])
        .await;
    let e = c.err(
        "reset default",
        git.update_branch(c.repo(), c.main(), &next, Some(&base))
            .await,
    );
    c.check(
        matches!(e, GitError::ProtectedBranch { .. }),
        format!("resetting the default branch is ProtectedBranch, got {e:?}"),
    );
    c.same(
        c.tip(c.main()).await,
        Some(base.clone()),
        "default branch unchanged",
    );
    let e = c.err(
        "delete default",
        git.delete_branch(c.repo(), c.main()).await,
    );
    c.check(
        matches!(e, GitError::ProtectedBranch { .. }),
        format!("deleting the default branch is ProtectedBranch, got {e:?}"),
    );
    c.same(
        c.tip(c.main()).await,
        Some(base.clone()),
        "default branch kept",
    );

    // A non-default branch the user has checked out.
    c.ok(
        "create user-topic",
        git.update_branch(c.repo(), "user-topic", &base, None).await,
    );
    c.switch("user-topic");
    c.same(
        c.ok("current_branch", git.current_branch(c.repo()).await),
        Some("user-topic".to_string()),
        "current_branch after switch",
    );
    let e = c.err(
        "delete checked-out",
        git.delete_branch(c.repo(), "user-topic").await,
    );
    c.check(
        matches!(e, GitError::ProtectedBranch { .. }),
        format!("deleting the checked-out branch is ProtectedBranch, got {e:?}"),
    );
    let e = c.err(
        "reset checked-out",
        git.update_branch(c.repo(), "user-topic", &next, Some(&base))
            .await,
    );
    c.check(
        matches!(e, GitError::ProtectedBranch { .. }),
        format!("resetting the checked-out branch is ProtectedBranch, got {e:?}"),
    );
    c.same(
        c.tip("user-topic").await,
        Some(base.clone()),
        "checked-out branch unchanged",
    );
    // Still the default branch while another one is checked out.
    let e = c.err(
        "delete default while not checked out",
        git.delete_branch(c.repo(), c.main()).await,
    );
    c.check(
        matches!(e, GitError::ProtectedBranch { .. }),
        format!("the default branch stays protected, got {e:?}"),
    );
    c.switch(c.main());
    c.ok(
        "delete user-topic once switched away",
        git.delete_branch(c.repo(), "user-topic").await,
    );
    c.same(c.tip("user-topic").await, None, "user-topic deleted");
}

pub(super) async fn delete_branch_rules(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    c.ok(
        "delete missing",
        git.delete_branch(c.repo(), "never-existed").await,
    );
    c.ok(
        "create topic",
        git.update_branch(c.repo(), "orchestrator/topic", &base, None)
            .await,
    );
    c.ok(
        "delete topic",
        git.delete_branch(c.repo(), "orchestrator/topic").await,
    );
    c.same(
        c.tip("orchestrator/topic").await,
        None,
        "deleted branch is gone",
    );
    c.ok(
        "delete topic again",
        git.delete_branch(c.repo(), "orchestrator/topic").await,
    );
    // A branch whose commit a worktree holds detached may still be deleted.
    let (_, commit) = c.commit_on("keep", &base, &[("k.txt", "k\n")], &[]).await;
    c.ok(
        "create kept",
        git.update_branch(c.repo(), "kept", &commit, None).await,
    );
    c.ok("delete kept", git.delete_branch(c.repo(), "kept").await);
    c.same(
        c.ok("resolve(commit)", git.resolve(c.repo(), &commit).await),
        commit,
        "the commit outlives its branch",
    );
}

pub(super) async fn is_ancestor_rules(c: &Case<'_>) {
    let base = c.base().await;
    let (_, one) = c.commit_on("anc-1", &base, &[("a.txt", "1\n")], &[]).await;
    let (_, other) = c.commit_on("anc-2", &base, &[("b.txt", "2\n")], &[]).await;
    c.check(
        c.ancestor(&base, &one).await,
        "base is an ancestor of its child",
    );
    c.check(
        !c.ancestor(&one, &base).await,
        "a child is not an ancestor of its parent",
    );
    c.check(c.ancestor(&one, &one).await, "a commit is its own ancestor");
    c.check(
        !c.ancestor(&one, &other).await,
        "siblings are not ancestors",
    );
    c.check(
        c.ancestor(c.main(), &one).await,
        "is_ancestor accepts branch names",
    );
    let e = c.err(
        "is_ancestor(unknown)",
        c.git().is_ancestor(c.repo(), UNKNOWN_COMMIT, &one).await,
    );
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("unknown commit is NotFound, got {e:?}"),
    );
}

pub(super) async fn own_refs_are_set_resolved_and_deleted(c: &Case<'_>) {
    let base = c.base().await;
    let git = c.git();
    let name = "refs/orchestrator/sessions/s1/turn-0";
    c.ok("set_ref", git.set_ref(c.repo(), name, c.main()).await);
    c.same(
        c.ok("resolve(own ref)", git.resolve(c.repo(), name).await),
        base.clone(),
        "an own ref resolves to the commit it was set to",
    );
    c.ok("set_ref again", git.set_ref(c.repo(), name, &base).await);
    c.same(
        c.tip(c.main()).await,
        Some(base.clone()),
        "setting an own ref moves no branch",
    );
    for bad in [
        "refs/heads/x",
        "refs/tags/v1",
        "refs/orchestrator/a..b",
        "refs/orchestrator/",
    ] {
        let e = c.err("set_ref(outside)", git.set_ref(c.repo(), bad, &base).await);
        c.check(
            matches!(e, GitError::InvalidBranchName { .. }),
            format!("set_ref({bad}) is refused as an invalid name, got {e:?}"),
        );
    }
    c.same(c.tip("x").await, None, "a refused set_ref creates nothing");
    c.ok("delete_ref", git.delete_ref(c.repo(), name).await);
    let e = c.err("resolve(deleted)", git.resolve(c.repo(), name).await);
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("a deleted own ref is gone, got {e:?}"),
    );
    c.ok("delete_ref(missing)", git.delete_ref(c.repo(), name).await);
}
