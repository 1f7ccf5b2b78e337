//! The output of a shell or process job (SPEC §12): the work phase's stdout — its last
//! [`MAX_OUTPUT_BYTES`] in whole lines — as `WorkOutput.output`; none when it printed
//! nothing, none in the other phases, and never its stderr.
#![cfg(unix)]

mod common;

use common::ctx;
use orchestrator_agents::{ProcessRunner, ShellRunner};
use orchestrator_core::plan::{ProcessSpec, ShellSpec, WorkSpec};
use orchestrator_core::runner::{WorkRunner, MAX_OUTPUT_BYTES};
use orchestrator_core::Phase;

fn shell(command: &str) -> WorkSpec {
    WorkSpec::Shell(ShellSpec {
        command: command.into(),
        ..ShellSpec::default()
    })
}

fn process(executable: &str, args: &[&str]) -> WorkSpec {
    WorkSpec::Process(Box::new(ProcessSpec {
        executable: executable.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        ..ProcessSpec::default()
    }))
}

/// The two runners under test, by name.
fn runners() -> [(&'static str, Box<dyn WorkRunner>); 2] {
    [
        ("shell", Box::new(ShellRunner::new())),
        ("process", Box::new(ProcessRunner::new())),
    ]
}

/// The same command for each runner: the shell's command line, the process's argv.
fn spec_for(runner: &str, argv: &[&str]) -> WorkSpec {
    match runner {
        "shell" => shell(&argv.join(" ")),
        _ => process(argv[0], &argv[1..]),
    }
}

/// Runs `spec` with `runner` in phase `phase` and returns its output; the run must succeed.
async fn output_of(runner: &dyn WorkRunner, spec: &WorkSpec, phase: Phase) -> Option<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ctx = ctx(dir.path());
    ctx.phase = phase;
    match runner.run(spec, &ctx).await {
        Ok(out) => out.output,
        Err(e) => panic!("{spec:?} failed: {e:?}\n{}", ctx.log.take()),
    }
}

#[tokio::test]
async fn work_stdout_is_the_output() {
    for (name, runner) in runners() {
        let spec = spec_for(name, &["echo", "hello"]);
        assert_eq!(
            output_of(runner.as_ref(), &spec, Phase::Work)
                .await
                .as_deref(),
            Some("hello\n"),
            "{name}"
        );
    }
}

#[tokio::test]
async fn several_lines_are_kept_in_order() {
    for (name, runner) in runners() {
        // printf turns each `\n` of its format into a newline.
        let spec = match name {
            "shell" => shell("printf 'a\\nb b\\n\\nc\\n'"),
            _ => process("printf", &["a\\nb b\\n\\nc\\n"]),
        };
        assert_eq!(
            output_of(runner.as_ref(), &spec, Phase::Work)
                .await
                .as_deref(),
            Some("a\nb b\n\nc\n"),
            "{name}"
        );
    }
}

#[tokio::test]
async fn other_phases_have_no_output() {
    for (name, runner) in runners() {
        let spec = spec_for(name, &["echo", "hello"]);
        for phase in [Phase::Setup, Phase::Prechecks, Phase::Postchecks] {
            assert_eq!(
                output_of(runner.as_ref(), &spec, phase).await,
                None,
                "{name} in {phase}"
            );
        }
    }
}

#[tokio::test]
async fn printing_nothing_is_no_output() {
    for (name, runner) in runners() {
        let spec = spec_for(name, &["true"]);
        assert_eq!(
            output_of(runner.as_ref(), &spec, Phase::Work).await,
            None,
            "{name}"
        );
    }
}

#[tokio::test]
async fn stderr_is_not_output() {
    let script = "echo out; echo err >&2; echo more; echo err2 >&2";
    let both = [
        (
            "shell",
            Box::new(ShellRunner::new()) as Box<dyn WorkRunner>,
            shell(script),
        ),
        (
            "process",
            Box::new(ProcessRunner::new()),
            process("sh", &["-c", script]),
        ),
    ];
    for (name, runner, spec) in both {
        assert_eq!(
            output_of(runner.as_ref(), &spec, Phase::Work)
                .await
                .as_deref(),
            Some("out\nmore\n"),
            "{name}"
        );
    }
    // Only stderr: no output at all.
    let script = "echo err >&2";
    let only = [
        (
            "shell",
            Box::new(ShellRunner::new()) as Box<dyn WorkRunner>,
            shell(script),
        ),
        (
            "process",
            Box::new(ProcessRunner::new()),
            process("sh", &["-c", script]),
        ),
    ];
    for (name, runner, spec) in only {
        assert_eq!(
            output_of(runner.as_ref(), &spec, Phase::Work).await,
            None,
            "{name}"
        );
    }
}

/// `seq 1 <LAST>` prints a little over 2 MiB.
const LAST: u32 = 320_000;

/// What `seq 1 LAST` prints.
fn seq_text() -> String {
    let mut text = String::new();
    for i in 1..=LAST {
        text.push_str(&i.to_string());
        text.push('\n');
    }
    text
}

#[tokio::test]
async fn a_long_stdout_keeps_its_last_mebibyte_of_whole_lines() {
    let full = seq_text();
    assert!(full.len() >= 2 * MAX_OUTPUT_BYTES, "{}", full.len());
    // The end of the stream that fits: whole lines, as many as fit in MAX_OUTPUT_BYTES.
    let cut = full.len() - MAX_OUTPUT_BYTES;
    let start = if full.as_bytes()[cut - 1] == b'\n' {
        cut
    } else {
        cut + full[cut..].find('\n').expect("a later line") + 1
    };
    let expected = &full[start..];
    let last = LAST.to_string();
    for (name, runner) in runners() {
        let spec = spec_for(name, &["seq", "1", &last]);
        let output = output_of(runner.as_ref(), &spec, Phase::Work)
            .await
            .unwrap_or_else(|| panic!("{name}: no output"));
        assert!(
            output.len() <= MAX_OUTPUT_BYTES,
            "{name}: {} bytes",
            output.len()
        );
        assert!(full.ends_with(&output), "{name}: not the end of the stream");
        let at = full.len() - output.len();
        assert!(
            at > 0 && full.as_bytes()[at - 1] == b'\n',
            "{name}: starts mid-line: {:?}",
            &output[..output.len().min(20)]
        );
        assert_eq!(output.len(), expected.len(), "{name}: as much as fits");
        assert!(output == expected, "{name}");
    }
}
