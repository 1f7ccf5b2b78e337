//! Cases on `merge_into_worktree`: disjoint changes, conflicts that change nothing, the conflict
//! resolver (success, failure, leftover markers), and the shared conflicting-commits helper.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;

use crate::git::{CommitId, ConflictResolver, GitError};

use super::case::{canonical, Case};

pub(super) async fn merge_into_worktree_combines_disjoint_changes(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, a) = c
        .commit_on(
            "fi-a",
            &base,
            &[("a.txt", "a\n"), ("README.md", "# fixture A\n")],
            &[],
        )
        .await;
    let (wt_b, b) = c
        .commit_on(
            "fi-b",
            &base,
            &[("b.txt", "b\n"), ("src/util.rs", "one\ntwo\nthree\nfour\n")],
            &["docs/guide.md"],
        )
        .await;
    let head = c.ok(
        "merge a into b",
        git.merge_into_worktree(&wt_b, std::slice::from_ref(&a), "[Plan] merge", None)
            .await,
    );
    c.check(head != b && head != a, "a merge commit was made");
    c.same(
        c.ok("head", git.head(&wt_b).await),
        head.clone(),
        "worktree HEAD is the returned commit",
    );
    c.check(
        c.ancestor(&a, &head).await && c.ancestor(&b, &head).await,
        "both sides are ancestors of the merge",
    );
    for (path, content) in [
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("README.md", "# fixture A\n"),
        ("src/util.rs", "one\ntwo\nthree\nfour\n"),
    ] {
        c.same(
            c.read(&wt_b.join(path)).as_deref(),
            Some(content),
            &format!("{path} in the merged worktree"),
        );
        c.same(
            c.file_at(&head, path).await.as_deref(),
            Some(content),
            &format!("{path} in the merge commit"),
        );
    }
    c.check(
        !wt_b.join("docs/guide.md").exists(),
        "deletion kept by the merge",
    );
    c.same(
        c.ok("commit after merge", git.commit_all(&wt_b, "x").await),
        None,
        "worktree clean after a merge",
    );

    let again = c.ok(
        "merge a again",
        git.merge_into_worktree(&wt_b, &[a.clone(), base.clone()], "again", None)
            .await,
    );
    c.same(again, head.clone(), "already contained commits are skipped");

    // Several commits in one call, one after another.
    let (_, d) = c.commit_on("fi-d", &base, &[("d.txt", "d\n")], &[]).await;
    let (_, e) = c.commit_on("fi-e", &a, &[("e.txt", "e\n")], &[]).await;
    let head2 = c.ok(
        "merge d and e",
        git.merge_into_worktree(&wt_b, &[d.clone(), e.clone()], "[Plan] merge", None)
            .await,
    );
    for commit in [&a, &b, &d, &e, &head] {
        c.check(
            c.ancestor(commit, &head2).await,
            format!("{commit} reachable from the merged HEAD"),
        );
    }
    c.check(
        wt_b.join("d.txt").exists() && wt_b.join("e.txt").exists(),
        "files of both merged commits present",
    );

    // A worktree whose HEAD the commit already contains catches up (fast-forward allowed).
    let wt_c = c.wt("fi-c");
    c.ok(
        "create c",
        git.create_worktree(c.repo(), &wt_c, &base).await,
    );
    let head_c = c.ok(
        "merge into base worktree",
        git.merge_into_worktree(&wt_c, std::slice::from_ref(&e), "m", None)
            .await,
    );
    c.check(c.ancestor(&e, &head_c).await, "descendant commit merged");
    c.same(
        c.read(&wt_c.join("e.txt")).as_deref(),
        Some("e\n"),
        "files follow a fast-forward",
    );
    c.same(
        c.ok(
            "merge nothing",
            git.merge_into_worktree(&wt_c, &[], "m", None).await,
        ),
        head_c,
        "no commits, no change",
    );
}

/// Two commits on `base` that change `src/lib.rs` and `docs/guide.md` differently.
pub(super) async fn conflicting_pair(
    c: &Case<'_>,
    base: &str,
) -> (PathBuf, CommitId, PathBuf, CommitId) {
    let (wt_a, a) = c
        .commit_on(
            "cf-a",
            base,
            &[
                ("src/lib.rs", "line 1\nA\nline 3\n"),
                ("docs/guide.md", "guide A\n"),
                ("only-a.txt", "a\n"),
            ],
            &[],
        )
        .await;
    let (wt_b, b) = c
        .commit_on(
            "cf-b",
            base,
            &[
                ("src/lib.rs", "line 1\nB\nline 3\n"),
                ("docs/guide.md", "guide B\n"),
                ("only-b.txt", "b\n"),
            ],
            &[],
        )
        .await;
    (wt_a, a, wt_b, b)
}

pub(super) async fn merge_into_worktree_conflict_changes_nothing(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, a, wt_b, b) = conflicting_pair(c, &base).await;
    let (_, clean) = c
        .commit_on("cf-clean", &base, &[("clean.txt", "c\n")], &[])
        .await;
    let e = c.err(
        "merge conflicting",
        git.merge_into_worktree(&wt_b, &[clean.clone(), a.clone()], "m", None)
            .await,
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
        c.ok("head", git.head(&wt_b).await),
        b.clone(),
        "HEAD unchanged after a conflict",
    );
    c.same(
        c.read(&wt_b.join("src/lib.rs")).as_deref(),
        Some("line 1\nB\nline 3\n"),
        "files unchanged after a conflict",
    );
    c.check(
        !wt_b.join("only-a.txt").exists() && !wt_b.join("clean.txt").exists(),
        "no half-merged files",
    );
    c.same(
        c.ok("commit after conflict", git.commit_all(&wt_b, "x").await),
        None,
        "worktree clean after a conflict",
    );
}

