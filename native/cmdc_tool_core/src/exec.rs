//! Running external programs for tools: no shell, a process group per run, time-outs and
//! cancellation that kill the whole group (SIGTERM, then SIGKILL after a grace period), capped
//! output, stdout streamed line by line, and the child always reaped.
//!
//! Everything here is plain Rust on tokio; the NIF crate (`cmdc_tool_nif::exec`) owns the
//! runtime, turns [`Spec`] from terms and sends the events and the [`Outcome`] as messages.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::mpsc;

/// Where a program's stdin comes from.
#[derive(Debug, Default)]
pub enum Input {
    /// `spec.stdin`'s bytes then end of file, or `/dev/null` when it is `None`.
    #[default]
    Spec,
    /// A long-lived conversation (a protocol server): each chunk received is written as it comes;
    /// stdin closes when every sender is gone. Streamed lines are then not limited by
    /// `max_output` (which only bounds what is kept).
    Channel(mpsc::UnboundedReceiver<Vec<u8>>),
}

use crate::error::{Error, Result};

/// What to run and under which limits.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The program: a name looked up on `PATH`, or a path. Never interpreted by a shell.
    pub program: String,
    pub args: Vec<String>,
    /// Working directory (checked before starting: a missing one is a clear error).
    pub cwd: Option<PathBuf>,
    /// Variables to set (`Some`) or remove (`None`), applied after `clear_env`.
    pub env: Vec<(String, Option<String>)>,
    /// Start from an empty environment.
    pub clear_env: bool,
    /// Bytes written to the program's stdin, which is then closed; `None` gives `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Kill the group after this long.
    pub timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// Bytes kept of stdout and of stderr each; the rest is read and dropped, so the program
    /// never blocks on a full pipe.
    pub max_output: usize,
    /// Report stdout line by line through the `on_line` callback of [`run`].
    pub stream_lines: bool,
    /// Longer lines are reported in pieces of this many bytes.
    pub max_line: usize,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            program: String::new(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            clear_env: false,
            stdin: None,
            timeout: None,
            kill_grace: Duration::from_secs(2),
            max_output: 1 << 20,
            stream_lines: false,
            max_line: 16 * 1024,
        }
    }
}

/// Why the program stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited (or was killed by a signal it did not get from us).
    Exited,
    /// The time-out fired and the group was killed.
    TimedOut,
    /// The caller cancelled (or went away) and the group was killed.
    Cancelled,
}

/// The result of one run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub os_pid: u32,
    pub ending: Ending,
    /// Exit code, when the program exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Bytes read but not kept because of `max_output`.
    pub stdout_dropped: u64,
    pub stderr_dropped: u64,
    pub duration: Duration,
}

/// Keeps the first `cap` bytes written to it and counts the rest.
#[derive(Debug, Default)]
pub struct CappedBuffer {
    pub data: Vec<u8>,
    pub dropped: u64,
    cap: usize,
}

impl CappedBuffer {
    pub fn new(cap: usize) -> Self {
        CappedBuffer {
            data: Vec::new(),
            dropped: 0,
            cap,
        }
    }

    /// Appends what fits; returns the part that was kept.
    pub fn push<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        let room = self.cap.saturating_sub(self.data.len());
        let kept = &chunk[..chunk.len().min(room)];
        self.data.extend_from_slice(kept);
        self.dropped += (chunk.len() - kept.len()) as u64;
        kept
    }

    pub fn is_full(&self) -> bool {
        self.data.len() >= self.cap
    }
}

/// Splits a byte stream into lines (without the `\n`, and without a `\r` before it); lines
/// longer than `max` come out in pieces of `max` bytes.
#[derive(Debug)]
pub struct LineSplitter {
    pending: Vec<u8>,
    max: usize,
}

impl LineSplitter {
    pub fn new(max: usize) -> Self {
        LineSplitter {
            pending: Vec::new(),
            max: max.max(1),
        }
    }

    /// Feeds a chunk and returns the complete lines it finished.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.pending.extend_from_slice(&rest[..i]);
            self.split_long(&mut lines);
            let mut line = std::mem::take(&mut self.pending);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            lines.push(line);
            rest = &rest[i + 1..];
        }
        self.pending.extend_from_slice(rest);
        self.split_long(&mut lines);
        lines
    }

    fn split_long(&mut self, lines: &mut Vec<Vec<u8>>) {
        while self.pending.len() > self.max {
            let tail = self.pending.split_off(self.max);
            lines.push(std::mem::replace(&mut self.pending, tail));
        }
    }

    /// The unterminated last line, if any.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        if self.pending.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.pending))
        }
    }
}

/// Why a program could not be started, as a message a person or a model can act on.
/// Starts `cmd`, retrying for up to about half a second while the program file is busy.
///
/// `ETXTBSY` ("Text file busy") means some process holds the executable open for writing. A
/// script or venv launcher written just before it runs hits this whenever another thread of the
/// VM forks in between: the child holds a copy of the writer's descriptor until it execs. The
/// window is microseconds, so a short backoff turns a spurious failure into a started program.
pub async fn spawn(cmd: &mut Command) -> io::Result<tokio::process::Child> {
    let mut pause = Duration::from_millis(2);
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && pause.as_millis() <= 256 => {
                // Waits without holding a runtime worker thread.
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            started => return started,
        }
    }
}

