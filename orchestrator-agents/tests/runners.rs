//! `ShellRunner` and `ProcessRunner` with real processes: env layering, cwd, failures a person
//! can act on, timeouts and cancel through the context, missing programs, each shell kind.
#![cfg(unix)]

mod common;

use std::time::{Duration, Instant};

use common::ctx;
use orchestrator_agents::{ProcessRunner, ShellRunner};
use orchestrator_core::plan::{ProcessSpec, ShellKind, ShellSpec, WorkSpec};
use orchestrator_core::runner::{WorkFailure, WorkRunner};
use orchestrator_core::state::FailureReason;
use orchestrator_testkit::fixtures::{alive, on_path, read_pid};

fn shell_spec(command: &str) -> ShellSpec {
    ShellSpec {
        command: command.into(),
        ..ShellSpec::default()
    }
}

fn process_spec(executable: &str, args: &[&str]) -> ProcessSpec {
    ProcessSpec {
        executable: executable.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        ..ProcessSpec::default()
    }
}

fn env(pairs: &[(&str, &str)]) -> orchestrator_core::plan::Env {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn shell_fails(spec: ShellSpec, ctx: &orchestrator_core::WorkContext) -> WorkFailure {
    ShellRunner::new()
        .run(&WorkSpec::Shell(spec), ctx)
        .await
        .expect_err("fails")
}

#[tokio::test]
async fn env_layers_override_and_expand() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = ctx(dir.path());
    let home = std::env::var("HOME").unwrap_or_default();
    // Plan + job layer, as the engine merges it.
    c.env = env(&[
        ("LAYER", "job"),
        ("SHARED", "from-job"),
        ("TOOLS", "${HOME}/tools"),
        ("GREETING", "hi from $LAYER"),
    ]);
    let mut spec = shell_spec(
        "printf '%s\\n' \"$LAYER\" \"$SHARED\" \"$TOOLS\" \"$GREETING\" \"$SPEC_ONLY\" \"$INJECT\"",
    );
    spec.extra.make_mut().env = env(&[
        ("SHARED", "spec-over-$SHARED"),
        ("SPEC_ONLY", "${LAYER}:[$NO_SUCH_VAR_4711]:$$5:end"),
        ("INJECT", "$(touch pwned)`touch pwned2`"),
    ]);
    ShellRunner::new()
        .run(&WorkSpec::Shell(spec), &c)
        .await
        .expect("runs");
    let tools = format!("{home}/tools");
    assert_eq!(
        c.log.take().lines().collect::<Vec<_>>(),
        [
            "job",
            "spec-over-from-job",
            tools.as_str(),
            "hi from job",
            "job:[]:$5:end",
            "$(touch pwned)`touch pwned2`",
        ]
    );
    assert!(!dir.path().join("pwned").exists() && !dir.path().join("pwned2").exists());

    for (name, value) in [("A=B", "x"), ("", "x"), ("OK", "nul\0byte")] {
        let mut spec = shell_spec("touch started");
        spec.extra.make_mut().env = env(&[(name, value)]);
        let f = shell_fails(spec, &c).await;
        assert_eq!(f.reason, FailureReason::StartupError);
        assert!(f.message.starts_with("spec env: "), "{}", f.message);
    }
    assert!(!dir.path().join("started").exists());
}

#[tokio::test]
async fn a_spec_path_finds_its_tools_and_arguments_stay_literal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let tool = bin.join("hello-tool-4711");
    std::fs::write(&tool, "#!/bin/sh\nprintf '[%s]\\n' \"$@\"\n").expect("write");
    std::process::Command::new("chmod")
        .args(["+x", &tool.to_string_lossy()])
        .status()
        .expect("chmod");
    let c = ctx(dir.path());
    let mut spec = process_spec("hello-tool-4711", &["$HOME", "a b", "*", "; rm -rf /", ""]);
    spec.env = env(&[("PATH", &format!("{}:$PATH", bin.display()))]);
    ProcessRunner::new()
        .run(&WorkSpec::Process(Box::new(spec)), &c)
        .await
        .expect("runs");
    assert_eq!(c.log.take(), "[$HOME]\n[a b]\n[*]\n[; rm -rf /]\n[]\n");
}

#[tokio::test]
async fn cwd_inside_the_job_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("sub/deeper")).expect("mkdir");
    let c = ctx(dir.path());
    let real = dir.path().canonicalize().expect("canonical");
    let mut spec = shell_spec("pwd -P");
    spec.extra.make_mut().cwd = Some("sub/./deeper/..".into());
    ShellRunner::new()
        .run(&WorkSpec::Shell(spec), &c)
        .await
        .expect("runs");
    assert_eq!(c.log.take().trim(), real.join("sub").to_string_lossy());

    let mut spec = process_spec("pwd", &["-P"]);
    spec.cwd = Some("sub/deeper".into());
    ProcessRunner::new()
        .run(&WorkSpec::Process(Box::new(spec)), &c)
        .await
        .expect("runs");
    assert_eq!(
        c.log.take().trim(),
        real.join("sub/deeper").to_string_lossy()
    );
}

