//! `lock_down`: what a sandbox host process does to itself once it has loaded
//! everything it needs (its entry script, the addon, the IPC channel), so that code
//! escaping V8 inside it can do as little as possible:
//!
//! 1. die with its parent (`PR_SET_PDEATHSIG` = SIGKILL), and exit at once if the
//!    parent is already gone (it died between `fork` and this call);
//! 2. `no_new_privs`: nothing it could still run gains privileges;
//! 3. the seccomp policy of `isolet_core::syscall_policy` on every thread (TSYNC):
//!    no exec, no new process, no socket, no file opened, no other process touched.
//!
//! Runs on the JS main thread of the child. Where a step is unavailable (not Linux, a
//! kernel without seccomp filters), the status says which and why instead of failing,
//! so the parent can report it.

/// What `lock_down` achieved. Every flag is read back from the kernel after the step.
#[derive(Debug, Clone, Default)]
pub(crate) struct LockDownStatus {
    pub seccomp: bool,
    pub no_new_privs: bool,
    pub parent_death_signal: bool,
    /// Why a step is missing, if one is.
    pub reason: Option<String>,
    /// The system calls the installed policy refuses (some only for some arguments).
    pub refused: Vec<&'static str>,
    /// io_uring rings that were open at lock-down (libuv's epoll batching rings: Node 22+
    /// on kernels with io_uring). They stay usable, and what is
    /// submitted on them is not seen by seccomp: see docs/process-isolation.md.
    pub io_uring_rings: u32,
}

impl From<LockDownStatus> for isolet_core::frame::WireLockdown {
    fn from(s: LockDownStatus) -> Self {
        isolet_core::frame::WireLockdown {
            seccomp: s.seccomp,
            no_new_privs: s.no_new_privs,
            parent_death_signal: s.parent_death_signal,
            reason: s.reason,
            refused: s.refused.into_iter().map(String::from).collect(),
            io_uring_rings: s.io_uring_rings,
        }
    }
}

/// Exit status of a child whose parent died before it could lock down.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) const ORPHANED_EXIT_CODE: i32 = 71;

/// Locks this process down; see the module docs. Only the first call does anything
/// (after it, listing descriptors is refused, so a second policy could not be built
/// correctly); later calls return the first call's status.
pub(crate) fn lock_down(parent_pid: u32) -> LockDownStatus {
    static DONE: std::sync::OnceLock<LockDownStatus> = std::sync::OnceLock::new();
    DONE.get_or_init(|| imp::lock_down_once(parent_pid)).clone()
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{LockDownStatus, ORPHANED_EXIT_CODE};
    use isolet_core::syscall_policy::{compile, LockDownContext};

    fn prctl(option: libc::c_int, arg: libc::c_ulong) -> std::io::Result<libc::c_int> {
        // SAFETY: the options used here (PDEATHSIG, NO_NEW_PRIVS, GET_SECCOMP) take
        // integer arguments only; PR_GET_PDEATHSIG is not used through this helper.
        let r = unsafe { libc::prctl(option, arg, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong) };
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(r)
        }
    }

    fn parent_death_signal() -> Option<libc::c_int> {
        let mut signal: libc::c_int = 0;
        // SAFETY: PR_GET_PDEATHSIG writes one int through the pointer, which is valid.
        let r = unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut signal as *mut libc::c_int) };
        (r == 0).then_some(signal)
    }

    /// The io_uring rings this process holds now: libuv's epoll batching rings (libuv
    /// in Node 22+ makes one per event loop and aborts if it cannot use it).
    fn io_uring_fds() -> std::io::Result<Vec<i32>> {
        let mut fds = Vec::new();
        for entry in std::fs::read_dir("/proc/self/fd")? {
            let entry = entry?;
            let Some(fd) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            // The directory's own descriptor is gone by the time its link is read.
            if let Ok(target) = std::fs::read_link(entry.path()) {
                if target.as_os_str() == "anon_inode:[io_uring]" {
                    fds.push(fd);
                }
            }
        }
        Ok(fds)
    }

    pub(super) fn lock_down_once(parent_pid: u32) -> LockDownStatus {
        let mut status = LockDownStatus::default();
        let mut reasons: Vec<String> = Vec::new();

        // 1. Die with the parent. Set before checking the parent, so that no moment is
        // left in which the parent can die unnoticed.
        match prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) {
            Ok(_) => status.parent_death_signal = parent_death_signal() == Some(libc::SIGKILL),
            Err(e) => reasons.push(format!("PR_SET_PDEATHSIG failed: {e}")),
        }
        // SAFETY: getppid has no preconditions.
        let ppid = unsafe { libc::getppid() };
        if ppid as u32 != parent_pid {
            // Re-parented: the parent died before PDEATHSIG was armed. Nobody is left
            // to serve; leave at once, without running exit handlers.
            let message = format!("isolet: parent process {parent_pid} is gone (parent is now {ppid}); exiting\n");
            // SAFETY: writing a valid buffer to stderr, then _exit, which has no preconditions.
            unsafe {
                libc::write(2, message.as_ptr().cast(), message.len());
                libc::_exit(ORPHANED_EXIT_CODE);
            }
        }

        // 2. no_new_privs (the kernel also requires it for an unprivileged seccomp filter).
        match prctl(libc::PR_SET_NO_NEW_PRIVS, 1) {
            Ok(_) => status.no_new_privs = prctl(libc::PR_GET_NO_NEW_PRIVS, 0).ok() == Some(1),
            Err(e) => reasons.push(format!("PR_SET_NO_NEW_PRIVS failed: {e}")),
        }

        // 3. The seccomp policy, on every thread of the process.
        match install_policy(&mut status) {
            Ok(refused) => {
                // SECCOMP_MODE_FILTER = 2.
                status.seccomp = prctl(libc::PR_GET_SECCOMP, 0).ok() == Some(2);
                if status.seccomp {
                    status.refused = refused;
                } else {
                    reasons.push("the kernel did not report seccomp filter mode after installing".into());
                }
            }
            Err(reason) => reasons.push(reason),
        }
        if !reasons.is_empty() {
            status.reason = Some(reasons.join("; "));
        }
        status
    }

    fn install_policy(status: &mut LockDownStatus) -> Result<Vec<&'static str>, String> {
        let io_uring_fds = io_uring_fds().map_err(|e| {
            // Without the list, libuv's own rings would be refused and libuv would abort.
            format!("seccomp not installed: could not list this process's descriptors in /proc/self/fd ({e})")
        })?;
        status.io_uring_rings = io_uring_fds.len() as u32;
        let policy =
            compile(&LockDownContext { self_pid: std::process::id(), io_uring_fds }).map_err(|e| format!("seccomp not installed: {e}"))?;
        for (i, program) in policy.programs.iter().enumerate() {
            if let Err(e) = seccompiler::apply_filter_all_threads(program) {
                return Err(if i == 0 {
                    format!("seccomp not installed: the kernel refused the filter ({e})")
                } else {
                    format!("seccomp partly installed ({i} of {} programs): {e}", policy.programs.len())
                });
            }
        }
        Ok(policy.installed)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::LockDownStatus;

    pub(super) fn lock_down_once(_parent_pid: u32) -> LockDownStatus {
        LockDownStatus {
            reason: Some(format!(
                "seccomp, no_new_privs and PR_SET_PDEATHSIG are Linux-only; on {} a sandbox host process runs \
                 with the privileges of its user and relies on the IPC pipe closing to exit with its parent",
                std::env::consts::OS
            )),
            ..LockDownStatus::default()
        }
    }
}
