//! Plan edits through the file store: the journal holds the edits (not the whole plan), and a
//! reload replays them to exactly the state the engine had.

use orchestrator_core::plan::{Isolation, JobSpec, JobUpdate, PlanEdit, PlanSpec, WorkSpec};
use orchestrator_core::{FnRunner, Orchestrator, PlanRepository, PlanStatus, WorkOutput};
use orchestrator_storage::FsPlanRepository;

fn job(id: &str, deps: &[&str]) -> JobSpec {
    JobSpec::new(id, format!("task {id}"), WorkSpec::shell("true")).depends_on(deps.iter().copied())
}

#[tokio::test]
async fn edits_are_journaled_small_and_replay_to_the_same_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("store");
    let o = Orchestrator::builder()
        .repository(FsPlanRepository::new(&store_dir))
        .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
        .build()
        .expect("build");
    // A plan of 2,000 jobs, scaffolded, then edited in many small steps.
    let mut spec = PlanSpec::new("big").isolation(Isolation::None);
    for i in 0..2000 {
        spec = spec.job(job(&format!("job-{i:05}"), &[]));
    }
    let id = o.scaffold_plan(spec, dir.path()).await.expect("scaffold");
    let journal_before = journal_bytes(&store_dir);
    for i in 0..20 {
        o.edit_plan(
            &id,
            vec![
                PlanEdit::AddJob {
                    job: Box::new(job(&format!("new-{i:03}"), &["job-00000"])),
                },
                PlanEdit::UpdateJob {
                    job: format!("job-{:05}", i + 1),
                    update: Box::new(JobUpdate {
                        work: Some(WorkSpec::shell("echo changed")),
                        ..JobUpdate::default()
                    }),
                },
                PlanEdit::RemoveJob {
                    job: format!("job-{:05}", 1999 - i),
                },
            ],
        )
        .await
        .expect("edit");
    }
    let grown = journal_bytes(&store_dir) - journal_before;
    assert!(grown > 0, "the edits are in the journal");
    assert!(
        grown < 40_000,
        "20 small edits of a 2,000-job plan journaled {grown} bytes"
    );
    let live = o.status(&id).await.expect("live");
    o.close(&id).await.expect("close");

    let reloaded = FsPlanRepository::new(&store_dir)
        .load(&id)
        .await
        .expect("reload");
    assert_eq!(reloaded.spec, live.spec);
    assert_eq!(reloaded.state.nodes, live.state.nodes);
    assert_eq!(reloaded.spec.jobs.len(), 2000);

    let o = Orchestrator::builder()
        .repository(FsPlanRepository::new(&store_dir))
        .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
        .build()
        .expect("build");
    o.open_plan(&id).await.expect("open");
    o.finalize_plan(&id).await.expect("finalize");
    // `close` paused it.
    o.resume(&id).await.expect("resume");
    assert_eq!(o.wait(&id).await.expect("wait"), PlanStatus::Succeeded);
}

fn journal_bytes(root: &std::path::Path) -> u64 {
    fn walk(p: &std::path::Path) -> u64 {
        std::fs::read_dir(p)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| {
                        let path = e.path();
                        if path.is_dir() {
                            walk(&path)
                        } else if path
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().contains("journal"))
                        {
                            e.metadata().map(|m| m.len()).unwrap_or(0)
                        } else {
                            0
                        }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    walk(root)
}
