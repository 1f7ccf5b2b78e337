//! The dashboard's pages, rendered on the server from what the SDK answers: the plans, a plan
//! (DAG, timeline, jobs), a job, the jobs waiting for a person, the sessions.

use std::collections::HashMap;
use std::fmt::Write;

use orchestrator_core::repository::LogQuery;
use orchestrator_core::state::{PlanRecord, WaitingFor};
use orchestrator_core::usage::Usage;
use orchestrator_core::view::{self, PlanView};
use orchestrator_core::{PlanId, PlanStatus};
use serde_json::Value;

use super::draw;
use super::html::{badge, duration, esc, name_of, time, usage};
use super::Ui;
use crate::error::CliResult;

/// Plans per page of the plans list.
pub const PER_PAGE: usize = 50;

/// The most job rows on a plan's page (a job's page is reached by its number past that).
const MAX_ROWS: usize = 5000;

/// Lines of a job's log shown on its page.
const LOG_TAIL: usize = 200;

/// The plans, newest first, `PER_PAGE` at a time (page numbers from 1).
pub async fn plans(ui: &Ui, page: usize) -> CliResult<String> {
    let listing = ui.ws.plans.list().await?;
    let pages = listing.plans.len().div_ceil(PER_PAGE).max(1);
    let page = page.clamp(1, pages);
    let t = ui.token();
    let mut out = format!(
        "<h1>Plans</h1><p class=\"note\">{} plan(s) in {}</p>",
        listing.plans.len(),
        esc(&ui.ws.plans_location())
    );
    out.push_str(
        "<table class=\"plans\"><thead><tr><th>Plan</th><th>Status</th><th>Progress</th>\
         <th>Usage</th><th>Created</th><th>Id</th></tr></thead><tbody>",
    );
    for summary in listing
        .plans
        .iter()
        .skip((page - 1) * PER_PAGE)
        .take(PER_PAGE)
    {
        let id = &summary.plan_id;
        // The page's plans only: their progress and usage need the record.
        let (progress, used) = match ui.ws.plans.load(id).await {
            Ok(record) => {
                let c = record.state.counts();
                let total = record.state.nodes.len();
                let done = c.succeeded;
                let pct = (done * 100).checked_div(total).unwrap_or(0);
                (
                    format!(
                        "<span class=\"bar\"><span style=\"width:{pct}%\"></span></span> {done}/{total}"
                    ),
                    usage(&Usage::of_plan(&record)),
                )
            }
            Err(e) => (
                format!("<span class=\"err\">{}</span>", esc(&e.to_string())),
                String::new(),
            ),
        };
        let _ = write!(
            out,
            "<tr data-plan=\"{id}\"><td><a href=\"/plans/{id}?token={t}\">{name}</a></td>\
             <td>{status}</td><td>{progress}</td><td>{used}</td><td>{created}</td>\
             <td class=\"mono\">{short}</td></tr>",
            name = esc(&summary.name),
            status = badge(summary.status.as_str()),
            created = time(Some(summary.created_at)),
            short = esc(id.as_str().get(..8).unwrap_or(id.as_str())),
        );
    }
    out.push_str("</tbody></table>");
    for (id, e) in &listing.damaged {
        let _ = write!(
            out,
            "<p class=\"err\">plan {} cannot be read: {}</p>",
            esc(id.as_str()),
            esc(&e.to_string())
        );
    }
    if pages > 1 {
        out.push_str("<p class=\"pager\">");
        for p in 1..=pages {
            if p == page {
                let _ = write!(out, "<b>{p}</b> ");
            } else {
                let _ = write!(out, "<a href=\"/?token={t}&page={p}\">{p}</a> ");
            }
        }
        out.push_str("</p>");
    }
    Ok(out)
}

