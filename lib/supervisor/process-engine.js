'use strict';
// The process backend (isolation: 'process'): the same interface as the native
// thread-mode engine (`submit(request, onEvent) -> handle`, `stats`, `shutdown`,
// `waitIdle`), so `lib/execute.js` serves both alike. Runs execute in sandbox host
// processes (`sandbox-host.js`), each a `node` child running isolates in thread mode.
//
// Supervision: a child is replaced, never repaired.
// - A run the child reports as unstoppable (a thread that ignored termination) puts
//   the child in `draining`: it takes no new work, and is killed once its other runs
//   finish. A replacement starts at once, so capacity does not drop.
// - A run not settled by its wall limit + DEADLINE_GRACE_MS ends the child outright.
// - The child's resident memory is bounded by the sum of its runs' allowances plus
//   its measured base; past that it is killed (the hard limit no single allocation
//   passes). A crash (any signal, any unexpected exit) ends only that child.
// Every run in flight in an ended child settles with a typed error; queued runs wait
// for the replacement.
const { fork } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const native = require('../native');
const { SandboxValidationError, failureOf } = require('../errors');

const HOST_SCRIPT = path.join(__dirname, 'sandbox-host.js');
// Node options of a sandbox host (none on most lines; see sandbox_host_node_options in Rust).
const HOST_NODE_OPTIONS = native.sandboxHostNodeOptions();
/** Test hook: another host script (a fake, compromised host in the protocol tests). */
const testHooks = { hostScript: null };
/** The fork's stdio index (and the child's fd) of the run channel. */
const RUN_CHANNEL = 4;
const { headerBytes: FRAME_HEADER, lengthOffset: FRAME_LENGTH_AT } = native.frameLayout();
/** Largest frame a run's host may send beyond its limits' sum (error texts, headers). */
const FRAME_HEADROOM_BYTES = 4 * 1024 * 1024;
/** A frame of no run (`health`) is a few dozen bytes. */
const MAX_HEALTH_FRAME_BYTES = 256;
/** After a host exits, how long its streams may stay open before they are closed here. */
const EXIT_CLOSE_GRACE_MS = 500;
/** Health frames a host may send beyond one per `done`: a few at once, then one per period
 *  (it reports 20 ms after runs end, coalesced; see src/supervisor/channel.rs). */
const HEALTH_BURST = 16;
const HEALTH_PERIOD_MS = 10;

/** How long past its wall limit a run may go unanswered before its child is ended
 *  (the child's own watchdog answers 400 ms past the limit; this is the backstop, and
 *  keeps every run settled within limit + 1 s). */
const DEADLINE_GRACE_MS = 750;
/** RSS polling period while a child has runs in flight, and while it is idle. The busy
 *  poll also ends a child with a run past its deadline. */
const RSS_POLL_BUSY_MS = 10;
const RSS_POLL_IDLE_MS = 500;
/** Busy polls finding no run before polling slows to idle (runs a few ms apart keep the
 *  busy period, instead of setting a new interval for each). */
const IDLE_POLLS_BEFORE_SLOWING = 10;
/** Resident memory a run may add to its child: its heap limit twice (V8's near-limit
 *  headroom and code/array-buffer memory) plus a fixed slack. */
const runAllowanceMb = (memoryMb) => 2 * memoryMb + 32;
/** Added to the RSS a child has when ready (its warm isolates still come). */
const BASE_SLACK_MB = 96;
/** A child that does not report ready in this time is ended and replaced. */
const START_TIMEOUT_MS = 15000;
/** Consecutive start failures after which queued runs are failed instead of waiting. */
const MAX_START_FAILURES = 3;
/** How long to wait before starting hosts again after MAX_START_FAILURES. */
const START_RETRY_MS = 1000;
/** The last bytes of a child's stderr kept to tell a V8 OOM from another crash. */
const STDERR_TAIL_BYTES = 8192;

/** Every sandbox host process of this host, for `processStats()`. */
const LIVE = new Set();

const OOM_TEXT = /out of memory|heap limit|allocation failed/i;

const ZERO_STATS = Object.freeze({ wallTimeMs: 0, cpuTimeMs: 0, heapUsedBytes: 0, heapAtEndBytes: 0, hostCalls: 0 });

/** A `done` event failing with `kind` (a name in isolet-core's `ErrorKind`). */
function failureEvent(kind, message, extra = {}, wallTimeMs = 0) {
  return { type: 'done', ok: false, error: failureOf(kind, message, extra), stats: { ...ZERO_STATS, wallTimeMs }, logs: [] };
}

/** The environment of a sandbox host: isolet's own settings and the time zone (so dates
 *  read alike in both modes), nothing else: no secrets of the parent reach a host. */
function hostEnv() {
  const env = { ISOLET_SANDBOX_HOST: '1' };
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('ISOLET_') || k === 'TZ') env[k] = v;
  }
  return env;
}

