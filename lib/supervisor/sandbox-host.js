'use strict';
// Entry script of a sandbox host process (isolation: 'process'). The parent forks it
// with `process.execPath`; it loads the same addon and runs isolates in thread mode.
// Run traffic (runs, their events, replies, aborts) does not pass through this script:
// it travels as frames over the extra pipe at RUN_CHANNEL_FD, read and written by the
// addon's own threads (src/supervisor/channel.rs). This script only speaks the IPC
// channel: start, ready, health, shutdown. It serves no capability itself: host calls,
// data requests and their answers all travel to the parent, which decides.
// Everything it will ever need is required here, before lock-down: afterwards it can
// open no file (so no further `require`), start no process and open no socket.
const native = require('../native');

/** The parent's extra pipe (`stdio[4]` of its fork). */
const RUN_CHANNEL_FD = 4;

let engine = null;

function send(message) {
  // The parent is gone (or the channel closed): nothing left to serve.
  if (!process.connected) process.exit(0);
  process.send(message);
}

/** A Buffer view of a Uint8Array that came over the channel (napi wants a Buffer). */
function asBuffer(u8) {
  return Buffer.isBuffer(u8) ? u8 : Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
}

function health() {
  const p = native.processStats();
  return { stuck: p.quarantinedThreads, threads: p.liveThreads, engine: engine ? engine.stats() : null };
}

let healthTimer = null;
/** Reports the engine's counts shortly after they change (warm isolates come and go
 *  in the background), at most once per HEALTH_DELAY_MS. */
const HEALTH_DELAY_MS = 20;
function reportHealthSoon() {
  if (healthTimer !== null) return;
  healthTimer = setTimeout(() => {
    healthTimer = null;
    send({ type: 'health', health: health() });
  }, HEALTH_DELAY_MS);
}

async function start(msg) {
  engine = new native.NativeEngine(new native.EngineSettings(msg.options));
  try {
    // This process compiles each module once; its isolates share the compiled code.
    await engine.setWasmModules(msg.wasmModules.map((m) => ({ name: m.name, bytes: asBuffer(m.bytes) })));
  } catch (err) {
    send({ type: 'invalid', message: String(err && err.message) });
    return;
  }
  // The channel's threads start before lock-down; afterwards they only read and
  // write the pipe they already hold.
  native.startHostChannel(engine, RUN_CHANNEL_FD);
  // From here on this process can start no process, open no file or socket (Linux;
  // elsewhere the status says why not). See docs/process-isolation.md.
  const lockdown = native.lockDown(msg.parentPid);
  engine.warmUp();
  send({ type: 'ready', pid: process.pid, lockdown, health: health() });
  // Warm isolates are made on their own threads: report once they are likely up.
  setTimeout(reportHealthSoon, 50);
  setTimeout(reportHealthSoon, 250);
}

async function shutdown() {
  if (engine) {
    engine.shutdown();
    await engine.waitIdle(5000);
  }
  // The aborted runs' events are written (by their threads, before they ended); exit
  // once the goodbye is.
  if (!process.connected) process.exit(0);
  process.send({ type: 'bye' }, () => process.exit(0));
}

process.on('message', (msg) => {
  switch (msg.type) {
    case 'start':
      return start(msg);
    case 'shutdown':
      return shutdown();
    default:
      return undefined;
  }
});
// An orphaned host exits at once (the parent-death signal covers a parent killed hard).
process.on('disconnect', () => process.exit(0));
