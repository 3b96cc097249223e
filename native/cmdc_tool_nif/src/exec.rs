//! NIFs for `CMDC.Tool.Exec`: start a program on the NIF's tokio runtime and report to the
//! caller with messages, never blocking a scheduler. The logic lives in `cmdc_tool_core::exec`.
//!
//! Messages sent to the process that called `exec_start` (`id` is the integer it returned):
//!   * `{:cmdc_exec, id, {:started, os_pid}}`
//!   * `{:cmdc_exec, id, {:line, binary}}` (stdout lines, when streaming)
//!   * `{:cmdc_exec, id, {:stderr_line, binary}}` (stderr lines, when `stream_stderr` is set)
//!   * `{:cmdc_exec, id, {:stderr_dropped_lines, n}}` (with a `window`: stderr lines dropped
//!     for want of credits since the last stderr message; before the next one, or the end)
//!   * `{:cmdc_exec, id, {:exit, %{...}}}` or `{:cmdc_exec, id, {:error, message}}`, always last.
//!
//! The handle is a resource: `exec_cancel` kills the process group; so do the owner's death
//! (a resource monitor) and the handle being garbage collected (its `Drop`). With `interactive`
//! set, stdin stays open: `exec_write` sends bytes to it and `exec_close_stdin` closes it.
//! With `window` set, streamed lines flow under a credit window (`cmdc_tool_core::exec::Window`):
//! the owner returns credits with `exec_ack` as it consumes `:line` and `:stderr_line` messages.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use cmdc_tool_core::exec::{self, Ending, Input, Outcome, Spec, Window};
use rustler::{Atom, Binary, Encoder, Env, LocalPid, Monitor, NifMap, OwnedEnv, ResourceArc, Term};
use tokio::sync::{mpsc, watch};

use crate::atoms;
use crate::error::{Error, Result};
use crate::options::{self, Options};
use crate::twins::twin_nifs;

/// Bytes of stdin (or of one `exec_write`) a normal scheduler copies; more answers `:yield`
/// (the dirty twin copies it).
const NORMAL_STDIN_BYTES: usize = 64 * 1024;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A running program. Dropping the last reference (garbage collection) cancels it.
pub struct ExecHandle {
    id: u64,
    cancel: watch::Sender<bool>,
    /// The program's stdin, for an interactive run (`None` once closed).
    input: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    /// The credit window of its streamed lines, when started with one.
    window: Option<Window>,
}

#[rustler::resource_impl]
impl rustler::Resource for ExecHandle {
    const IMPLEMENTS_DOWN: bool = true;

    fn down<'a>(&'a self, _env: Env<'a>, _pid: LocalPid, _monitor: Monitor) {
        // The owner died: the program and everything it started go with it.
        let _ = self.cancel.send(true);
    }
}

#[derive(NifMap)]
struct ExecOpts {
    program: String,
    args: Vec<String>,
    cwd: Option<String>,
    env: Vec<(String, Option<String>)>,
    clear_env: bool,
    timeout_ms: Option<u64>,
    kill_grace_ms: u64,
    max_output: u64,
    stream_lines: bool,
    max_line: u64,
    interactive: bool,
    stream_stderr: bool,
    /// Lines (stdout and stderr) streamed and not yet acknowledged; `nil`: no flow control.
    window: Option<u64>,
    /// Bytes of those lines (`nil`: 16 MiB).
    window_bytes: Option<u64>,
    /// Kill what the program left running once it ended (`Spec::kill_strays`).
    kill_strays: bool,
}

impl Options<'_> for ExecOpts {
    const NIF: &'static str = "exec_start";
    const EXPECTED: &'static str = "program (string), args (list of strings), cwd (string or \
        nil), env (list of {name, value or nil}), clear_env, stream_lines, interactive, \
        stream_stderr, kill_strays (booleans), timeout_ms (integer or nil), kill_grace_ms, max_output, \
        max_line (non-negative integers), window, window_bytes (positive integers or nil)";
}

/// The core's spec, without stdin (given apart: it is the one part copied on a dirty
/// scheduler when large).
impl From<ExecOpts> for Spec {
    fn from(opts: ExecOpts) -> Self {
        Spec {
            program: opts.program,
            args: opts.args,
            cwd: opts.cwd.map(PathBuf::from),
            env: opts.env,
            clear_env: opts.clear_env,
            stdin: None,
            timeout: opts.timeout_ms.map(Duration::from_millis),
            kill_grace: Duration::from_millis(opts.kill_grace_ms),
            max_output: usize::try_from(opts.max_output).unwrap_or(usize::MAX),
            stream_lines: opts.stream_lines,
            max_line: usize::try_from(opts.max_line).unwrap_or(usize::MAX).max(1),
            window: opts.window.map(|n| {
                let bytes = opts.window_bytes.unwrap_or(16 << 20);
                Window::new(to_usize(n), to_usize(bytes))
            }),
            kill_strays: opts.kill_strays,
        }
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn bytes<'a>(env: Env<'a>, data: &[u8]) -> Term<'a> {
    let mut bin = rustler::NewBinary::new(env, data.len());
    bin.as_mut_slice().copy_from_slice(data);
    Binary::from(bin).to_term(env)
}

