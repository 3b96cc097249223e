//! Running external programs for tools: no shell, a process group per run, time-outs and
//! cancellation that kill the whole group (SIGTERM, then SIGKILL after a grace period), capped
//! output, stdout streamed line by line, and the child always reaped.
//!
//! Everything here is plain Rust on tokio; the NIF crate (`cmdc_tool_nif::exec`) owns the
//! runtime, turns [`Spec`] from terms and sends the events and the [`Outcome`] as messages.
//!
//! Files, each using only those above it: `flow` (the credit window of a long-lived run's
//! output), `spec` (what to run, what came of it), `output`
//! (capped buffers, line splitting), `kill` (groups, trees, everything at exit), `spawn`
//! (starting a process), `run` (a whole run).

mod flow;
mod kill;
mod output;
mod run;
mod spawn;
mod spec;

pub use flow::Window;
pub use kill::{
    descendants, is_zombie, kill_all, kill_group, kill_marked, kill_tree, marked, TreeGuard,
    RUN_MARKER,
};
pub use output::{CappedBuffer, LineSplitter};
pub use run::{run, run_with};
pub use spawn::{check, own_group, spawn, spawn_error, spawn_piped};
pub use spec::{Ending, Input, Outcome, Spec};

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
mod flow_tests;
#[cfg(test)]
mod tests;
