//! Agents that park (SPEC §15) through the engine, on the in-memory store, with a scripted
//! tool server standing in for the MCP one: a run whose agent asked to `wait` parks its job in
//! `waiting(timer)` with its attempt open (its dependents pending), and at the deadline the
//! same attempt goes on, the agent resumed with the timer's message; the deadline survives a
//! restart; `ask_user` waits for an answer that must be one of its choices; a cron re-arms
//! after each turn until canceled; a parked job can be canceled.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orchestrator_core::ids::now_millis;
use orchestrator_core::plan::{AgentSpec, Isolation, JobSpec, PlanSpec, WorkSpec};
use orchestrator_core::schedule::Schedule;
use orchestrator_core::state::{NodeStatus, WaitingFor};
use orchestrator_core::tools::{
    AgentTools, Cron, CronChange, Park, ToolEndpoint, ToolJob, ToolOutcome,
};
use orchestrator_core::{
    Error, FnRunner, InMemoryPlanRepository, Orchestrator, PlanId, PlanStatus, WorkOutput,
};

/// The jobs' runs: producerId and the message the run resumed with.
type Runs = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// What each successive run of a job's agent asks for (then nothing).
#[derive(Debug, Default)]
struct Scripted {
    asks: Mutex<HashMap<String, VecDeque<Ask>>>,
    open: Mutex<HashMap<String, String>>,
    runs: Runs,
}

#[derive(Debug, Clone)]
enum Ask {
    /// `wait` until this many ms after the run ends.
    Wait(u64),
    Question(&'static [&'static str]),
    Cron(CronChange),
    Nothing,
}

impl Scripted {
    fn new(job: &str, asks: Vec<Ask>) -> Arc<Scripted> {
        let s = Scripted::default();
        s.asks
            .lock()
            .expect("lock")
            .insert(job.to_owned(), asks.into());
        Arc::new(s)
    }

    fn runs(&self) -> Vec<(String, Option<String>)> {
        self.runs.lock().expect("lock").clone()
    }
}

impl AgentTools for Scripted {
    fn open(&self, job: ToolJob) -> Result<ToolEndpoint, String> {
        let token = format!("{}#{}", job.producer_id, now_millis());
        self.open
            .lock()
            .expect("lock")
            .insert(token.clone(), job.producer_id);
        Ok(ToolEndpoint::new("http://127.0.0.1:0/test", token))
    }

    fn close(&self, endpoint: &ToolEndpoint) -> ToolOutcome {
        let job = self.open.lock().expect("lock").remove(&endpoint.token);
        let ask = job
            .and_then(|j| self.asks.lock().expect("lock").get_mut(&j)?.pop_front())
            .unwrap_or(Ask::Nothing);
        let mut outcome = ToolOutcome::default();
        match ask {
            Ask::Wait(ms) => {
                outcome.park = Some(Park::Timer {
                    until: now_millis() + ms,
                    wake: format!("The timer you set fired after {ms} ms."),
                })
            }
            Ask::Question(choices) => {
                outcome.park = Some(Park::Input {
                    question: "Which colour?".into(),
                    choices: choices.iter().map(|c| c.to_string()).collect(),
                    allow_freeform: false,
                })
            }
            Ask::Cron(change) => outcome.cron = Some(change),
            Ask::Nothing => {}
        }
        outcome
    }
}

fn orchestrator(repo: &InMemoryPlanRepository, tools: &Arc<Scripted>) -> Orchestrator {
    let runs = tools.runs.clone();
    Orchestrator::builder()
        .repository(repo.clone())
        .runner(
            "agent",
            FnRunner::sync(move |_, ctx| {
                let mut runs = runs.lock().expect("lock");
                runs.push((ctx.producer_id.clone(), ctx.wake.clone()));
                Ok(WorkOutput::default().with_output(format!("run {}", runs.len())))
            }),
        )
        .runner("shell", FnRunner::sync(|_, _| Ok(WorkOutput::default())))
        .agent_tools(tools.clone())
        .build()
        .expect("build")
}

/// `agent` (agent work) -> `after` (shell).
fn plan() -> PlanSpec {
    let agent = AgentSpec {
        instructions: Some("work, waiting when told".into()),
        ..AgentSpec::default()
    };
    PlanSpec::new("parked")
        .isolation(Isolation::None)
        .job(JobSpec::new(
            "agent",
            "The agent",
            WorkSpec::Agent(Box::new(agent)),
        ))
        .job(JobSpec::new("after", "After", WorkSpec::shell("after")).depends_on(["agent"]))
}

async fn until_waiting(o: &Orchestrator, dir: &std::path::Path) -> PlanId {
    let id = o.run(plan(), dir).await.expect("run");
    assert_eq!(
        o.wait_or_waiting(&id).await.expect("wait"),
        PlanStatus::Waiting
    );
    id
}

async fn finished(o: &Orchestrator, id: &PlanId) -> PlanStatus {
    tokio::time::timeout(Duration::from_secs(20), o.wait(id))
        .await
        .expect("in time")
        .expect("wait")
}

