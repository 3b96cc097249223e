//! Script tools, natively managed: the NIF's tokio runtime owns the worker processes.
//!
//! * `script_load/2` reads script descriptions: the `{name}.tool.json` cache when it is current,
//!   else the Python worker's `describe` mode (one interpreter for many scripts, a time limit per
//!   script) or the native PowerShell reader, and rewrites the cache.
//! * `script_call/4` runs one call in a persistent worker per script: started on first use, kept
//!   warm, replaced after a crash, restarted when the script's mtime changes, a small pool when
//!   calls overlap. A time-out, `script_cancel/1` or the death of the calling process drops the
//!   call, and dropping a busy worker kills its whole process group.
//!
//! Every NIF here returns at once; results arrive as messages `{:cmdc_script, handle, event}`
//! sent with `OwnedEnv::send_and_clear` from runtime threads, never from a scheduler.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use cmdc_tool_core::scripts::{self as core, Cached, Kind};
use rustler::{Binary, Encoder, Env, LocalPid, NifMap, OwnedEnv, ResourceArc, Term};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, Semaphore};

use crate::atoms;
use crate::json::binary;

mod msg {
    rustler::atoms! {
        cmdc_script,
        progress,
        loaded,
        not_running,
    }
}

/// How long an interpreter may take to start a describer.
const STARTUP_LIMIT: Duration = Duration::from_secs(60);

/// Bytes of a worker's stderr kept for error messages (the tail).
const TAIL_BYTES: usize = 16 * 1024;

// ------------------------------------------------------------------------------------------------
// call handles

/// One pending call or load: the message tag the caller matches on, and the way to cancel it.
/// The caller is monitored: when it exits, its call is cancelled and the worker killed.
pub struct Handle {
    cancel: Mutex<Option<oneshot::Sender<&'static str>>>,
}

#[rustler::resource_impl]
impl rustler::Resource for Handle {
    const IMPLEMENTS_DOWN: bool = true;

    fn down<'a>(&'a self, _env: Env<'a>, _pid: LocalPid, _monitor: rustler::Monitor) {
        self.fire("the calling process exited");
    }
}

impl Handle {
    fn fire(&self, reason: &'static str) -> bool {
        match self.cancel.lock().ok().and_then(|mut c| c.take()) {
            Some(tx) => tx.send(reason).is_ok(),
            None => false,
        }
    }
}

fn new_handle(env: Env, pid: &LocalPid) -> (ResourceArc<Handle>, oneshot::Receiver<&'static str>) {
    let (tx, rx) = oneshot::channel();
    let handle = ResourceArc::new(Handle {
        cancel: Mutex::new(Some(tx)),
    });
    let _ = handle.monitor(Some(env), pid);
    (handle, rx)
}

/// Sends `{:cmdc_script, handle, event}` to `pid`.
struct Reply {
    env: OwnedEnv,
    pid: LocalPid,
    handle: ResourceArc<Handle>,
}

impl Reply {
    fn send<F>(&mut self, event: F)
    where
        F: for<'a> FnOnce(Env<'a>) -> Term<'a>,
    {
        let handle = self.handle.clone();
        let _ = self.env.send_and_clear(&self.pid, move |env| {
            (msg::cmdc_script(), handle, event(env)).encode(env)
        });
    }

    fn error(&mut self, payload: Vec<u8>) {
        self.send(move |env| (atoms::error(), binary(env, &payload)).encode(env));
    }
}

// ------------------------------------------------------------------------------------------------
// options

#[derive(NifMap)]
pub struct CallOpts {
    /// The worker script (`priv/python/cmdc_worker.py`).
    pub worker: String,
    /// The PowerShell runner (`priv/powershell/cmdc_runner.ps1`).
    pub ps_runner: String,
    /// Fallback interpreter when there is no venv and no python3 on PATH.
    pub python: Option<String>,
    pub timeout_ms: u64,
    /// Workers per script at most (calls beyond wait for one).
    pub max_workers: u64,
    /// The caller's PATH (`System.get_env("PATH")`): where python3 and pwsh are looked for, and
    /// the PATH workers get.
    pub path_env: Option<String>,
    /// An idle worker older than this is stopped (the next call starts a fresh one).
    pub idle_timeout_ms: u64,
}