/// A plan: its summary and actions, its DAG, its timeline and its jobs (sub-jobs under their
/// parent).
pub async fn plan(ui: &Ui, id: &PlanId) -> CliResult<String> {
    let view = ui.ws.view(id).await?;
    let t = ui.token();
    let mut out = summary(&view);
    let _ = write!(
        out,
        "<div class=\"actions\" data-plan=\"{id}\">\
         <button data-act=\"pause\">Pause</button><button data-act=\"resume\">Resume</button>\
         <button data-act=\"cancel\">Cancel</button><button data-act=\"retry\">Retry failed</button>\
         <span class=\"msg\"></span></div>\
         <h2>Graph</h2><div class=\"scroll\" id=\"dag\">{dag}</div>\
         <h2>Timeline</h2><div class=\"scroll\" id=\"timeline\">{timeline}</div>\
         <h2>Jobs</h2><div id=\"jobs\">{jobs}</div>",
        dag = draw::dag(&view, |n| format!("/plans/{id}/jobs/{n}?token={t}")),
        timeline = timeline(&view),
        jobs = jobs(ui, &view),
    );
    Ok(out)
}

/// The plan's timeline (Gantt chart).
pub fn timeline(record: &PlanRecord) -> String {
    draw::gantt(
        &view::timeline(record),
        orchestrator_core::ids::now_millis(),
    )
}

/// The heading of a plan's page: name, status, counts, usage, branches.
fn summary(view: &PlanView) -> String {
    let c = view.state.counts();
    let used = Usage::of_plan(view);
    format!(
        "<h1>{name} {status}</h1><p class=\"facts\" id=\"summary\">\
         <span class=\"mono\">{id}</span> · <span data-count=\"succeeded\">{s}</span> succeeded · \
         <span data-count=\"running\">{r}</span> running · <span data-count=\"failed\">{f}</span> \
         failed · {total} jobs · target <span class=\"mono\">{target}</span> · usage {used} · \
         created {created}</p>",
        name = esc(&view.spec.name),
        status = format_args!(
            "<span id=\"plan-status\">{}</span>",
            badge(view.status().as_str())
        ),
        id = view.state.id,
        s = c.succeeded,
        r = c.active,
        f = c.failed,
        total = view.state.nodes.len(),
        target = esc(view.state.target_branch.as_deref().unwrap_or("–")),
        used = usage(&used),
        created = time(Some(view.state.created_at)),
    )
}

/// The jobs table: plan order, each composite job's sub-jobs right under it, indented.
fn jobs(ui: &Ui, view: &PlanView) -> String {
    let t = ui.token();
    let id = &view.state.id;
    let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut top = Vec::new();
    for (n, job) in view.spec.jobs.iter().enumerate() {
        match job.extra.parent.as_deref() {
            Some(p) if view.spec.jobs.iter().any(|j| j.producer_id == p) => {
                children.entry(p).or_default().push(n)
            }
            _ => top.push(n),
        }
    }
    if view.state.nodes.len() > view.spec.jobs.len() {
        top.push(view.spec.jobs.len());
    }
    let mut order: Vec<(usize, usize)> = Vec::new();
    let mut stack: Vec<(usize, usize)> = top.iter().rev().map(|&n| (n, 0)).collect();
    while let Some((n, depth)) = stack.pop() {
        order.push((n, depth));
        if let Some(kids) = view
            .spec
            .jobs
            .get(n)
            .and_then(|j| children.get(j.producer_id.as_str()))
        {
            stack.extend(kids.iter().rev().map(|&k| (k, depth + 1)));
        }
    }
    let mut out = String::from(
        "<table class=\"jobs\"><thead><tr><th>Job</th><th>Status</th><th>Attempts</th>\
         <th>Group</th><th>Usage</th><th>Why</th></tr></thead><tbody>",
    );
    let shown = order.len().min(MAX_ROWS);
    let hidden = order.len() - shown;
    for &(n, depth) in &order[..shown] {
        let node = &view.state.nodes[n];
        let why = why(view, n);
        let group = view
            .spec
            .jobs
            .get(n)
            .and_then(|j| j.extra.group.as_deref())
            .unwrap_or("");
        let _ = write!(
            out,
            "<tr data-node=\"{n}\" class=\"depth-{d}\"><td style=\"padding-left:{pad}em\">\
             <a href=\"/plans/{id}/jobs/{n}?token={t}\">{label}</a></td>\
             <td class=\"status\">{status}</td><td>{attempts}</td><td>{group}</td><td>{used}</td>\
             <td>{why}</td></tr>",
            d = depth.min(9),
            pad = 0.5 + depth as f32 * 1.5,
            label = esc(view.label(n)),
            status = badge(node.status.as_str()),
            attempts = node.attempts.len(),
            group = esc(group),
            used = usage(&Usage::of_node(node)),
            why = esc(&why),
        );
    }
    out.push_str("</tbody></table>");
    if hidden > 0 {
        let _ = write!(
            out,
            "<p class=\"note\">{hidden} more jobs are not listed; a job's page is \
             /plans/{id}/jobs/NUMBER.</p>"
        );
    }
    out
}

