//! Threads that V8 could not stop (a built-in that loops without checking for
//! termination, e.g. `Array.prototype.indexOf` on a huge array-like) are suspended: a
//! signal parks the thread in its handler forever, so it stops burning a core. Its
//! isolate and stack stay allocated (a bounded leak, counted and reported in stats)
//! because freeing an isolate in the middle of a V8 built-in is not possible.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

static QUARANTINED: AtomicUsize = AtomicUsize::new(0);
/// The code Node is exiting with, recorded by lib/native.js from `process.on('exit')`.
static EXIT_CODE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

pub(crate) fn set_exit_code(code: i32) {
    EXIT_CODE.store(code, Ordering::SeqCst);
}

/// Ends the process without tearing V8 down (see `engine::shutdown_all`).
pub(crate) fn exit_without_v8_teardown() -> ! {
    // SAFETY: flushing C stdio and _exit have no preconditions.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(EXIT_CODE.load(Ordering::SeqCst))
    }
}

/// Threads suspended so far in this process.
pub(crate) fn quarantined() -> usize {
    QUARANTINED.load(Ordering::SeqCst)
}

/// Default for `ISOLET_MAX_QUARANTINED`: how many parked threads (each holding an
/// isolate of up to its memory limit) a process accepts before refusing new runs.
pub(crate) const DEFAULT_MAX_QUARANTINED: usize = 32;

/// `Some(message)` when the process has parked as many threads as it may: new runs are
/// refused so leaked isolates cannot grow without bound; the process should restart.
pub(crate) fn refusal() -> Option<String> {
    let max = std::env::var("ISOLET_MAX_QUARANTINED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MAX_QUARANTINED);
    let n = quarantined();
    (n >= max).then(|| {
        format!(
            "{n} sandbox threads ignored termination and are parked (limit ISOLET_MAX_QUARANTINED={max}); \
             restart the process to reclaim their memory"
        )
    })
}

fn park_signal() -> libc::c_int {
    // Node and V8 leave the real-time signals alone; glibc keeps the first few.
    libc::SIGRTMAX() - 3
}

extern "C" fn park(_sig: libc::c_int) {
    loop {
        // SAFETY: pause is async-signal-safe.
        unsafe { libc::pause() };
    }
}

fn install_handler() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction with a valid handler and an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = park as extern "C" fn(libc::c_int) as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = 0;
            libc::sigaction(park_signal(), &action, std::ptr::null_mut());
        }
    });
}

/// Parks `thread` for good. First drops it to SCHED_IDLE, so even before the signal
/// lands it only gets CPU nobody else wants.
///
/// # Safety
/// `thread` must be a live isolate thread that cannot exit during this call (the
/// caller holds the run's thread gate).
pub(crate) unsafe fn suspend(thread: libc::pthread_t) {
    install_handler();
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: the caller guarantees `thread` is alive for this call.
    unsafe {
        libc::pthread_setschedparam(thread, libc::SCHED_IDLE, &param);
        libc::pthread_kill(thread, park_signal());
    }
    QUARANTINED.fetch_add(1, Ordering::SeqCst);
}

/// Parks the calling thread for good (a fatal V8 OOM on an isolate thread: V8 would
/// abort the process if we returned, and the isolate's heap cannot be used again).
pub(crate) fn park_current_thread() -> ! {
    QUARANTINED.fetch_add(1, Ordering::SeqCst);
    loop {
        std::thread::park();
    }
}

/// Signals are delivered asynchronously: wait (at most 100 ms) until the thread's CPU
/// clock stops moving, i.e. it sits in the park handler.
pub(crate) fn wait_until_parked(cpu_time: impl Fn() -> std::time::Duration) {
    let step = std::time::Duration::from_millis(2);
    let mut last = cpu_time();
    for _ in 0..50 {
        std::thread::sleep(step);
        let now = cpu_time();
        if now == last {
            return;
        }
        last = now;
    }
}
