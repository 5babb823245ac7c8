'use strict';
// Entry script of a sandbox host process (isolation: 'process'). The parent forks it
// with `process.execPath`; it loads the same addon, runs isolates in thread mode and
// relays every run event over the IPC channel. It serves no capability itself: host
// calls, data requests and their answers all travel to the parent, which decides.
// Everything it will ever need is required here, before lock-down: afterwards it can
// open no file (so no further `require`), start no process and open no socket.
const native = require('../native');
const { errorFromThrown } = require('../errors');

let engine = null;
/** Run id (the parent's) -> native RunHandle. */
const runs = new Map();

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

function onRunEvent(id, ev) {
  if (ev.type === 'done') {
    runs.delete(id);
    send({ type: 'event', id, ev, health: health() });
    reportHealthSoon();
    return;
  }
  send({ type: 'event', id, ev });
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
  // From here on this process can start no process, open no file or socket (Linux;
  // elsewhere the status says why not). See docs/process-isolation.md.
  const lockdown = native.lockDown(msg.parentPid);
  engine.warmUp();
  send({ type: 'ready', pid: process.pid, lockdown, health: health() });
  // Warm isolates are made on their own threads: report once they are likely up.
  setTimeout(reportHealthSoon, 50);
  setTimeout(reportHealthSoon, 250);
}

function submit(msg) {
  const request = msg.request;
  if (request.dataValues) {
    // No prototype: a key named `__proto__` is stored like any other.
    const values = Object.create(null);
    for (const [k, v] of Object.entries(request.dataValues)) values[k] = asBuffer(v);
    request.dataValues = values;
  }
  try {
    const handle = engine.submit(request, (ev) => onRunEvent(msg.id, ev));
    runs.set(msg.id, handle);
  } catch (err) {
    // The parent planned the run; a binding that throws keeps its kind.
    const thrown = errorFromThrown(err);
    const error = { className: thrown.name, code: thrown.code, message: thrown.message };
    send({ type: 'event', id: msg.id, ev: { type: 'done', ok: false, error }, health: health() });
  }
}

async function shutdown() {
  if (engine) {
    engine.shutdown();
    await engine.waitIdle(5000);
  }
  // Exit once everything sent so far (the aborted runs' events) is written.
  if (!process.connected) process.exit(0);
  process.send({ type: 'bye' }, () => process.exit(0));
}

process.on('message', (msg) => {
  switch (msg.type) {
    case 'start':
      return start(msg);
    case 'run':
      return submit(msg);
    case 'fulfill':
      return runs.get(msg.id)?.fulfill(msg.callId, asBuffer(msg.bytes));
    case 'reject':
      return runs.get(msg.id)?.reject(msg.callId, msg.name, msg.message);
    case 'answer':
      // The parent checked the id; a run that ended meanwhile simply drops it.
      return runs.get(msg.id)?.answer(msg.answerId, msg.bytes ? asBuffer(msg.bytes) : undefined, msg.error);
    case 'abort':
      return runs.get(msg.id)?.abort();
    case 'shutdown':
      return shutdown();
    default:
      return undefined;
  }
});
// An orphaned host exits at once (the parent-death signal covers a parent killed hard).
process.on('disconnect', () => process.exit(0));