pub fn spawn_error(spec: &Spec, e: &io::Error) -> Error {
    Error::Process(match e.kind() {
        io::ErrorKind::NotFound => {
            if spec.program.contains('/') {
                format!("executable not found: {}", spec.program)
            } else {
                format!("executable not found: {} (not on PATH)", spec.program)
            }
        }
        io::ErrorKind::PermissionDenied => {
            format!("permission denied: {} is not executable", spec.program)
        }
        _ => format!("cannot start {}: {}", spec.program, e),
    })
}

/// Checks what can be checked before starting: a program name and an existing working directory.
pub fn check(spec: &Spec) -> Result<()> {
    if spec.program.is_empty() {
        return Err(Error::Invalid("no program given".to_string()));
    }
    if spec.program.as_bytes().contains(&0) || spec.args.iter().any(|a| a.as_bytes().contains(&0)) {
        return Err(Error::Invalid(
            "the program or an argument contains a NUL byte".to_string(),
        ));
    }
    if let Some(dir) = &spec.cwd {
        if !dir.is_dir() {
            return Err(Error::Invalid(format!(
                "working directory does not exist: {}",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Sends `signal` to the whole process group `pgid`; a group that is already gone is fine.
pub fn kill_group(pgid: u32, signal: i32) {
    if pgid > 1 {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid as libc::pid_t, signal);
        }
    }
}

fn signal_pid(pid: u32, signal: i32) {
    if pid > 1 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(pid as libc::pid_t, signal);
        }
    }
}

/// Every live process whose chain of parents leads to `root` (not `root` itself), parents
/// before children. Read from `/proc`; empty where there is none.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut children: std::collections::HashMap<u32, Vec<u32>> = Default::default();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = parent_of(pid) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if !out.contains(&c) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// Whether `/proc` shows `pid` as exited but not yet reaped (a zombie). A process killed while
/// another of its threads is still exiting is a zombie before `waitpid` can reap it, so a
/// parent's `try_wait` still says "running" then. `false` where there is no `/proc` to ask.
pub fn is_zombie(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => matches!(
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next()),
            Some("Z" | "X")
        ),
        Err(_) => false,
    }
}

/// The parent of a live (not zombie) process, from `/proc/{pid}/stat`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.next()?.parse().ok()
}

/// Kills `root`, its process group and every descendant, including those that left the group
/// (`setsid`, `start_new_session=True`) and their groups. The tree is walked *before* anything
/// is killed (a killed parent's children are re-parented and can no longer be found) and each
/// process found is stopped first, so none can fork past the walk.
pub fn kill_tree(root: u32) {
    if root <= 1 {
        return;
    }
    signal_pid(root, libc::SIGSTOP);
    let mut found: Vec<u32> = Vec::new();
    // Walk until a pass finds nothing new: a process may fork between a read and its stop.
    for _ in 0..8 {
        let fresh: Vec<u32> = descendants(root)
            .into_iter()
            .filter(|p| !found.contains(p))
            .collect();
        if fresh.is_empty() {
            break;
        }
        for &p in &fresh {
            signal_pid(p, libc::SIGSTOP);
        }
        found.extend(fresh);
    }
    kill_group(root, libc::SIGKILL);
    signal_pid(root, libc::SIGKILL);
    for &p in &found {
        // A descendant that leads its own group (setsid) may have started more in that group.
        // SAFETY: getpgid has no memory-safety preconditions.
        let pgid = unsafe { libc::getpgid(p as libc::pid_t) };
        if pgid == p as libc::pid_t {
            kill_group(p, libc::SIGKILL);
        }
        signal_pid(p, libc::SIGKILL);
    }
}

/// Kills the tree of [`kill_tree`] when dropped: a started process cannot outlive the scope that
/// owns it, whichever way that scope ends (result, error, time-out, cancel).
pub struct TreeGuard(pub u32);

impl Drop for TreeGuard {
    fn drop(&mut self) {
        kill_tree(self.0);
    }
}

/// The programs started by [`run_with`] and not yet reaped, by pid (each leads its own group):
/// what [`kill_all`] reaches when the host is about to exit.
static LIVE: std::sync::Mutex<std::collections::BTreeSet<u32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

fn live() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<u32>> {
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Keeps a started program in [`LIVE`] until the run ends (it is reaped by then).
struct Live(u32);

impl Live {
    fn enter(pid: u32) -> Self {
        live().insert(pid);
        Live(pid)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        live().remove(&self.0);
    }
}

/// Kills every program [`run_with`] started that is still running, with all it started
/// ([`kill_tree`]), and returns how many there were. For a host about to exit: a cancel asks
/// each run to stop and may not be done in time, and the kernel's parent-death signal reaches
/// the program alone, not its children.
pub fn kill_all() -> usize {
    let pids: Vec<u32> = live().iter().copied().collect();
    for &pid in &pids {
        // Still in LIVE, so not reaped: the pid and its group cannot have been reused.
        kill_tree(pid);
    }
    pids.len()
}

/// Kills each process of a walked tree when dropped (after the grace period of a time-out).
fn scopeguard(pids: Vec<u32>) -> impl Drop {
    struct Strays(Vec<u32>);
    impl Drop for Strays {
        fn drop(&mut self) {
            for &p in &self.0 {
                signal_pid(p, libc::SIGKILL);
            }
        }
    }
    Strays(pids)
}

/// Starts `cmd` with stdin, stdout and stderr piped, in a group of its own ([`own_group`]).
pub async fn spawn_piped(cmd: &mut Command) -> io::Result<tokio::process::Child> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawn(own_group(cmd)).await
}

