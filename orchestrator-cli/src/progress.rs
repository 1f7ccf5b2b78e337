//! Live progress on stderr: bars on a terminal (a line per running job with its phase and
//! elapsed time, and the counts), plain lines otherwise (one per job transition and phase).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use orchestrator_core::state::PhaseStatus;
use orchestrator_core::{NodeStatus, OrchestratorEvent, Phase, PlanId};
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;

use crate::cli::OutputArgs;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing.
    Quiet,
    /// Plain lines.
    Lines,
    /// Bars, redrawn in place (stderr is a terminal).
    Bars,
}

impl Mode {
    /// The mode the flags and stderr call for.
    pub fn for_output(output: &OutputArgs) -> Mode {
        if output.quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Bars
        } else {
            Mode::Lines
        }
    }
}

/// A running progress display; [`Progress::finish`] stops it.
#[derive(Debug)]
pub struct Progress {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    multi: Option<MultiProgress>,
}

/// What the display starts from.
#[derive(Debug)]
pub struct Start {
    /// The plan shown.
    pub plan: PlanId,
    /// Label of every node (producerId, `snapshot-validation`).
    pub labels: Vec<String>,
    /// Status of every node now.
    pub statuses: Vec<NodeStatus>,
    /// Stream the jobs' output lines too.
    pub verbose: bool,
}

impl Progress {
    /// Shows the events of `start.plan` from `events` until [`Progress::finish`].
    pub fn spawn(
        mode: Mode,
        events: broadcast::Receiver<OrchestratorEvent>,
        start: Start,
    ) -> Progress {
        if mode == Mode::Quiet {
            return Progress {
                stop: None,
                task: None,
                multi: None,
            };
        }
        let (stop, stopped) = oneshot::channel();
        let view = View::new(mode, start);
        let multi = view.multi.clone();
        let task = tokio::spawn(view.run(events, stopped));
        Progress {
            stop: Some(stop),
            task: Some(task),
            multi,
        }
    }

    /// Shows what is still queued, then clears the bars.
    pub async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Prints a line on stderr, above the bars while they are shown.
    pub fn say(&self, message: &str) {
        match &self.multi {
            Some(multi) => {
                let _ = multi.println(message);
            }
            None => eprintln!("{message}"),
        }
    }

    /// Prints a line on stderr (no bars are shown).
    pub fn note(message: &str) {
        eprintln!("{message}");
    }
}

/// How long the display waits for the rest of a turn's events.
const COALESCE: Duration = Duration::from_millis(10);

struct Job {
    started: Option<Instant>,
    phase: Option<Phase>,
    error: Option<(Phase, String)>,
    bar: Option<ProgressBar>,
}

struct View {
    mode: Mode,
    plan: PlanId,
    labels: Vec<String>,
    width: usize,
    verbose: bool,
    jobs: Vec<Job>,
    statuses: Vec<NodeStatus>,
    started: Instant,
    multi: Option<MultiProgress>,
    summary: Option<ProgressBar>,
}

