//! HTML pieces: escaping, the page frame, small formatting helpers.

use std::fmt::Write;

/// `text` safe inside HTML text and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What a page is about, for its live updates: the page's script listens to the event stream
/// for this plan (or for every plan, or the sessions).
pub enum Live<'a> {
    /// Nothing changes on it.
    None,
    /// Every plan (the plans and waiting pages).
    Plans,
    /// One plan (its page and its jobs' pages).
    Plan(&'a str),
    /// The sessions.
    Sessions,
}

/// A whole page: the frame (title, navigation, assets, the token for the script) around `body`.
pub fn page(title: &str, token: &str, live: Live<'_>, body: &str) -> String {
    let live = match live {
        Live::None => String::new(),
        Live::Plans => "plans".to_owned(),
        Live::Plan(id) => format!("plan:{id}"),
        Live::Sessions => "sessions".to_owned(),
    };
    let t = esc(token);
    let mut out = String::with_capacity(body.len() + 1024);
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"token\" content=\"{t}\"><meta name=\"live\" content=\"{live}\">\
         <title>{title} · orchestrator</title>\
         <link rel=\"stylesheet\" href=\"/assets/app.css?token={t}\"></head><body>\
         <nav><a class=\"brand\" href=\"/?token={t}\">orchestrator</a>\
         <a href=\"/?token={t}\">Plans</a><a href=\"/waiting?token={t}\">Waiting</a>\
         <a href=\"/sessions?token={t}\">Sessions</a><span id=\"live\" class=\"live\"></span></nav>\
         <main>{body}</main><script src=\"/assets/app.js?token={t}\"></script></body></html>",
        title = esc(title),
    );
    out
}

/// The name a value has in the JSON documents (a status enum's `snake_case` name).
pub fn name_of<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// A status badge.
pub fn badge(status: &str) -> String {
    format!("<span class=\"badge st-{s}\">{s}</span>", s = esc(status))
}

/// A time (ms since the epoch) as UTC, or a dash.
pub fn time(ms: Option<u64>) -> String {
    ms.map_or("–".to_owned(), crate::report::utc_time)
}

/// A duration in ms for people.
pub fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// Usage (tokens, cost) for people.
pub fn usage(used: &orchestrator_core::usage::Usage) -> String {
    let mut parts = Vec::new();
    if used.input_tokens > 0 {
        parts.push(format!("{} in", used.input_tokens));
    }
    if used.output_tokens > 0 {
        parts.push(format!("{} out", used.output_tokens));
    }
    if used.cost_usd > 0.0 {
        parts.push(format!("${:.4}", used.cost_usd));
    }
    if used.premium_requests > 0.0 {
        parts.push(format!("{:.0} premium", used.premium_requests));
    }
    if parts.is_empty() {
        "–".to_owned()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert!(page("<t>", "tok", Live::None, "").contains("&lt;t&gt; · orchestrator"));
        assert_eq!(duration(1500), "1.5 s");
        assert_eq!(
            usage(&orchestrator_core::usage::Usage {
                input_tokens: 10,
                cost_usd: 0.5,
                ..Default::default()
            }),
            "10 in, $0.5000"
        );
    }
}
