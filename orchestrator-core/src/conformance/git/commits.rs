//! Cases on recording and inspecting changes: `commit_all` (including nested repositories),
//! diff statistics and the idempotent exclude file.

use crate::git::{DiffStats, GitError, MergeStyle};

use super::case::{Case, UNKNOWN_COMMIT};

pub(super) async fn commit_all_rules(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    // Nothing is ever committed in the user's main checkout.
    c.write(c.repo(), &[("user-file.txt", "the user's\n")]);
    c.err(
        "commit_all(main checkout)",
        git.commit_all(c.repo(), "no").await,
    );
    c.err(
        "merge_into_worktree(main checkout)",
        git.merge_into_worktree(c.repo(), std::slice::from_ref(&base), "no", None)
            .await,
    );
    c.same(
        c.tip(c.main()).await,
        Some(base.clone()),
        "main checkout's branch unchanged",
    );
    c.check(
        c.repo().join("user-file.txt").exists(),
        "user's file untouched",
    );
    let wt = c.wt("commit");
    c.ok("create", git.create_worktree(c.repo(), &wt, &base).await);
    c.same(
        c.ok("commit clean", git.commit_all(&wt, "nothing").await),
        None,
        "clean worktree commits nothing",
    );
    c.same(
        c.ok("head", git.head(&wt).await),
        base.clone(),
        "HEAD unchanged by an empty commit",
    );

    c.write(
        &wt,
        &[
            (".gitignore", "ignored.txt\nbuild/\n*.log\n"),
            ("new.txt", "new\n"),
            ("ignored.txt", "secret\n"),
            ("build/out.bin", "artifact\n"),
            ("sub/debug.log", "log\n"),
            ("src/lib.rs", "line 1\nchanged\nline 3\n"),
        ],
    );
    if let Err(e) = std::fs::remove_file(wt.join("docs/guide.md")) {
        panic!("[{}] delete: {e}", c.name);
    }
    let commit = c.ok("commit", git.commit_all(&wt, "[Plan] change").await);
    let Some(commit) = commit else {
        panic!("[{}] commit_all found no change", c.name);
    };
    c.same(
        c.ok("head", git.head(&wt).await),
        commit.clone(),
        "HEAD is the new commit",
    );
    c.check(
        c.ancestor(&base, &commit).await,
        "the commit's parent is the old HEAD",
    );
    c.same(
        c.ok("commit again", git.commit_all(&wt, "again").await),
        None,
        "nothing left to commit",
    );
    c.same(c.tip(c.main()).await, Some(base.clone()), "no branch moved");
    c.check(
        wt.join("ignored.txt").exists(),
        "ignored files stay in the worktree",
    );

    c.same(
        c.file_at(&commit, "new.txt").await.as_deref(),
        Some("new\n"),
        "added file committed",
    );
    c.same(
        c.file_at(&commit, ".gitignore").await.as_deref(),
        Some("ignored.txt\nbuild/\n*.log\n"),
        ".gitignore committed",
    );
    c.same(
        c.file_at(&commit, "src/lib.rs").await.as_deref(),
        Some("line 1\nchanged\nline 3\n"),
        "modification committed",
    );
    c.same(
        c.file_at(&commit, "docs/guide.md").await,
        None,
        "deletion committed",
    );
    c.same(
        c.file_at(&commit, "ignored.txt").await,
        None,
        "ignored file not committed",
    );
    c.same(
        c.file_at(&commit, "build/out.bin").await,
        None,
        "ignored folder not committed",
    );
    c.same(
        c.file_at(&commit, "sub/debug.log").await,
        None,
        "ignored pattern not committed",
    );
    let stats = c.ok("diff_stats", git.diff_stats(c.repo(), &base, &commit).await);
    c.same(
        stats.files_changed,
        4,
        "files changed by the commit (.gitignore, new.txt, src/lib.rs, docs/guide.md)",
    );
}

