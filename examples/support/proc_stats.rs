//! What the benchmark examples read about their own process (Linux: `/proc/self`) and their
//! `--name value` arguments; shared through `#[path]` by the examples that need it.

/// `(rss_kb, threads)` of this process, from `/proc/self/status` (0 elsewhere).
pub fn rss_and_threads() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("Threads:"))
}

/// The number after `name` in `args`, if there is one.
pub fn arg(args: &[String], name: &str) -> Option<u64> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}