/** Largest frame the host of `request` may send for it: a host call's arguments or a
 *  result, with the run's logs, plus headroom. Anything longer ends the host. */
function frameLimitOf(request) {
  const logs = request.maxLogBytes + 8 * request.maxLogEntries;
  return Math.max(request.maxMessageBytes, request.maxOutputBytes) + logs + FRAME_HEADROOM_BYTES;
}

/** Whether event `ev` (a frame of `frameBytes`) is one more than its run may send: a
 *  `started` once, `console` entries only if asked for and within the log limits,
 *  host calls and data requests within `maxMessages` (what the run's isolate enforces).
 *  A compromised host could otherwise make this process buffer events without end. */
function overBudget(run, ev, frameBytes) {
  const r = run.request;
  switch (ev.type) {
    case 'started':
      if (run.sawStarted) return true;
      run.sawStarted = true;
      return false;
    case 'console':
      run.consoles += 1;
      run.consoleBytes += frameBytes;
      return !r.streamConsole || run.consoles > r.maxLogEntries || run.consoleBytes > r.maxLogBytes + 64 * r.maxLogEntries;
    case 'hostCall': {
      // In flight from here until its reply is written (see the run's handle): a host
      // that kept more calls, or more argument bytes, open than its isolate allows
      // (`maxPendingHostCalls`, `maxPendingHostCallBytes`) is not the host we started.
      run.messages += 1;
      const bytes = ev.payload ? ev.payload.length : 0;
      if (run.messages > r.maxMessages || bytes > r.maxMessageBytes || run.callBytes.has(ev.callId)) return true;
      run.callBytes.set(ev.callId, bytes);
      run.pendingCallBytes += bytes;
      return run.callBytes.size > r.maxPendingHostCalls || run.pendingCallBytes > r.maxPendingHostCallBytes;
    }
    case 'dataRequest':
      run.messages += 1;
      return run.messages > r.maxMessages || frameBytes > r.maxMessageBytes + FRAME_HEADROOM_BYTES;
    default:
      return false;
  }
}

/** `health` of the IPC messages, from a frame's health fields. */
function healthOf(h) {
  return {
    stuck: h.stuck,
    threads: h.threads,
    engine: { warm: h.warm, warming: h.warming, threads: h.engineThreads, quarantined: h.quarantined, warmStarts: h.warmStarts, coldStarts: h.coldStarts },
  };
}

/**
 * Cuts a host's run channel into frames: each frame's bytes are copied once, into a
 * buffer of the length its header states (a frame inside one chunk is a view of it),
 * and only after that length was checked against what the frame's run may send. The
 * host is untrusted: `onBad` is called (once; nothing is read after it) for a frame
 * too long, of no run in flight, or that does not decode.
 */
class FrameReader {
  constructor(limitOf, logLimitsOf, onFrame, onBad) {
    this.limitOf = limitOf;
    this.logLimitsOf = logLimitsOf;
    this.onFrame = onFrame;
    this.onBad = onBad;
    this.bad = false;
    /** A header split over chunks. */
    this.head = Buffer.alloc(FRAME_HEADER);
    this.headFill = 0;
    /** The frame being filled, and how much of it is. */
    this.frame = null;
    this.fill = 0;
  }

  fail(why) {
    if (this.bad) return;
    this.bad = true;
    this.frame = null;
    this.onBad(why);
  }

  /** Checks a header; returns the frame's total length, or -1 (and fails). */
  frameLength(head, at) {
    const len = head.readUInt32LE(at + FRAME_LENGTH_AT);
    const limit = this.limitOf(head.readUInt32LE(at + 4));
    if (limit < 0) {
      this.fail('a frame for no run in flight');
      return -1;
    }
    if (len > limit) {
      this.fail(`a frame of ${len} bytes (limit ${limit})`);
      return -1;
    }
    return FRAME_HEADER + len;
  }

  push(chunk) {
    let off = 0;
    while (off < chunk.length && !this.bad) {
      if (this.frame !== null) {
        const n = Math.min(this.frame.length - this.fill, chunk.length - off);
        chunk.copy(this.frame, this.fill, off, off + n);
        this.fill += n;
        off += n;
        if (this.fill === this.frame.length) {
          const frame = this.frame;
          this.frame = null;
          this.deliver(frame);
        }
        continue;
      }
      let total;
      if (this.headFill === 0 && chunk.length - off >= FRAME_HEADER) {
        total = this.frameLength(chunk, off);
        if (total < 0) return;
        if (chunk.length - off >= total) {
          this.deliver(chunk.subarray(off, off + total));
          off += total;
          continue;
        }
        this.frame = Buffer.allocUnsafe(total);
        this.fill = 0;
        continue;
      }
      const n = Math.min(FRAME_HEADER - this.headFill, chunk.length - off);
      chunk.copy(this.head, this.headFill, off, off + n);
      this.headFill += n;
      off += n;
      if (this.headFill < FRAME_HEADER) return;
      this.headFill = 0;
      total = this.frameLength(this.head, 0);
      if (total < 0) return;
      this.frame = Buffer.allocUnsafe(total);
      this.head.copy(this.frame, 0);
      this.fill = FRAME_HEADER;
      if (total === FRAME_HEADER) {
        const frame = this.frame;
        this.frame = null;
        this.deliver(frame);
      }
    }
  }

