'use strict';
// SandboxEngine (the @coda/sandbox seed): warm pool, concurrency cap and queue,
// sessions as async iterables of events, data requests, limits, tool policy, WASM.
const native = require('./native');
const { execute } = require('./execute');
const { serialize } = require('./bridge');
const { createBackend, checkIsolation, DEFAULT_ISOLATION, DEFAULT_PROCESSES } = require('./backend');
const { normalizeTools } = require('./tools');
const { checkLanguage, toJavaScript } = require('./typescript');
const {
  SandboxValidationError,
  SandboxAbortedError,
  SandboxError,
} = require('./errors');

const LIMITS = native.defaults();

const DEFAULT_MEMORY_MB = LIMITS.engineMemoryMb;

/** CPU, memory and wall-clock limits of one execution. */
const DEFAULT_ISOLATE_LIMITS = Object.freeze({
  memoryMb: DEFAULT_MEMORY_MB,
  cpuTimeMs: 5000,
  wallTimeMs: 30000,
});

/** Size and count limits on what crosses the bridge, per execution. */
const DEFAULT_BRIDGE_LIMITS = Object.freeze({
  maxMessageBytes: LIMITS.maxMessageBytes,
  maxMessages: LIMITS.maxMessages,
  maxOutputBytes: LIMITS.maxOutputBytes,
  maxLogEntries: LIMITS.maxLogEntries,
  maxLogBytes: LIMITS.maxLogBytes,
  maxPendingHostCallBytes: LIMITS.maxPendingHostCallBytes,
  maxPendingHostCalls: LIMITS.maxPendingHostCalls,
});

/** No tools unless a request's policy names them. */
const DEFAULT_TOOL_POLICY = Object.freeze({ allowedTools: Object.freeze([]) });

const ISOLATE_LIMIT_KEYS = ['memoryMb', 'cpuTimeMs', 'wallTimeMs'];
const BRIDGE_LIMIT_KEYS = Object.keys(DEFAULT_BRIDGE_LIMITS);

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function checkLimits(where, value, keys) {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw new SandboxValidationError(`${where} must be an object`);
  const out = {};
  for (const key of Object.keys(value)) {
    if (!keys.includes(key)) throw new SandboxValidationError(`${where}.${key} is not a known limit (known: ${keys.join(', ')})`);
    const v = value[key];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
      throw new SandboxValidationError(`${where}.${key} must be a non-negative whole number, got ${String(v)}`);
    }
    out[key] = v;
  }
  return out;
}

/**
 * The limits a request gets when it names none. `memoryMb` is the engine's per-isolate
 * memory (its warm isolates have it): it wins over `defaultIsolateLimits.memoryMb`, which
 * the seed's own pattern (`defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS`) sets to 128.
 */
function isolateDefaults(config) {
  const given = checkLimits('defaultIsolateLimits', config.defaultIsolateLimits, ISOLATE_LIMIT_KEYS);
  const memoryMb = config.memoryMb ?? given.memoryMb ?? DEFAULT_MEMORY_MB;
  return { ...DEFAULT_ISOLATE_LIMITS, ...given, memoryMb };
}

function checkToolPolicy(policy, tools) {
  if (policy === undefined) return { allowedTools: DEFAULT_TOOL_POLICY.allowedTools, maxCallsPerTool: {} };
  if (!isPlainObject(policy)) throw new SandboxValidationError('toolPolicy must be an object');
  const allowed = policy.allowedTools ?? [];
  if (!Array.isArray(allowed) || allowed.some((t) => typeof t !== 'string')) {
    throw new SandboxValidationError('toolPolicy.allowedTools must be an array of tool names');
  }
  for (const name of allowed) {
    if (!tools.names.includes(name)) {
      throw new SandboxValidationError(`toolPolicy allows unknown tool "${name}" (registered: ${tools.names.join(', ') || 'none'})`);
    }
  }
  const maxCalls = policy.maxCallsPerTool ?? {};
  if (!isPlainObject(maxCalls)) throw new SandboxValidationError('toolPolicy.maxCallsPerTool must be an object');
  for (const [name, n] of Object.entries(maxCalls)) {
    if (!Number.isInteger(n) || n < 0) throw new SandboxValidationError(`toolPolicy.maxCallsPerTool.${name} must be a non-negative whole number`);
  }
  return { allowedTools: allowed, maxCallsPerTool: maxCalls };
}

