//! Killing processes: a group, a whole tree walked through `/proc` before anything is killed,
//! and every program still running when the host exits.

/// Sends `signal` to the whole process group `pgid`; a group that is already gone is fine.
pub fn kill_group(pgid: u32, signal: i32) {
    if pgid > 1 {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid as libc::pid_t, signal);
        }
    }
}

fn signal_pid(pid: u32, signal: i32) {
    if pid > 1 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(pid as libc::pid_t, signal);
        }
    }
}

/// Every live process whose chain of parents leads to `root` (not `root` itself), parents
/// before children. Read from `/proc`; empty where there is none.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut children: std::collections::HashMap<u32, Vec<u32>> = Default::default();
    for pid in pids() {
        if let Some(ppid) = parent_of(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if !out.contains(&c) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// Every pid `/proc` lists (none where there is no `/proc`).
fn pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flat_map(|dir| dir.flatten())
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
}

/// Whether `/proc` shows `pid` as exited but not yet reaped (a zombie). A process killed while
/// another of its threads is still exiting is a zombie before `waitpid` can reap it, so a
/// parent's `try_wait` still says "running" then. `false` where there is no `/proc` to ask.
pub fn is_zombie(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => matches!(
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next()),
            Some("Z" | "X")
        ),
        Err(_) => false,
    }
}

/// The parent of a live (not zombie) process, from `/proc/{pid}/stat`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.next()?.parse().ok()
}

/// Stops (SIGSTOP) every process `find` lists, asking again until a pass finds nothing new (a
/// process may fork between a read and its stop); the processes stopped.
fn stop_all(find: impl Fn() -> Vec<u32>) -> Vec<u32> {
    let mut found: Vec<u32> = Vec::new();
    for _ in 0..8 {
        let fresh: Vec<u32> = find().into_iter().filter(|p| !found.contains(p)).collect();
        if fresh.is_empty() {
            break;
        }
        for &p in &fresh {
            signal_pid(p, libc::SIGSTOP);
        }
        found.extend(fresh);
    }
    found
}

/// Kills `root`, its process group and every descendant, including those that left the group
/// (`setsid`, `start_new_session=True`) and their groups. The tree is walked *before* anything
/// is killed (a killed parent's children are re-parented and can no longer be found) and each
/// process found is stopped first, so none can fork past the walk.
pub fn kill_tree(root: u32) {
    if root <= 1 {
        return;
    }
    signal_pid(root, libc::SIGSTOP);
    let found = stop_all(|| descendants(root));
    kill_group(root, libc::SIGKILL);
    signal_pid(root, libc::SIGKILL);
    for &p in &found {
        // A descendant that leads its own group (setsid) may have started more in that group.
        // SAFETY: getpgid has no memory-safety preconditions.
        let pgid = unsafe { libc::getpgid(p as libc::pid_t) };
        if pgid == p as libc::pid_t {
            kill_group(p, libc::SIGKILL);
        }
        signal_pid(p, libc::SIGKILL);
    }
}

/// The environment variable that marks every process of one run started with
/// `Spec::kill_strays` (its value is unique per run): inherited through `fork`, `exec`, `setsid`
/// and double forks, so what the run left behind can be found after its program exited, when
/// the parent links are gone (a daemon re-parented to init). The way CI servers find what a
/// build left running (Jenkins' `BUILD_ID`).
pub const RUN_MARKER: &str = "CMDC_EXEC_RUN";

/// A value of [`RUN_MARKER`] no other run of this host has: the host's pid and a counter.
pub fn run_marker_value() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// Every live process (of this user: another user's environment cannot be read) whose
/// environment holds `RUN_MARKER=value`, read from `/proc/{pid}/environ`.
pub fn marked(value: &str) -> Vec<u32> {
    let needle = format!("{RUN_MARKER}={value}");
    let mut out = Vec::new();
    for pid in pids() {
        if pid <= 1 || pid == std::process::id() || parent_of(pid).is_none() {
            continue;
        }
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
            if env.split(|&b| b == 0).any(|var| var == needle.as_bytes()) {
                out.push(pid);
            }
        }
    }
    out
}

/// Kills what a run left behind: every process carrying its marker ([`marked`]) with all it
/// started ([`kill_tree`]), each stopped first and the search repeated until a pass finds none,
/// so none can fork past it. Returns how many carried the marker.
pub fn kill_marked(value: &str) -> usize {
    let found = stop_all(|| marked(value));
    for &p in &found {
        kill_tree(p);
    }
    found.len()
}

/// Kills the tree of [`kill_tree`] when dropped: a started process cannot outlive the scope that
/// owns it, whichever way that scope ends (result, error, time-out, cancel).
pub struct TreeGuard(pub u32);

impl Drop for TreeGuard {
    fn drop(&mut self) {
        kill_tree(self.0);
    }
}

/// The programs started by [`run_with`] and not yet reaped, by pid (each leads its own group):
/// what [`kill_all`] reaches when the host is about to exit.
static LIVE: std::sync::Mutex<std::collections::BTreeSet<u32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

fn live() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<u32>> {
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Keeps a started program in [`LIVE`] until the run ends (it is reaped by then).
pub(super) struct Live(u32);

impl Live {
    pub(super) fn enter(pid: u32) -> Self {
        live().insert(pid);
        Live(pid)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        live().remove(&self.0);
    }
}

/// Kills every program [`run_with`] started that is still running, with all it started
/// ([`kill_tree`]), and returns how many there were. For a host about to exit: a cancel asks
/// each run to stop and may not be done in time, and the kernel's parent-death signal reaches
/// the program alone, not its children.
pub fn kill_all() -> usize {
    let pids: Vec<u32> = live().iter().copied().collect();
    for &pid in &pids {
        // Still in LIVE, so not reaped: the pid and its group cannot have been reused.
        kill_tree(pid);
    }
    pids.len()
}

/// Kills each process of a walked tree when dropped (after the grace period of a time-out).
pub(super) fn scopeguard(pids: Vec<u32>) -> impl Drop {
    struct Strays(Vec<u32>);
    impl Drop for Strays {
        fn drop(&mut self) {
            for &p in &self.0 {
                signal_pid(p, libc::SIGKILL);
            }
        }
    }
    Strays(pids)
}
