//! Reading a host's run channel (Node's loop while it is free, else the host's I/O
//! thread), counting big frames' values off the lock, and each host's I/O thread.
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use isolet_core::frame::{self, Header, Kind, WireDone};
use isolet_core::host_policy::{self as policy, HostEnd};
use isolet_core::wakeups;

use super::process::{self, FrameStream, Read1, RssReader, StderrTail};
use super::writer::HostWriter;
use super::{ChannelReader, Inner, LIVE_HOSTS};
use crate::limits::lock;

/// A host's run channel and the frames read from it. Node's thread reads it while its loop
/// is free (`LoopWatch`): the frames' events then reach JavaScript without a wake-up by
/// another thread. The host's I/O thread reads it when Node's thread has left what is
/// waiting unread for a poll period (`policy::UnreadFrames`: the application's JavaScript
/// holds Node's thread, and a run's `done` must still free its slot and keep its
/// deadline), when the host has closed its end (what is left is read before the host's
/// runs are settled), and always where Node's loop does not watch it.
pub(super) struct HostFrames {
    inner: Weak<Inner>,
    /// Itself, for the helper thread `hand_over` starts.
    me: Weak<HostFrames>,
    key: u64,
    rss: RssReader,
    read: Mutex<ReadState>,
    /// Node's loop watches the channel.
    node_reads: AtomicBool,
    /// Reads by Node's thread, for the I/O thread's check that they keep up.
    node_read_count: AtomicU64,
}

pub(super) struct ReadState {
    pub(super) frames: FrameStream,
    /// False once the host broke the protocol: nothing more is read from it.
    pub(super) reading: bool,
    pub(super) eof: bool,
    /// Frames handed to a helper thread (see `HostFrames::hand_over`), in order, and
    /// whether one is running: while it is, every frame read goes here.
    pub(super) handed: VecDeque<(Header, Vec<u8>)>,
    pub(super) helper: bool,
}

/// Frames whose values are counted off the thread that read them: a result or host-call
/// argument list at least this long (the count walks every value: ~10 ms per MB of small
/// objects), so Node's thread, which reads most frames, never spends that time.
pub(super) const COUNT_ELSEWHERE_MIN: usize = 256 * 1024;

/// A result or argument list counted ahead of `State::on_frame`.
pub(super) type Precount = Result<isolet_core::Tally, isolet_core::CountError>;

/// What `State::count_bounds` gives a helper to count a frame against.
pub(super) struct CountBounds {
    pub(super) values: isolet_core::Bounds,
    pub(super) log_entries: usize,
    pub(super) log_bytes: usize,
}

/// Counts a frame's values (off any lock).
pub(super) fn precount(h: &Header, payload: &[u8], bounds: &CountBounds) -> Option<Precount> {
    let at = match h.kind {
        Kind::HostCall => frame::decode_host_call(payload).ok()?.1,
        Kind::Done => {
            let (done, at) = WireDone::decode(payload, bounds.log_entries, bounds.log_bytes).ok()?;
            done.result.ok()?;
            at
        }
        _ => return None,
    };
    Some(isolet_core::tally(&payload[at..], bounds.values))
}

