//! Threads that V8 could not stop (a built-in that loops without checking for
//! termination, e.g. `Array.prototype.indexOf` on a huge array-like) are quarantined:
//! lowered to the lowest priority of the ordinary policy (nice 19 on Linux,
//! `QUARANTINE_NICE`: never SCHED_IDLE, under which a lock it holds stalled the threads
//! waiting for it while the machine was busy), throttled, and left to run. They are never stopped at an
//! arbitrary instruction: a thread stopped by a signal may hold a lock of Node's platform
//! (its worker-queue mutex, the allocator's), which froze the whole host. A quarantined
//! thread keeps its isolate and stack (bounded by its limits, counted, capped); if it
//! finishes on its own, V8 sees the pending termination, the thread disposes its isolate
//! as after any run and leaves the count. Only a process boundary can reclaim one that
//! never finishes.
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

static QUARANTINED: AtomicUsize = AtomicUsize::new(0);
/// Threads parked after a fatal V8 OOM, and what their isolates hold (never released:
/// such a thread never runs again).
static PARKED: AtomicUsize = AtomicUsize::new(0);
static PARKED_BYTES: AtomicU64 = AtomicU64::new(0);
/// Quarantined threads this process could not lower itself (a sandbox host's seccomp
/// filter lets it change the scheduling of its main thread only): their ids, for the
/// parent, which lowers them from outside.
static NOT_LOWERED: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());
/// Whether isolet is loaded in the main thread's environment, whose teardown hook (see
/// `engine::shutdown_all`) ends the process before V8's teardown.
static MAIN_GUARDED: AtomicBool = AtomicBool::new(false);
/// The code Node's main thread is exiting with, recorded by lib/native.js from
/// `process.on('exit')`.
static EXIT_CODE: AtomicI32 = AtomicI32::new(0);

/// Whether the caller runs on the process's main thread (where Node's main environment
/// lives). A `worker_threads` Worker's environment runs on a thread of its own.
#[cfg(target_os = "linux")]
pub(crate) fn on_main_thread() -> bool {
    // SAFETY: gettid and getpid have no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t == libc::getpid() }
}

#[cfg(target_os = "macos")]
pub(crate) fn on_main_thread() -> bool {
    // SAFETY: pthread_main_np has no preconditions.
    unsafe { libc::pthread_main_np() == 1 }
}

/// The main environment has isolet's teardown hook (called from that environment's load).
pub(crate) fn set_main_guarded() {
    MAIN_GUARDED.store(true, Ordering::SeqCst);
}

/// Whether the process's exit passes through isolet's hook before V8's teardown. Without
/// it (isolet loaded only in `worker_threads` Workers), Node's `V8::Dispose` at exit frees
/// V8's process-wide tables under a quarantined thread still running in its isolate
/// (a crash in the stuck thread on Node 20-24, an abort in V8 on 26).
pub(crate) fn main_guarded() -> bool {
    MAIN_GUARDED.load(Ordering::SeqCst)
}

/// Records the main thread's exit code; a Worker's exit code is not the process's.
pub(crate) fn set_exit_code(code: i32) {
    if on_main_thread() {
        EXIT_CODE.store(code, Ordering::SeqCst);
    }
}

/// Ends the process without tearing V8 down (see `engine::shutdown_all`), with the code
/// Node's main thread was exiting with.
pub(crate) fn exit_without_v8_teardown() -> ! {
    // SAFETY: flushing C stdio and _exit have no preconditions.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(EXIT_CODE.load(Ordering::SeqCst))
    }
}

/// Threads in quarantine now: still running at the lowest priority after ignoring
/// termination, or parked after a fatal V8 OOM.
pub(crate) fn quarantined() -> usize {
    QUARANTINED.load(Ordering::SeqCst)
}

/// Threads parked after a fatal V8 OOM, and what their isolates hold, in bytes.
pub(crate) fn parked() -> (usize, u64) {
    (PARKED.load(Ordering::SeqCst), PARKED_BYTES.load(Ordering::SeqCst))
}

/// The most parked threads may hold before new runs are refused (`ISOLET_MAX_PARKED_MB`,
/// read per admission).
pub(crate) fn max_parked_bytes() -> u64 {
    isolet_core::limits::max_parked_bytes(std::env::var(isolet_core::limits::MAX_PARKED_MB_ENV).ok().as_deref())
}

/// The refusal of a new run once parked threads hold their bound (see
/// `isolet_core::limits::parked_memory_refusal`).
pub(crate) fn parked_refusal() -> Option<isolet_core::Failure> {
    let (threads, bytes) = parked();
    isolet_core::limits::parked_memory_refusal(threads, bytes, max_parked_bytes())
}

