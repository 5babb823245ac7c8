'use strict';
// runSandbox: drop-in replacement for @azmr/ai's, as a thin call into a default engine.
const os = require('node:os');
const native = require('./native');
const { execute, EMPTY_STATS } = require('./execute');
const { SandboxError, SandboxValidationError, SandboxAbortedError } = require('./errors');
const { createBackend, checkIsolation, DEFAULT_ISOLATION } = require('./backend');
const { normalizeTools } = require('./tools');
const { checkLanguage, toJavaScript } = require('./typescript');

/** Defaults of the @azmr/ai seed. */
const RUN_SANDBOX_DEFAULTS = Object.freeze({
  memoryLimitMb: native.defaults().runMemoryMb,
  timeoutMs: native.defaults().wallTimeMs,
});

const NUMERIC_OPTIONS = ['memoryLimitMb', 'timeoutMs', 'cpuTimeMs', 'maxOutputBytes', 'maxMessageBytes', 'maxHostCalls', 'maxLogEntries', 'maxLogBytes', 'maxPendingHostCallBytes', 'maxPendingHostCalls'];

/** The engines behind runSandbox, one per isolation mode, created on first use. */
const defaultEngines = new Map();

/** Two warm 64 MB isolates; in process mode spread over the default number of hosts. */
function getDefaultEngine(isolation = DEFAULT_ISOLATION) {
  let engine = defaultEngines.get(isolation);
  if (engine === undefined) {
    const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
    engine = createBackend({
      isolation,
      memoryMb: RUN_SANDBOX_DEFAULTS.memoryLimitMb,
      maxConcurrentIsolates: Math.max(8, cores * 4),
      warmPoolSize: 2,
      maxQueueSize: 100000,
    });
    engine.warmUp();
    defaultEngines.set(isolation, engine);
  }
  return engine;
}

function validate(code, options) {
  if (typeof code !== 'string') return `code must be a string, got ${code === null ? 'null' : typeof code}`;
  if (options === undefined) return null;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) return 'options must be an object';
  for (const key of NUMERIC_OPTIONS) {
    const v = options[key];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || !Number.isInteger(v))) {
      return `${key} must be a positive whole number, got ${String(v)}`;
    }
  }
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) return 'signal must be an AbortSignal';
  return checkIsolation(options.isolation);
}

/**
 * Runs untrusted code in a fresh V8 isolate. Resolves with a result record and never
 * rejects: every failure (including invalid input) is `{ success: false, error }`.
 */
async function runSandbox(code, options = undefined) {
  const invalid = validate(code, options);
  if (invalid) return failure(new SandboxValidationError(invalid));
  const opts = options || {};
  const signal = opts.signal;
  if (signal && signal.aborted) return failure(new SandboxAbortedError('Execution was aborted before it started'));

  const capabilities = opts.capabilities;
  let tools;
  let source;
  try {
    tools = normalizeTools(capabilities);
    source = toJavaScript(code, { language: checkLanguage(opts.language), asyncBody: capabilities !== undefined });
  } catch (err) {
    return failure(err instanceof SandboxError ? err : new SandboxError(err.message));
  }
  const request = {
    code: source,
    mode: capabilities ? 'asyncBody' : 'script',
    memoryMb: opts.memoryLimitMb ?? RUN_SANDBOX_DEFAULTS.memoryLimitMb,
    timeoutMs: opts.timeoutMs ?? RUN_SANDBOX_DEFAULTS.timeoutMs,
    cpuTimeMs: opts.cpuTimeMs,
    maxOutputBytes: opts.maxOutputBytes,
    maxMessageBytes: opts.maxMessageBytes,
    maxMessages: opts.maxHostCalls,
    maxLogEntries: opts.maxLogEntries,
    maxLogBytes: opts.maxLogBytes,
    maxPendingHostCallBytes: opts.maxPendingHostCallBytes,
    maxPendingHostCalls: opts.maxPendingHostCalls,
    capabilities: tools.names,
  };
  const { done, handle } = execute(getDefaultEngine(opts.isolation), request, {
    handlers: tools.handlers,
    maxMessageBytes: opts.maxMessageBytes,
  });
  const onAbort = () => handle && handle.abort();
  if (signal) signal.addEventListener('abort', onAbort, { once: true });
  try {
    const r = await done;
    return r.ok
      ? { success: true, output: r.value, stats: r.stats, logs: r.logs }
      : { success: false, error: r.error, stats: r.stats, logs: r.logs };
  } finally {
    if (signal) signal.removeEventListener('abort', onAbort);
  }
}

function failure(error) {
  return { success: false, error, stats: { ...EMPTY_STATS }, logs: [] };
}

module.exports = { runSandbox, getDefaultEngine, RUN_SANDBOX_DEFAULTS };
