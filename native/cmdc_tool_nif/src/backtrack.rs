//! Backtracking pattern matches (`Stop::Deferred`) off the VM's schedulers. Such a match is
//! bounded but long (~0.4 ms for `^(a*)*\1b$` on 30 characters) and cannot be cut into slices:
//! on a dirty CPU scheduler it competes at the same priority with the normal schedulers for
//! the cores, which delays every process (issue 26 item 6). Here it runs on a few threads of
//! the NIF's own at the lowest priority (`SCHED_IDLE`), which the OS runs only when nothing
//! else wants the core; the caller waits in `receive` (`CMDC.Tool.Schema.validate/2`), so it
//! stays a synchronous call with the dirty call's results and errors.
//!
//! Nothing is left behind and nothing hangs: a task whose caller died (or cancelled it) is
//! dropped unrun when a thread takes it, and never answered once cancelled; a full queue
//! (`:busy`) or a pool that could not start makes the caller take the dirty call at once; a
//! caller not answered in time (threads starved by a busy machine, since any other work comes
//! first) cancels and takes the dirty call; a panic in a match is answered as an error.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};

use rustler::env::SavedTerm;
use rustler::{Encoder, Env, LocalPid, OwnedEnv, ResourceArc, Term};

use crate::atoms;
use crate::error::Error;
use crate::schema::{validate_term, Schema};
use crate::term::Budget;

/// Threads taking tasks: one, so a core is always left to the VM's schedulers. Measured on 2
/// cores (bench/stall.exs, the back-reference row, interleaved runs): one thread p99 lateness
/// 1.1-1.2 ms, two 1.8-2.3 ms (a scheduler waking on a core the thread holds still pays a
/// switch). Concurrent callers queue: ~0.4 ms each, 64 at most (~26 ms), then the dirty call.
const THREADS: usize = 1;
/// Tasks waiting at most; more callers take the dirty call (each waiting task holds a copy of
/// its arguments, which a normal call could read, so this bounds memory too).
const QUEUE: usize = 64;
/// The thread's priority where `SCHED_IDLE` is refused (`nice` 19, the lowest).
const NICE: i32 = 19;

/// One match to run: the caller's arguments copied into `env`, answered as `{reference, result}`.
struct Task {
    schema: ResourceArc<Schema>,
    env: OwnedEnv,
    args: SavedTerm,
    reference: SavedTerm,
    pid: LocalPid,
    state: Arc<Mutex<Settled>>,
}

/// Where a queued task stands, shared by the task and the caller's [`Ticket`]: the thread
/// sends the answer only while `Waiting`, under the lock, so a caller that cancelled never gets
/// a late message, and one told `Sent` has the answer in its mailbox.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Settled {
    Waiting,
    Sent,
    Cancelled,
}

/// The caller's handle on its queued task: cancelled when dropped (the caller died, or let go
/// of it), or by `schema_validate_cancel/1`.
pub struct Ticket(Arc<Mutex<Settled>>);

impl Ticket {
    /// Cancels the task unless its answer was sent; the state it settled in.
    fn cancel(&self) -> Settled {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if *state == Settled::Waiting {
            *state = Settled::Cancelled;
        }
        *state
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.cancel();
    }
}

#[rustler::resource_impl]
impl rustler::Resource for Ticket {}

/// Tasks queued, run, dropped because their caller had died, and running or waiting now.
#[derive(Default)]
pub struct Counts {
    pub queued: AtomicU64,
    pub ran: AtomicU64,
    pub dropped: AtomicU64,
}

static COUNTS: Counts = Counts {
    queued: AtomicU64::new(0),
    ran: AtomicU64::new(0),
    dropped: AtomicU64::new(0),
};

/// The counters (`testing.rs` reports them).
pub fn counts() -> &'static Counts {
    &COUNTS
}

/// The queue, its threads started on first use; `None` when no thread could start.
fn queue() -> Option<&'static SyncSender<Task>> {
    static QUEUE_TX: OnceLock<Option<SyncSender<Task>>> = OnceLock::new();
    QUEUE_TX.get_or_init(start).as_ref()
}

