//! NIF for protocol servers on stdio: keeps the protocol channel a descriptor that nothing else
//! in the VM, and no program it starts, writes to.

use crate::error::{Error, Result};

/// Makes `fd` the protocol channel and returns the descriptor to write frames to.
///
/// * `fd == 1` (the VM was started with the protocol on stdout): duplicates fd 1 to a new
///   close-on-exec descriptor and points fd 1 at stderr. From then on whatever writes to
///   "stdout" (the VM's `user` device, a NIF's `println!`, programs the VM starts) lands on
///   stderr.
/// * another `fd` (a launcher already moved the protocol there and pointed fd 1 at stderr, so
///   that even the VM's port helper inherited stderr): marks it close-on-exec, so no program
///   the VM starts inherits the protocol channel.
///
/// A few syscalls: a normal scheduler is fine.
#[rustler::nif]
fn stdio_protocol_fd(fd: i32) -> Result<i32> {
    let os_error =
        |what: &str| Error::process(format!("{what}: {}", std::io::Error::last_os_error()));
    // SAFETY: fcntl and dup2 on plain integers have no memory-safety preconditions; a bad
    // descriptor is an error return, never undefined behaviour.
    unsafe {
        if fd == 1 {
            let copy = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
            if copy < 0 {
                return Err(os_error("cannot duplicate stdout"));
            }
            if libc::dup2(2, 1) < 0 {
                let err = os_error("cannot point stdout at stderr");
                libc::close(copy);
                return Err(err);
            }
            Ok(copy)
        } else {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if fd < 3 || flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) < 0 {
                return Err(os_error(&format!(
                    "descriptor {fd} cannot be the protocol channel"
                )));
            }
            Ok(fd)
        }
    }
}
