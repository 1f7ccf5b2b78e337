//! What a careless job does to its own worktree must not break the plan or the user's
//! repository: nested repositories (`git clone`, `git init` in a subfolder), a `.git` removed or
//! pointed elsewhere, branches switched to in the worktree; and a plan that could never start
//! is refused before it is stored. Checked with the `git` CLI.

mod common;

use common::Repo;
use orchestrator_testkit::fixtures::{init_repo, job, Run};
use serde_json::json;

#[test]
fn nested_repositories_are_committed_as_plain_files() {
    let repo = Repo::new();
    // A library with history to clone, outside the repository.
    let lib = repo.scratch.join("lib");
    init_repo(&lib, &[("lib.txt", "library\n")]);
    let work = format!(
        "git clone -q '{}' vendor/lib && mkdir scaffold && cd scaffold && git init -q && \
         echo app > app.txt && echo 'local.txt' > .gitignore && echo no > local.txt",
        lib.display()
    );
    let file = repo.plan(
        "plan.json",
        &json!({"name": "nested", "jobs": [job("clone", &work, &[])]}),
    );
    repo.run(&["run", file.to_str().expect("utf-8"), "-q"])
        .expect_code(0);
    let files = repo.files_at("orchestrator/nested");
    for wanted in [
        "vendor/lib/lib.txt",
        "scaffold/app.txt",
        "scaffold/.gitignore",
    ] {
        assert!(files.iter().any(|f| f == wanted), "{wanted} in {files:?}");
    }
    assert!(
        !files
            .iter()
            .any(|f| f.contains(".git/") || f == "scaffold/local.txt"),
        "no nested .git and no ignored file committed: {files:?}"
    );
    // Plain files, not gitlinks (mode 160000) that would point at commits nobody has.
    let modes = repo.git(&["ls-tree", "-r", "orchestrator/nested"]);
    assert!(!modes.contains("160000"), "no gitlink: {modes}");
    assert_eq!(
        repo.show("orchestrator/nested", "vendor/lib/lib.txt"),
        "library\n"
    );
    let fsck = repo.git_output(&["fsck", "--full"]);
    assert!(fsck.status.success(), "git fsck: {fsck:?}");
}

#[test]
fn a_job_that_breaks_its_worktree_can_be_retried() {
    for (name, breaking) in [
        ("removed", "rm -rf .git".to_owned()),
        (
            "repointed",
            "echo 'gitdir: /nonexistent/elsewhere' > .git".to_owned(),
        ),
    ] {
        let repo = Repo::new();
        let work = format!("{breaking}; echo first > out.txt");
        let file = repo.plan(
            "plan.json",
            &json!({"name": "broken", "jobs": [job("breaker", &work, &[])]}),
        );
        repo.run(&["run", file.to_str().expect("utf-8"), "-q"])
            .expect_code(1);
        let id = repo.status(None)["planId"]
            .as_str()
            .expect("plan id")
            .to_owned();
        // A plain retry replaces the broken folder (it is the engine's own) and runs again.
        let retried = repo.run(&[
            "retry",
            &id,
            "--work",
            "echo second > out.txt",
            "--json",
            "-q",
        ]);
        retried.expect_code(0);
        assert_eq!(retried.json()["status"], "succeeded", "{name}");
        assert_eq!(
            repo.show("orchestrator/broken", "out.txt"),
            "second\n",
            "{name}"
        );
        assert!(repo.extra_worktrees().is_empty(), "{name}: worktrees left");
        let fsck = repo.git_output(&["fsck", "--full"]);
        assert!(fsck.status.success(), "{name}: git fsck: {fsck:?}");
    }

    // `retry --clear-worktree` of a broken worktree deletes it too.
    let repo = Repo::new();
    let file = repo.plan(
        "plan.json",
        &json!({"name": "cleared", "jobs": [job("breaker", "rm -rf .git; echo x > x.txt", &[])]}),
    );
    repo.run(&["run", file.to_str().expect("utf-8"), "-q"])
        .expect_code(1);
    let id = repo.status(None)["planId"]
        .as_str()
        .expect("plan id")
        .to_owned();
    repo.run(&[
        "retry",
        &id,
        "--clear-worktree",
        "--work",
        "echo y > y.txt",
        "-q",
    ])
    .expect_code(0);
    assert_eq!(repo.show("orchestrator/cleared", "y.txt"), "y\n");
}