#[tokio::test]
async fn cwd_escaping_the_job_directory_is_refused() {
    let outside = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).expect("symlink");
    std::fs::write(dir.path().join("file"), "").expect("write");
    let c = ctx(dir.path());
    let absolute = outside.path().to_string_lossy().into_owned();
    for cwd in [
        "..",
        "sub/../..",
        "../x",
        absolute.as_str(),
        "link",
        "link/.",
    ] {
        let mut spec = shell_spec("touch escaped");
        spec.extra.make_mut().cwd = Some(cwd.into());
        let f = shell_fails(spec, &c).await;
        assert_eq!(f.reason, FailureReason::StartupError, "{cwd}");
        assert!(
            f.message
                .contains(&format!("cwd `{cwd}` leads outside the job directory")),
            "{f:?}"
        );
    }
    for cwd in ["missing", "file"] {
        let mut spec = process_spec("touch", &["escaped"]);
        spec.cwd = Some(cwd.into());
        let f = ProcessRunner::new()
            .run(&WorkSpec::Process(Box::new(spec)), &c)
            .await
            .expect_err("fails");
        assert!(f.message.contains(&format!("cwd `{cwd}`")), "{f:?}");
        assert!(f.message.contains("is not an existing directory"), "{f:?}");
    }
    assert!(!outside.path().join("escaped").exists());
    assert!(!dir.path().join("escaped").exists());
}

#[tokio::test]
async fn failures_name_the_exit_code_and_quote_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path());
    let script = "echo building; for i in 1 2 3 4 5 6 7; do echo \"warning $i\" >&2; done; \
                  echo 'error: boom' >&2; exit 3";
    let f = shell_fails(shell_spec(script), &c).await;
    assert_eq!(f.exit_code, Some(3));
    assert_eq!(f.reason, FailureReason::PhaseFailed);
    assert!(
        f.message.contains(": exit code 3\nlast lines of stderr:"),
        "{}",
        f.message
    );
    assert!(
        f.message
            .ends_with("  warning 4\n  warning 5\n  warning 6\n  warning 7\n  error: boom"),
        "{}",
        f.message
    );
    assert!(!f.message.contains("warning 3"), "only the last few lines");
    assert!(c.log.take().starts_with("building\n"));

    let f = ProcessRunner::new()
        .run(&WorkSpec::process("false", Vec::<String>::new()), &c)
        .await
        .expect_err("false fails");
    assert_eq!(f.message, "`false`: exit code 1");
    assert_eq!(f.exit_code, Some(1));

    let f = shell_fails(shell_spec("kill -9 $$"), &c).await;
    assert_eq!(f.message, "`kill -9 $$`: killed by signal 9 (SIGKILL)");
    assert_eq!(f.exit_code, None);
}

#[tokio::test]
async fn the_spec_timeout_stops_the_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path());
    let mut spec = shell_spec("echo waiting >&2; sleep 60 & echo $! > gc.pid; sleep 60");
    spec.extra.make_mut().timeout = Some(300);
    let start = Instant::now();
    let f = shell_fails(spec, &c).await;
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(f.reason, FailureReason::Timeout);
    assert!(
        f.message
            .contains("timed out after 300 ms\nlast lines of stderr:\n  waiting"),
        "{}",
        f.message
    );
    assert!(!alive(read_pid(&dir.path().join("gc.pid")).await));
}

#[tokio::test]
async fn cancel_through_the_context_stops_the_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path());
    let spec = WorkSpec::process("sh", ["-c", "sleep 60 & echo $! > gc.pid; sleep 60"]);
    let c2 = c.clone();
    let task = tokio::spawn(async move { ProcessRunner::new().run(&spec, &c2).await });
    let grandchild = read_pid(&dir.path().join("gc.pid")).await;
    let start = Instant::now();
    c.cancel.cancel();
    let f = task.await.expect("join").expect_err("canceled");
    assert!(start.elapsed() < Duration::from_millis(1500));
    assert_eq!(f.reason, FailureReason::Canceled);
    assert!(f.message.ends_with(": canceled"), "{}", f.message);
    assert!(!alive(grandchild));

    // Already canceled: nothing is started.
    let f = shell_fails(shell_spec("touch started"), &c).await;
    assert_eq!(f.reason, FailureReason::Canceled);
    assert!(!dir.path().join("started").exists());
}

