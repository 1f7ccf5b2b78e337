//! Cases on worktrees: lifecycle, retries, paths that must stay inside the repository, removal
//! (symlinks, plain folders, broken worktrees), `head` of non-worktrees and resetting.

use std::collections::BTreeSet;
use std::path::Path;

use crate::git::GitError;

use super::case::{canonical, Case, UNKNOWN_COMMIT};
use super::INITIAL_FILES;

pub(super) async fn worktree_lifecycle(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    c.same(
        c.worktree_set().await,
        BTreeSet::new(),
        "no linked worktrees at first",
    );
    let wt = c.wt("wt-a");
    c.ok(
        "create_worktree",
        git.create_worktree(c.repo(), &wt, &base).await,
    );
    for (path, content) in INITIAL_FILES {
        c.same(
            c.read(&wt.join(path)).as_deref(),
            Some(*content),
            &format!("{path} checked out in the worktree"),
        );
    }
    c.same(
        c.ok("head", git.head(&wt).await),
        base.clone(),
        "worktree HEAD",
    );
    c.same(
        c.worktree_set().await,
        BTreeSet::from([canonical(&wt)]),
        "list_worktrees after create",
    );
    c.same(
        c.ok("current_branch", git.current_branch(c.repo()).await),
        Some(c.main().to_string()),
        "main checkout untouched",
    );
    c.same(
        c.tip(c.main()).await,
        Some(base.clone()),
        "default branch untouched",
    );

    let (wt2, commit) = c.commit_on("wt-b", &base, &[("b.txt", "b\n")], &[]).await;
    c.same(
        c.ok("head", git.head(&wt2).await),
        commit.clone(),
        "second worktree HEAD",
    );
    c.same(
        c.tip(c.main()).await,
        Some(base.clone()),
        "a commit in a worktree moves no branch",
    );
    c.same(
        c.worktree_set().await,
        BTreeSet::from([canonical(&wt), canonical(&wt2)]),
        "list_worktrees with two",
    );
    let wt3 = c.wt("nested/deeper/wt-c");
    c.ok(
        "create nested",
        git.create_worktree(c.repo(), &wt3, &commit).await,
    );
    c.same(
        c.read(&wt3.join("b.txt")).as_deref(),
        Some("b\n"),
        "worktree at a later commit",
    );

    c.ok("remove", git.remove_worktree(c.repo(), &wt).await);
    c.check(!wt.exists(), "removed worktree folder is gone");
    c.same(
        c.worktree_set().await,
        BTreeSet::from([canonical(&wt2), canonical(&wt3)]),
        "list_worktrees after remove",
    );
    c.ok("remove again", git.remove_worktree(c.repo(), &wt).await);
    c.ok(
        "remove never created",
        git.remove_worktree(c.repo(), &c.wt("never")).await,
    );
    c.ok("remove wt2", git.remove_worktree(c.repo(), &wt2).await);
    c.ok("remove wt3", git.remove_worktree(c.repo(), &wt3).await);
    c.same(c.worktree_set().await, BTreeSet::new(), "no worktrees left");
    // The commit made in a removed worktree survives.
    c.same(
        c.ok("resolve", git.resolve(c.repo(), &commit).await),
        commit,
        "commit outlives its worktree",
    );

    let e = c.err(
        "create at unknown commit",
        git.create_worktree(c.repo(), &c.wt("ghost"), UNKNOWN_COMMIT)
            .await,
    );
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("unknown commit is NotFound, got {e:?}"),
    );
    c.check(
        !c.wt("ghost").exists(),
        "no folder left for a failed create",
    );
}