fn outcome_term<'a>(env: Env<'a>, o: &Outcome) -> Term<'a> {
    let status: Atom = match o.ending {
        Ending::Exited => atoms::exited(),
        Ending::TimedOut => atoms::timeout(),
        Ending::Cancelled => atoms::cancelled(),
    };
    let keys = [
        atoms::status().encode(env),
        atoms::code().encode(env),
        atoms::signal().encode(env),
        atoms::stdout().encode(env),
        atoms::stderr().encode(env),
        atoms::stdout_dropped().encode(env),
        atoms::stderr_dropped().encode(env),
        atoms::duration_us().encode(env),
        atoms::os_pid().encode(env),
    ];
    let values = [
        status.encode(env),
        o.code.encode(env),
        o.signal.encode(env),
        bytes(env, &o.stdout),
        bytes(env, &o.stderr),
        o.stdout_dropped.encode(env),
        o.stderr_dropped.encode(env),
        (o.duration.as_micros() as u64).encode(env),
        o.os_pid.encode(env),
    ];
    Term::map_from_term_arrays(env, &keys, &values).expect("distinct atom keys")
}

/// Sends `{:cmdc_exec, id, payload}`; a dead recipient is not an error.
fn send<F>(msg_env: &mut OwnedEnv, pid: &LocalPid, id: u64, payload: F)
where
    F: for<'a> FnOnce(Env<'a>) -> Term<'a>,
{
    let _ = msg_env.send_and_clear(pid, |env| {
        (atoms::cmdc_exec(), id, payload(env)).encode(env)
    });
}

/// Tells the owner how many stderr lines the window dropped since the last stderr message.
fn dropped_notice(msg_env: &mut OwnedEnv, pid: &LocalPid, id: u64, window: Option<&Window>) {
    let dropped = window.map_or(0, Window::take_dropped);
    if dropped > 0 {
        send(msg_env, pid, id, |env| {
            (atoms::stderr_dropped_lines(), dropped).encode(env)
        });
    }
}

async fn drive(
    spec: Spec,
    input: Input,
    stream_stderr: bool,
    pid: LocalPid,
    id: u64,
    mut cancel: watch::Receiver<bool>,
) {
    let mut msg_env = OwnedEnv::new();
    let cancelled = async move {
        // Cancelled explicitly, or the handle was dropped (sender gone).
        while !*cancel.borrow_and_update() {
            if cancel.changed().await.is_err() {
                break;
            }
        }
    };
    let mut line_env = OwnedEnv::new();
    let mut err_env = OwnedEnv::new();
    let window = spec.window.clone();
    let on_err_line = stream_stderr.then_some(|line: &[u8]| {
        dropped_notice(&mut err_env, &pid, id, window.as_ref());
        send(&mut err_env, &pid, id, |env| {
            (atoms::stderr_line(), bytes(env, line)).encode(env)
        })
    });
    let result = exec::run_with(
        spec,
        input,
        cancelled,
        |os_pid| {
            send(&mut msg_env, &pid, id, |env| {
                (atoms::started(), os_pid).encode(env)
            })
        },
        |line: &[u8]| {
            send(&mut line_env, &pid, id, |env| {
                (atoms::line(), bytes(env, line)).encode(env)
            })
        },
        on_err_line,
    )
    .await;
    let mut msg_env = OwnedEnv::new();
    dropped_notice(&mut msg_env, &pid, id, window.as_ref());
    match result {
        Ok(outcome) => send(&mut msg_env, &pid, id, |env| {
            (atoms::exit(), outcome_term(env, &outcome)).encode(env)
        }),
        Err(e) => send(&mut msg_env, &pid, id, |env| Error::from(e).to_tuple(env)),
    }
}

twin_nifs! {
    /// Starts a program; answers `{:ok, {handle, id}}` at once (or `{:error, message}` when the
    /// runtime cannot start). Everything else arrives as messages. A large stdin answers `:yield`:
    /// copying it is the only unbounded work here, done by `exec_start_dirty`.
    fn exec_start / exec_start_dirty<'a>(
        env: Env,
        opts: Term<'a>,
        stdin: Option<Binary<'a>>,
    ) -> (Result<(ResourceArc<ExecHandle>, u64)>),
    |dirty| {
        if !dirty && stdin.as_ref().is_some_and(|b| b.len() > NORMAL_STDIN_BYTES) {
            return Err(Error::Yield);
        }
        start(env, opts, stdin)
    }
}

