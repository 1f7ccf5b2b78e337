//! Conformance suite for [`GitOperations`]: every rule of the trait's documentation, as cases.
//!
//! An implementation's tests call [`run_all`] with a factory that builds a fresh [`GitFixture`]
//! per case: a repository folder whose default branch holds [`INITIAL_FILES`] in one commit and
//! is checked out (clean) in the folder. Each case panics with a message that starts with the
//! case's name.
//!
//! Worktrees are created under `<repo>/.worktrees/`, as the engine does; implementations must
//! accept paths inside the repository folder and refuse paths that leave it.

use std::any::Any;
use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::git::{CommitId, ConflictResolver, DiffStats, GitError, GitOperations, MergeStyle};

/// The files of the fixture's initial commit.
pub const INITIAL_FILES: &[(&str, &str)] = &[
    ("README.md", "# fixture\n"),
    ("src/lib.rs", "line 1\nline 2\nline 3\n"),
    ("src/util.rs", "one\ntwo\nthree\n"),
    ("docs/guide.md", "guide\n"),
];

/// Checks out a branch (attaching HEAD) or a commit (detaching HEAD) in the main checkout, like
/// the user running `git switch`. Arguments: repository folder, branch name or commit id.
pub type SwitchFn = Arc<dyn Fn(&Path, &str) -> Result<(), String> + Send + Sync>;

/// One fresh repository for one case.
pub struct GitFixture {
    /// The implementation under test.
    pub git: Arc<dyn GitOperations>,
    /// The main checkout: [`Self::default_branch`] checked out, holding [`INITIAL_FILES`].
    pub repo: PathBuf,
    /// The name of the default branch.
    pub default_branch: String,
    /// Stands for the user switching branches in the main checkout.
    pub switch: SwitchFn,
    /// Kept alive for the duration of the case (e.g. the temporary folder).
    pub guard: Box<dyn Any + Send + Sync>,
}

/// Writes `files` (relative path, content) under `dir`, creating folders as needed.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) -> std::io::Result<()> {
    for (path, content) in files {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(file, content)?;
    }
    Ok(())
}

/// Runs every case, each on a fresh fixture from `factory`. Returns how many cases ran.
pub async fn run_all<F, Fut>(factory: F) -> usize
where
    F: Fn() -> Fut,
    Fut: Future<Output = GitFixture>,
{
    macro_rules! cases {
        ($($case:ident),* $(,)?) => {{
            let mut count = 0;
            $({
                // One fixture per case, dropped (and its folder deleted) when the case ends.
                let fixture = factory().await;
                $case(&Case { name: stringify!($case), fx: &fixture }).await;
                count += 1;
            })*
            count
        }};
    }
    cases!(
        resolve_and_branch_tips,
        default_and_current_branch,
        update_branch_is_compare_and_swap,
        branch_names_are_validated,
        default_and_checked_out_branches_are_protected,
        delete_branch_rules,
        is_ancestor_rules,
        worktree_lifecycle,
        worktree_create_is_reused_on_retry,
        worktree_paths_stay_inside_the_repository,
        worktree_removal_keeps_symlink_targets,
        worktree_removal_refuses_plain_folders,
        head_of_a_non_worktree_is_not_found,
        commit_all_rules,
        commit_all_stores_nested_repositories_as_plain_files,
        reset_worktree_restores_the_commit,
        remove_broken_worktree_rules,
        merge_into_worktree_combines_disjoint_changes,
        merge_into_worktree_conflict_changes_nothing,
        merge_into_worktree_uses_the_resolver,
        merge_into_worktree_failed_resolver_changes_nothing,
        merge_into_worktree_refuses_leftover_conflict_markers,
        merge_into_branch_merge_commit,
        merge_into_branch_fast_forward,
        merge_into_branch_conflict_changes_nothing,
        merge_into_branch_missing_inputs,
        merge_into_checked_out_clean_branch,
        merge_into_dirty_checkout_is_refused,
        diff_stats_counts,
        exclude_is_idempotent,
        concurrent_merges_into_one_branch,
    )
}

/// A running case: its name (prefixed to every failure) and its fixture.
struct Case<'a> {
    name: &'static str,
    fx: &'a GitFixture,
}