  deliver(frame) {
    let ev;
    try {
      // The log list of a `done` is checked against its run's limits while decoding,
      // before a single entry is made (a 5-byte entry would otherwise cost a JS object).
      const [maxLogEntries, maxLogBytes] = this.logLimitsOf(frame.readUInt32LE(4));
      ev = native.decodeHostFrame(frame, maxLogEntries, maxLogBytes);
    } catch (err) {
      this.fail(String(err && err.message));
      return;
    }
    if (ev.payloadStart !== undefined && ev.payloadStart !== null) ev.payload = frame.subarray(ev.payloadStart);
    try {
      this.onFrame(ev, frame.length);
    } catch (err) {
      // A throwing listener (an onEvent hook of the caller's) must not cut the stream
      // mid-chunk: report it as thread mode does, and keep reading frames whole.
      process.nextTick(() => {
        throw err;
      });
    }
  }
}

/** Whether a message from a host has the shape the protocol allows. A host runs
 *  untrusted code: a message that does not fit ends it. */
function wellFormed(msg) {
  if (msg === null || typeof msg !== 'object') return false;
  switch (msg.type) {
    case 'bye':
      return true;
    case 'invalid':
      return typeof msg.message === 'string';
    case 'ready':
    case 'health':
      return msg.health !== null && typeof msg.health === 'object';
    default:
      return false;
  }
}

/** Bytes per page of /proc/<pid>/statm (the page size): this process's resident pages
 *  there against its resident bytes (a power of two; 4096 when it cannot be told). */
let statmPageBytes = 0;
function pageBytes() {
  if (statmPageBytes === 0) {
    statmPageBytes = 4096;
    try {
      const pages = Number(fs.readFileSync('/proc/self/statm', 'latin1').split(' ')[1]);
      const ratio = process.memoryUsage.rss() / pages;
      if (pages > 0 && ratio >= 1024) statmPageBytes = 2 ** Math.round(Math.log2(ratio));
    } catch {
      // not Linux: no RSS budget to read either
    }
  }
  return statmPageBytes;
}

/**
 * Resident memory of one child, read from /proc/<pid>/statm through a descriptor opened
 * once at its start: each poll is one pread and a few bytes parsed (reading
 * /proc/<pid>/status by name took an open, a stat, a read of 1.5 kB and a close). The
 * descriptor is of that process, not of its pid: once the process is reaped it reads
 * nothing, never another process that got the pid.
 */
class RssReader {
  constructor(pid) {
    this.fd = -1;
    this.buf = Buffer.alloc(128);
    try {
      this.fd = fs.openSync(`/proc/${pid}/statm`, 'r');
    } catch {
      // no procfs: mb() is null, as for a process gone
    }
  }

  /** Resident MB, or null once the process is gone. */
  mb() {
    if (this.fd < 0) return null;
    let n;
    try {
      n = fs.readSync(this.fd, this.buf, 0, this.buf.length, 0);
    } catch {
      return null;
    }
    // "size resident shared ...": the second field, in pages.
    let i = 0;
    while (i < n && this.buf[i] !== 0x20) i++;
    let pages = 0;
    let digits = 0;
    for (i += 1; i < n && this.buf[i] >= 0x30 && this.buf[i] <= 0x39; i++, digits++) pages = pages * 10 + (this.buf[i] - 0x30);
    return digits === 0 ? null : (pages * pageBytes()) / (1024 * 1024);
  }

  close() {
    if (this.fd < 0) return;
    try {
      fs.closeSync(this.fd);
    } catch {
      // already closed
    }
    this.fd = -1;
  }
}