fn start<'a>(
    env: Env<'a>,
    opts: Term<'a>,
    stdin: Option<Binary<'a>>,
) -> Result<(ResourceArc<ExecHandle>, u64)> {
    let opts = options::decode::<ExecOpts>(opts)?;
    let runtime = crate::runtime::get()?;
    let (interactive, stream_stderr) = (opts.interactive, opts.stream_stderr);
    let spec = Spec {
        stdin: stdin.map(|b| b.as_slice().to_vec()),
        ..Spec::from(opts)
    };
    let (input, sender) = if interactive {
        let (tx, rx) = mpsc::unbounded_channel();
        (Input::Channel(rx), Some(tx))
    } else {
        (Input::Spec, None)
    };
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = watch::channel(false);
    let handle = ResourceArc::new(ExecHandle {
        id,
        cancel: tx,
        input: Mutex::new(sender),
        window: spec.window.clone(),
    });
    let owner = env.pid();
    if env.monitor(&handle, &owner).is_none() {
        // The owner is already gone.
        let _ = handle.cancel.send(true);
    }
    let task = runtime.spawn(drive(spec, input, stream_stderr, owner, id, rx));
    // A panic inside the run must still end in a final message.
    runtime.spawn(async move {
        if let Err(e) = task.await {
            let mut msg_env = OwnedEnv::new();
            let error = Error::process(format!("exec failed internally: {e}"));
            send(&mut msg_env, &owner, id, |env| error.to_tuple(env));
        }
    });
    Ok((handle.clone(), handle.id))
}

/// Kills the program's process group (SIGTERM, then SIGKILL after the grace period). The final
/// `{:exit, %{status: :cancelled}}` message follows, unless the program had already ended.
#[rustler::nif]
fn exec_cancel(handle: ResourceArc<ExecHandle>) -> Atom {
    let _ = handle.cancel.send(true);
    atoms::ok()
}

twin_nifs! {
    /// Writes bytes to an interactive program's stdin (queued, written in order): `{:ok, bytes}`, or
    /// `{:error, message}` when stdin is closed or the run is not interactive. More than
    /// [`NORMAL_STDIN_BYTES`] answers `:yield`: `exec_write_dirty` copies them.
    fn exec_write / exec_write_dirty(handle: ResourceArc<ExecHandle>, data: Binary) -> (Result<usize>),
    |dirty| {
        if !dirty && data.len() > NORMAL_STDIN_BYTES {
            return Err(Error::Yield);
        }
        write(&handle, data)
    }
}

fn write(handle: &ExecHandle, data: Binary) -> Result<usize> {
    let guard = match handle.input.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    match guard.as_ref() {
        Some(tx) if tx.send(data.as_slice().to_vec()).is_ok() => Ok(data.len()),
        Some(_) => Err(Error::process("the program has ended: its stdin is closed")),
        None => Err(Error::process(
            "stdin is closed (or the program was not started with stdin: :pipe)",
        )),
    }
}

/// Returns `n` credits of a run started with a `window`: the owner consumed `n` more `:line` /
/// `:stderr_line` messages. `{:ok, credits_returned}` (never more than were taken: the window
/// does not grow), or `{:error, message}` when the run has no window or `n` is not a
/// non-negative integer. A lock and a counter: always a normal scheduler.
#[rustler::nif]
fn exec_ack(handle: ResourceArc<ExecHandle>, n: Term) -> Result<usize> {
    let n: u64 = n.decode().map_err(|_| {
        Error::Message(format!(
            "exec_ack: expected a non-negative integer count of messages, got: {}",
            crate::term::shown(n)
        ))
    })?;
    match &handle.window {
        Some(window) => Ok(window.ack(to_usize(n))),
        None => Err(Error::Message(
            "exec_ack: this program was not started with a window (the :window option)".into(),
        )),
    }
}

/// Kills every running program and what it started (`CMDC.Tool.Exec.kill_all/0`); walks
/// `/proc`, hence a dirty scheduler.
#[rustler::nif(schedule = "DirtyIo")]
fn exec_kill_all() -> usize {
    exec::kill_all()
}

/// Closes an interactive program's stdin (the program sees end of file once queued bytes are
/// written). Closing twice does nothing.
#[rustler::nif]
fn exec_close_stdin(handle: ResourceArc<ExecHandle>) -> Atom {
    let mut guard = match handle.input.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    guard.take();
    atoms::ok()
}
