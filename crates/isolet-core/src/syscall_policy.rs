//! The system calls a sandbox host process refuses once it has started (its seccomp
//! policy), as data, and its compilation to seccomp-bpf programs (Linux only).
//!
//! A sandbox host process is a child `node` that runs isolates and talks to its parent
//! over an IPC socket it inherited. After start-up it needs threads, memory, futexes,
//! epoll, timers, randomness and reads/writes on descriptors it already holds; it never
//! needs a new program, a new process, a socket or a file. The policy is a deny list with
//! a default of "allow" so that it can be read entry by entry, and every entry is tested
//! (below, at the system-call level, and in `__test__/seccomp.spec.ts` from Node). A
//! refused call fails with `EPERM` (`ENOSYS` for `clone3`) rather than killing the
//! process, so a gap in the list shows up as an error, not as a crash.
//!
//! Compiling is pure (no system call); installing the programs is
//! `src/supervisor`'s job.

/// What a refused call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `EPERM`: "operation not permitted"; Node reports it as `code: 'EPERM'`.
    NotPermitted,
    /// `ENOSYS`: "function not implemented"; makes glibc fall back to an older call
    /// that the policy can inspect.
    NotImplemented,
}

/// Which calls of a system call are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Every call.
    Always,
    /// `clone` whose flags (argument 0) lack `CLONE_THREAD` (a new process), or ask
    /// for a new namespace. Plain threads stay allowed: V8 and Node start threads after
    /// start-up.
    NewProcess,
    /// Signals whose target (argument `arg`) is not this process. 0 and negative
    /// targets are process groups, which include other processes: refused.
    SignalsOtherProcess { arg: u8 },
    /// Calls whose argument `arg` (a process id, where 0 means the caller) is neither
    /// 0 nor this process.
    TargetsOtherProcess { arg: u8 },
    /// Calls taking `(which, who, ...)` (setpriority, ioprio_set): refused unless
    /// `which` is `process_kind` (one process, not a group or a user) and `who` is 0 or
    /// this process.
    TargetsOtherThanCaller { process_kind: u32 },
    /// Calls on any descriptor (argument 0) other than the io_uring rings this process
    /// already had when it locked down (libuv's epoll batching rings, which libuv aborts
    /// without and which cannot be closed from outside libuv).
    NotPreexistingRing,
    /// Argument `arg` (a request or option code) is one of `values`.
    ArgIn { arg: u8, values: &'static [u32] },
}

/// One entry of the deny list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The system call's name as in `man 2` (and `libc::SYS_<name>`).
    pub syscall: &'static str,
    pub when: When,
    pub refusal: Refusal,
    /// Why a sandbox host process must not make this call.
    pub why: &'static str,
}

const fn always(syscall: &'static str, why: &'static str) -> Refused {
    Refused { syscall, when: When::Always, refusal: Refusal::NotPermitted, why }
}

/// `TIOCSTI`: push bytes into a terminal's input queue.
pub const TIOCSTI: u32 = 0x5412;
/// `TIOCLINUX`: virtual-console requests, including pasting the selection as input.
pub const TIOCLINUX: u32 = 0x541C;
/// `prctl` options: the parent-death signal (cleared, the child would outlive its
/// parent) and rewriting the process's memory map description.
pub const PR_SET_PDEATHSIG: u32 = 1;
pub const PR_SET_MM: u32 = 35;
/// The `CLONE_NEW*` namespace flags that `clone` takes (`CLONE_NEWTIME`, 0x80, only
/// through clone3, which is refused).
pub const CLONE_NEW_NAMESPACES: &[u32] = &[
    0x0002_0000, // CLONE_NEWNS
    0x0200_0000, // CLONE_NEWCGROUP
    0x0400_0000, // CLONE_NEWUTS
    0x0800_0000, // CLONE_NEWIPC
    0x1000_0000, // CLONE_NEWUSER
    0x2000_0000, // CLONE_NEWPID
    0x4000_0000, // CLONE_NEWNET
];
/// `PRIO_PROCESS` (setpriority) and `IOPRIO_WHO_PROCESS` (ioprio_set).
const PRIO_PROCESS: u32 = 0;
const IOPRIO_WHO_PROCESS: u32 = 1;

/// Refused in a sandbox host from before it execs `node` (see `compile_before_exec`).
pub const REFUSED_BEFORE_EXEC: &[&str] = &["io_uring_setup", "io_uring_enter", "io_uring_register"];

