//! Core's conformance suite against `Git2Operations` on repositories made by the `git` CLI;
//! after each case `git fsck --full` is clean and `git worktree list` shows only live worktrees.

mod common;

use orchestrator_core::conformance::git::run_all;
use orchestrator_git::Git2Operations;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git2_operations_pass_the_conformance_suite() {
    let cases = run_all(|| async { common::fixture(Git2Operations::new()) }).await;
    assert!(cases >= 25, "the suite ran {cases} cases");
}
