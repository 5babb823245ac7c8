//! CPU time of an isolate thread, read from other threads (the watchdog) and from the
//! thread itself (its run's statistics).
use std::time::Duration;

/// A thread's CPU clock, started when its run started.
#[derive(Clone, Copy)]
pub(crate) struct ThreadClock {
    pthread: libc::pthread_t,
    /// The kernel's id of the thread (what a process outside names it by).
    tid: libc::pid_t,
    clock: os::Clock,
    at_start: Duration,
}

// SAFETY: `pthread_t` is an opaque handle, only passed to pthread calls (and the thread
// is alive whenever they are made, see its users); on musl and macOS it is a pointer
// type, which Rust does not send between threads by itself. glibc's is an integer.
#[cfg(any(target_env = "musl", target_os = "macos"))]
unsafe impl Send for ThreadClock {}
#[cfg(any(target_env = "musl", target_os = "macos"))]
unsafe impl Sync for ThreadClock {}

/// Linux: the thread's CPU clock id, read with clock_gettime from any thread.
#[cfg(target_os = "linux")]
mod os {
    use std::time::Duration;

    pub(super) type Clock = libc::clockid_t;

    /// The calling thread, its kernel id and its clock.
    pub(super) fn current() -> (libc::pthread_t, libc::pid_t, Clock) {
        // SAFETY: pthread_self is always valid; the clock id out-pointer is valid.
        let (pthread, clock) = unsafe {
            let me = libc::pthread_self();
            let mut clock: libc::clockid_t = libc::CLOCK_THREAD_CPUTIME_ID;
            libc::pthread_getcpuclockid(me, &mut clock);
            (me, clock)
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
        (pthread, tid, clock)
    }

    pub(super) fn read(clock: libc::clockid_t) -> Duration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: valid out-pointer. A clock of a thread that is gone fails with EINVAL and
        // leaves `ts` zero; callers read it only while the thread is alive.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
}

/// macOS has no clock id for another thread's CPU time (CLOCK_THREAD_CPUTIME_ID is the
/// caller's only): the thread's Mach port, read with thread_info(THREAD_BASIC_INFO), in
/// microseconds.
#[cfg(target_os = "macos")]
mod os {
    use std::time::Duration;

    pub(super) type Clock = libc::thread_t;

    /// The calling thread and its Mach port. The tid is 0: no other process can act on a
    /// thread of ours by id on macOS (see `quarantine::lower_thread_of`).
    pub(super) fn current() -> (libc::pthread_t, libc::pid_t, Clock) {
        // SAFETY: pthread_self is always valid; the port pthread_mach_thread_np returns is
        // the thread's own, valid while it lives, and needs no deallocation.
        unsafe {
            let me = libc::pthread_self();
            (me, 0, libc::pthread_mach_thread_np(me))
        }
    }

    pub(super) fn read(port: Clock) -> Duration {
        // SAFETY: zero is a valid thread_basic_info; `count` says how many integers fit.
        // A thread that is gone fails and leaves it zero; callers read only live threads.
        unsafe {
            let mut info: libc::thread_basic_info = std::mem::zeroed();
            let mut count = libc::THREAD_BASIC_INFO_COUNT;
            libc::thread_info(
                port,
                libc::THREAD_BASIC_INFO as libc::thread_flavor_t,
                (&mut info as *mut libc::thread_basic_info).cast(),
                &mut count,
            );
            let micros = |t: libc::time_value_t| t.seconds.max(0) as u64 * 1_000_000 + t.microseconds.max(0) as u64;
            Duration::from_micros(micros(info.user_time) + micros(info.system_time))
        }
    }
}

use os::read;

impl ThreadClock {
    /// The calling thread's clock, counting from now.
    pub(crate) fn start_on_current_thread() -> ThreadClock {
        let (pthread, tid, clock) = os::current();
        ThreadClock { pthread, tid, clock, at_start: read(clock) }
    }

    /// CPU time the thread has used since `start_on_current_thread`. The thread must
    /// still be alive.
    pub(crate) fn used(&self) -> Duration {
        read(self.clock).saturating_sub(self.at_start)
    }

    /// The thread, for quarantine.
    pub(crate) fn pthread(&self) -> libc::pthread_t {
        self.pthread
    }

    pub(crate) fn tid(&self) -> libc::pid_t {
        self.tid
    }
}
