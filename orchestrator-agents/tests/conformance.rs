//! The `WorkRunner` conformance suite (`orchestrator_core::conformance::runner`) run against
//! the shell runner, the process runner and the agent runner (with a stand-in agent CLI that
//! runs its instructions file as an `sh` script).
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use orchestrator_agents::agent::{AgentWorkRunner, GenericAgent, RetryPolicy};
use orchestrator_agents::{ProcessRunner, ShellRunner};
use orchestrator_core::conformance::runner::{run_all, RunnerFixture, Script};
use orchestrator_core::plan::{AgentSpec, WorkSpec};
use orchestrator_core::runner::WorkRunner;

/// The shell runner: every intent as an `sh -c` command.
#[derive(Debug, Default)]
struct Shell(ShellRunner);

impl RunnerFixture for Shell {
    fn runner(&self) -> &dyn WorkRunner {
        &self.0
    }

    fn spec(&self, script: &Script) -> WorkSpec {
        WorkSpec::shell(script.sh())
    }
}

#[tokio::test]
async fn the_shell_runner_conforms() {
    run_all(|| async { Shell::default() }).await;
}

/// The process runner: programs started directly where one does the job (`printf`, `pwd`,
/// `sleep`), `sh -c` as the executable for the rest.
#[derive(Debug, Default)]
struct Process(ProcessRunner);

impl RunnerFixture for Process {
    fn runner(&self) -> &dyn WorkRunner {
        &self.0
    }

    fn spec(&self, script: &Script) -> WorkSpec {
        match script {
            Script::Print(lines) => {
                let args = std::iter::once("%s\n".to_owned()).chain(lines.iter().cloned());
                WorkSpec::process("printf", args)
            }
            Script::PrintCwd => WorkSpec::process("pwd", Vec::<String>::new()),
            Script::Sleep(d) => {
                // No line first: the suite only needs a program that runs until stopped.
                WorkSpec::process("sleep", [d.as_secs().max(1).to_string()])
            }
            other => WorkSpec::process("sh", ["-c".to_owned(), other.sh()]),
        }
    }
}

#[tokio::test]
async fn the_process_runner_conforms() {
    run_all(|| async { Process::default() }).await;
}

/// The agent runner with a stand-in CLI, `stand-in-agent INSTRUCTIONS_FILE`, that runs the
/// instructions as an `sh` script: the spec's `instructions` are the script.
#[derive(Debug)]
struct Agent {
    runner: AgentWorkRunner,
    _cli: tempfile::TempDir,
}

impl Agent {
    fn new() -> Agent {
        let cli = tempfile::tempdir().expect("stand-in CLI folder");
        let program: PathBuf = cli.path().join("stand-in-agent");
        std::fs::write(&program, "#!/bin/sh\nexec sh \"$1\"\n").expect("write stand-in CLI");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
            .expect("chmod stand-in CLI");
        let agent = GenericAgent::new(program.display().to_string()).arg("{prompt_file}");
        let runner = AgentWorkRunner::new()
            .register("stand-in", agent)
            // One try: the suite's failing script must fail once, not be retried.
            .retry(RetryPolicy::new(1, Duration::from_millis(10)));
        Agent { runner, _cli: cli }
    }
}

impl RunnerFixture for Agent {
    fn runner(&self) -> &dyn WorkRunner {
        &self.runner
    }

    fn spec(&self, script: &Script) -> WorkSpec {
        WorkSpec::Agent(Box::new(AgentSpec {
            instructions: Some(script.sh()),
            agent: Some("stand-in".into()),
            ..AgentSpec::default()
        }))
    }
}

#[tokio::test]
async fn the_agent_runner_conforms() {
    run_all(|| async { Agent::new() }).await;
}