/// The deny list. Everything not listed (or not matching its `when`) is allowed.
pub const REFUSED: &[Refused] = &[
    // --- New programs and processes -------------------------------------------------
    always("execve", "runs another program, outside every limit isolet sets"),
    always("execveat", "runs another program (execve relative to a descriptor)"),
    always("fork", "a new process escapes the parent's supervision and RSS bound"),
    always("vfork", "a new process (fork sharing memory until exec)"),
    Refused {
        syscall: "clone",
        when: When::NewProcess,
        refusal: Refusal::NotPermitted,
        why: "without CLONE_THREAD it makes a new process, like fork; with it, a thread, which V8 needs (but no thread in a new namespace, as unshare)",
    },
    Refused {
        syscall: "clone3",
        when: When::Always,
        refusal: Refusal::NotImplemented,
        why: "its flags sit in memory that seccomp cannot read; ENOSYS makes glibc fall back to clone, which is filtered by flags",
    },
    // --- Network ------------------------------------------------------------------
    always("socket", "a new socket reaches the network or local services; the child talks only over its inherited IPC socket"),
    always("socketpair", "new sockets are how descriptors get passed around; none is needed after start-up"),
    always("connect", "reaching another endpoint, even with a socket obtained some other way"),
    always("bind", "listening on an address"),
    always("listen", "accepting connections"),
    always("accept", "accepting connections"),
    always("accept4", "accepting connections"),
    // --- Files --------------------------------------------------------------------
    always("open", "capabilities read files in the parent; the child opens nothing"),
    always("openat", "opening files (what glibc's open uses)"),
    always("openat2", "opening files (the newest variant)"),
    always("creat", "creating files"),
    always("open_by_handle_at", "opens any file on a mount by handle, past every path check (root only, but the child may be root)"),
    always("unlink", "changes the file system without opening anything"),
    always("unlinkat", "changes the file system without opening anything"),
    always("rmdir", "changes the file system without opening anything"),
    always("rename", "changes the file system without opening anything"),
    always("renameat", "changes the file system without opening anything"),
    always("renameat2", "changes the file system without opening anything"),
    always("mkdir", "changes the file system without opening anything"),
    always("mkdirat", "changes the file system without opening anything"),
    always("link", "a hard link can expose a file under a new name"),
    always("linkat", "a hard link can expose a file under a new name"),
    always("symlink", "a symbolic link can redirect the parent's own path lookups"),
    always("symlinkat", "a symbolic link can redirect the parent's own path lookups"),
    always("mknod", "creates device nodes and FIFOs"),
    always("mknodat", "creates device nodes and FIFOs"),
    always("truncate", "destroys a file's content by path"),
    always("chmod", "changes permissions by path"),
    always("fchmodat", "changes permissions by path"),
    always("fchmodat2", "changes permissions by path (the newest variant)"),
    always("chown", "changes ownership by path"),
    always("lchown", "changes ownership by path"),
    always("fchownat", "changes ownership by path"),
    // --- Ways around the filter ---------------------------------------------------
    always("io_uring_setup", "io_uring performs opens, connects and more without the system calls seccomp sees; libuv falls back to epoll and the thread pool"),
    Refused {
        syscall: "io_uring_enter",
        when: When::NotPreexistingRing,
        refusal: Refusal::NotPermitted,
        why: "submits io_uring work; allowed only on the rings libuv set up before lock-down (it aborts without them)",
    },
    always("io_uring_register", "configures io_uring rings; libuv's epoll rings never need it"),
    always("bpf", "loads programs into the kernel"),
    always("perf_event_open", "kernel and hardware introspection, a frequent source of kernel bugs"),
    always("userfaultfd", "lets an exploit pause the kernel mid-copy (a classic race primitive)"),
    // --- Other processes ----------------------------------------------------------
    always("ptrace", "controls other processes of the same user, the parent included"),
    always("process_vm_readv", "reads another process's memory"),
    always("process_vm_writev", "writes another process's memory"),
    always("pidfd_open", "a handle on another process (the first step to pidfd_getfd)"),
    always("pidfd_getfd", "steals a descriptor from another process, e.g. the parent's sockets"),
    always("pidfd_send_signal", "signals another process"),
    Refused {
        syscall: "kill",
        when: When::SignalsOtherProcess { arg: 0 },
        refusal: Refusal::NotPermitted,
        why: "signals another process (e.g. SIGKILL to the host); signals to itself stay allowed",
    },
    Refused {
        syscall: "tgkill",
        when: When::SignalsOtherProcess { arg: 0 },
        refusal: Refusal::NotPermitted,
        why: "signals a thread of another process; its own threads stay allowed (abort, V8's profiler)",
    },
    Refused {
        syscall: "prlimit64",
        when: When::TargetsOtherProcess { arg: 0 },
        refusal: Refusal::NotPermitted,
        why: "sets another process's limits (RLIMIT_CPU of 1 s kills the host); getrlimit/setrlimit on itself (pid 0) stay allowed",
    },
    Refused {
        syscall: "setpriority",
        when: When::TargetsOtherThanCaller { process_kind: PRIO_PROCESS },
        refusal: Refusal::NotPermitted,
        why: "lowers the host's (or the user's every process's) priority; the child's own process stays allowed",
    },
    Refused {
        syscall: "ioprio_set",
        when: When::TargetsOtherThanCaller { process_kind: IOPRIO_WHO_PROCESS },
        refusal: Refusal::NotPermitted,
        why: "starves the host's I/O",
    },
    Refused {
        syscall: "sched_setscheduler",
        when: When::TargetsOtherProcess { arg: 0 },
        refusal: Refusal::NotPermitted,
        why: "SCHED_IDLE on the host starves it; allowed for the calling thread (0) and the main thread only, so the child cannot lower its other threads either",
    },
    Refused {
        syscall: "sched_setparam",
        when: When::TargetsOtherProcess { arg: 0 },
        refusal: Refusal::NotPermitted,
        why: "changes another process's scheduling",
    },
    Refused {
        syscall: "sched_setattr",
        when: When::TargetsOtherProcess { arg: 0 },
        refusal: Refusal::NotPermitted,
        why: "changes another process's scheduling",
    },
    Refused {
        syscall: "sched_setaffinity",
        when: When::TargetsOtherProcess { arg: 0 },
        refusal: Refusal::NotPermitted,
        why: "pins the host to one CPU",
    },
    Refused {
        syscall: "migrate_pages",
        when: When::TargetsOtherProcess { arg: 0 },
        refusal: Refusal::NotPermitted,
        why: "moves another process's memory between NUMA nodes",
    },
    Refused {
        syscall: "move_pages",
        when: When::TargetsOtherProcess { arg: 0 },
        refusal: Refusal::NotPermitted,
        why: "moves another process's memory between NUMA nodes",
    },
    always("tkill", "signals any thread by id, including other processes' threads; glibc uses tgkill"),
    // --- The system ---------------------------------------------------------------
    Refused {
        syscall: "prctl",
        when: When::ArgIn { arg: 0, values: &[PR_SET_PDEATHSIG, PR_SET_MM] },
        refusal: Refusal::NotPermitted,
        why: "clearing PR_SET_PDEATHSIG lets the child outlive its parent; PR_SET_MM rewrites what /proc says of it; other options (thread names) stay allowed",
    },
    always("fanotify_init", "watches, and as root can block, every file access on the machine, the host's included"),
    always("fanotify_mark", "watches file accesses (with fanotify_init)"),
    always("inotify_add_watch", "watches the host's files by path; fs.watch is not needed in the child"),
    always("mount", "changes what paths mean"),
    always("umount2", "changes what paths mean"),
    always("pivot_root", "changes the root file system"),
    always("chroot", "changes the root directory (with other bugs, a way out of it)"),
    always("unshare", "new namespaces widen the kernel surface (user namespaces grant capabilities)"),
    always("setns", "enters another process's namespaces"),
    always("kexec_load", "replaces the running kernel"),
    always("kexec_file_load", "replaces the running kernel"),
    always("init_module", "loads kernel code"),
    always("finit_module", "loads kernel code"),
    always("delete_module", "unloads kernel code"),
    always("keyctl", "the kernel keyring holds other programs' secrets"),
    always("add_key", "the kernel keyring holds other programs' secrets"),
    always("request_key", "the kernel keyring holds other programs' secrets"),
    always("reboot", "stops the machine"),
    always("swapon", "changes the machine's memory"),
    always("swapoff", "changes the machine's memory"),
    always("acct", "writes process accounting to a file"),
    always("syslog", "reads the kernel log (addresses that defeat KASLR)"),
    always("iopl", "raw I/O port access"),
    always("ioperm", "raw I/O port access"),
    always("sethostname", "changes the machine's identity"),
    always("setdomainname", "changes the machine's identity"),
    always("settimeofday", "changes the machine's clock"),
    always("clock_settime", "changes the machine's clock"),
    always("clock_adjtime", "changes the machine's clock"),
    always("adjtimex", "changes the machine's clock"),
    Refused {
        syscall: "ioctl",
        when: When::ArgIn { arg: 1, values: &[TIOCSTI, TIOCLINUX] },
        refusal: Refusal::NotPermitted,
        why: "TIOCSTI/TIOCLINUX type commands into an inherited terminal, which the user's shell then runs",
    },
];

/// What compilation needs to know about the process that locks down.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockDownContext {
    /// The process's own id, to which signals stay allowed.
    pub self_pid: u32,
    /// The io_uring rings open before lock-down (see [`When::NotPreexistingRing`]).
    pub io_uring_fds: Vec<i32>,
}

#[cfg(target_os = "linux")]
pub use self::linux::*;

