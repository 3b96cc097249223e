use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio::sync::mpsc;

use super::run::DRAIN;
use super::testing::alive;
use super::*;
use crate::error::{Error, Result};

/// A child that exited but is not reaped yet is a zombie; once reaped it is not (nor is a
/// process that never existed).
#[test]
fn an_exited_unreaped_child_is_a_zombie() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let mut seen = false;
    for _ in 0..500 {
        if is_zombie(pid) {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(seen, "{pid} never showed as a zombie");
    child.wait().unwrap();
    assert!(!is_zombie(pid));
    assert!(!is_zombie(u32::MAX));
}

fn spec(program: &str, args: &[&str]) -> Spec {
    Spec {
        program: program.to_string(),
        args: args.iter().map(|s| s.to_string()).collect(),
        kill_grace: Duration::from_millis(200),
        ..Spec::default()
    }
}

fn never() -> std::future::Pending<()> {
    std::future::pending()
}

async fn run_simple(s: Spec) -> Result<Outcome> {
    run(s, never(), |_| {}, |_: &[u8]| {}).await
}

#[tokio::test]
async fn a_program_still_open_for_writing_starts_once_it_is_closed() {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir().join(format!("cmdc_etxtbsy_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("busy.sh");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o755)
        .open(&path)
        .unwrap();
    file.write_all(b"#!/bin/sh\necho started\n").unwrap();
    // The writer closes 20 ms from now, as a forked sibling's copy of the descriptor would.
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        drop(file);
    });
    assert_eq!(
        Command::new(&path)
            .spawn()
            .err()
            .and_then(|e| e.raw_os_error()),
        Some(libc::ETXTBSY),
        "the file is busy while open for writing"
    );
    let out = spawn(Command::new(&path).stdout(Stdio::piped()))
        .await
        .unwrap()
        .wait_with_output()
        .await
        .unwrap();
    closer.join().unwrap();
    assert_eq!(out.stdout, b"started\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn capped_buffer_keeps_the_head() {
    let mut b = CappedBuffer::new(5);
    assert_eq!(b.push(b"abc"), b"abc");
    assert_eq!(b.push(b"defg"), b"de");
    assert_eq!(b.push(b"h"), b"");
    assert_eq!(b.data, b"abcde");
    assert_eq!(b.dropped, 3);
    assert!(b.is_full());
}

#[test]
fn line_splitter_handles_partial_crlf_and_long_lines() {
    let mut s = LineSplitter::new(4);
    assert!(s.push(b"ab").is_empty());
    assert_eq!(s.push(b"c\r\nde\nf"), vec![b"abc".to_vec(), b"de".to_vec()]);
    assert_eq!(s.push(b"ghijkl"), vec![b"fghi".to_vec()]);
    assert_eq!(s.push(b"\n"), vec![b"jkl".to_vec()]);
    assert_eq!(s.finish(), None);
    s.push(b"tail");
    assert_eq!(s.finish(), Some(b"tail".to_vec()));
}

#[test]
fn check_refuses_bad_specs() {
    assert!(check(&spec("", &[])).is_err());
    let mut s = spec("ls", &[]);
    s.cwd = Some(PathBuf::from("/no/such/dir/anywhere"));
    assert_eq!(
        check(&s).unwrap_err().to_string(),
        "working directory does not exist: /no/such/dir/anywhere"
    );
    assert!(check(&spec("ls", &["a\0b"])).is_err());
}

#[tokio::test]
async fn captures_output_and_exit_code() {
    let o = run_simple(spec("sh", &["-c", "echo out; echo err >&2; exit 3"]))
        .await
        .unwrap();
    assert_eq!(o.ending, Ending::Exited);
    assert_eq!(o.code, Some(3));
    assert_eq!(o.stdout, b"out\n");
    assert_eq!(o.stderr, b"err\n");
}

#[tokio::test]
async fn missing_executable_is_an_error() {
    let e = run_simple(spec("no-such-program-cmdc", &[]))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "executable not found: no-such-program-cmdc (not on PATH)"
    );
    let e = run_simple(spec("/nope/prog", &[])).await.unwrap_err();
    assert!(matches!(&e, Error::Process(_)));
    assert_eq!(e.to_string(), "executable not found: /nope/prog");
}

#[tokio::test]
async fn stdin_cwd_and_env() {
    let mut s = spec("sh", &["-c", "cat; pwd; echo $CMDC_X; echo ${HOME:-none}"]);
    s.stdin = Some(b"hello\n".to_vec());
    s.cwd = Some(PathBuf::from("/"));
    s.env = vec![("CMDC_X".into(), Some("42".into())), ("HOME".into(), None)];
    let o = run_simple(s).await.unwrap();
    assert_eq!(String::from_utf8(o.stdout).unwrap(), "hello\n/\n42\nnone\n");
}

#[tokio::test]
async fn streams_lines_in_order() {
    let mut s = spec("sh", &["-c", "printf 'a\\nb\\nc'"]);
    s.stream_lines = true;
    let mut lines = Vec::new();
    let o = run(s, never(), |_| {}, |l: &[u8]| lines.push(l.to_vec()))
        .await
        .unwrap();
    assert_eq!(lines, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(o.code, Some(0));
}

#[tokio::test]
async fn a_conversation_streams_both_ways_past_the_output_cap() {
    let mut s = spec(
        "sh",
        &[
            "-c",
            "while read l; do echo \"out $l\"; echo \"err $l\" >&2; done",
        ],
    );
    s.stream_lines = true;
    s.max_output = 0;
    let (tx, rx) = mpsc::unbounded_channel();
    let (line_tx, mut line_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let (err_tx, mut err_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let task = tokio::spawn(run_with(
        s,
        Input::Channel(rx),
        never(),
        |_| {},
        move |l: &[u8]| line_tx.send(l.to_vec()).unwrap(),
        Some(move |l: &[u8]| err_tx.send(l.to_vec()).unwrap()),
    ));
    // Each answer arrives before the next question is sent: a real conversation.
    for word in ["a", "b", "c"] {
        tx.send(format!("{word}\n").into_bytes()).unwrap();
        assert_eq!(
            line_rx.recv().await.unwrap(),
            format!("out {word}").into_bytes()
        );
        assert_eq!(
            err_rx.recv().await.unwrap(),
            format!("err {word}").into_bytes()
        );
    }
    drop(tx);
    let o = task.await.unwrap().unwrap();
    assert_eq!((o.code, o.stdout.len()), (Some(0), 0));
}

#[tokio::test]
async fn a_conversation_ends_when_the_program_exits_with_input_open() {
    let s = spec("sh", &["-c", "read l; exit 4"]);
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(b"x\n".to_vec()).unwrap();
    let started = Instant::now();
    let o = run_with(
        s,
        Input::Channel(rx),
        never(),
        |_| {},
        |_: &[u8]| {},
        None::<fn(&[u8])>,
    )
    .await
    .unwrap();
    assert_eq!(o.code, Some(4));
    // No wait for the drain limit: the sender still being alive does not hold the run open.
    assert!(started.elapsed() < DRAIN, "took {:?}", started.elapsed());
    drop(tx);
}

#[tokio::test]
async fn a_flood_is_capped_and_drained() {
    let mut s = spec("sh", &["-c", "head -c 5000000 /dev/zero; echo done >&2"]);
    s.max_output = 1000;
    let o = run_simple(s).await.unwrap();
    assert_eq!(o.code, Some(0));
    assert_eq!(o.stdout.len(), 1000);
    assert_eq!(o.stdout_dropped, 5_000_000 - 1000);
    assert_eq!(o.stderr, b"done\n");
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let mut s = spec("sh", &["-c", "sleep 30 & echo $!; wait"]);
    s.timeout = Some(Duration::from_millis(300));
    let o = run_simple(s).await.unwrap();
    assert_eq!(o.ending, Ending::TimedOut);
    assert_eq!(o.signal, Some(libc::SIGTERM));
    let child: u32 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
    assert!(!alive(o.os_pid));
    assert!(!alive(child));
    assert!(o.duration < Duration::from_secs(5));
}

#[tokio::test]
async fn sigterm_ignored_means_sigkill_after_grace() {
    let mut s = spec("sh", &["-c", "trap '' TERM; echo ready; sleep 30"]);
    s.timeout = Some(Duration::from_millis(200));
    let o = run_simple(s).await.unwrap();
    assert_eq!(o.ending, Ending::TimedOut);
    assert_eq!(o.signal, Some(libc::SIGKILL));
    assert!(!alive(o.os_pid));
}

#[tokio::test]
async fn cancel_kills() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let s = spec("sleep", &["30"]);
    let cancel = async move {
        let _ = rx.await;
    };
    let task = tokio::spawn(async move { run(s, cancel, |_| {}, |_: &[u8]| {}).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    tx.send(()).unwrap();
    let o = task.await.unwrap().unwrap();
    assert_eq!(o.ending, Ending::Cancelled);
    assert!(!alive(o.os_pid));
}

#[cfg(target_os = "linux")]
#[test]
fn the_program_dies_with_the_thread_that_started_it() {
    // Stands for the VM dying: the spawning thread (and its runtime) goes away mid-run.
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let s = spec("sleep", &["30"]);
        let run = run(s, never(), move |pid| tx.send(pid).unwrap(), |_: &[u8]| {});
        // Spawned, driven for a while, then neither finished nor dropped: no kill_on_drop.
        std::mem::forget(rt.spawn(run));
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(200)).await });
        std::mem::forget(rt);
    });
    let pid = rx.recv().unwrap();
    thread.join().unwrap();
    assert!(!alive(pid));
}

