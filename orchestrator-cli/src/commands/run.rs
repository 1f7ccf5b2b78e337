//! `run`, `resume` and `retry`: commands that run a plan to its end.

use orchestrator_core::ids::now_millis;
use orchestrator_core::plan::{
    parse_plan_with, validate, Isolation, PlanFormat, PlanSpec, ValidationContext, WorkSpec,
};
use orchestrator_core::{Orchestrator, PlanId, PlanStatus, RetryRequest};

use crate::cli::{ResumeArgs, RetryArgs, RunArgs};
use crate::drive::{open_owned, run_to_end};
use crate::error::{CliError, CliResult, Exit};
use crate::progress::Progress;
use crate::report;
use crate::workspace::Workspace;

/// Jobs running at once in this process when the plan sets no limit.
const DEFAULT_CAPACITY: usize = 16;

pub(crate) fn capacity(spec: &PlanSpec) -> usize {
    match spec.max_parallel {
        Some(n) if n > 0 => n as usize,
        _ => DEFAULT_CAPACITY,
    }
}

/// Reads a plan file (JSON, or YAML for other extensions). A plan that does not parse is
/// reported with every problem it has, files and folders judged in `repo`.
pub fn read_plan(path: &std::path::Path, repo: &std::path::Path) -> CliResult<PlanSpec> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::invalid(format!("cannot read plan file {}: {e}", path.display())))?;
    let ctx = ValidationContext {
        repo: Some(repo),
        scaffolding: false,
    };
    let mut spec = parse_plan_with(
        &text,
        PlanFormat::from_path(path),
        &path.display().to_string(),
        ctx,
    )?;
    // Teams named by a Squad folder or a preset are resolved into the stored plan.
    let user_presets = orchestrator_workflows::preset::user_presets_path();
    match orchestrator_workflows::resolve::resolve_plan(&mut spec, repo, user_presets.as_deref()) {
        Ok(notes) => {
            for note in notes {
                eprintln!("note: {note}");
            }
        }
        Err(problems) => {
            let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
            return Err(CliError::invalid(format!(
                "{}: {}",
                path.display(),
                lines.join("\n")
            )));
        }
    }
    Ok(spec)
}

/// `run PLAN_FILE`.
pub async fn run(args: RunArgs) -> CliResult<Exit> {
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_plugins(&args.plugins.plugins)?
        .with_database(&args.database)
        .await?
        .with_remote(&args.remote)?;
    // The repository root: where a plan's files are unless it runs with `isolation: none`
    // in a folder of its own (only a plan that parses is known to; it is checked again below).
    let mut spec = read_plan(&args.plan_file, ws.root())?;
    if let Some(n) = args.max_parallel {
        spec.max_parallel = Some(n);
    }
    if let Some(root) = &args.worktree_root {
        // Relative to where the command runs, like every path argument; stored absolute.
        let root = std::path::absolute(root)
            .map_err(|e| CliError::invalid(format!("--worktree-root {}: {e}", root.display())))?;
        spec.worktree_root = Some(root);
    }
    let dir = match spec.isolation {
        Isolation::None => ws.dir.clone(),
        _ => match &ws.git_root {
            Some(root) => root.clone(),
            None if ws.is_bare_repository() => {
                return Err(CliError::invalid(format!(
                    "{} is a bare git repository: jobs run in worktrees of a repository with a \
                     working tree; clone it (`git clone {}`) and run the plan in the clone",
                    ws.dir.display(),
                    ws.dir.display()
                )))
            }
            None => {
                return Err(CliError::invalid(format!(
                    "{} is not in a git repository: jobs run in git worktrees by default \
                     (set `\"isolation\": \"none\"` in the plan to run them in the folder itself)",
                    ws.dir.display()
                )))
            }
        },
    };
    // Validated here too so that an invalid plan leaves nothing behind.
    validate(
        &spec,
        ValidationContext {
            repo: Some(&dir),
            ..Default::default()
        },
    )?;
    let o = ws.job_orchestrator(capacity(&spec), args.machine_slots)?;
    ws.exclude_own_folders().await?;
    let since = now_millis();
    let id = o.create_plan(spec, dir).await?;
    if !args.output.quiet {
        Progress::note(&format!("plan {id} created"));
    }
    run_to_end(&ws, &o, &id, since, &args.output, &args.wait, o.start(&id)).await
}

/// A stored plan this process took over.
struct TakenOver {
    o: Orchestrator,
    id: PlanId,
    /// When the take-over began (ms).
    since: u64,
}

/// Loads a stored plan and takes it over in a new orchestrator sized for it, sharing
/// `machine_slots` (`--machine-slots`, else the environment's) with the machine.
async fn take_over(
    ws: &Workspace,
    plan: &str,
    machine_slots: Option<usize>,
) -> CliResult<TakenOver> {
    let id = ws.resolve_plan(plan).await?;
    let stored = ws.load(&id).await?;
    let o = ws.job_orchestrator(capacity(&stored.spec), machine_slots)?;
    let since = open_owned(ws, &o, &id).await?;
    // Crash repairs (stale locks, leftover processes, the snapshot branch of a final merge
    // that landed just before a crash, orphaned worktrees) ran in the engine's open_plan.
    Ok(TakenOver { o, id, since })
}