#[derive(NifMap)]
pub struct LoadOpts {
    pub worker: String,
    pub python: Option<String>,
    /// Time limit for reading one script.
    pub describe_timeout_ms: u64,
    /// `false`: ignore and do not write `{name}.tool.json`.
    pub cache: bool,
    pub path_env: Option<String>,
}

// ------------------------------------------------------------------------------------------------
// interpreters

/// The PATH to search: the caller's view when given (the VM's environment can differ from the
/// OS process's), else the process's.
fn path_var(given: Option<&str>) -> Option<OsString> {
    match given {
        Some(p) => Some(OsString::from(p)),
        None => std::env::var_os("PATH"),
    }
}

/// The interpreter for scripts in `dir`. A version-manager shim (pyenv, asdf) costs ~100 ms per
/// start, so it is resolved once to the interpreter it runs (per folder, as shims read
/// `.python-version` files).
async fn python_for(
    dir: &Path,
    configured: Option<&str>,
    path_env: Option<&str>,
) -> Result<PathBuf, String> {
    static RESOLVED: OnceLock<Mutex<HashMap<(PathBuf, PathBuf), PathBuf>>> = OnceLock::new();
    let found = core::find_python(
        dir,
        path_var(path_env).as_deref(),
        configured.map(Path::new),
    )?;
    let shim = found
        .components()
        .any(|c| c.as_os_str() == "shims" || c.as_os_str() == ".asdf");
    if !shim {
        return Ok(found);
    }
    let cache = RESOLVED.get_or_init(Default::default);
    let key = (found.clone(), dir.to_path_buf());
    if let Some(real) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(real);
    }
    let mut probe = Command::new(&found);
    if let Some(p) = path_env {
        probe.env("PATH", p);
    }
    let probe = probe
        .args(["-c", "import sys; sys.stdout.write(sys.executable)"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output();
    let real = match tokio::time::timeout(Duration::from_secs(20), probe).await {
        Ok(Ok(out)) if out.status.success() && !out.stdout.is_empty() => {
            PathBuf::from(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        _ => found,
    };
    if let Ok(mut c) = cache.lock() {
        c.insert(key, real.clone());
    }
    Ok(real)
}

// ------------------------------------------------------------------------------------------------
// workers

#[derive(Default)]
struct Tail(Vec<u8>);

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
        if self.0.len() > TAIL_BYTES {
            let cut = self.0.len() - TAIL_BYTES;
            self.0.drain(..cut);
        }
    }
}

/// A running worker process. Dropping it kills its process group (the worker and anything the
/// script started), so a cancelled or timed-out call leaves nothing behind.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    pid: u32,
    tail: Arc<Mutex<Tail>>,
    drain: Option<tokio::task::JoinHandle<()>>,
    generation: u64,
    idle_since: std::time::Instant,
}

impl Drop for Worker {
    fn drop(&mut self) {
        kill_group(self.pid);
        let _ = self.child.start_kill();
    }
}

