'use strict';
// runSandbox: drop-in replacement for @azmr/ai's, as a thin call into a default engine.
const os = require('node:os');
const native = require('./native');
const { execute, EMPTY_STATS } = require('./execute');
const { SandboxValidationError, SandboxAbortedError } = require('./errors');

/** Defaults of the @azmr/ai seed. */
const RUN_SANDBOX_DEFAULTS = Object.freeze({
  memoryLimitMb: native.defaults().runMemoryMb,
  timeoutMs: native.defaults().wallTimeMs,
});

const NUMERIC_OPTIONS = ['memoryLimitMb', 'timeoutMs', 'cpuTimeMs', 'maxOutputBytes', 'maxMessageBytes', 'maxHostCalls', 'maxLogEntries', 'maxLogBytes', 'maxPendingHostCallBytes', 'maxPendingHostCalls'];

let defaultEngine = null;

/** The engine behind runSandbox: created on first use, two warm 64 MB isolates. */
function getDefaultEngine() {
  if (defaultEngine === null) {
    const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
    defaultEngine = new native.NativeEngine({
      memoryMb: RUN_SANDBOX_DEFAULTS.memoryLimitMb,
      maxConcurrentIsolates: Math.max(8, cores * 4),
      warmPoolSize: 2,
      maxQueueSize: 100000,
    });
    defaultEngine.warmUp();
  }
  return defaultEngine;
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
  const caps = options.capabilities;
  if (caps !== undefined) {
    if (caps === null || typeof caps !== 'object' || Array.isArray(caps)) return 'capabilities must be an object of functions';
    for (const [name, fn] of Object.entries(caps)) {
      if (typeof fn !== 'function') return `capability ${name} must be a function`;
    }
  }
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) return 'signal must be an AbortSignal';
  return null;
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
  const request = {
    code,
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
    capabilities: capabilities ? Object.keys(capabilities) : [],
  };
  const { done, handle } = execute(getDefaultEngine(), request, {
    handlers: capabilities,
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
