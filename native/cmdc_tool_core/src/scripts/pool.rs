//! Calls: a persistent worker per script, kept warm, replaced after a crash, restarted when the
//! script changes, a small pool when calls overlap; PowerShell runs one `pwsh` per call. A
//! time-out or cancel drops the call's future, which drops its worker, which kills its tree.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::sync::Semaphore;

use super::cache::file_version;
use super::interpreter::{self, Language, PWSH_MISSING};
use super::protocol::{self, error_from_payload, read_frame};
use super::worker::{file_name, spawn_python, Worker};
use crate::error::Error;
use crate::exec;

/// How one call runs.
#[derive(Debug, Clone)]
pub struct CallOpts {
    /// The worker script (`priv/python/cmdc_worker.py`).
    pub worker: String,
    /// The PowerShell runner (`priv/powershell/cmdc_runner.ps1`).
    pub ps_runner: String,
    /// Fallback interpreter when there is no venv and no python3 on PATH.
    pub python: Option<String>,
    pub timeout: Duration,
    /// Workers per script at most (calls beyond wait for one). Set by the script's first call.
    pub max_workers: usize,
    /// The caller's PATH: where python3 and pwsh are looked for, and the PATH workers get.
    pub path_env: Option<String>,
    /// Variables every process of the call gets on top of the VM's environment (from Elixir:
    /// the `CMDC_MCP_SERVER` marker of a serving cmdc-mcp, as `CMDC.Tool.Exec` children get it).
    pub env: Vec<(String, String)>,
    /// An idle worker older than this is stopped. Set by the script's first call.
    pub idle_timeout: Duration,
}

/// A call's answer: the result payload (JSON text) and the worker's OS pid, or an
/// [`Error::Script`] saying how the call failed.
pub type Answer = Result<(Vec<u8>, u32), Error>;

/// An [`Error::Script`] of `kind` without log.
fn error(kind: &str, message: impl Into<String>) -> Error {
    Error::script(kind, message, "")
}

struct Pool {
    path: PathBuf,
    slots: Semaphore,
    idle_limit: Duration,
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    idle: Vec<Worker>,
    /// The script version (see [`file_version`]) the idle workers imported.
    stamp: Option<String>,
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
                slots: Semaphore::new(opts.max_workers.clamp(1, 64)),
                idle_limit: opts.idle_timeout.max(Duration::from_millis(1)),
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