impl HostFrames {
    /// One read of the channel, and every whole frame read so far handled. True when
    /// bytes were read.
    fn read_once(&self, fd: RawFd) -> bool {
        let mut r = lock(&self.read);
        if !r.reading || r.eof {
            return false;
        }
        let data = match r.frames.read_from(fd) {
            Ok(Read1::Data) => true,
            Ok(Read1::Eof) => {
                r.eof = true;
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => false,
            Err(_) => {
                r.eof = true;
                false
            }
        };
        if !data {
            return false;
        }
        let Some(inner) = self.inner.upgrade() else {
            r.reading = false;
            return false;
        };
        // Node's thread is woken for these frames' events once the state lock is
        // released: it needs that lock for what it does next (a reply, the next run).
        let held = wakeups::HoldRings::new();
        let mut s = inner.state();
        let key = self.key;
        // No helper thread could be started: the handed frames are handled here at the end.
        let mut inline = false;
        loop {
            let next = r.frames.next_frame(&mut |h| s.frame_limit(key, h));
            let outcome = match next {
                Ok(Some((h, payload))) => {
                    // A big result or argument list is counted off this thread and this lock,
                    // and every frame after it follows it there, in order.
                    if r.helper || (payload.len() >= COUNT_ELSEWHERE_MIN && matches!(h.kind, Kind::HostCall | Kind::Done)) {
                        r.handed.push_back((h, payload));
                        if !std::mem::replace(&mut r.helper, true) && !self.hand_over() {
                            inline = true;
                        }
                        Ok(true)
                    } else {
                        s.on_frame(key, h, payload, &self.rss, None).map(|_| true)
                    }
                }
                Ok(None) => Ok(false),
                Err(why) => Err(why),
            };
            match outcome {
                Ok(true) => continue,
                Ok(false) => break,
                Err(why) => {
                    // Nothing more is read from a host that broke the protocol.
                    s.end_host(key, HostEnd::Protocol(why));
                    r.reading = false;
                    break;
                }
            }
        }
        // A futex system call per frame otherwise, though almost never anyone waits.
        let wake = s.waiters > 0;
        drop(s);
        drop(r);
        drop(held);
        if wake {
            inner.changed.notify_all();
        }
        if inline {
            self.helper();
        }
        true
    }

    /// Starts a helper thread for the frames in `handed`: it counts a big frame's values
    /// before it takes the state lock, then handles each frame as `read_once` does, in
    /// order, until none is left.
    /// False when no thread could be started: the caller then runs `helper` itself, once
    /// it holds no lock.
    fn hand_over(&self) -> bool {
        let Some(me) = self.me.upgrade() else { return false };
        std::thread::Builder::new().name("isolet-count".into()).spawn(move || me.helper()).is_ok()
    }

    fn helper(&self) {
        let key = self.key;
        loop {
            let next = {
                let mut r = lock(&self.read);
                match r.handed.pop_front() {
                    Some(f) if r.reading => f,
                    _ => {
                        r.handed.clear();
                        r.helper = false;
                        return;
                    }
                }
            };
            let Some(inner) = self.inner.upgrade() else { return };
            let (h, payload) = next;
            let bounds = if payload.len() >= COUNT_ELSEWHERE_MIN { inner.state().count_bounds(key, &h) } else { None };
            let pre = bounds.and_then(|b| precount(&h, &payload, &b));
            let held = wakeups::HoldRings::new();
            let mut s = inner.state();
            let outcome = s.on_frame(key, h, payload, &self.rss, pre);
            if let Err(why) = outcome {
                s.end_host(key, HostEnd::Protocol(why));
                drop(s);
                drop(held);
                let mut r = lock(&self.read);
                r.reading = false;
                r.handed.clear();
                r.helper = false;
                return;
            }
            let wake = s.waiters > 0;
            drop(s);
            drop(held);
            if wake {
                inner.changed.notify_all();
            }
        }
    }

    /// Reads until nothing is waiting (or a frame is left half read).
    fn read_all(&self, fd: RawFd) {
        while self.read_once(fd) {}
    }

    /// Still read from: not at its end, not refused.
    fn open(&self) -> bool {
        let r = lock(&self.read);
        r.reading && !r.eof
    }
}

impl ChannelReader for HostFrames {
    fn readable(&self, fd: RawFd) -> bool {
        self.node_read_count.fetch_add(1, Ordering::Relaxed);
        self.read_once(fd);
        self.open()
    }

    fn unwatched(&self) {
        self.node_reads.store(false, Ordering::Release);
    }
}

/// Asks Node's loop to read host `key`'s channel; false where it cannot (no loop to
/// watch with, or it is closing) or on macOS (the I/O thread learns of the host's end
/// of the channel closing by `POLLRDHUP`, which only Linux has).
pub(super) fn watch_on_node_loop(me: &Weak<Inner>, frames: &Arc<HostFrames>, channel: &std::os::unix::net::UnixStream) -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    let Some(watch) = me.upgrade().and_then(|inner| inner.loop_watch.clone()) else { return false };
    let Ok(fd) = channel.try_clone() else { return false };
    frames.node_reads.store(true, Ordering::Release);
    let reader: Arc<dyn ChannelReader> = frames.clone();
    if !watch.watch(OwnedFd::from(fd), reader) {
        frames.node_reads.store(false, Ordering::Release);
        return false;
    }
    true
}

