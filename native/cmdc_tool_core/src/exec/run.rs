//! Running a program to its end, a time-out or a cancel: [`run`] and [`run_with`].

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, Command};

use super::flow::Gate;
use super::kill::{
    descendants, kill_group, kill_marked, run_marker_value, scopeguard, Live, RUN_MARKER,
};
use super::output::{read_all, CappedBuffer, LineSplitter};
use super::spawn::{check, own_group, spawn, spawn_error};
use super::spec::{Ending, Input, Outcome, Spec};
use crate::error::Result;

fn build_command(spec: &Spec, interactive: bool, marker: Option<&str>) -> Command {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    if spec.clear_env {
        cmd.env_clear();
    }
    for (key, value) in &spec.env {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    if let Some(value) = marker {
        cmd.env(RUN_MARKER, value);
    }
    cmd.stdin(if spec.stdin.is_some() || interactive {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped());
    cmd.stderr(Stdio::piped());
    own_group(&mut cmd);
    #[cfg(target_os = "linux")]
    {
        // Should the whole VM die (SIGKILL, a crash), the kernel kills the program too. The
        // signal is tied to the thread that spawns, so only spawn from long-lived threads (the
        // NIF's runtime workers).
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd
}

fn status_parts(status: &ExitStatus) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    (status.code(), status.signal())
}

/// How long to keep reading the pipes after the program and its group are gone (a process that
/// left the group could hold them open forever).
pub(super) const DRAIN: Duration = Duration::from_millis(500);

/// Runs a program to its end, a time-out, or `cancel` completing, whichever comes first.
///
/// `on_start` gets the OS pid (which is also the process group id) once the program runs;
/// `on_line` gets each stdout line when `spec.stream_lines` is set (only lines within
/// `max_output`). Returns an error when the program could not be started.
pub async fn run<C, S, L>(spec: Spec, cancel: C, on_start: S, on_line: L) -> Result<Outcome>
where
    C: Future<Output = ()>,
    S: FnOnce(u32),
    L: FnMut(&[u8]),
{
    run_with(
        spec,
        Input::Spec,
        cancel,
        on_start,
        on_line,
        None::<fn(&[u8])>,
    )
    .await
}

/// [`run`] with stdin from `input` and, when `on_err_line` is given, stderr streamed line by
/// line too (e.g. to a log). With [`Input::Channel`] the program is a long-lived peer: its
/// stdout lines stream whatever `max_output` says, and the run ends when the program exits
/// (closing the channel only closes its stdin). With `spec.window`, streamed lines flow under
/// that credit window until the program has ended (see `flow`).
pub async fn run_with<C, S, L, E>(
    spec: Spec,
    input: Input,
    cancel: C,
    on_start: S,
    on_line: L,
    on_err_line: Option<E>,
) -> Result<Outcome>
where
    C: Future<Output = ()>,
    S: FnOnce(u32),
    L: FnMut(&[u8]),
    E: FnMut(&[u8]),
{
    check(&spec)?;
    let interactive = matches!(input, Input::Channel(_));
    let started = Instant::now();
    let marker = spec.kill_strays.then(run_marker_value);
    let mut child = spawn(&mut build_command(&spec, interactive, marker.as_deref()))
        .await
        .map_err(|e| spawn_error(&spec, &e))?;
    let pid = child.id().unwrap_or(0);
    let _live = Live::enter(pid);
    on_start(pid);

    let feed = feed(child.stdin.take(), input, spec.stdin.clone());
    let splitter = if spec.stream_lines {
        Some((LineSplitter::new(spec.max_line), on_line))
    } else {
        None
    };
    let err_splitter = on_err_line.map(|f| (LineSplitter::new(spec.max_line), f));
    let window = spec.window.clone();
    let (out_gate, err_gate) = Gate::pair(window.as_ref());
    let out = read_all(
        child.stdout.take(),
        spec.max_output,
        splitter,
        interactive,
        out_gate,
    );
    let err = read_all(
        child.stderr.take(),
        spec.max_output,
        err_splitter,
        interactive,
        err_gate,
    );
    let io = async move {
        tokio::pin!(feed);
        let pair = async { tokio::join!(out, err) };
        tokio::pin!(pair);
        // A conversation's input never ends by itself: once the output is closed, stop feeding.
        let mut fed = false;
        let (out, err) = tokio::select! {
            r = &mut pair => r,
            _ = &mut feed => { fed = true; (&mut pair).await }
        };
        if !fed && !interactive {
            (&mut feed).await;
        }
        ((), out, err)
    };
    tokio::pin!(io);
    tokio::pin!(cancel);

    let deadline = spec.timeout.map(|t| tokio::time::Instant::now() + t);
    let timer = async move {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(timer);

    let mut io_done = None;
    let mut ending = Ending::Exited;
    let mut status = None;
    {
        let wait = child.wait();
        tokio::pin!(wait);
        loop {
            tokio::select! {
                r = &mut io, if io_done.is_none() => io_done = Some(r),
                st = &mut wait => { status = st.ok(); break; }
                _ = &mut timer => { ending = Ending::TimedOut; break; }
                _ = &mut cancel => { ending = Ending::Cancelled; break; }
            }
        }
        if ending != Ending::Exited {
            status = stop(pid, spec.kill_grace, wait, io.as_mut(), &mut io_done).await;
        }
    }
    // Whatever the program left behind in its group goes too (a background job holding the pipes
    // would otherwise keep this run open).
    kill_group(pid, libc::SIGKILL);
    if let Some(value) = &marker {
        // A /proc walk of a few ms at most: off the async workers.
        let value = value.clone();
        let _ = tokio::task::spawn_blocking(move || kill_marked(&value)).await;
    }
    if let Some(window) = &window {
        window.open();
    }
    let (_, out, err) = match io_done {
        Some(r) => r,
        None => match tokio::time::timeout(DRAIN, &mut io).await {
            Ok(r) => r,
            Err(_) => ((), CappedBuffer::new(0), CappedBuffer::new(0)),
        },
    };
    let (code, signal) = status.as_ref().map(status_parts).unwrap_or((None, None));
    Ok(Outcome {
        os_pid: pid,
        ending,
        code,
        signal,
        stdout: out.data,
        stderr: err.data,
        stdout_dropped: out.dropped,
        stderr_dropped: err.dropped,
        duration: started.elapsed(),
    })
}

/// Writes the program's stdin: `input`'s chunks as they come (a conversation), or `data` then
/// end of file.
async fn feed(stdin: Option<ChildStdin>, input: Input, data: Option<Vec<u8>>) {
    match (stdin, input) {
        (Some(mut pipe), Input::Channel(mut rx)) => {
            while let Some(chunk) = rx.recv().await {
                if pipe.write_all(&chunk).await.is_err() || pipe.flush().await.is_err() {
                    break;
                }
            }
            let _ = pipe.shutdown().await;
        }
        (Some(mut pipe), Input::Spec) => {
            if let Some(data) = data {
                // A program that exits without reading gives EPIPE: not an error of the run.
                let _ = pipe.write_all(&data).await;
                let _ = pipe.shutdown().await;
            }
        }
        (None, _) => {}
    }
}

/// Stops a program that timed out or was cancelled: SIGTERM to its group, SIGKILL after
/// `grace`; its output keeps being read meanwhile (into `io_done`). Its exit status.
async fn stop<W, I>(
    pid: u32,
    grace: Duration,
    mut wait: Pin<&mut W>,
    mut io: Pin<&mut I>,
    io_done: &mut Option<I::Output>,
) -> Option<ExitStatus>
where
    W: Future<Output = io::Result<ExitStatus>>,
    I: Future,
{
    // Walked now: once the program dies, descendants that left its group (setsid) are
    // re-parented and cannot be found any more.
    let _strays = scopeguard(descendants(pid));
    // Not reaped yet, so the group id cannot have been reused.
    kill_group(pid, libc::SIGTERM);
    let grace = tokio::time::sleep(grace);
    tokio::pin!(grace);
    loop {
        tokio::select! {
            r = &mut io, if io_done.is_none() => *io_done = Some(r),
            st = &mut wait => return st.ok(),
            _ = &mut grace => {
                kill_group(pid, libc::SIGKILL);
                return wait.await.ok();
            }
        }
    }
}
