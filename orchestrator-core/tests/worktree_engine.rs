//! The full worktree pipeline on the in-memory git fake: merge-fi, commit, merge-ri into the
//! snapshot branch, snapshot validation and the final merge, cleanup, conflicts, retries and a
//! dirty checked-out target. (The same pipeline on real git is tested in the CLI crate.)

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use orchestrator_core::git::memory::MemoryGit;
use orchestrator_core::plan::{JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::runner::WorkFailure;
use orchestrator_core::state::{FailureReason, PlanRecord};
use orchestrator_core::{
    FnRunner, GitOperations, NodeStatus, Orchestrator, Phase, PlanStatus, RetryRequest,
    WorkContext, WorkOutput,
};

/// Shell commands are a tiny script language: `write <file> <text>`, `need <file>`,
/// `count <file>` (appends a line to a counter outside the repo), `fail`, `nothing`.
fn runner(counter_dir: PathBuf) -> FnRunner {
    FnRunner::sync(move |spec, ctx: &WorkContext| {
        let WorkSpec::Shell(s) = spec else {
            return Err(WorkFailure::new("shell only"));
        };
        for cmd in s.command.split(';') {
            let words: Vec<&str> = cmd.split_whitespace().collect();
            match words.as_slice() {
                ["write", file, text @ ..] => std::fs::write(ctx.dir.join(file), text.join(" "))
                    .map_err(|e| WorkFailure::new(e.to_string()))?,
                ["need", file] => {
                    if !ctx.dir.join(file).exists() {
                        return Err(WorkFailure::new(format!(
                            "{file} missing in {}",
                            ctx.dir.display()
                        )));
                    }
                }
                ["count", name] => {
                    let p = counter_dir.join(name);
                    let old = std::fs::read_to_string(&p).unwrap_or_default();
                    std::fs::write(&p, format!("{old}x"))
                        .map_err(|e| WorkFailure::new(e.to_string()))?;
                }
                ["fail"] => return Err(WorkFailure::new("scripted failure").exit_code(1)),
                ["nothing"] | [] => {}
                other => return Err(WorkFailure::new(format!("unknown command {other:?}"))),
            }
        }
        Ok(WorkOutput::default())
    })
}

struct Fixture {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    counters: PathBuf,
    git: MemoryGit,
    o: Orchestrator,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    let counters = tmp.path().join("counters");
    std::fs::create_dir_all(&counters).expect("mkdir");
    let git = MemoryGit::new();
    git.init_repo(
        &repo,
        "main",
        &[("README.md", "hello\n"), ("shared.txt", "base\n")],
    )
    .expect("init");
    let o = Orchestrator::builder()
        .git(git.clone())
        .runner("shell", runner(counters.clone()))
        .build()
        .expect("build");
    Fixture {
        _tmp: tmp,
        repo,
        counters,
        git,
        o,
    }
}

fn job(id: &str, cmd: &str, deps: &[&str]) -> JobSpec {
    JobSpec::new(id, format!("task {id}"), WorkSpec::shell(cmd)).depends_on(deps.iter().copied())
}

fn node<'a>(r: &'a PlanRecord, id: &str) -> &'a orchestrator_core::state::NodeState {
    let i = r
        .spec
        .jobs
        .iter()
        .position(|j| j.producer_id == id)
        .expect("job");
    &r.state.nodes[i]
}

/// Files of `rev`, read through a scratch worktree.
async fn files_at(f: &Fixture, rev: &str) -> Vec<(String, String)> {
    let commit = f.git.resolve(&f.repo, rev).await.expect("resolve");
    let scratch = f.repo.join(".worktrees").join("scratch-read");
    f.git
        .create_worktree(&f.repo, &scratch, &commit)
        .await
        .expect("scratch");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&scratch).expect("read") {
        let e = e.expect("entry");
        if e.path().is_file() {
            out.push((
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).expect("read file"),
            ));
        }
    }
    out.sort();
    f.git
        .remove_worktree(&f.repo, &scratch)
        .await
        .expect("remove scratch");
    out
}

