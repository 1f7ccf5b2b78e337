//! One plan across several processes on PostgreSQL (SPEC §16), through the CLI binary: a
//! coordinator (`run --database URL --remote GIT_URL`) and workers (`orchestrator worker`) as
//! separate processes, git through a bare repository. The faults of issue 17: a worker
//! killed (`kill -9`) in the middle, the coordinator killed and taken over by `resume`, two
//! coordinators racing for that take-over, PostgreSQL restarted while jobs run, and a worker
//! stalled (SIGSTOP) past its lease — each ending with the tree a single-machine run of the
//! same plan makes, and no job committed twice onto the target.
//!
//! Leases last 1.5 s here (`ORCHESTRATOR_LEASE_TIMEOUT`). Each test has a database of its own
//! and they run one at a time (the restart would cut the others off); without a server they
//! say so and pass.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::database::Database;
use common::{Repo, BIN};
use orchestrator_testkit::fixtures::{isolate, job, job_doc};
use serde_json::{json, Value};

/// How long a lease lasts without renewal in these tests, in seconds.
const LEASE: &str = "1.5";

/// One test at a time: they share the server (which one of them restarts) and the 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// A database, a bare remote, a repository and the workers started on them.
struct Cluster {
    db: Database,
    repo: Repo,
    remote: String,
    workers: Vec<Child>,
}

impl Cluster {
    fn new() -> Option<Cluster> {
        let db = Database::create()?;
        let repo = Repo::new();
        let bare = repo.scratch.join("remote.git");
        let init = Command::new("git")
            .args(["init", "--quiet", "--bare"])
            .arg(&bare)
            .status()
            .expect("git init");
        assert!(init.success());
        Some(Cluster {
            db,
            remote: format!("file://{}", bare.display()),
            repo,
            workers: Vec::new(),
        })
    }

    fn url(&self) -> String {
        self.db.url()
    }

