//! Fixtures the integration tests of the workspace share: temporary git repositories made
//! with the `git` CLI and checks against it, process liveness and signals, waiting for files
//! and processes, a small deterministic random generator, and plan/status JSON helpers.
//!
//! These are test helpers: when something they need fails (a temporary folder, a `git`
//! command, a file write), they panic with a message saying what failed, which fails the test.
//!
//! ```
//! use orchestrator_testkit::fixtures::TempRepo;
//! let repo = TempRepo::with_files(&[("README.md", "hello\n")]);
//! assert_eq!(repo.show("main", "README.md"), "hello\n");
//! ```

pub mod git;
pub mod plan;
pub mod process;
pub mod repo;
pub mod rng;
pub mod wait;

pub use git::{
    assert_git_healthy, cli_linked_worktrees, cli_worktrees, git, git_cmd, git_output, git_stdout,
    git_try, init_repo, isolate, snapshot_checkout, Checked, TEST_EMAIL, TEST_NAME,
};
pub use plan::{job, job_doc, job_statuses};
pub use process::{
    alive, copy_repo, kill, on_path, signal, terminate, unreaped_child_of_ours, wait_child, Run,
};
pub use repo::TempRepo;
pub use rng::{seed_from_env, Rng};
pub use wait::{dies_within, gone_within, read_pid, wait_for_file, wait_for_line, wait_for_pid};
