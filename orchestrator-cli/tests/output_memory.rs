//! Memory does not grow with a job's output (issue 12, item 2): `orchestrator run` of a job
//! printing 200 MB, and `orchestrator logs` of a 200 MB log, each stay far below the output's
//! size in peak resident memory (before the fix: about 400 MB each).
//!
//! Peak memory is the child's `VmHWM` from `/proc/<pid>/status`, sampled until it exits (a
//! high-water mark, so sampling misses nothing but the last few milliseconds), hence Linux only.

#![cfg(target_os = "linux")]

mod common;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Repo;
use orchestrator_testkit::fixtures::job;
use serde_json::{json, Value};

/// The goal is 150 MB for any output size; a streamed run needs a few tens of MB.
const LIMIT_KB: u64 = 150 * 1024;

/// Bytes of output of the big job.
const OUTPUT_BYTES: u64 = 200_000_000;

/// The peak resident memory of process `pid` so far, in kB.
fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `cmd` to its end with stdout and stderr in files of `dir` (named `<name>.out` and
/// `<name>.err`), sampling its peak memory; returns the exit code, the peak in kB and the
/// stdout file.
fn run_sampled(mut cmd: Command, dir: &Path, name: &str) -> (i32, u64, PathBuf) {
    let out = dir.join(format!("{name}.out"));
    let err = dir.join(format!("{name}.err"));
    let mut child = cmd
        .stdout(Stdio::from(File::create(&out).expect("stdout file")))
        .stderr(Stdio::from(File::create(&err).expect("stderr file")))
        .spawn()
        .expect("spawn orchestrator");
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
            panic!("`{name}` did not end within 5 minutes");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let code = status.code().unwrap_or(-1);
    if code != 0 {
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        panic!("`{name}` exited with {code}:\n{stderr}");
    }
    (code, peak, out)
}

/// One job printing `work`'s output, then changing a file so it has something to commit.
fn big_plan(repo: &Repo, work: &str) -> PathBuf {
    let work = format!("{work}; echo done > done.txt");
    repo.plan(
        "big.json",
        &json!({"name": "big", "jobs": [job("big-output", &work, &[])]}),
    )
}

fn run_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("run output")).expect("json")
}

/// Lines of a file, streamed: (count, whether every line is exactly `expected`).
fn lines_are(path: &Path, expected: &str) -> (usize, bool) {
    let reader = BufReader::new(File::open(path).expect("open"));
    let mut count = 0;
    let mut all = true;
    for line in reader.lines() {
        let line = line.expect("line");
        all &= line == expected;
        count += 1;
    }
    (count, all)
}

#[test]
fn run_and_logs_of_a_job_printing_200_mb_stay_small() {
    let repo = Repo::new();
    let plan = big_plan(
        &repo,
        &format!("head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' x | fold -w 100"),
    );
    let mut run = repo.command(&["run"]);
    run.arg(&plan).arg("--json");
    let (_, peak, out) = run_sampled(run, &repo.scratch, "run");
    let doc = run_json(&out);
    assert_eq!(doc["status"], "succeeded", "{doc:#}");
    assert!(
        peak < LIMIT_KB,
        "`orchestrator run` of a job printing {OUTPUT_BYTES} bytes peaked at {peak} kB"
    );

    // What the store keeps of the log is the end of the output, in whole lines (the file
    // store rotates a phase log at its size cap), and reading it back streams.
    let id = doc["planId"].as_str().expect("plan id").to_owned();
    let (_, peak, out) = run_sampled(
        repo.command(&["logs", &id, "big-output", "--phase", "work"]),
        &repo.scratch,
        "logs",
    );
    assert!(peak < LIMIT_KB, "`orchestrator logs` peaked at {peak} kB");
    let (count, all_whole) = lines_are(&out, &"x".repeat(100));
    assert!(count > 1000, "{count} lines of log");
    assert!(all_whole, "the log holds cut or foreign lines");
}

#[test]
fn a_job_printing_200_mb_without_a_newline_stays_small() {
    let repo = Repo::new();
    let plan = big_plan(
        &repo,
        &format!("head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' x"),
    );
    let mut run = repo.command(&["run"]);
    run.arg(&plan).arg("--json");
    let (_, peak, out) = run_sampled(run, &repo.scratch, "run");
    let doc = run_json(&out);
    assert_eq!(doc["status"], "succeeded", "{doc:#}");
    assert!(peak < LIMIT_KB, "`orchestrator run` peaked at {peak} kB");
    let id = doc["planId"].as_str().expect("plan id").to_owned();
    let logs = repo.run(&["logs", &id, "big-output", "--phase", "work"]);
    logs.expect_code(0);
    // One line, cut at the line cap, saying how much was dropped.
    let cut = OUTPUT_BYTES - 64 * 1024;
    assert!(
        logs.stdout
            .ends_with(&format!(" … [{cut} more bytes cut]\n")),
        "{} bytes of log",
        logs.stdout.len()
    );
    assert_eq!(logs.stdout.lines().count(), 1);
}

#[test]
fn logs_streams_a_200_mb_log_whole_and_its_tail() {
    let repo = Repo::new();
    let plan = big_plan(&repo, "echo small");
    let doc = repo.run(&["run", plan.to_str().expect("utf-8"), "--json"]);
    doc.expect_code(0);
    let doc = doc.json();
    let id = doc["planId"].as_str().expect("plan id").to_owned();
    let node = doc["jobs"][0]["nodeId"]
        .as_str()
        .expect("node id")
        .to_owned();
    // A 200 MB phase log, as a store without a size cap (or an older version) leaves it.
    let log = repo
        .dir
        .join(".orchestrator/plans")
        .join(&id)
        .join("logs")
        .join(&node)
        .join("1")
        .join("work.log");
    assert!(log.is_file(), "no log at {}", log.display());
    {
        let mut file = std::io::BufWriter::new(File::create(&log).expect("log"));
        let line = format!("{}\n", "y".repeat(99));
        for _ in 0..OUTPUT_BYTES / 100 {
            file.write_all(line.as_bytes()).expect("write");
        }
        file.write_all(b"last line without a newline")
            .expect("write");
    }
    let (_, peak, out) = run_sampled(
        repo.command(&["logs", &id, "big-output", "--phase", "work"]),
        &repo.scratch,
        "logs",
    );
    assert!(
        peak < LIMIT_KB,
        "`orchestrator logs` of a 200 MB log peaked at {peak} kB"
    );
    // Whole, plus the newline `logs` adds after a last line without one.
    let len = std::fs::metadata(&out).expect("output").len();
    assert_eq!(
        len,
        OUTPUT_BYTES + "last line without a newline\n".len() as u64
    );

    let (_, peak, out) = run_sampled(
        repo.command(&["logs", &id, "big-output", "--phase", "work", "--tail", "2"]),
        &repo.scratch,
        "tail",
    );
    assert!(
        peak < LIMIT_KB,
        "`orchestrator logs --tail` peaked at {peak} kB"
    );
    assert_eq!(
        std::fs::read_to_string(&out).expect("tail"),
        format!("{}\nlast line without a newline\n", "y".repeat(99))
    );
}
