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
        why: "lowers the host's (or the user's every process's) priority; the child's own process stays allowed, so the child cannot lower its other threads either (the parent does)",
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
        why: "SCHED_IDLE on the host starves it; allowed for the calling thread (0) and the main thread only",
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
mod tests;