#[cfg(target_os = "linux")]
mod linux {
    use super::{LockDownContext, Refusal, Refused, When, REFUSED};
    #[cfg(target_arch = "x86_64")]
    use seccompiler::sock_filter;
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
    };
    use std::collections::BTreeMap;

    /// The seccomp-bpf programs of the policy, to install in this order, and the
    /// entries that do not exist on this architecture (e.g. `open` on aarch64).
    #[derive(Debug)]
    pub struct CompiledPolicy {
        pub programs: Vec<BpfProgram>,
        pub installed: Vec<&'static str>,
        pub absent: Vec<&'static str>,
    }

    /// Why the policy could not be compiled (a bug in the table, or an architecture
    /// seccompiler does not know).
    #[derive(Debug, thiserror::Error)]
    #[error("seccomp policy: {0}")]
    pub struct CompileError(String);

    /// The number of a system call on this architecture, or `None` if it has none
    /// (aarch64 has only the `*at` variants of the old path calls, and no fork).
    pub fn syscall_number(name: &str) -> Option<i64> {
        use libc::*;
        #[cfg(target_arch = "x86_64")]
        let legacy = match name {
            "open" => Some(SYS_open),
            "creat" => Some(SYS_creat),
            "fork" => Some(SYS_fork),
            "vfork" => Some(SYS_vfork),
            "unlink" => Some(SYS_unlink),
            "rmdir" => Some(SYS_rmdir),
            "rename" => Some(SYS_rename),
            "mkdir" => Some(SYS_mkdir),
            "link" => Some(SYS_link),
            "symlink" => Some(SYS_symlink),
            "mknod" => Some(SYS_mknod),
            "chmod" => Some(SYS_chmod),
            "chown" => Some(SYS_chown),
            "lchown" => Some(SYS_lchown),
            "iopl" => Some(SYS_iopl),
            "ioperm" => Some(SYS_ioperm),
            "renameat" => Some(SYS_renameat),
            _ => None,
        };
        // arm64 kept renameat (asm/unistd.h: __ARCH_WANT_RENAMEAT), which libc 0.2 does
        // not name there; it renames paths without a descriptor, so it must be refused too.
        #[cfg(target_arch = "aarch64")]
        let legacy: Option<i64> = match name {
            "renameat" => Some(38),
            _ => None,
        };
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let legacy: Option<i64> = None;
        if legacy.is_some() {
            return legacy;
        }
        // libc 0.2 has no SYS_fchmodat2 for aarch64; system calls from 424 on have one
        // number on every architecture, 452 here.
        const FCHMODAT2: i64 = 452;
        #[cfg(target_arch = "x86_64")]
        const _: () = assert!(SYS_fchmodat2 == FCHMODAT2);
        let n = match name {
            "execve" => SYS_execve,
            "execveat" => SYS_execveat,
            "clone" => SYS_clone,
            "clone3" => SYS_clone3,
            "socket" => SYS_socket,
            "socketpair" => SYS_socketpair,
            "connect" => SYS_connect,
            "bind" => SYS_bind,
            "listen" => SYS_listen,
            "accept" => SYS_accept,
            "accept4" => SYS_accept4,
            "openat" => SYS_openat,
            "openat2" => SYS_openat2,
            "open_by_handle_at" => SYS_open_by_handle_at,
            "unlinkat" => SYS_unlinkat,
            "renameat2" => SYS_renameat2,
            "mkdirat" => SYS_mkdirat,
            "linkat" => SYS_linkat,
            "symlinkat" => SYS_symlinkat,
            "mknodat" => SYS_mknodat,
            "truncate" => SYS_truncate,
            "fchmodat" => SYS_fchmodat,
            "fchmodat2" => FCHMODAT2,
            "fchownat" => SYS_fchownat,
            "io_uring_setup" => SYS_io_uring_setup,
            "io_uring_enter" => SYS_io_uring_enter,
            "io_uring_register" => SYS_io_uring_register,
            "bpf" => SYS_bpf,
            "perf_event_open" => SYS_perf_event_open,
            "userfaultfd" => SYS_userfaultfd,
            "ptrace" => SYS_ptrace,
            "process_vm_readv" => SYS_process_vm_readv,
            "process_vm_writev" => SYS_process_vm_writev,
            "pidfd_open" => SYS_pidfd_open,
            "pidfd_getfd" => SYS_pidfd_getfd,
            "pidfd_send_signal" => SYS_pidfd_send_signal,
            "kill" => SYS_kill,
            "tgkill" => SYS_tgkill,
            "tkill" => SYS_tkill,
            "mount" => SYS_mount,
            "umount2" => SYS_umount2,
            "pivot_root" => SYS_pivot_root,
            "chroot" => SYS_chroot,
            "unshare" => SYS_unshare,
            "setns" => SYS_setns,
            "kexec_load" => SYS_kexec_load,
            "kexec_file_load" => SYS_kexec_file_load,
            "init_module" => SYS_init_module,
            "finit_module" => SYS_finit_module,
            "delete_module" => SYS_delete_module,
            "keyctl" => SYS_keyctl,
            "add_key" => SYS_add_key,
            "request_key" => SYS_request_key,
            "reboot" => SYS_reboot,
            "swapon" => SYS_swapon,
            "swapoff" => SYS_swapoff,
            "acct" => SYS_acct,
            "syslog" => SYS_syslog,
            "sethostname" => SYS_sethostname,
            "setdomainname" => SYS_setdomainname,
            "settimeofday" => SYS_settimeofday,
            "clock_settime" => SYS_clock_settime,
            "clock_adjtime" => SYS_clock_adjtime,
            "adjtimex" => SYS_adjtimex,
            "ioctl" => SYS_ioctl,
            "prlimit64" => SYS_prlimit64,
            "prctl" => SYS_prctl,
            "fanotify_init" => SYS_fanotify_init,
            "fanotify_mark" => SYS_fanotify_mark,
            "inotify_add_watch" => SYS_inotify_add_watch,
            "setpriority" => SYS_setpriority,
            "ioprio_set" => SYS_ioprio_set,
            "sched_setscheduler" => SYS_sched_setscheduler,
            "sched_setparam" => SYS_sched_setparam,
            "sched_setattr" => SYS_sched_setattr,
            "sched_setaffinity" => SYS_sched_setaffinity,
            "migrate_pages" => SYS_migrate_pages,
            "move_pages" => SYS_move_pages,
            _ => return None,
        };
        Some(n)
    }

    fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, CompileError> {
        // Every argument the policy inspects is a 32-bit int in the kernel (flags, pid,
        // fd, ioctl request), which the kernel truncates: compare the low 32 bits only,
        // so high garbage bits cannot dodge a rule.
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| CompileError(e.to_string()))
    }

    fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, CompileError> {
        SeccompRule::new(conditions).map_err(|e| CompileError(e.to_string()))
    }

    /// The rules under which a call matches `entry` (an empty list matches every call).
    fn rules_for(entry: &Refused, ctx: &LockDownContext) -> Result<Vec<SeccompRule>, CompileError> {
        let me = u64::from(ctx.self_pid);
        Ok(match entry.when {
            When::Always => vec![],
            When::NewProcess => {
                let mut rules = vec![rule(vec![condition(0, SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64), 0)?])?];
                for &flag in super::CLONE_NEW_NAMESPACES {
                    let flag = u64::from(flag);
                    rules.push(rule(vec![condition(0, SeccompCmpOp::MaskedEq(flag), flag)?])?);
                }
                rules
            }
            When::SignalsOtherProcess { arg } => {
                vec![rule(vec![condition(arg, SeccompCmpOp::Ne, me)?])?]
            }
            When::TargetsOtherProcess { arg } => {
                vec![rule(vec![condition(arg, SeccompCmpOp::Ne, 0)?, condition(arg, SeccompCmpOp::Ne, me)?])?]
            }
            When::TargetsOtherThanCaller { process_kind } => vec![
                rule(vec![condition(0, SeccompCmpOp::Ne, u64::from(process_kind))?])?,
                rule(vec![condition(1, SeccompCmpOp::Ne, 0)?, condition(1, SeccompCmpOp::Ne, me)?])?,
            ],
            When::NotPreexistingRing if ctx.io_uring_fds.is_empty() => vec![],
            When::NotPreexistingRing => {
                let not_a_ring =
                    ctx.io_uring_fds.iter().map(|&fd| condition(0, SeccompCmpOp::Ne, fd as u32 as u64)).collect::<Result<Vec<_>, _>>()?;
                vec![rule(not_a_ring)?]
            }
            When::ArgIn { arg, values } => {
                values.iter().map(|&v| rule(vec![condition(arg, SeccompCmpOp::Eq, u64::from(v))?])).collect::<Result<_, _>>()?
            }
        })
    }

    pub(super) fn errno(refusal: Refusal) -> u32 {
        match refusal {
            Refusal::NotPermitted => libc::EPERM as u32,
            Refusal::NotImplemented => libc::ENOSYS as u32,
        }
    }

    /// On x86_64 the x32 ABI reaches every system call under a second number (bit 30
    /// set) with the same architecture tag, which a list of numbers would miss. This
    /// small program refuses all of them; Node never uses x32.
    #[cfg(target_arch = "x86_64")]
    fn x32_guard() -> BpfProgram {
        const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
        const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
        const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
        const RET_K: u16 = 0x06; // BPF_RET | BPF_K
        const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        const RET_ERRNO: u32 = 0x0005_0000;
        const RET_ALLOW: u32 = 0x7fff_0000;
        let insn = |code, jt, jf, k| sock_filter { code, jt, jf, k };
        vec![
            insn(LD_W_ABS, 0, 0, 4),              // A = seccomp_data.arch
            insn(JEQ_K, 0, 3, AUDIT_ARCH_X86_64), // other arch: allow (the main filter kills it)
            insn(LD_W_ABS, 0, 0, 0),              // A = seccomp_data.nr
            insn(JGE_K, 0, 1, X32_SYSCALL_BIT),   // x32 number?
            insn(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
            insn(RET_K, 0, 0, RET_ALLOW),
        ]
    }

    /// Compiles [`REFUSED`] for this process: one program per refusal errno (a
    /// seccompiler filter has a single match action), plus the x32 guard on x86_64.
    /// Each program also refuses system calls of another architecture (e.g. 32-bit
    /// `int 0x80`) by killing the process: seccompiler's architecture check.
    pub fn compile(ctx: &LockDownContext) -> Result<CompiledPolicy, CompileError> {
        compile_with_errnos(ctx, errno)
    }

    /// [`compile`] with the errno each refusal returns chosen by `errno_of`: the probes
    /// use errnos no system call returns naturally, so that a refusal is told apart
    /// from a natural `EPERM` (which an unprivileged user gets from many of them).
    pub(super) fn compile_with_errnos(ctx: &LockDownContext, errno_of: impl Fn(Refusal) -> u32) -> Result<CompiledPolicy, CompileError> {
        let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| CompileError(e.to_string()))?;
        let mut by_refusal: BTreeMap<u32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
        let mut installed = Vec::new();
        let mut absent = Vec::new();
        for entry in REFUSED {
            let Some(nr) = syscall_number(entry.syscall) else {
                absent.push(entry.syscall);
                continue;
            };
            let rules = rules_for(entry, ctx)?;
            let table = by_refusal.entry(errno_of(entry.refusal)).or_default();
            if table.insert(nr, rules).is_some() {
                return Err(CompileError(format!("`{}` is listed twice", entry.syscall)));
            }
            installed.push(entry.syscall);
        }
        let mut programs = Vec::new();
        for (errno, rules) in by_refusal {
            let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno), arch)
                .map_err(|e| CompileError(e.to_string()))?;
            programs.push(BpfProgram::try_from(filter).map_err(|e| CompileError(e.to_string()))?);
        }
        #[cfg(target_arch = "x86_64")]
        programs.push(x32_guard());
        Ok(CompiledPolicy { programs, installed, absent })
    }

    /// The filter a sandbox host gets before it execs `node`: io_uring refused
    /// (`EPERM`), so libuv never creates the rings it would otherwise open at start-up
    /// (and that would have to stay usable after lock-down, out of seccomp's sight);
    /// libuv falls back to plain epoll when `io_uring_setup` fails.
    pub fn compile_before_exec() -> Result<BpfProgram, CompileError> {
        let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| CompileError(e.to_string()))?;
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for name in super::REFUSED_BEFORE_EXEC {
            let nr = syscall_number(name).ok_or_else(|| CompileError(format!("no system call `{name}` here")))?;
            rules.insert(nr, Vec::new());
        }
        let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
            .map_err(|e| CompileError(e.to_string()))?;
        BpfProgram::try_from(filter).map_err(|e| CompileError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_filter_before_exec_compiles_and_refuses_io_uring_only() {
        let program = compile_before_exec().expect("compiles on this architecture");
        assert!(!program.is_empty());
        assert_eq!(REFUSED_BEFORE_EXEC, ["io_uring_setup", "io_uring_enter", "io_uring_register"]);
        for name in REFUSED_BEFORE_EXEC {
            assert!(REFUSED.iter().any(|r| r.syscall == *name), "{name} is refused after lock-down too");
        }
    }

    /// The calls issue 8 and the design name; each must stay in the list.
    const REQUIRED: &[&str] = &[
        "execve",
        "execveat",
        "fork",
        "vfork",
        "clone",
        "clone3",
        "socket",
        "socketpair",
        "connect",
        "bind",
        "listen",
        "accept",
        "accept4",
        "open",
        "openat",
        "openat2",
        "creat",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "unshare",
        "setns",
        "bpf",
        "perf_event_open",
        "kexec_load",
        "init_module",
        "finit_module",
        "keyctl",
        "add_key",
        "request_key",
        "userfaultfd",
    ];

    #[cfg(target_os = "linux")]
    #[test]
    fn named_constants_match_libc() {
        assert_eq!(PR_SET_PDEATHSIG, libc::PR_SET_PDEATHSIG as u32);
        assert_eq!(PR_SET_MM, libc::PR_SET_MM as u32);
        assert_eq!(TIOCSTI, libc::TIOCSTI as u32);
        assert_eq!(TIOCLINUX, libc::TIOCLINUX as u32);
        let libc_ns = [
            libc::CLONE_NEWNS,
            libc::CLONE_NEWCGROUP,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
        ];
        assert_eq!(CLONE_NEW_NAMESPACES, libc_ns.map(|f| f as u32));
        assert_eq!(PRIO_PROCESS, libc::PRIO_PROCESS);
    }

    #[test]
    fn every_entry_is_unique_and_says_why() {
        let mut seen = HashSet::new();
        for entry in REFUSED {
            assert!(seen.insert(entry.syscall), "{} listed twice", entry.syscall);
            assert!(entry.why.len() > 10, "{} needs a reason", entry.syscall);
        }
    }

    #[test]
    fn lists_every_required_call() {
        let listed: HashSet<_> = REFUSED.iter().map(|e| e.syscall).collect();
        for name in REQUIRED {
            assert!(listed.contains(name), "{name} is missing");
        }
    }

    #[test]
    fn refuses_with_an_error_never_a_kill_and_clone3_with_enosys() {
        for entry in REFUSED {
            let expected = if entry.syscall == "clone3" { Refusal::NotImplemented } else { Refusal::NotPermitted };
            assert_eq!(entry.refusal, expected, "{}", entry.syscall);
        }
    }

    #[test]
    fn keeps_what_node_needs_after_start_up() {
        // Threads, memory, waiting, timers, randomness and I/O on held descriptors.
        let needed = [
            "read",
            "write",
            "sendmsg",
            "recvmsg",
            "mmap",
            "munmap",
            "mprotect",
            "madvise",
            "futex",
            "epoll_wait",
            "epoll_pwait",
            "epoll_ctl",
            "eventfd2",
            "timerfd_create",
            "getrandom",
            "sched_yield",
            "sched_getaffinity",
            "close",
            "exit",
            "exit_group",
            "rt_sigaction",
            "pipe2",
            "newfstatat",
            "fstat",
        ];
        let listed: HashSet<_> = REFUSED.iter().map(|e| e.syscall).collect();
        for name in needed {
            assert!(!listed.contains(name), "{name} must stay allowed");
        }
        // clone stays allowed for threads: only its new-process form is refused.
        let clone = REFUSED.iter().find(|e| e.syscall == "clone").unwrap();
        assert_eq!(clone.when, When::NewProcess);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn compiles_on_this_architecture() {
        let policy = compile(&LockDownContext { self_pid: 1234, io_uring_fds: vec![7, 9] }).unwrap();
        assert_eq!(policy.installed.len() + policy.absent.len(), REFUSED.len());
        #[cfg(target_arch = "x86_64")]
        {
            assert!(policy.absent.is_empty(), "absent on x86_64: {:?}", policy.absent);
            assert_eq!(policy.programs.len(), 3); // EPERM, ENOSYS, x32 guard
        }
        #[cfg(target_arch = "aarch64")]
        {
            // The old path calls, fork and the x86 port calls do not exist there; their
            // `*at`/clone forms are in the list.
            let mut absent = policy.absent.clone();
            absent.sort_unstable();
            assert_eq!(
                absent,
                [
                    "chmod", "chown", "creat", "fork", "ioperm", "iopl", "lchown", "link", "mkdir", "mknod", "open", "rename", "rmdir",
                    "symlink", "unlink", "vfork"
                ]
            );
            assert_eq!(policy.programs.len(), 2); // EPERM, ENOSYS
        }
        for program in &policy.programs {
            assert!(!program.is_empty() && program.len() < 4096);
        }
    }

    /// Every number the policy uses, checked against the kernel's own list for this
    /// architecture (its uapi `asm/unistd*.h`, as Debian installs it: `linux-libc-dev`,
    /// or `linux-libc-dev-arm64-cross` for the aarch64 tests run under qemu-user). libc's
    /// tables and the two numbers written here by hand could drift; the kernel's cannot.
    /// An entry the policy calls absent must be absent there too.
    #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
    mod kernel_headers {
        use super::super::*;
        use std::collections::{BTreeMap, HashSet};
        use std::path::{Path, PathBuf};

        #[cfg(target_arch = "x86_64")]
        const CANDIDATES: &[&str] = &["/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"];
        #[cfg(target_arch = "aarch64")]
        const CANDIDATES: &[&str] =
            &["/usr/aarch64-linux-gnu/include/asm/unistd.h", "/usr/include/aarch64-linux-gnu/asm/unistd.h", "/usr/include/asm/unistd.h"];

        /// The `__NR_*` macros a 64-bit, non-compat build of `header` defines: a small
        /// preprocessor for what these headers use (#define, #undef, #ifdef, #ifndef,
        /// #if/#elif over `defined(X)` and `__BITS_PER_LONG`, #else, #endif, #include
        /// of other unistd headers). Anything else in a condition fails the test.
        fn numbers(header: &Path) -> BTreeMap<String, i64> {
            let root = header.parent().and_then(Path::parent).expect("header under <root>/asm/").to_path_buf();
            let mut macros: BTreeMap<String, String> = BTreeMap::new();
            read(header, &root, &mut macros);
            let resolve = |name: &str| {
                let mut value = macros.get(name)?.clone();
                for _ in 0..4 {
                    if let Ok(n) = value.parse::<i64>() {
                        return Some(n);
                    }
                    value = macros.get(value.as_str())?.clone();
                }
                None
            };
            macros
                .keys()
                .filter_map(|k| k.strip_prefix("__NR_").map(|n| (n.to_string(), k)))
                .filter_map(|(n, k)| resolve(k).map(|v| (n, v)))
                .collect()
        }

        fn condition(expr: &str, macros: &BTreeMap<String, String>) -> bool {
            expr.split("||").any(|any| {
                any.split("&&").all(|term| {
                    let t: String = term.split_whitespace().collect();
                    let (negate, t) = t.strip_prefix('!').map_or((false, t.as_str()), |r| (true, r));
                    let value = if let Some(name) = t.strip_prefix("defined(").and_then(|r| r.strip_suffix(')')) {
                        macros.contains_key(name)
                    } else if let Some(n) = t.strip_prefix("__BITS_PER_LONG==") {
                        n == "64"
                    } else if let Some(n) = t.strip_prefix("__BITS_PER_LONG!=") {
                        n != "64"
                    } else {
                        panic!("unknown condition `{t}` in a unistd header: teach this test about it");
                    };
                    value != negate
                })
            })
        }

        fn read(file: &Path, root: &Path, macros: &mut BTreeMap<String, String>) {
            let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            // One entry per open #if: (this branch is live, some branch was taken).
            let mut stack: Vec<(bool, bool)> = Vec::new();
            let live = |stack: &Vec<(bool, bool)>| stack.iter().all(|&(on, _)| on);
            for line in text.lines() {
                let Some(directive) = line.trim_start().strip_prefix('#') else { continue };
                let directive = directive.split("/*").next().unwrap_or_default().trim();
                let (word, rest) = directive.split_once(char::is_whitespace).unwrap_or((directive, ""));
                let rest = rest.trim();
                match word {
                    "ifdef" | "ifndef" | "if" => {
                        let on = match word {
                            "ifdef" => macros.contains_key(rest),
                            "ifndef" => !macros.contains_key(rest),
                            _ => !live(&stack) || condition(rest, macros),
                        };
                        stack.push((on, on));
                    }
                    "elif" => {
                        let (_, taken) = stack.pop().expect("#elif without #if");
                        let on = !taken && condition(rest, macros);
                        stack.push((on, taken || on));
                    }
                    "else" => {
                        let (_, taken) = stack.pop().expect("#else without #if");
                        stack.push((!taken, true));
                    }
                    "endif" => {
                        stack.pop().expect("#endif without #if");
                    }
                    _ if !live(&stack) => {}
                    "define" => {
                        let mut parts = rest.split_whitespace();
                        let name = parts.next().unwrap_or_default();
                        let name = name.split('(').next().unwrap_or_default().to_string();
                        macros.insert(name, parts.next().unwrap_or_default().to_string());
                    }
                    "undef" => {
                        macros.remove(rest);
                    }
                    "include" => {
                        let inner = rest.trim_matches(|c| c == '<' || c == '>' || c == '"');
                        if inner.contains("unistd") {
                            read(&root.join(inner), root, macros);
                        }
                    }
                    _ => {}
                }
            }
            assert!(stack.is_empty(), "{}: unbalanced #if", file.display());
        }

        fn header() -> PathBuf {
            let found = CANDIDATES.iter().map(PathBuf::from).find(|p| p.exists());
            found.unwrap_or_else(|| {
                panic!("no kernel header for this architecture at {CANDIDATES:?} (install linux-libc-dev, or linux-libc-dev-arm64-cross)")
            })
        }

        #[test]
        fn every_number_of_the_policy_is_the_kernels() {
            let kernel = numbers(&header());
            // The headers were read right: a few numbers that never change.
            #[cfg(target_arch = "x86_64")]
            assert_eq!((kernel["read"], kernel["execve"], kernel["openat"]), (0, 59, 257));
            #[cfg(target_arch = "aarch64")]
            assert_eq!((kernel["read"], kernel["execve"], kernel["openat"]), (63, 221, 56));
            let newest = kernel.iter().filter(|(name, _)| *name != "syscalls").map(|(_, &n)| n).max().unwrap();
            let mut checked = HashSet::new();
            for entry in REFUSED {
                match (syscall_number(entry.syscall), kernel.get(entry.syscall)) {
                    (Some(ours), Some(&theirs)) => {
                        assert_eq!(ours, theirs, "{}: the policy uses {ours}, the kernel {theirs}", entry.syscall)
                    }
                    // A call newer than these headers (fchmodat2 is 6.6, Debian 12's headers
                    // 6.1): from 424 on every architecture shares one number, and it must
                    // be past every number the headers know.
                    (Some(ours), None) if ours >= 424 && ours > newest => {}
                    (Some(ours), None) => panic!("{}: the policy uses {ours}, the kernel has no such call here", entry.syscall),
                    (None, Some(theirs)) => panic!("{}: the policy skips it, but the kernel has it as {theirs}", entry.syscall),
                    (None, None) => {}
                }
                checked.insert(entry.syscall);
            }
            for name in REFUSED_BEFORE_EXEC {
                assert!(checked.contains(name), "{name}");
            }
        }

        #[test]
        fn a_condition_this_reader_does_not_know_fails_loudly() {
            let macros = BTreeMap::from([("__ARCH_WANT_X".to_string(), String::new())]);
            assert!(condition("defined(__ARCH_WANT_X) || __BITS_PER_LONG != 32", &macros));
            assert!(!condition("__BITS_PER_LONG == 32 || defined(__SYSCALL_COMPAT)", &macros));
            assert!(condition("__BITS_PER_LONG == 64 && !defined(__SYSCALL_COMPAT)", &macros));
            assert!(std::panic::catch_unwind(|| condition("__GNUC__ > 3", &BTreeMap::new())).is_err());
        }
    }

    /// Each rule tried at the system-call level: a forked child installs the compiled
    /// programs (only on itself) and makes the call; the parent reads the errno from the
    /// child's exit status. The probes' policies refuse with errnos that these calls
    /// never return by themselves, so a refusal is never mistaken for a natural `EPERM`,
    /// as root or not; one test checks the real errnos.
    #[cfg(target_os = "linux")]
    mod probes {
        use super::super::*;
        use std::collections::HashSet;

        const NONEXISTENT_PID: u64 = 0x3fff_fff0;

        /// Arguments that make an allowed call fail harmlessly (or succeed with no
        /// lasting effect), so running it without the filter is safe.
        fn probe_args(name: &str) -> [u64; 6] {
            let mut a = [0u64; 6];
            match name {
                // An invalid descriptor: EBADF when allowed.
                "connect" | "bind" | "listen" | "accept" | "accept4" | "setns" | "io_uring_enter" | "io_uring_register" | "pidfd_getfd"
                | "pidfd_send_signal" | "open_by_handle_at" => a[0] = u64::MAX,
                // Bad request/command values: EINVAL or EIO when allowed.
                "ptrace" | "bpf" | "keyctl" | "syslog" => a[0] = 0xffff_ff00,
                "kexec_load" => a[3] = 0xffff_ffff,
                "kexec_file_load" => a[4] = 0xffff_ffff,
                "finit_module" => (a[0], a[2]) = (u64::MAX, 0xffff_ffff),
                // A bad pointer: EFAULT (acct(NULL) and settimeofday(NULL) would be no-ops).
                "acct" | "settimeofday" => a[0] = 1,
                // A name longer than the kernel allows: EINVAL (length 0 would set it empty).
                "sethostname" | "setdomainname" => a[1] = 0xffff,
                // Calls to a process that does not exist: ESRCH when allowed.
                "kill" | "tgkill" | "tkill" | "pidfd_open" | "process_vm_readv" | "process_vm_writev" | "prlimit64"
                | "sched_setscheduler" | "sched_setparam" | "sched_setattr" | "sched_setaffinity" | "migrate_pages" | "move_pages" => {
                    a[0] = NONEXISTENT_PID
                }
                "setpriority" => a[1] = NONEXISTENT_PID,
                "ioprio_set" => (a[0], a[1]) = (1, NONEXISTENT_PID),
                // Unknown flags: EINVAL when allowed.
                "unshare" => a[0] = 0x8000_0000_0000_0000,
                "userfaultfd" => a[0] = 0xffff_ffff,
                "perf_event_open" | "io_uring_setup" => {}
                "iopl" => a[0] = 99,
                "ioperm" => (a[0], a[1], a[2]) = (u64::MAX, 1, 0),
                "reboot" => a[0] = 1,                          // a wrong magic: EINVAL when allowed (as root)
                "prctl" => a[0] = u64::from(PR_SET_PDEATHSIG), // clears it: 0 when allowed
                "fanotify_init" => a[0] = 0xffff_ffff,         // unknown flags: EINVAL
                "fanotify_mark" | "inotify_add_watch" => a[0] = u64::MAX, // EBADF
                "ioctl" => (a[0], a[1]) = (u64::MAX, u64::from(TIOCSTI)),
                "clock_settime" | "clock_adjtime" => a[0] = 0xffff,
                // clone without CLONE_THREAD and fork-likes: see `run`, which handles the child.
                _ => {}
            }
            a
        }

        /// Runs `syscall(nr, args)` in a forked child, optionally under `programs`;
        /// returns 0 if the call succeeded, else its errno.
        fn run(nr: i64, args: [u64; 6], programs: Option<&[seccompiler::BpfProgram]>) -> i32 {
            // SAFETY: the child only makes system calls (prctl, seccomp, the probe) and
            // _exit, which is what is allowed after fork in a multithreaded program; the
            // programs were built before forking.
            unsafe {
                let pid = libc::fork();
                assert!(pid >= 0, "fork failed");
                if pid == 0 {
                    if let Some(programs) = programs {
                        for p in programs {
                            if seccompiler::apply_filter(p).is_err() {
                                libc::_exit(200);
                            }
                        }
                    }
                    let r = libc::syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]);
                    // (fork and vfork exist on x86_64 only; their numbers come from the table.)
                    let fork_like = nr == libc::SYS_clone || [syscall_number("fork"), syscall_number("vfork")].contains(&Some(nr));
                    if r == 0 && fork_like {
                        // The new process of a fork-like call that was allowed.
                        libc::_exit(0);
                    }
                    let errno = if r < 0 { *libc::__errno_location() } else { 0 };
                    libc::_exit(errno.min(199));
                }
                let mut status = 0;
                assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
                assert!(libc::WIFEXITED(status), "probe child died with status {status:#x}");
                libc::WEXITSTATUS(status)
            }
        }

        /// What the probes' policies return instead of EPERM and ENOSYS: errnos none of
        /// these calls returns by itself (EHWPOISON, ERFKILL).
        const MARK_REFUSED: i32 = libc::EHWPOISON;
        const MARK_NOT_IMPLEMENTED: i32 = libc::ERFKILL;

        fn mark(refusal: Refusal) -> i32 {
            match refusal {
                Refusal::NotPermitted => MARK_REFUSED,
                Refusal::NotImplemented => MARK_NOT_IMPLEMENTED,
            }
        }

        /// The policy with marked errnos (see `compile_with_errnos`).
        fn marked(ctx: &LockDownContext) -> CompiledPolicy {
            super::super::linux::compile_with_errnos(ctx, |r| mark(r) as u32).unwrap()
        }

        fn ctx() -> LockDownContext {
            LockDownContext { self_pid: std::process::id(), io_uring_fds: vec![] }
        }

        #[test]
        fn every_rule_refuses_its_call() {
            let policy = marked(&ctx());
            let mut checked = HashSet::new();
            for entry in REFUSED {
                let Some(nr) = syscall_number(entry.syscall) else { continue };
                let mut args = probe_args(entry.syscall);
                if entry.syscall == "clone" {
                    args[0] = libc::SIGCHLD as u64; // a plain fork
                }
                let expected = mark(entry.refusal);
                // An allowed vfork would return twice into this stack frame; its natural
                // result (success) is known.
                let without = if entry.syscall == "vfork" { 0 } else { run(nr, args, None) };
                let with = run(nr, args, Some(&policy.programs));
                assert_eq!(with, expected, "{} was not refused (errno {with})", entry.syscall);
                assert_ne!(without, expected, "{}: the probe cannot tell a refusal from its natural result", entry.syscall);
                checked.insert(entry.syscall);
            }
            assert_eq!(checked.len(), policy.installed.len());
        }

        #[test]
        fn refuses_with_eperm_and_clone3_with_enosys() {
            // The real errnos, on calls whose natural results do not depend on privileges.
            let policy = compile(&ctx()).unwrap();
            assert_eq!(run(libc::SYS_socket, [0; 6], None), libc::EAFNOSUPPORT);
            assert_eq!(run(libc::SYS_socket, [0; 6], Some(&policy.programs)), libc::EPERM);
            assert_eq!(run(libc::SYS_clone3, [0; 6], None), libc::EINVAL);
            assert_eq!(run(libc::SYS_clone3, [0; 6], Some(&policy.programs)), libc::ENOSYS);
        }

        #[test]
        fn threads_and_signals_to_itself_stay_allowed() {
            let policy = marked(&ctx());
            // CLONE_THREAD without CLONE_SIGHAND is invalid: EINVAL shows the call got
            // past the filter to the kernel.
            let thread_like = [libc::CLONE_THREAD as u64, 0, 0, 0, 0, 0];
            assert_eq!(run(libc::SYS_clone, thread_like, Some(&policy.programs)), libc::EINVAL);
            // ...but not a thread in a new namespace (refused before the kernel's checks).
            for &ns in CLONE_NEW_NAMESPACES {
                let args = [libc::CLONE_THREAD as u64 | u64::from(ns), 0, 0, 0, 0, 0];
                assert_eq!(run(libc::SYS_clone, args, Some(&policy.programs)), MARK_REFUSED, "namespace flag {ns:#x}");
                assert_eq!(run(libc::SYS_clone, args, None), libc::EINVAL, "namespace flag {ns:#x}");
            }
            // prctl: thread names stay allowed (PR_SET_PDEATHSIG is refused: see
            // every_rule_refuses_its_call; PR_SET_MM cannot be told apart here, as
            // without CAP_SYS_RESOURCE the kernel itself answers EPERM).
            let name = b"probe\0";
            assert_eq!(run(libc::SYS_prctl, [libc::PR_SET_NAME as u64, name.as_ptr() as u64, 0, 0, 0, 0], Some(&policy.programs)), 0);
            // Signals to the process the policy was compiled for stay allowed (the probe
            // child signals the test process, with signal 0, a no-op); others are refused.
            let me = std::process::id();
            let policy_for_me = marked(&LockDownContext { self_pid: me, io_uring_fds: vec![] });
            assert_eq!(run(libc::SYS_kill, [me as u64, 0, 0, 0, 0, 0], Some(&policy_for_me.programs)), 0);
            assert_eq!(run(libc::SYS_tgkill, [me as u64, me as u64, 0, 0, 0, 0], Some(&policy_for_me.programs)), 0);
            assert_eq!(run(libc::SYS_kill, [1, 0, 0, 0, 0, 0], Some(&policy_for_me.programs)), MARK_REFUSED);
            assert_eq!(run(libc::SYS_kill, [u64::MAX, 0, 0, 0, 0, 0], Some(&policy_for_me.programs)), MARK_REFUSED);
            assert_eq!(run(libc::SYS_kill, [0, 0, 0, 0, 0, 0], Some(&policy_for_me.programs)), MARK_REFUSED);
            // Calls on the caller itself (pid 0 or its own pid) stay allowed; on another
            // process, or a group or user, they are refused.
            let p = &policy_for_me.programs;
            let me = me as u64;
            const NOFILE: u64 = libc::RLIMIT_NOFILE as u64;
            assert_eq!(run(libc::SYS_prlimit64, [0, NOFILE, 0, 0, 0, 0], Some(p)), 0);
            assert_eq!(run(libc::SYS_prlimit64, [me, NOFILE, 0, 0, 0, 0], Some(p)), 0);
            assert_eq!(run(libc::SYS_prlimit64, [1, NOFILE, 0, 0, 0, 0], Some(p)), MARK_REFUSED);
            // SAFETY: getpriority has no preconditions; errno is not needed (nice >= -20).
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) } as u64;
            assert_eq!(run(libc::SYS_setpriority, [0, 0, nice, 0, 0, 0], Some(p)), 0);
            assert_eq!(run(libc::SYS_setpriority, [0, me, nice, 0, 0, 0], Some(p)), 0);
            assert_eq!(run(libc::SYS_setpriority, [0, 1, nice, 0, 0, 0], Some(p)), MARK_REFUSED);
            // PRIO_USER: every process of a user.
            assert_eq!(run(libc::SYS_setpriority, [2, 0, nice, 0, 0, 0], Some(p)), MARK_REFUSED);
            // ioctl: only the terminal-injection requests are refused.
            let tiocgwinsz = [u64::MAX, libc::TIOCGWINSZ, 0, 0, 0, 0];
            assert_eq!(run(libc::SYS_ioctl, tiocgwinsz, Some(p)), libc::EBADF);
            let tioclinux = [u64::MAX, u64::from(TIOCLINUX), 0, 0, 0, 0];
            assert_eq!(run(libc::SYS_ioctl, tioclinux, Some(p)), MARK_REFUSED);
            // An ordinary call is untouched.
            assert_eq!(run(libc::SYS_getppid, [0; 6], Some(&policy.programs)), 0);
        }

        #[test]
        fn io_uring_enter_stays_allowed_on_preexisting_rings_only() {
            // SAFETY: io_uring_setup writes into `params`, which lives across the call.
            let mut params = [0u8; 120];
            let ring = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u64, params.as_mut_ptr()) };
            if ring < 0 {
                // io_uring is disabled on this kernel, so libuv cannot have rings either.
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap();
                assert!(errno == libc::ENOSYS || errno == libc::EPERM, "io_uring_setup: {errno}");
                return;
            }
            let policy = marked(&LockDownContext { self_pid: std::process::id(), io_uring_fds: vec![ring as i32] });
            let enter = |fd: u64| [fd, 0, 0, 0, 0, 0];
            assert_eq!(run(libc::SYS_io_uring_enter, enter(ring as u64), Some(&policy.programs)), 0);
            // Another descriptor (stdin, which is no ring) is refused before the kernel sees it.
            assert_eq!(run(libc::SYS_io_uring_enter, enter(0), Some(&policy.programs)), MARK_REFUSED);
            // SAFETY: closing the ring this test opened.
            unsafe { libc::close(ring as i32) };
        }

        #[cfg(target_arch = "x86_64")]
        #[test]
        fn x32_numbers_are_refused() {
            let policy = compile(&ctx()).unwrap();
            let x32_getpid = 0x4000_0000 | libc::SYS_getpid;
            let without = run(x32_getpid, [0; 6], None);
            assert_ne!(without, libc::EPERM);
            assert_eq!(run(x32_getpid, [0; 6], Some(&policy.programs)), libc::EPERM);
        }
    }

    /// The compiled programs run by a classic-BPF interpreter in user space, as the
    /// kernel would run them on a `seccomp_data`. This checks the policy's decisions on
    /// any architecture, including under qemu-user, which cannot install filters (they
    /// would apply to qemu's own host calls), so the aarch64 programs are tested there.
    #[cfg(target_os = "linux")]
    mod interpreted {
        use super::super::*;

        const RET_ALLOW: u32 = 0x7fff_0000;
        const RET_ERRNO: u32 = 0x0005_0000;
        const RET_KILL_PROCESS: u32 = 0x8000_0000;
        #[cfg(target_arch = "x86_64")]
        const THIS_ARCH: u32 = 62 | 0xc000_0000; // AUDIT_ARCH_X86_64
        #[cfg(target_arch = "aarch64")]
        const THIS_ARCH: u32 = 183 | 0xc000_0000; // AUDIT_ARCH_AARCH64
        #[cfg(target_arch = "x86_64")]
        const OTHER_ARCH: u32 = 183 | 0xc000_0000;
        #[cfg(target_arch = "aarch64")]
        const OTHER_ARCH: u32 = 62 | 0xc000_0000;

        /// One program on `struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }`.
        fn eval(program: &[seccompiler::sock_filter], data: &[u8; 64]) -> u32 {
            let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
            loop {
                let i = &program[pc];
                pc += 1;
                let k = i.k;
                match i.code {
                    0x20 => a = u32::from_ne_bytes(data[k as usize..k as usize + 4].try_into().unwrap()), // ld [k]
                    0x00 => a = k,                                                                        // ld #k
                    0x01 => x = k,                                                                        // ldx #k
                    0x07 => x = a,                                                                        // tax
                    0x87 => a = x,                                                                        // txa
                    0x54 => a &= k,                                                                       // and #k
                    0x44 => a |= k,                                                                       // or #k
                    0x74 => a = a.wrapping_shr(k),                                                        // rsh #k
                    0x64 => a = a.wrapping_shl(k),                                                        // lsh #k
                    0x05 => pc += k as usize,                                                             // ja
                    0x15 | 0x25 | 0x35 | 0x45 => {
                        let taken = match i.code {
                            0x15 => a == k,
                            0x25 => a > k,
                            0x35 => a >= k,
                            _ => a & k != 0,
                        };
                        pc += if taken { i.jt } else { i.jf } as usize;
                    }
                    0x06 => return k, // ret #k
                    0x16 => return a, // ret a
                    code => panic!("BPF opcode {code:#x} not interpreted"),
                }
            }
        }

        /// Every program, combined as the kernel does: the action of highest precedence
        /// (lowest as a signed action value) wins.
        fn decide(programs: &[seccompiler::BpfProgram], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
            let mut data = [0u8; 64];
            data[0..4].copy_from_slice(&(nr as i32).to_ne_bytes());
            data[4..8].copy_from_slice(&arch.to_ne_bytes());
            for (i, v) in args.iter().enumerate() {
                data[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_ne_bytes());
            }
            let action = |r: u32| (r & 0xffff_0000) as i32;
            programs.iter().map(|p| eval(p, &data)).min_by_key(|&r| action(r)).unwrap()
        }

        const ME: u64 = 4242;
        fn policy() -> CompiledPolicy {
            compile(&LockDownContext { self_pid: ME as u32, io_uring_fds: vec![9] }).unwrap()
        }
        fn refused(refusal: Refusal) -> u32 {
            RET_ERRNO | errno(refusal)
        }

        #[test]
        fn every_entry_is_refused_on_its_number() {
            let p = policy();
            for entry in REFUSED {
                let Some(nr) = syscall_number(entry.syscall) else { continue };
                // Arguments that fall under each rule's condition.
                let mut args = [0u64; 6];
                match entry.when {
                    When::Always | When::NewProcess => {} // clone flags 0: a new process
                    When::SignalsOtherProcess { arg } | When::TargetsOtherProcess { arg } => args[arg as usize] = 1,
                    When::TargetsOtherThanCaller { .. } => args[1] = 1,
                    When::NotPreexistingRing => args[0] = 3,
                    When::ArgIn { arg, values } => args[arg as usize] = u64::from(values[0]),
                }
                assert_eq!(decide(&p.programs, THIS_ARCH, nr, args), refused(entry.refusal), "{}", entry.syscall);
            }
        }

        #[test]
        fn what_node_needs_stays_allowed() {
            let p = policy();
            let allow = |nr: i64, args: [u64; 6]| assert_eq!(decide(&p.programs, THIS_ARCH, nr, args), RET_ALLOW, "nr {nr} {args:?}");
            for nr in [libc::SYS_read, libc::SYS_write, libc::SYS_mmap, libc::SYS_futex, libc::SYS_epoll_pwait, libc::SYS_getrandom] {
                allow(nr, [0; 6]);
            }
            let thread = (libc::CLONE_VM | libc::CLONE_FS | libc::CLONE_FILES | libc::CLONE_SIGHAND | libc::CLONE_THREAD) as u64;
            allow(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]);
            allow(libc::SYS_kill, [ME, 0, 0, 0, 0, 0]);
            allow(libc::SYS_tgkill, [ME, ME, 0, 0, 0, 0]);
            allow(libc::SYS_prlimit64, [0, 7, 0, 0, 0, 0]);
            allow(libc::SYS_setpriority, [0, ME, 10, 0, 0, 0]);
            allow(libc::SYS_io_uring_enter, [9, 0, 0, 0, 0, 0]);
            #[allow(clippy::unnecessary_cast)] // an int on musl
            allow(libc::SYS_ioctl, [1, libc::TIOCGWINSZ as u64, 0, 0, 0, 0]);
            allow(libc::SYS_prctl, [libc::PR_SET_NAME as u64, 0, 0, 0, 0, 0]);
            // A thread in a new namespace is refused.
            let ns = thread | libc::CLONE_NEWUSER as u64;
            assert_eq!(decide(&p.programs, THIS_ARCH, libc::SYS_clone, [ns, 0, 0, 0, 0, 0]), refused(Refusal::NotPermitted));
        }

        #[test]
        fn another_architecture_kills_the_process() {
            let p = policy();
            assert_eq!(decide(&p.programs, OTHER_ARCH, libc::SYS_read, [0; 6]), RET_KILL_PROCESS);
        }
    }
}