/// Creates `branch` at main plus one commit adding `file`, through a scratch worktree.
async fn branch_with_file(f: &Fixture, branch: &str, file: &str) -> String {
    let scratch = f.repo.join(".worktrees").join("scratch-branch");
    let base = f.git.resolve(&f.repo, "main").await.expect("main");
    f.git
        .create_worktree(&f.repo, &scratch, &base)
        .await
        .expect("wt");
    std::fs::write(scratch.join(file), file).expect("write");
    let commit = f
        .git
        .commit_all(&scratch, branch)
        .await
        .expect("commit")
        .expect("a commit");
    f.git.remove_worktree(&f.repo, &scratch).await.expect("rm");
    f.git
        .update_branch(&f.repo, branch, &commit, None)
        .await
        .expect("branch");
    commit
}

fn checkout_snapshot(repo: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(repo)
        .expect("read")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn diamond_lands_every_file_on_the_target_and_cleans_up() {
    let f = fixture();
    let before = checkout_snapshot(&f.repo);
    let plan = PlanSpec::new("Diamond demo")
        .job(job("fetch", "write a.txt A", &[]))
        .job(job("left", "need a.txt; write b.txt B", &["fetch"]))
        .job(job("right", "need a.txt; write c.txt C", &["fetch"]))
        .job(job(
            "join",
            "need b.txt; need c.txt; write d.txt D",
            &["left", "right"],
        ));
    let id = f.o.run(plan, &f.repo).await.expect("run");
    assert_eq!(
        f.o.wait(&id).await.expect("wait"),
        PlanStatus::Succeeded,
        "{:#?}",
        f.o.status(&id).await.map(|r| r.state)
    );
    let r = f.o.status(&id).await.expect("status");
    assert_eq!(
        r.state.target_branch.as_deref(),
        Some("orchestrator/diamond-demo")
    );
    let files = files_at(&f, "orchestrator/diamond-demo").await;
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "README.md",
            "a.txt",
            "b.txt",
            "c.txt",
            "d.txt",
            "shared.txt"
        ]
    );
    assert_eq!(
        checkout_snapshot(&f.repo),
        before,
        "the user's checkout is untouched"
    );
    assert_eq!(
        f.git
            .current_branch(&f.repo)
            .await
            .expect("branch")
            .as_deref(),
        Some("main")
    );
    assert!(
        f.git
            .list_worktrees(&f.repo)
            .await
            .expect("list")
            .is_empty(),
        "worktrees cleaned up"
    );
    let snapshot = r
        .state
        .snapshot_branch
        .clone()
        .expect("snapshot branch recorded");
    assert_eq!(
        f.git.branch_tip(&f.repo, &snapshot).await.expect("tip"),
        None,
        "snapshot branch deleted"
    );
    for n in &r.state.nodes {
        assert!(n.extra.worktree.is_none());
        assert!(n.extra.commit.is_some());
        let phases: Vec<Phase> = n.attempts[0].phases.iter().map(|p| p.phase).collect();
        assert!(phases.starts_with(&[Phase::MergeFi]), "{phases:?}");
        assert!(phases.contains(&Phase::Commit));
    }
    let leaf = node(&r, "join");
    assert!(leaf.attempts[0]
        .phases
        .iter()
        .any(|p| p.phase == Phase::MergeRi));
    assert!(!node(&r, "fetch").attempts[0]
        .phases
        .iter()
        .any(|p| p.phase == Phase::MergeRi));
}

#[tokio::test]
async fn no_changes_fails_unless_expected() {
    let f = fixture();
    let plan = PlanSpec::new("empty")
        .job(job("idle", "nothing", &[]))
        .job(job("check", "nothing", &[]).expects_no_changes())
        .job(job("after", "write x.txt x", &["idle"]));
    let id = f.o.run(plan, &f.repo).await.expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = f.o.status(&id).await.expect("status");
    let idle = node(&r, "idle").last_attempt().expect("attempt");
    assert_eq!(idle.extra.failure_reason, Some(FailureReason::NoChanges));
    assert_eq!(idle.extra.failed_phase, Some(Phase::Commit));
    assert!(idle
        .extra
        .error
        .as_deref()
        .unwrap_or("")
        .contains("expectsNoChanges"));
    assert_eq!(node(&r, "check").status, NodeStatus::Succeeded);
    assert_eq!(node(&r, "after").status, NodeStatus::Blocked);
    assert!(
        node(&r, "idle").extra.worktree.is_some(),
        "a failed job keeps its worktree"
    );
}

