//! What to run ([`Spec`], [`Input`]) and what came of it ([`Outcome`], [`Ending`]).

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;

use super::flow::Window;

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
    /// Flow control of the streamed lines (stdout and stderr): `None` streams them as fast as
    /// they come; a [`Window`] holds stdout (the program blocks on a full pipe) and drops
    /// stderr lines while the owner has not acknowledged enough of them.
    pub window: Option<Window>,
    /// When the program has ended (however), kill every process it left running, even those
    /// that left its group and were re-parented (`setsid cmd &`): each carries the run's marker
    /// (`kill::RUN_MARKER`) in its environment. For hooks and one-shot commands, not for
    /// programs meant to start services.
    pub kill_strays: bool,
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
            window: None,
            kill_strays: false,
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
