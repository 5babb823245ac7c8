'use strict';
// The two isolation backends behind one interface (`submit`, `stats`, `shutdown`,
// `waitIdle`, `warmUp`, `setWasmModules`): isolates on threads of this process, or in
// supervised sandbox host processes. runSandbox and SandboxEngine choose here.
const native = require('./native');
const { ProcessEngine } = require('./supervisor/process-engine');

const ISOLATION_MODES = Object.freeze(['process', 'thread']);
/** isolet's promise is safety: child processes unless a caller opts into threads. */
const DEFAULT_ISOLATION = 'process';
/** Sandbox host processes per engine: one spare while another is replaced; each idle
 *  host holds 43-50 MB resident (see README, "Security model"). */
const DEFAULT_PROCESSES = 2;

/** Error text for a bad `isolation` value, or null. */
function checkIsolation(value, where = 'isolation') {
  if (value === undefined || ISOLATION_MODES.includes(value)) return null;
  return `${where} must be 'process' or 'thread', got ${typeof value === 'string' ? `'${value}'` : String(value)}`;
}

/**
 * @param {object} o
 * @param {'process' | 'thread'} o.isolation
 * @param {number} o.memoryMb
 * @param {number} o.maxConcurrentIsolates
 * @param {number} o.warmPoolSize
 * @param {number} o.maxQueueSize
 * @param {number} [o.processes]
 */
function createBackend(o) {
  const options = {
    memoryMb: o.memoryMb,
    maxConcurrentIsolates: o.maxConcurrentIsolates,
    warmPoolSize: o.warmPoolSize,
    maxQueueSize: o.maxQueueSize,
  };
  // Rust validates the engine options (even for the process backend, whose children
  // build the same native engine from them), so a bad value fails here, not in a child.
  const threads = new native.NativeEngine(options);
  if (o.isolation === 'thread') return threads;
  return new ProcessEngine({
    ...options,
    processes: o.processes ?? DEFAULT_PROCESSES,
    defaultWallTimeMs: native.defaults().wallTimeMs,
  });
}

module.exports = { createBackend, checkIsolation, ISOLATION_MODES, DEFAULT_ISOLATION, DEFAULT_PROCESSES };
