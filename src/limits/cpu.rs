//! CPU time of an isolate thread, read from other threads (the watchdog) and from the
//! thread itself (its run's statistics).
use std::time::Duration;

/// A thread's CPU clock, started when its run started.
#[derive(Clone, Copy)]
pub(crate) struct ThreadClock {
    pthread: libc::pthread_t,
    /// The kernel's id of the thread (what a process outside names it by).
    tid: libc::pid_t,
    clock: libc::clockid_t,
    at_start: Duration,
}

// SAFETY: `pthread_t` is an opaque handle, only passed to pthread calls (and the thread
// is alive whenever they are made, see its users); on musl it is a pointer type, which
// Rust does not send between threads by itself. glibc's is an integer.
#[cfg(target_env = "musl")]
unsafe impl Send for ThreadClock {}
#[cfg(target_env = "musl")]
unsafe impl Sync for ThreadClock {}

fn read(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer. A clock of a thread that is gone fails with EINVAL and
    // leaves `ts` zero; callers read it only while the thread is alive.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl ThreadClock {
    /// The calling thread's clock, counting from now.
    pub(crate) fn start_on_current_thread() -> ThreadClock {
        // SAFETY: pthread_self is always valid; the clock id out-pointer is valid.
        let (pthread, clock) = unsafe {
            let me = libc::pthread_self();
            let mut clock: libc::clockid_t = libc::CLOCK_THREAD_CPUTIME_ID;
            libc::pthread_getcpuclockid(me, &mut clock);
            (me, clock)
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
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
