//! Small file-system helpers shared by discovery and scripts: reading a bounded regular file
//! without ever opening a special one, naming a file's kind, mtimes, and expanding a path as a
//! user wrote it.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::error::{Error, Result};

/// Expands `~` (alone or followed by `/`) to `home` and makes relative paths absolute under
/// `cwd`; `.` and `..` components are resolved lexically, as `Path.expand/1` does (the real
/// path, which identifies the file, follows symlinks).
pub fn expand(path: &str, cwd: &Path, home: &Path) -> PathBuf {
    let joined = if path == "~" {
        home.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        }
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !out.has_root() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Reads a small file (metadata, a cache entry) of at most `limit` bytes, never opening a
/// special file (see [`read_regular`]). The error's message names the problem, not the path
/// (the caller's reason names the file).
pub fn read_small(path: &Path, limit: u64) -> Result<Vec<u8>> {
    read_regular(path, limit).map_err(|e| Error::Invalid(e.to_string()))
}

/// Reads a regular file of at most `limit` bytes. Special files (FIFOs, devices, sockets) are
/// never opened: reading a FIFO waits for a writer forever, and opening a device can act on it.
/// The file is opened without blocking and its type checked again on the open handle, so a path
/// swapped for a FIFO after the first check cannot block the scan either.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let regular = |md: &fs::Metadata| -> io::Result<()> {
        if !md.is_file() {
            let what = file_kind(md);
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is {what}, not a regular file; not opened",
                    path.display()
                ),
            ));
        }
        if md.len() > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} bytes, more than the {limit} allowed", md.len()),
            ));
        }
        Ok(())
    };
    regular(&fs::metadata(path)?)?;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let md = file.metadata()?;
    regular(&md)?;
    let mut bytes = Vec::with_capacity(usize::try_from(md.len()).unwrap_or(0));
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("more than the {limit} bytes allowed"),
        ));
    }
    Ok(bytes)
}

/// What a file system entry is, for messages: "a FIFO (named pipe)", "a socket", ….
pub fn file_kind(md: &fs::Metadata) -> &'static str {
    let ft = md.file_type();
    if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a folder"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

/// Nanoseconds since the Unix epoch (negative before it); 0 when the platform has no mtime.
pub fn mtime_ns(md: &fs::Metadata) -> i64 {
    match md.modified() {
        Ok(t) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
        },
        Err(_) => 0,
    }
}
