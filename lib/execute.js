'use strict';
// The one execution path: submit a request to a native engine, serve its host calls
// and data requests on this (the Node main) thread, and settle with a result record.
// runSandbox and SandboxEngine sessions are both built on `execute`.
const { intoSandbox, overMaxMessageBytes, directBytesVersionFor, directStringVersionFor, deserializeInSlices, describeHostError } = require('./bridge');
const { AsyncResource } = require('node:async_hooks');
const { RunContext, callInRun } = require('./run-context');
const { SandboxRuntimeError, errorFromFailure, errorFromThrown } = require('./errors');
const native = require('./native');
const { stripTypes } = require('./source');
const { own, isPlainObject, describeThrown } = require('./own');

const EMPTY_STATS = Object.freeze({ wallTimeMs: 0, cpuTimeMs: 0, heapUsedBytes: 0 });

/** Public stats shape from the native one. */
function statsOf(s) {
  if (!s) return { ...EMPTY_STATS };
  return {
    wallTimeMs: s.wallTimeMs,
    cpuTimeMs: s.cpuTimeMs,
    heapUsedBytes: s.heapUsedBytes,
    heapAtEndBytes: s.heapAtEndBytes,
    hostCalls: s.hostCalls,
    unhandledRejections: s.unhandledRejections,
  };
}

/**
 * Starts a run. Returns `{ done, handle }` where `done` resolves to
 * `{ ok: true, value, stats, logs } | { ok: false, error, stats, logs }` and never rejects.
 *
 * @param {object} engine a NativeEngine (either isolation mode)
 * @param {object} plan a native RunPlan (`planRun` / `EngineSettings.plan`):
 *   every limit is filled in. Its tool policy is enforced natively: only allowed tools
 *   exist in the sandbox, and calls over `maxCallsPerTool` never reach this thread.
 * @param {object} hooks
 * @param {Record<string, Function>} [hooks.handlers] host functions by name
 * @param {(event: object) => void} [hooks.onEvent] started / console / dataRequest
 * @param {(specifier: string, referrer: string) => unknown} [hooks.resolve] the run's
 *   module resolver: answers imports its `modules` map does not hold
 */
function execute(engine, plan, hooks = {}) {
  const handlers = hooks.handlers || {};
  // What capabilities of this run see through currentRun(): its end signal and budgets.
  // Made at the first host call (most runs make none), with the reply limit.
  let ctx = null;
  let maxReply = 0;
  const context = () => {
    if (ctx === null) {
      ctx = new RunContext({ maxPendingHostCallBytes: plan.maxPendingHostCallBytes, maxPendingHostCalls: plan.maxPendingHostCalls });
      maxReply = plan.maxMessageBytes;
    }
    return ctx;
  };
  const endContext = () => {
    if (ctx !== null) ctx._end();
  };
  let resolveDone;
  const done = new Promise((resolve) => {
    resolveDone = resolve;
  });
  let handle;
  let finished = false;

  // A run's `done` comes as arguments (see the addon's `done_args`), its other events as
  // one object each.
  const onNativeEvent = (ev, ok, value, payload, error, wallTimeMs, cpuTimeMs, heapUsedBytes, heapAtEndBytes, hostCalls, logs, unhandledRejections) => {
    if (ev === 'done') {
      finished = true;
      endContext();
      const stats = { wallTimeMs, cpuTimeMs, heapUsedBytes, heapAtEndBytes, hostCalls, unhandledRejections };
      resolveDone(finish(ok, value, payload, error, stats, logs ?? []));
      return;
    }
    switch (ev.type) {
      case 'hostCall':
        serveHostCall(ev);
        break;
      case 'moduleRequest':
        serveModuleRequest(ev);
        break;
      default:
        if (hooks.onEvent) hooks.onEvent(ev);
    }
  };

  const serveHostCall = (ev) => {
    const callId = ev.callId;
    const fn = handlers[ev.name];
    if (typeof fn !== 'function') {
      handle.reject(callId, 'ReferenceError', `${ev.name} is not available`);
      return;
    }
    // Long arguments are built a slice at a time (lib/codec.js); the handler is called
    // once they are, in this turn when that took one slice.
    deserializeInSlices(
      ev.payload,
      false,
      (err, args) => {
        // Built: the handler holds the values, the bytes need not wait for its reply.
        ev.payload = null;
        if (err) handle.reject(callId, 'TypeError', 'host call arguments could not be read');
        else callHandler(ev, fn, args);
      },
      () => finished,
    );
  };

  const callHandler = (ev, fn, args) => {
    // A synchronous handler is answered in this same turn: no microtask hop on the
    // round trip. A thenable is awaited as before.
    let result;
    try {
      result = callInRun(context(), fn, args);
      if (result !== null && (typeof result === 'object' || typeof result === 'function') && typeof result.then === 'function') {
        Promise.resolve(result).then((value) => reply(ev, value), (err) => replyError(ev, err));
        return;
      }
    } catch (err) {
      replyError(ev, err);
      return;
    }
    reply(ev, result);
  };

  // An import the map does not hold: the run's `resolve` answers with a source, or
  // `{ source, specifier? }` (the canonical key its own imports are joined to), or
  // undefined / null for no module. TypeScript is stripped before it is sent.
  const serveModuleRequest = (ev) => {
    const answer = (bytes, error) => {
      if (!finished) handle.answer(ev.id, bytes, error);
    };
    const resolve = hooks.resolve;
    let pending;
    try {
      pending = typeof resolve === 'function' ? callInRun(context(), resolve, [ev.key, ev.referrer]) : undefined;
    } catch (err) {
      answer(undefined, describeHostError(err).message);
      return;
    }
    Promise.resolve(pending)
      .then(async (found) => {
        if (found === undefined || found === null) return answer(native.moduleAnswer(undefined, undefined), undefined);
        let source = found;
        let specifier;
        if (isPlainObject(found)) {
          source = own(found, 'source');
          specifier = own(found, 'specifier');
        }
        if (typeof source !== 'string' || (specifier !== undefined && typeof specifier !== 'string')) {
          return answer(undefined, `it returned ${describeThrown(found)}, not a source string or { source: string, specifier?: string }`);
        }
        if (ev.typescript) source = await stripTypes(source, { language: 'typescript', asyncBody: false, timeoutMs: plan.wallTimeMs });
        // Within maxMessageBytes, as everything the host hands a run (intoSandbox).
        const bytes = native.moduleAnswer(source, specifier);
        if (bytes.length > plan.maxMessageBytes) return answer(undefined, overMaxMessageBytes(`the source of ${ev.key}`, bytes.length, plan.maxMessageBytes).message);
        answer(bytes, undefined);
      })
      .catch((err) => answer(undefined, describeHostError(err).message));
  };

  const reply = (ev, value) => {
    if (finished) return; // the run ended; drop the late reply
    const callId = ev.callId;
    // Big Uint8Arrays and ASCII strings are written by the addon in the serializer's format
    // (see bridge.js); -1: not what it writes after all, serialized as any value.
    let n = -1;
    const bytesVersion = directBytesVersionFor(value);
    const stringVersion = bytesVersion === 0 ? directStringVersionFor(value) : 0;
    if (bytesVersion !== 0) n = handle.fulfillUint8Array(callId, value, bytesVersion, maxReply);
    else if (stringVersion !== 0) n = handle.fulfillAsciiString(callId, value, value.length, stringVersion, maxReply);
    if (n >= 0) {
      if (n > maxReply) {
        const over = overMaxMessageBytes(`${ev.name}'s reply`, n, maxReply);
        handle.reject(callId, over.name, over.message);
      }
      return;
    }
    // Long values are written a slice at a time (lib/codec.js).
    intoSandbox(
      value,
      maxReply,
      `${ev.name}'s reply`,
      (problem, bytes) => {
        if (finished) return;
        if (problem) handle.reject(callId, problem.name, problem.message);
        else handle.fulfill(callId, bytes);
      },
      () => finished,
    );
  };

  const replyError = (ev, err) => {
    if (finished) return;
    const { name, message } = describeHostError(err);
    handle.reject(ev.callId, name, message);
  };

  // Not AsyncResource.bind: up to Node 24 it defines a deprecated `asyncResource`
  // accessor pair on every bound function, a tenth of this thread's CPU per trivial run.
  const scope = new AsyncResource('isolet.run');
  try {
    // Host calls, data requests and the result run in the caller's async context (its
    // AsyncLocalStorage stores), not in that of whoever made the engine: events of all
    // runs arrive through one channel per engine.
    // `started` costs a wake-up of this thread mid-run: asked for only if someone listens.
    const runId = engine.submit(plan, (...args) => scope.runInAsyncScope(onNativeEvent, null, ...args), hooks.onEvent !== undefined);
    handle = new RunRef(engine, runId);
  } catch (err) {
    endContext();
    resolveDone({ ok: false, error: errorFromThrown(err), stats: statsOf(), logs: [] });
    return { done, handle: null };
  }
  return { done, handle };
}

