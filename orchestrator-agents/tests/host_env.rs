//! Host variables known to break child CLIs are not inherited. Alone in its test binary because
//! it changes this process's environment, which must not race with other tests.
#![cfg(unix)]

mod common;

use orchestrator_agents::{ShellRunner, REMOVED_ENV_VARS};
use orchestrator_core::plan::{ShellSpec, WorkSpec};
use orchestrator_core::runner::WorkRunner;

#[test]
fn removed_host_variables_do_not_reach_children_but_explicit_ones_do() {
    assert!(REMOVED_ENV_VARS.contains(&"NODE_OPTIONS"));
    for name in REMOVED_ENV_VARS {
        std::env::set_var(name, "--require /host/debugger-bootloader.js");
    }
    std::env::set_var("ORCHESTRATOR_TEST_KEPT", "kept");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = common::ctx(dir.path());
        let show = "printf '%s\\n' \"${NODE_OPTIONS-unset}\" \"${VSCODE_INSPECTOR_OPTIONS-unset}\" \"$ORCHESTRATOR_TEST_KEPT\"";
        ShellRunner::new().run(&WorkSpec::shell(show), &c).await.expect("runs");
        assert_eq!(c.log.take(), "unset\nunset\nkept\n");

        let mut spec = ShellSpec {
            command: show.into(),
            ..ShellSpec::default()
        };
        spec.extra.make_mut().env.insert("NODE_OPTIONS".into(), "--max-old-space-size=4096".into());
        ShellRunner::new().run(&WorkSpec::Shell(spec), &c).await.expect("runs");
        assert_eq!(c.log.take(), "--max-old-space-size=4096\nunset\nkept\n");
    });
}
