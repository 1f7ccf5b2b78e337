//! [`MachineSlots`]: the capacity conformance suite, sharing between instances, and a slot
//! held by a process killed with SIGKILL coming free.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use orchestrator_core::capacity::Capacity;
use orchestrator_storage::MachineSlots;

#[tokio::test]
async fn machine_slots_conform() {
    let root = tempfile::tempdir().expect("temp dir");
    let n = AtomicUsize::new(0);
    orchestrator_core::conformance::capacity::run_all(|slots| {
        // A folder of its own per case: nobody else holds its slots.
        let dir = root
            .path()
            .join(format!("case-{}", n.fetch_add(1, Ordering::SeqCst)));
        async move { MachineSlots::new(dir, slots).expect("slot folder") }
    })
    .await;
}

#[test]
fn instances_on_one_folder_share_the_slots() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = MachineSlots::new(dir.path(), 2).expect("slots");
    let b = MachineSlots::new(dir.path(), 2).expect("slots");
    let one = a.try_acquire().expect("lock").expect("free");
    let two = b.try_acquire().expect("lock").expect("free");
    assert!(a.try_acquire().expect("lock").is_none());
    assert!(b.try_acquire().expect("lock").is_none());
    drop(one);
    assert!(b.try_acquire().expect("lock").is_some());
    drop(two);
}

#[test]
fn zero_slots_and_unusable_folders_are_errors_naming_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = MachineSlots::new(dir.path(), 0).expect_err("zero");
    assert!(e.to_string().contains("needs at least one slot"), "{e}");
    assert!(e.to_string().contains(&dir.path().display().to_string()));
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").expect("write");
    let e = MachineSlots::new(file.join("slots"), 1).expect_err("under a file");
    assert!(e.to_string().contains("create slot folder"), "{e}");
}

#[test]
fn a_removed_folder_is_made_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let slots = MachineSlots::new(dir.path().join("slots"), 1).expect("slots");
    std::fs::remove_dir_all(slots.dir()).expect("remove");
    assert!(slots.try_acquire().expect("recreated").is_some());
}

/// Env var telling the child copy of this test binary where to take a slot.
const HOLDER_DIR: &str = "MACHINE_SLOTS_HOLDER_DIR";

/// The child of [`a_slot_of_a_killed_process_is_free_again`]: takes the only slot, says so,
/// and holds it until killed. Without the env var (a normal test run) it does nothing.
#[test]
fn slot_holder_child() {
    let Some(dir) = std::env::var_os(HOLDER_DIR) else {
        return;
    };
    let slots = MachineSlots::new(dir, 1).expect("slots");
    let _held = slots.try_acquire().expect("lock").expect("free slot");
    println!("HOLDING");
    std::thread::sleep(Duration::from_secs(120));
}

#[cfg(unix)]
#[test]
fn a_slot_of_a_killed_process_is_free_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "slot_holder_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLDER_DIR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn holder");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut holding = false;
    for line in BufReader::new(stdout).lines() {
        if line.expect("read child").contains("HOLDING") {
            holding = true;
            break;
        }
    }
    assert!(holding, "the child never took the slot");
    let slots = MachineSlots::new(dir.path(), 1).expect("slots");
    assert!(
        slots.try_acquire().expect("lock").is_none(),
        "the child's slot looks free while it lives"
    );
    // SIGKILL: no destructor runs; only the kernel closing the file frees the slot.
    child.kill().expect("kill -9 the holder");
    child.wait().expect("reap the holder");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if slots.try_acquire().expect("lock").is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the killed process's slot stayed taken"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