class SandboxProcess {
  constructor(engine) {
    this.engine = engine;
    this.state = 'starting';
    /** Runs in flight here, by id. */
    this.runs = new Map();
    this.baseMb = 0;
    this.health = null;
    /** Warm isolates this child likely has now: its last report, less the runs sent
     *  since (the dispatcher prefers a child that can start a run at once). */
    this.warmLeft = 0;
    /** Health frames and `done`s received: a host may send one health frame per `done`
     *  and one per HEALTH_PERIOD_MS of its life (plus a few), no more (see onFrame). */
    this.healthFrames = 0;
    this.doneFrames = 0;
    this.bornAt = Date.now();
    /** When this child was last given a run (ties go to the one idle longest). */
    this.lastStart = 0;
    this.lockdown = null;
    this.stuckAtReady = 0;
    /** Set once the supervisor decided to replace this child (counted once). */
    this.recycledFor = null;
    /** Why the supervisor ended this child (null: it ended on its own). */
    this.endReason = null;
    this.stderrTail = '';
    /** Whether the run channel is corked until the end of this tick (see `write`). */
    this.corked = false;
    /** Settles when the child is ready or gone. */
    this.started = new Promise((resolve) => {
      this.resolveStarted = resolve;
    });

    let child;
    try {
      child = fork(testHooks.hostScript ?? HOST_SCRIPT, [], {
        execArgv: HOST_NODE_OPTIONS,
        serialization: 'advanced',
        // stdio[4]: the run channel (a socket pair), see FrameReader.
        stdio: ['ignore', 'ignore', 'pipe', 'ipc', 'pipe'],
        env: hostEnv(),
      });
    } catch (err) {
      // No process could be started (EAGAIN, ENOMEM, or a seccomp filter of our own
      // caller): a start failure like any other, reported after this constructor.
      this.child = null;
      this.state = 'dead';
      this.endReason = `spawn failed: ${err.code || err.message}`;
      this.stderrTail = String(err.message);
      this.resolveStarted();
      setImmediate(() => engine.onChildExit(this, { wasStarting: true, reason: this.endReason }));
      return;
    }
    this.child = child;
    this.pid = child.pid;
    this.rss = new RssReader(child.pid);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
    });
    this.channel = child.stdio[RUN_CHANNEL];
    this.frames = new FrameReader(
      (runId) => (runId === 0 ? MAX_HEALTH_FRAME_BYTES : (this.runs.get(runId)?.frameLimit ?? -1)),
      (runId) => {
        const r = this.runs.get(runId)?.request;
        return r ? [r.maxLogEntries, r.maxLogBytes] : [0, 0];
      },
      (ev, bytes) => this.onFrame(ev, bytes),
      () => {
        // Nothing more is read from a host that broke the protocol.
        this.channel.destroy();
        this.end('protocol');
      },
    );
    this.channel.on('data', (chunk) => this.frames.push(chunk));
    this.channel.on('error', () => {}); // 'close' follows
    child.on('message', (msg) => this.onMessage(msg));
    child.on('error', () => {}); // 'close' follows and does the work
    // 'close', not 'exit': once the run channel is read to its end, so every event the
    // host wrote before it ended is delivered first.
    child.on('close', (code, signal) => this.onExit(code, signal));
    // 'close' waits for every stream to close: a host that left a process of its own
    // holding one (possible only where lock-down is unavailable) would keep its runs
    // unsettled. Shortly after the host itself exits, close them from this side.
    child.on('exit', () => {
      const t = setTimeout(() => {
        for (const s of [child.stdio[RUN_CHANNEL], child.stderr]) s?.destroy();
        if (child.connected) child.disconnect();
      }, EXIT_CLOSE_GRACE_MS);
      t.unref();
    });
    this.startTimer = setTimeout(() => this.end('start-timeout'), START_TIMEOUT_MS);
    this.startTimer.unref();
    child.send({ type: 'start', parentPid: process.pid, options: engine.childOptions, wasmModules: engine.wasmModules });
    this.pollTimer = null;
    this.idlePolls = 0;
    this.schedulePoll();
    this.updateRef();
  }

  get busy() {
    return this.runs.size;
  }

  /** Resident memory this child may have now. */
  budgetMb() {
    let sum = this.baseMb;
    for (const run of this.runs.values()) sum += runAllowanceMb(run.memoryMb);
    return sum;
  }

  onMessage(msg) {
    if (!wellFormed(msg)) {
      this.end('protocol');
      return;
    }
    if (msg.type === 'invalid') {
      // The child found the engine's configuration unusable (a WebAssembly module that
      // does not compile): no host can start, so init() rejects and none is retried.
      this.engine.invalidConfig = msg.message;
      this.end('invalid');
    } else if (msg.type === 'ready') {
      clearTimeout(this.startTimer);
      if (this.state !== 'starting') return;
      this.state = 'ready';
      this.lockdown = msg.lockdown;
      this.health = msg.health;
      this.warmLeft = msg.health.engine?.warm ?? 0;
      this.stuckAtReady = msg.health.stuck;
      this.baseMb = (this.rss.mb() ?? 0) + BASE_SLACK_MB;
      this.resolveStarted();
      this.engine.onChildReady(this);
    } else if (msg.type === 'health') {
      this.health = msg.health;
      this.warmLeft = msg.health.engine?.warm ?? 0;
    }
  }

  /** A decoded frame of the run channel (an event of a run in flight, or health). */
  onFrame(ev, bytes) {
    if (ev.type === 'health') {
      // A compromised host could flood health frames to take this thread's time.
      this.healthFrames += 1;
      if (this.healthFrames > HEALTH_BURST + this.doneFrames + (Date.now() - this.bornAt) / HEALTH_PERIOD_MS) {
        this.frames.fail('more health frames than a host sends');
        return;
      }
      this.noteHealth(healthOf(ev.health));
      return;
    }
    const run = this.runs.get(ev.runId);
    if (run === undefined) {
      // Its `done` came already: a second one is no event of ours.
      this.frames.fail('an event after its run ended');
      return;
    }
    if (overBudget(run, ev, bytes)) {
      this.frames.fail(`more ${ev.type} events than the run may send`);
      return;
    }
    if (ev.type === 'started') run.startedAt = Date.now();
    if (ev.type === 'done') {
      this.doneFrames += 1;
      const health = healthOf(ev.health);
      delete ev.health;
      this.engine.deliver(run, ev);
      this.noteHealth(health);
    } else {
      this.engine.deliver(run, ev);
    }
  }

  noteHealth(health) {
    this.health = health;
    // As reported by the host (untrusted), but never more than it was configured with:
    // a host claiming warm isolates would otherwise win every dispatch.
    this.warmLeft = Math.min(health.engine.warm, this.engine.childOptions.warmPoolSize);
    if (health.stuck > this.stuckAtReady && this.state === 'ready') {
      // A thread in this child ignored termination: it can only be reclaimed by
      // ending the process. Take no new work; end it once the others finish.
      this.state = 'draining';
      this.recycledFor = 'stuck';
      this.engine.counters.recycled.stuck = (this.engine.counters.recycled.stuck ?? 0) + 1;
      this.engine.onChildDraining(this);
    }
    if (this.state === 'draining' && this.runs.size === 0) this.end('drained');
  }

  start(run) {
    run.child = this;
    run.state = 'running';
    // Wall time of a run its host took down; the `started` event (sent only when the
    // caller listens for it) refines it.
    run.startedAt = Date.now();
    this.runs.set(run.id, run);
    this.warmLeft = Math.max(0, this.warmLeft - 1);
    this.lastStart = ++this.engine.starts;
    // Checked by the busy poll (every RSS_POLL_BUSY_MS), not by a timer of its own: a
    // timer set and cleared per run cost more than the run's other bookkeeping.
    run.deadlineAt = run.startedAt + run.wallMs + DEADLINE_GRACE_MS;
    run.frameLimit = frameLimitOf(run.request);
    this.write(run.frame);
    run.frame = null;
    this.schedulePoll(true);
    this.updateRef();
  }

  /** Writes a frame to the run channel (its head, then its large tail, if any). The
   *  frames of one tick go out together (one write, one wake-up of the host's reader):
   *  the replies to calls a run made at once are answered in the same tick. */
  write(head, tail) {
    if (this.state === 'dead' || this.channel.destroyed) return;
    if (!this.corked) {
      this.corked = true;
      this.channel.cork();
      process.nextTick(() => {
        this.corked = false;
        this.channel.uncork();
      });
    }
    this.channel.write(head);
    if (tail !== undefined && head.length < FRAME_HEADER + tail.length) this.channel.write(tail);
  }

  send(msg) {
    if (this.state === 'dead' || !this.child.connected) return;
    try {
      this.child.send(msg);
    } catch {
      // The channel closed under us: 'exit' settles the runs.
    }
  }

  /** A run went past its deadline without an answer: the child cannot stop it. */
  overdue(run) {
    if (run.state !== 'running' || run.child !== this) return;
    run.overdue = true;
    this.end('overdue');
  }

  schedulePoll(busyNow = false) {
    if (this.state === 'dead') return;
    const period = busyNow || this.runs.size > 0 ? RSS_POLL_BUSY_MS : RSS_POLL_IDLE_MS;
    if (period === RSS_POLL_BUSY_MS) this.idlePolls = 0;
    if (this.pollTimer && this.pollPeriod === period) return;
    clearInterval(this.pollTimer);
    this.pollPeriod = period;
    this.pollTimer = setInterval(() => this.poll(), period);
    this.pollTimer.unref();
  }

  poll() {
    if (this.runs.size > 0) {
      const now = Date.now();
      for (const run of this.runs.values()) {
        if (now >= run.deadlineAt) {
          this.overdue(run);
          return;
        }
      }
    }
    const rss = this.rss.mb();
    if (rss !== null && this.state !== 'starting' && rss > this.budgetMb()) {
      this.rssAtEnd = rss;
      this.budgetAtEnd = this.budgetMb();
      this.end('memory');
      return;
    }
    if (this.runs.size === 0 && this.pollPeriod === RSS_POLL_BUSY_MS && ++this.idlePolls >= IDLE_POLLS_BEFORE_SLOWING) this.schedulePoll();
  }

  /** Keeps the host's event loop alive only while this child has work. */
  updateRef() {
    const busy = this.runs.size > 0 || this.state === 'starting';
    if (busy === this.refd) return;
    this.refd = busy;
    // The child, its IPC channel, its stderr pipe and its run channel each hold the
    // loop open.
    for (const h of [this.child, this.child.channel, this.child.stderr, this.channel]) {
      if (h && typeof h.ref === 'function') busy ? h.ref() : h.unref();
    }
  }

  /** Ends the child (SIGKILL: a stuck thread would keep a polite exit waiting). */
  end(reason) {
    if (this.state === 'dead') return;
    if (this.endReason === null) this.endReason = reason;
    try {
      this.child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }

  onExit(code, signal) {
    clearTimeout(this.startTimer);
    clearInterval(this.pollTimer);
    this.rss?.close();
    const wasStarting = this.state === 'starting';
    this.state = 'dead';
    this.resolveStarted();
    const reason = this.endReason ?? (signal ? `signal ${signal}` : `exit code ${code}`);
    const oomText = OOM_TEXT.test(this.stderrTail);
    const runs = [...this.runs.values()];
    this.runs.clear();
    for (const run of runs) {
      const wall = run.startedAt ? Date.now() - run.startedAt : 0;
      let ev;
      if (this.endReason === 'memory') {
        ev = failureEvent('MemoryLimit',
          `The sandbox host process passed its memory budget (${Math.round(this.rssAtEnd)} MB resident, budget ${Math.round(this.budgetAtEnd ?? 0)} MB) and was ended, with every run in it`, {}, wall);
      } else if (this.endReason === 'overdue') {
        ev = run.overdue
          ? failureEvent('Timeout',
            `Execution could not be stopped at its time limit (${run.wallMs} ms); its sandbox host process was ended`, { limit: 'wall' }, wall)
          : failureEvent('Crashed',
            'Another run in the same sandbox host process could not be stopped, so the process was ended with every run in it', {}, wall);
      } else if (this.endReason === 'shutdown') {
        ev = failureEvent('Aborted', 'The sandbox engine is shut down', {}, wall);
      } else if (oomText) {
        ev = failureEvent('MemoryLimit',
          `The sandbox host process ran out of memory (${reason}) and was ended, with every run in it`, {}, wall);
      } else {
        ev = failureEvent('Crashed',
          `The sandbox host process crashed (${reason}); every run in it ended`, {}, wall);
      }
      this.engine.deliver(run, ev);
    }
    this.engine.onChildExit(this, { wasStarting, reason });
  }
}

