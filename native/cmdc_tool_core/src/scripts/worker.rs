//! One worker process: `python cmdc_worker.py serve|describe ...` with the frame channel on its
//! stdin/stdout and its stderr kept as a tail for error messages. Dropping a [`Worker`] kills its
//! whole process tree (see [`crate::exec::kill_tree`]), so a cancelled or timed-out call, an
//! idle worker retired, or a crashed one leaves nothing behind, not even children that left the
//! group with `setsid`. A worker whose parent (the VM) dies kills its own tree and exits (the
//! worker script watches its parent), so an exiting VM leaves nothing either.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::error::{Error, Result};
use crate::exec;

/// Bytes of a worker's stderr kept for error messages (the tail).
const TAIL_BYTES: usize = 16 * 1024;

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

/// A running worker process.
pub struct Worker {
    child: Child,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub pid: u32,
    tail: Arc<Mutex<Tail>>,
    drain: Option<tokio::task::JoinHandle<()>>,
    /// The pool generation it was started for (an older one is not reused).
    pub generation: u64,
    pub idle_since: Instant,
}

impl Drop for Worker {
    fn drop(&mut self) {
        exec::kill_tree(self.pid);
        let _ = self.child.start_kill();
    }
}

impl Worker {
    /// Whether the process still runs (a worker killed from outside while idle does not). A
    /// killed worker whose watch thread is still exiting is a zombie that `try_wait` cannot
    /// reap yet: `/proc` is asked too, so such a worker is replaced rather than handed a call.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None)) && !exec::is_zombie(self.pid)
    }

    /// The stderr tail so far.
    pub fn tail(&self) -> String {
        let t = self.tail.lock().map(|t| t.0.clone()).unwrap_or_default();
        String::from_utf8_lossy(&t).trim().to_owned()
    }

    /// The tail once stderr is drained (briefly waited for: a child of the script may hold it).
    pub async fn final_tail(&mut self) -> String {
        if let Some(drain) = self.drain.take() {
            let _ = tokio::time::timeout(Duration::from_millis(300), drain).await;
        }
        self.tail()
    }

    /// How the worker ended, waiting briefly for its exit status.
    pub async fn exit_status(&mut self) -> String {
        use std::os::unix::process::ExitStatusExt;
        match tokio::time::timeout(Duration::from_millis(500), self.child.wait()).await {
            Ok(Ok(status)) => match status.code() {
                Some(code) => format!("exit code {code}"),
                None => format!("killed by signal {}", status.signal().unwrap_or(0)),
            },
            _ => "still running, but its frame channel closed".to_owned(),
        }
    }
}

/// The file name of a path, for messages.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Starts `interpreter worker.py <args...>` in `dir` with the frame channel on stdin/stdout, its
/// stderr drained into a tail, UTF-8 forced, in a process group of its own. `env` is set on top
/// of the VM's environment (the caller's variables, such as the `CMDC_MCP_SERVER` marker: the
/// VM's `System.put_env` does not reach the environment native spawns inherit).
pub async fn spawn_python(
    interpreter: &Path,
    worker_py: &str,
    args: &[&OsStr],
    dir: &Path,
    path_env: Option<&str>,
    env: &[(String, String)],
) -> Result<Worker> {
    let mut cmd = Command::new(interpreter);
    if let Some(p) = path_env {
        cmd.env("PATH", p);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.arg(worker_py)
        .args(args)
        .current_dir(dir)
        .env("PYTHONUTF8", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let mut child = exec::spawn_piped(&mut cmd)
        .await
        .map_err(|e| Error::Process(format!("cannot start {}: {e}", interpreter.display())))?;
    let pid = child.id().unwrap_or(0);
    let pipe = |what: &str| Error::Process(format!("the worker was started without {what}"));
    let stdin = child.stdin.take().ok_or_else(|| pipe("a stdin pipe"))?;
    let stdout = child.stdout.take().ok_or_else(|| pipe("a stdout pipe"))?;
    let mut stderr = child.stderr.take().ok_or_else(|| pipe("a stderr pipe"))?;
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
        idle_since: Instant::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_end() {
        let mut t = Tail::default();
        t.push(&vec![b'a'; TAIL_BYTES]);
        t.push(b"end");
        assert_eq!(t.0.len(), TAIL_BYTES);
        assert!(t.0.ends_with(b"aend"));
    }
}
