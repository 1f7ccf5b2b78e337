//! Cases on `merge_into_branch`: merge commits, fast-forwards, conflicts, missing inputs, the
//! checked-out branch (clean and dirty) and concurrent merges into one branch.

use crate::git::{GitError, MergeStyle};

use super::case::{canonical, Case, UNKNOWN_COMMIT};
use super::merge_worktree::conflicting_pair;

pub(super) async fn merge_into_branch_merge_commit(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let snap = "orchestrator/snapshot/merge-commit";
    c.ok(
        "create snapshot",
        git.update_branch(c.repo(), snap, &base, None).await,
    );
    let (_, a) = c.commit_on("ri-a", &base, &[("a.txt", "a\n")], &[]).await;
    let (_, b) = c.commit_on("ri-b", &base, &[("b.txt", "b\n")], &[]).await;
    let t1 = c.ok(
        "merge a",
        git.merge_into_branch(c.repo(), snap, &a, "[Plan] ri a", MergeStyle::MergeCommit)
            .await,
    );
    c.check(
        t1 != a && t1 != base,
        "MergeCommit makes a new commit even when a fast-forward is possible",
    );
    c.check(
        c.ancestor(&a, &t1).await && c.ancestor(&base, &t1).await,
        "both sides are ancestors of the merge commit",
    );
    c.same(
        c.tip(snap).await,
        Some(t1.clone()),
        "branch moved to the merge commit",
    );
    let t2 = c.ok(
        "merge b",
        git.merge_into_branch(c.repo(), snap, &b, "[Plan] ri b", MergeStyle::MergeCommit)
            .await,
    );
    c.check(t2 != t1 && t2 != b, "second merge commit");
    for commit in [&a, &b, &t1] {
        c.check(
            c.ancestor(commit, &t2).await,
            format!("{commit} reachable from the snapshot"),
        );
    }
    c.same(
        c.file_at(&t2, "a.txt").await.as_deref(),
        Some("a\n"),
        "a.txt in the snapshot",
    );
    c.same(
        c.file_at(&t2, "b.txt").await.as_deref(),
        Some("b\n"),
        "b.txt in the snapshot",
    );
    let t3 = c.ok(
        "merge a again",
        git.merge_into_branch(c.repo(), snap, &a, "again", MergeStyle::MergeCommit)
            .await,
    );
    c.same(
        t3,
        t2.clone(),
        "an already contained commit changes nothing",
    );
    c.same(
        c.tip(snap).await,
        Some(t2),
        "tip unchanged by a no-op merge",
    );
    c.same(
        c.tip(c.main()).await,
        Some(base),
        "default branch untouched",
    );
    c.same(
        c.read(&c.repo().join("a.txt")),
        None,
        "main checkout untouched",
    );
}

pub(super) async fn merge_into_branch_fast_forward(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let target = "orchestrator/target-ff";
    c.ok(
        "create target",
        git.update_branch(c.repo(), target, &base, None).await,
    );
    let (_, a) = c.commit_on("ff-a", &base, &[("a.txt", "a\n")], &[]).await;
    let t1 = c.ok(
        "fast-forward",
        git.merge_into_branch(c.repo(), target, &a, "m", MergeStyle::FastForward)
            .await,
    );
    c.same(
        t1,
        a.clone(),
        "FastForward lands the commit itself when possible",
    );
    c.same(
        c.tip(target).await,
        Some(a.clone()),
        "tip after a fast-forward",
    );
    let (_, b) = c.commit_on("ff-b", &base, &[("b.txt", "b\n")], &[]).await;
    let t2 = c.ok(
        "diverged",
        git.merge_into_branch(c.repo(), target, &b, "m", MergeStyle::FastForward)
            .await,
    );
    c.check(
        t2 != a && t2 != b,
        "FastForward falls back to a merge commit when diverged",
    );
    c.check(
        c.ancestor(&a, &t2).await && c.ancestor(&b, &t2).await,
        "both sides reachable",
    );
}

pub(super) async fn merge_into_branch_conflict_changes_nothing(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let snap = "orchestrator/snapshot/conflict";
    c.ok(
        "create snapshot",
        git.update_branch(c.repo(), snap, &base, None).await,
    );
    let (_, a, _, b) = conflicting_pair(c, &base).await;
    let t1 = c.ok(
        "merge a",
        git.merge_into_branch(c.repo(), snap, &a, "m", MergeStyle::MergeCommit)
            .await,
    );
    for style in [MergeStyle::MergeCommit, MergeStyle::FastForward] {
        let e = c.err(
            "merge conflicting b",
            git.merge_into_branch(c.repo(), snap, &b, "m", style).await,
        );
        match e {
            GitError::MergeConflict { paths, .. } => c.same(
                paths,
                vec!["docs/guide.md".to_string(), "src/lib.rs".to_string()],
                "conflicting paths, sorted",
            ),
            other => c.check(false, format!("expected MergeConflict, got {other:?}")),
        }
        c.same(
            c.tip(snap).await,
            Some(t1.clone()),
            "tip unchanged after a conflict",
        );
    }
}