/**
 * A run's host side (replies, data answers, abort), fetched from the addon when first
 * used: most runs never need it, and an addon object per run costs this thread. Once the
 * run's `done` was delivered there is nothing to answer or abort: calls do nothing.
 */
class RunRef {
  constructor(engine, runId) {
    this._engine = engine;
    this._runId = runId;
    this._native = undefined;
  }

  _run() {
    if (this._native === undefined) this._native = this._engine.handleOf(this._runId);
    return this._native;
  }

  fulfill(callId, bytes) {
    this._run()?.fulfill(callId, bytes);
  }

  /** The encoded length, or -1 when `view` is not for this path (see the addon). */
  fulfillUint8Array(callId, view, version, maxBytes) {
    const run = this._run();
    return run ? run.fulfillUint8Array(callId, view, version, maxBytes) : 0;
  }

  fulfillAsciiString(callId, value, chars, version, maxBytes) {
    const run = this._run();
    return run ? run.fulfillAsciiString(callId, value, chars, version, maxBytes) : 0;
  }

  reject(callId, name, message) {
    this._run()?.reject(callId, name, message);
  }

  /** False when no such request is waiting. */
  answer(id, bytes, error) {
    const run = this._run();
    return run ? run.answer(id, bytes, error) : false;
  }

  abort() {
    this._run()?.abort();
  }
}

/**
 * The run's result: `stats` and `logs` are the run's own (made for it alone, in their
 * public shape). A result that is one primitive comes as `value`; others as `payload`, a
 * Buffer the addon made for this run alone, built here: a long one a slice at a time
 * (lib/codec.js), so the record is then a Promise of it.
 */
function finish(ok, value, payload, error, stats, logs) {
  if (!ok) return { ok: false, error: errorFromFailure(error), stats, logs };
  if (payload === undefined) return { ok: true, value, stats, logs };
  let record;
  let settle = null;
  deserializeInSlices(payload, true, (err, built) => {
    if (err) {
      const failure = new SandboxRuntimeError(`The result could not be copied out of the sandbox: ${err.message}`);
      record = { ok: false, error: failure, stats, logs };
    } else {
      record = { ok: true, value: built, stats, logs };
    }
    if (settle !== null) settle(record);
  });
  if (record !== undefined) return record;
  return new Promise((resolve) => {
    settle = resolve;
  });
}

module.exports = { execute, statsOf, EMPTY_STATS };