class ProcessEngine {
  /**
   * @param {object} options the checked engine config (`native.EngineSettings#config`)
   * @param {number} options.memoryMb memory of warm isolates
   * @param {number} options.maxConcurrentIsolates runs executing at once, over all children
   * @param {number} options.warmPoolSize warm isolates, over all children
   * @param {number} options.maxQueueSize runs that may wait for a slot
   * @param {number} options.processes sandbox host processes kept running
   */
  constructor(options) {
    this.options = options;
    const processes = Math.max(1, Math.min(options.processes, options.maxConcurrentIsolates));
    this.processes = processes;
    this.perChild = Math.ceil(options.maxConcurrentIsolates / processes);
    // A child's engine config, in the public names: checked there by the same native
    // EngineSettings as here. Runs arrive as checked plans.
    this.childOptions = {
      isolation: 'thread',
      memoryMb: options.memoryMb,
      maxConcurrentIsolates: this.perChild,
      warmPoolSize: Math.ceil(options.warmPoolSize / processes),
      // The parent admits runs; a slot freed in the child may still be in release
      // when the parent sends the next run, so the child may queue that one briefly.
      maxQueueSize: this.perChild,
    };
    this.wasmModules = [];
    /** Set when a child refused the configuration (see 'invalid'). */
    this.invalidConfig = null;
    this.children = new Set();
    this.queue = [];
    this.active = 0;
    this.shut = false;
    this.nextRunId = 1;
    /** Runs handed to children so far (orders `lastStart`). */
    this.starts = 0;
    this.startFailures = 0;
    /** After repeated start failures, no new host is tried before this time. */
    this.spawnNotBefore = 0;
    this.counters = {
      completed: 0,
      failed: {},
      started: 0,
      crashed: 0,
      recycled: {},
      crashReasons: {},
    };
  }