/// The number of quarantined threads at which new runs are refused
/// (`ISOLET_MAX_QUARANTINED`, read per admission so tests and operators can set it).
pub(crate) fn max_quarantined() -> usize {
    isolet_core::queue::max_quarantined(std::env::var(isolet_core::queue::MAX_QUARANTINED_ENV).ok().as_deref())
}

/// Quarantines `thread`: from now on it gets the smallest share of the CPU.
///
/// # Safety
/// `thread` must be a live isolate thread that cannot exit during this call (the
/// caller holds the run's `ending` lock, which the thread takes before it exits).
pub(crate) unsafe fn quarantine(thread: libc::pthread_t, tid: libc::pid_t) {
    // SAFETY: the caller guarantees `thread` is alive for this call.
    if unsafe { !lower(thread, tid) } {
        super::lock(&NOT_LOWERED).push(tid);
    }
    // SAFETY: as above.
    unsafe { throttle::start(thread, tid) };
    QUARANTINED.fetch_add(1, Ordering::SeqCst);
}

/// The lowest priority yields to other threads, but a quarantined thread alone on a core
/// still spins it at 100% for as long as its built-in loops (a sandbox host kept alive by
/// a neighbour's run, or this process in thread mode). A timer on the thread's own CPU
/// clock signals it after each `QUARANTINE_RUN_MS` of CPU time, and the handler sleeps
/// `QUARANTINE_PAUSE_MS`: at most `quarantine_core_share()` of a core, and nothing at all
/// when other threads take the CPU (its clock does not advance). Linux only (per-thread
/// CPU-clock timers that signal one thread).
#[cfg(target_os = "linux")]
mod throttle {
    use isolet_core::limits::{QUARANTINE_PAUSE_MS, QUARANTINE_RUN_MS};
    use std::sync::{Mutex, OnceLock};

    /// The throttled threads' timers, by thread id (deleted when the thread leaves).
    struct Timer(libc::timer_t);
    // SAFETY: a timer id is a process-wide handle, usable from any thread.
    unsafe impl Send for Timer {}
    static TIMERS: Mutex<Vec<(libc::pid_t, Timer)>> = Mutex::new(Vec::new());

    /// A real-time signal for the pause, free in Node's process (Node uses SIGUSR1, SIGPROF
    /// and libuv SIGCHLD; glibc keeps the first two real-time signals).
    fn signal() -> libc::c_int {
        libc::SIGRTMIN() + 6
    }

    extern "C" fn pause(_: libc::c_int) {
        // Async-signal-safe: nanosleep only, errno kept for the interrupted code.
        // SAFETY: errno's location is the calling thread's; nanosleep has no preconditions.
        unsafe {
            let errno = *libc::__errno_location();
            let ts = libc::timespec { tv_sec: 0, tv_nsec: (QUARANTINE_PAUSE_MS * 1_000_000) as libc::c_long };
            libc::nanosleep(&ts, std::ptr::null_mut());
            *libc::__errno_location() = errno;
        }
    }

    /// Installs the handler once; false if the signal is someone else's (then no thread is
    /// throttled: a timer must never deliver a signal whose default ends the process).
    fn handler_installed() -> bool {
        static INSTALLED: OnceLock<bool> = OnceLock::new();
        *INSTALLED.get_or_init(|| {
            // SAFETY: sigaction with a zeroed, then filled, struct; reading the current
            // disposition first so another owner's handler is never replaced.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal(), std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
                    return false;
                }
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = pause as extern "C" fn(libc::c_int) as usize;
                act.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(signal(), &act, std::ptr::null_mut()) == 0
            }
        })
    }

    /// Starts pausing live thread `thread` (id `tid`) after each `QUARANTINE_RUN_MS` of its
    /// CPU time. Best effort: a failure leaves it at the lowest priority only.
    ///
    /// # Safety
    /// `thread` must be alive for this call.
    pub(super) unsafe fn start(thread: libc::pthread_t, tid: libc::pid_t) {
        if !handler_installed() {
            return;
        }
        // SAFETY: the caller guarantees `thread` is alive; the structs are plain data.
        unsafe {
            let mut clock: libc::clockid_t = 0;
            if libc::pthread_getcpuclockid(thread, &mut clock) != 0 {
                return;
            }
            let mut event: libc::sigevent = std::mem::zeroed();
            event.sigev_notify = libc::SIGEV_THREAD_ID;
            event.sigev_signo = signal();
            event.sigev_notify_thread_id = tid;
            let mut timer: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(clock, &mut event, &mut timer) != 0 {
                return;
            }
            let every = libc::timespec { tv_sec: 0, tv_nsec: (QUARANTINE_RUN_MS * 1_000_000) as libc::c_long };
            let spec = libc::itimerspec { it_interval: every, it_value: every };
            if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
                libc::timer_delete(timer);
                return;
            }
            super::super::lock(&TIMERS).push((tid, Timer(timer)));
        }
    }

    /// The calling thread leaves the quarantine: its timer, if it has one, is deleted.
    pub(super) fn stop_current() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
        let mut timers = super::super::lock(&TIMERS);
        if let Some(at) = timers.iter().position(|(t, _)| *t == tid) {
            let (_, Timer(timer)) = timers.swap_remove(at);
            // SAFETY: a timer this process created and nobody deleted.
            unsafe { libc::timer_delete(timer) };
        }
    }
}

