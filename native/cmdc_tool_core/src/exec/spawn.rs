//! Starting processes: every process this crate starts gets its own group and none of the VM's
//! descriptors ([`own_group`]); a busy executable is retried ([`spawn`]); a failure to start is a
//! message a person can act on ([`spawn_error`]).

use std::io;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::spec::Spec;
use crate::error::{Error, Result};

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

/// Why a program could not be started, as a message a person or a model can act on.
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