/// What every process this crate starts gets: a process group of its own (led by the child, so
/// `killpg` reaches what it starts), a kill when the owning `Child` is dropped (tokio reaps it),
/// and none of the VM's descriptors but its own stdin, stdout and stderr: an inherited pipe end
/// (another program's stdin, say) would keep that program from ever reading end of file.
pub fn own_group(cmd: &mut Command) -> &mut Command {
    #[cfg(target_os = "linux")]
    // SAFETY: one system call, async-signal-safe, touching no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            // Close-on-exec rather than closed: the standard library reports a failed exec
            // through a descriptor of its own. Kernels before 5.11 refuse the flag; then
            // descriptors stay as the VM opened them (the VM marks most close-on-exec).
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
    cmd.process_group(0).kill_on_drop(true)
}

fn build_command(spec: &Spec, interactive: bool) -> Command {
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

async fn read_all<R, F>(
    reader: Option<R>,
    cap: usize,
    mut lines: Option<(LineSplitter, F)>,
    stream_all: bool,
) -> CappedBuffer
where
    R: AsyncRead + Unpin,
    F: FnMut(&[u8]),
{
    let mut buf = CappedBuffer::new(cap);
    let Some(mut reader) = reader else { return buf };
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let full_before = buf.is_full();
                let kept = buf.push(&chunk[..n]);
                let streamed = if stream_all { &chunk[..n] } else { kept };
                if let Some((splitter, on_line)) = lines.as_mut() {
                    if stream_all || !full_before {
                        for line in splitter.push(streamed) {
                            on_line(&line);
                        }
                    }
                }
            }
        }
    }
    if let Some((mut splitter, mut on_line)) = lines {
        if let Some(last) = splitter.finish() {
            on_line(&last);
        }
    }
    buf
}

fn status_parts(status: &ExitStatus) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    (status.code(), status.signal())
}

/// How long to keep reading the pipes after the program and its group are gone (a process that
/// left the group could hold them open forever).
const DRAIN: Duration = Duration::from_millis(500);

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
/// (closing the channel only closes its stdin).
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
    let mut child = spawn(&mut build_command(&spec, interactive))
        .await
        .map_err(|e| spawn_error(&spec, &e))?;
    let pid = child.id().unwrap_or(0);
    let _live = Live::enter(pid);
    on_start(pid);

    let stdin = child.stdin.take();
    let stdin_data = spec.stdin.clone();
    let feed = async move {
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
                if let Some(data) = stdin_data {
                    // A program that exits without reading gives EPIPE: not an error of the run.
                    let _ = pipe.write_all(&data).await;
                    let _ = pipe.shutdown().await;
                }
            }
            (None, _) => {}
        }
    };
    let splitter = if spec.stream_lines {
        Some((LineSplitter::new(spec.max_line), on_line))
    } else {
        None
    };
    let err_splitter = on_err_line.map(|f| (LineSplitter::new(spec.max_line), f));
    let out = read_all(child.stdout.take(), spec.max_output, splitter, interactive);
    let err = read_all(
        child.stderr.take(),
        spec.max_output,
        err_splitter,
        interactive,
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
            // Walked now: once the program dies, descendants that left its group (setsid) are
            // re-parented and cannot be found any more.
            let strays = descendants(pid);
            let _strays = scopeguard(strays);
            // Not reaped yet, so the group id cannot have been reused.
            kill_group(pid, libc::SIGTERM);
            let grace = tokio::time::sleep(spec.kill_grace);
            tokio::pin!(grace);
            loop {
                tokio::select! {
                    r = &mut io, if io_done.is_none() => io_done = Some(r),
                    st = &mut wait => { status = st.ok(); break; }
                    _ = &mut grace => {
                        kill_group(pid, libc::SIGKILL);
                        status = wait.await.ok();
                        break;
                    }
                }
            }
        }
    }
    // Whatever the program left behind in its group goes too (a background job holding the pipes
    // would otherwise keep this run open).
    kill_group(pid, libc::SIGKILL);
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

/// Helpers for tests that check processes are gone.
#[cfg(test)]
pub(crate) mod testing {
    use std::time::Duration;

    /// Whether `pid` still runs, given up to 2 s to finish dying (a signal is delivered
    /// asynchronously). A zombie is dead for our purposes (its parent may not be us).
    pub fn alive(pid: u32) -> bool {
        for _ in 0..200 {
            if !running(pid) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    pub fn running(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                !state.starts_with('Z')
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::alive;
    use super::*;

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
}
