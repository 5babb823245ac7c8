'use strict';
// SandboxEngine (the @coda/sandbox seed): warm pool, concurrency cap and queue,
// sessions as async iterables of events, data requests, limits, tool policy, WASM.
const native = require('./native');
const { execute } = require('./execute');
const { intoSandbox, serializeInSlices } = require('./bridge');
const { normalizeTools, useWebFetch } = require('./tools');
const { preparePlan, returnHint } = require('./source');
const { remapResult } = require('./positions');
const { SandboxValidationError, SandboxAbortedError, errorOfKind, errorFromThrown } = require('./errors');
const { own, isPlainObject, describeThrown } = require('./own');
const { readOwn, readEntries, readOptions } = require('./read-options');

// Every default below is isolet-core's (its option tables), read once at load.
const DEFAULTS = native.optionDefaults();

const DEFAULT_MEMORY_MB = DEFAULTS.engineMemoryMb;

/** CPU, memory and wall-clock limits of one execution. */
const DEFAULT_ISOLATE_LIMITS = Object.freeze({
  memoryMb: DEFAULTS.isolateLimits.memoryMb,
  cpuTimeMs: DEFAULTS.isolateLimits.cpuTimeMs,
  wallTimeMs: DEFAULTS.isolateLimits.wallTimeMs,
});

/** Size and count limits on what crosses the bridge, per execution. */
const DEFAULT_BRIDGE_LIMITS = Object.freeze({
  maxMessageBytes: DEFAULTS.bridgeLimits.maxMessageBytes,
  maxMessages: DEFAULTS.bridgeLimits.maxMessages,
  maxOutputBytes: DEFAULTS.bridgeLimits.maxOutputBytes,
  maxLogEntries: DEFAULTS.bridgeLimits.maxLogEntries,
  maxLogBytes: DEFAULTS.bridgeLimits.maxLogBytes,
  maxPendingHostCallBytes: DEFAULTS.bridgeLimits.maxPendingHostCallBytes,
  maxPendingHostCalls: DEFAULTS.bridgeLimits.maxPendingHostCalls,
  maxOutputValues: DEFAULTS.bridgeLimits.maxOutputValues,
  maxMessageValues: DEFAULTS.bridgeLimits.maxMessageValues,
  maxPendingHostCallValues: DEFAULTS.bridgeLimits.maxPendingHostCallValues,
});

/** No tools unless a request's policy names them. */
const DEFAULT_TOOL_POLICY = Object.freeze({ allowedTools: Object.freeze([]) });

/** `obj` with `key` replaced by `value`, when `obj` is an object that has `key` (own). */
function withShaped(obj, key, value) {
  return isPlainObject(obj) && own(obj, key) !== undefined ? { ...obj, [key]: value } : obj;
}

function toBytes(source) {
  return source instanceof ArrayBuffer ? Buffer.from(source) : Buffer.from(source.buffer, source.byteOffset, source.byteLength);
}

/**
 * A session: the async iterable of one execution's events. Events are buffered, so a
 * consumer that starts late, or a second consumer, still sees every event.
 */
class SandboxSession {
  constructor(requestId, clock) {
    this.requestId = requestId;
    this._clock = clock;
    this._events = [];
    this._waiters = [];
    this._closed = false;
    this._handle = null;
    this._aborted = false;
    this._engine = null;
    /** Data requests emitted and not answered yet (their ids). */
    this._asked = new Set();
    let resolveDone;
    /** Resolves with the final `result` or `error` event. */
    this.done = new Promise((r) => {
      resolveDone = r;
    });
    this._resolveDone = resolveDone;
  }

  _emit(event) {
    if (this._closed) return;
    let at;
    try {
      at = this._clock();
    } catch {
      at = Date.now(); // a clock (deps.clock) that throws must not keep an event from its session
    }
    const full = { ...event, requestId: this.requestId, at };
    if (full.type === 'dataRequest') this._asked.add(full.id);
    this._events.push(full);
    if (full.type === 'result' || full.type === 'error') {
      this._closed = true;
      this._resolveDone(full);
    }
    const waiters = this._waiters;
    this._waiters = [];
    for (const w of waiters) w();
  }