/// Why a job waits or failed, in a line.
fn why(record: &PlanRecord, n: usize) -> String {
    let node = &record.state.nodes[n];
    if let Some(w) = &node.extra.waiting {
        let mut s = format!("waits for {}", w.waiting_for.as_str());
        if let Some(until) = w.until {
            let _ = write!(s, " until {}", crate::report::utc_time(until));
        }
        if let Some(p) = &w.prompt {
            let _ = write!(s, ": {p}");
        }
        return s;
    }
    let last = node.last_attempt();
    match (&node.extra.error, last.and_then(|a| a.extra.failure_reason)) {
        (Some(e), Some(r)) => format!("{}: {e}", name_of(&r)),
        (Some(e), None) => e.clone(),
        (None, _) => String::new(),
    }
}

/// A job: what it is, why it waits or failed (with the controls to answer), its attempts and
/// phases, its output, usage and the tail of its log.
pub async fn job(ui: &Ui, id: &PlanId, n: usize) -> CliResult<Option<String>> {
    let view = ui.ws.view(id).await?;
    let Some(node) = view.state.nodes.get(n) else {
        return Ok(None);
    };
    let t = ui.token();
    let label = view.label(n);
    let mut out = format!(
        "<p class=\"crumbs\"><a href=\"/plans/{id}?token={t}\">{plan}</a> /</p>\
         <h1>{label} <span id=\"job-status\">{status}</span></h1>",
        plan = esc(&view.spec.name),
        label = esc(label),
        status = badge(node.status.as_str()),
    );
    if let Some(job) = view.spec.jobs.get(n) {
        let _ = write!(out, "<p class=\"task\">{}</p>", esc(&job.task));
    }
    let why = why(&view, n);
    if !why.is_empty() {
        let _ = write!(out, "<p class=\"why\">{}</p>", esc(&why));
    }
    if let Some(w) = &node.extra.waiting {
        out.push_str(&controls(id, label, w.waiting_for));
    }
    if let Some(parent) = view
        .spec
        .jobs
        .get(n)
        .and_then(|j| j.extra.parent.as_deref())
    {
        let _ = write!(out, "<p>Sub-job of <b>{}</b></p>", esc(parent));
    }
    out.push_str(
        "<h2>Attempts</h2><table class=\"attempts\"><thead><tr><th>#</th><th>Status</th>\
                  <th>Started</th><th>Phases</th><th>Failure</th></tr></thead><tbody>",
    );
    for a in &node.attempts {
        let phases: Vec<String> = a
            .phases
            .iter()
            .map(|p| {
                let ms = p
                    .ended_at
                    .unwrap_or_else(orchestrator_core::ids::now_millis)
                    .saturating_sub(p.started_at);
                format!(
                    "<span class=\"phase ps-{s}\">{ph} {s} {d}</span>",
                    ph = p.phase.as_str(),
                    s = name_of(&p.status),
                    d = duration(ms)
                )
            })
            .collect();
        let failure = match (&a.extra.failed_phase, &a.extra.error) {
            (Some(p), Some(e)) => format!("{}: {}", p.as_str(), e),
            (None, Some(e)) => e.clone(),
            _ => String::new(),
        };
        let _ = write!(
            out,
            "<tr><td>{num}</td><td>{status}</td><td>{start}</td><td>{phases}</td><td>{failure}</td></tr>",
            num = a.number,
            status = badge(&name_of(&a.status)),
            start = time(Some(a.started_at)),
            phases = phases.join(" "),
            failure = esc(&failure),
        );
    }
    out.push_str("</tbody></table>");
    let spent = Usage::of_node(node);
    if spent != Usage::default() {
        let _ = write!(out, "<h2>Usage</h2><p>{}</p>", usage(&spent));
    }
    if let Some(commit) = &node.extra.commit {
        let _ = write!(
            out,
            "<p>Commit <span class=\"mono\">{}</span></p>",
            esc(commit)
        );
    }
    if let Some(output) = node.output() {
        let _ = write!(
            out,
            "<h2>Output</h2><pre class=\"output\">{}</pre>",
            esc(output)
        );
    }
    let log = ui
        .ws
        .plans
        .read_log(id, &node.id, LogQuery::new().tail(LOG_TAIL))
        .await
        .unwrap_or_else(|e| format!("(the log cannot be read: {e})"));
    let _ = write!(
        out,
        "<h2>Log (last {LOG_TAIL} lines)</h2><pre class=\"log\" id=\"log\">{}</pre>",
        esc(&log)
    );
    Ok(Some(out))
}