    /// An idle worker of the script's current version, or `None` (start one). A changed script
    /// retires every idle worker: the next ones import the new code.
    fn checkout(&self) -> Result<(Option<Worker>, u64), Error> {
        let meta = std::fs::metadata(&self.path).map_err(|e| {
            error(
                "missing",
                format!("cannot read the script {}: {e}", self.path.display()),
            )
        })?;
        let version = file_version(&meta);
        let retired;
        let mut st = self.lock();
        if st.stamp.as_deref() != Some(version.as_str()) {
            if st.stamp.is_some() {
                st.generation += 1;
            }
            st.stamp = Some(version);
            retired = std::mem::take(&mut st.idle);
        } else {
            retired = Vec::new();
        }
        // A warm worker that died while idle (killed from outside) is replaced, not used.
        let mut found = None;
        while let Some(mut worker) = st.idle.pop() {
            if worker.running() {
                found = Some(worker);
                break;
            }
        }
        let generation = st.generation;
        drop(st);
        drop(retired);
        Ok((found, generation))
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
async fn start_worker(pool: &Pool, opts: &CallOpts, generation: u64) -> Result<Worker, Error> {
    let path = &pool.path;
    let dir = path.parent().unwrap_or(Path::new("."));
    let interpreter =
        interpreter::python_for(dir, opts.python.as_deref(), opts.path_env.as_deref())
            .await
            .map_err(|e| error("interpreter", e.to_string()))?;
    let mut worker = spawn_python(
        &interpreter,
        &opts.worker,
        &[OsStr::new("serve"), path.as_os_str()],
        dir,
        opts.path_env.as_deref(),
        &opts.env,
    )
    .await
    .map_err(|e| error("spawn", e.to_string()))?;
    worker.generation = generation;
    match read_frame(&mut worker.stdout).await {
        Ok(Some((protocol::READY, _))) => Ok(worker),
        Ok(Some((protocol::ERROR, payload))) => Err(error_from_payload(&payload)),
        Ok(Some((kind, _))) => Err(Error::script(
            "protocol",
            format!("the worker sent frame kind {:?} before ready", kind as char),
            worker.tail(),
        )),
        Ok(None) | Err(_) => {
            let status = worker.exit_status().await;
            let tail = worker.final_tail().await;
            Err(Error::script(
                "import",
                format!(
                    "the Python worker for {} exited while importing the script ({status})",
                    file_name(path)
                ),
                tail,
            ))
        }
    }
}

async fn call_python<P: FnMut(Vec<u8>)>(
    pool: &Pool,
    function: &str,
    args: &[u8],
    opts: &CallOpts,
    on_progress: &mut P,
) -> Answer {
    let _permit = pool
        .slots
        .acquire()
        .await
        .map_err(|_| error("closed", "the worker pool is closed"))?;
    let (idle, generation) = pool.checkout()?;
    let mut worker = match idle {
        Some(w) => w,
        None => start_worker(pool, opts, generation).await?,
    };
    let frame = protocol::encode_frame(protocol::CALL, &protocol::call_payload(function, args));
    let sent = async {
        worker.stdin.write_all(&frame).await?;
        worker.stdin.flush().await
    }
    .await;
    if sent.is_err() {
        return Err(crashed(pool, &mut worker, function).await);
    }
    loop {
        match read_frame(&mut worker.stdout).await {
            Ok(Some((protocol::PROGRESS, payload))) => on_progress(payload),
            Ok(Some((protocol::RESULT, payload))) => {
                let pid = worker.pid;
                if std::str::from_utf8(&payload).is_err() {
                    return Err(error("result", "the worker's result is not valid UTF-8"));
                }
                pool.checkin(worker);
                return Ok((payload, pid));
            }
            Ok(Some((protocol::ERROR, payload))) => {
                pool.checkin(worker);
                return Err(error_from_payload(&payload));
            }
            Ok(Some((kind, _))) => {
                return Err(Error::script(
                    "protocol",
                    format!(
                        "the worker sent an unexpected frame kind {:?}",
                        kind as char
                    ),
                    worker.tail(),
                ));
            }
            Ok(None) | Err(_) => return Err(crashed(pool, &mut worker, function).await),
        }
    }
}

async fn crashed(pool: &Pool, worker: &mut Worker, function: &str) -> Error {
    let status = worker.exit_status().await;
    let tail = worker.final_tail().await;
    Error::script(
        "crashed",
        format!(
            "the Python worker running {}.{function} exited during the call ({status}); \
             the next call starts a fresh worker",
            file_name(&pool.path)
                .trim_end_matches(".py")
                .trim_end_matches(".PY")
        ),
        tail,
    )
}

/// PowerShell: one `pwsh` per call (the runner reads the request on stdin).
async fn call_powershell(path: &Path, function: &str, args: &[u8], opts: &CallOpts) -> Answer {
    let Some(pwsh) = interpreter::which(
        "pwsh",
        interpreter::path_var(opts.path_env.as_deref()).as_deref(),
    ) else {
        return Err(error("pwsh_missing", PWSH_MISSING));
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut cmd = Command::new(pwsh);
    cmd.args(["-NoLogo", "-NoProfile", "-NonInteractive", "-File"])
        .arg(&opts.ps_runner)
        .current_dir(dir)
        .envs(opts.env.iter().map(|(k, v)| (k, v)));
    let mut child = exec::spawn_piped(&mut cmd)
        .await
        .map_err(|e| error("spawn", format!("cannot start pwsh: {e}")))?;
    let pid = child.id().unwrap_or(0);
    let _tree = exec::TreeGuard(pid);
    let request = {
        // {"script":"...", "fn":..., "args":...}
        let mut r = b"{\"script\":".to_vec();
        r.extend_from_slice(
            serde_json::to_string(&path.to_string_lossy())
                .unwrap_or_default()
                .as_bytes(),
        );
        r.push(b',');
        r.extend_from_slice(&protocol::call_payload(function, args)[1..]);
        r
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&request).await;
        drop(stdin);
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| error("crashed", format!("pwsh failed: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    for line in stdout.lines().rev() {
        if let Some(json) = line.strip_prefix("\u{1e}CMDC_RESULT ") {
            return Ok((json.as_bytes().to_vec(), pid));
        }
        if let Some(json) = line.strip_prefix("\u{1e}CMDC_ERROR ") {
            return Err(error_from_payload(json.as_bytes()));
        }
    }
    Err(Error::script(
        "crashed",
        format!("pwsh exited ({}) without a result", out.status),
        log,
    ))
}

/// Runs `function` of the script at `path` with `args_json`, until it answers, the time-out, or
/// `cancel` completes (with the reason to report). Progress payloads go to `on_progress`.
pub async fn call<C, P>(
    path: &Path,
    function: &str,
    args_json: &[u8],
    opts: &CallOpts,
    cancel: C,
    mut on_progress: P,
) -> Answer
where
    C: Future<Output = &'static str>,
    P: FnMut(Vec<u8>),
{
    let kind = Language::of(path).map_err(|e| error("script", e.to_string()))?;
    let script = file_name(path);
    let work = async {
        match kind {
            Language::Python => {
                let pool = pool_for(path, opts);
                call_python(&pool, function, args_json, opts, &mut on_progress).await
            }
            Language::PowerShell => call_powershell(path, function, args_json, opts).await,
        }
    };
    // Dropping `work` (time-out, cancel) drops its worker, which kills its process tree.
    tokio::select! {
        answer = work => answer,
        _ = tokio::time::sleep(opts.timeout.max(Duration::from_millis(1))) => Err(error(
            "timeout",
            format!(
                "{script}: {function} timed out after {} ms; its worker was killed \
                 (the next call starts a fresh one)",
                opts.timeout.as_millis()
            ),
        )),
        reason = cancel => Err(error(
            "cancelled",
            format!("{script}: {function} was cancelled ({reason}); its worker was killed"),
        )),
    }
}

/// `[(path, idle_worker_os_pids)]`: the warm workers (for tests and introspection).
pub fn workers() -> Vec<(String, Vec<u32>)> {
    let map = pools().lock().unwrap_or_else(|e| e.into_inner());
    map.values()
        .map(|p| {
            let idle = p.lock().idle.iter().map(|w| w.pid).collect();
            (p.path.to_string_lossy().into_owned(), idle)
        })
        .collect()
}

/// Stops the idle workers of one script (`None`: of every script); busy ones finish their call
/// and are not reused. Returns how many were stopped.
pub fn stop(path: Option<&str>) -> usize {
    let map = pools().lock().unwrap_or_else(|e| e.into_inner());
    let mut retired = Vec::new();
    for (p, pool) in map.iter() {
        if path.is_none_or(|want| Path::new(want) == p) {
            let mut st = pool.lock();
            retired.append(&mut st.idle);
            st.generation += 1;
        }
    }
    drop(map);
    retired.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::testing::alive;
    use serde_json::Value;

    fn opts(timeout_ms: u64) -> CallOpts {
        CallOpts {
            worker: concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../priv/python/cmdc_worker.py"
            )
            .into(),
            ps_runner: String::new(),
            python: None,
            timeout: Duration::from_millis(timeout_ms),
            max_workers: 2,
            path_env: None,
            env: Vec::new(),
            idle_timeout: Duration::from_secs(600),
        }
    }

    fn script(name: &str, source: &str) -> PathBuf {
        let dir = crate::scripts::test_dir(name);
        let path = dir.join(format!("{name}.py"));
        std::fs::write(&path, source).unwrap();
        path
    }

    fn never() -> impl Future<Output = &'static str> {
        std::future::pending()
    }

    async fn run(path: &Path, function: &str, args: &str, o: &CallOpts) -> Answer {
        call(path, function, args.as_bytes(), o, never(), |_| {}).await
    }

    fn value(answer: &Answer) -> Value {
        let (payload, _) = answer.as_ref().expect("an answer");
        serde_json::from_slice::<Value>(payload).unwrap()["value"].clone()
    }

    fn kind(answer: &Answer) -> String {
        match answer.as_ref().expect_err("an error") {
            Error::Script { kind, .. } => kind.clone(),
            other => panic!("not a script error: {other:?}"),
        }
    }

    #[tokio::test]
    async fn calls_reuse_a_warm_worker_and_report_progress() {
        let path = script(
            "pool_warm",
            "import cmdc_tool\n\ndef add(a: int, b: int) -> int:\n    cmdc_tool.progress(a)\n    \
             return a + b\n",
        );
        let o = opts(20_000);
        let mut seen = Vec::new();
        let first = call(&path, "add", br#"{"a":1,"b":2}"#, &o, never(), |p| {
            seen.push(p)
        })
        .await;
        assert_eq!(value(&first), 3);
        assert_eq!(seen, vec![br#"{"value":1}"#.to_vec()]);
        let second = run(&path, "add", r#"{"a":2,"b":2}"#, &o).await;
        assert_eq!(value(&second), 4);
        assert_eq!(first.unwrap().1, second.unwrap().1, "the same warm worker");
        let idle = workers();
        let mine = idle.iter().find(|(p, _)| Path::new(p) == path).unwrap();
        assert_eq!(mine.1.len(), 1);
        assert_eq!(stop(Some(path.to_str().unwrap())), 1);
        assert!(!alive(mine.1[0]), "a stopped worker is gone");
    }

    #[tokio::test]
    async fn workers_get_the_callers_variables() {
        let path = script(
            "pool_env",
            "import os\n\ndef marker() -> str:\n    return os.environ.get('CMDC_MCP_SERVER', '')\n",
        );
        let mut o = opts(20_000);
        o.env = vec![("CMDC_MCP_SERVER".into(), "4242".into())];
        assert_eq!(value(&run(&path, "marker", "{}", &o).await), "4242");
        stop(Some(path.to_str().unwrap()));
    }

    #[tokio::test]
    async fn an_edit_that_keeps_the_mtime_reaches_the_next_call() {
        let path = script("pool_edit", "def v() -> int:\n    return 1\n");
        let o = opts(20_000);
        assert_eq!(value(&run(&path, "v", "{}", &o).await), 1);
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, "def v() -> int:\n    return 2\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(value(&run(&path, "v", "{}", &o).await), 2);
    }

    #[tokio::test]
    async fn a_crash_is_an_error_and_the_next_call_gets_a_fresh_worker() {
        let path = script(
            "pool_crash",
            "import os\n\ndef die():\n    os._exit(3)\n\ndef ok() -> str:\n    return 'fine'\n",
        );
        let o = opts(20_000);
        let crashed = run(&path, "die", "{}", &o).await;
        assert_eq!(kind(&crashed), "crashed");
        let message = crashed.as_ref().unwrap_err().to_string();
        assert!(message.contains("exit code 3"), "{message}");
        assert_eq!(value(&run(&path, "ok", "{}", &o).await), "fine");
    }

    /// A script whose function starts a child in a session of its own, records both pids in
    /// `pids.txt`, then blocks.
    const LEAVER: &str = "import os, subprocess, time\n\n\
        def ready() -> str:\n    return 'ready'\n\n\
        def hang() -> str:\n    \
            child = subprocess.Popen(['sleep', '60'], start_new_session=True)\n    \
            with open('pids.txt', 'w') as f:\n        \
                f.write('%d %d' % (os.getpid(), child.pid))\n    \
            time.sleep(60)\n    \
            return 'late'\n";

    fn recorded(path: &Path) -> Vec<u32> {
        let text = std::fs::read_to_string(path.with_file_name("pids.txt")).unwrap();
        text.split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_time_out_kills_the_worker_and_children_that_called_setsid() {
        let path = script("pool_timeout", LEAVER);
        // Warm the worker first: on a loaded machine its start-up alone can use up the time-out,
        // and then `hang` never runs to record its pids.
        assert_eq!(
            value(&run(&path, "ready", "{}", &opts(60_000)).await),
            "ready"
        );
        let answer = run(&path, "hang", "{}", &opts(3_000)).await;
        assert_eq!(kind(&answer), "timeout");
        let pids = recorded(&path);
        assert_eq!(pids.len(), 2);
        for pid in pids {
            assert!(!alive(pid), "{pid} outlived the time-out");
        }
    }

    #[tokio::test]
    async fn a_cancel_kills_the_worker_and_its_children() {
        let path = script("pool_cancel", LEAVER);
        let (tx, rx) = tokio::sync::oneshot::channel::<&'static str>();
        let pids_file = path.with_file_name("pids.txt");
        let trigger = async move {
            while !pids_file.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let _ = tx.send("test");
        };
        let cancel = async { rx.await.unwrap_or("dropped") };
        let o = opts(30_000);
        let (answer, ()) = tokio::join!(call(&path, "hang", b"{}", &o, cancel, |_| {}), trigger);
        assert_eq!(kind(&answer), "cancelled");
        for pid in recorded(&path) {
            assert!(!alive(pid), "{pid} outlived the cancel");
        }
    }
}
