//! A supervised process printing 200 MB costs the supervisor bounded memory, and every byte of
//! it reaches the log's writer (issue 12, item 2).
//!
//! The supervising side runs in a child copy of this test binary (the ignored test
//! `child_supervises_a_big_printer`), so its peak memory (`VmHWM` in `/proc/<pid>/status`,
//! sampled until it exits) is its own and not that of other tests. Linux only.

#![cfg(target_os = "linux")]

use std::fs::File;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orchestrator_agents::{Invocation, Supervisor};
use orchestrator_core::runner::{LogSink, LogWriter};
use tokio_util::sync::CancellationToken;

/// Set in the child: which output to produce (`lines` or `one-line`).
const KIND_VAR: &str = "OUTPUT_MEMORY_KIND";
/// Set in the child: the file the log is written to.
const LOG_VAR: &str = "OUTPUT_MEMORY_LOG";

const OUTPUT_BYTES: u64 = 200_000_000;

/// Far below the output's size, far above what streaming needs (a few MB).
const LIMIT_KB: u64 = 100 * 1024;

fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs the child test with `kind`, writing the log to `log`; returns its peak memory in kB.
fn supervise_in_child(kind: &str, log: &Path) -> u64 {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "child_supervises_a_big_printer",
            "--ignored",
            "--test-threads=1",
        ])
        .env(KIND_VAR, kind)
        .env(LOG_VAR, log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child test");
    let pid = child.id();
    let start = Instant::now();
    let mut peak = 0;
    let status = loop {
        if let Some(kb) = vm_hwm_kb(pid) {
            peak = peak.max(kb);
        }
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child test did not end within 5 minutes");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.success(), "the child test failed: {status}");
    peak
}

/// A log writer appending every chunk to `path`.
fn file_writer(path: &Path) -> LogWriter {
    let file = Arc::new(Mutex::new(File::create(path).expect("log file")));
    Arc::new(
        move |text: String| -> Pin<Box<dyn Future<Output = ()> + Send>> {
            let file = file.clone();
            Box::pin(async move {
                let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
                file.write_all(text.as_bytes()).expect("write log");
            })
        },
    )
}

#[test]
#[ignore = "run by the tests below, in a process of its own"]
fn child_supervises_a_big_printer() {
    let (Ok(kind), Some(log)) = (std::env::var(KIND_VAR), std::env::var_os(LOG_VAR)) else {
        return;
    };
    let script = match kind.as_str() {
        "lines" => format!("head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' x | fold -w 100"),
        _ => format!("head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' x"),
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let log_path = PathBuf::from(log);
        let sink = LogSink::detached().with_writer(file_writer(&log_path));
        let run = Invocation::new("sh", std::env::temp_dir()).args(["-c", &script]);
        let outcome = Supervisor::new()
            .run(&run, &CancellationToken::new(), &sink)
            .await
            .expect("run");
        assert!(outcome.success(), "{outcome:?}");
        sink.flush().await;
    });
}

#[test]
fn supervising_200_mb_of_lines_costs_bounded_memory_and_logs_every_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("work.log");
    let peak = supervise_in_child("lines", &log);
    assert!(
        peak < LIMIT_KB,
        "supervising {OUTPUT_BYTES} bytes of output peaked at {peak} kB"
    );
    let expected = "x".repeat(100);
    let mut lines = 0u64;
    for line in BufReader::new(File::open(&log).expect("log")).lines() {
        let line = line.expect("line");
        assert_eq!(line, expected, "line {lines} of the log");
        lines += 1;
    }
    assert_eq!(lines, OUTPUT_BYTES / 100, "lines in the log");
}

#[test]
fn supervising_200_mb_without_a_newline_costs_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("work.log");
    let peak = supervise_in_child("one-line", &log);
    assert!(peak < LIMIT_KB, "peaked at {peak} kB");
    let text = std::fs::read_to_string(&log).expect("log");
    let kept = 64 * 1024;
    assert_eq!(
        text,
        format!(
            "{} … [{} more bytes cut]\n",
            "x".repeat(kept),
            OUTPUT_BYTES - kept as u64
        )
    );
}
