//! The NIF's one tokio runtime, shared by every concern that runs OS processes (`exec`,
//! `scripts`): two worker threads named `cmdc-rt` (process I/O is asynchronous, so they rarely
//! work) and up to eight blocking threads. Built on first use.
//!
//! The BEAM ignores SIGCHLD (its ports are started by `erl_child_setup`), and an ignored SIGCHLD
//! makes the kernel reap children itself, so a child's exit status would be lost (and children
//! would inherit the ignored disposition). tokio's SIGCHLD handler is therefore installed here,
//! before the first program starts, rather than lazily during the first spawn.

use std::sync::OnceLock;

use tokio::runtime::Runtime;

use cmdc_tool_core::error::Error as CoreError;

use crate::error::{Error, Result};

/// The runtime, or why it could not start (`{:error, message}`).
pub fn get() -> Result<&'static Runtime> {
    static RT: OnceLock<std::result::Result<Runtime, CoreError>> = OnceLock::new();
    RT.get_or_init(start)
        .as_ref()
        .map_err(|e| Error::Core(e.clone()))
}

/// The runtime, or why it cannot run (kept for every later call).
fn start() -> std::result::Result<Runtime, CoreError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(8)
        .thread_name("cmdc-rt")
        .enable_all()
        .build()
        .map_err(|e| CoreError::Process(format!("cannot start the native runtime: {e}")))?;
    runtime
        .block_on(async {
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()).map(drop)
        })
        .map_err(|e| CoreError::Process(format!("cannot install the SIGCHLD handler: {e}")))?;
    Ok(runtime)
}