pub(super) async fn merge_into_branch_missing_inputs(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let e = c.err(
        "missing branch",
        git.merge_into_branch(
            c.repo(),
            "no/such/branch",
            &base,
            "m",
            MergeStyle::MergeCommit,
        )
        .await,
    );
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("missing branch is NotFound, got {e:?}"),
    );
    c.same(
        c.tip("no/such/branch").await,
        None,
        "a failed merge creates no branch",
    );
    c.ok(
        "create",
        git.update_branch(c.repo(), "orchestrator/x", &base, None)
            .await,
    );
    let e = c.err(
        "unknown commit",
        git.merge_into_branch(
            c.repo(),
            "orchestrator/x",
            UNKNOWN_COMMIT,
            "m",
            MergeStyle::MergeCommit,
        )
        .await,
    );
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("unknown commit is NotFound, got {e:?}"),
    );
    c.same(c.tip("orchestrator/x").await, Some(base), "tip unchanged");
}

pub(super) async fn merge_into_checked_out_clean_branch(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    c.write(
        c.repo(),
        &[("notes.txt", "the user's own untracked notes\n")],
    );
    let (_, a) = c
        .commit_on(
            "co-a",
            &base,
            &[
                ("feature.txt", "feature\n"),
                ("README.md", "# fixture, merged\n"),
            ],
            &["docs/guide.md"],
        )
        .await;
    let t1 = c.ok(
        "merge into checked-out default",
        git.merge_into_branch(
            c.repo(),
            c.main(),
            &a,
            "[Plan] land",
            MergeStyle::MergeCommit,
        )
        .await,
    );
    c.same(c.tip(c.main()).await, Some(t1.clone()), "branch moved");
    c.same(
        c.ok("resolve(HEAD)", git.resolve(c.repo(), "HEAD").await),
        t1.clone(),
        "HEAD follows the branch",
    );
    c.same(
        c.ok("current_branch", git.current_branch(c.repo()).await),
        Some(c.main().to_string()),
        "still on the branch",
    );
    c.same(
        c.read(&c.repo().join("feature.txt")).as_deref(),
        Some("feature\n"),
        "new file in the user's checkout",
    );
    c.same(
        c.read(&c.repo().join("README.md")).as_deref(),
        Some("# fixture, merged\n"),
        "changed file in the user's checkout",
    );
    c.check(
        !c.repo().join("docs/guide.md").exists(),
        "deleted file gone from the user's checkout",
    );
    c.same(
        c.read(&c.repo().join("notes.txt")).as_deref(),
        Some("the user's own untracked notes\n"),
        "untracked file kept",
    );

    // The checkout is clean at the new commit, so the next merge works too (fast-forward here).
    let (_, b) = c
        .commit_on("co-b", &t1, &[("second.txt", "2\n")], &[])
        .await;
    let t2 = c.ok(
        "second merge",
        git.merge_into_branch(
            c.repo(),
            c.main(),
            &b,
            "[Plan] land 2",
            MergeStyle::FastForward,
        )
        .await,
    );
    c.same(t2, b.clone(), "fast-forward of the checked-out branch");
    c.same(
        c.read(&c.repo().join("second.txt")).as_deref(),
        Some("2\n"),
        "fast-forwarded file in the checkout",
    );

    // A non-default branch checked out by the user follows as well.
    c.ok(
        "create user-branch",
        git.update_branch(c.repo(), "user-branch", &base, None)
            .await,
    );
    c.switch("user-branch");
    let (_, d) = c.commit_on("co-d", &base, &[("d.txt", "d\n")], &[]).await;
    let t3 = c.ok(
        "merge into user-branch",
        git.merge_into_branch(c.repo(), "user-branch", &d, "m", MergeStyle::MergeCommit)
            .await,
    );
    c.same(
        c.ok("resolve(HEAD)", git.resolve(c.repo(), "HEAD").await),
        t3,
        "HEAD follows user-branch",
    );
    c.same(
        c.read(&c.repo().join("d.txt")).as_deref(),
        Some("d\n"),
        "user-branch checkout follows",
    );
    c.check(
        !c.repo().join("second.txt").exists(),
        "files of the other branch are not there",
    );
}