#[tokio::test]
async fn parallel_edits_of_one_line_fail_with_the_file_named() {
    let f = fixture();
    let plan = PlanSpec::new("conflict")
        .job(job("one", "write shared.txt one", &[]))
        .job(job("two", "write shared.txt two", &[]))
        .job(job("join", "nothing", &["one", "two"]).expects_no_changes());
    let id = f.o.run(plan, &f.repo).await.expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = f.o.status(&id).await.expect("status");
    let a = node(&r, "join").last_attempt().expect("attempt");
    assert_eq!(a.extra.failure_reason, Some(FailureReason::MergeConflict));
    assert_eq!(a.extra.failed_phase, Some(Phase::MergeFi));
    assert!(
        a.extra
            .error
            .as_deref()
            .unwrap_or("")
            .contains("shared.txt"),
        "{:?}",
        a.extra.error
    );
}

#[tokio::test]
async fn postcheck_failure_retry_resumes_from_postchecks() {
    let f = fixture();
    let plan = PlanSpec::new("post")
        .job(job("work", "count work; write w.txt w", &[]).postchecks(WorkSpec::shell("fail")));
    let id = f.o.run(plan, &f.repo).await.expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = f.o.status(&id).await.expect("status");
    assert_eq!(
        node(&r, "work")
            .last_attempt()
            .expect("a")
            .extra
            .failed_phase,
        Some(Phase::Postchecks)
    );
    f.o.retry(
        &id,
        RetryRequest::jobs(["work"]).with_postchecks(WorkSpec::shell("need w.txt")),
    )
    .await
    .expect("retry");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let count = std::fs::read_to_string(f.counters.join("work")).expect("counter");
    assert_eq!(count, "x", "work ran once: the retry resumed at postchecks");
    let r = f.o.status(&id).await.expect("status");
    let second = &node(&r, "work").attempts[1];
    assert_eq!(second.resumed_from, Some(Phase::Postchecks));
    assert!(!second.phases.iter().any(|p| p.phase == Phase::Work));
    let files = files_at(&f, r.state.target_branch.as_deref().expect("target")).await;
    assert!(files.iter().any(|(n, _)| n == "w.txt"));
}

#[tokio::test]
async fn retry_with_clear_worktree_starts_over() {
    let f = fixture();
    let plan = PlanSpec::new("clear").job(job("work", "count c; write junk.txt j; fail", &[]));
    let id = f.o.run(plan, &f.repo).await.expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    f.o.retry(
        &id,
        RetryRequest::jobs(["work"])
            .with_work(WorkSpec::shell("need junk.txt"))
            .clear_worktree(),
    )
    .await
    .expect("retry");
    assert_eq!(
        f.o.wait(&id).await.expect("wait"),
        PlanStatus::Failed,
        "junk.txt is gone with the worktree"
    );
    f.o.retry(
        &id,
        RetryRequest::jobs(["work"])
            .with_work(WorkSpec::shell("write fresh.txt f"))
            .clear_worktree(),
    )
    .await
    .expect("retry");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let r = f.o.status(&id).await.expect("status");
    let files = files_at(&f, r.state.target_branch.as_deref().expect("target")).await;
    assert!(files.iter().any(|(n, _)| n == "fresh.txt"));
    assert!(!files.iter().any(|(n, _)| n == "junk.txt"));
}

#[tokio::test]
async fn dirty_checked_out_target_is_refused_then_merged_once_clean() {
    let f = fixture();
    let base = f.git.resolve(&f.repo, "main").await.expect("main");
    f.git
        .update_branch(&f.repo, "feature", &base, None)
        .await
        .expect("branch");
    f.git.switch(&f.repo, "feature").expect("switch");
    std::fs::write(f.repo.join("README.md"), "local edit\n").expect("edit");
    let plan = PlanSpec::new("dirty").job(job("work", "write new.txt n", &[]));
    let id = f.o.run(plan, &f.repo).await.expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let r = f.o.status(&id).await.expect("status");
    assert_eq!(
        r.state.target_branch.as_deref(),
        Some("feature"),
        "current non-default branch is the target"
    );
    let sv = r.state.nodes.last().expect("snapshot node");
    let a = sv.last_attempt().expect("attempt");
    assert_eq!(a.extra.failed_phase, Some(Phase::MergeRi));
    assert!(
        a.extra
            .error
            .as_deref()
            .unwrap_or("")
            .contains("uncommitted changes"),
        "{:?}",
        a.extra.error
    );
    assert_eq!(
        std::fs::read_to_string(f.repo.join("README.md")).expect("read"),
        "local edit\n",
        "nothing lost"
    );
    assert!(!f.repo.join("new.txt").exists());
    assert_eq!(
        f.git
            .branch_tip(&f.repo, "feature")
            .await
            .expect("tip")
            .as_deref(),
        Some(base.as_str())
    );
    // The user cleans up; retrying the snapshot node lands the work in their checkout.
    std::fs::write(f.repo.join("README.md"), "hello\n").expect("restore");
    let n =
        f.o.retry(&id, RetryRequest::all_failed())
            .await
            .expect("retry");
    assert_eq!(n, 1);
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(
        std::fs::read_to_string(f.repo.join("new.txt")).expect("merged file"),
        "n"
    );
}