/// macOS: no per-thread CPU-clock timers; a quarantined thread has the lowest ordinary
/// priority only.
#[cfg(target_os = "macos")]
mod throttle {
    pub(super) unsafe fn start(_thread: libc::pthread_t, _tid: libc::pid_t) {}
    pub(super) fn stop_current() {}
}

/// Lowers live thread `tid` of this process to `QUARANTINE_NICE`; false if the system
/// refused (a sandbox host's seccomp filter: its parent lowers the thread).
#[cfg(target_os = "linux")]
unsafe fn lower(_thread: libc::pthread_t, tid: libc::pid_t) -> bool {
    set_nice(tid, isolet_core::limits::QUARANTINE_NICE)
}

/// setpriority(2) on one thread (Linux's niceness is per thread); raising it needs no privilege.
#[cfg(target_os = "linux")]
fn set_nice(tid: libc::pid_t, nice: i32) -> bool {
    // SAFETY: a system call on a thread id; no memory is passed.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) == 0 }
}

/// macOS: the lowest priority of SCHED_OTHER, as on Linux (its background QoS and
/// PRIO_DARWIN_BG apply to the calling thread only): below every ordinary thread's
/// default, still competing for CPU.
#[cfg(target_os = "macos")]
unsafe fn lower(thread: libc::pthread_t, _tid: libc::pid_t) -> bool {
    // Zeroed, not a struct literal: sched_param's fields differ between libcs.
    // SAFETY: sched_param is plain integers, for which zero is valid.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: no preconditions; the caller guarantees `thread` is alive for this call.
    unsafe {
        param.sched_priority = libc::sched_get_priority_min(libc::SCHED_OTHER);
        libc::pthread_setschedparam(thread, libc::SCHED_OTHER, &param) == 0
    }
}

/// The quarantined threads not lowered yet (each reported once).
pub(crate) fn take_not_lowered() -> Vec<libc::pid_t> {
    std::mem::take(&mut *super::lock(&NOT_LOWERED))
}

/// Lowers thread `tid` of process `pid` (a child of ours) to `QUARANTINE_NICE`, if it is
/// one of that process's threads. False when it is not, or the call failed.
#[cfg(target_os = "linux")]
pub(crate) fn lower_thread_of(pid: u32, tid: u32) -> bool {
    let task = format!("/proc/{pid}/task/{tid}");
    if tid == 0 || !std::path::Path::new(&task).exists() {
        return false;
    }
    // The thread may end and its id go to another process's new thread between the check
    // and the call (a host reporting a thread that it then ends): that thread gets its
    // niceness back, where the system lets it.
    // SAFETY: getpriority has no memory effects; -1 is also a niceness, told apart by errno.
    let before = unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        (*libc::__errno_location() == 0).then_some(nice)
    };
    let Some(before) = before else { return false };
    if !set_nice(tid as libc::pid_t, isolet_core::limits::QUARANTINE_NICE) {
        return false;
    }
    if !std::path::Path::new(&task).exists() {
        set_nice(tid as libc::pid_t, before);
        return false;
    }
    true
}

/// macOS: another process's thread cannot be reached without its task port (a privilege).
/// Hosts there have no seccomp filter and lower their threads themselves, so nothing asks.
#[cfg(target_os = "macos")]
pub(crate) fn lower_thread_of(_pid: u32, _tid: u32) -> bool {
    false
}

/// A quarantined thread finished on its own and disposed its isolate (called on that
/// thread).
pub(crate) fn release() {
    throttle::stop_current();
    QUARANTINED.fetch_sub(1, Ordering::SeqCst);
}

/// Parks the calling thread for good (a fatal V8 OOM on an isolate thread: V8 would
/// abort the process if we returned, and the isolate's heap cannot be used again). The
/// thread parks itself inside V8's OOM handler, not at an arbitrary instruction.
/// `count`: the thread is not counted in the quarantine yet (it served no run, or its
/// run had ended); a run that abandons its thread counts it itself. `held_bytes`: what its
/// isolate keeps in this process from now on (`parked_bytes`).
pub(crate) fn park_current_thread(count: bool, held_bytes: usize) -> ! {
    if count {
        QUARANTINED.fetch_add(1, Ordering::SeqCst);
    }
    PARKED.fetch_add(1, Ordering::SeqCst);
    PARKED_BYTES.fetch_add(isolet_core::limits::parked_thread_bytes(held_bytes as u64), Ordering::SeqCst);
    loop {
        std::thread::park();
    }
}