#[tokio::test]
async fn missing_executables_and_shells_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path());
    let f = ProcessRunner::new()
        .run(&WorkSpec::process("no-such-tool-4711", ["--help"]), &c)
        .await
        .expect_err("missing");
    assert_eq!(f.reason, FailureReason::StartupError);
    assert!(
        f.message
            .contains("executable `no-such-tool-4711` was not found"),
        "{}",
        f.message
    );

    let f = ProcessRunner::new()
        .run(&WorkSpec::process(" ", Vec::<String>::new()), &c)
        .await
        .expect_err("empty");
    assert!(f.message.contains("empty `executable`"));

    for (kind, name) in [
        (ShellKind::Cmd, "cmd"),
        (ShellKind::Powershell, "powershell"),
        (ShellKind::Pwsh, "pwsh"),
    ] {
        if on_path(name) {
            continue;
        }
        let mut spec = shell_spec("echo hi");
        spec.extra.make_mut().shell = Some(kind);
        let f = shell_fails(spec, &c).await;
        assert_eq!(f.reason, FailureReason::StartupError);
        assert!(
            f.message
                .contains(&format!("shell `{name}` was not found on PATH")),
            "{}",
            f.message
        );
    }
}

#[tokio::test]
async fn runners_refuse_other_kinds_of_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path());
    let f = ShellRunner::new()
        .run(&WorkSpec::process("true", Vec::<String>::new()), &c)
        .await
        .expect_err("wrong kind");
    assert!(f.message.contains("shell runner cannot run `process` work"));
    let f = ProcessRunner::new()
        .run(&WorkSpec::agent("do it"), &c)
        .await
        .expect_err("wrong kind");
    assert!(f.message.contains("process runner cannot run `agent` work"));
}

#[tokio::test]
async fn each_shell_kind_on_this_machine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path());
    let cases = [
        (None, "sh", "echo \"default:${0##*/}\""),
        (Some(ShellKind::Sh), "sh", "echo \"sh:${0##*/}\""),
        (
            Some(ShellKind::Bash),
            "bash",
            "a=(x y z); echo \"bash:${#a[@]}\"",
        ),
        (
            Some(ShellKind::Pwsh),
            "pwsh",
            "Write-Output \"pwsh:$(1+2)\"",
        ),
        (
            Some(ShellKind::Powershell),
            "powershell",
            "Write-Output \"powershell:$(1+2)\"",
        ),
    ];
    let expected = ["default:sh", "sh:sh", "bash:3", "pwsh:3", "powershell:3"];
    for ((kind, program, command), want) in cases.into_iter().zip(expected) {
        if !on_path(program) {
            println!("skipped shell {program}: not installed on this machine");
            continue;
        }
        let mut spec = shell_spec(command);
        spec.extra.make_mut().shell = kind;
        ShellRunner::new()
            .run(&WorkSpec::Shell(spec), &c)
            .await
            .unwrap_or_else(|f| panic!("{program}: {f:?}"));
        assert_eq!(c.log.take().trim(), want, "{program}");
    }
}

/// What a run printed and how it ended: (log, exit code).
async fn outcome(
    runner: &dyn WorkRunner,
    spec: WorkSpec,
    dir: &std::path::Path,
) -> (String, Option<i32>) {
    let c = ctx(dir);
    let code = match runner.run(&spec, &c).await {
        Ok(_) => Some(0),
        Err(f) => f.exit_code,
    };
    (c.log.take(), code)
}

#[tokio::test]
async fn plain_commands_run_without_the_shell_exactly_as_the_shell_runs_them() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), "alpha\n").expect("write");
    std::fs::create_dir(dir.path().join("sub")).expect("sub");
    let script = |name: &str, text: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, text).expect("script");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("mode");
    };
    script("with-shebang.sh", "#!/bin/sh\necho \"args: $*\"\nexit 7\n");
    script("no-shebang.sh", "echo run by the shell\n");
    for command in [
        "true",
        "false",
        "cat a.txt",
        "cat missing.txt",
        "ls -1 sub .",
        "./with-shebang.sh one two",
        "./no-shebang.sh",
        "no-such-program-anywhere x",
        "sh -c exit",
        "env -u ORCHESTRATOR_JOB_TOKEN",
        "sleep 0",
    ] {
        let direct = outcome(&ShellRunner::new(), WorkSpec::shell(command), dir.path()).await;
        let through_sh = outcome(
            &ProcessRunner::new(),
            WorkSpec::Process(Box::new(process_spec("sh", &["-c", command]))),
            dir.path(),
        )
        .await;
        // `env` lists the same variables in the shell's own order.
        let strip = |(log, code): (String, Option<i32>)| {
            let mut log: Vec<String> = log.lines().map(str::to_owned).collect();
            if command.starts_with("env") {
                log.sort();
            }
            (log, code)
        };
        assert_eq!(strip(direct), strip(through_sh), "{command}");
    }
}
