//! `exec::kill_all` reaches every running program and what it started. A binary of its own:
//! in the unit-test binary it would kill the programs of tests running beside it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cmdc_tool_core::exec::{self, Spec};

/// Whether `pid` is still running (a zombie has died), waiting up to 5 s for it to die.
fn running_after_wait(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim().to_owned()));
        match state {
            None => return false,
            Some(rest) if rest.starts_with('Z') || rest.starts_with('X') => return false,
            Some(_) if Instant::now() > deadline => return true,
            Some(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_all_ends_every_run_and_its_children() {
    assert_eq!(exec::kill_all(), 0, "nothing runs yet");
    let spec = Spec {
        program: "sh".into(),
        // The background sleep stays in the group; the setsid one leaves it.
        args: vec![
            "-c".into(),
            "sleep 30 & echo $!; setsid sleep 30 & echo $!; wait".into(),
        ],
        stream_lines: true,
        ..Spec::default()
    };
    let children = Arc::new(Mutex::new(Vec::<u32>::new()));
    let seen = children.clone();
    let run = tokio::spawn(exec::run(
        spec,
        std::future::pending::<()>(),
        |_| {},
        move |line: &[u8]| {
            let text = String::from_utf8_lossy(line);
            seen.lock().unwrap().push(text.trim().parse().unwrap());
        },
    ));
    while children.lock().unwrap().len() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(exec::kill_all(), 1);
    let outcome = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the run ends once killed")
        .unwrap()
        .unwrap();
    assert_eq!(outcome.signal, Some(libc::SIGKILL));
    for pid in children.lock().unwrap().iter() {
        assert!(!running_after_wait(*pid), "{pid} outlived kill_all");
    }
    assert_eq!(exec::kill_all(), 0, "a finished run is no longer counted");
}
