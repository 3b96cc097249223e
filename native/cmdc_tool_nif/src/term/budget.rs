//! The work allowance of one NIF call is the core's one [`Budget`] (`cmdc_tool_core::budget`);
//! here: what running out means for a term walk ([`TermError`]), which budget this scheduler
//! gets ([`here`]), and what the VM is told about the work done ([`report_units`]).

use rustler::Env;

pub use cmdc_tool_core::budget::{Budget, Over, DIRTY_BUDGET, NORMAL_BUDGET};

/// Most containers nested in one another, in every direction: encode, decode and validation
/// accept 128 nested arrays/objects (a scalar may sit inside the 128th) and refuse 129.
pub const MAX_DEPTH: usize = 128;
/// A normal scheduler converts big integers of at most this many 64-bit words (~300 digits).
pub const NORMAL_BIG_WORDS: usize = 16;
#[derive(Debug, Clone, PartialEq)]
pub enum TermError {
    /// The input is larger than a normal scheduler may handle: retry on a dirty one.
    Yield,
    /// The term is not JSON; `path` is a JSON Pointer, `reason` says what was found.
    NotJson { path: String, reason: String },
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep { path: String },
    /// More than [`DIRTY_BUDGET`] work units.
    TooBig,
}

impl TermError {
    pub fn path(&self) -> &str {
        match self {
            TermError::NotJson { path, .. } | TermError::TooDeep { path } => path,
            TermError::Yield | TermError::TooBig => "",
        }
    }

    pub fn message(&self) -> String {
        match self {
            TermError::Yield => "input too large for a normal scheduler".into(),
            TermError::NotJson { reason, .. } => reason.clone(),
            TermError::TooDeep { .. } => format!("value nested deeper than {MAX_DEPTH} levels"),
            TermError::TooBig => {
                "value too large (over the work limit of one call: 64M nodes, or an integer of \
                 about a million digits)"
                    .into()
            }
        }
    }
}

impl From<Over> for TermError {
    #[inline(always)]
    fn from(over: Over) -> Self {
        match over {
            Over::Yield => TermError::Yield,
            Over::TooBig => TermError::TooBig,
        }
    }
}

/// The budget of the scheduler this thread is: dirty work on a dirty scheduler (or any thread
/// that is not a normal scheduler), the short one on a normal scheduler.
pub fn here() -> Budget {
    if on_normal_scheduler() {
        Budget::normal()
    } else {
        Budget::dirty()
    }
}

/// Whether this thread is a normal scheduler (not dirty, not a thread of ours).
pub fn on_normal_scheduler() -> bool {
    unsafe { rustler::sys::enif_thread_type() == rustler::sys::ERL_NIF_THR_NORMAL_SCHEDULER }
}

thread_local! {
    /// Units used on this thread and not reported yet (under 1% of a slice).
    static UNREPORTED: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// Work units (~100 ns each) reported as 1% of a time slice: the VM's own pace, not the
/// nominal 1 ms slice. The VM charges its BIFs ~40,000 reductions per ms of CPU (measured:
/// `binary_to_term(term_to_binary(s))` on a short string), so its 4,000-reduction slice is
/// ~0.1 ms of such work. At 100 units per percent (a 1 ms slice) a loop of 3 µs validations
/// held its scheduler 0.57 ms per slice against the VM's 0.08-0.13 ms, and a sleeper woke
/// 2.3 ms late (p99) against 1.1 ms (`bench/stall.exs`, issue 26 item 6).
const UNITS_PER_PERCENT: i64 = 10;

/// Tells the VM how much of a time slice a call used, in work units, so it schedules other
/// processes sooner after a long call. Only on normal schedulers. Calls under 1% each add up
/// per thread, so a process looping over cheap calls (an error of a few µs each) is charged
/// what it uses: without that, 500 calls of 1.6 µs ran as one 0.8 ms slice where the VM's own
/// term_to_binary loop ran 0.25 ms slices.
pub fn report_units(env: Env, units: i64) {
    let total = UNREPORTED.get().saturating_add(units.max(0));
    if total < UNITS_PER_PERCENT {
        UNREPORTED.set(total);
        return;
    }
    UNREPORTED.set(total % UNITS_PER_PERCENT);
    if on_normal_scheduler() {
        let percent = (total / UNITS_PER_PERCENT).clamp(1, 100) as i32;
        unsafe { rustler::sys::enif_consume_timeslice(env.as_c_arg(), percent) };
    }
}

/// Work units to convert a big integer of `words` 64-bit words to or from decimal digits:
/// schoolbook conversion is quadratic (measured ~3 ns per word squared).
pub fn bignum_units(words: usize) -> i64 {
    (words + words * words / 32) as i64
}