fn start() -> Option<SyncSender<Task>> {
    let (tx, rx) = sync_channel::<Task>(QUEUE);
    let rx = Arc::new(Mutex::new(rx));
    let started = (0..THREADS)
        .filter(|i| {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("cmdc_backtrack_{i}"))
                .spawn(move || work(&rx))
                .is_ok()
        })
        .count();
    (started > 0).then_some(tx)
}

/// A thread's life: lower its priority, then take tasks until the library is unloaded.
fn work(rx: &Mutex<Receiver<Task>>) {
    lower_priority();
    loop {
        // The lock is held only while waiting for the next task.
        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        match next {
            // `run` answers its own panics; this keeps the thread for the next tasks if
            // anything else in it did.
            Ok(task) => drop(catch_unwind(AssertUnwindSafe(|| run(task)))),
            Err(_) => return,
        }
    }
}

/// `SCHED_IDLE` for this thread alone (Linux: a thread's own policy), else `nice 19`; if both
/// are refused the thread keeps the VM's priority (as a dirty scheduler's). `SCHED_IDLE`
/// because the kernel lets any waking thread of another policy (a scheduler woken by a timer
/// or a message) preempt it at once; `nice 19` alone (two threads) measured p99 1.0-1.8 ms,
/// no better than the dirty call.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    // SAFETY: plain system calls on this thread's own id.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            let tid = libc::gettid() as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, NICE);
        }
    }
}

fn run(mut task: Task) {
    let waiting = *task.state.lock().unwrap_or_else(|e| e.into_inner()) == Settled::Waiting;
    if !waiting || !task.env.run(|env| env.is_process_alive(task.pid)) {
        COUNTS.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let message = task.env.run(|env| {
        let args = task.args.load(env);
        let result = catch_unwind(AssertUnwindSafe(|| answer(env, &task.schema, args)))
            .unwrap_or_else(|_| {
                Error::Message("the pattern match failed inside the native library".into())
                    .to_tuple(env)
            });
        task.env.save((task.reference.load(env), result))
    });
    let mut state = task.state.lock().unwrap_or_else(|e| e.into_inner());
    if *state == Settled::Cancelled {
        COUNTS.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let _ = task.env.send_and_clear(&task.pid, |env| message.load(env));
    *state = Settled::Sent;
    COUNTS.ran.fetch_add(1, Ordering::Relaxed);
}

/// The dirty call's answer: `{:ok, args}` or `{:error, reason}`.
fn answer<'a>(env: Env<'a>, schema: &Schema, args: Term<'a>) -> Term<'a> {
    match validate_term(schema, args, Budget::dirty()) {
        Ok(args) => (atoms::ok(), args).encode(env),
        Err(e) => e.to_tuple(env),
    }
}

/// Queues `value`'s deferred match for `schema`; the result arrives as `{reference, result}`.
/// `{:ok, ticket}` (keep it until the answer came: dropping it cancels the task), or
/// `{:error, :busy}` (queue full, no thread): the caller takes the dirty call.
#[rustler::nif]
fn schema_validate_queued<'a>(
    env: Env<'a>,
    schema: ResourceArc<Schema>,
    value: Term<'a>,
    reference: Term<'a>,
) -> Term<'a> {
    let busy = || (atoms::error(), atoms::busy()).encode(env);
    let Some(tx) = queue() else {
        return busy();
    };
    let state = Arc::new(Mutex::new(Settled::Waiting));
    let task_env = OwnedEnv::new();
    let task = Task {
        schema,
        args: task_env.save(value),
        reference: task_env.save(reference),
        env: task_env,
        pid: env.pid(),
        state: state.clone(),
    };
    match tx.try_send(task) {
        Ok(()) => {
            COUNTS.queued.fetch_add(1, Ordering::Relaxed);
            (atoms::ok(), ResourceArc::new(Ticket(state))).encode(env)
        }
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => busy(),
    }
}

/// Cancels a queued task: `:cancelled` (no answer will come) or `:sent` (its answer is in the
/// caller's mailbox already).
#[rustler::nif]
fn schema_validate_cancel(ticket: ResourceArc<Ticket>) -> rustler::Atom {
    match ticket.cancel() {
        Settled::Sent => atoms::sent(),
        _ => atoms::cancelled(),
    }
}