/// The worktrees left after a plan run with `cleanUpSuccessfulWork: false`, by folder name.
async fn kept_worktrees(f: &Fixture, plan: PlanSpec) -> (PlanRecord, Vec<String>) {
    let mut plan = plan;
    plan.clean_up_successful_work = Some(false);
    let id = f.o.run(plan, &f.repo).await.expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    let mut names: Vec<String> = f
        .git
        .list_worktrees(&f.repo)
        .await
        .expect("list")
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    (f.o.status(&id).await.expect("status"), names)
}

#[tokio::test]
async fn the_snapshot_gets_a_worktree_only_when_something_runs_on_it() {
    let f = fixture();
    let plan = PlanSpec::new("bare").job(job("only", "write a.txt A", &[]));
    let (r, names) = kept_worktrees(&f, plan).await;
    assert_eq!(names.len(), 1, "only the job's worktree: {names:?}");
    assert!(!names[0].starts_with("_snapshot-"), "{names:?}");
    let snapshot = r.state.nodes.last().expect("snapshot node");
    assert!(snapshot.extra.worktree.is_none());
    let phases: Vec<Phase> = snapshot.attempts[0]
        .phases
        .iter()
        .map(|p| p.phase)
        .collect();
    assert_eq!(phases, [Phase::MergeFi, Phase::Commit, Phase::MergeRi]);
    let target = r.state.target_branch.clone().expect("target");
    assert_eq!(
        f.git.branch_tip(&f.repo, &target).await.expect("tip"),
        snapshot.extra.commit,
        "the target is at the commit the node recorded"
    );
    let files = files_at(&f, &target).await;
    assert!(
        files.contains(&("a.txt".to_owned(), "A".to_owned())),
        "{files:?}"
    );

    // With a verifyRi, the validation runs on a worktree of the snapshot.
    let mut plan = PlanSpec::new("verified")
        .job(job("checked", "write b.txt B", &[]))
        .target_branch("orchestrator/verified");
    plan.verify_ri = Some(WorkSpec::shell("need b.txt"));
    let (r, names) = kept_worktrees(&f, plan).await;
    assert!(
        names.iter().any(|n| n.starts_with("_snapshot-")),
        "{names:?}"
    );
    let snapshot = r.state.nodes.last().expect("snapshot node");
    let phases: Vec<Phase> = snapshot.attempts[0]
        .phases
        .iter()
        .map(|p| p.phase)
        .collect();
    assert_eq!(
        phases,
        [Phase::MergeFi, Phase::Work, Phase::Commit, Phase::MergeRi]
    );
}