pub(super) async fn merge_into_dirty_checkout_is_refused(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, a) = c
        .commit_on("dirty-a", &base, &[("feature.txt", "feature\n")], &[])
        .await;
    c.write(c.repo(), &[("README.md", "# my local edit\n")]);
    let e = c.err(
        "merge into dirty",
        git.merge_into_branch(c.repo(), c.main(), &a, "m", MergeStyle::MergeCommit)
            .await,
    );
    match e {
        GitError::DirtyCheckout {
            branch,
            path,
            files,
        } => {
            c.same(branch, c.main().to_string(), "DirtyCheckout.branch");
            c.same(canonical(&path), canonical(c.repo()), "DirtyCheckout.path");
            c.check(
                files.iter().any(|f| f == "README.md"),
                format!("DirtyCheckout.files names README.md: {files:?}"),
            );
        }
        other => c.check(false, format!("expected DirtyCheckout, got {other:?}")),
    }
    c.same(
        c.tip(c.main()).await,
        Some(base.clone()),
        "tip unchanged when dirty",
    );
    c.same(
        c.read(&c.repo().join("README.md")).as_deref(),
        Some("# my local edit\n"),
        "local edit kept",
    );
    c.check(
        !c.repo().join("feature.txt").exists(),
        "nothing checked out when dirty",
    );

    // An untracked file the merge would overwrite counts as dirty too.
    c.write(
        c.repo(),
        &[
            ("README.md", "# fixture\n"),
            ("feature.txt", "my own feature\n"),
        ],
    );
    let e = c.err(
        "merge over untracked",
        git.merge_into_branch(c.repo(), c.main(), &a, "m", MergeStyle::FastForward)
            .await,
    );
    match e {
        GitError::DirtyCheckout { files, .. } => c.check(
            files.iter().any(|f| f == "feature.txt"),
            format!("DirtyCheckout.files names feature.txt: {files:?}"),
        ),
        other => c.check(
            false,
            format!("expected DirtyCheckout for an untracked file, got {other:?}"),
        ),
    }
    c.same(
        c.read(&c.repo().join("feature.txt")).as_deref(),
        Some("my own feature\n"),
        "untracked file kept",
    );
    c.same(c.tip(c.main()).await, Some(base.clone()), "tip unchanged");

    // Merging into a branch that is not checked out ignores the dirty checkout.
    c.ok(
        "create other",
        git.update_branch(c.repo(), "orchestrator/other", &base, None)
            .await,
    );
    c.ok(
        "merge into other",
        git.merge_into_branch(
            c.repo(),
            "orchestrator/other",
            &a,
            "m",
            MergeStyle::MergeCommit,
        )
        .await,
    );

    // Once clean, the merge goes through.
    if let Err(e) = std::fs::remove_file(c.repo().join("feature.txt")) {
        panic!("[{}] delete: {e}", c.name);
    }
    let tip = c.ok(
        "merge when clean",
        git.merge_into_branch(c.repo(), c.main(), &a, "m", MergeStyle::FastForward)
            .await,
    );
    c.same(tip, a, "clean checkout fast-forwards");
    c.same(
        c.read(&c.repo().join("feature.txt")).as_deref(),
        Some("feature\n"),
        "checkout follows once clean",
    );
}

pub(super) async fn concurrent_merges_into_one_branch(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let snap = "orchestrator/snapshot/concurrent";
    c.ok(
        "create snapshot",
        git.update_branch(c.repo(), snap, &base, None).await,
    );
    let mut commits = Vec::new();
    for i in 0..6 {
        let file = format!("job-{i}.txt");
        let (_, commit) = c
            .commit_on(&format!("cc-{i}"), &base, &[(file.as_str(), "done\n")], &[])
            .await;
        commits.push(commit);
    }
    let merges = commits.iter().map(|commit| {
        git.merge_into_branch(c.repo(), snap, commit, "[Plan] ri", MergeStyle::MergeCommit)
    });
    for (i, result) in futures::future::join_all(merges)
        .await
        .into_iter()
        .enumerate()
    {
        c.ok(&format!("concurrent merge {i}"), result);
    }
    let Some(tip) = c.tip(snap).await else {
        panic!("[{}] snapshot branch vanished", c.name);
    };
    for commit in &commits {
        c.check(
            c.ancestor(commit, &tip).await,
            format!("merged commit {commit} reachable (no lost merge)"),
        );
    }
}
