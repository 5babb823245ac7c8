'use strict';
// runSandbox: drop-in replacement for @azmr/ai's, as a thin call into a default engine.
const os = require('node:os');
const native = require('./native');
const { execute, EMPTY_STATS } = require('./execute');
const { SandboxValidationError, SandboxAbortedError, errorFromThrown } = require('./errors');
const { normalizeTools } = require('./tools');
const { stripTypes } = require('./typescript');
const { own } = require('./own');

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

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Checks `code` and `options` (natively, under the option names) and returns the run's
 * plan and host functions. Only type shaping happens here: capabilities become names and
 * handlers, the signal is checked to be an AbortSignal. TypeScript is stripped later.
 */
function planOf(code, options) {
  let tools = { names: [], handlers: Object.create(null) };
  let shaped = options;
  if (isPlainObject(options)) {
    // Own properties only: a `capabilities` or `signal` on Object.prototype is no option.
    const signal = own(options, 'signal');
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new SandboxValidationError(`signal must be an AbortSignal, got ${signal === null ? 'null' : typeof signal}`);
    }
    const capabilities = own(options, 'capabilities');
    if (capabilities !== undefined) tools = normalizeTools(capabilities);
    shaped = { ...options, signal: undefined, capabilities: capabilities === undefined ? undefined : tools.names };
  }
  return { plan: native.planRun(code, shaped), handlers: tools.handlers };
}

/**
 * Runs untrusted code in a fresh V8 isolate. Resolves with a result record and never
 * rejects: every failure (including invalid input) is `{ success: false, error }`.
 */
async function runSandbox(code, options = undefined) {
  let planned;
  try {
    planned = planOf(code, options);
    const plan = planned.plan;
    if (plan.language === 'typescript') {
      // Large input is stripped on a worker thread, within the run's wall-clock limit.
      plan.code = await stripTypes(plan.code, { language: 'typescript', asyncBody: plan.mode === 'asyncBody', timeoutMs: plan.wallTimeMs });
    }
  } catch (err) {
    return failure(errorFromThrown(err));
  }
  const { plan, handlers } = planned;
  const signal = isPlainObject(options) ? own(options, 'signal') : undefined;
  if (signal && signal.aborted) return failure(new SandboxAbortedError('Execution was aborted before it started'));
  const { done, handle } = execute(getDefaultEngine(plan.isolation), plan, { handlers });
  if (!signal) return record(await done);
  const onAbort = () => handle && handle.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return record(await done);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** runSandbox's result record of an `execute` result. */
function record(r) {
  return r.ok ? { success: true, output: r.value, stats: r.stats, logs: r.logs } : { success: false, error: r.error, stats: r.stats, logs: r.logs };
}

function failure(error) {
  return { success: false, error, stats: { ...EMPTY_STATS }, logs: [] };
}

module.exports = { runSandbox, getDefaultEngine, RUN_SANDBOX_DEFAULTS };
