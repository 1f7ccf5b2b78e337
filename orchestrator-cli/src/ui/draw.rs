//! The pictures of a plan, drawn here as SVG so the page needs no script library: its DAG
//! (layered left to right, each job a box coloured by its status) and its timeline (a Gantt
//! chart, one bar per phase of each attempt, from the stored phase records).

use std::collections::HashMap;
use std::fmt::Write;

use orchestrator_core::view::{PlanView, TimelineEntry};

use super::html::{esc, name_of};

const BOX_W: usize = 176;
const BOX_H: usize = 30;
const COL_GAP: usize = 64;
const ROW_GAP: usize = 12;
const PAD: usize = 10;

/// The most nodes drawn: past that the picture is too large for a browser to be of use.
pub const MAX_DRAWN: usize = 5000;

/// Where each node goes: its column (longest path from a root) and its row in that column.
pub struct Layout {
    /// Column of each node.
    pub col: Vec<usize>,
    /// Row of each node in its column.
    pub row: Vec<usize>,
    /// Rows of the fullest column.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
}

/// Lays the plan's graph out in layers: a node's column is one past its deepest dependency's;
/// within a column nodes are ordered by where their dependencies are (fewer crossings).
pub fn layout(view: &PlanView) -> Option<Layout> {
    let graph = view.graph().ok()?;
    let n = graph.node_count();
    let mut col = vec![0usize; n];
    for &v in graph.topological_order() {
        col[v] = graph.dependencies(v).map(|d| col[d] + 1).max().unwrap_or(0);
    }
    let cols = col.iter().max().map_or(0, |c| c + 1);
    let mut by_col: Vec<Vec<usize>> = vec![Vec::new(); cols];
    for (v, &c) in col.iter().enumerate() {
        by_col[c].push(v);
    }
    let mut row = vec![0usize; n];
    for members in &mut by_col {
        // The mean row of a node's dependencies (already placed: they are in earlier columns).
        let key = |v: usize| {
            let (sum, count) = graph
                .dependencies(v)
                .fold((0usize, 0usize), |(s, c), d| (s + row[d], c + 1));
            if count == 0 {
                v as f64
            } else {
                sum as f64 / count as f64
            }
        };
        let mut keyed: Vec<(f64, usize)> = members.iter().map(|&v| (key(v), v)).collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (r, (_, v)) in keyed.into_iter().enumerate() {
            row[v] = r;
        }
    }
    let rows = by_col.iter().map(Vec::len).max().unwrap_or(0);
    Some(Layout {
        col,
        row,
        rows,
        cols,
    })
}

fn node_xy(l: &Layout, v: usize) -> (usize, usize) {
    (
        PAD + l.col[v] * (BOX_W + COL_GAP),
        PAD + l.row[v] * (BOX_H + ROW_GAP),
    )
}

