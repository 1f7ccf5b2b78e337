//! Sub-agents (SPEC §15) through the engine on a real git repository: a scripted tool server
//! stands in for the MCP one (each run of a job's agent asks for what its script says), and
//! the agent runner writes the script's files in the job's worktree. Checked with the `git`
//! CLI:
//! - two `spawn_agent`s and a `wait_for_agents`: each child edits its own file in its own
//!   worktree branched from the parent's checkpoint, the parent resumes with their outputs and
//!   both files in its worktree, and everything lands on the target branch;
//! - two children editing one file: the second merge conflicts, the parent is told which file,
//!   and the plan still succeeds with the first child's edit;
//! - a child whose reply misses its contract's fact fails with reason `contract`, and its
//!   parent goes on (told so) instead of being blocked;
//! - a parent that ends its turn with a child still at work waits for it before it finishes;
//! - nesting stops 2 levels below a plan job; `cancel_agent` stops a parked child;
//! - a message to a child that is at work reaches it before it finishes: it goes on with it.
#![cfg(unix)]

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orchestrator::core::ids::now_millis;
use orchestrator::core::plan::{AgentSpec, JobSpec, PlanSpec, WorkSpec};
use orchestrator::core::state::{FailureReason, NodeStatus};
use orchestrator::core::tools::{
    AgentCall, AgentTools, Contract, Park, SubAgent, ToolEndpoint, ToolJob, ToolOutcome,
};
use orchestrator::core::{
    FnRunner, InMemoryPlanRepository, Orchestrator, PlanId, PlanStatus, WorkOutput,
};
use orchestrator::git::Git2Operations;
use orchestrator_testkit::fixtures::{git, TempRepo};

/// One run of a job's agent: the file it writes, its reply, and what its turn ends with.
#[derive(Debug, Clone, Default)]
struct Step {
    write: Option<(&'static str, &'static str)>,
    reply: String,
    park: Option<Park>,
    /// How long the run takes.
    busy: Duration,
}

fn step(write: Option<(&'static str, &'static str)>, reply: &str, park: Option<Park>) -> Step {
    Step {
        write,
        reply: reply.to_owned(),
        park,
        busy: Duration::ZERO,
    }
}

fn spawn(task: &str) -> Option<Park> {
    Some(Park::Agents(AgentCall::Spawn(SubAgent::new(task))))
}

fn wait_all() -> Option<Park> {
    Some(Park::Agents(AgentCall::Wait { agents: Vec::new() }))
}

/// What one run saw: its job, the message it resumed with, the tools' view of its children,
/// and the files in its worktree.
#[derive(Debug, Clone)]
struct Seen {
    job: String,
    wake: Option<String>,
    agents: Vec<String>,
    depth: usize,
    files: Vec<String>,
}

/// The scripts by producerId; the runs seen so far.
#[derive(Debug, Default)]
struct Script {
    steps: Mutex<HashMap<String, VecDeque<Step>>>,
    /// The park of the run of each open token.
    open: Mutex<HashMap<String, Option<Park>>>,
    /// The tools' view of the job at open, by producerId (the runner reads it).
    jobs: Mutex<HashMap<String, ToolJob>>,
    seen: Mutex<Vec<Seen>>,
}

impl Script {
    fn new(steps: Vec<(&str, Vec<Step>)>) -> Arc<Script> {
        let s = Script::default();
        for (job, steps) in steps {
            lock(&s.steps).insert(job.to_owned(), steps.into());
        }
        Arc::new(s)
    }