#[tokio::test]
async fn target_that_moved_is_merged_into_the_snapshot() {
    let f = fixture();
    // A job that, while the plan runs, commits to the target branch as a user would.
    let git = f.git.clone();
    let repo = f.repo.clone();
    let moves = Arc::new(AtomicUsize::new(0));
    let m2 = moves.clone();
    let mover = FnRunner::new(move |_spec, ctx: WorkContext| {
        let (git, repo, m2) = (git.clone(), repo.clone(), m2.clone());
        async move {
            std::fs::write(ctx.dir.join("job.txt"), "job")
                .map_err(|e| WorkFailure::new(e.to_string()))?;
            let wt = repo.join(".worktrees").join("user-side");
            let tip = git
                .branch_tip(&repo, "orchestrator/moving")
                .await
                .map_err(|e| WorkFailure::new(e.to_string()))?
                .ok_or_else(|| WorkFailure::new("no target"))?;
            git.create_worktree(&repo, &wt, &tip)
                .await
                .map_err(|e| WorkFailure::new(e.to_string()))?;
            std::fs::write(wt.join("user.txt"), "user")
                .map_err(|e| WorkFailure::new(e.to_string()))?;
            let c = git
                .commit_all(&wt, "user commit")
                .await
                .map_err(|e| WorkFailure::new(e.to_string()))?
                .ok_or_else(|| WorkFailure::new("no commit"))?;
            git.update_branch(&repo, "orchestrator/moving", &c, Some(&tip))
                .await
                .map_err(|e| WorkFailure::new(e.to_string()))?;
            git.remove_worktree(&repo, &wt)
                .await
                .map_err(|e| WorkFailure::new(e.to_string()))?;
            m2.fetch_add(1, Ordering::SeqCst);
            Ok(WorkOutput::default())
        }
    });
    let o = Orchestrator::builder()
        .git(f.git.clone())
        .runner("shell", mover)
        .build()
        .expect("build");
    let id = o
        .run(PlanSpec::new("moving").job(job("work", "x", &[])), &f.repo)
        .await
        .expect("run");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(moves.load(Ordering::SeqCst), 1);
    let files = files_at(&f, "orchestrator/moving").await;
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"user.txt") && names.contains(&"job.txt"),
        "{names:?}"
    );
}

#[tokio::test]
async fn default_branch_as_target_and_diverged_target_are_refused() {
    let f = fixture();
    let err =
        f.o.run(
            PlanSpec::new("p")
                .target_branch("main")
                .job(job("aaa", "write a a", &[])),
            &f.repo,
        )
        .await
        .expect_err("default branch");
    assert!(
        err.to_string().contains("never write the default branch"),
        "{err}"
    );
    // A branch that does not contain the base.
    let side = branch_with_file(&f, "side", "x").await;
    let err =
        f.o.run(
            PlanSpec::new("q")
                .base_branch("side")
                .target_branch("other")
                .job(job("aaa", "write a a", &[])),
            &f.repo,
        )
        .await
        .map(|_| ());
    assert!(err.is_ok(), "a fresh target is created at the base");
    // `side` contains main's tip but not `side2`'s commit: as a target of a plan based on
    // `side2` it has diverged, and must not be reset.
    branch_with_file(&f, "side2", "y").await;
    let err =
        f.o.run(
            PlanSpec::new("r")
                .base_branch("side2")
                .target_branch("side")
                .job(job("aaa", "write a a", &[])),
            &f.repo,
        )
        .await
        .expect_err("diverged");
    assert_eq!(
        f.git
            .branch_tip(&f.repo, "side")
            .await
            .expect("tip")
            .as_deref(),
        Some(side.as_str()),
        "not reset"
    );
    assert!(err.to_string().contains("diverged"), "{err}");
}

#[tokio::test]
async fn recover_then_resume_finishes_a_failed_plan() {
    let f = fixture();
    let plan = PlanSpec::new("recover")
        .job(job("aaa", "write a.txt a", &[]))
        .job(job("bbb", "need a.txt; count b; fail", &["aaa"]))
        .job(job("ccc", "write c.txt c", &["bbb"]));
    let id = f.o.run(plan, &f.repo).await.expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let err = f.o.archive(&id).await.map(|_| ());
    assert!(err.is_ok(), "an ended plan can be archived");
    let id =
        f.o.run(
            PlanSpec::new("recover2")
                .job(job("aaa", "write a.txt a", &[]))
                .job(job("bbb", "need a.txt; count b2; fail", &["aaa"])),
            &f.repo,
        )
        .await
        .expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    // Lose the target branch and the upstream worktree, as a user cleaning up might.
    let r = f.o.status(&id).await.expect("status");
    let target = r.state.target_branch.clone().expect("target");
    f.git
        .delete_branch(&f.repo, &target)
        .await
        .expect("delete target");
    f.o.recover(&id).await.expect("recover");
    let r = f.o.status(&id).await.expect("status");
    assert_eq!(r.status(), PlanStatus::Paused);
    assert!(
        f.git
            .branch_tip(&f.repo, &target)
            .await
            .expect("tip")
            .is_some(),
        "target recreated"
    );
    assert!(
        node(&r, "aaa")
            .extra
            .worktree
            .as_ref()
            .is_some_and(|p| p.exists()),
        "upstream worktree recreated"
    );
    assert_eq!(node(&r, "bbb").status, NodeStatus::Ready);
    assert!(
        f.o.recover(&id).await.is_err(),
        "a paused plan is not recoverable"
    );
    f.o.retry(&id, RetryRequest::all_failed())
        .await
        .expect_err("nothing failed any more");
    // Resume with fixed work: replace through the store-backed spec by retrying after a failure.
    f.o.resume(&id).await.expect("resume");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    f.o.retry(
        &id,
        RetryRequest::jobs(["bbb"]).with_work(WorkSpec::shell("need a.txt; write b.txt b")),
    )
    .await
    .expect("retry");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    assert_eq!(
        std::fs::read_to_string(f.counters.join("b2")).expect("count"),
        "xx"
    );
}

