//! Script tools: Python and PowerShell functions run as tools.
//!
//! * [`protocol`]: the worker's frames and payloads.
//! * [`interpreter`]: which program runs a script.
//! * [`cache`]: the `{name}.tool.json` description cache, trusted only under a valid [`stamp`].
//! * [`worker`]: one worker process (its tree killed when dropped).
//! * [`pool`]: calls through warm workers per script (and one `pwsh` per PowerShell call).
//! * [`load`]: reading descriptions (cache, Python describer, [`powershell`] reader).
//!
//! The process handling is shared with [`crate::exec`] (one spawn, one group/tree kill). The NIF
//! crate only converts terms and schedules these futures on its runtime.

pub mod cache;
pub mod interpreter;
pub mod load;
pub mod pool;
pub mod powershell;
pub mod protocol;
pub mod stamp;
pub mod worker;

pub use cache::{
    cache_path, check_document, file_version, read_cache, tighten, with_paths, write_cache, Cached,
};
pub use interpreter::{find_python, which, Language, PWSH_MISSING, VENV_PYTHONS};
pub use protocol::{call_payload, encode_frame, error_from_payload, frame_len, MAX_FRAME};

/// A fresh, empty folder under the system's temp dir for one test.
#[cfg(test)]
pub(crate) fn test_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cmdc_scripts_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
