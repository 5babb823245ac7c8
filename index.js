'use strict';
// isolet: run untrusted JavaScript in bare V8 isolates.
// Public API: see index.d.ts and README.md.
const native = require('./lib/native');
const { runSandbox, RUN_SANDBOX_DEFAULTS } = require('./lib/run-sandbox');
const {
  SandboxEngine,
  SandboxSession,
  DEFAULT_MEMORY_MB,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  DEFAULT_TOOL_POLICY,
} = require('./lib/engine');
const {
  SandboxError,
  SandboxTimeoutError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxValidationError,
  SandboxAbortedError,
} = require('./lib/errors');
const { createFileReadCapability } = require('./lib/capabilities/file-read');
const { createFetchCapability } = require('./lib/capabilities/fetch');
const {
  autoFix,
  unifiedDiff,
  extractCode,
  AutoFixOptionsError,
  AutoFixAuditError,
  AUTOFIX_STATUSES,
  AUTOFIX_FAILURE_REASONS,
  DEFAULT_AUTOFIX_MODEL,
  DEFAULT_AUDIT_LOG_NAME,
} = require('./lib/autofix');

/** Versions this binary runs on: V8, and the Node it was built for. */
const runtime = Object.freeze({ ...native.info });

/** Process-wide isolate thread counts (for leak checks and monitoring). */
function processStats() {
  return native.processStats();
}

module.exports = {
  runSandbox,
  RUN_SANDBOX_DEFAULTS,
  createFileReadCapability,
  createFetchCapability,
  SandboxEngine,
  SandboxSession,
  DEFAULT_MEMORY_MB,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  DEFAULT_TOOL_POLICY,
  SandboxError,
  SandboxTimeoutError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxValidationError,
  SandboxAbortedError,
  autoFix,
  unifiedDiff,
  extractCode,
  AutoFixOptionsError,
  AutoFixAuditError,
  AUTOFIX_STATUSES,
  AUTOFIX_FAILURE_REASONS,
  DEFAULT_AUTOFIX_MODEL,
  DEFAULT_AUDIT_LOG_NAME,
  runtime,
  processStats,
};