impl View {
    fn new(mode: Mode, start: Start) -> View {
        let width = start
            .labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(8)
            .min(40);
        let jobs = start
            .labels
            .iter()
            .map(|_| Job {
                started: None,
                phase: None,
                error: None,
                bar: None,
            })
            .collect();
        let (multi, summary) = if mode == Mode::Bars {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let summary = multi.add(ProgressBar::new(start.labels.len() as u64));
            summary.set_style(
                ProgressStyle::with_template(
                    "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} done  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            summary.enable_steady_tick(Duration::from_millis(120));
            (Some(multi), Some(summary))
        } else {
            (None, None)
        };
        let view = View {
            mode,
            plan: start.plan,
            labels: start.labels,
            width,
            verbose: start.verbose,
            jobs,
            statuses: start.statuses,
            started: Instant::now(),
            multi,
            summary,
        };
        view.refresh_summary();
        view
    }

    async fn run(
        mut self,
        mut events: broadcast::Receiver<OrchestratorEvent>,
        mut stopped: oneshot::Receiver<()>,
    ) {
        let mut batch = Vec::new();
        loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Ok(e) => {
                        // The engine publishes a turn's events together; take the whole turn, so
                        // that a change undone within it (a job stopped by a pause fails and is
                        // queued again, its dependents blocked and unblocked) is not shown.
                        batch.push(e);
                        tokio::time::sleep(COALESCE).await;
                        while let Ok(e) = events.try_recv() {
                            batch.push(e);
                        }
                        self.on_batch(std::mem::take(&mut batch));
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        self.line(&format!("({n} progress events skipped)"));
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = &mut stopped => {
                    while let Ok(e) = events.try_recv() {
                        batch.push(e);
                    }
                    self.on_batch(batch);
                    break;
                }
            }
        }
        self.close();
    }

    fn on_batch(&mut self, batch: Vec<OrchestratorEvent>) {
        let mut last: std::collections::HashMap<usize, usize> = Default::default();
        for (i, e) in batch.iter().enumerate() {
            if let OrchestratorEvent::NodeTransition { node, .. } = e {
                last.insert(*node, i);
            }
        }
        for (i, e) in batch.iter().enumerate() {
            match e {
                OrchestratorEvent::NodeTransition { node, to, plan, .. } => {
                    let net = last.get(node) == Some(&i)
                        && plan == &self.plan
                        && self.statuses.get(*node) != Some(to);
                    if net {
                        self.on_transition(*node, *to);
                    }
                }
                other => self.on_event(other),
            }
        }
    }

    fn close(&mut self) {
        for job in &mut self.jobs {
            if let Some(bar) = job.bar.take() {
                bar.finish_and_clear();
            }
        }
        if let Some(summary) = self.summary.take() {
            summary.finish_and_clear();
        }
        if let Some(multi) = self.multi.take() {
            let _ = multi.clear();
        }
    }

    fn label(&self, n: usize) -> &str {
        self.labels.get(n).map_or("?", String::as_str)
    }

    fn stamp(&self) -> String {
        format!("[{:>7.1}s]", self.started.elapsed().as_secs_f64())
    }

    /// A line above the bars, or on its own.
    fn line(&self, text: &str) {
        match &self.multi {
            Some(multi) => {
                let _ = multi.println(text);
            }
            None => eprintln!("{} {text}", self.stamp()),
        }
    }

    fn on_event(&mut self, event: &OrchestratorEvent) {
        if event.plan() != &self.plan {
            return;
        }
        match event {
            OrchestratorEvent::PhaseStarted {
                node,
                phase,
                attempt,
                ..
            } => {
                if let Some(job) = self.jobs.get_mut(*node) {
                    job.phase = Some(*phase);
                    if let Some(bar) = &job.bar {
                        bar.set_message(phase.as_str());
                    }
                }
                if self.mode == Mode::Lines {
                    let attempt = if *attempt > 1 {
                        format!(" (attempt {attempt})")
                    } else {
                        String::new()
                    };
                    self.line(&format!("{}: {phase}{attempt}", self.label(*node)));
                }
            }
            OrchestratorEvent::PhaseEnded {
                node,
                phase,
                status: PhaseStatus::Failed,
                error,
                ..
            } => {
                if let Some(job) = self.jobs.get_mut(*node) {
                    job.error = Some((*phase, error.clone().unwrap_or_default()));
                }
            }
            OrchestratorEvent::PlanStatusChanged { from, to, .. } if self.mode == Mode::Lines => {
                self.line(&format!("plan: {from} -> {to}"));
            }
            OrchestratorEvent::Log { node, line, .. } if self.verbose => {
                self.line(&format!("{} | {line}", self.label(*node)));
            }
            _ => {}
        }
    }

    fn on_transition(&mut self, n: usize, to: NodeStatus) {
        let Some(slot) = self.statuses.get_mut(n) else {
            return;
        };
        *slot = to;
        let label = format!("{:<w$}", self.label(n), w = self.width);
        let elapsed = self.jobs[n]
            .started
            .map(|t| format!(" in {:.1}s", t.elapsed().as_secs_f64()))
            .unwrap_or_default();
        match to {
            NodeStatus::Running => {
                let job = &mut self.jobs[n];
                job.started = Some(Instant::now());
                job.error = None;
                if let Some(multi) = &self.multi {
                    let bar = multi.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template("  {spinner} {prefix} {msg:<11} {elapsed}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.set_prefix(label.clone());
                    bar.set_message(job.phase.map_or("starting", Phase::as_str));
                    bar.enable_steady_tick(Duration::from_millis(120));
                    job.bar = Some(bar);
                } else {
                    self.line(&format!("{}: running", label.trim_end()));
                }
            }
            NodeStatus::Succeeded => self.ended(n, &format!("ok   {label}{elapsed}")),
            NodeStatus::Failed => {
                let why = match &self.jobs[n].error {
                    Some((phase, e)) => format!(": {phase} failed: {e}"),
                    None => String::new(),
                };
                self.ended(n, &format!("FAIL {label}{elapsed}{why}"));
            }
            NodeStatus::Blocked => self.ended(n, &format!("--   {label} blocked")),
            NodeStatus::Canceled => self.ended(n, &format!("--   {label} canceled{elapsed}")),
            NodeStatus::Pending | NodeStatus::Ready if self.jobs[n].started.is_some() => {
                self.ended(n, &format!("..   {label} stopped; queued again"));
            }
            _ => {}
        }
        self.refresh_summary();
    }

    fn ended(&mut self, n: usize, text: &str) {
        let job = &mut self.jobs[n];
        job.started = None;
        job.phase = None;
        if let Some(bar) = job.bar.take() {
            bar.finish_and_clear();
            if let Some(multi) = &self.multi {
                multi.remove(&bar);
            }
        }
        self.line(text.trim_end());
    }

    fn refresh_summary(&self) {
        let Some(summary) = &self.summary else {
            return;
        };
        let (mut done, mut running, mut failed, mut blocked, mut canceled) = (0, 0, 0, 0, 0);
        for s in &self.statuses {
            match s {
                NodeStatus::Succeeded => done += 1,
                NodeStatus::Failed => failed += 1,
                NodeStatus::Blocked => blocked += 1,
                NodeStatus::Canceled => canceled += 1,
                s if s.is_active() => running += 1,
                _ => {}
            }
        }
        summary.set_position((done + failed + blocked + canceled) as u64);
        let mut msg = format!("{done} succeeded, {running} running");
        for (n, what) in [
            (failed, "failed"),
            (blocked, "blocked"),
            (canceled, "canceled"),
        ] {
            if n > 0 {
                msg.push_str(&format!(", {n} {what}"));
            }
        }
        summary.set_message(msg);
    }
}