pub(super) async fn worktree_create_is_reused_on_retry(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, later) = c.commit_on("other", &base, &[("o.txt", "o\n")], &[]).await;
    let wt = c.wt("retry");
    c.ok("create", git.create_worktree(c.repo(), &wt, &base).await);
    c.write(&wt, &[("scratch.txt", "work in progress\n")]);
    c.ok(
        "create again",
        git.create_worktree(c.repo(), &wt, &later).await,
    );
    c.same(
        c.read(&wt.join("scratch.txt")).as_deref(),
        Some("work in progress\n"),
        "uncommitted work kept on reuse",
    );
    c.same(
        c.ok("head", git.head(&wt).await),
        base,
        "HEAD kept on reuse",
    );
    c.same(
        c.worktree_set().await.len(),
        2,
        "reuse registers nothing new",
    );
}

pub(super) async fn worktree_paths_stay_inside_the_repository(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let outside = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("[{}] temp dir: {e}", c.name),
    };
    let escape = c
        .repo()
        .join(".worktrees")
        .join("..")
        .join("..")
        .join("escape");
    let e = c.err(
        "create via ..",
        git.create_worktree(c.repo(), &escape, &base).await,
    );
    c.check(
        matches!(e, GitError::PathOutsideRoot { .. }),
        format!("traversal is PathOutsideRoot, got {e:?}"),
    );
    c.check(
        !canonical(&c.repo().join("..")).join("escape").exists(),
        "nothing created outside",
    );

    let e = c.err(
        "create at the repo itself",
        git.create_worktree(c.repo(), c.repo(), &base).await,
    );
    c.check(
        matches!(e, GitError::PathOutsideRoot { .. }),
        format!("the main checkout is PathOutsideRoot, got {e:?}"),
    );

    let e = c.err(
        "create elsewhere",
        git.create_worktree(c.repo(), &outside.path().join("wt"), &base)
            .await,
    );
    c.check(
        matches!(e, GitError::PathOutsideRoot { .. }),
        format!("an outside path is PathOutsideRoot, got {e:?}"),
    );

    #[cfg(unix)]
    {
        let link = c.wt("link");
        if let Err(e) = std::fs::create_dir_all(c.repo().join(".worktrees")) {
            panic!("[{}] mkdir: {e}", c.name);
        }
        if let Err(e) = std::os::unix::fs::symlink(outside.path(), &link) {
            panic!("[{}] symlink: {e}", c.name);
        }
        let e = c.err(
            "create through a symlink",
            git.create_worktree(c.repo(), &link.join("wt"), &base).await,
        );
        c.check(
            matches!(e, GitError::PathOutsideRoot { .. }),
            format!("a symlink escape is PathOutsideRoot, got {e:?}"),
        );
        c.check(
            !outside.path().join("wt").exists(),
            "nothing created through the symlink",
        );
        let e = c.err(
            "remove through a symlink",
            git.remove_worktree(c.repo(), &link.join("x")).await,
        );
        c.check(
            matches!(e, GitError::PathOutsideRoot { .. }),
            format!("remove through a symlink is PathOutsideRoot, got {e:?}"),
        );
    }
    c.write(outside.path(), &[("precious.txt", "keep\n")]);
    let e = c.err(
        "remove outside",
        git.remove_worktree(c.repo(), outside.path()).await,
    );
    c.check(
        matches!(e, GitError::PathOutsideRoot { .. }),
        format!("removing outside is PathOutsideRoot, got {e:?}"),
    );
    c.check(
        outside.path().join("precious.txt").exists(),
        "outside folder untouched",
    );
    let e = c.err(
        "remove the repo",
        git.remove_worktree(c.repo(), c.repo()).await,
    );
    c.check(
        matches!(e, GitError::PathOutsideRoot { .. }),
        format!("removing the main checkout is PathOutsideRoot, got {e:?}"),
    );
    c.check(
        c.repo().join("README.md").exists(),
        "main checkout untouched",
    );
    c.same(
        c.worktree_set().await,
        BTreeSet::new(),
        "no worktree registered",
    );
}