    /// The orchestrator command with the test's lease, on this cluster's repository.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.repo.command(args);
        cmd.env("ORCHESTRATOR_LEASE_TIMEOUT", LEASE);
        cmd
    }

    /// Starts a worker (1 slot) named `name`; its folders under the scratch folder.
    fn start_worker(&mut self, name: &str) -> u32 {
        self.start_worker_with(name, &[])
    }

    /// [`Cluster::start_worker`] with more arguments.
    fn start_worker_with(&mut self, name: &str, more: &[&str]) -> u32 {
        self.start_worker_as(Command::new(BIN), name, more)
    }

    /// [`Cluster::start_worker_with`], the worker started by `cmd` (the binary, or a wrapper
    /// running it).
    fn start_worker_as(&mut self, mut cmd: Command, name: &str, more: &[&str]) -> u32 {
        isolate(&mut cmd)
            .args([
                "worker",
                "--database",
                &self.url(),
                "--slots",
                "1",
                "--name",
                name,
            ])
            .args(more)
            .arg("--dir")
            .arg(self.repo.scratch.join("workers"))
            .env("ORCHESTRATOR_LEASE_TIMEOUT", LEASE)
            .env("HOME", &self.repo.home)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // A group of its own: a worker started through a wrapper (`faketime` forks it and
        // waits) is stopped with the wrapper when the cluster is dropped.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().expect("spawn worker");
        let pid = child.id();
        self.workers.push(child);
        pid
    }

    /// Starts the coordinator of `plan` in the background.
    fn start_run(&self, plan: &Path) -> Child {
        self.command(&[
            "run",
            path(plan),
            "--database",
            &self.url(),
            "--remote",
            &self.remote,
            "--json",
            "-q",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn run")
    }

    /// `status --json` of the latest plan in the database (`None` before there is one).
    fn status(&self) -> Option<Value> {
        let out = self
            .command(&["status", "--json", "--database", &self.url()])
            .output()
            .expect("status");
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).expect("status json"))
    }

    /// Waits (up to 60 s) until the latest plan's status satisfies `ok`.
    fn wait_for(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            if let Some(doc) = self.status() {
                if ok(&doc) {
                    return doc;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// One row of the work queue's items: `SELECT <what> FROM work_items WHERE <filter>`.
    fn items(&self, what: &str, filter: &str) -> Vec<String> {
        let out = Command::new("psql")
            .args([&self.url(), "-XAtq", "-c"])
            .arg(format!(
                "SELECT {what} FROM orchestrator.work_items WHERE {filter} ORDER BY id"
            ))
            .output()
            .expect("psql");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", w.id())])
                .stderr(Stdio::null())
                .status();
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The 40-job plan: 10 roots writing a file each, 20 jobs each combining two roots, 10 leaves
/// each combining two of those; every job sleeps a little so that faults land mid-run.
fn forty_jobs(dir: &Path, sleep: &str) -> PathBuf {
    forty_jobs_with_slow(dir, sleep, "")
}

/// [`forty_jobs`] with job `slow` sleeping 10 s instead (a job a fault surely lands in).
fn forty_jobs_with_slow(dir: &Path, sleep: &str, slow: &str) -> PathBuf {
    let sleep_of = |id: &str| if id == slow { "10" } else { sleep };
    let mut jobs = Vec::new();
    for i in 0..10 {
        jobs.push(job(
            &format!("root-{i}"),
            &format!(
                "sleep {}; echo root {i} > root-{i}.txt",
                sleep_of(&format!("root-{i}"))
            ),
            &[],
        ));
    }
    for i in 0..20 {
        let (a, b) = (format!("root-{}", i % 10), format!("root-{}", (i + 3) % 10));
        let id = format!("mid-{i}");
        let work = format!("sleep {}; cat {a}.txt {b}.txt > mid-{i}.txt", sleep_of(&id));
        jobs.push(job(&id, &work, &[&a, &b]));
    }
    for i in 0..10 {
        let (a, b) = (format!("mid-{i}"), format!("mid-{}", i + 10));
        let work = format!("sleep {sleep}; cat {a}.txt {b}.txt | wc -l > leaf-{i}.txt");
        jobs.push(job(&format!("leaf-{i}"), &work, &[&a, &b]));
    }
    let file = dir.join("forty.json");
    let plan = json!({"name": "forty", "targetBranch": "result", "maxParallel": 8, "jobs": jobs});
    std::fs::write(&file, plan.to_string()).expect("write plan");
    file
}

/// The tree the plan makes on one machine, in a copy of `repo`.
fn single_machine_tree(repo: &Repo, plan: &Path) -> String {
    let local = Repo::copy_of(&repo.dir);
    let run = local.run(&["run", path(plan), "-q"]);
    assert_eq!(run.code, 0, "single-machine run: {}", run.stderr);
    local.tree_of("result")
}

fn succeeded(doc: &Value) -> usize {
    doc["jobs"].as_array().map_or(0, |jobs| {
        jobs.iter().filter(|j| j["status"] == "succeeded").count()
    })
}

/// How many jobs of the plan took more than one attempt.
fn rerun_jobs(doc: &Value) -> usize {
    doc["jobs"].as_array().map_or(0, |jobs| {
        jobs.iter()
            .filter(|j| j["attempts"].as_u64() > Some(1))
            .count()
    })
}

fn finish(run: Child) -> (i32, String, String) {
    let out = run.wait_with_output().expect("wait run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill {sig} {pid}");
}

/// Whether process `pid` has exited (gone, or a zombie its parent has not reaped yet).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// The processes whose command line contains `pattern` (`pgrep -f`).
fn pids_of(pattern: &str) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Starts the coordinator of `plan` and kills it (`kill -9`) once 5 jobs are done; returns
/// the plan's id.
fn coordinator_killed_midway(cluster: &Cluster, plan: &Path) -> String {
    let mut run = cluster.start_run(plan);
    let doc = cluster.wait_for("5 jobs done", |d| succeeded(d) >= 5);
    run.kill().expect("kill -9 the coordinator");
    let _ = run.wait();
    doc["planId"].as_str().expect("planId").to_owned()
}

/// Waits (up to 30 s) for an item of `node` (or of any job: `None`) to be claimed and returns
/// the worker holding it.
fn a_claiming_worker(cluster: &Cluster, node: Option<&str>) -> String {
    let filter = match node {
        Some(node) => format!("state = 'claimed' AND node_id = '{node}'"),
        None => "state = 'claimed'".to_owned(),
    };
    let start = Instant::now();
    loop {
        if let Some(w) = cluster.items("worker", &filter).into_iter().next() {
            return w;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no job was claimed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_worker_killed_mid_run_loses_nothing_and_the_tree_is_a_single_machine_runs() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut cluster) = Cluster::new() else {
        return;
    };
    let plan = forty_jobs_with_slow(&cluster.repo.scratch, "0.3", "mid-4");
    let expected = single_machine_tree(&cluster.repo, &plan);
    let pids: Vec<(String, u32)> = (0..3)
        .map(|i| format!("w{i}"))
        .map(|n| (n.clone(), cluster.start_worker(&n)))
        .collect();
    let run = cluster.start_run(&plan);
    // Killed while it holds the slow job, so that one is lost for sure.
    let doc = cluster.wait_for("the slow job running", |d| {
        job_doc(d, "mid-4")["status"] == "running"
    });
    let slow = job_doc(&doc, "mid-4")["nodeId"]
        .as_str()
        .expect("nodeId")
        .to_owned();
    let victim = a_claiming_worker(&cluster, Some(&slow));
    let pid = pids
        .iter()
        .find(|(n, _)| *n == victim)
        .map(|(_, p)| *p)
        .expect("a worker of ours");
    // Its job's processes (`sleep 10`) outlive it ...
    let started = Instant::now();
    let job_processes = loop {
        let found = pids_of("sleep 10");
        if !found.is_empty() {
            break found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the slow job's processes never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let killed_at = Instant::now();
    signal(pid, "-KILL");
    // Dead (its place's lock released) before the next worker looks for a free place.
    while !exited(pid) {
        assert!(
            killed_at.elapsed() < Duration::from_secs(2),
            "kill -9 {pid}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // ... until a worker takes its folder over: it stops them, long before they would end.
    cluster.start_worker("w3");
    while job_processes
        .iter()
        .any(|p| Path::new(&format!("/proc/{p}")).exists())
    {
        assert!(
            killed_at.elapsed() < Duration::from_secs(8),
            "the dead worker's job processes were not stopped: {job_processes:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, stdout, stderr) = finish(run);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let doc: Value = serde_json::from_str(&stdout).expect("run json");
    assert_eq!(doc["status"], "succeeded");
    assert!(
        rerun_jobs(&doc) >= 1,
        "the killed worker's ({victim}) job ran again as a new attempt: {:?}",
        cluster.items(
            "state || ' ' || worker || ' ' || node_id || ' ' || attempt",
            "true"
        )
    );
    assert!(!cluster
        .items("id", &format!("state = 'expired' AND worker = '{victim}'"))
        .is_empty());
    assert_eq!(
        cluster.repo.tree_of("result"),
        expected,
        "same tree as on one machine"
    );
    // The user's checkout is untouched and nothing is left in the coordinator's repository.
    cluster.repo.assert_clean("remote run");
    // The results came in as refs of the plan's, which archiving removes.
    let id = doc["planId"].as_str().expect("planId");
    let prefix = format!("refs/orchestrator/jobs/{id}/");
    let refs = |repo: &Repo| repo.git(&["for-each-ref", "--format=%(refname)", &prefix]);
    assert_eq!(
        refs(&cluster.repo).lines().count(),
        40,
        "one result ref per job"
    );
    let archive = cluster
        .command(&["archive", id, "--database", &cluster.url()])
        .output()
        .expect("archive");
    assert!(
        archive.status.success(),
        "{}",
        String::from_utf8_lossy(&archive.stderr)
    );
    assert_eq!(
        refs(&cluster.repo),
        "",
        "archive removed the plan's job refs"
    );
}

#[test]
fn a_killed_coordinator_is_taken_over_by_resume_and_exactly_one_of_two_racers_wins() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut cluster) = Cluster::new() else {
        return;
    };
    let plan = forty_jobs(&cluster.repo.scratch, "0.2");
    let expected = single_machine_tree(&cluster.repo, &plan);
    cluster.start_worker("w0");
    cluster.start_worker("w1");
    let id = coordinator_killed_midway(&cluster, &plan);

    // Two coordinators race to take the plan over: one runs it, the other is refused.
    let url = cluster.url();
    let racer = || {
        cluster
            .command(&[
                "resume",
                &id,
                "--database",
                &url,
                "--remote",
                &cluster.remote,
                "--json",
                "-q",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn resume")
    };
    let (a, b) = (racer(), racer());
    let (a, b) = (finish(a), finish(b));
    let (winner, loser) = if a.0 == 0 { (a, b) } else { (b, a) };
    assert_eq!(
        winner.0, 0,
        "one resume finishes the plan: {}\n{}",
        winner.2, loser.2
    );
    assert_ne!(loser.0, 0, "the other does not run it too: {}", loser.1);
    assert!(
        loser.2.contains("running") || loser.2.contains("process") || loser.2.contains("lease"),
        "the loser says who holds the plan: {}",
        loser.2
    );
    let doc: Value = serde_json::from_str(&winner.1).expect("resume json");
    assert_eq!(doc["status"], "succeeded", "{doc:#}");
    assert_eq!(
        cluster.repo.tree_of("result"),
        expected,
        "same tree as on one machine"
    );
}

#[test]
fn postgres_restarted_while_jobs_run_and_the_plan_finishes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::new() else {
        return;
    };
    let Some(restart) = restart_command() else {
        eprintln!("skipped: no PostgreSQL cluster this test may restart (pg_lsclusters)");
        return;
    };
    let mut cluster = cluster;
    let plan = forty_jobs(&cluster.repo.scratch, "0.3");
    let expected = single_machine_tree(&cluster.repo, &plan);
    cluster.start_worker("w0");
    cluster.start_worker("w1");
    let run = cluster.start_run(&plan);
    cluster.wait_for("5 jobs done", |d| succeeded(d) >= 5);
    let restarted = Command::new("sh")
        .arg("-c")
        .arg(&restart)
        .status()
        .expect("restart");
    assert!(restarted.success(), "{restart}");
    let (code, stdout, stderr) = finish(run);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let doc: Value = serde_json::from_str(&stdout).expect("run json");
    assert_eq!(doc["status"], "succeeded", "{doc:#}");
    assert_eq!(
        cluster.repo.tree_of("result"),
        expected,
        "nothing committed was lost"
    );
}

/// `pg_ctlcluster <version> <name> restart` for the cluster on port 5432, when this test may
/// restart it (it runs as root or postgres and the cluster is local).
fn restart_command() -> Option<String> {
    if std::env::var("ORCHESTRATOR_TEST_DATABASE_URL").is_ok() {
        return None;
    }
    let out = Command::new("pg_lsclusters").arg("-h").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some("5432"))?;
    let mut fields = line.split_whitespace();
    let (version, name) = (fields.next()?, fields.next()?);
    Some(format!("pg_ctlcluster {version} {name} restart"))
}

#[test]
fn a_worker_stalled_past_its_lease_never_gets_its_job_committed_twice() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut cluster) = Cluster::new() else {
        return;
    };
    let file = cluster.repo.scratch.join("one.json");
    let plan = json!({"name": "stall", "targetBranch": "result", "jobs": [
        job("only", "sleep 1; echo done >> only.txt", &[])
    ]});
    std::fs::write(&file, plan.to_string()).expect("write plan");
    let stalled = cluster.start_worker("stalled");
    let run = cluster.start_run(&file);
    assert_eq!(a_claiming_worker(&cluster, None), "stalled");
    signal(stalled, "-STOP");
    // Another worker takes the job over once the stalled one's lease lapsed.
    cluster.start_worker("healthy");
    let (code, stdout, stderr) = finish(run);
    signal(stalled, "-CONT");
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let doc: Value = serde_json::from_str(&stdout).expect("run json");
    assert_eq!(doc["jobs"][0]["attempts"], 2, "{doc:#}");
    assert_eq!(doc["jobs"][0]["status"], "succeeded");
    // The stalled worker woke up and finished its job: fenced, its result is not used.
    std::thread::sleep(Duration::from_secs(2));
    let first = cluster.items("state || ' ' || worker", "attempt = 1");
    assert_eq!(
        first,
        vec!["expired stalled".to_owned()],
        "its late report was refused"
    );
    assert_eq!(
        cluster.repo.git(&["show", "result:only.txt"]),
        "done\n",
        "written once"
    );
    let commits = cluster
        .repo
        .git(&["rev-list", "--count", "--no-merges", "main..result"]);
    assert_eq!(commits.trim(), "1", "one job commit on the target");
}

#[test]
fn a_worker_started_with_coordinate_takes_over_a_plan_whose_coordinator_died() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut cluster) = Cluster::new() else {
        return;
    };
    let plan = forty_jobs(&cluster.repo.scratch, "0.1");
    let expected = single_machine_tree(&cluster.repo, &plan);
    cluster.start_worker("plain");
    coordinator_killed_midway(&cluster, &plan);
    cluster.start_worker_with("coordinator", &["--coordinate"]);
    let doc = cluster.wait_for("the plan to end", |d| d["status"] != "running");
    assert_eq!(doc["status"], "succeeded", "{doc:#}");
    assert_eq!(
        cluster.repo.tree_of("result"),
        expected,
        "same tree as on one machine"
    );
}

#[test]
fn workers_whose_clocks_are_off_by_a_minute_lose_no_lease() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if Command::new("faketime").arg("--version").output().is_err() {
        eprintln!("skipped: no faketime (Debian's faketime package) to put a worker's clock off");
        return;
    }
    let Some(mut cluster) = Cluster::new() else {
        return;
    };
    let file = cluster.repo.scratch.join("skew.json");
    let jobs: Vec<Value> = (0..8)
        .map(|i| {
            job(
                &format!("job-{i}"),
                &format!("sleep 0.5; echo {i} > out-{i}.txt"),
                &[],
            )
        })
        .collect();
    let plan = json!({"name": "skew", "targetBranch": "result", "jobs": jobs});
    std::fs::write(&file, plan.to_string()).expect("write plan");
    let expected = single_machine_tree(&cluster.repo, &file);
    for (name, offset) in [("ahead", "+60s"), ("behind", "-60s")] {
        let mut faked = Command::new("faketime");
        faked.args(["-f", offset, BIN]);
        cluster.start_worker_as(faked, name, &[]);
    }
    let run = cluster.start_run(&file);
    let (code, stdout, stderr) = finish(run);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let doc: Value = serde_json::from_str(&stdout).expect("run json");
    assert_eq!(
        rerun_jobs(&doc),
        0,
        "no attempt was lost to a clock: {doc:#}"
    );
    assert!(cluster.items("id", "state = 'expired'").is_empty());
    let mut workers = cluster.items("worker", "state = 'collected'");
    workers.sort();
    workers.dedup();
    assert_eq!(
        workers.len(),
        2,
        "both skewed workers ran jobs: {workers:?}"
    );
    assert_eq!(cluster.repo.tree_of("result"), expected);
}