#[test]
fn branches_a_job_creates_in_its_worktree_are_not_left_behind() {
    let repo = Repo::new();
    repo.git(&["branch", "users-branch"]);
    let before_users = repo.git(&["rev-parse", "users-branch"]);
    // Reflog times have whole seconds: the job creates its branch a second after its worktree.
    let made = "sleep 1.1; git checkout -q -b job-made && echo y > y.txt && git add y.txt && \
                git -c user.name=t -c user.email=t@t commit -q -m own && echo z > z.txt";
    let switched = "git checkout -q users-branch && echo w > w.txt";
    let file = repo.plan(
        "plan.json",
        &json!({"name": "branchy", "jobs": [job("maker", made, &[]), job("switcher", switched, &[])]}),
    );
    repo.run(&["run", file.to_str().expect("utf-8"), "-q"])
        .expect_code(0);
    let branches = repo.branches();
    assert!(
        !branches.iter().any(|b| b == "job-made"),
        "the job's own branch is removed: {branches:?}"
    );
    assert!(
        branches.iter().any(|b| b == "users-branch"),
        "a branch that existed before is kept: {branches:?}"
    );
    assert_eq!(
        repo.git(&["rev-parse", "users-branch"]),
        before_users,
        "the engine's commit did not move the user's branch"
    );
    let files = repo.files_at("orchestrator/branchy");
    for wanted in ["y.txt", "z.txt", "w.txt"] {
        assert!(files.iter().any(|f| f == wanted), "{wanted} in {files:?}");
    }
    let id = repo.status(None)["planId"]
        .as_str()
        .expect("plan id")
        .to_owned();
    let log = repo.run(&["logs", &id, "maker"]);
    assert!(
        log.stdout.contains("branch `job-made`") && log.stdout.contains("deleted it"),
        "the log says what happened: {}",
        log.stdout
    );
}

#[test]
fn a_base_revision_that_does_not_exist_is_refused_before_the_plan_is_stored() {
    let repo = Repo::new();
    let file = repo.plan(
        "plan.json",
        &json!({"name": "nobase", "baseBranch": "no-such-branch", "jobs": [job("a-job", "true", &[])]}),
    );
    let run = repo.run(&["run", file.to_str().expect("utf-8")]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("baseBranch") && run.stderr.contains("no-such-branch"),
        "{}",
        run.stderr
    );
    let list = repo.run(&["list", "--json"]);
    assert_eq!(list.json()["plans"], json!([]), "nothing stored");
    assert!(
        !repo
            .branches()
            .iter()
            .any(|b| b.starts_with("orchestrator/")),
        "no branch created"
    );
}

#[test]
fn a_bare_repository_is_named_as_such() {
    let repo = Repo::new();
    let bare = repo.scratch.join("bare.git");
    repo.git(&["clone", "-q", "--bare", ".", bare.to_str().expect("utf-8")]);
    let file = repo.plan(
        "plan.json",
        &json!({"name": "bare", "jobs": [job("a-job", "true", &[])]}),
    );
    let out = std::process::Command::new(common::BIN)
        .args(["run", file.to_str().expect("utf-8"), "--repo"])
        .arg(&bare)
        .env("HOME", &repo.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run");
    let run = Run::from(out);
    run.expect_code(2);
    assert!(
        run.stderr.contains("is a bare git repository"),
        "{}",
        run.stderr
    );
}
