//! The credit window with real programs: a fast writer blocks when its owner does not
//! acknowledge (memory bounded by the window and the pipe), resumes on acks; a stderr flood
//! never holds stdout back.

use std::time::Duration;

use tokio::sync::mpsc;

use super::testing::running;
use super::*;

fn written(pid: u32) -> u64 {
    // `wchar`: bytes the process passed to write(2), whether or not a reader took them.
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    io.lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
    state.chars().next().unwrap_or('?')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacknowledged_window_blocks_a_fast_writer_and_acks_resume_it() {
    let window = Window::new(16, 1 << 20);
    let spec = Spec {
        program: "yes".into(),
        args: vec!["0123456789012345678901234567890123456789".into()],
        stream_lines: true,
        max_output: 0,
        kill_grace: Duration::from_millis(200),
        window: Some(window.clone()),
        ..Spec::default()
    };
    let (pid_tx, mut pid_rx) = mpsc::unbounded_channel();
    let (line_tx, mut lines) = mpsc::unbounded_channel::<usize>();
    let (stop, cancel) = tokio::sync::oneshot::channel::<()>();
    // A conversation (stdin kept open), as an MCP server runs: its lines stream past
    // `max_output`.
    let (_stdin, rx) = mpsc::unbounded_channel();
    let run = tokio::spawn(run_with(
        spec,
        Input::Channel(rx),
        async move {
            let _ = cancel.await;
        },
        move |pid| pid_tx.send(pid).unwrap(),
        move |l: &[u8]| line_tx.send(l.len()).unwrap(),
        None::<fn(&[u8])>,
    ));
    let pid = pid_rx.recv().await.unwrap();

    tokio::time::sleep(Duration::from_millis(500)).await;
    let first = written(pid);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut got = 0;
    while lines.try_recv().is_ok() {
        got += 1;
    }
    // `yes` writes ~1 GB/s when read: here it wrote a pipe's worth and sleeps in write(2).
    assert_eq!(got, 16, "exactly the window was delivered");
    assert_eq!(window.in_flight(), (16, 16 * 40));
    assert_eq!(written(pid), first, "the writer is blocked");
    assert!(first < 2 << 20, "wrote {first} bytes while unread");
    assert_eq!(state(pid), 'S');

    // Acknowledging as lines are consumed lets it run again.
    window.ack(16);
    while got < 100_000 {
        lines.recv().await.unwrap();
        got += 1;
        window.ack(1);
    }
    assert!(written(pid) > first + 1_000_000, "resumed");
    assert!(window.in_flight().0 <= 16);
    stop.send(()).unwrap();
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.ending, Ending::Cancelled);
    assert!(!running(pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stderr_flood_is_dropped_with_a_count_and_never_holds_stdout() {
    let window = Window::new(4, 1 << 20);
    let spec = Spec {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            "yes EEEEEEEE | head -n 200000 >&2; echo done; echo bye >&2".into(),
        ],
        stream_lines: true,
        max_output: 0,
        window: Some(window.clone()),
        ..Spec::default()
    };
    // A slow owner: acknowledges each message, pausing every 100.
    let (tx, mut rx) = mpsc::unbounded_channel::<(bool, Vec<u8>)>();
    let err_tx = tx.clone();
    let owner = tokio::spawn({
        let window = window.clone();
        async move {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            while let Some((is_err, line)) = rx.recv().await {
                if is_err { &mut err } else { &mut out }.push(line);
                if (out.len() + err.len()) % 100 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                window.ack(1);
            }
            (out, err)
        }
    });
    let (stdin, rx) = mpsc::unbounded_channel();
    drop(stdin);
    let outcome = run_with(
        spec,
        Input::Channel(rx),
        std::future::pending::<()>(),
        |_| {},
        move |l: &[u8]| tx.send((false, l.to_vec())).unwrap(),
        Some(move |l: &[u8]| err_tx.send((true, l.to_vec())).unwrap()),
    )
    .await
    .unwrap();
    let (out, err) = owner.await.unwrap();
    assert_eq!(outcome.code, Some(0));
    assert_eq!(out, vec![b"done".to_vec()]);
    let dropped = window.take_dropped();
    assert!(dropped > 0, "nothing was dropped");
    assert_eq!(
        err.len() as u64 + dropped,
        200_001,
        "every line delivered or counted"
    );
    assert_eq!(
        err.last().unwrap(),
        b"bye",
        "the last words survive the flood"
    );
}