/// The DAG as SVG: `<g class="node st-<status>" data-node="<index>">` per node, with a link to
/// the job's page, and one path per dependency.
pub fn dag(view: &PlanView, href: impl Fn(usize) -> String) -> String {
    if view.state.nodes.len() > MAX_DRAWN {
        return format!(
            "<p class=\"note\">{} jobs are more than a picture can show ({MAX_DRAWN} at most); \
             the jobs are listed below.</p>",
            view.state.nodes.len()
        );
    }
    let Some(l) = layout(view) else {
        return "<p class=\"note\">The plan's graph cannot be drawn (its spec does not validate).</p>"
            .to_owned();
    };
    let Ok(graph) = view.graph() else {
        return String::new();
    };
    let width = PAD * 2 + l.cols * (BOX_W + COL_GAP);
    let height = PAD * 2 + l.rows.max(1) * (BOX_H + ROW_GAP);
    let mut svg = String::with_capacity(256 * graph.node_count());
    let _ = write!(
        svg,
        "<svg class=\"dag\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\"><g class=\"edges\">"
    );
    for v in 0..graph.node_count() {
        let (x2, y2) = node_xy(&l, v);
        for d in graph.dependencies(v) {
            let (x1, y1) = node_xy(&l, d);
            let (sx, sy, ex, ey) = (x1 + BOX_W, y1 + BOX_H / 2, x2, y2 + BOX_H / 2);
            let mid = (sx + ex) / 2;
            let _ = write!(
                svg,
                "<path d=\"M{sx},{sy} C{mid},{sy} {mid},{ey} {ex},{ey}\"/>"
            );
        }
    }
    svg.push_str("</g>");
    for (v, node) in view.state.nodes.iter().enumerate() {
        let (x, y) = node_xy(&l, v);
        let label = view.label(v);
        let sub = view
            .spec
            .jobs
            .get(v)
            .and_then(|j| j.extra.parent.as_deref())
            .map_or(String::new(), |p| format!(" (sub-job of {p})"));
        let status = node.status.as_str();
        let short: String = if label.chars().count() > 24 {
            label.chars().take(23).chain(['…']).collect()
        } else {
            label.to_owned()
        };
        let _ = write!(
            svg,
            "<a href=\"{href}\"><g class=\"node st-{status}{kind}\" data-node=\"{v}\">\
             <title>{title}{sub}: {status}</title>\
             <rect x=\"{x}\" y=\"{y}\" width=\"{BOX_W}\" height=\"{BOX_H}\" rx=\"5\"/>\
             <text x=\"{tx}\" y=\"{ty}\">{text}</text></g></a>",
            href = esc(&href(v)),
            kind = if sub.is_empty() { "" } else { " sub" },
            title = esc(label),
            sub = esc(&sub),
            tx = x + 8,
            ty = y + BOX_H / 2 + 4,
            text = esc(&short),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The timeline as a Gantt chart in SVG: a row per node that ran, a bar per phase of each
/// attempt (`<rect class="bar ph-<phase> ps-<status>">`), time from the first phase's start.
/// A phase still running reaches `now`.
pub fn gantt(entries: &[TimelineEntry], now: u64) -> String {
    if entries.is_empty() {
        return "<p class=\"note\">No phase has run yet.</p>".to_owned();
    }
    let start = entries.iter().map(|e| e.started_at).min().unwrap_or(now);
    let end = entries
        .iter()
        .map(|e| e.ended_at.unwrap_or(now).max(e.started_at))
        .max()
        .unwrap_or(now);
    let span = (end.saturating_sub(start)).max(1) as f64;
    // A row per node, in the order the entries first name it; an entry's row by a map, not a
    // scan of the rows (a plan of thousands of jobs has tens of thousands of entries).
    let mut rows: Vec<&str> = Vec::new();
    let mut row_of: HashMap<&str, usize> = HashMap::new();
    for e in entries {
        row_of.entry(&e.producer_id).or_insert_with(|| {
            rows.push(&e.producer_id);
            rows.len() - 1
        });
    }
    const LABEL_W: usize = 200;
    const CHART_W: usize = 800;
    const ROW_H: usize = 20;
    let (width, height) = (
        LABEL_W + CHART_W + PAD * 2,
        PAD * 2 + (rows.len() + 1) * ROW_H,
    );
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg class=\"gantt\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\">"
    );
    let _ = write!(
        svg,
        "<text class=\"axis\" x=\"{x}\" y=\"{y}\">0 s</text>\
         <text class=\"axis\" x=\"{x2}\" y=\"{y}\" text-anchor=\"end\">{secs:.1} s</text>",
        x = PAD + LABEL_W,
        x2 = PAD + LABEL_W + CHART_W,
        y = PAD + 12,
        secs = span / 1000.0
    );
    // The legend: the phases in the order they run.
    let mut lx = PAD + LABEL_W + 60;
    for phase in orchestrator_core::Phase::ALL {
        let name = phase.as_str();
        let _ = write!(
            svg,
            "<rect class=\"key ph-{name}\" x=\"{lx}\" y=\"{ky}\" width=\"10\" height=\"10\"/>\
             <text class=\"axis\" x=\"{tx}\" y=\"{ty}\">{name}</text>",
            ky = PAD + 3,
            tx = lx + 13,
            ty = PAD + 12,
        );
        lx += 18 + name.len() * 7;
    }
    for (r, label) in rows.iter().enumerate() {
        let y = PAD + (r + 1) * ROW_H;
        let _ = write!(
            svg,
            "<text class=\"row\" x=\"{PAD}\" y=\"{ty}\">{}</text>",
            esc(label),
            ty = y + 14
        );
    }
    for e in entries {
        let Some(&r) = row_of.get(e.producer_id.as_str()) else {
            continue;
        };
        let y = PAD + (r + 1) * ROW_H + 3;
        let from = (e.started_at.saturating_sub(start)) as f64 / span;
        let to = (e
            .ended_at
            .unwrap_or(now)
            .max(e.started_at)
            .saturating_sub(start)) as f64
            / span;
        let x = PAD as f64 + LABEL_W as f64 + from * CHART_W as f64;
        let w = ((to - from) * CHART_W as f64).max(2.0);
        let ms = e.ended_at.unwrap_or(now).saturating_sub(e.started_at);
        let _ = write!(
            svg,
            "<rect class=\"bar ph-{phase} ps-{status}\" data-job=\"{job}\" data-phase=\"{phase}\" \
             x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"{h}\"><title>{job} attempt \
             {attempt}: {phase} {status} ({ms} ms)</title></rect>",
            phase = e.phase.as_str(),
            status = name_of(&e.status),
            job = esc(&e.producer_id),
            attempt = e.attempt,
            h = ROW_H - 6,
        );
    }
    svg.push_str("</svg>");
    svg
}