/// Records its calls and writes `resolved <path>` into each path (or fails, or does nothing).
#[derive(Debug, Default)]
pub(super) struct RecordingResolver {
    calls: Mutex<Vec<(PathBuf, Vec<String>)>>,
    fail: bool,
    idle: bool,
}

#[async_trait]
impl ConflictResolver for RecordingResolver {
    async fn resolve(&self, worktree: &Path, paths: &[String]) -> Result<(), GitError> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push((worktree.to_path_buf(), paths.to_vec()));
        }
        if self.fail {
            return Err(GitError::other("resolve", "the resolver gave up"));
        }
        if self.idle {
            return Ok(());
        }
        for path in paths {
            std::fs::write(worktree.join(path), format!("resolved {path}\n"))
                .map_err(|e| GitError::other("resolve", e))?;
        }
        Ok(())
    }
}

pub(super) async fn merge_into_worktree_uses_the_resolver(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, a, wt_b, b) = conflicting_pair(c, &base).await;
    let resolver = RecordingResolver::default();
    let head = c.ok(
        "merge with resolver",
        git.merge_into_worktree(
            &wt_b,
            std::slice::from_ref(&a),
            "[Plan] resolved",
            Some(&resolver),
        )
        .await,
    );
    let calls = resolver.calls.lock().map(|c| c.clone()).unwrap_or_default();
    c.same(calls.len(), 1, "resolver called once");
    if let Some((worktree, paths)) = calls.first() {
        c.same(
            canonical(worktree),
            canonical(&wt_b),
            "resolver given the worktree",
        );
        c.same(
            paths.clone(),
            vec!["docs/guide.md".to_string(), "src/lib.rs".to_string()],
            "resolver given the sorted paths",
        );
    }
    c.check(
        c.ancestor(&a, &head).await && c.ancestor(&b, &head).await,
        "resolved merge has both parents' history",
    );
    c.same(
        c.ok("head", git.head(&wt_b).await),
        head.clone(),
        "HEAD is the resolved merge",
    );
    c.same(
        c.read(&wt_b.join("src/lib.rs")).as_deref(),
        Some("resolved src/lib.rs\n"),
        "resolved file in the worktree",
    );
    c.same(
        c.file_at(&head, "src/lib.rs").await.as_deref(),
        Some("resolved src/lib.rs\n"),
        "resolved file committed",
    );
    c.same(
        c.file_at(&head, "only-a.txt").await.as_deref(),
        Some("a\n"),
        "clean side of the merge committed",
    );
    c.same(
        c.ok("commit after resolve", git.commit_all(&wt_b, "x").await),
        None,
        "worktree clean after resolution",
    );
}

pub(super) async fn merge_into_worktree_failed_resolver_changes_nothing(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, a, wt_b, b) = conflicting_pair(c, &base).await;
    let resolver = RecordingResolver {
        fail: true,
        ..Default::default()
    };
    c.err(
        "merge with failing resolver",
        git.merge_into_worktree(&wt_b, &[a], "m", Some(&resolver))
            .await,
    );
    c.same(
        c.ok("head", git.head(&wt_b).await),
        b,
        "HEAD unchanged when the resolver fails",
    );
    c.same(
        c.read(&wt_b.join("src/lib.rs")).as_deref(),
        Some("line 1\nB\nline 3\n"),
        "conflicted file restored",
    );
    c.check(
        !wt_b.join("only-a.txt").exists(),
        "merged-in file removed again",
    );
    c.same(
        c.ok("commit after failure", git.commit_all(&wt_b, "x").await),
        None,
        "worktree clean after a failed resolution",
    );
}

pub(super) async fn merge_into_worktree_refuses_leftover_conflict_markers(c: &Case<'_>) {
    let git = c.git();
    let base = c.base().await;
    let (_, a, wt_b, b) = conflicting_pair(c, &base).await;
    let resolver = RecordingResolver {
        idle: true,
        ..Default::default()
    };
    let e = c.err(
        "merge with a resolver that leaves markers",
        git.merge_into_worktree(&wt_b, &[a], "m", Some(&resolver))
            .await,
    );
    match e {
        GitError::MergeConflict { paths, .. } => c.same(
            paths,
            vec!["docs/guide.md".to_string(), "src/lib.rs".to_string()],
            "paths still conflicted",
        ),
        other => c.check(false, format!("expected MergeConflict, got {other:?}")),
    }
    c.same(
        c.ok("head", git.head(&wt_b).await),
        b,
        "nothing committed with markers",
    );
    c.same(
        c.read(&wt_b.join("src/lib.rs")).as_deref(),
        Some("line 1\nB\nline 3\n"),
        "conflicted file restored",
    );
    c.same(
        c.ok("commit after markers", git.commit_all(&wt_b, "x").await),
        None,
        "worktree clean after a refused resolution",
    );
}
