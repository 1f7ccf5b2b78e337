//! Cross-crate library tests through the facade (`orchestrator::core`, `::git`, `::storage`,
//! `::agents`), shaped like the README's library example: the builder with the file store,
//! `Git2Operations` and the shell and process runners, running a diamond plan on a real git
//! repository in a temporary folder, checked with the `git` CLI; a failed job blocking its
//! dependents and a retry finishing the plan; and a second orchestrator on the same store
//! taking a stored plan over.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orchestrator::agents::{ProcessRunner, ShellRunner};
use orchestrator::core::plan::{JobSpec, PlanSpec, WorkSpec};
use orchestrator::core::{
    NodeStatus, Orchestrator, OrchestratorEvent, PlanId, PlanStatus, RetryRequest,
};
use orchestrator::git::Git2Operations;
use orchestrator::storage::FsPlanRepository;
use orchestrator_testkit::fixtures::{git, git_output, TempRepo};

/// A fresh repository on `main` with one commit of `README.md` (`hello\n`) and its canonical
/// path (the one `git worktree list` prints).
fn temp_repo() -> (TempRepo, PathBuf) {
    let temp = TempRepo::new();
    let repo = std::fs::canonicalize(&temp.dir).expect("canonical repo");
    (temp, repo)
}

/// The README's builder: file store under `<repo>/.orchestrator`, git2, shell and process
/// runners, and a callback collecting every plan status change.
fn orchestrator(repo: &Path, statuses: Arc<Mutex<Vec<PlanStatus>>>) -> Orchestrator {
    Orchestrator::builder()
        .repository(FsPlanRepository::new(repo.join(".orchestrator")))
        .git(Git2Operations::new())
        .runner("shell", ShellRunner::new())
        .runner("process", ProcessRunner::new())
        .on_event(move |event| {
            if let OrchestratorEvent::PlanStatusChanged { to, .. } = event {
                statuses.lock().unwrap_or_else(|e| e.into_inner()).push(*to);
            }
        })
        .build()
        .expect("build the orchestrator")
}

/// A diamond: `fetch`; `left` (shell) and `right` (process) each build on its file; `join`
/// needs both, so it only succeeds once both branches were merged into its worktree.
fn diamond(right: WorkSpec) -> PlanSpec {
    PlanSpec::new("diamond")
        .job(JobSpec::new(
            "fetch",
            "Fetch",
            WorkSpec::shell("printf 'fetched\\n' > fetch.txt"),
        ))
        .job(
            JobSpec::new(
                "left",
                "Left",
                WorkSpec::shell("cat fetch.txt > left.txt && echo left >> left.txt"),
            )
            .depends_on(["fetch"]),
        )
        .job(JobSpec::new("right", "Right", right).depends_on(["fetch"]))
        .job(
            JobSpec::new(
                "join",
                "Join",
                WorkSpec::shell(
                    "cat left.txt right.txt > join.txt && echo \"by $WHO\" >> join.txt",
                ),
            )
            .env("WHO", "the join job")
            .depends_on(["left", "right"]),
        )
}

/// The `right` job that works: a process, no shell.
fn right_ok() -> WorkSpec {
    WorkSpec::process("cp", ["fetch.txt", "right.txt"])
}

/// What `join.txt` holds on the target branch after a successful run.
const JOINED: &str = "fetched\nleft\nfetched\nby the join job\n";