pub(super) async fn worktree_removal_keeps_symlink_targets(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let shared = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("[{}] temp dir: {e}", c.name),
    };
    c.write(
        shared.path(),
        &[
            ("pkg/index.js", "module.exports = 1;\n"),
            ("top.txt", "top\n"),
        ],
    );
    let wt = c.wt("with-links");
    c.ok("create", git.create_worktree(c.repo(), &wt, &base).await);
    #[cfg(unix)]
    {
        let links = [
            (shared.path().to_path_buf(), wt.join("node_modules")),
            (shared.path().join("top.txt"), wt.join("linked.txt")),
            (shared.path().join("pkg"), wt.join("src").join("vendor")),
        ];
        for (target, link) in &links {
            if let Err(e) = std::os::unix::fs::symlink(target, link) {
                panic!("[{}] symlink: {e}", c.name);
            }
        }
    }
    c.ok("remove", git.remove_worktree(c.repo(), &wt).await);
    c.check(!wt.exists(), "worktree folder removed");
    c.same(
        c.read(&shared.path().join("pkg/index.js")).as_deref(),
        Some("module.exports = 1;\n"),
        "symlinked folder's target survives",
    );
    c.same(
        c.read(&shared.path().join("top.txt")).as_deref(),
        Some("top\n"),
        "symlinked file's target survives",
    );
}

pub(super) async fn worktree_removal_refuses_plain_folders(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    c.write(
        c.repo(),
        &[(".worktrees/not-a-worktree/data.txt", "mine\n")],
    );
    let folder = c.wt("not-a-worktree");
    c.err(
        "remove a plain folder",
        git.remove_worktree(c.repo(), &folder).await,
    );
    c.same(
        c.read(&folder.join("data.txt")).as_deref(),
        Some("mine\n"),
        "a plain folder is never deleted",
    );
    c.err(
        "remove a source folder",
        git.remove_worktree(c.repo(), &c.repo().join("src")).await,
    );
    c.check(c.repo().join("src/lib.rs").exists(), "source folder kept");
    c.err(
        "create over a plain folder",
        git.create_worktree(c.repo(), &folder, &base).await,
    );
    c.same(
        c.read(&folder.join("data.txt")).as_deref(),
        Some("mine\n"),
        "a plain folder is never overwritten",
    );
    // An empty folder (e.g. left by a crash before checkout) is fine to use.
    let empty = c.wt("empty");
    if let Err(e) = std::fs::create_dir_all(&empty) {
        panic!("[{}] mkdir: {e}", c.name);
    }
    c.ok(
        "create in an empty folder",
        git.create_worktree(c.repo(), &empty, &base).await,
    );
    c.check(
        empty.join("README.md").exists(),
        "checked out into the empty folder",
    );
}

pub(super) async fn head_of_a_non_worktree_is_not_found(c: &Case<'_>) {
    let base = c.base().await;
    c.same(
        c.ok("head(main checkout)", c.git().head(c.repo()).await),
        base,
        "head of the main checkout",
    );
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("[{}] temp dir: {e}", c.name),
    };
    let e = c.err("head(plain folder)", c.git().head(dir.path()).await);
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("head of a plain folder is NotFound, got {e:?}"),
    );
    let e = c.err(
        "head(missing)",
        c.git().head(&dir.path().join("missing")).await,
    );
    c.check(
        matches!(e, GitError::NotFound { .. }),
        format!("head of a missing folder is NotFound, got {e:?}"),
    );
}

