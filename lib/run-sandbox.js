'use strict';
// runSandbox: drop-in replacement for @azmr/ai's, as a thin call into a default engine.
const os = require('node:os');
const native = require('./native');
const { execute, EMPTY_STATS } = require('./execute');
const { SandboxValidationError, SandboxAbortedError, errorFromThrown } = require('./errors');
const { normalizeTools, useWebFetch } = require('./tools');
const { preparePlan, returnHint } = require('./source');
const { remapResult } = require('./positions');
const { isPlainObject, describeThrown } = require('./own');
const { readOptions } = require('./read-options');

const DEFAULTS = native.optionDefaults();

/** Defaults of the @azmr/ai seed (isolet-core's option table). */
const RUN_SANDBOX_DEFAULTS = Object.freeze({
  memoryLimitMb: DEFAULTS.runSandbox.memoryLimitMb,
  timeoutMs: DEFAULTS.runSandbox.timeoutMs,
});

/** The engines behind runSandbox, one per isolation mode, created on first use. */
const defaultEngines = new Map();

/** Two warm 64 MB isolates; in process mode spread over the default number of hosts. */
function getDefaultEngine(isolation = DEFAULTS.isolation) {
  let engine = defaultEngines.get(isolation);
  if (engine === undefined) {
    const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
    const settings = new native.EngineSettings({
      isolation,
      memoryMb: RUN_SANDBOX_DEFAULTS.memoryLimitMb,
      maxConcurrentIsolates: Math.min(1024, Math.max(8, cores * 4)),
      warmPoolSize: 2,
      maxQueueSize: 100000,
    });
    engine = new native.NativeEngine(settings);
    engine.warmUp();
    defaultEngines.set(isolation, engine);
  }
  return engine;
}

// Taken at load, so neither the signal's own properties nor later tampering decide them:
// the `aborted` getter is AbortSignal's brand check (a look-alike fails it), and the
// listener methods are EventTarget's.
const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted').get;
const addListener = EventTarget.prototype.addEventListener;
const removeListener = EventTarget.prototype.removeEventListener;

/** Whether `signal` (an option) has aborted; a SandboxValidationError if it is no AbortSignal. */
function signalAborted(signal) {
  try {
    return abortedOf.call(signal) === true;
  } catch {
    throw new SandboxValidationError(`signal must be an AbortSignal, got ${signal === null ? 'null' : typeof signal}`);
  }
}

/**
 * Checks `code` and `options` (natively, under the option names) and returns the run's
 * plan and host functions. Only type shaping happens here: capabilities become names and
 * handlers, the signal is checked to be an AbortSignal. TypeScript is stripped later.
 */
function planOf(code, options) {
  let tools = { names: [], handlers: Object.create(null) };
  let shaped = options;
  let signal;
  let resolve;
  if (isPlainObject(options)) {
    // Read once, own properties only: a `capabilities` or `signal` on Object.prototype is
    // no option, and a getter that throws names its option.
    shaped = readOptions(options, 'runSandbox options', '');
    signal = shaped.signal;
    if (signal !== undefined) signalAborted(signal);
    const capabilities = shaped.capabilities;
    if (capabilities !== undefined) tools = normalizeTools(capabilities);
    shaped.signal = undefined;
    shaped.capabilities = capabilities === undefined ? undefined : tools.names;
    // Checked natively to be a function (or absent); called by execute for imports.
    resolve = shaped.resolve;
  }
  const plan = native.planRun(code, shaped);
  return { plan, handlers: useWebFetch(plan, tools.handlers, tools.webFetch), signal, resolve };
}

/**
 * Runs untrusted code in a fresh V8 isolate. Resolves with a result record and never
 * rejects: every failure (including invalid input) is `{ success: false, error }`.
 */
async function runSandbox(code, options = undefined) {
  let handle = null;
  let aborted = false;
  const onAbort = () => {
    aborted = true;
    if (handle) handle.abort();
  };
  let signal;
  let listening = false;
  let done;
  // Where the code the run compiles came from, when compiling TypeScript moved it.
  let map = [];
  // An async body (capabilities given) may get the return hint.
  let body = null;
  try {
    const planned = planOf(code, options);
    const plan = planned.plan;
    if (plan.mode === 'asyncBody') body = { language: plan.language, timeoutMs: plan.wallTimeMs };
    if (plan.stripsTypes) {
      // Large input is prepared on a worker thread, within the run's wall-clock limit.
      map = await preparePlan(plan);
    }
    signal = planned.signal;
    if (signal !== undefined) {
      // A signal given as a Proxy runs its traps here: any throw is a bad signal.
      try {
        addListener.call(signal, 'abort', onAbort, { once: true });
      } catch (err) {
        throw new SandboxValidationError(`signal must be an AbortSignal: adding a listener threw ${describeThrown(err)}`);
      }
      listening = true;
      if (signalAborted(signal)) aborted = true;
    }
    if (aborted) {
      unlisten(signal, onAbort, listening);
      return failure(new SandboxAbortedError('Execution was aborted before it started'));
    }
    ({ done, handle } = execute(getDefaultEngine(plan.isolation), plan, { handlers: planned.handlers, resolve: planned.resolve }));
  } catch (err) {
    unlisten(signal, onAbort, listening);
    return failure(errorFromThrown(err));
  }
  try {
    const r = remapResult(await done, map);
    if (body !== null && r.ok && r.value === undefined) {
      const hint = await returnHint(code, body.language, body.timeoutMs);
      if (hint !== null) r.logs = [...r.logs, hint];
    }
    return record(r);
  } finally {
    unlisten(signal, onAbort, listening);
  }
}

/** Removes the abort listener; a signal whose traps throw cannot make the run fail now. */
function unlisten(signal, onAbort, listening) {
  if (!listening) return;
  try {
    removeListener.call(signal, 'abort', onAbort);
  } catch {
    // The listener is `once` and the run is over: nothing is left for it to do.
  }
}

/** runSandbox's result record of an `execute` result. */
function record(r) {
  return r.ok ? { success: true, output: r.value, stats: r.stats, logs: r.logs } : { success: false, error: r.error, stats: r.stats, logs: r.logs };
}

function failure(error) {
  return { success: false, error, stats: { ...EMPTY_STATS }, logs: [] };
}

module.exports = { runSandbox, getDefaultEngine, unlisten, RUN_SANDBOX_DEFAULTS };
