//! `demo`: a diamond of four shell jobs in a fresh repository, run through worktrees.
//!
//! Needs nothing configured: the repository is made with libgit2 and commits carry an identity
//! of their own, so a machine without `git` or a git identity runs it as well.

use std::path::{Path, PathBuf};

use orchestrator_core::plan::{JobSpec, PlanSpec, WorkSpec};

use crate::cli::{DemoArgs, RepoArgs, RunArgs};
use crate::error::{CliError, CliResult, Exit};
use crate::report::shell_quote;

const NAME: &str = "demo";
const AUTHOR: (&str, &str) = ("Orchestrator Demo", "demo@orchestrator.invalid");

/// The demo plan: `collect` feeds `total` and `sorted`, which both feed `report`. Each job
/// reads what the jobs before it wrote, in its own worktree.
pub fn plan() -> PlanSpec {
    let job = |id: &str, task: &str, cmd: &str| JobSpec::new(id, task, WorkSpec::shell(cmd));
    PlanSpec::new(NAME)
        .max_parallel(2)
        .job(job(
            "collect",
            "Collect the measurements",
            "sleep 0.3; mkdir -p data && printf '%s\\n' 31 4 15 92 65 35 > data/numbers.txt",
        ))
        .job(
            job(
                "total",
                "Add the measurements up",
                "sleep 0.6; awk '{ s += $1 } END { print s }' data/numbers.txt > data/total.txt",
            )
            .depends_on(["collect"]),
        )
        .job(
            job(
                "sorted",
                "Sort the measurements",
                "sleep 0.4; sort -n data/numbers.txt > data/sorted.txt",
            )
            .depends_on(["collect"]),
        )
        .job(
            job(
                "report",
                "Write the report",
                "sleep 0.2; { echo '# Report'; echo; echo \"total: $(cat data/total.txt)\"; \
                 echo \"sorted: $(tr '\\n' ' ' < data/sorted.txt)\"; } > REPORT.md",
            )
            .depends_on(["total", "sorted"]),
        )
}

/// Creates the repository: a README and a `.gitignore`, one commit on `main`.
fn init_repo(repo: &Path) -> Result<(), git2::Error> {
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let r = git2::Repository::init_opts(repo, &opts)?;
    {
        let mut config = r.config()?;
        config.set_str("user.name", AUTHOR.0)?;
        config.set_str("user.email", AUTHOR.1)?;
    }
    let files = [
        (
            "README.md",
            "# Demo project\n\nMade by `orchestrator demo`. The plan's jobs add `data/` and \
             `REPORT.md` on their own branch.\n",
        ),
        (".gitignore", "*.tmp\n"),
    ];
    for (name, text) in files {
        std::fs::write(repo.join(name), text)
            .map_err(|e| git2::Error::from_str(&format!("writing {name}: {e}")))?;
    }
    let mut index = r.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = r.find_tree(index.write_tree()?)?;
    let sig = git2::Signature::now(AUTHOR.0, AUTHOR.1)?;
    r.commit(Some("HEAD"), &sig, &sig, "Initial commit", &tree, &[])?;
    Ok(())
}

/// The files of `branch`, with the text of `REPORT.md`.
fn result_files(repo: &Path, branch: &str) -> Result<(Vec<String>, Option<String>), git2::Error> {
    let r = git2::Repository::open(repo)?;
    let tree = r
        .find_branch(branch, git2::BranchType::Local)?
        .get()
        .peel_to_tree()?;
    let mut files = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            files.push(format!("{dir}{}", entry.name().unwrap_or("?")));
        }
        git2::TreeWalkResult::Ok
    })?;
    let report = tree
        .get_path(Path::new("REPORT.md"))
        .ok()
        .and_then(|e| e.to_object(&r).ok())
        .and_then(|o| {
            o.as_blob()
                .map(|b| String::from_utf8_lossy(b.content()).into_owned())
        });
    Ok((files, report))
}

fn workspace_dir(args: &DemoArgs) -> CliResult<PathBuf> {
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError::invalid(format!("--dir {}: {e}", dir.display())))?;
            let empty = std::fs::read_dir(dir)
                .map_err(|e| CliError::invalid(format!("--dir {}: {e}", dir.display())))?
                .next()
                .is_none();
            if !empty {
                return Err(CliError::invalid(format!(
                    "--dir {}: the folder is not empty",
                    dir.display()
                )));
            }
            Ok(dir.clone())
        }
        None => tempfile::Builder::new()
            .prefix("orchestrator-demo-")
            .tempdir()
            .map(|d| d.keep())
            .map_err(|e| CliError::other(format!("cannot create a temporary folder: {e}"))),
    }
}

/// `demo`.
pub async fn demo(args: DemoArgs) -> CliResult<Exit> {
    let base = workspace_dir(&args)?;
    let repo = base.join("repo");
    init_repo(&repo).map_err(|e| CliError::other(format!("creating the demo repository: {e}")))?;
    let plan_file = base.join("demo-plan.json");
    let text = serde_json::to_string_pretty(&plan())
        .map_err(|e| CliError::other(format!("writing the demo plan: {e}")))?;
    std::fs::write(&plan_file, text + "\n")
        .map_err(|e| CliError::other(format!("writing {}: {e}", plan_file.display())))?;
    // Messages go to stdout, unless stdout is reserved for the JSON document.
    let say = |line: &str| {
        if args.output.json {
            eprintln!("{line}");
        } else {
            outln!("{line}");
        }
    };
    say(&format!(
        "demo repository {} (branch main, one commit)\nplan {}: collect -> (total, sorted) -> report\n",
        repo.display(),
        plan_file.display()
    ));
    let exit = super::run::run(RunArgs {
        plan_file: plan_file.clone(),
        repo: RepoArgs {
            repo: Some(repo.clone()),
        },
        database: crate::cli::DatabaseArg::default(),
        remote: crate::cli::RemoteArg::default(),
        max_parallel: None,
        worktree_root: None,
        machine_slots: None,
        plugins: crate::cli::PluginDirs::default(),
        wait: crate::cli::WaitArgs {
            until_waiting: false,
            notify: None,
        },
        output: args.output.clone(),
    })
    .await?;
    let branch = format!("orchestrator/{NAME}");
    let q = shell_quote(&repo.display().to_string());
    if exit == Exit::Ok {
        say(&format!(
            "\nThe result is on branch `{branch}` of {}; your checkout (main) was not touched.",
            repo.display()
        ));
        if let Ok((files, report)) = result_files(&repo, &branch) {
            say(&format!("files on {branch}: {}", files.join(", ")));
            if let Some(report) = report {
                say(&format!("\nREPORT.md:\n{}", report.trim_end()));
            }
        }
        say(&format!(
            "\nsee the history:   git -C {q} log --oneline --graph {branch}\n\
             see the plan:      orchestrator status --repo {q}\n\
             run it yourself:   orchestrator run {} --repo {q}\n\
             (the folder {} is kept; delete it when done)",
            shell_quote(&plan_file.display().to_string()),
            base.display()
        ));
    } else {
        say(&format!(
            "\nthe demo plan did not succeed; see `orchestrator status --repo {q}` (the folder {} \
             is kept)",
            base.display()
        ));
    }
    Ok(exit)
}
