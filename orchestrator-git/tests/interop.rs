//! `Git2Operations` checked against the `git` CLI: worktrees git can see and use, merges equal
//! to `git merge-tree --write-tree`, and the user's checkout left byte-identical.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use async_trait::async_trait;
use orchestrator_core::conformance::git::write_files;
use orchestrator_core::git::{ConflictResolver, GitError, GitOperations, MergeStyle};
use orchestrator_git::{Git2Operations, Identity};
use orchestrator_testkit::fixtures::{self, git, git_cmd, git_output, Rng};

fn setup() -> (fixtures::Checked, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = common::fixture_repo(dir.path());
    (
        fixtures::Checked {
            repo: repo.clone(),
            dir,
        },
        repo,
    )
}

#[tokio::test]
async fn worktrees_are_visible_to_and_usable_by_the_git_cli() {
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let wts: Vec<PathBuf> = (0..3)
        .map(|i| repo.join(".worktrees").join(format!("wt-{i}")))
        .collect();
    for wt in &wts {
        ops.create_worktree(&repo, wt, &base).await.expect("create");
    }
    ops.remove_worktree(&repo, &wts[1]).await.expect("remove");
    let live = vec![wts[0].clone(), wts[2].clone()];
    assert_eq!(
        fixtures::cli_linked_worktrees(&repo),
        live,
        "git worktree list shows exactly the live worktrees"
    );
    assert_eq!(ops.list_worktrees(&repo).await.expect("list"), live);
    for (path, info) in fixtures::cli_worktrees(&repo).into_iter().skip(1) {
        assert!(info.contains("detached"), "{path:?} is detached: {info}");
        assert!(
            info.contains(&format!("HEAD {base}")),
            "{path:?} at base: {info}"
        );
    }
    let wt = &wts[0];
    assert_eq!(
        git(wt, &["status", "--porcelain"]),
        "",
        "fresh worktree is clean for git"
    );
    assert_eq!(git(wt, &["rev-parse", "HEAD"]), base);
    // A commit made by the API is seen by git, and one made by git is seen by the API.
    write_files(wt, &[("api.txt", "api\n")]).expect("write");
    let c1 = ops
        .commit_all(wt, "api commit")
        .await
        .expect("commit")
        .expect("change");
    assert_eq!(git(wt, &["rev-parse", "HEAD"]), c1);
    assert_eq!(
        git(wt, &["status", "--porcelain"]),
        "",
        "clean after commit_all"
    );
    write_files(wt, &[("cli.txt", "cli\n")]).expect("write");
    git(wt, &["add", "-A"]);
    git(wt, &["commit", "-q", "-m", "cli commit"]);
    assert_eq!(
        ops.head(wt).await.expect("head"),
        git(wt, &["rev-parse", "HEAD"])
    );
    assert_eq!(ops.commit_all(wt, "nothing").await.expect("commit"), None);
    assert_eq!(git(&repo, &["rev-parse", "main"]), base, "main untouched");
    // Worktrees made by git are listed and removable too.
    let cli_wt = repo.join(".worktrees").join("by-cli");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            cli_wt.to_str().expect("utf8"),
            &base,
        ],
    );
    assert!(ops
        .list_worktrees(&repo)
        .await
        .expect("list")
        .contains(&cli_wt));
    ops.remove_worktree(&repo, &cli_wt)
        .await
        .expect("remove git's worktree");
    assert_eq!(fixtures::cli_linked_worktrees(&repo), live);
}