pub(super) async fn commit_all_stores_nested_repositories_as_plain_files(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let wt = c.wt("nested");
    c.ok("create", git.create_worktree(c.repo(), &wt, &base).await);
    // What `git init inner` leaves, plus files of the nested project.
    c.write(
        &wt,
        &[
            ("inner/.git/HEAD", "ref: refs/heads/main\n"),
            (
                "inner/.git/config",
                "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
            ),
            ("inner/.git/objects/info/packs", ""),
            ("inner/.git/refs/heads/.keep", ""),
            ("inner/.gitignore", "local.txt\n"),
            ("inner/a.txt", "a\n"),
            ("inner/sub/b.txt", "b\n"),
            ("inner/local.txt", "ignored by the nested project\n"),
        ],
    );
    let commit = c.ok("commit", git.commit_all(&wt, "[Plan] nested").await);
    let Some(commit) = commit else {
        panic!(
            "[{}] the nested repository's files were not committed",
            c.name
        );
    };
    for (file, content) in [("inner/a.txt", "a\n"), ("inner/sub/b.txt", "b\n")] {
        c.same(
            c.file_at(&commit, file).await.as_deref(),
            Some(content),
            &format!("{file} committed as a plain file"),
        );
    }
    c.same(
        c.file_at(&commit, "inner/.git/HEAD").await,
        None,
        "the nested .git is left out",
    );
    c.same(
        c.file_at(&commit, "inner/local.txt").await,
        None,
        "the nested .gitignore is honored",
    );
    c.write(&wt, &[("inner/a.txt", "a, changed\n")]);
    let again = c.ok("commit again", git.commit_all(&wt, "[Plan] again").await);
    let Some(again) = again else {
        panic!(
            "[{}] a change inside the nested repository was not committed",
            c.name
        );
    };
    c.same(
        c.file_at(&again, "inner/a.txt").await.as_deref(),
        Some("a, changed\n"),
        "later changes inside the nested repository are committed",
    );
    if let Err(e) = std::fs::remove_file(wt.join("inner/sub/b.txt")) {
        panic!("[{}] delete: {e}", c.name);
    }
    let third = c.ok(
        "commit a deletion",
        git.commit_all(&wt, "[Plan] gone").await,
    );
    let Some(third) = third else {
        panic!(
            "[{}] a deletion inside the nested repository was not committed",
            c.name
        );
    };
    c.same(
        c.file_at(&third, "inner/sub/b.txt").await,
        None,
        "deletions inside the nested repository are committed",
    );
    c.same(
        c.file_at(&third, "inner/a.txt").await.as_deref(),
        Some("a, changed\n"),
        "the rest of the nested repository stays",
    );
}

pub(super) async fn diff_stats_counts(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, commit) = c
        .commit_on(
            "diff",
            &base,
            &[
                ("src/lib.rs", "line 1\nLINE 2\nline 3\nline 4\n"),
                ("new.txt", "a\nb\n"),
            ],
            &["docs/guide.md"],
        )
        .await;
    let forward = c.ok("diff_stats", git.diff_stats(c.repo(), &base, &commit).await);
    c.same(
        forward,
        DiffStats {
            files_changed: 3,
            insertions: 4,
            deletions: 2,
        },
        "diff_stats base..commit",
    );
    let backward = c.ok(
        "diff_stats reversed",
        git.diff_stats(c.repo(), &commit, &base).await,
    );
    c.same(
        backward,
        DiffStats {
            files_changed: 3,
            insertions: 2,
            deletions: 4,
        },
        "diff_stats commit..base",
    );
    let none = c.ok(
        "diff_stats same",
        git.diff_stats(c.repo(), &base, &base).await,
    );
    c.same(
        none,
        DiffStats::default(),
        "diff_stats of a commit with itself",
    );
    let e = c.err(
        "diff_stats unknown",
        git.diff_stats(c.repo(), &base, UNKNOWN_COMMIT).await,
    );
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("unknown commit is NotFound, got {e:?}"),
    );
}

pub(super) async fn exclude_is_idempotent(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    c.ok(
        "exclude",
        git.exclude(c.repo(), &["/.worktrees/", "/.orchestrator/"])
            .await,
    );
    c.ok(
        "exclude again",
        git.exclude(c.repo(), &["/.worktrees/", "/.orchestrator/"])
            .await,
    );
    c.ok("exclude nothing", git.exclude(c.repo(), &[]).await);
    c.write(c.repo(), &[(".orchestrator/plans/p/state.json", "{}\n")]);
    // Excluded folders never make the checkout dirty, and merges still follow.
    let (_, a) = c.commit_on("ex-a", &base, &[("a.txt", "a\n")], &[]).await;
    let tip = c.ok(
        "merge into checkout",
        git.merge_into_branch(c.repo(), c.main(), &a, "m", MergeStyle::FastForward)
            .await,
    );
    c.same(tip, a, "merge with excluded folders present");
    c.same(
        c.read(&c.repo().join(".orchestrator/plans/p/state.json"))
            .as_deref(),
        Some("{}\n"),
        "excluded files untouched",
    );
    c.same(
        c.tip(c.main()).await.is_some(),
        true,
        "default branch present",
    );
}