  setWasmModules(modules) {
    this.wasmModules = modules.map((m) => ({ name: m.name, bytes: m.bytes }));
  }

  /** Starts the children (they create their warm isolates as they come up). */
  warmUp() {
    this.ensureChildren();
  }

  /** Resolves once every child has started (or failed to: a replacement follows). */
  ready() {
    const waits = [...this.children].filter((c) => c.state === 'starting').map((c) => c.started);
    return Promise.all(waits).then(() => {
      if (this.invalidConfig !== null) throw new SandboxValidationError(this.invalidConfig);
    });
  }

  liveChildren() {
    return [...this.children].filter((c) => c.state === 'starting' || c.state === 'ready');
  }

  /** Keeps `processes` hosts starting or serving. Draining hosts are not counted, but
   *  each holds at least one run in flight (it is ended when its last run settles), so
   *  hosts alive never exceed `processes + maxConcurrentIsolates`. */
  ensureChildren() {
    if (this.shut || this.invalidConfig !== null || Date.now() < this.spawnNotBefore) return;
    // Counted in place, not through liveChildren(): this runs at every submit and settle.
    let live = 0;
    for (const c of this.children) if (c.state === 'starting' || c.state === 'ready') live += 1;
    const missing = this.processes - live;
    for (let i = 0; i < missing; i++) {
      const child = new SandboxProcess(this);
      this.children.add(child);
      LIVE.add(child);
      endHostsAtExit();
      this.counters.started += 1;
    }
  }