#[tokio::test]
async fn prune_and_orphan_cleanup() {
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let root = repo.join(".worktrees");
    for name in ["keep", "orphan", "vanished"] {
        ops.create_worktree(&repo, &root.join(name), &base)
            .await
            .expect("create");
    }
    write_files(&root, &[("plain/data.txt", "not a worktree\n")]).expect("write");
    std::fs::remove_dir_all(root.join("vanished")).expect("delete by hand");
    assert!(git(&repo, &["worktree", "list", "--porcelain"]).contains("prunable"));
    assert_eq!(
        ops.prune(&repo).await.expect("prune"),
        vec!["vanished".to_string()]
    );
    assert!(!git(&repo, &["worktree", "list", "--porcelain"]).contains("prunable"));

    let removed = ops
        .remove_orphaned_worktrees(&repo, &root, &[root.join("keep")])
        .await
        .expect("orphans");
    assert_eq!(removed, vec![root.join("orphan")]);
    assert!(root.join("keep/README.md").exists(), "live worktree kept");
    assert!(root.join("plain/data.txt").exists(), "plain folder kept");
    assert_eq!(
        fixtures::cli_linked_worktrees(&repo),
        vec![root.join("keep")]
    );
    let outside = tempfile::tempdir().expect("tempdir");
    let e = ops
        .remove_orphaned_worktrees(&repo, outside.path(), &[])
        .await
        .expect_err("outside root");
    assert!(matches!(e, GitError::PathOutsideRoot { .. }), "{e:?}");
}

#[tokio::test]
async fn create_recovers_from_an_interrupted_attempt() {
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let wt = repo.join(".worktrees").join("crashy");
    let admin = repo.join(".git/worktrees/crashy");
    // A crash during checkout: the marker is still there and files are missing.
    ops.create_worktree(&repo, &wt, &base)
        .await
        .expect("create");
    std::fs::write(admin.join("locked"), "initializing\n").expect("lock");
    std::fs::remove_file(wt.join("README.md")).expect("delete");
    ops.create_worktree(&repo, &wt, &base).await.expect("retry");
    assert!(wt.join("README.md").exists(), "recreated");
    assert!(!admin.join("locked").exists(), "marker gone");
    assert_eq!(git(&wt, &["status", "--porcelain"]), "");
    // Registration lost, folder still pointing at us: recreated.
    std::fs::remove_dir_all(&admin).expect("drop admin");
    ops.create_worktree(&repo, &wt, &base)
        .await
        .expect("retry without admin");
    assert_eq!(git(&wt, &["status", "--porcelain"]), "");
    // Folder lost, registration left: recreated.
    std::fs::remove_dir_all(&wt).expect("drop folder");
    ops.create_worktree(&repo, &wt, &base)
        .await
        .expect("retry without folder");
    assert_eq!(fixtures::cli_linked_worktrees(&repo), vec![wt.clone()]);
    assert_eq!(git(&wt, &["rev-parse", "HEAD"]), base);
}

