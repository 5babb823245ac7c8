//! The parent's side of one sandbox host process, as mechanism: starting it with nothing
//! of ours but its run channel, reading its frames, stderr and exit, and reading its
//! resident memory and CPU time (writing to it: `writer`). What to do with any of it is `isolet_core::host_policy`'s and the rest of `crate::supervisor`'s.
#[cfg(target_os = "linux")]
use std::fs::File;
use std::io::{self, Read};
#[cfg(target_os = "linux")]
use std::os::fd::FromRawFd;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::Mutex;
#[cfg(target_os = "linux")]
use std::sync::OnceLock;

use isolet_core::frame::{Header, HEADER_BYTES};
use isolet_core::host_policy::HOST_CHANNEL_FD;

use crate::limits::lock;

/// How a sandbox host is started: `node` (this process's executable), its options, the
/// entry script. Set once by `lib/native.js` at load (tests point it at another script).
#[derive(Debug, Clone)]
pub(crate) struct HostCommand {
    pub exec_path: String,
    pub script: String,
}

static HOST_COMMAND: Mutex<Option<HostCommand>> = Mutex::new(None);

pub(crate) fn set_host_command(command: HostCommand) {
    *lock(&HOST_COMMAND) = Some(command);
}

pub(crate) fn host_command() -> Option<HostCommand> {
    lock(&HOST_COMMAND).clone()
}

/// A started host: the process, the parent's end of its run channel, its stderr.
pub(crate) struct Spawned {
    pub child: Child,
    pub channel: UnixStream,
    pub stderr: ChildStderr,
}