impl Case<'_> {
    fn git(&self) -> &dyn GitOperations {
        self.fx.git.as_ref()
    }

    fn repo(&self) -> &Path {
        &self.fx.repo
    }

    fn main(&self) -> &str {
        &self.fx.default_branch
    }

    /// Unwraps `result`, naming the case and step on failure.
    #[track_caller]
    fn ok<T>(&self, step: &str, result: Result<T, GitError>) -> T {
        match result {
            Ok(v) => v,
            Err(e) => panic!("[{}] {step}: unexpected error: {e:?}", self.name),
        }
    }

    /// The error of `result`, naming the case and step when it succeeded.
    #[track_caller]
    fn err<T: std::fmt::Debug>(&self, step: &str, result: Result<T, GitError>) -> GitError {
        match result {
            Ok(v) => panic!("[{}] {step}: expected an error, got Ok({v:?})", self.name),
            Err(e) => e,
        }
    }

    #[track_caller]
    fn check(&self, cond: bool, what: impl std::fmt::Display) {
        assert!(cond, "[{}] {what}", self.name);
    }

    #[track_caller]
    fn same<T: PartialEq + std::fmt::Debug>(&self, left: T, right: T, what: &str) {
        assert_eq!(left, right, "[{}] {what}", self.name);
    }

    fn wt(&self, name: &str) -> PathBuf {
        self.repo().join(".worktrees").join(name)
    }

    fn write(&self, dir: &Path, files: &[(&str, &str)]) {
        if let Err(e) = write_files(dir, files) {
            panic!("[{}] writing files in {}: {e}", self.name, dir.display());
        }
    }

    fn read(&self, file: &Path) -> Option<String> {
        std::fs::read_to_string(file).ok()
    }

    fn switch(&self, rev: &str) {
        if let Err(e) = (self.fx.switch)(self.repo(), rev) {
            panic!("[{}] switching the main checkout to {rev}: {e}", self.name);
        }
    }

    async fn base(&self) -> CommitId {
        let tip = self.ok(
            "branch_tip(default)",
            self.git().branch_tip(self.repo(), self.main()).await,
        );
        match tip {
            Some(tip) => tip,
            None => panic!("[{}] the default branch has no tip", self.name),
        }
    }

    /// Creates worktree `name` at `base`, writes `files`, removes `delete`, commits.
    async fn commit_on(
        &self,
        name: &str,
        base: &str,
        files: &[(&str, &str)],
        delete: &[&str],
    ) -> (PathBuf, CommitId) {
        let wt = self.wt(name);
        self.ok(
            "create_worktree",
            self.git().create_worktree(self.repo(), &wt, base).await,
        );
        self.write(&wt, files);
        for path in delete {
            if let Err(e) = std::fs::remove_file(wt.join(path)) {
                panic!("[{}] deleting {path}: {e}", self.name);
            }
        }
        let commit = self.ok(
            "commit_all",
            self.git().commit_all(&wt, &format!("[Plan] {name}")).await,
        );
        match commit {
            Some(c) => (wt, c),
            None => panic!(
                "[{}] commit_all in {name} found nothing to commit",
                self.name
            ),
        }
    }

    async fn ancestor(&self, ancestor: &str, descendant: &str) -> bool {
        self.ok(
            "is_ancestor",
            self.git()
                .is_ancestor(self.repo(), ancestor, descendant)
                .await,
        )
    }

    async fn tip(&self, branch: &str) -> Option<CommitId> {
        self.ok(
            "branch_tip",
            self.git().branch_tip(self.repo(), branch).await,
        )
    }

    /// The content of `file` in `commit`, read through a throwaway worktree.
    async fn file_at(&self, commit: &str, file: &str) -> Option<String> {
        let wt = self.wt(&format!("peek-{}", &commit[..commit.len().min(12)]));
        self.ok(
            "create_worktree(peek)",
            self.git().create_worktree(self.repo(), &wt, commit).await,
        );
        let content = self.read(&wt.join(file));
        self.ok(
            "remove_worktree(peek)",
            self.git().remove_worktree(self.repo(), &wt).await,
        );
        content
    }

    async fn worktree_set(&self) -> BTreeSet<PathBuf> {
        let list = self.ok(
            "list_worktrees",
            self.git().list_worktrees(self.repo()).await,
        );
        list.iter().map(|p| canonical(p)).collect()
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

const UNKNOWN_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

async fn resolve_and_branch_tips(c: &Case<'_>) {
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

async fn default_and_current_branch(c: &Case<'_>) {
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

async fn update_branch_is_compare_and_swap(c: &Case<'_>) {
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

async fn branch_names_are_validated(c: &Case<'_>) {
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

async fn default_and_checked_out_branches_are_protected(c: &Case<'_>) {
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

async fn delete_branch_rules(c: &Case<'_>) {
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

async fn is_ancestor_rules(c: &Case<'_>) {
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

async fn worktree_lifecycle(c: &Case<'_>) {
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

async fn worktree_create_is_reused_on_retry(c: &Case<'_>) {
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

async fn worktree_paths_stay_inside_the_repository(c: &Case<'_>) {
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

async fn worktree_removal_keeps_symlink_targets(c: &Case<'_>) {
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

async fn worktree_removal_refuses_plain_folders(c: &Case<'_>) {
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

async fn head_of_a_non_worktree_is_not_found(c: &Case<'_>) {
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

async fn commit_all_rules(c: &Case<'_>) {
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

async fn commit_all_stores_nested_repositories_as_plain_files(c: &Case<'_>) {
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
}

async fn reset_worktree_restores_the_commit(c: &Case<'_>) {
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

async fn remove_broken_worktree_rules(c: &Case<'_>) {
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
fn link_dir(c: &Case<'_>, target: &Path, link: &Path) {
    if let Err(e) = std::os::unix::fs::symlink(target, link) {
        panic!("[{}] linking {}: {e}", c.name, link.display());
    }
}

async fn merge_into_worktree_combines_disjoint_changes(c: &Case<'_>) {
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
async fn conflicting_pair(c: &Case<'_>, base: &str) -> (PathBuf, CommitId, PathBuf, CommitId) {
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

async fn merge_into_worktree_conflict_changes_nothing(c: &Case<'_>) {
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
struct RecordingResolver {
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

async fn merge_into_worktree_uses_the_resolver(c: &Case<'_>) {
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

async fn merge_into_worktree_failed_resolver_changes_nothing(c: &Case<'_>) {
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

async fn merge_into_worktree_refuses_leftover_conflict_markers(c: &Case<'_>) {
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

async fn merge_into_branch_merge_commit(c: &Case<'_>) {
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

async fn merge_into_branch_fast_forward(c: &Case<'_>) {
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

async fn merge_into_branch_conflict_changes_nothing(c: &Case<'_>) {
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

async fn merge_into_branch_missing_inputs(c: &Case<'_>) {
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

async fn merge_into_checked_out_clean_branch(c: &Case<'_>) {
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

async fn merge_into_dirty_checkout_is_refused(c: &Case<'_>) {
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

async fn diff_stats_counts(c: &Case<'_>) {
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

async fn exclude_is_idempotent(c: &Case<'_>) {
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

async fn concurrent_merges_into_one_branch(c: &Case<'_>) {
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
