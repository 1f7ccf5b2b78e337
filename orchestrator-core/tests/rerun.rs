//! The rule for a phase that runs again, on the git fake: a shell phase's half-done work is
//! reset away, while an agent that resumes its session keeps its files and is told it was
//! interrupted (files and conversation go on together). The CLI crate's `rerun.rs` checks the
//! shell side on real git with every way of stopping.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use orchestrator_core::git::memory::MemoryGit;
use orchestrator_core::plan::{AgentSpec, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::runner::WorkFailure;
use orchestrator_core::{
    FnRunner, GitOperations, Orchestrator, PlanStatus, RetryRequest, WorkOutput,
};

/// What the runner saw on each call: whether it was told it continues, and README.md.
type Seen = Arc<Mutex<Vec<(bool, String)>>>;

/// A runner that appends a line to README.md; its first call then fails (an interruption,
/// reporting its session as an agent CLI does), later calls succeed without appending again
/// when the file already has the line.
fn appending(seen: Seen) -> FnRunner {
    FnRunner::sync(move |_, ctx| {
        let file = ctx.dir.join("README.md");
        let text = std::fs::read_to_string(&file).map_err(|e| WorkFailure::new(e.to_string()))?;
        let mut calls = seen.lock().map_err(|_| WorkFailure::new("poisoned"))?;
        calls.push((ctx.continues_unfinished, text.clone()));
        if !text.contains("appended") {
            std::fs::write(&file, format!("{text}appended\n"))
                .map_err(|e| WorkFailure::new(e.to_string()))?;
        }
        if calls.len() == 1 {
            let mut failure = WorkFailure::new("interrupted");
            failure.session_id = Some("session-1".into());
            return Err(failure);
        }
        Ok(WorkOutput::default())
    })
}

struct Fixture {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    git: MemoryGit,
    o: Orchestrator,
    seen: Seen,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    let git = MemoryGit::new();
    git.init_repo(&repo, "main", &[("README.md", "hello\n")])
        .expect("init");
    let seen = Seen::default();
    let o = Orchestrator::builder()
        .git(git.clone())
        .runner("shell", appending(seen.clone()))
        .runner("agent", appending(seen.clone()))
        .build()
        .expect("build");
    Fixture {
        _tmp: tmp,
        repo,
        git,
        o,
        seen,
    }
}

async fn run_then_retry(f: &Fixture, work: WorkSpec) -> String {
    let plan = PlanSpec::new("rerun").job(JobSpec::new("append", "Append", work));
    let id = f.o.run(plan, &f.repo).await.expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    f.o.retry(&id, RetryRequest::all_failed())
        .await
        .expect("retry");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let tip = f
        .git
        .resolve(&f.repo, "orchestrator/rerun")
        .await
        .expect("target");
    let read = f.repo.join(".worktrees").join("read");
    f.git
        .create_worktree(&f.repo, &read, &tip)
        .await
        .expect("read worktree");
    std::fs::read_to_string(read.join("README.md")).expect("README")
}

fn seen(f: &Fixture) -> Vec<(bool, String)> {
    f.seen.lock().expect("lock").clone()
}

#[tokio::test]
async fn an_agent_resuming_its_session_keeps_its_files_and_is_told() {
    let f = fixture();
    let work = WorkSpec::Agent(Box::new(AgentSpec {
        instructions: Some("append".into()),
        ..AgentSpec::default()
    }));
    assert_eq!(run_then_retry(&f, work).await, "hello\nappended\n");
    assert_eq!(
        seen(&f),
        vec![
            (false, "hello\n".to_owned()),
            (true, "hello\nappended\n".to_owned()),
        ],
        "the second run continues on the files the first left, and knows it"
    );
}

#[tokio::test]
async fn an_agent_that_starts_a_new_session_starts_from_clean_files() {
    let f = fixture();
    let work = WorkSpec::Agent(Box::new(AgentSpec {
        instructions: Some("append".into()),
        resume_session: Some(false),
        ..AgentSpec::default()
    }));
    assert_eq!(run_then_retry(&f, work).await, "hello\nappended\n");
    assert_eq!(
        seen(&f),
        vec![(false, "hello\n".to_owned()), (false, "hello\n".to_owned())],
        "a new conversation gets the files the phase began with"
    );
}

#[tokio::test]
async fn a_shell_phase_that_runs_again_starts_from_clean_files() {
    let f = fixture();
    assert_eq!(
        run_then_retry(&f, WorkSpec::shell("append")).await,
        "hello\nappended\n"
    );
    assert_eq!(
        seen(&f),
        vec![(false, "hello\n".to_owned()), (false, "hello\n".to_owned())]
    );
}