#[tokio::test]
async fn background_jobs_do_not_hold_the_run_open() {
    let s = spec("sh", &["-c", "sleep 30 & echo $!"]);
    let o = run_simple(s).await.unwrap();
    assert_eq!(o.ending, Ending::Exited);
    let child: u32 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
    assert!(!alive(child));
    assert!(o.duration < Duration::from_secs(5));
}

#[tokio::test]
async fn timeout_kills_children_that_left_the_group() {
    // `setsid` puts the sleeper in a session (and group) of its own: killpg misses it.
    let mut s = spec("sh", &["-c", "setsid sleep 30 & echo $!; wait"]);
    s.timeout = Some(Duration::from_millis(300));
    let o = run_simple(s).await.unwrap();
    assert_eq!(o.ending, Ending::TimedOut);
    let child: u32 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
    assert!(
        !alive(child),
        "the setsid child {child} outlived the time-out"
    );
}

#[tokio::test]
async fn kill_strays_ends_daemons_the_program_left_after_a_normal_exit() {
    // A daemon in a session of its own, and one double-forked away from it: both re-parented
    // once `sh` exits, so no parent link leads to them; the run's marker does.
    let script = "setsid sleep 1000 & echo $!; (setsid sh -c 'sleep 1000 & echo $!' &); sleep 0.2";
    let mut s = spec("sh", &["-c", script]);
    s.kill_strays = true;
    let o = run_simple(s).await.unwrap();
    assert_eq!((o.ending, o.code), (Ending::Exited, Some(0)));
    let pids: Vec<u32> = String::from_utf8(o.stdout)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "both daemons reported their pid");
    for pid in pids {
        assert!(!alive(pid), "the daemon {pid} outlived the run");
    }

    // Without the option a daemon is the program's own business (a service it starts).
    // (Its output goes elsewhere: a daemon holding the pipes would keep the run draining.)
    // The program ends only once the daemon leads its own session: before `setsid` has run it
    // is still in the program's group, which the run kills when the program ends.
    let script = "setsid sleep 1000 >/dev/null 2>&1 & p=$!; \
                  until [ \"$(cut -d' ' -f6 /proc/$p/stat)\" = \"$p\" ]; do sleep 0.01; done; echo $p";
    let s = spec("sh", &["-c", script]);
    let o = run_simple(s).await.unwrap();
    let pid: u32 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
    assert!(alive(pid));
    kill_tree(pid);
}

#[test]
fn kill_tree_reaches_every_descendant() {
    // sh -> (setsid sh -> sleep), sh -> sleep: three levels, two sessions.
    let mut root = std::process::Command::new("sh")
        .args(["-c", "setsid sh -c 'sleep 30 & wait' & sleep 30 & wait"])
        .spawn()
        .unwrap();
    let pid = root.id();
    let mut found = Vec::new();
    for _ in 0..200 {
        found = descendants(pid);
        if found.len() >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(found.len() >= 3, "descendants of {pid}: {found:?}");
    kill_tree(pid);
    let _ = root.wait();
    for p in found {
        assert!(!alive(p), "{p} survived kill_tree");
    }
}
