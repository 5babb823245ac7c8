'use strict';
// A compromised sandbox host, for process-channel.spec.ts: the supervisor is pointed at
// this script instead of lib/supervisor/sandbox-host.js. The first host started for a
// test (it claims `<ISOLET_TEST_EVIL_DIR>/claimed`) answers the start like a real host
// (a `ready` frame), then answers its first run with what `<dir>/mode` says; every later
// host is the real one, so the supervisor's other hosts and the replacement serve as usual.
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const dir = process.env.ISOLET_TEST_EVIL_DIR;
let evil = false;
try {
  fs.mkdirSync(path.join(dir, 'claimed'));
  evil = true;
} catch {
  // another host claimed it: be a real one
}
if (!evil) {
  require(path.join(__dirname, '..', '..', 'lib', 'supervisor', 'sandbox-host.js'));
} else {
  const mode = fs.readFileSync(path.join(dir, 'mode'), 'utf8').trim();
  const channel = new net.Socket({ fd: 3, readable: true, writable: true });
  const KIND_DONE = 20;
  const KIND_RUN = 1;
  const KIND_CONSOLE = 17;
  const KIND_HOST_CALL = 18;
  const KIND_HEALTH = 21;
  const KIND_START = 6;
  const KIND_READY = 22;
  const v8 = require('node:v8');
  const header = (kind, runId, len) => {
    const h = Buffer.alloc(16);
    h[0] = kind;
    h.writeUInt32LE(runId, 4);
    h.writeUInt32LE(len >>> 0, 12);
    return h;
  };
  let seen = Buffer.alloc(0);
  // WireHealth (crates/isolet-core/src/frame.rs): 6 u32 and 2 u64 counts, then the code
  // cache's 7 u64 counters.
  const HEALTH_BYTES = 40 + 56;
  // WireStats: 4 f64, then host calls and unhandled rejections (u32 each).
  const STATS_BYTES = 32 + 8;
  let started = false;
  let answered = false;
  channel.on('data', (chunk) => {
    if (answered) return;
    seen = Buffer.concat([seen, chunk]);
    if (!started) {
      // The start frame: answer it with a ready frame (pid, no lock-down, zero counts).
      if (seen.length < 16 || seen.length < 16 + seen.readUInt32LE(12)) return;
      if (seen[0] !== KIND_START) process.exit(3);
      const startLen = 16 + seen.readUInt32LE(12);
      seen = seen.subarray(startLen);
      started = true;
      const body = Buffer.alloc(4 + 3 + 1 + 4 + 4 + HEALTH_BYTES);
      body.writeUInt32LE(process.pid, 0);
      channel.write(Buffer.concat([header(KIND_READY, 0, body.length), body]));
    }
    if (seen.length < 16) return;
    answered = true;
    const runId = seen.readUInt32LE(4);
    fs.writeFileSync(path.join(dir, 'answered'), String(process.pid));
    if (mode === 'huge') {
      // Claims a 4 GB frame, then streams garbage for as long as it lives.
      channel.write(header(KIND_DONE, runId, 0xfffffff0));
      const junk = Buffer.alloc(1 << 20, 0xab);
      const pump = () => {
        while (channel.write(junk));
        channel.once('drain', pump);
      };
      pump();
    } else if (mode === 'garbage') {
      // A frame of the right length whose payload is no `done`.
      channel.write(Buffer.concat([header(KIND_DONE, runId, 64), Buffer.alloc(64, 0xff)]));
    } else if (mode === 'big-garbage') {
      // Just under the run's frame limit, still no `done`: buffered once, then refused.
      const len = 16 * 1024 * 1024;
      channel.write(header(KIND_DONE, runId, len));
      channel.write(Buffer.alloc(len, 0x5a));
    } else if (mode === 'other-run') {
      // A frame for a run this host was never given.
      channel.write(header(KIND_DONE, runId + 1000, 0));
    } else if (mode === 'parent-kind') {
      // A kind only the parent sends.
      channel.write(header(KIND_RUN, runId, 0));
    } else if (mode === 'bad-kind') {
      channel.write(header(200, runId, 0));
    } else if (mode === 'console-flood') {
      // More console entries than the run's maxLogEntries (1000 by default) keeps.
      const text = Buffer.from('hello');
      const body = Buffer.alloc(5);
      body.writeUInt32LE(text.length, 1);
      const one = Buffer.concat([header(KIND_CONSOLE, runId, 5 + text.length), body, text]);
      channel.write(Buffer.concat(Array.from({ length: 1001 }, () => one)));
    } else if (mode === 'log-flood') {
      // A well-formed `done` whose log list claims 3 million empty entries (5 bytes each,
      // 15 MB: under the frame limit), far over the run's maxLogEntries (1000).
      const n = 3000000;
      const result = v8.serialize(42);
      const fixed = Buffer.alloc(STATS_BYTES + HEALTH_BYTES + 4);
      fixed.writeUInt32LE(n, STATS_BYTES + HEALTH_BYTES);
      const entries = Buffer.alloc(5 * n); // level 0, empty message
      const tail = Buffer.concat([Buffer.from([1]), result]);
      const len = fixed.length + entries.length + tail.length;
      channel.write(Buffer.concat([header(KIND_DONE, runId, len), fixed, entries, tail]));
    } else if (mode === 'sparse-result') {
      // A well-formed `done` whose 17-byte result is an array of length 3e7: the real
      // host's isolate would have refused it (maxOutputValues); built, it is 240 MB.
      const a = [];
      a.length = 3e7;
      a[0] = 1;
      const result = v8.serialize(a);
      const fixed = Buffer.alloc(STATS_BYTES + HEALTH_BYTES + 4); // stats, health, no log entries
      const tail = Buffer.concat([Buffer.from([1]), result]);
      channel.write(Buffer.concat([header(KIND_DONE, runId, fixed.length + tail.length), fixed, tail]));
    } else if (mode === 'value-calls') {
      // Five calls to a tool that never answers, each with a 22-byte argument of 8,000,000
      // slots: each within maxMessageValues (8,388,608), together past
      // maxPendingHostCallValues (33,554,432), which the real host's isolate would refuse.
      const name = Buffer.from('hang');
      const slots = [];
      slots.length = 8000000;
      slots[0] = 1;
      const args = v8.serialize([slots]);
      const len = Buffer.alloc(4);
      len.writeUInt32LE(name.length);
      const frames = [];
      for (let i = 1; i <= 5; i++) {
        const h = header(KIND_HOST_CALL, runId, 4 + name.length + args.length);
        h.writeUInt32LE(i, 8);
        frames.push(h, len, name, args);
      }
      channel.write(Buffer.concat(frames));
    } else if (mode === 'sandbox-closed-flood') {
      // sandboxClosed frames (kind 27) for sandboxes it was never given, at pipe speed.
      const reason = Buffer.from('closed');
      const body = Buffer.alloc(4 + reason.length);
      body.writeUInt32LE(reason.length, 0);
      reason.copy(body, 4);
      const one = Buffer.concat([header(27, 7, body.length), body]);
      channel.write(Buffer.concat(Array.from({ length: 20000 }, () => one)));
    } else if (mode === 'health-flood') {
      // Health frames (run id 0) at pipe speed: more than a host ever reports.
      const one = Buffer.concat([header(KIND_HEALTH, 0, HEALTH_BYTES), Buffer.alloc(HEALTH_BYTES)]);
      channel.write(Buffer.concat(Array.from({ length: 20000 }, () => one)));
    } else if (mode === 'pending-flood') {
      // 129 calls of a tool whose handler never answers: within maxMessages (1000), over
      // maxPendingHostCalls (128), which the real host's isolate would have refused.
      const name = Buffer.from('hang');
      const args = v8.serialize([]);
      const len = Buffer.alloc(4);
      len.writeUInt32LE(name.length);
      const frames = [];
      for (let i = 1; i <= 129; i++) {
        const h = header(KIND_HOST_CALL, runId, 4 + name.length + args.length);
        h.writeUInt32LE(i, 8);
        frames.push(h, len, name, args);
      }
      channel.write(Buffer.concat(frames));
    } else if (mode === 'call-flood') {
      // More host calls than the run's maxMessages (1000 by default) allows.
      const name = Buffer.from('nope');
      const args = v8.serialize([]);
      const len = Buffer.alloc(4);
      len.writeUInt32LE(name.length);
      const frames = [];
      for (let i = 1; i <= 1001; i++) {
        const h = header(KIND_HOST_CALL, runId, 4 + name.length + args.length);
        h.writeUInt32LE(i, 8);
        frames.push(h, len, name, args);
      }
      channel.write(Buffer.concat(frames));
    }
  });
  // The parent gone: the channel ends.
  channel.on('end', () => process.exit(0));
  channel.on('error', () => process.exit(0));
}