/// A random history (with merges, and criss-cross merges every five commits) written by
/// `git fast-import`; returns the commit ids and the criss-cross pairs.
fn generate_history(
    repo: &Path,
    rng: &mut Rng,
    commits: usize,
) -> (Vec<String>, Vec<(usize, usize)>) {
    type Files = BTreeMap<String, Vec<String>>;
    let mut base: Files = BTreeMap::new();
    for f in 0..24 {
        base.insert(
            format!("dir{}/file{f}.txt", f % 4),
            (0..12).map(|l| format!("f{f} line {l}")).collect(),
        );
    }
    let base_id = git(repo, &["rev-parse", "HEAD"]);
    let mut states: Vec<Files> = Vec::new();
    let mut stream = Vec::new();
    // Commit 0 (mark 1): the generated files on top of the initial commit.
    let push_commit = |stream: &mut Vec<u8>,
                       mark: usize,
                       from: String,
                       merge: Option<String>,
                       old: &Files,
                       new: &Files| {
        let msg = format!("generated {mark}");
        write!(stream, "commit refs/gen/c{mark}\nmark :{mark}\ncommitter Test <test@example.com> {} +0000\ndata {}\n{msg}\nfrom {from}\n", 1_700_000_000 + mark, msg.len()).expect("write");
        if let Some(m) = merge {
            writeln!(stream, "merge {m}").expect("write");
        }
        for (path, lines) in new {
            if old.get(path) != Some(lines) {
                let content = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
                write!(
                    stream,
                    "M 100644 inline {path}\ndata {}\n{content}\n",
                    content.len()
                )
                .expect("write");
            }
        }
        for path in old.keys().filter(|p| !new.contains_key(*p)) {
            writeln!(stream, "D {path}").expect("write");
        }
    };
    push_commit(&mut stream, 1, base_id, None, &BTreeMap::new(), &base);
    states.push(base);
    let mut criss_cross = Vec::new();
    let mut mirrored: Option<(usize, usize)> = None;
    for i in 1..commits {
        let (parent, second) = match mirrored.take() {
            // The second half of a criss-cross: the same two parents the other way round.
            Some((p, q)) => {
                criss_cross.push((i - 1, i));
                (q, Some(p))
            }
            None => {
                let parent = rng.below(states.len());
                let second = (i > 4 && rng.below(5) < 2)
                    .then(|| rng.below(states.len()))
                    .filter(|q| *q != parent);
                if let (Some(q), true) = (second, i % 5 == 4 && i + 1 < commits) {
                    mirrored = Some((parent, q));
                }
                (parent, second)
            }
        };
        let mut files = states[parent].clone();
        for _ in 0..1 + rng.below(2) {
            let keys: Vec<String> = files.keys().cloned().collect();
            let path = &keys[rng.below(keys.len())];
            if let Some(lines) = files.get_mut(path) {
                let at = rng.below(lines.len());
                lines[at] = format!("changed {i}.{}", rng.below(1000));
            }
        }
        if rng.below(12) == 0 {
            files.insert(
                format!("new/added{i}.txt"),
                vec![format!("added by {i}"), format!("unique {}", rng.next())],
            );
        }
        if rng.below(20) == 0 && files.len() > 10 {
            let keys: Vec<String> = files.keys().cloned().collect();
            files.remove(&keys[rng.below(keys.len())]);
        }
        push_commit(
            &mut stream,
            i + 1,
            format!(":{}", parent + 1),
            second.map(|q| format!(":{}", q + 1)),
            &states[parent],
            &files,
        );
        states.push(files);
    }
    let marks = repo.join(".git/gen-marks");
    let mut child = git_cmd(repo)
        .args(["fast-import", "--quiet"])
        .arg(format!("--export-marks={}", marks.display()))
        .stdin(Stdio::piped())
        .spawn()
        .expect("fast-import");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&stream)
        .expect("feed");
    assert!(child.wait().expect("wait").success(), "fast-import failed");
    let text = std::fs::read_to_string(&marks).expect("marks");
    let mut ids = vec![String::new(); commits];
    for line in text.lines() {
        let (mark, id) = line.split_once(' ').expect("mark line");
        let n: usize = mark.trim_start_matches(':').parse().expect("mark");
        ids[n - 1] = id.to_string();
    }
    (ids, criss_cross)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merges_equal_git_merge_tree() {
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    // MERGE_SEED explores other histories; the default keeps the test deterministic.
    let seed = std::env::var("MERGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234);
    let mut rng = Rng::new(seed);
    let (ids, crosses) = generate_history(&repo, &mut rng, 80);
    let (mut clean, mut conflicting, mut criss_cross) = (0, 0, 0);
    for n in 0..600 {
        if clean >= 50 && conflicting >= 10 {
            break;
        }
        let (a, b) = match crosses.get(n / 3).filter(|_| n % 3 == 0) {
            Some((x, y)) => (&ids[*x], &ids[*y]),
            None => (&ids[rng.below(ids.len())], &ids[rng.below(ids.len())]),
        };
        let bases = git_output(&repo, &["merge-base", "--all", a, b]);
        let several_bases = String::from_utf8_lossy(&bases.stdout).lines().count() > 1;
        let out = git_output(
            &repo,
            &[
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                a,
                b,
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = stdout.lines();
        let git_tree = lines.next().unwrap_or_default().to_string();
        let branch = format!("cmp/{n}");
        ops.update_branch(&repo, &branch, a, None)
            .await
            .expect("branch");
        let ours = ops
            .merge_into_branch(&repo, &branch, b, "compare", MergeStyle::MergeCommit)
            .await;
        match out.status.code() {
            Some(0) => {
                if clean >= 50 {
                    continue;
                }
                let tip = ours
                    .unwrap_or_else(|e| panic!("merge {a} {b}: git merges cleanly, we got {e:?}"));
                let our_tree = git(&repo, &["rev-parse", &format!("{tip}^{{tree}}")]);
                assert_eq!(
                    our_tree, git_tree,
                    "merged tree of {a} and {b} differs from git merge-tree"
                );
                clean += 1;
                criss_cross += usize::from(several_bases);
            }
            Some(1) => {
                let mut git_paths: Vec<String> = lines
                    .map(str::to_string)
                    .filter(|l| !l.is_empty())
                    .collect();
                git_paths.sort();
                git_paths.dedup();
                match ours {
                    Err(GitError::MergeConflict { paths, .. }) => {
                        assert_eq!(
                            paths, git_paths,
                            "conflicting paths of {a} and {b} differ from git's"
                        )
                    }
                    other => {
                        panic!("merge {a} {b}: git conflicts in {git_paths:?}, we got {other:?}")
                    }
                }
                conflicting += 1;
                criss_cross += usize::from(several_bases);
            }
            other => panic!(
                "git merge-tree exited with {other:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
    eprintln!("compared {clean} clean and {conflicting} conflicting merges ({criss_cross} with several merge bases)");
    assert!(clean >= 50, "only {clean} clean merges compared");
    assert!(
        conflicting >= 10,
        "only {conflicting} conflicting merges compared"
    );
}

#[tokio::test]
async fn the_user_checkout_is_untouched_by_work_on_other_branches() {
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    write_files(&repo, &[(".gitignore", "*.log\n")]).expect("write");
    git(&repo, &["add", ".gitignore"]);
    git(&repo, &["commit", "-q", "-m", "ignore logs"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    // The user is mid-work: a staged change, an unstaged one, an untracked and an ignored file.
    write_files(&repo, &[("src/util.rs", "staged\n")]).expect("write");
    git(&repo, &["add", "src/util.rs"]);
    write_files(
        &repo,
        &[
            ("README.md", "# unstaged edit\n"),
            ("notes.txt", "untracked\n"),
            ("debug.log", "ignored\n"),
        ],
    )
    .expect("write");
    let before = fixtures::snapshot_checkout(&repo);

    let snap = "orchestrator/snapshot/untouched";
    ops.update_branch(&repo, snap, &base, None)
        .await
        .expect("branch");
    let a = common::commit_in(
        &ops,
        &repo,
        "a",
        &base,
        &[("a.txt", "a\n"), ("README.md", "# from a\n")],
    )
    .await;
    let b = common::commit_in(&ops, &repo, "b", &base, &[("b.txt", "b\n")]).await;
    ops.merge_into_branch(&repo, snap, &a, "ri a", MergeStyle::MergeCommit)
        .await
        .expect("merge a");
    ops.merge_into_branch(&repo, snap, &b, "ri b", MergeStyle::FastForward)
        .await
        .expect("merge b");
    let wt_b = repo.join(".worktrees/b");
    ops.merge_into_worktree(&wt_b, std::slice::from_ref(&a), "fi", None)
        .await
        .expect("fi");
    ops.diff_stats(&repo, &base, &a).await.expect("stats");
    ops.update_branch(&repo, "orchestrator/target", &a, None)
        .await
        .expect("target");
    ops.merge_into_branch(
        &repo,
        "orchestrator/target",
        &b,
        "land",
        MergeStyle::FastForward,
    )
    .await
    .expect("land");
    ops.delete_branch(&repo, snap).await.expect("delete");
    ops.exclude(&repo, &["/.worktrees/", "/.orchestrator/"])
        .await
        .expect("exclude");
    for wt in ops.list_worktrees(&repo).await.expect("list") {
        ops.remove_worktree(&repo, &wt).await.expect("remove");
    }
    assert_eq!(
        fixtures::snapshot_checkout(&repo),
        before,
        "the user's checkout changed"
    );

    // Landing on the user's dirty branch is refused and changes nothing.
    let e = ops
        .merge_into_branch(&repo, "main", &a, "land", MergeStyle::FastForward)
        .await
        .expect_err("dirty");
    match e {
        GitError::DirtyCheckout { files, path, .. } => {
            assert_eq!(path, repo);
            assert_eq!(
                files,
                vec!["README.md".to_string(), "src/util.rs".to_string()]
            );
        }
        other => panic!("expected DirtyCheckout, got {other:?}"),
    }
    assert_eq!(
        fixtures::snapshot_checkout(&repo),
        before,
        "a refused merge changed the checkout"
    );
}

#[tokio::test]
async fn staged_changes_alone_make_the_checkout_dirty() {
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let a = common::commit_in(&ops, &repo, "a", &base, &[("a.txt", "a\n")]).await;
    write_files(&repo, &[("staged.txt", "new file\n")]).expect("write");
    git(&repo, &["add", "staged.txt"]);
    let before = fixtures::snapshot_checkout(&repo);
    let e = ops
        .merge_into_branch(&repo, "main", &a, "land", MergeStyle::MergeCommit)
        .await
        .expect_err("dirty");
    assert!(
        matches!(&e, GitError::DirtyCheckout { files, .. } if files == &["staged.txt".to_string()]),
        "{e:?}"
    );
    assert_eq!(fixtures::snapshot_checkout(&repo), before);
    assert_eq!(git(&repo, &["rev-parse", "main"]), base);
}

#[tokio::test]
async fn a_clean_checked_out_target_follows_and_stays_clean() {
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    ops.exclude(&repo, &["/.worktrees/"])
        .await
        .expect("exclude");
    std::fs::write(repo.join("untracked.txt"), "mine\n").expect("write");
    let a = common::commit_in(
        &ops,
        &repo,
        "a",
        &base,
        &[("a.txt", "a\n"), ("src/lib.rs", "rewritten\n")],
    )
    .await;
    let b = common::commit_in(&ops, &repo, "b", &base, &[("b.txt", "b\n")]).await;
    let t1 = ops
        .merge_into_branch(&repo, "main", &a, "land a", MergeStyle::MergeCommit)
        .await
        .expect("land a");
    let t2 = ops
        .merge_into_branch(&repo, "main", &b, "land b", MergeStyle::MergeCommit)
        .await
        .expect("land b");
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]), t2);
    assert_eq!(
        git(&repo, &["status", "--porcelain"]),
        "?? untracked.txt",
        "index and files follow the branch"
    );
    assert_eq!(git(&repo, &["diff", "--cached", "--name-only"]), "");
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%P", &t1]),
        format!("{base} {a}"),
        "two parents, branch first"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/lib.rs")).expect("read"),
        "rewritten\n"
    );
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%an <%ae>", &t2]),
        "Test <test@example.com>",
        "identity from repo config"
    );
}

#[tokio::test]
async fn exclude_keeps_orchestrator_folders_out_of_git_status() {
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    ops.create_worktree(&repo, &repo.join(".worktrees/wt"), &base)
        .await
        .expect("create");
    write_files(&repo, &[(".orchestrator/plans/p/state.json", "{}\n")]).expect("write");
    assert!(
        !git(&repo, &["status", "--porcelain"]).is_empty(),
        "visible before exclude"
    );
    for _ in 0..2 {
        ops.exclude(&repo, &["/.worktrees/", "/.orchestrator/"])
            .await
            .expect("exclude");
    }
    assert_eq!(
        git(&repo, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    let text = std::fs::read_to_string(repo.join(".git/info/exclude")).expect("exclude file");
    assert_eq!(
        text.lines().filter(|l| *l == "/.worktrees/").count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| *l == "/.orchestrator/").count(),
        1,
        "{text}"
    );
    assert_eq!(
        git(&repo, &["rev-parse", "HEAD"]),
        base,
        "nothing committed"
    );
}

#[tokio::test]
async fn identity_and_worktree_root_options() {
    let (_guard, repo) = setup();
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let ops = Git2Operations::builder()
        .identity(Identity::new("Bot", "bot@example.com"))
        .worktree_root(elsewhere.path())
        .build()
        .expect("build");
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let wt = elsewhere.path().join("wt");
    ops.create_worktree(&repo, &wt, &base)
        .await
        .expect("create under the extra root");
    write_files(&wt, &[("x.txt", "x\n")]).expect("write");
    let c = ops
        .commit_all(&wt, "by bot")
        .await
        .expect("commit")
        .expect("change");
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%an <%ae>|%cn <%ce>", &c]),
        "Bot <bot@example.com>|Bot <bot@example.com>"
    );
    assert_eq!(
        fixtures::cli_linked_worktrees(&repo),
        vec![std::fs::canonicalize(&wt).expect("canonical")]
    );
    ops.remove_worktree(&repo, &wt).await.expect("remove");
    assert!(Git2Operations::builder()
        .identity(Identity::new("a", "<bad>"))
        .build()
        .is_err());
    assert!(Git2Operations::builder()
        .worktree_root("relative/path")
        .build()
        .is_err());
}

/// Takes theirs for every conflicting file.
#[derive(Debug)]
struct TakeLine(&'static str);

#[async_trait]
impl ConflictResolver for TakeLine {
    async fn resolve(&self, worktree: &Path, paths: &[String]) -> Result<(), GitError> {
        for path in paths {
            let text = std::fs::read_to_string(worktree.join(path))
                .map_err(|e| GitError::other("read", e))?;
            assert!(
                text.contains("<<<<<<<"),
                "conflict markers written into {path}: {text}"
            );
            std::fs::write(worktree.join(path), self.0).map_err(|e| GitError::other("write", e))?;
        }
        Ok(())
    }
}

#[tokio::test]
async fn resolved_merges_leave_a_clean_worktree_for_git() {
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    let base = git(&repo, &["rev-parse", "HEAD"]);
    let a = common::commit_in(
        &ops,
        &repo,
        "a",
        &base,
        &[("README.md", "# a\n"), ("a.txt", "a\n")],
    )
    .await;
    let b = common::commit_in(&ops, &repo, "b", &base, &[("README.md", "# b\n")]).await;
    let wt = repo.join(".worktrees/b");
    let merged = ops
        .merge_into_worktree(
            &wt,
            std::slice::from_ref(&a),
            "resolved",
            Some(&TakeLine("# both\n")),
        )
        .await
        .expect("merge");
    assert_eq!(git(&wt, &["status", "--porcelain"]), "");
    assert_eq!(git(&wt, &["log", "-1", "--format=%P"]), format!("{b} {a}"));
    assert_eq!(
        git(&wt, &["show", &format!("{merged}:README.md")]),
        "# both"
    );
    assert_eq!(git(&wt, &["show", &format!("{merged}:a.txt")]), "a");
}

#[cfg(unix)]
#[tokio::test]
async fn checkout_keeps_modes_and_symlinks_and_honors_attributes() {
    use std::os::unix::fs::PermissionsExt;
    let (_guard, repo) = setup();
    let ops = Git2Operations::new();
    write_files(
        &repo,
        &[
            ("bin/run.sh", "#!/bin/sh\necho hi\n"),
            ("data/crlf.txt", "one\ntwo\n"),
        ],
    )
    .expect("write");
    std::fs::set_permissions(
        repo.join("bin/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::os::unix::fs::symlink("../README.md", repo.join("data/readme-link")).expect("symlink");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "modes"]);
    let plain = git(&repo, &["rev-parse", "HEAD"]);
    // Attributes that convert line endings make the checkout differ from the blobs.
    write_files(&repo, &[(".gitattributes", "*.txt text eol=crlf\n")]).expect("write");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "attributes"]);
    let converted = git(&repo, &["rev-parse", "HEAD"]);

    for (name, commit) in [("plain", &plain), ("converted", &converted)] {
        let wt = repo.join(".worktrees").join(name);
        ops.create_worktree(&repo, &wt, commit)
            .await
            .expect("create");
        assert_eq!(
            git(&wt, &["status", "--porcelain"]),
            "",
            "{name}: git sees a clean worktree"
        );
        let mode = std::fs::metadata(wt.join("bin/run.sh"))
            .expect("meta")
            .permissions()
            .mode();
        assert!(mode & 0o111 != 0, "{name}: executable bit kept ({mode:o})");
        let link = std::fs::read_link(wt.join("data/readme-link")).expect("a symlink");
        assert_eq!(link, Path::new("../README.md"), "{name}: symlink target");
        assert_eq!(
            ops.commit_all(&wt, "nothing").await.expect("commit"),
            None,
            "{name}: nothing to commit"
        );
    }
    let text = std::fs::read(repo.join(".worktrees/converted/data/crlf.txt")).expect("read");
    assert_eq!(text, b"one\r\ntwo\r\n", "attributes applied on checkout");
    let text = std::fs::read(repo.join(".worktrees/plain/data/crlf.txt")).expect("read");
    assert_eq!(text, b"one\ntwo\n", "blob written as is");
}