    fn seen(&self, job: &str) -> Vec<Seen> {
        lock(&self.seen)
            .iter()
            .filter(|s| s.job == job)
            .cloned()
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AgentTools for Script {
    fn open(&self, job: ToolJob) -> Result<ToolEndpoint, String> {
        let token = format!("{}#{}", job.producer_id, now_millis());
        lock(&self.jobs).insert(job.producer_id.clone(), job);
        lock(&self.open).insert(token.clone(), None);
        Ok(ToolEndpoint::new("http://127.0.0.1:0/test", token))
    }

    fn close(&self, endpoint: &ToolEndpoint) -> ToolOutcome {
        let park = lock(&self.open).remove(&endpoint.token).flatten();
        let mut outcome = ToolOutcome::default();
        outcome.park = park;
        outcome
    }
}

fn orchestrator(script: &Arc<Script>) -> Orchestrator {
    let runner_script = script.clone();
    Orchestrator::builder()
        .repository(InMemoryPlanRepository::new())
        .git(Git2Operations::new())
        .runner(
            "agent",
            FnRunner::sync(move |_, ctx| {
                let s = &runner_script;
                let step = lock(&s.steps)
                    .get_mut(&ctx.producer_id)
                    .and_then(VecDeque::pop_front)
                    .unwrap_or_default();
                std::thread::sleep(step.busy);
                if let Some((file, content)) = step.write {
                    std::fs::write(ctx.dir.join(file), content)
                        .map_err(|e| orchestrator::core::runner::WorkFailure::new(e.to_string()))?;
                }
                let job = lock(&s.jobs).get(&ctx.producer_id).cloned();
                lock(&s.seen).push(Seen {
                    job: ctx.producer_id.clone(),
                    wake: ctx.wake.clone(),
                    agents: job.as_ref().map(|j| j.agents.clone()).unwrap_or_default(),
                    depth: job.as_ref().map_or(0, |j| j.depth),
                    files: files_in(&ctx.dir),
                });
                // The tools' close hands the engine what this run's turn ended with.
                let token = lock(&s.open)
                    .keys()
                    .find(|t| t.starts_with(&format!("{}#", ctx.producer_id)))
                    .cloned();
                if let Some(token) = token {
                    lock(&s.open).insert(token, step.park);
                }
                Ok(WorkOutput::default().with_output(step.reply))
            }),
        )
        .agent_tools(script.clone())
        .build()
        .expect("build")
}

/// The names of the plain files at the top of `dir`.
fn files_in(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn agent_job(id: &str) -> JobSpec {
    let agent = AgentSpec {
        instructions: Some("lead the work".into()),
        ..AgentSpec::default()
    };
    JobSpec::new(id, "Lead the work", WorkSpec::Agent(Box::new(agent)))
}

async fn run(script: &Arc<Script>, target: &str) -> (TempRepo, Orchestrator, PlanStatus, PlanId) {
    let repo = TempRepo::new();
    let o = orchestrator(script);
    let spec = PlanSpec::new("sub-agents")
        .target_branch(target)
        .job(agent_job("lead"));
    let id = o.run(spec, &repo.dir).await.expect("run");
    let status = tokio::time::timeout(Duration::from_secs(60), o.wait(&id))
        .await
        .expect("in time")
        .expect("wait");
    (repo, o, status, id)
}

fn tree(repo: &Path, rev: &str) -> Vec<String> {
    git(repo, &["ls-tree", "--name-only", rev])
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_children_work_apart_and_their_files_reach_the_parent_and_the_target() {
    let script = Script::new(vec![
        (
            "lead",
            vec![
                step(
                    Some(("plan.txt", "the plan\n")),
                    "spawning",
                    spawn("write a.txt"),
                ),
                step(None, "spawning", spawn("write b.txt")),
                step(None, "waiting", wait_all()),
                step(Some(("lead.txt", "joined\n")), "all done", None),
            ],
        ),
        (
            "lead/agent-1",
            vec![step(Some(("a.txt", "A\n")), "wrote a.txt", None)],
        ),
        (
            "lead/agent-2",
            vec![step(Some(("b.txt", "B\n")), "wrote b.txt", None)],
        ),
    ]);
    let (repo, o, status, id) = run(&script, "feature/agents").await;
    assert_eq!(status, PlanStatus::Succeeded);

    let lead = script.seen("lead");
    assert_eq!(lead.len(), 4, "{lead:?}");
    assert!(lead[1]
        .wake
        .as_deref()
        .is_some_and(|w| w.contains("`agent-1` is started")));
    assert_eq!(lead[1].agents, ["agent-1"]);
    assert_eq!(lead[2].agents, ["agent-1", "agent-2"]);
    let last = lead[3].wake.as_deref().expect("woken with the results");
    assert!(
        last.contains("wrote a.txt") && last.contains("wrote b.txt"),
        "{last}"
    );
    assert!(
        lead[3].files.contains(&"a.txt".to_owned()) && lead[3].files.contains(&"b.txt".to_owned()),
        "the children's commits are merged into the parent's worktree: {:?}",
        lead[3].files
    );
    // Each child started from the parent's checkpoint (the plan file) in its own worktree,
    // without the other's file.
    let a = &script.seen("lead/agent-1")[0];
    assert!(a.files.contains(&"plan.txt".to_owned()) && !a.files.contains(&"b.txt".to_owned()));
    assert_eq!(a.depth, 1);

    let files = tree(&repo.dir, "feature/agents");
    for f in ["plan.txt", "a.txt", "b.txt", "lead.txt", "README.md"] {
        assert!(
            files.contains(&f.to_owned()),
            "{f} on the target: {files:?}"
        );
    }
    let record = o.status(&id).await.expect("status");
    let ids: Vec<&str> = record
        .spec
        .jobs
        .iter()
        .map(|j| j.producer_id.as_str())
        .collect();
    assert_eq!(ids, ["lead", "lead/agent-1", "lead/agent-2"]);
    assert!(record.spec.jobs[1].extra.sub_agent.is_some());
    assert_eq!(
        record.state.nodes[0].attempts.len(),
        1,
        "one attempt of the parent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_child_is_told_to_the_parent_naming_the_file() {
    let script = Script::new(vec![
        (
            "lead",
            vec![
                step(None, "spawning", spawn("edit x")),
                step(None, "spawning", spawn("edit x too")),
                step(None, "waiting", wait_all()),
                step(Some(("lead.txt", "done\n")), "done", None),
            ],
        ),
        (
            "lead/agent-1",
            vec![step(Some(("x.txt", "one\n")), "x is one", None)],
        ),
        (
            "lead/agent-2",
            vec![step(Some(("x.txt", "two\n")), "x is two", None)],
        ),
    ]);
    let (repo, _o, status, _) = run(&script, "feature/conflict").await;
    assert_eq!(status, PlanStatus::Succeeded);
    let last = script.seen("lead")[3].wake.clone().expect("woken");
    assert!(
        last.contains("lead/agent-2") && last.contains("conflicted in x.txt"),
        "{last}"
    );
    let x = git(&repo.dir, &["show", "feature/conflict:x.txt"]);
    assert_eq!(
        x, "one",
        "the first child's edit is merged, the second is not"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_breaks_its_contract_fails_and_the_parent_goes_on() {
    let mut sub = SubAgent::new("find the answer");
    sub.contract = Some(Contract {
        expected_facts: vec!["answer".into()],
        success_criteria: vec!["the answer is right".into()],
    });
    let script = Script::new(vec![
        (
            "lead",
            vec![
                step(None, "spawning", Some(Park::Agents(AgentCall::Spawn(sub)))),
                step(None, "waiting", wait_all()),
                step(Some(("lead.txt", "without it\n")), "done without it", None),
            ],
        ),
        (
            "lead/agent-1",
            vec![step(
                Some(("notes.txt", "hm\n")),
                "I could not find it",
                None,
            )],
        ),
    ]);
    let (_repo, o, status, id) = run(&script, "feature/contract").await;
    assert_eq!(status, PlanStatus::Succeeded, "the parent is not blocked");
    let record = o.status(&id).await.expect("status");
    let child = &record.state.nodes[1];
    assert_eq!(child.status, NodeStatus::Failed);
    let reason = child.last_attempt().and_then(|a| a.extra.failure_reason);
    assert_eq!(reason, Some(FailureReason::Contract));
    let instructions = match &record.spec.jobs[1].work {
        WorkSpec::Agent(a) => a.instructions.clone().unwrap_or_default(),
        _ => String::new(),
    };
    assert!(instructions.contains("- answer") && instructions.contains("the answer is right"));
    let last = script.seen("lead")[2].wake.clone().expect("woken");
    assert!(
        last.contains("failed") && last.contains("`answer`"),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_waits_for_a_child_still_at_work_before_it_finishes() {
    let script = Script::new(vec![
        (
            "lead",
            vec![
                step(None, "spawning", spawn("write late.txt")),
                // Ends its turn without waiting: the engine waits for the child.
                step(None, "I am done", None),
                step(None, "seen the child's work", None),
            ],
        ),
        (
            "lead/agent-1",
            vec![step(Some(("late.txt", "late\n")), "wrote late.txt", None)],
        ),
    ]);
    let (repo, _o, status, _) = run(&script, "feature/late").await;
    assert_eq!(status, PlanStatus::Succeeded);
    let lead = script.seen("lead");
    assert_eq!(lead.len(), 3, "{lead:?}");
    assert!(lead[2]
        .wake
        .as_deref()
        .is_some_and(|w| w.contains("wrote late.txt")));
    assert!(tree(&repo.dir, "feature/late").contains(&"late.txt".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_stops_two_levels_below_the_plan_job_and_cancel_stops_a_parked_child() {
    let long_wait = Some(Park::Timer {
        until: now_millis() + 600_000,
        wake: "timer".into(),
    });
    let script = Script::new(vec![
        (
            "lead",
            vec![
                step(None, "spawning", spawn("go deeper")),
                step(None, "spawning", spawn("wait a long time")),
                step(
                    None,
                    "canceling",
                    Some(Park::Agents(AgentCall::Cancel {
                        agent: "agent-2".into(),
                    })),
                ),
                step(None, "waiting", wait_all()),
                step(Some(("lead.txt", "done\n")), "done", None),
            ],
        ),
        (
            "lead/agent-1",
            vec![
                step(None, "deeper", spawn("deepest")),
                step(None, "waiting", wait_all()),
                step(Some(("one.txt", "1\n")), "one done", None),
            ],
        ),
        (
            "lead/agent-1/agent-1",
            vec![
                step(None, "trying", spawn("too deep")),
                step(Some(("two.txt", "2\n")), "two done", None),
            ],
        ),
        ("lead/agent-2", vec![step(None, "waiting", long_wait)]),
    ]);
    let (repo, o, status, id) = run(&script, "feature/deep").await;
    assert_eq!(status, PlanStatus::Succeeded);
    let deepest = script.seen("lead/agent-1/agent-1");
    assert_eq!(deepest[0].depth, 2);
    let refused = deepest[1].wake.clone().expect("resumed");
    assert!(refused.contains("at most 2 levels"), "{refused}");
    let record = o.status(&id).await.expect("status");
    let status_of = |id: &str| {
        let i = record
            .spec
            .jobs
            .iter()
            .position(|j| j.producer_id == id)
            .expect("job");
        record.state.nodes[i].status
    };
    assert_eq!(status_of("lead/agent-2"), NodeStatus::Canceled);
    assert_eq!(status_of("lead/agent-1/agent-1"), NodeStatus::Succeeded);
    let files = tree(&repo.dir, "feature/deep");
    assert!(files.contains(&"one.txt".to_owned()) && files.contains(&"two.txt".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_a_busy_child_reaches_it_before_it_finishes() {
    let busy = Step {
        busy: Duration::from_millis(1_500),
        ..step(Some(("child.txt", "first\n")), "first answer", None)
    };
    let script = Script::new(vec![
        (
            "lead",
            vec![
                step(None, "spawning", spawn("work slowly")),
                step(
                    None,
                    "messaging",
                    Some(Park::Agents(AgentCall::Message {
                        agent: "agent-1".into(),
                        message: "also write more.txt".into(),
                    })),
                ),
                step(None, "waiting", wait_all()),
                step(None, "done", None),
            ],
        ),
        (
            "lead/agent-1",
            vec![
                busy,
                step(Some(("more.txt", "more\n")), "wrote more.txt too", None),
            ],
        ),
    ]);
    let (repo, _o, status, _) = run(&script, "feature/mail").await;
    assert_eq!(status, PlanStatus::Succeeded);
    let child = script.seen("lead/agent-1");
    assert_eq!(
        child.len(),
        2,
        "the child went on with the message: {child:?}"
    );
    let mail = child[1].wake.clone().expect("resumed with the message");
    assert!(mail.contains("also write more.txt"), "{mail}");
    assert!(
        child[1].files.contains(&"child.txt".to_owned()),
        "from its own commit"
    );
    let report = script.seen("lead")[3].wake.clone().expect("report");
    assert!(report.contains("wrote more.txt too"), "{report}");
    let files = tree(&repo.dir, "feature/mail");
    assert!(files.contains(&"child.txt".to_owned()) && files.contains(&"more.txt".to_owned()));
}