#[tokio::test]
async fn a_long_wait_parks_the_job_and_the_same_attempt_resumes_at_the_deadline() {
    let tools = Scripted::new("agent", vec![Ask::Wait(300)]);
    let repo = InMemoryPlanRepository::new();
    let o = orchestrator(&repo, &tools);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = until_waiting(&o, dir.path()).await;

    let record = o.status(&id).await.expect("status");
    let node = &record.state.nodes[0];
    assert_eq!(node.status, NodeStatus::Waiting);
    let waiting = node.extra.waiting.as_deref().expect("waiting");
    assert_eq!(waiting.waiting_for, WaitingFor::Timer);
    assert!(waiting.until.is_some_and(|u| u > waiting.since));
    assert_eq!(node.attempts.len(), 1, "one attempt, still open");
    assert_eq!(record.state.nodes[1].status, NodeStatus::Pending);

    assert_eq!(finished(&o, &id).await, PlanStatus::Succeeded);
    let record = o.status(&id).await.expect("status");
    assert_eq!(
        record.state.nodes[0].attempts.len(),
        1,
        "the same attempt went on"
    );
    assert_eq!(
        tools.runs(),
        [
            ("agent".to_owned(), None),
            (
                "agent".to_owned(),
                Some("The timer you set fired after 300 ms.".to_owned())
            ),
        ]
    );
}

#[tokio::test]
async fn a_parked_jobs_deadline_survives_a_restart() {
    let tools = Scripted::new("agent", vec![Ask::Wait(500)]);
    let repo = InMemoryPlanRepository::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let (id, until) = {
        let o = orchestrator(&repo, &tools);
        let id = until_waiting(&o, dir.path()).await;
        let record = o.status(&id).await.expect("status");
        let until = record.state.nodes[0]
            .extra
            .waiting
            .as_ref()
            .and_then(|w| w.until)
            .expect("deadline");
        o.release(&id).await.expect("release");
        (id, until)
    };
    let o = orchestrator(&repo, &tools);
    o.open_plan(&id).await.expect("reopen");
    assert_eq!(o.plan_status(&id).expect("status"), PlanStatus::Waiting);
    o.start(&id).await.expect("start");
    assert_eq!(finished(&o, &id).await, PlanStatus::Succeeded);
    assert!(
        now_millis() >= until,
        "not woken before the stored deadline"
    );
    let runs = tools.runs();
    assert_eq!(runs.len(), 2, "parked, then resumed once: {runs:?}");
    assert!(
        runs[1].1.is_some(),
        "the resumed run carries the timer's message"
    );
}

#[tokio::test]
async fn a_question_waits_for_an_answer_among_its_choices() {
    let tools = Scripted::new("agent", vec![Ask::Question(&["blue", "green"])]);
    let repo = InMemoryPlanRepository::new();
    let o = orchestrator(&repo, &tools);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = until_waiting(&o, dir.path()).await;
    let record = o.status(&id).await.expect("status");
    let waiting = record.state.nodes[0]
        .extra
        .waiting
        .as_deref()
        .expect("waiting");
    assert_eq!(waiting.waiting_for, WaitingFor::Input);
    assert_eq!(waiting.prompt.as_deref(), Some("Which colour?"));
    assert_eq!(waiting.choices, ["blue", "green"]);

    for bad in ["red", "  "] {
        let e = o.answer(&id, "agent", bad).await.expect_err("refused");
        assert!(matches!(e, Error::InvalidState { .. }), "{e}");
    }
    assert_eq!(o.plan_status(&id).expect("status"), PlanStatus::Waiting);
    o.answer(&id, "agent", "green").await.expect("answer");
    assert_eq!(finished(&o, &id).await, PlanStatus::Succeeded);
    let wake = tools.runs()[1].1.clone().expect("resumed with the answer");
    assert!(
        wake.contains("Which colour?") && wake.ends_with("green"),
        "{wake}"
    );
    // Answering what no longer waits names the job's status.
    let e = o
        .answer(&id, "agent", "blue")
        .await
        .expect_err("not waiting");
    assert!(matches!(e, Error::NotWaiting { .. }), "{e}");
}

#[tokio::test]
async fn a_cron_re_arms_after_each_turn_until_canceled() {
    let every = Cron::new(Schedule::every(1).expect("schedule"), "poll");
    let tools = Scripted::new(
        "agent",
        vec![
            Ask::Cron(CronChange::Set(every)),
            Ask::Nothing,
            Ask::Nothing,
            Ask::Cron(CronChange::Cancel),
        ],
    );
    let repo = InMemoryPlanRepository::new();
    let o = orchestrator(&repo, &tools);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = o.run(plan(), dir.path()).await.expect("run");
    assert_eq!(finished(&o, &id).await, PlanStatus::Succeeded);
    let wakes: Vec<String> = tools.runs().into_iter().filter_map(|(_, w)| w).collect();
    assert_eq!(wakes.len(), 3, "three firings: {wakes:?}");
    for (i, wake) in wakes.iter().enumerate() {
        assert!(
            wake.contains(&format!("(firing {})", i + 1)) && wake.contains("poll"),
            "{wake}"
        );
    }
    let record = o.status(&id).await.expect("status");
    assert!(
        record.state.nodes[0]
            .extra
            .tools
            .as_ref()
            .is_none_or(|t| t.cron.is_none()),
        "the cron is gone once canceled"
    );
}

#[tokio::test]
async fn a_parked_job_can_be_canceled() {
    let tools = Scripted::new("agent", vec![Ask::Wait(60_000)]);
    let repo = InMemoryPlanRepository::new();
    let o = orchestrator(&repo, &tools);
    let dir = tempfile::tempdir().expect("tempdir");
    let id = until_waiting(&o, dir.path()).await;
    o.cancel(&id).await.expect("cancel");
    assert_eq!(finished(&o, &id).await, PlanStatus::Canceled);
    let record = o.status(&id).await.expect("status");
    assert_eq!(record.state.nodes[0].status, NodeStatus::Canceled);
    assert_eq!(tools.runs().len(), 1, "nothing resumed");
}