/// `resume PLAN_ID`.
pub async fn resume(args: ResumeArgs) -> CliResult<Exit> {
    let ResumeArgs {
        plan: args,
        remote,
        wait,
        machine_slots,
        plugins,
    } = args;
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_plugins(&plugins.plugins)?
        .with_database(&args.database)
        .await?
        .with_remote(&remote)?;
    let TakenOver { o, id, since } = take_over(&ws, &args.plan, machine_slots).await?;
    let status = o.plan_status(&id)?;
    if matches!(status, PlanStatus::Canceled | PlanStatus::Archived) {
        // The record is read only here, while the plan is still open: every other take-over
        // goes on without a copy of it.
        let record = if args.output.json {
            Some(o.status(&id).await?)
        } else {
            None
        };
        let _ = o.close(&id).await;
        let what = if status == PlanStatus::Canceled {
            format!("recover it first: orchestrator recover {id}")
        } else {
            "archived plans cannot run again".to_owned()
        };
        if let Some(record) = record {
            outln!("{}", report::plan_json(&record));
        }
        eprintln!("plan {id} is {status}; {what}");
        return Ok(Exit::PlanNotSucceeded);
    }
    run_to_end(&ws, &o, &id, since, &args.output, &wait, o.resume(&id)).await
}

/// Parses a `--work`-style argument: a JSON work object, or the string shorthand.
pub fn parse_work(flag: &str, text: &str) -> CliResult<WorkSpec> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(CliError::invalid(format!("--{flag} is empty")));
    }
    if trimmed.starts_with('{') {
        serde_json::from_str::<WorkSpec>(trimmed)
            .map_err(|e| CliError::invalid(format!("--{flag}: invalid work object: {e}")))
    } else {
        Ok(WorkSpec::from_shorthand(text))
    }
}

/// `retry PLAN_ID [JOB...]`.
pub async fn retry(args: RetryArgs) -> CliResult<Exit> {
    let work = args
        .work
        .as_deref()
        .map(|w| parse_work("work", w))
        .transpose()?;
    let prechecks = args
        .prechecks
        .as_deref()
        .map(|w| parse_work("prechecks", w))
        .transpose()?;
    let postchecks = args
        .postchecks
        .as_deref()
        .map(|w| parse_work("postchecks", w))
        .transpose()?;
    let ws = Workspace::open(args.repo.repo.as_deref())?
        .with_plugins(&args.plugins.plugins)?
        .with_database(&args.database)
        .await?
        .with_remote(&args.remote)?;
    let TakenOver { o, id, since } = take_over(&ws, &args.plan, args.machine_slots).await?;
    let prepared = async {
        // As given: the engine resolves references like the view does, and refuses
        // replacement specs that would make the plan invalid (every problem, exit 2) before
        // anything changes.
        let jobs: Vec<String> = args.jobs.clone();
        let mut request = RetryRequest::jobs(jobs);
        if let Some(w) = work {
            request = request.with_work(w);
        }
        if let Some(p) = prechecks {
            request = request.with_prechecks(p);
        }
        if let Some(p) = postchecks {
            request = request.with_postchecks(p);
        }
        if args.clear_worktree {
            request = request.clear_worktree();
        }
        let n = o.retry(&id, request).await?;
        Ok::<usize, CliError>(n)
    }
    .await;
    let n = match prepared {
        Ok(n) => n,
        Err(e) => {
            let _ = o.close(&id).await;
            return Err(e);
        }
    };
    if !args.output.quiet {
        Progress::note(&format!(
            "retrying {n} job{}",
            if n == 1 { "" } else { "s" }
        ));
    }
    run_to_end(&ws, &o, &id, since, &args.output, &args.wait, o.resume(&id)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_arguments() {
        assert_eq!(
            parse_work("work", "echo hi").expect("shell"),
            WorkSpec::shell("echo hi")
        );
        assert_eq!(
            parse_work("work", "@agent fix it").expect("agent"),
            WorkSpec::agent("fix it")
        );
        let p = parse_work(
            "work",
            r#"{"type":"process","executable":"touch","args":["x"]}"#,
        )
        .expect("process");
        assert_eq!(p, WorkSpec::process("touch", ["x"]));
        let e = parse_work("work", r#"{"type":"shell","comand":"x"}"#).expect_err("typo");
        assert_eq!(e.exit, Exit::Invalid);
        assert!(e.message.contains("comand"), "{}", e.message);
        assert_eq!(
            parse_work("work", "  ").expect_err("empty").exit,
            Exit::Invalid
        );
    }
}