  submit(request, onEvent) {
    const id = this.nextRunId;
    // Run ids travel as u32; 0 is no run.
    this.nextRunId = id >= 0xffffffff ? 1 : id + 1;
    const run = {
      id,
      request,
      onEvent,
      state: 'queued',
      child: null,
      memoryMb: request.memoryMb,
      wallMs: request.wallTimeMs,
      pendingData: new Set(),
      startedAt: 0,
      // Events its host sent, against what the run may send (see overBudget).
      sawStarted: false,
      consoles: 0,
      consoleBytes: 0,
      messages: 0,
      /** Host calls in flight: call id -> argument bytes (see overBudget). */
      callBytes: new Map(),
      pendingCallBytes: 0,
    };
    const answered = (callId) => {
      const bytes = run.callBytes.get(callId);
      if (bytes === undefined) return;
      run.callBytes.delete(callId);
      run.pendingCallBytes -= bytes;
    };
    const handle = {
      id: run.id,
      fulfill: (callId, bytes) => {
        answered(callId);
        run.child?.write(native.frameFulfill(run.id, callId, bytes), bytes);
      },
      reject: (callId, name, message) => {
        answered(callId);
        run.child?.write(native.frameReject(run.id, callId, name, message));
      },
      answer: (answerId, bytes, error) => {
        if (run.state !== 'running' || !run.pendingData.delete(answerId)) return false;
        run.child.write(native.frameAnswer(run.id, answerId, bytes, error), error === undefined || error === null ? bytes : undefined);
        return true;
      },
      abort: () => this.abort(run),
    };
    if (this.shut) {
      queueMicrotask(() => this.deliver(run, failureEvent('Aborted', 'The sandbox engine is shut down')));
      return handle;
    }
    // Admitted runs beyond the concurrency cap are the ones waiting for a slot (runs
    // waiting only for a host process to come up are not).
    if (this.active >= this.options.maxConcurrentIsolates + this.options.maxQueueSize) {
      const message = `The engine's queue is full (${this.options.maxQueueSize} waiting); try again later`;
      queueMicrotask(() => this.deliver(run, failureEvent('Overloaded', message)));
      return handle;
    }
    try {
      // Encoded now, so a plan the frame cannot carry fails here like in thread mode.
      run.frame = native.frameRun(run.id, request);
    } catch (err) {
      queueMicrotask(() => this.deliver(run, failureEvent('Validation', String(err && err.message))));
      return handle;
    }
    this.active += 1;
    run.admitted = true;
    this.queue.push(run);
    this.dispatch();
    return handle;
  }

  abort(run) {
    if (run.state === 'queued') {
      this.queue.splice(this.queue.indexOf(run), 1);
      this.deliver(run, failureEvent('Aborted', 'Execution was aborted'));
    } else if (run.state === 'running') {
      run.child.write(native.frameAbort(run.id));
    }
  }

  /** Hands queued runs to ready children with a free slot: one with a warm isolate
   *  first (a run there starts at once; elsewhere it waits for an isolate to be made),
   *  then the least busy, then the one given a run longest ago. */
  dispatch() {
    this.ensureChildren();
    const better = (c, b) => {
      const cw = c.warmLeft > 0, bw = b.warmLeft > 0;
      if (cw !== bw) return cw;
      if (c.busy !== b.busy) return c.busy < b.busy;
      return c.lastStart < b.lastStart;
    };
    while (this.queue.length > 0) {
      let best = null;
      for (const c of this.children) {
        if (c.state === 'ready' && c.busy < this.perChild && (best === null || better(c, best))) best = c;
      }
      if (best === null) return;
      best.start(this.queue.shift());
    }
  }

  /** Passes a run's event on; the first `done` settles it. */
  deliver(run, ev) {
    if (run.state === 'done') return;
    if (ev.type === 'dataRequest') run.pendingData.add(ev.id);
    if (ev.type === 'done') {
      run.state = 'done';
      const child = run.child;
      if (child) {
        child.runs.delete(run.id);
        child.updateRef();
        if (child.state === 'draining' && child.runs.size === 0) child.end('drained');
      }
      if (run.admitted) this.active -= 1;
      if (ev.ok) this.counters.completed += 1;
      else {
        const cls = ev.error.className;
        this.counters.failed[cls] = (this.counters.failed[cls] ?? 0) + 1;
      }
      run.onEvent(ev);
      this.dispatch();
      return;
    }
    run.onEvent(ev);
  }

  onChildReady(child) {
    this.startFailures = 0;
    child.updateRef();
    this.dispatch();
  }

  onChildDraining() {
    this.ensureChildren();
    this.dispatch();
  }