/// Approve / reject (with a reason) / answer controls for a job waiting for a person.
fn controls(id: &PlanId, job: &str, waiting_for: WaitingFor) -> String {
    let job = esc(job);
    match waiting_for {
        WaitingFor::Approval => format!(
            "<div class=\"actions\" data-plan=\"{id}\" data-job=\"{job}\">\
             <button class=\"approve\" data-act=\"approve\">Approve</button>\
             <input class=\"reason\" placeholder=\"reason to reject\">\
             <button class=\"reject\" data-act=\"reject\">Reject</button><span class=\"msg\"></span></div>"
        ),
        WaitingFor::Input => format!(
            "<div class=\"actions\" data-plan=\"{id}\" data-job=\"{job}\">\
             <input class=\"answer\" placeholder=\"your answer\">\
             <button data-act=\"answer\">Answer</button><span class=\"msg\"></span></div>"
        ),
        _ => String::new(),
    }
}

/// The jobs of every unfinished plan that wait for a person (or a timer), with controls.
pub async fn waiting(ui: &Ui) -> CliResult<String> {
    let listing = ui.ws.plans.list().await?;
    let t = ui.token();
    let mut rows = String::new();
    let mut count = 0;
    for summary in &listing.plans {
        if summary.status.is_terminal() || summary.status == PlanStatus::Archived {
            continue;
        }
        let Ok(record) = ui.ws.plans.load(&summary.plan_id).await else {
            continue;
        };
        let id = &summary.plan_id;
        for (n, node) in record.state.nodes.iter().enumerate() {
            let Some(w) = &node.extra.waiting else {
                continue;
            };
            count += 1;
            let label = view::label_of(&record, n);
            let _ = write!(
                rows,
                "<tr data-plan=\"{id}\" data-node=\"{n}\"><td><a href=\"/plans/{id}?token={t}\">{plan}</a></td>\
                 <td><a href=\"/plans/{id}/jobs/{n}?token={t}\">{label}</a></td><td>{what}</td>\
                 <td>{since}</td><td>{prompt}</td><td>{controls}</td></tr>",
                plan = esc(&record.spec.name),
                label = esc(label),
                what = esc(w.waiting_for.as_str()),
                since = time(Some(w.since)),
                prompt = esc(w.prompt.as_deref().unwrap_or("")),
                controls = controls(id, label, w.waiting_for),
            );
        }
    }
    Ok(format!(
        "<h1>Waiting</h1><p class=\"note\">{count} job(s) wait.</p>\
         <table class=\"waiting\"><thead><tr><th>Plan</th><th>Job</th><th>For</th><th>Since</th>\
         <th>Question</th><th></th></tr></thead><tbody>{rows}</tbody></table>"
    ))
}

