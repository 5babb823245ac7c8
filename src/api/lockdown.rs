//! `lockDown(parentPid)`: internal binding for the sandbox host entry script (not in
//! the public `index.d.ts`). See `crate::sandbox_host` for what it does.
use napi::bindgen_prelude::*;
use napi_derive::napi;

#[napi(object)]
pub struct LockDownStatusJs {
    /// The seccomp policy is installed on every thread.
    pub seccomp: bool,
    /// `no_new_privs` is set.
    pub no_new_privs: bool,
    /// The process gets SIGKILL when its parent dies.
    pub parent_death_signal: bool,
    /// Why a step is missing (non-Linux, a kernel without seccomp filters, ...).
    pub reason: Option<String>,
    /// System calls the installed policy refuses (some only for some arguments).
    pub refused: Vec<String>,
    /// io_uring rings libuv had open at lock-down; they stay usable (see
    /// docs/process-isolation.md).
    pub io_uring_rings: u32,
}

/// Locks the calling process down for good (see `src/sandbox_host/lockdown.rs`). Call it
/// once, after everything the process needs is loaded: afterwards it cannot open files,
/// start processes or create sockets. `parentPid` is the pid the parent passed down
/// (not `process.ppid`, which is read anew and would hide a parent that already died);
/// if the process's parent is no longer that pid, the process exits at once with
/// status 71.
#[napi]
pub fn lock_down(parent_pid: f64) -> Result<LockDownStatusJs> {
    if !(parent_pid.fract() == 0.0 && parent_pid >= 1.0 && parent_pid <= i32::MAX as f64) {
        return Err(super::validation_error(format!(
            "lockDown: parentPid must be a process id (a whole number from 1 to {}), got {parent_pid}",
            i32::MAX
        )));
    }
    let s = isolet_core::frame::WireLockdown::from(crate::sandbox_host::lock_down(parent_pid as u32));
    Ok(LockDownStatusJs {
        seccomp: s.seccomp,
        no_new_privs: s.no_new_privs,
        parent_death_signal: s.parent_death_signal,
        reason: s.reason,
        refused: s.refused,
        io_uring_rings: s.io_uring_rings,
    })
}
