'use strict';
// isolet: run untrusted JavaScript in bare V8 isolates.
// Public API: see index.d.ts and README.md. Each export is listed once, as
// `exports.name = ...`, so Node's ESM loader can see the named exports.
const native = require('./lib/native');
const runSandbox = require('./lib/run-sandbox');
const engine = require('./lib/engine');
const errors = require('./lib/errors');
const autofix = require('./lib/autofix');

exports.runSandbox = runSandbox.runSandbox;
exports.RUN_SANDBOX_DEFAULTS = runSandbox.RUN_SANDBOX_DEFAULTS;

exports.describeTools = require('./lib/tools').describeTools;

exports.createFileReadCapability = require('./lib/capabilities/file-read').createFileReadCapability;
exports.createFetchCapability = require('./lib/capabilities/fetch').createFetchCapability;
exports.currentRun = require('./lib/run-context').currentRun;

exports.createSandbox = require('./lib/sandbox').createSandbox;
exports.Sandbox = require('./lib/sandbox').Sandbox;

exports.SandboxEngine = engine.SandboxEngine;
exports.SandboxSession = engine.SandboxSession;
exports.DEFAULT_MEMORY_MB = engine.DEFAULT_MEMORY_MB;
exports.DEFAULT_ISOLATE_LIMITS = engine.DEFAULT_ISOLATE_LIMITS;
exports.DEFAULT_BRIDGE_LIMITS = engine.DEFAULT_BRIDGE_LIMITS;
exports.DEFAULT_TOOL_POLICY = engine.DEFAULT_TOOL_POLICY;

exports.SandboxError = errors.SandboxError;
exports.SandboxTimeoutError = errors.SandboxTimeoutError;
exports.SandboxOOMError = errors.SandboxOOMError;
exports.SandboxRuntimeError = errors.SandboxRuntimeError;
exports.SandboxValidationError = errors.SandboxValidationError;
exports.SandboxAbortedError = errors.SandboxAbortedError;

exports.autoFix = autofix.autoFix;
exports.unifiedDiff = autofix.unifiedDiff;
exports.extractCode = autofix.extractCode;
exports.AutoFixOptionsError = autofix.AutoFixOptionsError;
exports.AutoFixAuditError = autofix.AutoFixAuditError;
exports.AUTOFIX_STATUSES = autofix.AUTOFIX_STATUSES;
exports.AUTOFIX_FAILURE_REASONS = autofix.AUTOFIX_FAILURE_REASONS;
exports.DEFAULT_AUTOFIX_MODEL = autofix.DEFAULT_AUTOFIX_MODEL;
exports.DEFAULT_AUDIT_LOG_NAME = autofix.DEFAULT_AUDIT_LOG_NAME;

/** Versions this binary runs on: V8, and the Node it was built for. */
exports.runtime = Object.freeze({ ...native.info });

/** Isolate threads of this process, and sandbox host processes it supervises. */
exports.processStats = () => ({ ...native.processStats() });