fn kill_group(pid: u32) {
    #[cfg(unix)]
    {
        if pid > 1 {
            // SAFETY: plain syscall; the group id is the worker's pid (it leads its own group).
            unsafe {
                libc::killpg(pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

impl Worker {
    fn tail(&self) -> String {
        let t = self.tail.lock().map(|t| t.0.clone()).unwrap_or_default();
        String::from_utf8_lossy(&t).trim().to_owned()
    }

    /// The tail once stderr is drained (briefly waited for: a child of the script may hold it).
    async fn final_tail(&mut self) -> String {
        if let Some(drain) = self.drain.take() {
            let _ = tokio::time::timeout(Duration::from_millis(300), drain).await;
        }
        self.tail()
    }

    /// How the worker ended, waiting briefly for its exit status.
    async fn exit_status(&mut self) -> String {
        match tokio::time::timeout(Duration::from_millis(500), self.child.wait()).await {
            Ok(Ok(status)) => match status.code() {
                Some(code) => format!("exit code {code}"),
                None => {
                    #[cfg(unix)]
                    {
                        use std::os::unix::process::ExitStatusExt;
                        format!("killed by signal {}", status.signal().unwrap_or(0))
                    }
                    #[cfg(not(unix))]
                    {
                        "killed".to_owned()
                    }
                }
            },
            _ => "still running, but its frame channel closed".to_owned(),
        }
    }
}

async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<(u8, Vec<u8>)>, String> {
    let mut header = [0u8; 4];
    match r.read_exact(&mut header).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let n = core::frame_len(header)?;
    let mut body = vec![0u8; n];
    r.read_exact(&mut body)
        .await
        .map_err(|e| format!("the frame channel broke: {e}"))?;
    let payload = body.split_off(1);
    Ok(Some((body[0], payload)))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

fn error(kind: &str, message: impl AsRef<str>, log: &str) -> Vec<u8> {
    core::error_payload(kind, message.as_ref(), log)
}

/// Starts `interpreter worker.py <args...>` in `dir` with the frame channel on stdin/stdout, its
/// stderr drained into a tail, UTF-8 forced, in a process group of its own.
async fn spawn_python(
    interpreter: &Path,
    worker_py: &str,
    args: &[&OsStr],
    dir: &Path,
    path_env: Option<&str>,
) -> Result<Worker, String> {
    let mut cmd = Command::new(interpreter);
    if let Some(p) = path_env {
        cmd.env("PATH", p);
    }
    cmd.arg(worker_py)
        .args(args)
        .current_dir(dir)
        .env("PYTHONUTF8", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmdc_tool_core::exec::spawn(&mut cmd)
        .await
        .map_err(|e| format!("cannot start {}: {e}", interpreter.display()))?;
    let pid = child.id().unwrap_or(0);
    let stdin = child.stdin.take().ok_or("no stdin pipe")?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let mut stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let tail = Arc::new(Mutex::new(Tail::default()));
    let sink = tail.clone();
    let drain = tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if let Ok(mut t) = sink.lock() {
                t.push(&buf[..n]);
            }
        }
    });
    Ok(Worker {
        child,
        stdin,
        stdout,
        pid,
        tail,
        drain: Some(drain),
        generation: 0,
        idle_since: std::time::Instant::now(),
    })
}

// ------------------------------------------------------------------------------------------------
// pools

struct Pool {
    path: PathBuf,
    slots: Semaphore,
    idle_limit: Duration,
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    idle: Vec<Worker>,
    mtime: Option<SystemTime>,
    generation: u64,
}

fn pools() -> &'static Mutex<HashMap<PathBuf, Arc<Pool>>> {
    static POOLS: OnceLock<Mutex<HashMap<PathBuf, Arc<Pool>>>> = OnceLock::new();
    POOLS.get_or_init(Default::default)
}

/// The pool of a script, created by its first call (which sets its size and idle limit).
fn pool_for(path: &Path, opts: &CallOpts) -> Arc<Pool> {
    static REAPER: OnceLock<()> = OnceLock::new();
    REAPER.get_or_init(|| {
        tokio::spawn(reap_idle());
    });
    let mut map = pools().lock().unwrap_or_else(|e| e.into_inner());
    map.entry(path.to_path_buf())
        .or_insert_with(|| {
            Arc::new(Pool {
                path: path.to_path_buf(),
                slots: Semaphore::new((opts.max_workers as usize).clamp(1, 64)),
                idle_limit: Duration::from_millis(opts.idle_timeout_ms.max(1)),
                state: Mutex::new(PoolState::default()),
            })
        })
        .clone()
}

/// Once a second, stops workers idle for longer than their pool's limit.
async fn reap_idle() {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let all: Vec<Arc<Pool>> = {
            let map = pools().lock().unwrap_or_else(|e| e.into_inner());
            map.values().cloned().collect()
        };
        for pool in all {
            let retired: Vec<Worker> = {
                let mut st = pool.lock();
                let (keep, old) = std::mem::take(&mut st.idle)
                    .into_iter()
                    .partition(|w| w.idle_since.elapsed() < pool.idle_limit);
                st.idle = keep;
                old
            };
            drop(retired); // kills them, outside the lock
        }
    }
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An idle worker of the script's current version, or `None` (start one). A changed mtime
    /// retires every idle worker: the next ones import the new code.
    fn checkout(&self) -> Result<(Option<Worker>, u64), Vec<u8>> {
        let mtime = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .map_err(|e| {
                error(
                    "missing",
                    format!("cannot read the script {}: {e}", self.path.display()),
                    "",
                )
            })?;
        let mut st = self.lock();
        if st.mtime != Some(mtime) {
            if st.mtime.is_some() {
                st.generation += 1;
            }
            st.mtime = Some(mtime);
            st.idle.clear();
        }
        // A warm worker that died while idle (killed from outside) is replaced, not used.
        while let Some(mut worker) = st.idle.pop() {
            if matches!(worker.child.try_wait(), Ok(None)) {
                return Ok((Some(worker), st.generation));
            }
        }
        Ok((None, st.generation))
    }

    fn checkin(&self, mut worker: Worker) {
        let mut st = self.lock();
        if worker.generation == st.generation {
            worker.idle_since = std::time::Instant::now();
            st.idle.push(worker);
        }
    }
}

/// Starts a serving worker for `path` and waits for it to import the script.
async fn start_worker(pool: &Pool, opts: &CallOpts, generation: u64) -> Result<Worker, Vec<u8>> {
    let path = &pool.path;
    let dir = path.parent().unwrap_or(Path::new("."));
    let interpreter = python_for(dir, opts.python.as_deref(), opts.path_env.as_deref())
        .await
        .map_err(|m| error("interpreter", m, ""))?;
    let mut worker = spawn_python(
        &interpreter,
        &opts.worker,
        &[OsStr::new("serve"), path.as_os_str()],
        dir,
        opts.path_env.as_deref(),
    )
    .await
    .map_err(|m| error("spawn", m, ""))?;
    worker.generation = generation;
    match read_frame(&mut worker.stdout).await {
        Ok(Some((core::READY, _))) => Ok(worker),
        Ok(Some((core::ERROR, payload))) => Err(payload),
        Ok(Some((kind, _))) => Err(error(
            "protocol",
            format!("the worker sent frame kind {:?} before ready", kind as char),
            &worker.tail(),
        )),
        Ok(None) | Err(_) => {
            let status = worker.exit_status().await;
            let tail = worker.final_tail().await;
            Err(error(
                "import",
                format!(
                    "the Python worker for {} exited while importing the script ({status})",
                    file_name(path)
                ),
                &tail,
            ))
        }
    }
}

enum Outcome {
    Ok(Vec<u8>, u32),
    Err(Vec<u8>),
}

async fn call_python(
    pool: &Pool,
    function: &str,
    args: &[u8],
    opts: &CallOpts,
    reply: &mut Reply,
) -> Outcome {
    let _permit = match pool.slots.acquire().await {
        Ok(p) => p,
        Err(_) => return Outcome::Err(error("closed", "the worker pool is closed", "")),
    };
    let (idle, generation) = match pool.checkout() {
        Ok(x) => x,
        Err(e) => return Outcome::Err(e),
    };
    let mut worker = match idle {
        Some(w) => w,
        None => match start_worker(pool, opts, generation).await {
            Ok(w) => w,
            Err(e) => return Outcome::Err(e),
        },
    };
    let frame = core::encode_frame(core::CALL, &core::call_payload(function, args));
    let sent = async {
        worker.stdin.write_all(&frame).await?;
        worker.stdin.flush().await
    }
    .await;
    if sent.is_err() {
        return crashed(pool, &mut worker, function).await;
    }
    loop {
        match read_frame(&mut worker.stdout).await {
            Ok(Some((core::PROGRESS, payload))) => {
                reply.send(move |env| (msg::progress(), binary(env, &payload)).encode(env));
            }
            Ok(Some((core::RESULT, payload))) => {
                let pid = worker.pid;
                if std::str::from_utf8(&payload).is_err() {
                    return Outcome::Err(error(
                        "result",
                        "the worker's result is not valid UTF-8",
                        "",
                    ));
                }
                pool.checkin(worker);
                return Outcome::Ok(payload, pid);
            }
            Ok(Some((core::ERROR, payload))) => {
                pool.checkin(worker);
                return Outcome::Err(payload);
            }
            Ok(Some((kind, _))) => {
                return Outcome::Err(error(
                    "protocol",
                    format!(
                        "the worker sent an unexpected frame kind {:?}",
                        kind as char
                    ),
                    &worker.tail(),
                ));
            }
            Ok(None) | Err(_) => return crashed(pool, &mut worker, function).await,
        }
    }
}

async fn crashed(pool: &Pool, worker: &mut Worker, function: &str) -> Outcome {
    let status = worker.exit_status().await;
    let tail = worker.final_tail().await;
    Outcome::Err(error(
        "crashed",
        format!(
            "the Python worker running {}.{function} exited during the call ({status}); \
             the next call starts a fresh worker",
            file_name(&pool.path)
                .trim_end_matches(".py")
                .trim_end_matches(".PY")
        ),
        &tail,
    ))
}

/// PowerShell: one `pwsh` per call (the runner reads the request on stdin).
async fn call_powershell(path: &Path, function: &str, args: &[u8], opts: &CallOpts) -> Outcome {
    let Some(pwsh) = core::which("pwsh", path_var(opts.path_env.as_deref()).as_deref()) else {
        return Outcome::Err(error("pwsh_missing", core::PWSH_MISSING, ""));
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut cmd = Command::new(pwsh);
    cmd.args(["-NoLogo", "-NoProfile", "-NonInteractive", "-File"])
        .arg(&opts.ps_runner)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = match cmdc_tool_core::exec::spawn(&mut cmd).await {
        Ok(c) => c,
        Err(e) => return Outcome::Err(error("spawn", format!("cannot start pwsh: {e}"), "")),
    };
    let pid = child.id().unwrap_or(0);
    struct Group(u32);
    impl Drop for Group {
        fn drop(&mut self) {
            kill_group(self.0);
        }
    }
    let _group = Group(pid);
    let request = {
        // {"script":"...", "fn":..., "args":...}
        let mut r = b"{\"script\":".to_vec();
        r.extend_from_slice(
            serde_json::to_string(&path.to_string_lossy())
                .unwrap_or_default()
                .as_bytes(),
        );
        r.push(b',');
        r.extend_from_slice(&core::call_payload(function, args)[1..]);
        r
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&request).await;
        drop(stdin);
    }
    let out = match child.wait_with_output().await {
        Ok(o) => o,
        Err(e) => return Outcome::Err(error("crashed", format!("pwsh failed: {e}"), "")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    for line in stdout.lines().rev() {
        if let Some(json) = line.strip_prefix("\u{1e}CMDC_RESULT ") {
            return Outcome::Ok(json.as_bytes().to_vec(), pid);
        }
        if let Some(json) = line.strip_prefix("\u{1e}CMDC_ERROR ") {
            return Outcome::Err(json.as_bytes().to_vec());
        }
    }
    Outcome::Err(error(
        "crashed",
        format!("pwsh exited ({}) without a result", out.status),
        &log,
    ))
}

#[rustler::nif]
fn script_call<'a>(
    env: Env<'a>,
    path: String,
    function: String,
    args_json: Binary<'a>,
    opts: CallOpts,
) -> Term<'a> {
    let rt = match crate::runtime::get() {
        Ok(rt) => rt,
        Err(m) => return (atoms::error(), m).encode(env),
    };
    let path = PathBuf::from(path);
    let kind = match Kind::of(&path) {
        Ok(k) => k,
        Err(m) => return (atoms::error(), m).encode(env),
    };
    let pid = env.pid();
    let (handle, cancel) = new_handle(env, &pid);
    let args = args_json.as_slice().to_vec();
    let mut reply = Reply {
        env: OwnedEnv::new(),
        pid,
        handle: handle.clone(),
    };
    rt.spawn(async move {
        let timeout = Duration::from_millis(opts.timeout_ms.max(1));
        let script = file_name(&path);
        let work = async {
            match kind {
                Kind::Python => {
                    let pool = pool_for(&path, &opts);
                    call_python(&pool, &function, &args, &opts, &mut reply).await
                }
                Kind::PowerShell => call_powershell(&path, &function, &args, &opts).await,
            }
        };
        // Dropping `work` (time-out, cancel) drops its worker, which kills the process group.
        let outcome = tokio::select! {
            outcome = work => outcome,
            _ = tokio::time::sleep(timeout) => Outcome::Err(error(
                "timeout",
                format!(
                    "{script}: {function} timed out after {} ms; its worker was killed \
                     (the next call starts a fresh one)",
                    opts.timeout_ms
                ),
                "",
            )),
            reason = cancel => Outcome::Err(error(
                "cancelled",
                format!(
                    "{script}: {function} was cancelled ({}); its worker was killed",
                    reason.unwrap_or("cancelled")
                ),
                "",
            )),
        };
        match outcome {
            Outcome::Ok(payload, os_pid) => {
                reply.send(move |env| (atoms::ok(), binary(env, &payload), os_pid).encode(env))
            }
            Outcome::Err(payload) => reply.error(payload),
        }
    });
    (atoms::ok(), handle).encode(env)
}

#[rustler::nif]
fn script_cancel(handle: ResourceArc<Handle>) -> rustler::Atom {
    if handle.fire("cancelled by the caller") {
        atoms::ok()
    } else {
        msg::not_running()
    }
}

/// `[{path, idle_worker_os_pids}]`: the warm workers (for tests and introspection).
#[rustler::nif]
fn script_workers() -> Vec<(String, Vec<u32>)> {
    let map = pools().lock().unwrap_or_else(|e| e.into_inner());
    map.values()
        .map(|p| {
            let idle = p.lock().idle.iter().map(|w| w.pid).collect();
            (p.path.to_string_lossy().into_owned(), idle)
        })
        .collect()
}

/// Stops the idle workers of one script (`nil`: of every script); busy ones finish their call
/// and are not reused. Returns how many were stopped.
#[rustler::nif]
fn script_stop(path: Option<String>) -> usize {
    let map = pools().lock().unwrap_or_else(|e| e.into_inner());
    let mut stopped = 0;
    for (p, pool) in map.iter() {
        if path.as_deref().is_none_or(|want| Path::new(want) == p) {
            let mut st = pool.lock();
            stopped += st.idle.len();
            st.idle.clear();
            st.generation += 1;
        }
    }
    stopped
}

// ------------------------------------------------------------------------------------------------
// loading descriptions

enum Loaded {
    Ok(&'static str, String),
    Err(String),
}

fn cache_pass(path: &Path, use_cache: bool) -> Result<Option<String>, (&'static str, String)> {
    if !use_cache {
        return Err(("parsed", String::new()));
    }
    match core::read_cache(path) {
        Ok(Cached::Fresh(text)) => Ok(Some(text)),
        Ok(Cached::Missing) => Err(("parsed", String::new())),
        Ok(Cached::Stale) => Err(("stale", String::new())),
        Ok(Cached::Corrupt(why)) => Err(("rebuilt", why)),
        Err(m) => Err(("error", m)),
    }
}

/// Writes the cache (when enabled) and answers the description. The caller knows the script's
/// absolute path, so `scriptPath` is left as written (relative in the cache).
fn store(path: &Path, description: &[u8], status: &'static str, use_cache: bool) -> Loaded {
    if use_cache {
        if let Ok(text) = core::write_cache(path, description) {
            return Loaded::Ok(status, text);
        }
    }
    match std::str::from_utf8(description) {
        Ok(text) => Loaded::Ok(status, text.to_owned()),
        Err(_) => Loaded::Err("the description is not UTF-8".into()),
    }
}

/// Reads Python scripts with one describer per interpreter; a script that takes longer than the
/// limit kills the describer, which restarts for the rest.
async fn describe_python(
    todo: Vec<(usize, PathBuf, &'static str)>,
    opts: &LoadOpts,
    results: &mut [Option<Loaded>],
) {
    let mut groups: HashMap<PathBuf, Vec<(usize, PathBuf, &'static str)>> = HashMap::new();
    for (i, path, status) in todo {
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        match python_for(&dir, opts.python.as_deref(), opts.path_env.as_deref()).await {
            Ok(interp) => groups.entry(interp).or_default().push((i, path, status)),
            Err(m) => results[i] = Some(Loaded::Err(m)),
        }
    }
    let limit = Duration::from_millis(opts.describe_timeout_ms.max(1));
    for (interp, items) in groups {
        let mut describer: Option<Worker> = None;
        for (i, path, status) in items {
            if describer.is_none() {
                let dir = path.parent().unwrap_or(Path::new("."));
                let describe = [OsStr::new("describe")];
                let started = match spawn_python(
                    &interp,
                    &opts.worker,
                    &describe,
                    dir,
                    opts.path_env.as_deref(),
                )
                .await
                {
                    Ok(mut w) => {
                        // Interpreter start-up is not the script's time: wait for ready first.
                        let ready = tokio::time::timeout(STARTUP_LIMIT, read_frame(&mut w.stdout));
                        match ready.await {
                            Ok(Ok(Some((core::READY, _)))) => Ok(w),
                            _ => {
                                let status = w.exit_status().await;
                                let tail = w.final_tail().await;
                                Err(format!(
                                    "the Python describer did not start ({status}): {tail}"
                                ))
                            }
                        }
                    }
                    Err(m) => Err(m),
                };
                match started {
                    Ok(w) => describer = Some(w),
                    Err(m) => {
                        results[i] = Some(Loaded::Err(m));
                        continue;
                    }
                }
            }
            let w = describer.as_mut().expect("started above");
            let frame = core::encode_frame(core::DESCRIBE, path.to_string_lossy().as_bytes());
            let exchange = async {
                w.stdin.write_all(&frame).await.map_err(|e| e.to_string())?;
                w.stdin.flush().await.map_err(|e| e.to_string())?;
                read_frame(&mut w.stdout).await
            };
            let answer = tokio::time::timeout(limit, exchange).await;
            results[i] = Some(match answer {
                Ok(Ok(Some((core::DESCRIBED, payload)))) => {
                    let use_cache = opts.cache;
                    let p = path.clone();
                    tokio::task::spawn_blocking(move || store(&p, &payload, status, use_cache))
                        .await
                        .unwrap_or_else(|_| Loaded::Err("writing the cache failed".into()))
                }
                Ok(Ok(Some((core::ERROR, payload)))) => Loaded::Err(
                    serde_json::from_slice::<serde_json::Value>(&payload)
                        .ok()
                        .and_then(|v| v["message"].as_str().map(str::to_owned))
                        .unwrap_or_else(|| String::from_utf8_lossy(&payload).into_owned()),
                ),
                Ok(Ok(_)) | Ok(Err(_)) => {
                    let status = w.exit_status().await;
                    let tail = w.final_tail().await;
                    describer = None;
                    Loaded::Err(format!(
                        "the Python describer exited while reading the script ({status}): {tail}"
                    ))
                }
                Err(_) => {
                    describer = None; // dropping it kills it
                    Loaded::Err(format!(
                        "reading the script took longer than {} ms",
                        opts.describe_timeout_ms
                    ))
                }
            });
        }
    }
}

async fn load(paths: Vec<String>, opts: LoadOpts) -> Vec<(String, Loaded)> {
    let n = paths.len();
    let use_cache = opts.cache;
    let scan_paths = paths.clone();
    // Cache pass and PowerShell parsing: file work, off the async threads.
    let scanned = tokio::task::spawn_blocking(move || {
        let mut results: Vec<Option<Loaded>> = (0..n).map(|_| None).collect();
        let mut python = Vec::new();
        for (i, p) in scan_paths.iter().enumerate() {
            let path = PathBuf::from(p);
            let kind = match Kind::of(&path) {
                Ok(k) => k,
                Err(m) => {
                    results[i] = Some(Loaded::Err(m));
                    continue;
                }
            };
            let status = match cache_pass(&path, use_cache) {
                Ok(Some(text)) => {
                    results[i] = Some(Loaded::Ok("cached", text));
                    continue;
                }
                Ok(None) => "parsed",
                Err(("error", m)) => {
                    results[i] = Some(Loaded::Err(m));
                    continue;
                }
                Err((status, _)) => status,
            };
            match kind {
                Kind::Python => python.push((i, path, status)),
                Kind::PowerShell => {
                    results[i] = Some(match std::fs::read(&path) {
                        Ok(bytes) => {
                            let source = String::from_utf8_lossy(&bytes);
                            let source = source.trim_start_matches('\u{feff}');
                            let doc = core::powershell::describe(source, &path.to_string_lossy());
                            let text = serde_json::to_vec(&doc).unwrap_or_default();
                            store(&path, &text, status, use_cache)
                        }
                        Err(e) => Loaded::Err(format!("cannot read {}: {e}", path.display())),
                    });
                }
            }
        }
        (results, python)
    })
    .await;
    let (mut results, python) = match scanned {
        Ok(x) => x,
        Err(_) => {
            return paths
                .into_iter()
                .map(|p| (p, Loaded::Err("the cache scan failed".into())))
                .collect()
        }
    };
    if !python.is_empty() {
        describe_python(python, &opts, &mut results).await;
    }
    paths
        .into_iter()
        .zip(results)
        .map(|(p, r)| (p, r.unwrap_or(Loaded::Err("not read".into()))))
        .collect()
}

#[rustler::nif(schedule = "DirtyCpu")]
fn script_load<'a>(env: Env<'a>, paths: Vec<String>, opts: LoadOpts) -> Term<'a> {
    let rt = match crate::runtime::get() {
        Ok(rt) => rt,
        Err(m) => return (atoms::error(), m).encode(env),
    };
    let pid = env.pid();
    let (handle, _cancel) = new_handle(env, &pid);
    let mut reply = Reply {
        env: OwnedEnv::new(),
        pid,
        handle: handle.clone(),
    };
    rt.spawn(async move {
        let results = load(paths, opts).await;
        reply.send(move |env| {
            let items: Vec<Term> = results
                .into_iter()
                .map(|(path, r)| match r {
                    Loaded::Ok(status, text) => {
                        (path, status, binary(env, text.as_bytes())).encode(env)
                    }
                    Loaded::Err(m) => (path, atoms::error(), m).encode(env),
                })
                .collect();
            (msg::loaded(), items).encode(env)
        });
    });
    (atoms::ok(), handle).encode(env)
}

/// Describes a PowerShell script's source natively (no file, no cache): JSON text.
#[rustler::nif(schedule = "DirtyCpu")]
fn script_describe_powershell(source: String, path: String) -> String {
    serde_json::to_string(&core::powershell::describe(&source, &path)).unwrap_or_default()
}
