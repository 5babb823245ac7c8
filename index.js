'use strict';
// isolet: run untrusted JavaScript in bare V8 isolates.
const native = require('./lib/native');
const { runSandbox } = require('./lib/run-sandbox');
const errors = require('./lib/errors');

const {
  SandboxError,
  SandboxTimeoutError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxValidationError,
  SandboxAbortedError,
} = errors;

/** Versions this binary runs on. */
const runtime = Object.freeze({ ...native.info });

/** Process-wide isolate thread counts (for leak checks and monitoring). */
function processStats() {
  return native.processStats();
}

module.exports = {
  runSandbox,
  SandboxError,
  SandboxTimeoutError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxValidationError,
  SandboxAbortedError,
  runtime,
  processStats,
};