  onChildExit(child, { wasStarting, reason }) {
    this.children.delete(child);
    LIVE.delete(child);
    const why = child.endReason ?? reason;
    if (child.endReason === null) {
      // It ended on its own: a crash (a signal such as SIGSEGV, or V8's fatal OOM).
      this.counters.crashed += 1;
      this.counters.crashReasons[why] = (this.counters.crashReasons[why] ?? 0) + 1;
    } else if (!child.recycledFor && ['memory', 'overdue', 'start-timeout', 'protocol'].includes(child.endReason)) {
      this.counters.recycled[why] = (this.counters.recycled[why] ?? 0) + 1;
    }
    // 'drained' was counted when draining began; 'shutdown' and 'host-exit' are orderly.
    this.retired = addEngineStats(this.retired, child.health && child.health.engine);
    if (this.shut) {
      if (this.children.size === 0) this.onAllExited?.();
      return;
    }
    if (wasStarting) {
      this.startFailures += 1;
      if (this.startFailures >= MAX_START_FAILURES) {
        const tail = child.stderrTail.trim().split('\n').slice(-3).join(' | ');
        const message = `Could not start a sandbox host process (${why})${tail ? `: ${tail}` : ''}`;
        for (const run of this.queue.splice(0)) this.deliver(run, failureEvent('Crashed', message));
        // Try again later, not in a tight loop.
        this.spawnNotBefore = Date.now() + START_RETRY_MS;
        setTimeout(() => this.ensureChildren(), START_RETRY_MS).unref();
        return;
      }
    }
    this.dispatch();
  }

  stats() {
    let engine = this.retired ? { ...this.retired, warm: 0, warming: 0, threads: 0, quarantined: 0 } : null;
    for (const c of this.children) engine = addEngineStats(engine, c.health && c.health.engine, true);
    const running = [...this.children].reduce((n, c) => n + c.runs.size, 0);
    return {
      warm: engine ? engine.warm : 0,
      warming: engine ? engine.warming : 0,
      busy: running,
      queued: this.queue.length,
      completed: this.counters.completed,
      failed: { ...this.counters.failed },
      warmStarts: engine ? engine.warmStarts : 0,
      coldStarts: engine ? engine.coldStarts : 0,
      threads: engine ? engine.threads : 0,
      quarantined: engine ? engine.quarantined : 0,
      processes: {
        live: this.liveChildren().length,
        starting: [...this.children].filter((c) => c.state === 'starting').length,
        draining: [...this.children].filter((c) => c.state === 'draining').length,
        started: this.counters.started,
        crashed: this.counters.crashed,
        recycled: { ...this.counters.recycled },
        crashReasons: { ...this.counters.crashReasons },
        pids: [...this.children].map((c) => c.pid),
        lockdown: [...this.children].find((c) => c.lockdown)?.lockdown ?? null,
      },
    };
  }

  shutdown() {
    if (this.shut) return;
    this.shut = true;
    for (const run of this.queue.splice(0)) this.deliver(run, failureEvent('Aborted', 'The sandbox engine is shut down'));
    for (const c of this.children) {
      if (c.state === 'starting') c.end('shutdown');
      else {
        c.state = 'draining';
        c.endReason = 'shutdown';
        c.send({ type: 'shutdown' });
        // A child that does not exit in time is ended.
        setTimeout(() => c.end('shutdown'), 5000).unref();
      }
    }
  }

  /** Resolves true once every child has exited, false after `timeoutMs` (then kills them). */
  waitIdle(timeoutMs) {
    return new Promise((resolve) => {
      if (this.children.size === 0) return resolve(true);
      const timer = setTimeout(() => {
        for (const c of this.children) c.end('shutdown');
        resolve(false);
      }, timeoutMs);
      this.onAllExited = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }
}

/** Sums child engine stats (counts that are per child add up). */
function addEngineStats(into, s, live = false) {
  if (!s) return into;
  const base = into ?? { warm: 0, warming: 0, threads: 0, quarantined: 0, warmStarts: 0, coldStarts: 0 };
  return {
    warm: base.warm + (live ? s.warm : 0),
    warming: base.warming + (live ? s.warming : 0),
    threads: base.threads + (live ? s.threads : 0),
    quarantined: base.quarantined + (live ? s.quarantined : 0),
    warmStarts: base.warmStarts + s.warmStarts,
    coldStarts: base.coldStarts + s.coldStarts,
  };
}

let exitHookInstalled = false;
/** One 'exit' listener for the whole process (not one per engine): however this
 *  process ends normally, its hosts end with it. (A host also exits when its pipe
 *  closes, and the kernel kills it when this process dies: PDEATHSIG.) */
function endHostsAtExit() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of LIVE) child.end('host-exit');
  });
}

/** Sandbox host processes alive in this host process, over all engines. */
function liveSandboxProcesses() {
  return LIVE.size;
}

module.exports = { ProcessEngine, liveSandboxProcesses, testHooks };
