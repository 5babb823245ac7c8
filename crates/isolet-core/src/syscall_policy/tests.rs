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
            "kill" | "tgkill" | "tkill" | "pidfd_open" | "process_vm_readv" | "process_vm_writev" | "prlimit64" | "sched_setscheduler"
            | "sched_setparam" | "sched_setattr" | "sched_setaffinity" | "migrate_pages" | "move_pages" => a[0] = NONEXISTENT_PID,
            "setpriority" => a[1] = NONEXISTENT_PID,
            "ioprio_set" => (a[0], a[1]) = (1, NONEXISTENT_PID),
            // Unknown flags: EINVAL when allowed.
            "unshare" => a[0] = 0x8000_0000_0000_0000,
            "userfaultfd" => a[0] = 0xffff_ffff,
            "perf_event_open" | "io_uring_setup" => {}
            "iopl" => a[0] = 99,
            "ioperm" => (a[0], a[1], a[2]) = (u64::MAX, 1, 0),
            "reboot" => a[0] = 1,                                     // a wrong magic: EINVAL when allowed (as root)
            "prctl" => a[0] = u64::from(PR_SET_PDEATHSIG),            // clears it: 0 when allowed
            "fanotify_init" => a[0] = 0xffff_ffff,                    // unknown flags: EINVAL
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
