//! Conformance suite for [`GitOperations`]: every rule of the trait's documentation, as cases.
//!
//! An implementation's tests call [`run_all`] with a factory that builds a fresh [`GitFixture`]
//! per case: a repository folder whose default branch holds [`INITIAL_FILES`] in one commit and
//! is checked out (clean) in the folder. Each case panics with a message that starts with the
//! case's name.
//!
//! Worktrees are created under `<repo>/.worktrees/`, as the engine does; implementations must
//! accept paths inside the repository folder and refuse paths that leave it.
//!
//! The cases are grouped by what they check: `branches` (ids and refs), `worktrees`,
//! `commits` (commits, diff statistics, excludes), `merge_worktree` and `merge_branch`; `case`
//! holds the helper every case runs with.

use std::any::Any;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::git::GitOperations;

mod branches;
mod case;
mod commits;
mod merge_branch;
mod merge_worktree;
mod worktrees;

use self::branches::*;
use self::case::Case;
use self::commits::*;
use self::merge_branch::*;
use self::merge_worktree::*;
use self::worktrees::*;

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
        own_refs_are_set_resolved_and_deleted,
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