/// Starts a host: `exec_path options... script` with exactly `env`, stdin and stdout on
/// /dev/null, stderr a pipe, its run channel on `HOST_CHANNEL_FD`, and every other
/// descriptor of this process closed in the child (a file or pipe of the application
/// that is not close-on-exec would otherwise be readable there).
pub(crate) fn spawn(command: &HostCommand, options: &[&str], env: &[(String, String)]) -> io::Result<Spawned> {
    let (parent_end, child_end) = UnixStream::pair()?;
    let child_fd: RawFd = child_end.as_raw_fd();
    // Built here: the child may only make async-signal-safe calls between fork and exec.
    #[cfg(target_os = "linux")]
    let before_exec = isolet_core::syscall_policy::compile_before_exec().ok();
    let mut cmd = Command::new(&command.exec_path);
    cmd.args(options).arg(&command.script).env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    // Computed here, set in the child (its threads inherit it): see `HOST_NICENESS`.
    #[cfg(target_os = "linux")]
    let nice = {
        // SAFETY: plain system calls; -1 is a valid answer of getpriority, so errno tells.
        unsafe {
            *libc::__errno_location() = 0;
            let current = libc::getpriority(libc::PRIO_PROCESS, 0);
            (*libc::__errno_location() == 0).then(|| isolet_core::host_policy::host_nice(current))
        }
    };
    // SAFETY: the closure runs in the forked child before exec and only makes system
    // calls that are async-signal-safe (dup2, fcntl, close_range, close, getrlimit,
    // setpriority).
    unsafe {
        cmd.pre_exec(move || {
            // Best effort: a host at the parent's niceness still works.
            #[cfg(target_os = "linux")]
            if let Some(nice) = nice {
                libc::setpriority(libc::PRIO_PROCESS, 0, nice);
            }
            if child_fd == HOST_CHANNEL_FD {
                // dup2 onto itself keeps close-on-exec: clear it.
                let flags = libc::fcntl(child_fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(child_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(child_fd, HOST_CHANNEL_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            close_from(HOST_CHANNEL_FD + 1);
            // No seccomp outside Linux: the host starts without a filter (its lock-down
            // status says so).
            #[cfg(target_os = "linux")]
            if let Some(program) = &before_exec {
                // Without seccomp here the host still starts; its lock-down reports the rings.
                let fprog = libc::sock_fprog { len: program.len() as libc::c_ushort, filter: program.as_ptr() as *mut libc::sock_filter };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 {
                    libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog as *const libc::sock_fprog);
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    drop(child_end);
    let stderr = child.stderr.take().ok_or_else(|| io::Error::other("no stderr pipe"))?;
    Ok(Spawned { child, channel: parent_end, stderr })
}

/// Marks every descriptor from `first` up close-on-exec (in a forked child, before exec):
/// they close when `node` starts. Marked, not closed: std's own pipe that reports an exec
/// failure to the parent must stay open until then.
fn close_from(first: RawFd) {
    #[cfg(target_os = "linux")]
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: plain system calls on descriptor numbers.
    unsafe {
        #[cfg(target_os = "linux")]
        if libc::syscall(libc::SYS_close_range, first as libc::c_uint, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
            return;
        }
        // Kernels before 5.11, and macOS (no close_range): one by one, up to the
        // descriptor limit.
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 { limit.rlim_cur.min(1 << 20) as RawFd } else { 65536 };
        for fd in first..max {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// Whether child `pid` has exited, without reaping it (its pid stays ours until the
/// caller waits for it): for kernels without pidfds.
pub(crate) fn exited_unreaped(pid: u32) -> bool {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter; WNOWAIT leaves the child waitable.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) == 0 && info.si_pid() != 0
    }
}

/// A descriptor that becomes readable when process `pid` exits (Linux 5.3+), or `None`.
#[cfg(target_os = "linux")]
pub(crate) fn pidfd_of(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the result is a new descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a descriptor nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// macOS has no pidfds: `None`, so the host's I/O loop asks `exited_unreaped` on each
/// poll period and learns of an exit at the latest one period late (or at once, from
/// the run channel's end of file, which is how a host's exit usually shows).
#[cfg(target_os = "macos")]
pub(crate) fn pidfd_of(_pid: u32) -> Option<OwnedFd> {
    None
}

/// A host's CPU time (user and system), from /proc/<pid>/stat through a descriptor opened
/// at its start: one pread per read (a run's dispatch reads it). The descriptor is of that
/// process: once it is reaped it reads nothing.
#[cfg(target_os = "linux")]
pub(crate) struct CpuReader {
    file: Option<File>,
}

#[cfg(target_os = "linux")]
impl CpuReader {
    pub(crate) fn open(pid: u32) -> CpuReader {
        CpuReader { file: File::open(format!("/proc/{pid}/stat")).ok() }
    }

    /// CPU time in ms, or `None` once the process is gone (or without procfs).
    pub(crate) fn ms(&self) -> Option<f64> {
        use std::os::unix::fs::FileExt;
        static TICKS: OnceLock<f64> = OnceLock::new();
        // SAFETY: sysconf has no preconditions.
        let per_second = *TICKS.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
            n if n > 0 => n as f64,
            _ => 100.0,
        });
        let mut buf = [0u8; 1024];
        let n = self.file.as_ref()?.read_at(&mut buf, 0).ok()?;
        let stat = std::str::from_utf8(&buf[..n]).ok()?;
        Some(isolet_core::host_policy::cpu_ticks_of_stat(stat)? as f64 * 1000.0 / per_second)
    }
}

/// macOS: not read (proc_pidinfo's CPU times are in Mach ticks on arm64); such a run's
/// CPU time stays 0.
#[cfg(target_os = "macos")]
pub(crate) struct CpuReader;

#[cfg(target_os = "macos")]
impl CpuReader {
    pub(crate) fn open(_pid: u32) -> CpuReader {
        CpuReader
    }

    pub(crate) fn ms(&self) -> Option<f64> {
        None
    }
}

/// Bytes per page of /proc/<pid>/statm.
#[cfg(target_os = "linux")]
fn page_bytes() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as u64,
        _ => 4096,
    })
}

/// A host's resident memory, read from /proc/<pid>/statm through a descriptor opened at
/// its start: one pread per poll. The descriptor is of that process, not of its pid:
/// once the process is reaped it reads nothing, never another process's.
#[cfg(target_os = "linux")]
pub(crate) struct RssReader {
    file: Option<File>,
}

#[cfg(target_os = "linux")]
impl RssReader {
    pub(crate) fn open(pid: u32) -> RssReader {
        RssReader { file: File::open(format!("/proc/{pid}/statm")).ok() }
    }

    /// Resident MB, or `None` once the process is gone (or without procfs).
    pub(crate) fn mb(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let file = self.file.as_ref()?;
        let mut buf = [0u8; 128];
        let n = file.read_at(&mut buf, 0).ok()?;
        // "size resident shared ...": the second field, in pages.
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let pages: u64 = text.split(' ').nth(1)?.trim().parse().ok()?;
        Some(pages * page_bytes() / (1024 * 1024))
    }
}

/// macOS: a host's resident memory from proc_pidinfo(PROC_PIDTASKINFO), by pid. The pid
/// stays the host's while it is our unreaped child, and the host's I/O loop, the only
/// reader, stops before reaping it.
#[cfg(target_os = "macos")]
pub(crate) struct RssReader {
    pid: u32,
}

#[cfg(target_os = "macos")]
impl RssReader {
    pub(crate) fn open(pid: u32) -> RssReader {
        RssReader { pid }
    }

    /// Resident MB, or `None` once the process is gone.
    pub(crate) fn mb(&self) -> Option<u64> {
        let size = std::mem::size_of::<libc::proc_taskinfo>() as libc::c_int;
        // SAFETY: zero is a valid proc_taskinfo; proc_pidinfo writes at most `size` bytes.
        let (n, info) = unsafe {
            let mut info: libc::proc_taskinfo = std::mem::zeroed();
            let n = libc::proc_pidinfo(
                self.pid as libc::c_int,
                libc::PROC_PIDTASKINFO,
                0,
                (&mut info as *mut libc::proc_taskinfo).cast(),
                size,
            );
            (n, info)
        };
        (n == size).then(|| info.pti_resident_size / (1024 * 1024))
    }
}

/// Cuts a host's byte stream into frames. Each frame's length is checked (by `limit`,
/// which knows what the frame's run may send) before anything is buffered for it: a
/// frame larger than that is refused, not read.
pub(crate) struct FrameStream {
    buf: Vec<u8>,
    /// A large frame being read straight into its own buffer.
    big: Option<(Header, Vec<u8>)>,
}

/// Reads of the stream go in chunks of this size; larger frames get a buffer of their own.
const CHUNK_BYTES: usize = 64 * 1024;

pub(crate) enum Read1 {
    /// Bytes were read (frames may be ready).
    Data,
    /// The host closed its end.
    Eof,
}

impl FrameStream {
    pub(crate) fn new() -> FrameStream {
        FrameStream { buf: Vec::with_capacity(CHUNK_BYTES), big: None }
    }

    /// One read from `fd` (a blocking socket that poll said is readable, or MSG_DONTWAIT).
    pub(crate) fn read_from(&mut self, fd: RawFd) -> io::Result<Read1> {
        if let Some((h, body)) = self.big.as_mut() {
            let want = h.len as usize - body.len();
            let n = recv_into(fd, body, want)?;
            return Ok(if n == 0 { Read1::Eof } else { Read1::Data });
        }
        let n = recv_into(fd, &mut self.buf, CHUNK_BYTES)?;
        Ok(if n == 0 { Read1::Eof } else { Read1::Data })
    }

    /// The next whole frame, `Ok(None)` when more bytes are needed, or why the stream is
    /// refused. `limit(header)` is the largest payload the frame may have (`None`: no
    /// frame of that kind or run is allowed now).
    pub(crate) fn next_frame(
        &mut self,
        limit: &mut dyn FnMut(&Header) -> Result<usize, String>,
    ) -> Result<Option<(Header, Vec<u8>)>, String> {
        if let Some((h, body)) = self.big.as_ref() {
            if body.len() == h.len as usize {
                return Ok(self.big.take());
            }
            return Ok(None);
        }
        if self.buf.len() < HEADER_BYTES {
            return Ok(None);
        }
        let header = Header::decode(&self.buf[..HEADER_BYTES]).map_err(|e| e.to_string())?;
        if header.kind.from_parent() {
            return Err(format!("a frame of a kind only the parent sends ({:?})", header.kind));
        }
        let max = limit(&header)?;
        let len = header.len as usize;
        if len > max {
            return Err(format!("a frame of {len} bytes (limit {max})"));
        }
        if self.buf.len() >= HEADER_BYTES + len {
            let payload = self.buf[HEADER_BYTES..HEADER_BYTES + len].to_vec();
            self.buf.drain(..HEADER_BYTES + len);
            return Ok(Some((header, payload)));
        }
        if len > CHUNK_BYTES {
            let mut body = Vec::with_capacity(len);
            body.extend_from_slice(&self.buf[HEADER_BYTES..]);
            self.buf.clear();
            self.big = Some((header, body));
        }
        Ok(None)
    }
}

/// Appends up to `max` bytes read from `fd` to `into`.
fn recv_into(fd: RawFd, into: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    into.reserve(max);
    let spare = into.spare_capacity_mut();
    let room = spare.len().min(max);
    // SAFETY: `spare` has room for `room` bytes; recv writes at most that many.
    let n = unsafe { libc::recv(fd, spare.as_mut_ptr().cast(), room, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: recv initialized `n` bytes of the spare capacity.
    unsafe { into.set_len(into.len() + n as usize) };
    Ok(n as usize)
}

/// The last bytes of a host's stderr.
pub(crate) struct StderrTail {
    pipe: ChildStderr,
    tail: Vec<u8>,
    max: usize,
    /// Bytes read so far; past `MAX_STDERR_READ` the pipe is no longer read (a host
    /// flooding it would otherwise keep the parent's I/O thread busy).
    read: usize,
}

/// Most of a host's stderr the parent reads over its life.
const MAX_STDERR_READ: usize = 16 << 20;

impl StderrTail {
    pub(crate) fn new(pipe: ChildStderr, max: usize) -> StderrTail {
        StderrTail { pipe, tail: Vec::new(), max, read: 0 }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.pipe.as_raw_fd()
    }

    /// Reads what is there; false at end of file (or once enough was read).
    pub(crate) fn read_some(&mut self) -> bool {
        let mut chunk = [0u8; 64 * 1024];
        match self.pipe.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.read += n;
                if self.read > MAX_STDERR_READ {
                    return false;
                }
                self.tail.extend_from_slice(&chunk[..n]);
                if self.tail.len() > self.max {
                    let cut = self.tail.len() - self.max;
                    self.tail.drain(..cut);
                }
                true
            }
            Err(e) => e.kind() == io::ErrorKind::Interrupted || e.kind() == io::ErrorKind::WouldBlock,
        }
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.tail).into_owned()
    }
}

/// What `poll_ready` waits for on a descriptor: bytes to read (or its end).
pub(crate) const READABLE: libc::c_short = libc::POLLIN;
/// ... or only the peer closing its end (a socket read by another thread meanwhile).
#[cfg(target_os = "linux")]
pub(crate) const HANG_UP: libc::c_short = libc::POLLRDHUP;
#[cfg(not(target_os = "linux"))]
pub(crate) const HANG_UP: libc::c_short = libc::POLLIN;

/// Waits until one of `fds` has what it waits for (`READABLE`, `HANG_UP`; an error or a
/// hang-up always counts), at most `timeout_ms`; returns which do. A negative descriptor
/// is skipped.
pub(crate) fn poll_ready(fds: &[(RawFd, libc::c_short)], timeout_ms: u64) -> Vec<bool> {
    let mut polled: Vec<libc::pollfd> = fds.iter().map(|&(fd, events)| libc::pollfd { fd, events, revents: 0 }).collect();
    // SAFETY: `polled` is a valid array of pollfd of its length.
    let n = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, timeout_ms.min(i32::MAX as u64) as libc::c_int) };
    if n <= 0 {
        return vec![false; fds.len()];
    }
    polled.iter().map(|p| p.fd >= 0 && p.revents != 0).collect()
}