/// The sessions, newest first.
pub async fn sessions(ui: &Ui) -> CliResult<String> {
    let t = ui.token();
    let mut list = ui.sessions().await?.list().await?;
    list.sort_by_key(|s| std::cmp::Reverse(s.created_at));
    let mut out = String::from(
        "<h1>Sessions</h1><table class=\"sessions\"><thead><tr><th>Session</th><th>Agent</th>\
         <th>Turns</th><th>State</th><th>Created</th></tr></thead><tbody>",
    );
    for s in &list {
        let _ = write!(
            out,
            "<tr><td><a class=\"mono\" href=\"/sessions/{id}?token={t}\">{id}</a></td><td>{agent}</td>\
             <td>{turns}</td><td>{state}</td><td>{created}</td></tr>",
            id = esc(&s.id),
            agent = esc(&s.agent),
            turns = s.turns.len(),
            state = badge(if s.closed { "closed" } else { "open" }),
            created = time(Some(s.created_at)),
        );
    }
    out.push_str("</tbody></table>");
    if list.is_empty() {
        out.push_str("<p class=\"note\">No sessions (orchestrator session new).</p>");
    }
    Ok(out)
}

/// A turn's usage, from the metrics its CLI reported.
fn turn_usage(metrics: Option<&Value>) -> Usage {
    let mut used = Usage::default();
    if let Some(m) = metrics {
        used.add_metrics(m);
    }
    used
}

/// A session: its turns with prompts, replies and checkpoints.
pub async fn session(ui: &Ui, given: &str) -> CliResult<String> {
    let s = ui.sessions().await?.get(given).await?;
    let mut out = format!(
        "<p class=\"crumbs\"><a href=\"/sessions?token={t}\">Sessions</a> /</p>\
         <h1 class=\"mono\">{id}</h1><p class=\"facts\">agent {agent} · model {model} · {dir} · {state}</p>",
        t = ui.token(),
        id = esc(&s.id),
        agent = esc(&s.agent),
        model = esc(s.model.as_deref().unwrap_or("default")),
        dir = esc(&s.dir.display().to_string()),
        state = badge(if s.closed { "closed" } else { "open" }),
    );
    for turn in &s.turns {
        let _ = write!(
            out,
            "<section class=\"turn\"><h3>Turn {n} {status}</h3><p class=\"prompt\">{prompt}</p>\
             {reply}{error}<p class=\"facts\">checkpoint <span class=\"mono\">{cp}</span> · {used}</p></section>",
            n = turn.turn,
            status = badge(&name_of(&turn.status)),
            prompt = esc(&turn.prompt),
            reply = turn
                .reply
                .as_deref()
                .map_or(String::new(), |r| format!("<pre class=\"output\">{}</pre>", esc(r))),
            error = turn
                .error
                .as_deref()
                .map_or(String::new(), |e| format!("<p class=\"err\">{}</p>", esc(e))),
            cp = turn.checkpoint.as_deref().map_or("–".to_owned(), |commit| format!(
                "{} ({})",
                esc(&orchestrator_agents::session::checkpoint_ref(&s.id, turn.turn)),
                esc(crate::report::short(commit))
            )),
            used = usage(&turn_usage(turn.usage.as_ref())),
        );
    }
    Ok(out)
}
