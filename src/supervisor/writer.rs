//! Frames to one host, written without ever blocking the caller (a host that stops
//! reading holds up only its own writer thread).
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::process::poll_ready;
use crate::limits::lock;

/// Frames to one host, written without blocking whoever sends them: a frame goes out at
/// once if the socket takes it whole, else (what is left of it, and everything after it)
/// waits for the host's writer thread, which blocks for it. Order is kept.
pub(crate) struct HostWriter {
    /// A descriptor of its own for the socket (a dup): valid as long as the writer lives,
    /// whenever the caller closes its end, so a late write can never reach a reused number.
    fd: OwnedFd,
    state: Mutex<WriterState>,
    wake: Condvar,
}

pub(crate) struct WriterState {
    /// Buffers waiting, each with how much of it was already written.
    queue: VecDeque<(Vec<u8>, usize)>,
    closed: bool,
}

impl HostWriter {
    /// A writer on `channel`'s socket, with its thread.
    pub(crate) fn start(channel: &UnixStream) -> io::Result<Arc<HostWriter>> {
        let w = Arc::new(HostWriter {
            fd: OwnedFd::from(channel.try_clone()?),
            state: Mutex::new(WriterState { queue: VecDeque::new(), closed: false }),
            wake: Condvar::new(),
        });
        let thread = w.clone();
        std::thread::Builder::new().name("isolet-host-writer".into()).stack_size(256 * 1024).spawn(move || thread.run())?;
        Ok(w)
    }

    /// Sends `parts` as one frame (in order, nothing of another frame between them).
    pub(crate) fn send(&self, parts: &[&[u8]]) {
        self.send_queued(self.queue(), parts);
    }

    /// Takes this writer's place in line: frames sent through the guard (`send_queued`)
    /// go out after every frame sent before it was taken and before any sent after. A
    /// caller holding the engine's lock takes it there, then releases that lock before the
    /// system call (which may hand the CPU to the woken host while the lock is held).
    pub(crate) fn queue(&self) -> MutexGuard<'_, WriterState> {
        lock(&self.state)
    }

    /// `send`, in the place `s` (this writer's `queue()`) holds.
    pub(crate) fn send_queued(&self, mut s: MutexGuard<'_, WriterState>, parts: &[&[u8]]) {
        if s.closed {
            return;
        }
        let Some(mut written) = self.send_now(&mut s, parts) else { return };
        for part in parts {
            if written >= part.len() {
                written -= part.len();
                continue;
            }
            s.queue.push_back((part.to_vec(), written));
            written = 0;
        }
        if s.queue.is_empty() {
            return;
        }
        drop(s);
        self.wake.notify_one();
    }

    /// The fast path: with nothing queued, straight into the socket as far as it takes
    /// `parts`, in one system call (a host reading the frame then finds it whole, not its
    /// head alone). The bytes that went, or `None` once the host is gone (its reader sees
    /// that and ends it).
    fn send_now(&self, s: &mut WriterState, parts: &[&[u8]]) -> Option<usize> {
        if !s.queue.is_empty() {
            return Some(0);
        }
        match send_parts(self.fd.as_raw_fd(), parts, libc::MSG_DONTWAIT) {
            Ok(n) => Some(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Some(0),
            Err(_) => {
                s.closed = true;
                s.queue.clear();
                None
            }
        }
    }

    /// Sends an owned buffer (no copy when it cannot go out at once).
    pub(crate) fn send_owned(&self, head: &[u8], body: Vec<u8>) {
        self.send_owned_queued(self.queue(), head, body);
    }

    /// `send_owned`, in the place `s` (this writer's `queue()`) holds.
    pub(crate) fn send_owned_queued(&self, mut s: MutexGuard<'_, WriterState>, head: &[u8], body: Vec<u8>) {
        if s.closed {
            return;
        }
        let Some(written) = self.send_now(&mut s, &[head, &body]) else { return };
        if written < head.len() {
            s.queue.push_back((head.to_vec(), written));
            s.queue.push_back((body, 0));
        } else if written - head.len() < body.len() {
            s.queue.push_back((body, written - head.len()));
        } else {
            return;
        }
        drop(s);
        self.wake.notify_one();
    }

    /// Nothing more is sent; the thread ends (what waits is dropped). A write blocked on
    /// a host that reads no more is woken by shutting the socket down.
    pub(crate) fn close(&self) {
        let mut s = lock(&self.state);
        s.closed = true;
        s.queue.clear();
        drop(s);
        // SAFETY: shutdown on a socket descriptor we own.
        unsafe { libc::shutdown(self.fd.as_raw_fd(), libc::SHUT_RDWR) };
        self.wake.notify_all();
    }

    fn run(self: Arc<Self>) {
        loop {
            let (buf, mut at) = {
                let mut s = lock(&self.state);
                loop {
                    if s.closed {
                        return;
                    }
                    if let Some(front) = s.queue.front_mut() {
                        // Taken out while written, so senders see the queue busy only by
                        // what is still behind it: keep a placeholder in front.
                        break (std::mem::take(&mut front.0), front.1);
                    }
                    s = self.wake.wait(s).unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            let mut failed = false;
            while at < buf.len() {
                if lock(&self.state).closed {
                    return;
                }
                match send_some(self.fd.as_raw_fd(), &buf[at..], 0) {
                    Ok(n) => at += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // The socket is non-blocking where Node's loop also watches it (libuv
                    // sets that on the shared description): wait for room, checking
                    // `closed` now and then.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        poll_ready(&[(self.fd.as_raw_fd(), libc::POLLOUT)], 100);
                    }
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            let mut s = lock(&self.state);
            if failed || s.closed {
                s.closed = true;
                s.queue.clear();
                return;
            }
            s.queue.pop_front();
        }
    }
}

/// One sendmsg(2) of `parts` in order, never raising SIGPIPE: how many bytes went.
fn send_parts(fd: RawFd, parts: &[&[u8]], flags: libc::c_int) -> io::Result<usize> {
    let mut iov: Vec<libc::iovec> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() })
        .collect();
    if iov.is_empty() {
        return Ok(0);
    }
    // SAFETY: a zeroed msghdr is valid (no name, no control data); the iovecs point into
    // `parts`, which outlive the call, and `fd` is a socket kept open by the caller.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        libc::sendmsg(fd, &msg, flags | libc::MSG_NOSIGNAL)
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One send(2), never raising SIGPIPE.
fn send_some(fd: RawFd, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    // SAFETY: `buf` is valid for `buf.len()` bytes; `fd` is a socket kept open by the caller.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags | libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