/// The worktrees `git worktree list` shows besides the user's checkout, once the engine's
/// cleanup (which may finish just after the plan does) is done, waiting up to 10 s.
fn extra_worktrees(repo: &Path) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = git(repo, &["worktree", "list", "--porcelain"]);
        let extra: Vec<String> = listed
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .filter(|p| Path::new(p) != repo)
            .map(str::to_owned)
            .collect();
        if extra.is_empty() || Instant::now() > deadline {
            return extra;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The repository is sound and the user's checkout is as it was: `main` at `initial`, clean.
fn assert_repo_sound(repo: &Path, initial: &str) {
    let fsck = git_output(repo, &["fsck", "--full", "--strict"]);
    assert!(
        fsck.status.success(),
        "git fsck: {}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    assert_eq!(git(repo, &["rev-parse", "HEAD"]), initial);
    assert_eq!(git(repo, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(
        git(repo, &["status", "--porcelain"]),
        "",
        "the user's checkout changed (or the store and worktrees are not excluded)"
    );
}

fn statuses_of(plan: &orchestrator::core::state::PlanRecord) -> Vec<NodeStatus> {
    plan.state.nodes.iter().map(|n| n.status).collect()
}

#[tokio::test]
async fn a_diamond_plan_lands_on_its_target_branch() {
    let (_temp, repo) = temp_repo();
    let initial = git(&repo, &["rev-parse", "HEAD"]);
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let o = orchestrator(&repo, statuses.clone());

    let id = o.run(diamond(right_ok()), &repo).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);

    let record = o.status(&id).await.expect("status");
    assert!(
        statuses_of(&record)
            .iter()
            .all(|s| *s == NodeStatus::Succeeded),
        "{:#?}",
        record.state.nodes
    );
    let target = record.state.target_branch.clone().expect("a target branch");
    assert_eq!(target, "orchestrator/diamond");
    // Every job's work is on the target branch, built on the repository's history.
    let tip = format!("refs/heads/{target}");
    assert_eq!(
        git(&repo, &["show", &format!("{tip}:join.txt")]),
        JOINED.trim_end()
    );
    assert_eq!(
        git(&repo, &["show", &format!("{tip}:right.txt")]),
        "fetched"
    );
    let files = git(&repo, &["ls-tree", "--name-only", &tip]);
    assert_eq!(
        files.lines().collect::<Vec<_>>(),
        [
            "README.md",
            "fetch.txt",
            "join.txt",
            "left.txt",
            "right.txt"
        ]
    );
    git(&repo, &["merge-base", "--is-ancestor", &initial, &tip]);
    assert_eq!(extra_worktrees(&repo), Vec::<String>::new());
    assert_repo_sound(&repo, &initial);
    let seen = statuses.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(seen.last(), Some(&PlanStatus::Succeeded), "{seen:?}");
}

#[tokio::test]
async fn a_failed_job_blocks_its_dependents_until_a_retry_fixes_it() {
    let (_temp, repo) = temp_repo();
    let initial = git(&repo, &["rev-parse", "HEAD"]);
    let o = orchestrator(&repo, Arc::new(Mutex::new(Vec::new())));

    let broken = WorkSpec::process("sh", ["-c", "echo 'no right today' >&2; exit 4"]);
    let id = o.run(diamond(broken), &repo).await.expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let record = o.status(&id).await.expect("status");
    // Jobs in plan order, then the snapshot node.
    assert_eq!(
        statuses_of(&record)[..4],
        [
            NodeStatus::Succeeded,
            NodeStatus::Succeeded,
            NodeStatus::Failed,
            NodeStatus::Blocked
        ]
    );
    let error = record.state.nodes[2]
        .extra
        .error
        .clone()
        .unwrap_or_default();
    assert!(error.contains("exit code 4"), "{error}");
    // Nothing landed: the target branch does not exist or still is the base commit.
    let landed = git_output(
        &repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "refs/heads/orchestrator/diamond",
        ],
    );
    let tip = String::from_utf8_lossy(&landed.stdout).trim().to_owned();
    assert!(!landed.status.success() || tip == initial, "{tip}");
    assert_repo_sound(&repo, &initial);

    let retried = o
        .retry(&id, RetryRequest::jobs(["right"]).with_work(right_ok()))
        .await
        .expect("retry");
    assert_eq!(retried, 1);
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    git(&repo, &["show", "refs/heads/orchestrator/diamond:join.txt"]);
    assert_eq!(extra_worktrees(&repo), Vec::<String>::new());
    assert_repo_sound(&repo, &initial);
}

#[tokio::test]
async fn a_second_orchestrator_takes_a_stored_plan_over() {
    let (_temp, repo) = temp_repo();
    let initial = git(&repo, &["rev-parse", "HEAD"]);

    // The first owner stores the plan but does not start it, then lets it go.
    let first = orchestrator(&repo, Arc::new(Mutex::new(Vec::new())));
    let id: PlanId = first
        .create_plan(diamond(right_ok()), &repo)
        .await
        .expect("create");
    let second_statuses = Arc::new(Mutex::new(Vec::new()));
    let second = orchestrator(&repo, second_statuses.clone());
    let refused = second.open_plan(&id).await;
    assert!(
        refused.is_err(),
        "a plan with a live owner was opened twice"
    );
    first.release(&id).await.expect("release");

    // A second orchestrator on the same store (a restart) opens, starts and finishes it.
    second.open_plan(&id).await.expect("open the stored plan");
    let opened = second.status(&id).await.expect("status");
    assert!(
        opened.state.nodes.iter().all(|n| n.attempts.is_empty()),
        "a clean hand-over records no crashed attempts: {:#?}",
        opened.state.nodes
    );
    second.start(&id).await.expect("start");
    assert_eq!(second.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(
        git(&repo, &["show", "refs/heads/orchestrator/diamond:join.txt"]),
        JOINED.trim_end()
    );
    second.release(&id).await.expect("release");

    // A third one reopens the finished plan as it was stored: nothing re-runs or changes.
    let third = orchestrator(&repo, Arc::new(Mutex::new(Vec::new())));
    third
        .open_plan(&id)
        .await
        .expect("reopen the finished plan");
    let reopened = third.status(&id).await.expect("status");
    assert_eq!(third.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let before = second_statuses
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    assert_eq!(before.last(), Some(&PlanStatus::Succeeded), "{before:?}");
    assert!(
        reopened
            .state
            .nodes
            .iter()
            .all(|n| n.status == NodeStatus::Succeeded && n.attempts.len() == 1),
        "{:#?}",
        reopened.state.nodes
    );
    assert_eq!(
        reopened.state.target_branch.as_deref(),
        Some("orchestrator/diamond")
    );
    assert_eq!(extra_worktrees(&repo), Vec::<String>::new());
    assert_repo_sound(&repo, &initial);
}