#[tokio::test]
async fn archive_removes_worktrees_and_branches_but_keeps_state() {
    let f = fixture();
    let id =
        f.o.run(
            PlanSpec::new("arch")
                .job(job("aaa", "write a.txt a", &[]))
                .job(job("bbb", "fail", &[])),
            &f.repo,
        )
        .await
        .expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    assert_eq!(
        f.git.list_worktrees(&f.repo).await.expect("list").len(),
        1,
        "failed job keeps its worktree"
    );
    let r = f.o.status(&id).await.expect("status");
    let report = f.o.archive(&id).await.expect("archive");
    assert_eq!(report.worktrees_removed.len(), 1);
    let mut deleted = report.branches_deleted.clone();
    deleted.sort();
    let mut expected = vec![
        r.state.snapshot_branch.clone().expect("s"),
        r.state.target_branch.clone().expect("t"),
    ];
    expected.sort();
    assert_eq!(deleted, expected);
    assert!(f
        .git
        .list_worktrees(&f.repo)
        .await
        .expect("list")
        .is_empty());
    assert_eq!(
        f.git.current_branch(&f.repo).await.expect("b").as_deref(),
        Some("main")
    );
    assert_eq!(
        f.o.status(&id).await.expect("status").status(),
        PlanStatus::Archived
    );
    assert!(f.o.archive(&id).await.is_err(), "archived once");
    assert!(f.o.resume(&id).await.is_err());
}

#[tokio::test]
async fn orphan_worktrees_are_removed_and_known_ones_kept() {
    let f = fixture();
    let id =
        f.o.run(PlanSpec::new("orph").job(job("bbb", "fail", &[])), &f.repo)
            .await
            .expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Failed);
    let base = f.git.resolve(&f.repo, "main").await.expect("main");
    let orphan = f.repo.join(".worktrees").join("deadbeef");
    f.git
        .create_worktree(&f.repo, &orphan, &base)
        .await
        .expect("orphan");
    let outside = f.repo.join("elsewhere");
    f.git
        .create_worktree(&f.repo, &outside, &base)
        .await
        .expect("outside");
    let removed = f.o.remove_orphan_worktrees(&f.repo).await.expect("cleanup");
    assert_eq!(removed.len(), 1, "{removed:?}");
    let left = f.git.list_worktrees(&f.repo).await.expect("list");
    assert_eq!(
        left.len(),
        2,
        "the failed job's worktree and the one outside the root stay: {left:?}"
    );
}

#[tokio::test]
async fn a_finished_jobs_leftover_worktree_is_an_orphan() {
    let f = fixture();
    let id =
        f.o.run(
            PlanSpec::new("done").job(job("aaa", "write a.txt a", &[])),
            &f.repo,
        )
        .await
        .expect("run");
    assert_eq!(f.o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
    // As if a crash had cut the removal short after the store recorded it.
    let r = f.o.status(&id).await.expect("status");
    let leftover = f.repo.join(".worktrees").join(r.state.nodes[0].id.short());
    let base = f.git.resolve(&f.repo, "main").await.expect("main");
    f.git
        .create_worktree(&f.repo, &leftover, &base)
        .await
        .expect("leftover");
    let removed = f.o.remove_orphan_worktrees(&f.repo).await.expect("cleanup");
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(f
        .git
        .list_worktrees(&f.repo)
        .await
        .expect("list")
        .is_empty());
}