function mergeTools(a, b) {
  const handlers = Object.assign(Object.create(null), a.handlers, b.handlers);
  return { names: [...a.names, ...b.names], handlers, entries: [...a.entries, ...b.entries] };
}

function toBytes(source, name) {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  throw new SandboxValidationError(`wasmModules["${name}"].source must be a Uint8Array or ArrayBuffer`);
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
    let resolveDone;
    /** Resolves with the final `result` or `error` event. */
    this.done = new Promise((r) => {
      resolveDone = r;
    });
    this._resolveDone = resolveDone;
  }

  _emit(event) {
    if (this._closed) return;
    const full = { ...event, requestId: this.requestId, at: this._clock() };
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

  /** Answers a `dataRequest` event. Throws SandboxValidationError for an unknown id. */
  respond(id, value) {
    let bytes;
    try {
      bytes = serialize(value);
    } catch (err) {
      throw new SandboxValidationError(`respond(${id}): value cannot be copied into the sandbox: ${err.message}`);
    }
    const max = this._maxMessageBytes;
    if (bytes.length > max) {
      throw new SandboxValidationError(`respond(${id}): value is ${bytes.length} bytes, over maxMessageBytes (${max})`);
    }
    this._answer(id, bytes, undefined);
  }

  /** Fails a `dataRequest`: the read throws an Error with `message` in the sandbox. */
  reject(id, message = 'data request rejected') {
    this._answer(id, undefined, String(message));
  }

  _answer(id, bytes, error) {
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

class SandboxEngine {
  /**
   * @param {object} config SandboxEngineConfig
   * @param {object} [deps] { clock?: () => number, idGenerator?: () => string, logger? }
   */
  constructor(config, deps = {}) {
    if (!isPlainObject(config)) throw new SandboxValidationError('SandboxEngine config must be an object');
    if (!isPlainObject(deps)) throw new SandboxValidationError('SandboxEngine deps must be an object');
    const num = (key, def, min) => {
      const v = config[key] ?? def;
      if (!Number.isInteger(v) || v < min) throw new SandboxValidationError(`${key} must be a whole number >= ${min}, got ${String(v)}`);
      return v;
    };
    const isolateLimits = isolateDefaults(config);
    this._config = {
      // Warm isolates are made with the memory requests get by default.
      memoryMb: num('memoryMb', isolateLimits.memoryMb, 8),
      maxConcurrentIsolates: num('maxConcurrentIsolates', 4, 1),
      warmPoolSize: num('warmPoolSize', 0, 0),
      maxQueueSize: num('maxQueueSize', 1000, 0),
      processes: num('processes', DEFAULT_PROCESSES, 1),
      defaultIsolateLimits: isolateLimits,
      defaultBridgeLimits: { ...DEFAULT_BRIDGE_LIMITS, ...checkLimits('defaultBridgeLimits', config.defaultBridgeLimits, BRIDGE_LIMIT_KEYS) },
    };
    const badIsolation = checkIsolation(config.isolation);
    if (badIsolation) throw new SandboxValidationError(badIsolation);
    this._isolation = config.isolation ?? DEFAULT_ISOLATION;
    const wasm = config.wasmModules ?? [];
    if (!Array.isArray(wasm)) throw new SandboxValidationError('wasmModules must be an array');
    this._wasmConfig = wasm;
    // Functions, described tools and namespaces, by the name the sandbox calls.
    this._tools = normalizeTools(config.tools ?? {}, 'tools');
    this._clock = deps.clock ?? Date.now;
    let n = 0;
    this._nextId = deps.idGenerator ?? (() => `session_${++n}`);
    this._logger = deps.logger ?? null;
    this._native = null;
    this._wasm = [];
    this._state = 'created';
  }

  /** Compiles the WASM modules once and warms the isolate pool. Idempotent. */
  async init() {
    if (this._state === 'ready') return;
    if (this._state === 'shutdown') throw new SandboxAbortedError('The sandbox engine is shut down');
    const seen = new Set();
    const modules = [];
    for (const m of this._wasmConfig) {
      if (!isPlainObject(m) || typeof m.name !== 'string' || !/^[A-Za-z_$][\w$]*$/.test(m.name)) {
        throw new SandboxValidationError('each wasmModules entry needs a name that is a JavaScript identifier');
      }
      if (seen.has(m.name)) throw new SandboxValidationError(`duplicate wasm module name "${m.name}"`);
      seen.add(m.name);
      const bytes = toBytes(m.source, m.name);
      try {
        // Checked here without compiling (well-formed, no imports, memory within a run's
        // budget: isolet-core wasm); compiled once by setWasmModules below.
        native.checkWasmModule(m.name, Buffer.from(bytes), this._config.memoryMb);
      } catch (err) {
        throw new SandboxValidationError(err.message);
      }
      modules.push({ name: m.name, bytes: Buffer.from(bytes) });
    }
    this._wasm = modules;
    try {
      this._native = createBackend({
        isolation: this._isolation,
        memoryMb: this._config.memoryMb,
        maxConcurrentIsolates: this._config.maxConcurrentIsolates,
        warmPoolSize: this._config.warmPoolSize,
        maxQueueSize: this._config.maxQueueSize,
        processes: this._config.processes,
      });
    } catch (err) {
      throw new SandboxValidationError(err.message);
    }
    try {
      // Compiles each module exactly once (in a sandbox host process, there).
      await this._native.setWasmModules(this._wasm);
    } catch (err) {
      throw new SandboxValidationError(err.message);
    }
    this._native.warmUp();
    // Process isolation: ready means the sandbox host processes are up.
    if (typeof this._native.ready === 'function') await this._native.ready();
    this._state = 'ready';
    this._log('info', `isolet engine ready (${this._isolation} isolation): ${this._config.warmPoolSize} warm, ${this._config.maxConcurrentIsolates} concurrent`);
  }

  /** Starts an execution; returns its session at once (never throws). */
  submit(request) {
    const requestId = isPlainObject(request) && typeof request.requestId === 'string' ? request.requestId : this._nextId();
    const session = new SandboxSession(requestId, this._clock);
    const fail = (error) => {
      session._emit({ type: 'error', error, message: error.message, stats: { wallTimeMs: 0, cpuTimeMs: 0, heapUsedBytes: 0 } });
      return session;
    };
    if (this._state === 'shutdown') return fail(new SandboxAbortedError('The sandbox engine is shut down'));
    if (this._state !== 'ready') return fail(new SandboxError('SandboxEngine.init() has not completed', { code: 'ERR_ISOLET_NOT_READY' }));
    let spec;
    try {
      spec = this._requestSpec(request);
    } catch (err) {
      return fail(err instanceof SandboxValidationError ? err : new SandboxValidationError(err.message));
    }
    session._maxMessageBytes = spec.bridge.maxMessageBytes;
    session._emit({ type: 'status', status: 'queued', message: 'queued' });

    const calls = new Map();
    const policy = spec.policy;
    const deny = (name) => {
      // A request's own tools were handed over by the requester: allowed, still counted.
      if (!spec.ownTools.has(name) && !policy.allowedTools.includes(name)) return `tool "${name}" is not allowed by this request's toolPolicy`;
      const max = policy.maxCallsPerTool[name];
      const used = (calls.get(name) ?? 0) + 1;
      calls.set(name, used);
      if (max !== undefined && used > max) return `tool "${name}" exceeded its limit of ${max} calls`;
      return undefined;
    };
    const { done, handle } = execute(this._native, spec.native, {
      handlers: spec.handlers,
      deny,
      maxMessageBytes: spec.bridge.maxMessageBytes,
      onEvent: (ev) => {
        if (ev.type === 'started') session._emit({ type: 'status', status: 'started', message: 'started' });
        else if (ev.type === 'console') session._emit({ type: 'status', status: 'console', level: ev.level, message: ev.message });
        else if (ev.type === 'dataRequest') session._emit({ type: 'dataRequest', id: ev.id, key: ev.key });
      },
    });
    session._handle = handle;
    if (session._aborted && handle) handle.abort();
    done.then((r) => {
      session._emit({ type: 'status', status: 'finished', message: r.ok ? 'finished' : `failed: ${r.error.name}` });
      if (r.ok) session._emit({ type: 'result', data: r.value, stats: r.stats, logs: r.logs });
      else session._emit({ type: 'error', error: r.error, message: r.error.message, stats: r.stats, logs: r.logs });
    });
    return session;
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
      return { warm: 0, warming: 0, busy: 0, queued: 0, completed: 0, failed: {}, warmStarts: 0, coldStarts: 0, threads: 0, quarantined: 0, isolation: this._isolation };
    }
    const s = this._native.stats();
    return { ...s, failed: { ...s.failed }, isolation: this._isolation };
  }

  _requestSpec(request) {
    if (!isPlainObject(request)) throw new SandboxValidationError('request must be an object');
    if (typeof request.code !== 'string') throw new SandboxValidationError('request.code must be a string');
    const code = toJavaScript(request.code, { language: checkLanguage(request.language, 'request.language'), asyncBody: true });
    const limits = { ...this._config.defaultIsolateLimits, ...checkLimits('isolateLimits', request.isolateLimits, ISOLATE_LIMIT_KEYS) };
    const bridge = { ...this._config.defaultBridgeLimits, ...checkLimits('bridgeLimits', request.bridgeLimits, BRIDGE_LIMIT_KEYS) };
    const own = normalizeTools(request.tools, 'request.tools');
    for (const name of own.names) {
      if (this._tools.names.includes(name)) throw new SandboxValidationError(`request.tools.${name} clashes with the engine tool of that name`);
    }
    const tools = own.names.length === 0 ? this._tools : mergeTools(this._tools, own);
    const policy = checkToolPolicy(request.toolPolicy, tools);
    let dataValues;
    if (request.data !== undefined) {
      if (!isPlainObject(request.data)) throw new SandboxValidationError('request.data must be an object');
      // No prototype: a key named `__proto__` is stored like any other.
      dataValues = Object.create(null);
      for (const [key, value] of Object.entries(request.data)) {
        try {
          dataValues[key] = serialize(value);
        } catch (err) {
          throw new SandboxValidationError(`request.data.${key} cannot be copied into the sandbox: ${err.message}`);
        }
      }
    }
    return {
      bridge,
      policy,
      handlers: tools.handlers,
      ownTools: new Set(own.names),
      native: {
        code,
        mode: 'asyncBody',
        memoryMb: limits.memoryMb,
        timeoutMs: limits.wallTimeMs,
        cpuTimeMs: limits.cpuTimeMs,
        maxMessageBytes: bridge.maxMessageBytes,
        maxMessages: bridge.maxMessages,
        maxOutputBytes: bridge.maxOutputBytes,
        maxLogEntries: bridge.maxLogEntries,
        maxLogBytes: bridge.maxLogBytes,
        maxPendingHostCallBytes: bridge.maxPendingHostCallBytes,
        maxPendingHostCalls: bridge.maxPendingHostCalls,
        capabilities: tools.names,
        dataObject: true,
        dataValues,
        wasm: this._wasm.length > 0,
        streamConsole: true,
      },
    };
  }

  _log(level, message) {
    if (this._logger && typeof this._logger[level] === 'function') this._logger[level](message);
  }
}

module.exports = {
  SandboxEngine,
  SandboxSession,
  DEFAULT_MEMORY_MB,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  DEFAULT_TOOL_POLICY,
};