  [Symbol.asyncIterator]() {
    let index = 0;
    const session = this;
    return {
      async next() {
        while (index >= session._events.length) {
          if (session._closed) return { value: undefined, done: true };
          await new Promise((r) => session._waiters.push(r));
        }
        return { value: session._events[index++], done: false };
      },
      async return() {
        index = Infinity;
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /**
   * Answers a `dataRequest` event. Throws SandboxValidationError for an unknown id, and for
   * a value that cannot be copied or is too big. A big value is written a slice at a time
   * (lib/codec.js) so Node's thread is never held long: if it is not written within the
   * first slice, respond returns at once and a failure found later reaches the sandbox as
   * the read's error instead.
   */
  respond(id, value) {
    if (!this._asked.has(id)) this._answer(id, undefined, undefined);
    const max = this._maxMessageBytes;
    let now = true;
    let thrown;
    intoSandbox(value, max, `respond(${id}): value`, (problem, bytes) => {
      if (now) {
        if (problem) thrown = new SandboxValidationError(problem.message);
        else this._answer(id, bytes, undefined);
        return;
      }
      // Written in later turns: the request is answered (or failed) once it is.
      if (this._closed) return;
      try {
        if (problem) this._answer(id, undefined, problem.message);
        else this._answer(id, bytes, undefined);
      } catch {
        // The run ended meanwhile: nothing waits for it.
      }
    });
    now = false;
    if (thrown !== undefined) throw thrown;
    // Being written: answered (once) when it is.
    this._asked.delete(id);
  }

  /** Fails a `dataRequest`: the read throws an Error with `message` in the sandbox. */
  reject(id, message = 'data request rejected') {
    this._answer(id, undefined, String(message));
  }

  _answer(id, bytes, error) {
    this._asked.delete(id);
    if (!this._handle || !this._handle.answer(id, bytes, error)) {
      throw new SandboxValidationError(`no pending data request with id ${id} in session ${this.requestId}`);
    }
  }

  /** Ends the execution (running or queued) with SandboxAbortedError. */
  abort() {
    this._aborted = true;
    if (this._handle) this._handle.abort();
  }
}

/** Sessions named by isolet because `deps.idGenerator` threw. */
let unnamedSessions = 0;

class SandboxEngine {
  /**
   * @param {object} config SandboxEngineConfig
   * @param {object} [deps] { clock?: () => number, idGenerator?: () => string, logger? }
   */
  constructor(config, deps = {}) {
    if (!isPlainObject(deps)) throw new SandboxValidationError('SandboxEngine deps must be an object');
    // Read once: functions, described tools and namespaces, by the name the sandbox calls.
    // Every option is an own property: a key on Object.prototype is never one (lib/own.js),
    // and one whose getter throws is a SandboxValidationError naming it.
    const read = readOptions(config, 'SandboxEngine config', '');
    this._tools = normalizeTools(own(read, 'tools'), 'tools');
    try {
      // Every option is checked natively, under its own name, once.
      this._settings = new native.EngineSettings(withShaped(read, 'tools', this._tools.names));
    } catch (err) {
      throw errorFromThrown(err);
    }
    this._isolation = this._settings.isolation;
    // Checked natively above; the default of the engine's sandboxes too (openSandbox).
    this._unhandledRejections = own(read, 'unhandledRejections');
    // Checked natively above: an own array of own { name, source } entries.
    const wasmModules = own(read, 'wasmModules') ?? [];
    this._wasmConfig = [];
    for (let i = 0; i < wasmModules.length; i++) {
      const m = readOwn(wasmModules, i, `wasmModules[${i}]`);
      const source = readOwn(m, 'source', `wasmModules[${i}].source`);
      this._wasmConfig.push({ name: readOwn(m, 'name', `wasmModules[${i}].name`), bytes: toBytes(source) });
    }
    this._clock = readOwn(deps, 'clock', 'deps.clock') ?? Date.now;
    let n = 0;
    this._nextId = readOwn(deps, 'idGenerator', 'deps.idGenerator') ?? (() => `session_${++n}`);
    this._logger = readOwn(deps, 'logger', 'deps.logger') ?? null;
    this._native = null;
    this._state = 'created';
  }

  /** Compiles the WASM modules once and warms the isolate pool. Idempotent. */
  async init() {
    if (this._state === 'ready') return;
    if (this._state === 'shutdown') throw new SandboxAbortedError('The sandbox engine is shut down');
    for (const m of this._wasmConfig) {
      try {
        // Well-formed, no imports, memory within a run's budget (isolet-core wasm);
        // checked here whatever the isolation, compiled once by setWasmModules.
        native.checkWasmModule(m.name, m.bytes, this._settings.memoryMb);
      } catch (err) {
        throw new SandboxValidationError(err.message);
      }
    }
    this._native = new native.NativeEngine(this._settings);
    try {
      await this._native.setWasmModules(this._wasmConfig);
    } catch (err) {
      throw new SandboxValidationError(err.message);
    }
    try {
      // Thread isolation: runs the prelude once here; process isolation: each host does
      // as it starts, and ready() rejects.
      await this._native.checkPrelude();
    } catch (err) {
      throw new SandboxValidationError(err.message);
    }
    this._native.warmUp();
    // Process isolation: ready means the sandbox host processes are up.
    try {
      await this._native.ready();
    } catch (err) {
      throw new SandboxValidationError(err.message);
    }
    this._state = 'ready';
    this._log('info', `isolet engine ready (${this._isolation} isolation): ${this._settings.warmPoolSize} warm, ${this._settings.maxConcurrentIsolates} concurrent`);
  }

  /** Starts an execution; returns its session at once (never throws). */
  submit(request) {
    // Read once: a getter or Proxy trap that throws fails this session, typed, naming
    // the option; submit itself never throws.
    let read;
    let unreadable;
    try {
      read = readOptions(request, 'request', 'request');
    } catch (err) {
      unreadable = err;
    }
    const givenId = isPlainObject(read) ? own(read, 'requestId') : undefined;
    let requestId = typeof givenId === 'string' ? givenId : undefined;
    if (requestId === undefined) {
      try {
        requestId = this._nextId();
      } catch (err) {
        requestId = `session_${++unnamedSessions}`;
        unreadable ??= new SandboxValidationError(`deps.idGenerator threw ${describeThrown(err)}`);
      }
    }
    const session = new SandboxSession(requestId, this._clock);
    const fail = (error) => {
      session._emit({ type: 'error', error, message: error.message, stats: { wallTimeMs: 0, cpuTimeMs: 0, heapUsedBytes: 0 } });
      return session;
    };
    if (this._state === 'shutdown') return fail(new SandboxAbortedError('The sandbox engine is shut down'));
    if (this._state !== 'ready') return fail(errorOfKind('NotReady', 'SandboxEngine.init() has not completed'));
    if (unreadable !== undefined) return fail(unreadable);
    // `data` values are written first, big ones a slice at a time: the run is planned and
    // queued once they are (in this turn when they took one slice).
    let sync = true;
    let dataValues;
    serializeData(read, (err, values) => {
      if (err !== null) {
        fail(errorFromThrown(err));
        return;
      }
      if (sync) {
        dataValues = values;
        return;
      }
      if (session._aborted) fail(new SandboxAbortedError('Execution was aborted before it started'));
      else if (this._state === 'shutdown') fail(new SandboxAbortedError('The sandbox engine is shut down'));
      else this._plannedStart(session, read, values);
    });
    sync = false;
    if (dataValues !== undefined) this._plannedStart(session, read, dataValues);
    return session;
  }

  /** Plans and starts `read` (a request whose `data` values are `dataValues`) on `session`. */
  _plannedStart(session, read, dataValues) {
    const fail = (error) => {
      session._emit({ type: 'error', error, message: error.message, stats: { wallTimeMs: 0, cpuTimeMs: 0, heapUsedBytes: 0 } });
      return session;
    };
    let planned;
    try {
      planned = this._plan(read, dataValues);
    } catch (err) {
      return fail(errorFromThrown(err));
    }
    const { plan, handlers, resolve } = planned;
    session._maxMessageBytes = plan.maxMessageBytes;
    // A request's code is an async body: an undefined output may get the return hint.
    const body = plan.mode === 'asyncBody' ? { code: own(read, 'code'), language: plan.language, timeoutMs: plan.wallTimeMs } : null;
    session._emit({ type: 'status', status: 'queued', message: 'queued' });
    if (!plan.stripsTypes) {
      this._start(session, plan, handlers, resolve, [], body);
      return session;
    }
    // Large TypeScript is prepared on a worker thread, within the run's wall-clock limit.
    preparePlan(plan).then(
      (map) => {
        if (session._aborted) return fail(new SandboxAbortedError('Execution was aborted before it started'));
        if (this._state === 'shutdown') return fail(new SandboxAbortedError('The sandbox engine is shut down'));
        this._start(session, plan, handlers, resolve, map, body);
      },
      (err) => fail(errorFromThrown(err)),
    );
    return session;
  }

  /**
   * `map`: where the code came from, when compiling TypeScript moved it (lib/positions.js);
   * `body`: the async body's code, language and time limit, for the return hint.
   */
  _start(session, plan, handlers, resolve, map = [], body = null) {
    const { done, handle } = execute(this._native, plan, {
      handlers,
      resolve,
      onEvent: (ev) => {
        if (ev.type === 'started') session._emit({ type: 'status', status: 'started', message: 'started' });
        else if (ev.type === 'console') session._emit({ type: 'status', status: 'console', level: ev.level, message: ev.message });
        else if (ev.type === 'dataRequest') session._emit({ type: 'dataRequest', id: ev.id, key: ev.key });
      },
    });
    session._handle = handle;
    if (session._aborted && handle) handle.abort();
    done.then(async (ended) => {
      const r = remapResult(ended, map);
      if (body !== null && r.ok && r.value === undefined) {
        const hint = await returnHint(body.code, body.language, body.timeoutMs);
        if (hint !== null) r.logs = [...r.logs, hint];
      }
      session._emit({ type: 'status', status: 'finished', message: r.ok ? 'finished' : `failed: ${r.error.name}` });
      if (r.ok) session._emit({ type: 'result', data: r.value, stats: r.stats, logs: r.logs });
      else session._emit({ type: 'error', error: r.error, message: r.error.message, stats: r.stats, logs: r.logs });
    });
  }

  /**
   * Opens a persistent sandbox on this engine (see createSandbox). An idle sandbox holds
   * no isolate slot; each of its runs takes one while it runs. `options` are
   * createSandbox's; its isolation is the engine's. Rejects with a typed error for bad
   * options, before init(), after shutdown, or past `maxOpenSandboxes` (or its tenant's
   * `maxOpenSandboxesPerTenant`).
   */
  async openSandbox(options = undefined) {
    if (this._state === 'shutdown') throw new SandboxAbortedError('The sandbox engine is shut down');
    if (this._state !== 'ready') throw errorOfKind('NotReady', 'SandboxEngine.init() has not completed');
    // The engine's unhandledRejections, unless the sandbox's options say otherwise.
    let given = options;
    if (this._unhandledRejections !== undefined && isPlainObject(options)) {
      try {
        if (!Object.hasOwn(options, 'unhandledRejections')) given = { ...options, unhandledRejections: this._unhandledRejections };
      } catch {
        given = options; // a read that throws is a typed error of createSandbox's checks
      }
    }
    return require('./sandbox').openOn(this._native, given);
  }

  /**
   * Stops accepting work, aborts queued and running sessions (each ends with a
   * SandboxAbortedError event), disposes every isolate and waits for its thread.
   */
  async shutdown() {
    if (this._state === 'shutdown') return;
    const nativeEngine = this._native;
    this._state = 'shutdown';
    if (!nativeEngine) return;
    nativeEngine.shutdown();
    const idle = await nativeEngine.waitIdle(10000);
    this._log(idle ? 'info' : 'warn', idle ? 'isolet engine shut down' : 'isolet engine shutdown timed out waiting for isolate threads');
  }

  /** IsolateStats: warm, busy, queued, completed and failed (by error class) counts. */
  stats() {
    if (!this._native) {
      const codeCache = { hits: 0, misses: 0, rejected: 0, evictions: 0, entries: 0, bytes: 0, budgetBytes: 0 };
      const sandboxes = { open: 0, maxOpenSandboxes: this._settings.maxOpenSandboxes, maxOpenSandboxesPerTenant: this._settings.maxOpenSandboxesPerTenant };
      return { warm: 0, warming: 0, busy: 0, queued: 0, completed: 0, failed: {}, warmStarts: 0, coldStarts: 0, threads: 0, quarantined: 0, isolation: this._isolation, tenants: [], codeCache, sandboxes, queueExpired: 0 };
    }
    const s = this._native.stats();
    const tenants = s.tenants.map((t) => ({ ...t, tenant: t.tenant ?? null, failed: { ...t.failed } }));
    return { ...s, failed: { ...s.failed }, isolation: this._isolation, tenants, codeCache: { ...s.codeCache }, sandboxes: { ...s.sandboxes } };
  }

  /**
   * Checks a request natively (its limits over the engine's defaults, its tool policy
   * over the engine's tools) and returns the run's plan and host functions. Only type
   * shaping happens here: tools become names and handlers, `data` values are serialized,
   * TypeScript is stripped.
   */
  _plan(request, dataValues) {
    const requestTools = normalizeTools(isPlainObject(request) ? own(request, 'tools') : undefined, 'request.tools');
    let shaped = withShaped(request, 'tools', requestTools.names);
    if (dataValues !== null) shaped = { ...shaped, data: dataValues };
    // The values are checked natively with the rest and copied into the plan once.
    const plan = this._settings.plan(shaped, dataValues ?? undefined);
    const merged =
      requestTools.names.length === 0 ? this._tools.handlers : Object.assign(Object.create(null), this._tools.handlers, requestTools.handlers);
    const handlers = useWebFetch(plan, merged, requestTools.webFetch ?? this._tools.webFetch);
    // Checked natively to be a function (or absent); called by execute for imports.
    const resolve = isPlainObject(request) ? own(request, 'resolve') : undefined;
    return { plan, handlers, resolve };
  }

  _log(level, message) {
    if (this._logger && typeof this._logger[level] === 'function') this._logger[level](message);
  }
}

/**
 * Serializes a request's `data` values (see serializeInSlices), one after another:
 * `done(null, values)` (a prototype-less object of Buffers; null when the request has no
 * `data` object) or `done(error)`; at once when all took one slice.
 */
function serializeData(request, done) {
  const data = isPlainObject(request) ? own(request, 'data') : undefined;
  if (!isPlainObject(data)) {
    done(null, null);
    return;
  }
  let entries;
  try {
    entries = readEntries(data, 'request.data');
  } catch (err) {
    done(err);
    return;
  }
  // No prototype: a key named `__proto__` is stored like any other.
  const values = Object.create(null);
  let at = 0;
  const next = () => {
    while (at < entries.length) {
      const [key, value] = entries[at++];
      let sync = true;
      let pending = true;
      let failed = null;
      // The native plan checks sizes; this only caps what is written before it does.
      serializeInSlices(value, MAX_DATA_VALUE_BYTES, (err, bytes, length) => {
        pending = false;
        if (err) failed = new SandboxValidationError(`request.data.${key} cannot be copied into the sandbox: ${err.message}`);
        else if (bytes === null) failed = new SandboxValidationError(`request.data.${key} is ${length} bytes, over the most a run can be given (${MAX_DATA_VALUE_BYTES})`);
        else values[key] = bytes;
        if (sync) return;
        if (failed !== null) done(failed);
        else next();
      });
      sync = false;
      // Still being written: continues from its callback.
      if (pending) return;
      if (failed !== null) {
        done(failed);
        return;
      }
    }
    done(null, values);
  };
  next();
}

/** The most bytes one `data` value may be written to (1 GiB, the byte options' range). */
const MAX_DATA_VALUE_BYTES = 1 << 30;

module.exports = {
  SandboxEngine,
  SandboxSession,
  DEFAULT_MEMORY_MB,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  DEFAULT_TOOL_POLICY,
};