pub(super) async fn reset_worktree_restores_the_commit(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (wt, first) = c
        .commit_on(
            "reset",
            &base,
            &[(".gitignore", "deps/\n"), ("a.txt", "a\n")],
            &[],
        )
        .await;
    // A half-done run: edits, an untracked file, an installed dependency, a deletion, a commit
    // of its own.
    c.write(
        &wt,
        &[
            ("README.md", "# half done\n"),
            ("junk/x.txt", "partial output\n"),
            ("deps/lib.txt", "installed by setup\n"),
        ],
    );
    if let Err(e) = std::fs::remove_file(wt.join("src/util.rs")) {
        panic!("[{}] delete: {e}", c.name);
    }
    let own = c.ok("commit", git.commit_all(&wt, "[Plan] own").await);
    c.check(own.is_some(), "the half-done run committed");
    c.write(&wt, &[("a.txt", "a\nappended\n")]);

    c.ok("reset", git.reset_worktree(&wt, &first).await);
    c.same(
        c.ok("head", git.head(&wt).await),
        first.clone(),
        "HEAD at the commit",
    );
    c.same(
        c.read(&wt.join("README.md")).as_deref(),
        Some("# fixture\n"),
        "edited file restored",
    );
    c.same(
        c.read(&wt.join("a.txt")).as_deref(),
        Some("a\n"),
        "appended file restored",
    );
    c.same(
        c.read(&wt.join("src/util.rs")).as_deref(),
        Some("one\ntwo\nthree\n"),
        "deleted file restored",
    );
    c.check(!wt.join("junk/x.txt").exists(), "untracked file removed");
    c.same(
        c.read(&wt.join("deps/lib.txt")).as_deref(),
        Some("installed by setup\n"),
        "ignored file kept",
    );
    c.same(
        c.ok("commit after reset", git.commit_all(&wt, "nothing").await),
        None,
        "nothing left to commit after a reset",
    );
    c.ok("reset to the base", git.reset_worktree(&wt, &base).await);
    c.same(
        c.ok("head", git.head(&wt).await),
        base.clone(),
        "HEAD at the base",
    );
    c.check(
        !wt.join("a.txt").exists(),
        "a file the base lacks is removed",
    );
    c.same(c.tip(c.main()).await, Some(base.clone()), "no branch moved");

    // Never the user's checkout.
    c.write(c.repo(), &[("user-file.txt", "the user's\n")]);
    c.err(
        "reset_worktree(main checkout)",
        git.reset_worktree(c.repo(), &base).await,
    );
    c.check(
        c.repo().join("user-file.txt").exists(),
        "user's file untouched",
    );
}

pub(super) async fn remove_broken_worktree_rules(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let wt = c.wt("valid");
    c.ok("create", git.create_worktree(c.repo(), &wt, &base).await);
    c.write(&wt, &[("wip.txt", "work in progress\n")]);
    c.same(
        c.ok("valid", git.remove_broken_worktree(c.repo(), &wt).await),
        false,
        "a valid worktree is not broken",
    );
    c.same(
        c.read(&wt.join("wip.txt")).as_deref(),
        Some("work in progress\n"),
        "a valid worktree is kept as it is",
    );
    c.same(
        c.ok(
            "missing",
            git.remove_broken_worktree(c.repo(), &c.wt("missing")).await,
        ),
        false,
        "a missing folder is nothing to remove",
    );

    // A folder at a recorded path that is not a worktree, with a link out of the root.
    let outside = c.repo().join("keep-me");
    c.write(&outside, &[("precious.txt", "precious\n")]);
    let broken = c.wt("broken");
    c.write(&broken, &[("data.txt", "left by a job\n")]);
    #[cfg(unix)]
    link_dir(c, &outside, &broken.join("link"));
    c.same(
        c.ok(
            "broken",
            git.remove_broken_worktree(c.repo(), &broken).await,
        ),
        true,
        "a folder that is not a worktree is removed",
    );
    c.check(!broken.exists(), "the broken folder is gone");
    c.same(
        c.read(&outside.join("precious.txt")).as_deref(),
        Some("precious\n"),
        "a link's target is never followed",
    );
    c.ok(
        "create after removal",
        git.create_worktree(c.repo(), &broken, &base).await,
    );
    c.check(broken.join("README.md").exists(), "recreated at the path");
    c.err(
        "outside the repository",
        git.remove_broken_worktree(c.repo(), &c.repo().join("../elsewhere"))
            .await,
    );
}

#[cfg(unix)]
pub(super) fn link_dir(c: &Case<'_>, target: &Path, link: &Path) {
    if let Err(e) = std::os::unix::fs::symlink(target, link) {
        panic!("[{}] linking {}: {e}", c.name, link.display());
    }
}