/// One host's I/O: its stderr, its exit, its memory and its runs' deadlines on every poll
/// period, and its frames when Node's loop does not read them (see `HostFrames`). Ends
/// once the host is reaped.
pub(super) fn io_loop(me: Weak<Inner>, key: u64, spawned: Arc<Mutex<Option<process::Spawned>>>, writer: Option<Arc<HostWriter>>) {
    let Some(mut sp) = lock(&spawned).take() else { return };
    let pid = sp.child.id();
    let pidfd = process::pidfd_of(pid);
    let frames = Arc::new_cyclic(|frames_me| HostFrames {
        inner: me.clone(),
        me: frames_me.clone(),
        key,
        rss: RssReader::open(pid),
        read: Mutex::new(ReadState { frames: FrameStream::new(), reading: true, eof: false, handed: VecDeque::new(), helper: false }),
        node_reads: AtomicBool::new(false),
        node_read_count: AtomicU64::new(0),
    });
    watch_on_node_loop(&me, &frames, &sp.channel);
    let chan_fd = sp.channel.as_raw_fd();
    let mut stderr = StderrTail::new(sp.stderr, policy::STDERR_TAIL_BYTES);
    let mut stderr_open = true;
    let mut exited_at: Option<Instant> = None;
    // Ticks (memory, deadlines) once per poll period, however often the host wakes us.
    let mut last_tick = Instant::now();
    let mut unread = policy::UnreadFrames::default();
    loop {
        let period = match me.upgrade() {
            Some(inner) => inner.state().poll_period(key),
            None => {
                let _ = sp.child.kill();
                break;
            }
        };
        let timeout = match exited_at {
            Some(t) => (policy::EXIT_CLOSE_GRACE_MS).saturating_sub(t.elapsed().as_millis() as u64).min(period),
            None => period,
        };
        let open = frames.open();
        let node_reads = frames.node_reads.load(Ordering::Acquire);
        let fds = [
            // Node's loop reads the frames: woken only by the host closing its end.
            (if open { chan_fd } else { -1 }, if node_reads { process::HANG_UP } else { process::READABLE }),
            (if stderr_open { stderr.fd() } else { -1 }, process::READABLE),
            // Readable for good once the host exited: polled until then only.
            (if exited_at.is_none() { pidfd.as_ref().map_or(-1, |f| f.as_raw_fd()) } else { -1 }, process::READABLE),
        ];
        let ready = process::poll_ready(&fds, timeout);
        if ready[1] {
            stderr_open = stderr.read_some();
        }
        if ready[0] {
            if node_reads {
                frames.read_all(chan_fd);
            } else {
                frames.read_once(chan_fd);
            }
        }
        if exited_at.is_none() {
            let gone = match &pidfd {
                Some(_) => ready[2],
                None => process::exited_unreaped(pid),
            };
            if gone {
                exited_at = Some(Instant::now());
            }
        }
        let (reading, eof) = {
            let r = lock(&frames.read);
            (r.reading, r.eof)
        };
        if eof || (exited_at.is_some() && !reading) {
            // Its end of the channel closed (it has exited, or it is ended now), or it
            // exited and nothing more is read from it.
            break;
        }
        if exited_at.is_some_and(|t| t.elapsed() >= Duration::from_millis(policy::EXIT_CLOSE_GRACE_MS)) {
            break;
        }
        if exited_at.is_none() && last_tick.elapsed() >= Duration::from_millis(period) {
            last_tick = Instant::now();
            if frames.node_reads.load(Ordering::Acquire) && reading {
                let node_reads = frames.node_read_count.load(Ordering::Relaxed);
                let waiting = process::poll_ready(&[(chan_fd, process::READABLE)], 0)[0];
                if unread.check(waiting, node_reads) {
                    frames.read_all(chan_fd);
                }
            }
            let mb = frames.rss.mb();
            let Some(inner) = me.upgrade() else { break };
            inner.state().tick(key, mb);
        }
    }
    // Node's loop stops watching at the channel's end of file (its copy of the descriptor
    // sees it once the host is gone) or when it refuses to read more.
    if let Some(w) = &writer {
        w.close();
    }
    if let Some(inner) = me.upgrade() {
        if let Some(h) = inner.state().host_mut(key) {
            h.reaping = true;
        }
    }
    let _ = sp.child.kill();
    let status = sp.child.wait().ok();
    LIVE_HOSTS.fetch_sub(1, Ordering::SeqCst);
    // Frames handed to a helper (a big result being counted) are handled before the host's
    // runs are settled, as every frame read is.
    for _ in 0..2000 {
        if !lock(&frames.read).helper {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // What it wrote last (a V8 OOM message comes right before the end); bounded, as a
    // descendant may hold the pipe open where lock-down is unavailable.
    for _ in 0..16 {
        if !stderr_open || !process::poll_ready(&[(stderr.fd(), process::READABLE)], 0)[0] {
            break;
        }
        stderr_open = stderr.read_some();
    }
    drop(sp.channel);
    if let Some(inner) = me.upgrade() {
        let mut s = inner.state();
        s.host_exited(key, status, &stderr.text(), None);
        drop(s);
        inner.changed.notify_all();
    }
}
